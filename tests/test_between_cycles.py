"""The driver's work between cycles (RobotDriver.between_cycles): the MuJoCo arm's physics of the period just sent
runs while the loop thread waits for its next cycle instead of in the next cycle's read — the same states, once
per cycle, only in the thread that keeps the loop's own clock, never from ``ControlLoop.step``; later in that wait,
not right after the publish (whoever the state woke gets the CPU first)."""

from __future__ import annotations

import threading
import time

import mujoco
import numpy as np
import pytest

from fdcontrol import make_mapping
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.drivers.base import RobotDriver
from fdcontrol.drivers.mujoco import MujocoRobot
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver

from .test_loop import DT, Q0, make_loop
from .waits import until


def _mujoco_loop(robot):
    drv = MujocoRobot(robot, dt=DT, q0=Q0)
    return ControlLoop(robot, drv, make_solver(make_mapping("fd", robot)), rate=1 / DT), drv


def test_only_drivers_that_override_it_are_called(ur10):
    assert not SimulatedRobot(ur10, dt=DT, q0=Q0).has_between_cycles
    assert MujocoRobot(ur10, dt=DT, q0=Q0).has_between_cycles
    assert RobotDriver.between_cycles(SimulatedRobot(ur10, dt=DT, q0=Q0)) is None


def test_physics_between_cycles_gives_the_same_states_and_leaves_the_read_none(ur10, monkeypatch):
    """Two MuJoCo loops on the same pushes: one steps only (the physics at each read), the other also runs
    between_cycles after each step (as the loop thread does). The same published states bit for bit; after
    between_cycles the next cycle's read runs no physics (MuJoCo's step counted)."""
    (a, da), (b, db) = _mujoco_loop(ur10), _mujoco_loop(ur10)
    steps = [0]
    real = mujoco.mj_step

    def counted(m, d):
        steps[0] += 1
        real(m, d)

    monkeypatch.setattr(mujoco, "mj_step", counted)
    for i in range(150):
        w = [8.0 * np.sin(0.05 * i), 4.0, 0.0, 0.0, 0.3, 0.0]
        a.set_wrench(w)
        b.set_wrench(w)
        if i == 60:  # the simulated hand pushes between two cycles: the same period sees it in both (set_push
            # runs a pending period first: a push acts from the next period sent)
            da.set_push([0.0, 0.0, 5.0, 0.0, 0.0, 0.0])
            db.set_push([0.0, 0.0, 5.0, 0.0, 0.0, 0.0])
        sa = a.step(now=i * DT)
        before = steps[0]
        sb = b.step(now=i * DT)
        if i:  # b's read found the period's physics done already
            assert steps[0] == before, i
        assert db._due is not None, i  # the period sent, its physics not run yet
        db.between_cycles()
        assert db._due is None and steps[0] == before + db.nsub, i
        for f in ("q", "qd", "q_ref", "qd_ref", "tip_pose", "wrench"):
            np.testing.assert_array_equal(getattr(sa, f), getattr(sb, f), err_msg=f"{f} at cycle {i}")
    assert np.abs(sa.q - Q0).max() > 1e-3  # it moved


class _Counting(SimulatedRobot):
    """Records the loop's cycle count at each call, and raises at ``fail_at``."""

    def __init__(self, *a, fail_at: int | None = None, **kw) -> None:
        super().__init__(*a, **kw)
        self.calls: list[int] = []
        self.fail_at = fail_at
        self.loop: ControlLoop | None = None

    def between_cycles(self) -> None:
        assert self.loop is not None
        self.calls.append(self.loop.cycle)
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            raise RuntimeError("physics diverged")


def _threaded(ur10, **kw):
    loop, _ = make_loop(ur10)
    drv = _Counting(ur10, dt=DT, q0=Q0, **kw)
    loop = ControlLoop(ur10, drv, loop.solver, rate=1 / DT)
    drv.loop = loop
    return loop, drv


def test_the_loop_thread_calls_it_once_after_each_cycle(ur10):
    loop, drv = _threaded(ur10)
    loop.start()
    try:
        until(lambda: len(drv.calls), lambda n: n >= 50, what="50 calls")
    finally:
        loop.stop()
    calls = drv.calls
    # after each cycle: the cycle count it sees is the one that cycle ended at, one more each time
    assert calls[0] == 1 and np.all(np.diff(calls[:50]) == 1), calls[:60]
    assert loop.state.fault is None


def test_step_never_calls_it(ur10):
    loop, drv = _threaded(ur10)
    for i in range(20):
        loop.step(now=i * DT)
    assert drv.calls == []


def test_a_failure_between_cycles_holds_with_its_reason_and_the_thread_goes_on(ur10):
    loop, drv = _threaded(ur10, fail_at=10)
    loop.start()
    try:
        until(lambda: len(drv.calls), lambda n: n >= 40, what="40 calls")
        assert loop._thread is not None and loop._thread.is_alive()
        deadline = time.monotonic() + 30
        while "physics diverged" not in (loop.state.fault or "") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "physics diverged" in (loop.state.fault or "") and loop.state.holding
    finally:
        loop.stop()


class _Recorded:
    """The time module as the loop thread sees it, its ``sleep`` calls from ``thread`` recorded in ``events``."""

    def __init__(self, events: list) -> None:
        self.events, self.thread = events, None

    def __getattr__(self, name: str):
        return getattr(time, name)

    def sleep(self, s: float) -> None:
        if threading.get_ident() == self.thread:
            self.events.append(("sleep", s))
        time.sleep(s)


