"""A stateful property test: sequences of the service's calls on the in-process loop of the MuJoCo arm.

hypothesis's RuleBasedStateMachine draws sequences of run-time PATCHes (valid random values of every
run-time parameter), mode switches, reaction rules, targets, actions, moves (started, then held, held and
released, stopped, cancelled or pushed during), streamed wrenches, zeroing the sensor, hold/release,
stop and hand pushes on the MuJoCo arm (its own physics). The loop is stepped
synchronously on its own clock (``step(now=…)``), as its thread would. After every step the input
ends, and the test checks on the loop's own record:

* with no live input the arm comes to rest within the braking distance of the profile in force when the
  input ended (the larger of the acceleration limit then and the startup limit: fdcontrol.limits.braking),
  after at most the watchdog period: the reference within that distance, the measured arm within it plus
  its servo's lag — unless the tool ran into one of the simulated objects, which then pushes it;
* ``stop`` always reaches rest, within the braking time, and so does a hold (during a move);
* a cycle never raises (the loop thread would record a fault and hold: the process never restarts).

Derandomized, a few short examples: bounded for CI on a loaded machine.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

pytest.importorskip("mujoco")

from fdcontrol.server import runtime as runtime_module
from fdcontrol.server.runtime import ConflictError, PolicyError, Runtime
from fdcontrol.server.settings import PARAMS, Settings
from fdcontrol.server.taskspace import task_call

from .test_params import TASKS, random_value

MODES = ("admittance", "motion", "force", "compliance")
#: run-time parameters a sequence PATCHes (not those that rebuild the loop, not the arm's tasks, not the robot)
NAMES = sorted(n for n, p in PARAMS.items() if p.policy not in ("startup", "stopped") and n not in TASKS)


#: a move's draw: a relative goal, its speed and acceleration scales, whether the operator releases a hold first,
#: the cycles it runs, what comes then (and the hand's push if that is a push)
MOVE = dict(d=st.lists(st.floats(-0.1, 0.1), min_size=3, max_size=3), speed=st.floats(0.1, 1.0),
            acceleration=st.floats(0.1, 1.0), release=st.booleans(), n=st.integers(10, 250),
            then=st.sampled_from(("go on", "hold", "hold and release", "stop", "cancel", "push")),
            push=st.lists(st.floats(-30, 30), min_size=3, max_size=3))


class StopMachine(RuleBasedStateMachine):
    @initialize()
    def build(self) -> None:
        runtime_module.BRAKE_WAIT = 0.0  # the test steps the loop itself: PATCH never waits for a thread
        self.rt = Runtime(Settings(realtime=False))
        self.loop = self.rt.loop
        self.loop._running.set()  # "running" without a thread: the test is its clock
        self.startup = self.rt.startup()
        self.floor = self.loop.braking.floor.copy()
        self.t = 0.0
        self.seq = 0
        self.touched = False  # the tool touched one of the simulated objects (MuJoCo's contacts, ground truth)
        self.steps(5)

    def teardown(self) -> None:
        if hasattr(self, "rt"):
            self.loop._running.clear()
            self.rt.loop.driver.close()

    # ------------------------------------------------------------------ helpers
    def steps(self, n: int, wrench: list[float] | None = None) -> None:
        for _ in range(n):
            if wrench is not None:
                self.loop.set_wrench(wrench, t=self.t)
            self.loop.step(now=self.t)  # never raises: that is the property "the loop never restarts"
            self.t += self.loop.period
            self.touched = self.touched or bool(self.loop.driver.contact_force().any())

    def patch(self, changes: dict) -> None:
        try:
            self.rt.update(changes)
        except (ConflictError, PolicyError, ValueError):
            pass  # refused with a reason, as the API answers 409/422
        self.loop = self.rt.loop

    # ------------------------------------------------------------------ rules
    @rule(data=st.data(), k=st.integers(1, 3))
    def patch_parameters(self, data: st.DataObject, k: int) -> None:
        rnd = data.draw(st.randoms(use_true_random=False))
        current = self.rt.params.model_dump()
        chosen = rnd.sample(NAMES, k)
        self.patch({n: random_value(PARAMS[n], self.startup.get(n, current[n]), rnd) for n in chosen})

    @rule(mode=st.sampled_from(MODES), force=st.floats(-30, 30))
    def switch_mode(self, mode: str, force: float) -> None:
        self.patch({"mode": mode, "force_target": [force, 0.0, 0.0, 0.0, 0.0, 0.0]})

    @rule(mode=st.sampled_from(MODES))
    def rule_switches_mode(self, mode: str) -> None:
        task_call(self.rt, "rules", [{"name": "switch", "signal": "force", "op": ">=", "value": 0.0,
                                      "action": "switch", "mode": mode}])
        self.steps(3)

    @rule(d=st.lists(st.floats(-0.1, 0.1), min_size=3, max_size=3))
    def target(self, d: list[float]) -> None:
        T = self.loop.state.tip_pose.copy()
        T[:3, 3] += d
        try:
            self.loop.set_target(T)
        except ValueError:
            pass  # refused with a reason (422): e.g. within the margin of the simulated arm's start box
        self.steps(100)

    @rule(d=st.lists(st.floats(-0.1, 0.1), min_size=3, max_size=3), step=st.floats(0.02, 0.5))
    def action(self, d: list[float], step: float) -> None:
        T = self.loop.state.tip_pose.copy()
        T[:3, 3] += d
        self.seq += 1
        try:
            self.loop.set_action(T, step, self.seq, t=self.t)
        except ValueError:
            pass  # refused with a reason (422), as a target
        self.steps(100)

    @rule(w=st.lists(st.floats(-60, 60), min_size=3, max_size=3), n=st.integers(20, 150))
    def stream(self, w: list[float], n: int) -> None:
        try:
            self.steps(n, [*w, 0.0, 0.0, 0.0])
        except ValueError:
            pass  # beyond a tightened max_force: refused

    @rule(w=st.lists(st.floats(-40, 40), min_size=3, max_size=3), n=st.integers(20, 150))
    def hand_push(self, w: list[float], n: int) -> None:
        self.loop.driver.set_push([*w, 0.0, 0.0, 0.0])
        self.steps(n)
        self.loop.driver.set_push([0.0] * 6)

    @rule(**MOVE)
    def move(self, d: list[float], speed: float, acceleration: float, release: bool, n: int, then: str,
             push: list[float]) -> None:
        """A move (POST /control/move, relative, Ruckig), and after n cycles of it: it goes on, a hold (the arm
        brakes to rest within the braking time; released, it starts from rest without the move), a stop, a
        cancel (no live input: the invariant's braking), or a hand pushing on the tool meanwhile."""
        loop = self.loop
        if release:
            loop.hold(False)
            self.steps(2)
        try:
            task_call(self.rt, "move", {"position": d, "relative": True, "speed": speed,
                                        "acceleration": acceleration})
        except ValueError as e:  # refused with a reason (422): holding, out of the workspace or the start box
            event(f"move refused: {str(e).split(':')[0]}")
        else:
            event(f"move, then {then}")
        self.steps(n)
        if then in ("hold", "hold and release"):
            loop.hold(True)
            self.brakes_to_rest()
            if then == "hold and release":
                loop.hold(False)  # starts from rest, without the move the hold ended
                self.steps(25)
                assert not loop.qd_ref.any()
                assert loop.task.move is None or not loop.task.move.active
        elif then == "stop":
            self.stop()
        elif then == "cancel":
            task_call(self.rt, "cancel")
            self.steps(2)
        elif then == "push":
            loop.driver.set_push([*push, 0.0, 0.0, 0.0])
            self.steps(50)
            loop.driver.set_push([0.0] * 6)

    def brakes_to_rest(self) -> None:
        """Holding from now: at rest within the braking time of the profile fixed now, the reference's travel
        within its braking distance (a uniform ramp's, two cycles' slack)."""
        loop = self.loop
        v0 = loop.qd_ref.copy()
        tb = float(np.max(np.abs(v0) / np.maximum(loop.limits.max_acceleration, self.floor)))
        travelled, n = np.zeros_like(v0), 0
        while True:
            self.steps(1)
            travelled += np.abs(loop.qd_ref) * loop.period
            n += 1
            if not loop.qd_ref.any():
                break
            assert n * loop.period <= tb + 3 * loop.period, "a hold did not reach rest in its braking time"
        assert np.all(travelled <= np.abs(v0) * (tb / 2 + 2 * loop.period) + 1e-9), (travelled, v0)

    @rule()
    def zero_sensor(self) -> None:
        try:
            self.loop.zero_sensor()
        except ValueError:
            pass  # loaded: refused
        self.steps(2)

    @rule(on=st.booleans())
    def hold(self, on: bool) -> None:
        self.loop.hold(on)
        self.steps(2)

    @rule()
    def stop(self) -> None:
        """The service's stop (request_stop, the shared-memory path): the loop brakes through the limits and,
        at rest, its thread ends the loop itself (_stopped, here as the thread would) — within the braking
        time of the profile fixed when the stop began; then the loop starts again, holding until released."""
        loop = self.loop
        v0 = loop.qd_ref.copy()
        tb = float(np.max(np.abs(v0) / np.maximum(loop.limits.max_acceleration, self.floor)))
        loop.request_stop()
        n = 0
        while True:
            self.steps(1)
            n += 1
            if loop._stop_request and not loop.qd_ref.any():  # the thread's end condition (ControlLoop._run_fixed)
                break
            assert n * loop.period <= tb + 3 * loop.period, "stop did not reach rest in its braking time"
        loop._running.clear()
        loop._stopped()
        assert not loop.state.running and not loop.state.qd_ref.any()
        loop._reset_state()  # as start() does
        loop.fault, loop.fault_at, loop._stop_request = None, math.nan, False
        loop._running.set()
        loop.hold(True)  # a restarted loop holds until released
        self.steps(1)

    # ------------------------------------------------------------------ after every step: the input ends
    @invariant()
    def comes_to_rest_within_the_braking_distance(self) -> None:
        if not hasattr(self, "loop"):
            return
        loop = self.loop
        loop.driver.set_push([0.0] * 6)
        task = loop.task
        goal = loop._target is not None or loop.action is not None or (
            task is not None and task.move is not None and task.move.active)
        released = not loop._hold_request
        if goal:  # a goal a request set is a live input until a stop ends it: the operator holds
            loop.hold(True)
        timeout = loop.command_timeout
        # the stream may stay live for one watchdog period: the arm may go on for that long (bounded below)
        self.touched = False
        self.steps(math.ceil(timeout / loop.period) + 1)
        v0 = loop.qd_ref.copy()
        a = np.maximum(loop.limits.max_acceleration, self.floor)  # the profile a stop beginning now fixes
        tb = float(np.max(np.abs(v0) / a))
        q0, travelled, n = loop.state.q.copy(), np.zeros_like(v0), 0
        while loop.qd_ref.any():
            self.steps(1)
            travelled += np.abs(loop.qd_ref) * loop.period
            n += 1
            assert n * loop.period <= tb + 3 * loop.period, (
                f"not at rest {n * loop.period:.3f} s after the input ended (braking time {tb:.3f} s)")
        bound = np.abs(v0) * (tb / 2 + 2 * loop.period)
        assert np.all(travelled <= bound + 1e-9), (travelled, bound)
        self.steps(25)  # at rest it stays there: nothing moves it without an input
        assert not loop.qd_ref.any()
        moved = np.abs(loop.state.q - q0)
        lag = np.abs(v0) * 0.05 + 0.01  # the physical arm: its servo's lag behind the reference (≤ 50 ms) on top
        # … unless the tool ran into an object meanwhile: then the object pushes the arm off its reference
        # (the reference still rests within its braking distance, above)
        assert self.touched or np.all(moved <= bound + lag), (moved, bound)
        if goal and released:
            loop.hold(False)  # released again: starts from rest, without the old goal
            self.steps(25)
            assert not loop.qd_ref.any()


TestStopMachine = StopMachine.TestCase
TestStopMachine.settings = settings(max_examples=6, stateful_step_count=8, derandomize=True, deadline=None,
                                    suppress_health_check=list(HealthCheck), print_blob=True)


def _another_move():
    def move_again(self, **kw) -> None:
        self.move(**kw)
    return rule(**MOVE)(move_again)


class MoveMachine(StopMachine):
    """The same machine with moves drawn as often as all its other rules together (hypothesis draws the
    rules uniformly: ten more move rules), so that every run holds, stops, releases, cancels and pushes
    during moves, and goes on from there."""


for _i in range(2, 12):
    setattr(MoveMachine, f"move_{_i}", _another_move())


TestMoveMachine = MoveMachine.TestCase
TestMoveMachine.settings = settings(max_examples=10, stateful_step_count=6, derandomize=True, deadline=None,
                                    suppress_health_check=list(HealthCheck), print_blob=True)
