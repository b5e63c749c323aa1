"""The braking profile: a stop brakes at least as hard as the limits the loop was built with, whatever
was changed at run time; a cycle that raises holds and keeps cycling; an arm that does not follow is a
fault. Library level: the loop stepped on its own clock (simulated arm)."""

from __future__ import annotations

import itertools
import math
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdcontrol import make_mapping
from fdcontrol.drivers.simulated import SimulatedRobot
from fdcontrol.limits.braking import BrakingProfile, braking_steps
from fdcontrol.limits.jerk import JointJerk
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop, SensorLoaded
from fdcontrol.loop.liveness import FOLLOW_SPEED, FOLLOW_TIME, LOAD_QUIET
from fdcontrol.loop.solvers import make_solver

Q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
DT = 0.002
A0 = 4.0  # rad/s², the limits the loop is built with


def make(robot, driver=None):
    sim = driver or SimulatedRobot(robot, dt=DT, q0=Q0)
    loop = ControlLoop(robot, sim, make_solver(make_mapping("fd", robot)),
                       limits=SafetyLimits.from_robot(robot, max_acceleration=A0), rate=1 / DT)
    return loop, sim


def moving(loop, seconds=0.5):
    t = 0.0
    for i in range(round(seconds / DT)):
        t = i * DT
        loop.set_wrench([60.0, 0, 0, 0, 0, 0], t=t)
        loop.step(now=t)
    assert np.abs(loop.qd_ref).max() > 0.1
    return t + DT


def brake_until_rest(loop, t, limit=3.0):
    """Cycles until the reference is at rest: (seconds it took, per-joint distance the reference covered)."""
    v0, dist, n = loop.qd_ref.copy(), np.zeros(loop.robot.dof), 0
    while loop.qd_ref.any():
        loop.step(now=t + n * DT)
        dist += np.abs(loop.qd_ref) * DT
        n += 1
        assert n * DT < limit, f"still moving after {limit} s: {loop.qd_ref}"
    return n * DT, dist, v0


def check_ramp(v0, took, dist, a=A0, after=0.0):
    """Came to rest as the ramp at a from v0 does (after `after` s of the watchdog) — time and distance."""
    tb = float(np.max(np.abs(v0))) / a
    assert took <= after + tb + 3 * DT, (took, tb)
    assert np.all(dist <= np.abs(v0) * (after + tb / 2 + 2 * DT) + 1e-9), (dist, v0)


def test_a_tiny_acceleration_limit_set_while_moving_does_not_weaken_the_stop(ur10):
    loop, _ = make(ur10)
    t = moving(loop)
    weak = SafetyLimits.from_robot(ur10, max_acceleration=1e-6)
    loop.reconfigure(limits=weak)  # the library applies it (the service refuses it while the arm moves)
    loop.hold(True)
    took, dist, v0 = brake_until_rest(loop, t)
    check_ramp(v0, took, dist)


def test_a_tiny_jerk_limit_does_not_weaken_the_stop(ur10):
    loop, _ = make(ur10)
    t = moving(loop)
    lim = SafetyLimits.from_robot(ur10, max_acceleration=A0)
    lim = SafetyLimits.compose([*lim.limits, JointJerk(np.full(6, 1e-3), np.full(6, A0))])
    loop.reconfigure(limits=lim)
    t += 0.2  # the stream ends: the watchdog stops the arm
    took, dist, v0 = brake_until_rest(loop, t)
    check_ramp(v0, took, dist, after=loop.command_timeout + DT)


def test_the_profile_is_fixed_when_the_stop_begins(ur10):
    loop, _ = make(ur10)
    t = moving(loop)
    loop.hold(True)
    loop.step(now=t)
    a = loop.braking.deceleration.copy()
    loop.reconfigure(limits=SafetyLimits.from_robot(ur10, max_acceleration=0.01))  # during the stop
    took, dist, v0 = brake_until_rest(loop, t + DT)
    np.testing.assert_array_equal(loop.braking.deceleration, a)
    check_ramp(v0, took, dist)
    assert loop.braking_time() == 0.0


