"""ControlLoop.reconfigure: run-time changes apply together, at a cycle boundary.

A law and a limits object are swapped as one change while the threaded loop runs; every cycle
checks, from inside the cycle, that the law it calls and the limits it applies belong to the
same generation — a half-applied change would pair generation k's law with k−1's limits.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from fdcontrol import RobotModel, make_mapping
from fdcontrol.control.law import ControlLaw
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME


class TaggedLaw(ControlLaw):
    """The default law, tagged with a generation; records the generation of the limits used with it."""

    def __init__(self, gen: int, loop_ref: list[ControlLoop], seen: list[tuple[int, int]]) -> None:
        super().__init__()
        self.gen, self.loop_ref, self.seen = gen, loop_ref, seen

    def __call__(self, inp):  # type: ignore[override]
        self.seen.append((self.gen, self.loop_ref[0].limits.gen))  # inside the cycle: law and limits now
        return super().__call__(inp)


def tagged_limits(robot: RobotModel, gen: int) -> SafetyLimits:
    lim = SafetyLimits.from_robot(robot)
    lim.gen = gen  # type: ignore[attr-defined]
    return lim


def make(rate: float = 500.0) -> tuple[ControlLoop, list[tuple[int, int]], list[ControlLoop]]:
    robot = RobotModel.load("ur10")
    sim = SimulatedRobot(robot, dt=1 / rate, q0=np.array(HOME["ur10"]))
    ref: list[ControlLoop] = []
    seen: list[tuple[int, int]] = []
    loop = ControlLoop(robot, sim, make_solver(make_mapping("fd", robot)), rate=rate,
                       law=TaggedLaw(0, ref, seen), limits=tagged_limits(robot, 0))
    ref.append(loop)
    return loop, seen, ref


def test_swaps_never_half_applied_in_running_loop() -> None:
    loop, seen, ref = make()
    loop.start()
    try:
        for gen in range(1, 41):
            done = loop.reconfigure(law=TaggedLaw(gen, ref, seen), limits=tagged_limits(loop.robot, gen))
            assert done.wait(2.0)  # applied by the loop thread (not timed: a generous bound)
            cycle = loop.cycle
            time.sleep(0.001 * (gen % 3))
            assert loop.law.gen == gen and loop.limits.gen == gen  # type: ignore[attr-defined]
            assert loop.cycle >= cycle
    finally:
        loop.stop()
    assert len({g for g, _ in seen}) > 30  # most generations ran at least one cycle
    mixed = [(a, b) for a, b in seen if a != b]
    assert not mixed, mixed[:5]


def test_applies_at_the_next_cycle_boundary() -> None:
    """Queued while the thread runs; applied before the cycle after the one in flight."""
    loop, seen, ref = make()
    loop.start()
    try:
        time.sleep(0.05)
        for k in range(20):
            done = loop.reconfigure(command_timeout=0.25 + 0.1 * k, law=TaggedLaw(1000 + k, ref, seen))
            assert done.wait(2.0)
            assert loop.command_timeout == 0.25 + 0.1 * k
            assert 0 <= done.applied_cycle - done.queued_cycle <= 1  # type: ignore[attr-defined]
            time.sleep(0.0007 * k)
    finally:
        loop.stop()
    assert any(g >= 1000 for g, _ in seen)


def test_applies_immediately_when_not_running_and_checks_names() -> None:
    loop, _, _ = make()
    done = loop.reconfigure(max_force=100.0, telemetry_decimation=3)
    assert done.is_set() and loop.max_force == 100.0 and loop.telemetry_decimation == 3
    with pytest.raises(ValueError):
        loop.reconfigure(rate=1000.0)  # not a run-time change
    with pytest.raises(ValueError):
        loop.reconfigure(command_timeout=-1.0)
    assert loop.command_timeout != -1.0


def test_reconfigure_from_many_threads_applies_each_change_whole() -> None:
    loop, seen, ref = make()
    loop.start()
    try:
        def worker(base: int) -> None:
            for i in range(10):
                g = base + i
                loop.reconfigure(law=TaggedLaw(g, ref, seen), limits=tagged_limits(loop.robot, g)).wait(2.0)
        threads = [threading.Thread(target=worker, args=(100 * k,)) for k in range(1, 4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.01)
    finally:
        loop.stop()
    assert not [(a, b) for a, b in seen if a != b]


def test_a_batch_built_before_a_rule_fired_is_refused_and_only_that_batch() -> None:
    """``reconfigure(reactions=n)``: a batch built when the rules had fired n times is refused at the
    swap when one has fired since (it would undo the rule's switch); a change queued beside it without
    that guard applies. The order is the loop's own record: the firing's cycle, the refusal's cycle."""
    from fdcontrol.control.reactions import rules_from_config
    from fdcontrol.loop.build import build_loop

    loop = build_loop(driver="simulated")
    rule = {"name": "soften", "signal": "force", "op": ">=", "value": 0.0, "action": "switch",
            "params": {"max_force": 100.0}}  # fires at the first cycle that evaluates it
    seen = loop.task.reactions.count
    loop.start()
    try:
        loop.task.request(None, rules_from_config([rule]))
        deadline = time.monotonic() + 10  # only ends a hung test
        while loop.task.reactions.last is None and time.monotonic() < deadline:  # (set after the count)
            time.sleep(0.001)
        fired = loop.task.reactions.last
        assert fired is not None and fired.rule == "soften"
        guarded = loop.reconfigure(max_force=300.0, reactions=seen)  # built before the firing
        plain = loop.reconfigure(telemetry_decimation=7)
        assert guarded.wait(2.0) and plain.wait(2.0)  # generous bounds: a hung loop only
        # refused at a cycle boundary after the firing: an event's cycle is the count its cycle publishes,
        # which the loop's counter shows from the next boundary on
        assert guarded.refused is fired and guarded.applied_cycle >= fired.cycle
        assert plain.refused is None and loop.telemetry_decimation == 7
        assert loop.max_force == 100.0  # the rule's switch stands
        again = loop.reconfigure(max_force=90.0, reactions=loop.task.reactions.count)
        assert again.wait(2.0) and again.refused is None and loop.max_force == 90.0
    finally:
        loop.stop()
        loop.driver.close()