class _Events(SimulatedRobot):  # a simulated arm that records its sends and its work between cycles
    def __init__(self, *a, events: list, busy: float = 0.0, clock=None, **kw) -> None:
        super().__init__(*a, **kw)
        self.events, self.busy, self.clock = events, busy, clock

    def between_cycles(self) -> None:
        self.events.append(("idle", None))
        end = time.perf_counter() + self.busy
        while time.perf_counter() < end:  # busy, without a sleep of its own
            pass

    def send(self, q_ref, qd_ref=None) -> None:
        self.clock.thread = threading.get_ident()
        self.events.append(("send", None))
        super().send(q_ref, qd_ref)




class _Sleeping(_Events):  # its work sleeps `busy` (a run as long on a loaded machine as on an idle one)
    def between_cycles(self) -> None:
        self.events.append(("idle", None))
        time.sleep(self.busy)  # (the test module's time: not recorded as the loop thread's sleep)


class _FirstSlow(_Sleeping):  # its first run sleeps `busy`, every later one nothing
    def between_cycles(self) -> None:
        super().between_cycles()
        self.busy = 0.0


def _run_events(ur10, monkeypatch, rate: float, busy: float, cycles: int, cls: type = _Events) -> list:
    import fdcontrol.loop.cycle as cycle

    events: list = []
    clock = _Recorded(events)
    monkeypatch.setattr(cycle, "time", clock)
    loop, _ = make_loop(ur10)
    drv = cls(ur10, dt=1 / rate, q0=Q0, events=events, busy=busy, clock=clock)
    loop = ControlLoop(ur10, drv, loop.solver, rate=rate)
    loop.start()
    try:
        until(lambda: sum(e[0] == "idle" for e in events), lambda n: n >= cycles, what=f"{cycles} calls")
    finally:
        loop.stop()
    return list(events)


def _before_idle(events: list) -> list:
    """Per call of between_cycles after the first: what the loop thread did since the cycle's send before it."""
    out, since = [], None
    for kind, arg in events:
        if kind == "send":
            since = []
        elif kind == "idle":
            if since is not None:
                out.append(since)
            since = None
        elif since is not None:
            since.append(arg)
    return out[2:]


def test_it_runs_later_in_the_wait_not_right_after_the_publish(ur10, monkeypatch):
    """A period of 20 ms (its half: 10 ms, far more than a cycle takes): after each cycle the loop thread first
    sleeps — about what is left of the first half of the period — and only then runs the driver's work."""
    period = 0.02
    waits = _before_idle(_run_events(ur10, monkeypatch, 1 / period, 0.0, 12))
    assert len(waits) >= 8
    late = [w for w in waits if len(w) != 1 or not 0 < w[0] <= 0.5 * period + 1e-9]
    assert len(late) <= 1, waits  # (one cycle of a stalled machine may take half a period)


def test_it_runs_at_once_when_it_takes_more_than_a_sixth_of_a_period(ur10, monkeypatch):
    """Its lead before the next cycle is 3× its recent mean run when that is more than half a period: a driver
    whose work takes 2 ms of a 5 ms period (lead 6 ms) gets it at once after the cycle, no sleep before it."""
    waits = _before_idle(_run_events(ur10, monkeypatch, 200.0, 0.002, 10))
    assert len(waits) >= 6 and all(w == [] for w in waits), waits


def test_its_lead_follows_the_mean_run_so_one_slow_run_is_forgotten(ur10, monkeypatch):
    """The lead is 3× the recent *mean* run, not the longest: a first run of 20 ms at a 50 ms period (a lead of 60 ms:
    at once after the cycle) is forgotten within about twenty cycles of short runs (the mean's weight 0.05:
    20 ms · 0.95ⁿ below a sixth of the period after 18), and the thread sleeps before it again (the longest run's
    lead would never let it: 60 ms > the period)."""
    period = 0.05
    waits = _before_idle(_run_events(ur10, monkeypatch, 1 / period, 0.02, 40, cls=_FirstSlow))
    assert len(waits) >= 30
    assert [] in waits[:5], waits[:5]  # right after the slow run: at once
    late = waits[25:]
    slept = [w for w in late if len(w) == 1 and 0 < w[0] <= 0.5 * period + 1e-9]
    assert len(slept) >= len(late) // 3, late  # (a loaded machine's late cycles leave no time to sleep)


@pytest.mark.parametrize("busy", [0.003, 0.012])
def test_its_lead_is_half_a_period_up_to_a_run_of_a_sixth_and_3x_the_run_beyond(ur10, monkeypatch, busy):
    """At a 50 ms period: a run of 3 ms (below a sixth of the period) leaves the next cycle half a period (25 ms), so
    the loop thread sleeps what is left of the first half — at most 25 ms, most often more than 15; a run of 12 ms
    leaves 3× 12 = 36 ms, so it sleeps at most 14 ms."""
    period = 0.05
    waits = _before_idle(_run_events(ur10, monkeypatch, 1 / period, busy, 16, cls=_Sleeping))
    sleeps = sorted(w[0] for w in waits if len(w) == 1)
    assert len(sleeps) >= 3, waits
    if busy < period / 6:
        assert sleeps[-1] <= 0.5 * period + 1e-9 and sleeps[len(sleeps) // 2] > 0.015, sleeps
    else:
        assert sleeps[-1] <= period - 3 * busy + 1e-9, sleeps