def test_braking_profile_bound_is_the_uniform_ramp():
    p = BrakingProfile(np.array([4.0, 2.0]))
    p.begin(np.array([1e-6, 8.0]))  # the stricter per joint: 4 (floor) and 8 (the limit in force)
    np.testing.assert_array_equal(p.deceleration, [4.0, 8.0])
    qd = np.array([1.0, -1.0])
    b = p.bound(qd, 0.01)
    # r = max(1/(4·0.01), 1/(8·0.01)) = 25: every joint scaled by 1 − 1/25, direction kept
    np.testing.assert_allclose(b, qd * (1 - 1 / 25))
    np.testing.assert_allclose(p.clamp(np.array([2.0, -0.5]), qd, 0.01), [0.96, -0.5])
    assert p.time(qd, np.ones(2)) == 0.25


def test_zeroing_is_refused_under_a_load_and_for_a_second_after(ur10):
    from fdcontrol.drivers.simulated import SimulatedSensor

    sensor = SimulatedSensor(bias=np.array([8.0, 0, 0, 0, 0, 0]))  # a hand pushing with 8 N
    loop, _sim = make(ur10, SimulatedRobot(ur10, dt=DT, q0=Q0, sensor=sensor))
    loop.hold(True)
    for i in range(10):
        loop.step(now=i * DT)
    try:
        loop.zero_sensor()
        raise AssertionError("zeroing under a load was accepted")
    except SensorLoaded as exc:
        assert "load" in str(exc)
    sensor.bias = np.zeros(6)  # the hand lets go
    t = 10 * DT
    loop.step(now=t)
    try:
        loop.zero_sensor()
        raise AssertionError("zeroing right after a load was accepted")
    except SensorLoaded:
        pass
    n = round(LOAD_QUIET / DT) + 1
    for i in range(n):
        loop.step(now=t + (i + 1) * DT)
    loop.zero_sensor()  # a second without a load: allowed
    loop.step(now=t + (n + 1) * DT)
    assert not loop._zero_request


class Runaway(SimulatedRobot):
    """An arm that keeps moving joint 0 at 1 rad/s, whatever it is sent (a lost servo)."""

    def read(self):  # type: ignore[override]
        js = super().read()
        js.qd[0] = 1.0
        return js


def test_an_arm_that_does_not_follow_is_a_fault(ur10):
    loop, _ = make(ur10, Runaway(ur10, dt=DT, q0=Q0))
    states = [loop.step(now=i * DT) for i in range(round(2 * FOLLOW_TIME / DT))]
    faulted = [s for s in states if s.fault]
    assert faulted and "does not follow" in faulted[0].fault and faulted[-1].holding
    assert faulted[0].stamp - states[0].stamp >= FOLLOW_TIME - DT


class Servo(SimulatedRobot):
    """A position interface as a Franka's: the driver commands its own integral of q̇_ref (not the loop's
    q_ref), and the arm follows through a joint impedance servo, q̇ = (q_c − q)/``lag`` (k_d/k_p s behind a
    ramp); ``commanded_position`` is q_c. ``runaway``: joint 0 moves at 1 rad/s whatever it is sent."""

    interface = "position"

    def __init__(self, robot, lag: float = 0.2, runaway: bool = False) -> None:
        super().__init__(robot, dt=DT, tau=0.0, q0=Q0)
        self.q_c, self.lag, self.runaway = self.q.copy(), lag, runaway

    def send(self, q_ref, qd_ref):  # type: ignore[override]
        if qd_ref is not None:
            self.q_c = self.q_c + self.dt * np.asarray(qd_ref)
        v = (self.q_c - self.q) / self.lag
        if self.runaway:
            v[0] = 1.0
        super().send(None, v)

    def commanded_position(self):
        return self.q_c


@pytest.mark.parametrize("runaway", [False, True], ids=["catching-up", "runaway"])
def test_an_arm_catching_up_with_its_servo_lag_is_no_fault_one_that_runs_away_is(ur10, runaway):
    """A position-interfaced arm 0.2 s behind its commanded positions: a wrench speeds it up, a hold brakes
    the reference at 8 rad/s², and the arm covers its lag faster than the reference (by more than
    FOLLOW_SPEED, for longer than FOLLOW_TIME on the loop's clock, which runs at five times the robot's here
    as beside a simulator slowed by a loaded machine): toward the commanded position, no fault, and it comes
    to rest. An arm that runs on at 1 rad/s whatever it is sent: a fault, as on a velocity interface."""
    sim = Servo(ur10, runaway=runaway)
    loop = ControlLoop(ur10, sim, make_solver(make_mapping("fd", ur10)),
                       limits=SafetyLimits.from_robot(ur10, max_acceleration=8.0), rate=1 / DT)
    now, states = 0.0, []
    for _ in range(round(0.6 / DT)):
        loop.set_wrench([60.0, 0, 0, 0, 0, 0], t=now)
        states.append(loop.step(now=now))
        now += 5 * DT
    loop.hold()
    for _ in range(round(2.0 / DT)):
        states.append(loop.step(now=now))
        now += 5 * DT
    faults = [s.fault for s in states if s.fault]
    if runaway:
        assert faults and "does not follow" in faults[0] and states[-1].holding
        return
    # the run-on rule without the commanded position: faster than the reference sent the cycle before
    dev = [np.abs(b.qd) - np.abs(a.qd_ref) for a, b in itertools.pairwise(states)]
    runs = [d.max() > FOLLOW_SPEED for d in dev]
    assert sum(runs) * 5 * DT > FOLLOW_TIME, sum(runs)  # the catch-up, longer than FOLLOW_TIME on the loop's clock
    assert not faults
    assert states[-1].holding and not np.any(states[-1].qd_ref) and np.abs(states[-1].qd).max() < 1e-3


class Failing(SimulatedRobot):
    fail = False

    def read(self):  # type: ignore[override]
        if self.fail:
            raise RuntimeError("robot lost")
        return super().read()


def test_a_cycle_that_raises_holds_and_the_loop_keeps_cycling(ur10):
    sim = Failing(ur10, dt=DT, q0=Q0)
    loop, _ = make(ur10, sim)
    loop.start()
    try:
        end = time.monotonic() + 20
        while loop.cycle < 20 and time.monotonic() < end:
            time.sleep(0.01)
        sim.fail = True
        seen = loop.last_cycle_at
        while not (loop.state.fault and loop.last_cycle_at > seen + 0.05) and time.monotonic() < end:
            time.sleep(0.01)
        assert loop.state.fault and "robot lost" in loop.state.fault and loop.state.holding
        assert loop.last_cycle_at > seen + 0.05  # it cycles (holding): the service sees no stalled loop
        assert any(t.name == "fdcontrol-loop" for t in threading.enumerate())
        sim.fail = False
    finally:
        loop.stop()


class Ignoring(SimulatedRobot):
    """A driver stand-in that takes the commands and ignores them: the arm stays where it is."""

    def send(self, q, qd):  # type: ignore[override]
        self.sent += 1


def test_an_arm_that_lags_is_reported_not_following_and_is_no_fault(ur10):
    """The loop streams a wrench and asks for motion the arm never makes: after FOLLOW_TIME of more than
    FOLLOW_SPEED between the measured velocity (0) and the reference, the state says ``following`` false,
    with the joint and the difference (both read against the state's own q̇ and the reference sent the
    cycle before); no fault. Once the stream ends and the reference has braked, it follows again."""
    loop, _ = make(ur10, Ignoring(ur10, dt=DT, q0=Q0))
    states, prev = [], None
    for i in range(round(2.0 / DT)):
        loop.set_wrench([0, 0, 0, 0, 0, 15.0], t=i * DT)  # about the base: every joint's reference speeds up
        s = loop.step(now=i * DT)
        states.append((s, prev))
        prev = s.qd_ref
    assert all(s.fault is None for s, _ in states)
    lagging = [(s, p) for s, p in states if not s.following]
    assert lagging, max(float(np.abs(s.qd_ref).max()) for s, _ in states)
    first, p = lagging[0]
    off = np.abs(first.qd - p)
    assert first.follow_joint == int(np.argmax(off)) and first.follow_error == pytest.approx(off.max())
    since = next(s for s, p in states if p is not None and np.abs(s.qd - p).max() > FOLLOW_SPEED)
    assert first.stamp - since.stamp == pytest.approx(FOLLOW_TIME, abs=1.5 * DT)  # FOLLOW_TIME, not before
    assert all(np.abs(s.qd - p).max() > FOLLOW_SPEED for s, p in lagging)
    for i in range(round(2.0 / DT), round(6.0 / DT)):  # no stream: the watchdog brakes the reference to 0
        s = loop.step(now=i * DT)
    assert s.following and s.follow_joint == -1 and s.fault is None and not np.any(s.qd_ref)


@pytest.mark.parametrize("floor", [[0.0, 1.0], [-1.0, 1.0], [math.nan, 1.0], [math.inf, 1.0], [[1.0, 2.0]], 3.0])
def test_a_floor_that_cannot_brake_is_refused(floor):
    with pytest.raises(ValueError, match=r"^the braking floor must be finite and > 0 for every joint \(rad/s²\)$"):
        BrakingProfile(floor)


def test_the_deceleration_a_stop_would_fix_is_the_larger_of_the_limit_and_the_floor():
    p = BrakingProfile([0.5, 0.25])  # (small floors are floors too)
    assert p.current(np.array([8.0, 0.1])).tolist() == [8.0, 0.25]
    assert p.current(np.array([math.inf, math.nan])).tolist() == [0.5, 0.25]  # an unset limit: the floor
    assert p.current(2.0).tolist() == [2.0, 2.0]  # a scalar limit for every joint
    assert not p.active


def test_braking_time_is_the_slowest_joints_and_finite_whatever_it_is_given():
    p = BrakingProfile([4.0, 2.0])
    assert p.time(np.array([2.0, -1.5]), np.array([4.0, 2.0])) == pytest.approx(0.75)  # max(2/4, 1.5/2)
    assert BrakingProfile([4.0]).time(np.zeros((0,)), np.array([4.0])) == 0.0  # no joint: nothing to brake
    # NaN in the reference: 0, not NaN (the loop bounds waits by it; the fault path brakes a NaN anyway)
    assert p.time(np.array([math.nan, 1.0]), np.array([4.0, 2.0])) == 0.0


@settings(max_examples=50, deadline=None)
@given(qd=st.lists(st.floats(-3, 3), min_size=1, max_size=7), a=st.floats(0.5, 20),
       dt=st.sampled_from([0.001, 0.002, 0.008]))
def test_braking_steps_are_the_uniform_ramp_and_distance_is_its_integral(qd, a, dt):
    """Independent of the code: k = ⌈max|q̇|/(a dt)⌉ steps, the i-th (1 − i/k) q̇, the last exactly 0, no step
    larger than a·dt; the distance the ramp covers (a Riemann sum of the steps) is |q̇| t_b / 2 within |q̇| dt."""
    qd = np.array(qd)
    amax = np.full(qd.size, a)
    steps = list(braking_steps(qd, amax, dt))
    vmax = float(np.abs(qd).max())
    k = math.ceil(vmax / (a * dt)) if vmax > 0 else 0
    assert len(steps) == k
    if k:
        assert not np.any(steps[-1])
        prev = qd
        for i, s in enumerate(steps, 1):
            np.testing.assert_allclose(s, qd * (1 - i / k), atol=1e-12)
            assert np.abs(s - prev).max() <= a * dt * (1 + 1e-9)
            prev = s
    p = BrakingProfile(amax)
    d = p.distance(qd, amax)
    covered = np.abs(np.sum(steps, axis=0)) * dt if k else np.zeros(qd.size)
    np.testing.assert_allclose(d, np.abs(qd) * (vmax / a) / 2, rtol=1e-12)
    assert np.all(np.abs(covered - d) <= np.abs(qd) * dt + 1e-12)


def test_the_ramp_step_outside_a_stop_is_at_the_larger_of_the_limit_and_the_floor_and_clamps_nan_to_rest():
    """Outside a stop, ``bound``, ``time`` and ``distance`` use the deceleration a stop beginning now would fix:
    max(limit, floor) — a limit above the floor brakes faster than the floor; without a limit, the floor. The
    ramp's next velocity is q̇ (1 − 1/r), r = max_j |q̇_j| / (a_j dt), and zero (of the same shape) once r ≤ 1;
    a NaN in the limits' reference is clamped to rest, never to a velocity; no joint gives nothing."""
    p = BrakingProfile([1.0, 1.0])
    qd, dt = np.array([0.03, -0.015]), 0.01
    # r = 0.03 / (1.0 · 0.01) = 3 at the floor; = 1.5 at a limit of 2.0
    np.testing.assert_allclose(p.bound(qd, dt), qd * (1 - 1 / 3))
    np.testing.assert_allclose(p.bound(qd, dt, np.array([2.0, 2.0])), qd * (1 - 1 / 1.5))
    np.testing.assert_allclose(p.bound(qd, dt, np.array([0.5, 0.5])), qd * (1 - 1 / 3))  # never below the floor
    z = p.bound(qd, dt, np.array([4.0, 4.0]))  # r = 0.75: at rest in this step
    assert z.shape == (2,) and not z.any()
    assert p.time(qd, np.array([2.0, 2.0])) == pytest.approx(0.015)  # 0.03 / 2, not 0.03 / 1 at the floor
    np.testing.assert_allclose(p.distance(qd, np.array([2.0, 2.0])), np.abs(qd) * 0.015 / 2)
    b = p.clamp(np.array([math.nan, -math.nan]), qd, dt)
    assert b.tolist() == [0.0, 0.0]
    assert p.bound(np.zeros(0), dt).shape == (0,) and list(braking_steps(np.zeros(0), np.zeros(0), dt)) == []


def test_live_inputs_are_a_stream_a_move_a_goal_on_the_motion_term_or_a_hand_on_a_law_that_reads_it():
    """The live-input rule term by term (fdcontrol.loop.liveness.Liveness.live) on stand-ins for the loop's
    task and law: a stream within its watchdog; a move in progress (not one cancelled or done); a goal on a
    law with the motion term; a load on the sensor on a law with the force term — and nothing else."""
    from types import SimpleNamespace as NS

    from fdcontrol.loop.liveness import Liveness

    def loop(terms=(), move=None, task=True):
        return NS(task=(NS(move=None if move is None else NS(status=move)) if task else None),
                  law=NS(_law=NS(terms=terms)))

    f0, hand, goal = np.zeros(6), np.array([0, 0, 2.0, 0, 0, 0]), np.eye(4)
    lv = Liveness()
    assert not lv.loaded_now and lv.loaded_at == -math.inf
    assert lv.live(loop(), "ok", f0, None, 0.0)
    for watchdog in ("idle", "tripped"):
        assert not lv.live(loop(("motion", "force")), watchdog, f0, None, 0.0)
    for status in ("moving", "paused"):
        assert lv.live(loop(move=status), "idle", f0, None, 0.0)
    for status in ("cancelled", "done"):
        assert not lv.live(loop(move=status), "idle", f0, None, 0.0)
    assert not lv.live(loop(task=False), "idle", f0, None, 0.0)
    assert lv.live(loop(("motion",)), "idle", f0, goal, 0.0)
    assert not lv.live(loop(("force",)), "idle", f0, goal, 0.0)  # a goal the law does not track
    assert not lv.live(loop(("motion",)), "idle", f0, None, 0.0)
    assert not lv.live(NS(task=None, law=NS()), "idle", f0, goal, 0.0)  # a law without terms
    lv.sensed(hand, 1.0)
    assert lv.live(loop(("force",)), "idle", hand, None, 1.0)
    assert not lv.live(loop(("motion",)), "idle", hand, None, 1.0)  # a hand on a law that does not read it
    lv.sensed(f0, 1.5)
    assert not lv.live(loop(("force",)), "idle", f0, None, 1.5)


def test_the_load_and_its_quiet_second_are_read_at_their_thresholds():
    from fdcontrol.loop.liveness import LOAD_FORCE, LOAD_TORQUE, Liveness, loaded

    assert not loaded(np.array([LOAD_FORCE, 0, 0, 0, 0, 0])) and loaded(np.array([0, 0, 1.01 * LOAD_FORCE, 0, 0, 0]))
    assert not loaded(np.array([0, 0, 0, LOAD_TORQUE, 0, 0])) and loaded(np.array([0, 0, 0, 0, 0, 1.01 * LOAD_TORQUE]))
    lv = Liveness()
    assert lv.loaded_reason(0.0) is None and lv.loaded_reason(math.nan) is None  # never loaded
    lv.sensed(np.array([0, 0, 2.0, 0, 0, 0]), 10.0)
    assert lv.loaded_reason(10.0) == "it reads a load" and lv.loaded_reason(math.nan) == "it reads a load"
    lv.sensed(np.zeros(6), 10.2)
    assert lv.loaded_at == 10.0 and not lv.loaded_now
    assert lv.loaded_reason(10.5) == "it read a load 0.50 s ago"
    assert lv.loaded_reason(10.0 + LOAD_QUIET - 1e-6) is not None and lv.loaded_reason(10.0 + LOAD_QUIET) is None
    assert lv.loaded_reason(math.nan) is None  # no time: only a load now counts


def test_a_limit_left_unset_per_joint_brakes_that_joint_at_the_floor():
    """A per-joint acceleration limit read as ``null`` (JSON) is an unset limit, like NaN: that joint brakes at the
    floor, the others at the larger of their limit and the floor — in the stop that begins and in the one that would."""
    p = BrakingProfile([0.5, 0.25])
    assert p.current([None, 8.0]).tolist() == [0.5, 8.0]
    assert p.time(np.array([1.0, 4.0]), [None, 8.0]) == 2.0  # max(1/0.5, 4/8)
    p.begin([8.0, None])
    assert p.active and p.deceleration.tolist() == [8.0, 0.25]


def test_single_precision_velocities_brake_along_the_double_precision_ramp():
    """Velocities handed in as float32 (a driver's single-precision reading) give the same steps, next bound and
    distances as the same numbers in float64, to the last bit: the ramp is computed in double precision."""
    qd32 = np.array([0.7, -0.3, 0.11], dtype=np.float32)
    qd = qd32.astype(np.float64)  # the same numbers, exactly
    a, dt = np.array([3.0, 3.0, 3.0]), 0.002
    k = math.ceil(float(qd[0]) / (3.0 * dt))  # ⌈0.69999998… / 0.006⌉
    steps = list(braking_steps(qd32, a, dt))
    assert len(steps) == k == 117
    for i, s in enumerate(steps, 1):
        assert s.dtype == np.float64 and np.array_equal(s, qd * (1.0 - i / k) if i < k else np.zeros(3))
    p = BrakingProfile(a)
    r = float(np.max(np.abs(qd) / (a * dt)))
    assert np.array_equal(p.bound(qd32, dt), qd * (1.0 - 1.0 / r))
    t = float(qd[0]) / 3.0
    assert p.time(qd32, a) == t
    assert np.array_equal(p.distance(qd32, a), np.abs(qd) * t / 2.0)


def test_the_compiled_clamp_is_the_numpy_clamp_to_the_last_bit():
    """Every holding cycle clamps by the compiled twin (limits.compiled.brake_clamp): on random references and
    previous references — signed zeros, NaN, ±inf, the largest float, tiny values, a zero dt, a stop under way or
    not, no joint — it gives exactly the numpy form's array; a float32 or list reference and vectors of different
    lengths take the numpy form (which broadcasts a single joint or raises), and without numba the numpy form runs."""
    pytest.importorskip("numba")
    p = BrakingProfile([1.0, 1.0])
    assert p._clamp is not None  # loaded with the profile (never in the loop's first stop)
    rng = np.random.default_rng(7)
    special = np.array([0.0, -0.0, math.nan, math.inf, -math.inf, 1e-300, -1e-300, np.finfo(float).max])

    def vec(n):
        v = rng.normal(scale=rng.choice([1e-3, 0.1, 1.0]), size=n)
        m = rng.random(n) < 0.2
        v[m] = rng.choice(special, int(m.sum()))
        return v

    kernel, made = p._clamp, []

    def compiled(*args):  # the compiled twin, counting the arrays it gave (an exception: the numpy form runs)
        out = kernel(*args)
        made.append(out)
        return out

    with np.errstate(all="ignore"):
        for k in range(4000):
            n = int(rng.integers(0, 8))
            p = BrakingProfile(rng.uniform(0.1, 5.0, n))
            p._clamp = compiled
            if rng.random() < 0.5:
                p.begin(rng.uniform(0.1, 10.0, n))
            qd, prev = vec(n), vec(n)
            if rng.random() < 0.3:
                prev = qd * rng.uniform(0.9, 1.1)
            dt = float(rng.choice([0.002, 0.01, 0.0, rng.uniform(0.0, 0.1)]))
            got, want = p.clamp(qd, prev, dt), p.clamp_numpy(qd, prev, dt)
            assert len(made) == k + 1 and made[-1] is got  # float64 vectors of one length: the compiled twin ran
            same = got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
            assert same, (qd, prev, dt)
    p = BrakingProfile([1.0, 1.0])
    p._clamp, made = compiled, []
    prev = np.array([0.03, -0.015])
    assert p.clamp([2.0, math.nan], prev, 0.01).tolist() == [0.02, 0.0]
    assert p.clamp(np.array([2.0, 1.0], dtype=np.float32), prev, 0.01).tolist() == [0.02, 0.01]
    assert p.clamp(np.ones(2), np.ones(1), 0.01).tolist() == [0.99, 0.99]  # one previous joint broadcasts
    with pytest.raises(ValueError, match="broadcast"):
        p.clamp(np.ones(3), prev, 0.01)
    assert not made  # none of these was for the compiled twin
    p._clamp = None  # numba missing: the numpy form
    assert p.clamp(np.array([2.0, -math.inf]), prev, 0.01).tolist() == [0.02, -0.01]
