"""Closed loop on the simulated robot: the behaviour a robotics engineer relies on."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdcontrol import RobotModel, make_mapping
from fdcontrol.control.law import ControlLaw, ForceTerm
from fdcontrol.drivers import SimulatedRobot, SimulatedSensor, SpringPlane
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop, InputError
from fdcontrol.loop.solvers import Solver, make_solver

from .test_limits import cannot_stop
from .waits import until

Q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])  # a well-conditioned UR10 pose
DT = 0.002


def make_loop(robot, mapping="fd", q0=Q0, law=None, sensor=None, limits=None, **kw):
    sim = SimulatedRobot(robot, dt=DT, q0=q0, sensor=sensor)
    solver = make_solver(make_mapping(mapping, robot, **kw))
    return ControlLoop(robot, sim, solver, law=law, limits=limits, rate=1 / DT), sim


def run(loop, seconds, wrench=None, t0=0.0):
    """Run synchronously on simulated time; re-send the wrench every cycle (a live stream)."""
    states = []
    for i in range(round(seconds / DT)):
        now = t0 + i * DT
        if wrench is not None:
            loop.set_wrench(wrench)
        states.append(loop.step(now=now))
    return states


def drift(robot, mapping):
    loop, sim = make_loop(robot, mapping)
    p0 = robot.pose(Q0)[:3, 3]
    run(loop, 0.5, wrench=[5.0, 0, 0, 0, 0, 0])
    d = robot.pose(sim.q)[:3, 3] - p0
    return d[0], float(np.linalg.norm(d[1:]))


def test_constant_force_moves_along_x_fd_drifts_far_less_than_jt(ur10):
    fx_fd, lat_fd = drift(ur10, "fd")
    fx_jt, lat_jt = drift(ur10, "jt")
    print(f"FD: +x {fx_fd:.4f} m, lateral {lat_fd:.5f} m; JT: +x {fx_jt:.4f} m, lateral {lat_jt:.5f} m")
    assert fx_fd > 0.1 and fx_jt > 0.01
    assert lat_fd / fx_fd < 0.02
    assert lat_fd / fx_fd < 0.1 * (lat_jt / fx_jt)


def test_motion_control_converges_to_target(ur10):
    law = ControlLaw(mode="motion")
    loop, sim = make_loop(ur10, law=law)
    target = ur10.pose(Q0)
    target[:3, 3] += [0.05, -0.03, 0.04]
    c, s = np.cos(0.2), np.sin(0.2)
    target[:3, :3] = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]) @ target[:3, :3]
    loop.set_target(target)
    run(loop, 3.0)
    T = ur10.pose(sim.q)
    import pinocchio as pin

    assert np.linalg.norm(T[:3, 3] - target[:3, 3]) < 1e-3
    assert np.linalg.norm(pin.log3(target[:3, :3] @ T[:3, :3].T)) < 1e-3


def test_compliance_settles_at_force_over_stiffness(ur10):
    law = ControlLaw(mode="compliance")
    law.set_gains(stiffness=[200, 100, 400, 50, 50, 50], force_gain=0.0)
    loop, sim = make_loop(ur10, law=law)
    target = ur10.pose(Q0)
    loop.set_target(target)
    F = np.array([5.0, -3.0, 8.0])
    run(loop, 4.0, wrench=[*F, 0, 0, 0])
    disp = ur10.pose(sim.q)[:3, 3] - target[:3, 3]
    expected = F / np.array([200, 100, 400])
    print("displacement", disp, "expected", expected)
    np.testing.assert_allclose(disp, expected, rtol=0.03, atol=2e-4)


def test_force_control_presses_on_a_wall_with_the_target_force(ur10):
    p0 = ur10.pose(Q0)[:3, 3]
    k = 2000.0
    # the tool starts touching the wall (2 mm in, 4 N): force control moves the arm only while its sensor
    # reads a load (a force setpoint in free space is no live input: fdcontrol.loop.liveness)
    wall = SpringPlane(point=p0 - np.array([0.002, 0, 0]), normal=[1, 0, 0], stiffness=k)
    # against a stiff wall the loop gain K_f·k must stay small: K_f = 0.1 here (1.0 bounces)
    law = ControlLaw(mode="force", force=ForceTerm(gain=np.full(6, 0.1),
                                                   target=np.array([10.0, 0, 0, 0, 0, 0])))
    loop, sim = make_loop(ur10, law=law, sensor=SimulatedSensor(planes=[wall]))
    states = run(loop, 3.0)
    np.testing.assert_allclose(states[-1].f_measured[:3], [10.0, 0, 0], atol=0.05)
    assert ur10.pose(sim.q)[0, 3] == pytest.approx(p0[0] - 0.002 + 10.0 / k, abs=1e-4)


class Recording(Solver):
    """Wrap a solver to record the raw q̇ it asks for, before the safety limits."""

    def __init__(self, solver):
        self.solver, self.mapping, self.raw = solver, solver.mapping, []
        self.virtual, self.constraints = solver.virtual, solver.constraints  # the loop's Configuration: the same

    def step(self, q, qd, f, dt, tau=None, config=None):
        out = self.solver.step(q, qd, f, dt, tau, config)
        self.raw.append(np.max(np.abs(out[1])))
        return out


@pytest.mark.parametrize("mapping", ["fd", "jt", "ji"])
def test_pulled_into_the_stretched_singularity(ur10, mapping):
    """A large outward force stretches the arm: FD and Jᵀ ask for bounded joint speeds,
    J⁻¹ for exploding ones; the limited references stay within every limit."""
    q0 = np.array([0.0, -0.4, 0.6, -0.2, 1.2, 0.0])
    sim = SimulatedRobot(ur10, dt=DT, q0=q0)
    rec = Recording(make_solver(make_mapping(mapping, ur10)))
    loop = ControlLoop(ur10, sim, rec, rate=1 / DT)
    p = ur10.pose(q0)[:3, 3]
    direction = np.array([p[0], p[1], 0.0]) / np.linalg.norm(p[:2])
    states = run(loop, 3.0, wrench=[*(200 * direction), 0, 0, 0])
    raw = max(rec.raw)
    sigma = min(s.sigma_min_j for s in states[10:])
    print(f"{mapping}: max raw |q̇| = {raw:.3g} rad/s, min σ(J) = {sigma:.3g}")
    assert sigma < 0.05  # it did reach the stretched singularity
    if mapping == "ji":
        assert raw > 50.0
    else:
        assert raw < 20.0
    _assert_within_limits(loop, states)


def _assert_within_limits(loop, states):
    lim = loop.limits
    prev = np.zeros(len(lim.lower))
    for s in states:
        assert np.all(s.q_ref <= lim.upper + 1e-12) and np.all(s.q_ref >= lim.lower - 1e-12)
        assert np.all(np.abs(s.qd_ref) <= lim.max_velocity + 1e-12)
        step = lim.max_acceleration * DT
        big = np.abs(s.qd_ref - prev) > step + 1e-9
        # a step > a·dt only where docs/limits.md says position wins: braking at a·dt for one cycle
        # the joint would still pass its limit (the simulated arm lags its reference and runs ahead)
        assert np.all(~big | cannot_stop(s.q, prev, step, lim.lower, lim.upper, DT)), (s.cycle, s.q, prev, s.qd_ref)
        prev = s.qd_ref


@pytest.mark.parametrize("mapping", ["fd", "jt", "dls", "sdls", "ji"])
def test_references_never_exceed_limits_random_wrenches(panda, mapping):
    """Property test: 6 random starts, each with a random joint 1 mm-rad from its upper or lower
    limit (alternating), and random wrench steps, Panda."""
    rng = np.random.default_rng(7)
    lim = panda.limits
    for i in range(6):
        q0 = rng.uniform(lim.lower + 0.02, lim.upper - 0.02)
        j = int(rng.integers(7))
        q0[j] = lim.upper[j] - 1e-3 if i % 2 == 0 else lim.lower[j] + 1e-3
        margin = np.minimum(q0 - lim.lower, lim.upper - q0)
        assert np.all(margin > 0) and margin.min() == pytest.approx(1e-3)  # this start is at a limit
        loop, _ = make_loop(panda, mapping, q0=q0)
        # the limit the start is next to is the loop's own (the URDF's position limits)
        np.testing.assert_array_equal(loop.limits.lower, lim.lower)
        np.testing.assert_array_equal(loop.limits.upper, lim.upper)
        states = []
        for k in range(8):
            w = rng.normal(size=6) * [80, 80, 80, 10, 10, 10]
            states += run(loop, 0.1, wrench=w, t0=k * 0.1)
        _assert_within_limits(loop, states)


def _velocity_steps_ok(qd_refs, amax, dt=DT):
    """Every reference step |Δq̇_ref| ≤ a·dt (tolerance: float rounding only)."""
    steps = np.abs(np.diff(np.asarray(qd_refs), axis=0))
    return float(np.max(steps / (amax * dt))) if len(steps) else 0.0


def test_watchdog_trips_on_the_first_late_cycle_and_brakes_within_the_limit(ur10):
    loop, _sim = make_loop(ur10)
    run(loop, 0.3, wrench=[20.0, 0, 0, 0, 0, 0])
    assert np.max(np.abs(loop.state.qd_ref)) > 0.05
    last_cmd = loop._command.t
    nows = [last_cmd + DT * (i + 1) for i in range(600)]
    states = [loop.step(now=t) for t in nows]
    # on the loop's own clock: ok while now − t_cmd ≤ timeout, tripped from the first cycle past it
    first = next(i for i, s in enumerate(states) if s.watchdog == "tripped")
    assert nows[first] - last_cmd > loop.command_timeout
    assert first == 0 or nows[first - 1] - last_cmd <= loop.command_timeout
    assert all(s.watchdog == "ok" for s in states[:first])
    tripped = states[first:]
    assert _velocity_steps_ok([states[first - 1].qd_ref] + [s.qd_ref for s in tripped],
                              loop.limits.max_acceleration) <= 1 + 1e-9
    speeds = [np.max(np.abs(s.qd_ref)) for s in tripped]
    assert speeds[-1] == 0.0
    held = [s.q for s in tripped[-50:]]
    np.testing.assert_allclose(held[0], held[-1], atol=1e-12)
    # a new message re-arms it
    loop.set_wrench([1.0, 0, 0, 0, 0, 0])
    assert loop.step(now=loop._command.t).watchdog == "ok"


def test_activation_beyond_a_limit_steps_no_faster_than_the_acceleration_limit(ur10):
    lim = SafetyLimits.from_robot(ur10)
    lim.upper[1] = Q0[1] - 0.05  # joint 2 starts 0.05 rad beyond its (tightened) limit
    loop, _sim = make_loop(ur10, limits=lim)
    first = loop.step(now=0.0)
    np.testing.assert_array_equal(first.q_ref, Q0)
    np.testing.assert_array_equal(first.qd_ref, np.zeros(6))
    # the recovery is motion: it runs while an input is live (a zero wrench streamed: fdcontrol.loop.liveness)
    states = [first, *run(loop, 1.0, wrench=[0.0] * 6, t0=DT)]
    assert states[-1].q[1] < Q0[1] - 0.01  # moving back inside
    assert _velocity_steps_ok([s.qd_ref for s in states], lim.max_acceleration) <= 1 + 1e-9


def test_activation_is_jump_free_in_position_beyond_a_limit(ur10):
    lim = SafetyLimits.from_robot(ur10)
    lim.upper[1] = Q0[1] - 0.05
    loop, _sim = make_loop(ur10, limits=lim)
    first = loop.step(now=0.0)
    np.testing.assert_array_equal(first.q_ref, Q0)
    np.testing.assert_array_equal(first.qd_ref, np.zeros(6))
    states = run(loop, 1.0, wrench=[0.0] * 6, t0=DT)  # a live input: the recovery is motion
    back = lim.recovery_speed * lim.max_velocity[1]
    steps = np.diff([s.q_ref[1] for s in states])
    assert np.all(steps <= 1e-12) and np.all(-steps <= back * DT + 1e-12)


def _drive_then(loop, sim, event: str, at: int, wrench) -> list[np.ndarray]:
    """Stream `wrench` for `at` cycles, then `event`; return every q̇ the driver received."""
    sent: list[np.ndarray] = []
    orig = sim.send
    sim.send = lambda q, qd: (sent.append(np.array(qd)), orig(q, qd))  # type: ignore[method-assign]
    run(loop, at * DT, wrench=wrench)
    t0 = at * DT
    if event == "hold":
        loop.hold(True)
    elif event == "stop":
        loop._stop_request = True  # what stop() asks the running thread (see ControlLoop._run)
    elif event == "fault":
        read = sim.read
        calls = {"n": 0}

        def failing():
            calls["n"] += 1
            if calls["n"] <= 3:
                raise OSError("driver connection lost")
            return read()
        sim.read = failing  # type: ignore[method-assign]
    for i in range(400):
        try:
            loop.step(now=t0 + i * DT)
        except Exception as exc:  # as ControlLoop._run does
            loop._on_exception(exc)
        if event == "stop" and not np.any(loop.qd_ref):
            break
    return sent


@settings(max_examples=12, deadline=None)
@given(event=st.sampled_from(["hold", "stop", "fault"]), at=st.integers(20, 200),
       fx=st.floats(-60, 60), ty=st.floats(-8, 8))
def test_stop_hold_and_faults_brake_within_the_acceleration_limit(ur10, event, at, fx, ty):
    loop, sim = make_loop(ur10)
    sent = _drive_then(loop, sim, event, at, [fx, 0.0, 0.0, 0.0, ty, 0.0])
    ratio = _velocity_steps_ok(sent, loop.limits.max_acceleration)
    assert ratio <= 1 + 1e-9, f"{event}: a velocity step of {ratio:.2f} × a·dt"
    assert np.max(np.abs(sent[-1])) < 1e-9  # at standstill in the end
    assert loop.state.holding or event == "stop"


def test_stop_of_the_thread_brakes_to_standstill(ur10):
    loop, sim = make_loop(ur10)
    sent: list[np.ndarray] = []
    orig = sim.send
    sim.send = lambda q, qd: (sent.append(np.array(qd)), orig(q, qd))  # type: ignore[method-assign]
    loop.start()
    deadline = time.monotonic() + 30  # only ends a hung test: 0.5 s of the loop's own cycles
    while loop.cycle < 0.5 / DT:
        assert time.monotonic() < deadline, loop.cycle
        loop.set_wrench([40.0, 0, 0, 0, 0, 0])
        time.sleep(0.01)  # the pace of the wrench stream
    moving = float(np.max(np.abs(loop.qd_ref)))
    loop.stop()
    assert moving > 0.02 and not loop.running
    assert _velocity_steps_ok(sent, loop.limits.max_acceleration) <= 1 + 1e-9
    assert np.max(np.abs(sent[-1])) == 0.0


class _Recording:
    """A LoopIO that keeps every published state, and a shared-memory stop counter (fdcontrol.server.channel)
    the test bumps, as the service's stop route does."""

    def __init__(self):
        from fdcontrol.server.channel import Channel, ShmIO

        self.ch = Channel()
        self.shm = ShmIO(self.ch)
        self.published: list = []

    def poll(self, loop):
        self.shm.poll(loop)

    def publish(self, loop, state):
        self.published.append(state)


def _pushed_loop(ur10, seconds: float):
    """A started UR10 loop with a :class:`_Recording` as its io, pushed at 40 N for ``seconds`` of its own
    clock; every velocity command sent to the simulator is kept in ``sent``."""
    loop, sim = make_loop(ur10)
    io = _Recording()
    loop.io = io
    sent: list[np.ndarray] = []
    orig = sim.send
    sim.send = lambda q, qd: (sent.append(np.array(qd)), orig(q, qd))  # type: ignore[method-assign]
    loop.start()
    try:
        deadline = time.monotonic() + 60  # only ends a hung test
        while loop.cycle < seconds / DT:
            assert time.monotonic() < deadline, loop.cycle
            loop.set_wrench([40.0, 0, 0, 0, 0, 0])
            time.sleep(0.01)
    except BaseException:
        loop.stop()
        io.ch.close(unlink=True)
        raise
    return loop, io, sent


def test_stop_publishes_the_stopped_state_once_and_sends_rest_once(ur10):
    """stop() on a running loop: the loop thread brakes to rest, ends itself and publishes the stopped state;
    stop() then does not end the stop a second time (one stopped state, one rest command after the last
    cycle); a stop() on the stopped loop, whose thread is gone, publishes the stopped state itself, once."""
    loop, io, sent = _pushed_loop(ur10, 0.3)
    try:
        loop.stop()
        stopped = [s for s in io.published if not s.running]
        assert len(stopped) == 1 and stopped[0] is io.published[-1], [s.cycle for s in stopped]
        tail = next(i for i, qd in enumerate(reversed(sent)) if np.any(qd))  # rest commands at the end
        assert 1 <= tail <= 2  # the cycle that reached rest, and the stop's one rest command
        n = len(io.published)
        loop.stop()  # already stopped: says so once more (the stopped state at the measured pose)
        assert len(io.published) == n + 1 and not io.published[-1].running
        assert loop._thread is None  # the ended thread is let go
        # a second run, ended by stop() the same way: again one stopped state
        loop.start()
        c0 = loop.cycle
        until(lambda: loop.cycle, lambda c: c > c0 + 50, what="50 cycles of the second run")
        n = len(io.published)
        loop.stop()
        stopped = [s for s in io.published[n:] if not s.running]
        assert len(stopped) == 1 and stopped[0] is io.published[-1], [s.cycle for s in stopped]
        assert loop._thread is None
    finally:
        loop.io = None
        io.ch.close(unlink=True)


def test_a_stop_through_shared_memory_ends_the_thread_at_rest_by_itself(ur10):
    """The service's stop: one store into the stop counter, nothing else — no stop(), no join. The loop brakes
    from the next cycle within the acceleration limit, its thread ends at rest and publishes the stopped state
    itself (what the stop route answers on). A stop counted while the loop was stopped does not end the next
    run (forget_stops, as the loop process starts the loop)."""
    loop, io, sent = _pushed_loop(ur10, 0.5)
    try:
        moving = float(np.max(np.abs(loop.qd_ref)))
        io.ch.stop[0] += 1.0  # the stop route's one store
        thread = loop._thread
        until(lambda: thread.is_alive(), lambda alive: not alive, what="the loop thread's end")
        assert moving > 0.02 and not loop.running
        last = io.published[-1]
        assert not last.running and not np.any(last.qd_ref)  # the stopped state, published by the loop thread
        assert _velocity_steps_ok(sent, loop.limits.max_acceleration) <= 1 + 1e-9
        assert np.max(np.abs(sent[-1])) == 0.0
        braking = [s for s in io.published if s.running and s.holding]
        assert braking and np.max(np.abs(braking[0].qd_ref)) > 0.0  # it braked over cycles, not at once
        # a stop counted while stopped: the next run is not ended by it
        io.ch.stop[0] += 1.0
        io.shm.forget_stops()
        loop.start()
        c0 = loop.cycle
        until(lambda: loop.cycle, lambda n: n > c0 + 50, what="50 cycles of the new run")
        assert loop.running
    finally:
        loop.stop()
        loop.io = None
        io.ch.close(unlink=True)


def test_a_driver_lost_while_running_then_stopped_says_stopped_at_rest_and_keeps_the_first_fault(ur10):
    """The driver goes silent under a running, moving loop: the loop holds with the driver's fault; a stop then
    ends it with the stopped state — not running, a zero reference, the first fault — published, and an
    exchange that raises at the end does not keep the stop from ending."""
    loop, io, _sent = _pushed_loop(ur10, 0.3)
    sim = loop.driver
    try:
        assert loop.state.running and np.any(loop.state.qd_ref)

        def dead():
            raise OSError("driver connection lost")

        sim.read = dead  # type: ignore[method-assign]
        until(lambda: loop.fault, lambda f: f is not None, what="the driver's fault")
        loop.exchange = lambda _loop, _state: 1 / 0
        loop.stop()
        s = loop.state
        assert not loop.running and s.running is False
        assert s.fault == "OSError: driver connection lost" and s.fault == loop.fault
        np.testing.assert_array_equal(s.qd_ref, np.zeros(6))
        assert io.published[-1] is s
    finally:
        loop.exchange = None
        loop.io = None
        io.ch.close(unlink=True)


def test_a_stop_lingers_nowhere_the_next_cycles_by_hand_follow_the_input(ur10):
    """A loop stepped by hand, stopped (its stopped state sent), then stepped by hand again: it follows the
    wrench as before — the stop has ended, no stop request is left to hold it; a stop whose driver is dead
    ends the same way, with a zero reference in its stopped state and an exchange that raises ignored."""
    for dead in (False, True):
        loop, sim, _sent, rec = _moving_loop(ur10)
        if dead:
            read = sim.read

            def gone():
                raise OSError("gone")

            sim.read = gone  # type: ignore[method-assign]
            loop.exchange = lambda _loop, _state: 1 / 0
        loop.stop()
        assert loop.state.running is False and not np.any(loop.state.qd_ref)
        assert rec.published[-1] == (loop, loop.state)
        if dead:
            assert loop.state.fault == "OSError: gone"
            sim.read, loop.exchange = read, rec.exchange  # type: ignore[method-assign]
        loop.hold(False)  # (a dead driver's stop leaves its fault: released as an operator would)
        q0 = loop.state.q.copy()
        states = run(loop, 0.2, wrench=[40.0, 0, 0, 0, 0, 0], t0=10.0)
        assert not states[-1].holding and np.abs(states[-1].q - q0).max() > 1e-3


def test_a_failing_publish_never_ends_the_loop_thread(ur10):
    loop, _sim = make_loop(ur10)

    class BadIO:
        def poll(self, loop):
            pass

        def publish(self, loop, state):
            raise RuntimeError("shared memory gone")

    loop.io = BadIO()
    loop.start()
    try:
        until(lambda: loop.stats.count, lambda n: n > 20, what="20 cycles")  # each one's publish raised
        assert loop._thread is not None and loop._thread.is_alive()
        assert loop.fault and "shared memory gone" in loop.fault
    finally:
        loop.io = None
        loop.stop()


def test_nan_inputs_are_rejected_and_model_faults_hold(ur10):
    loop, sim = make_loop(ur10)
    loop.set_wrench([1.0, 0, 0, 0, 0, 0])
    good = loop._command
    for bad in ([np.nan, 0, 0, 0, 0, 0], [np.inf] * 6, [1, 2, 3], [1e6, 0, 0, 0, 0, 0]):
        with pytest.raises(InputError):
            loop.set_wrench(bad)
        assert loop._command is good
    with pytest.raises(InputError, match="frame"):
        loop.set_wrench([0] * 6, frame="world")
    with pytest.raises(InputError):
        loop.set_target(np.full((4, 4), np.nan))

    class Broken(Solver):
        mapping = None

        def step(self, q, qd, f, dt, tau=None, config=None):
            return q, np.full_like(q, np.nan)

    loop.solver = Broken()
    sent = []
    orig = sim.send
    sim.send = lambda q, qd: (sent.append((q.copy(), qd.copy())), orig(q, qd))  # type: ignore
    for i in range(5):
        s = loop.step(now=100.0 + i * DT)  # any clock: the first cycle stamps the command
    assert s.fault and "non-finite" in s.fault and s.holding
    assert all(np.all(np.isfinite(q)) and np.all(np.isfinite(v)) for q, v in sent)


def test_threaded_loop_keeps_running_and_reports_stats(ur10):
    loop, sim = make_loop(ur10)
    loop.start()
    try:
        deadline = time.monotonic() + 30  # only ends a hung test: 0.6 s of the loop's own cycles
        while loop.cycle < 0.6 / DT and time.monotonic() < deadline:
            with pytest.raises(InputError):
                loop.set_wrench([np.nan] * 6)
            loop.set_wrench([2.0, 0, 0, 0, 0, 0])
            time.sleep(0.01)
        assert loop.running
    finally:
        loop.stop()
    st = loop.stats.summary()
    assert st["cycles"] > 100 and loop.state.fault is None
    assert 0 <= st["period_error_p50_us"] <= st["period_error_p99_us"] <= st["period_error_max_us"]
    assert sim.q[0] != Q0[0] or sim.q[1] != Q0[1]  # it moved


def test_sub_chain_robot_runs_in_the_loop(rng):
    from fdcontrol.model.robot import URDF_DIR

    sub = RobotModel.from_urdf(URDF_DIR / "ur10.urdf", "base_link", "wrist_3_link")
    loop, sim = make_loop(sub)
    run(loop, 0.2, wrench=[1.0, 0, 0, 0, 0, 0])
    assert np.all(np.isfinite(sim.q))


def test_a_fresh_target_or_release_ends_a_watchdog_hold(ur10):
    loop, sim = make_loop(ur10, law=ControlLaw(mode="motion"))
    run(loop, 0.1, wrench=[5.0, 0, 0, 0, 0, 0])
    t = loop._command.t
    assert loop.step(now=t + 0.5).watchdog == "tripped"
    target = ur10.pose(sim.q)
    target[:3, 3] += [0.0, 0.02, 0.0]
    loop.set_target(target)
    states = [loop.step(now=t + 0.5 + i * DT) for i in range(1500)]
    assert states[-1].watchdog == "idle" and not states[-1].holding
    np.testing.assert_allclose(ur10.pose(sim.q)[:3, 3], target[:3, 3], atol=1e-3)
    loop.set_wrench([1.0, 0, 0, 0, 0, 0], t=t + 1.0)
    assert loop.step(now=t + 2.0).watchdog == "tripped"
    loop.hold(False)
    assert loop.step(now=loop._command.t + 1.0 if loop._command else 0.0).watchdog == "idle"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.3, -0.3, 0.9, -0.9, 2.0, float("nan")]),
                          st.floats(-2.0, 2.0, allow_nan=False)), min_size=1, max_size=7), st.data())
def test_following_check_is_the_documented_deviation(pairs, data):
    """The following check against the rule written with numpy here: the deviation of a joint runs on
    (|q̇| − |q̇_ref| when both have the same sign, |q̇| otherwise); the largest (the first of equals), once
    over FOLLOW_SPEED for FOLLOW_TIME, is named in the fault; a NaN is left to the driver's fault path."""
    from fdcontrol.loop.liveness import FOLLOW_SPEED, FOLLOW_TIME, Following

    qd = np.array([p[0] for p in pairs])
    ref = np.array([p[1] for p in pairs])
    if data.draw(st.booleans()):
        ref[data.draw(st.integers(0, len(ref) - 1))] = 0.0  # exact zeros: np.sign(0) = 0
    same = np.sign(qd) == np.sign(ref)
    dev = np.where(same, np.abs(qd) - np.abs(ref), np.abs(qd))
    j = int(np.argmax(dev))
    f = Following()
    first = f.check(qd, ref, 10.0)
    later = f.check(qd, ref, 10.0 + FOLLOW_TIME)
    assert first is None
    if dev[j] > FOLLOW_SPEED:
        assert later is not None and later.startswith(f"the arm does not follow the reference: joint {j} ")
    else:
        assert later is None


# ------------------------------------------------------------------ the hold, stop and brake paths, in-process
class _Recorder:
    """The loop's io and exchange: what was published, in order."""

    def __init__(self) -> None:
        self.published: list[tuple[object, object]] = []
        self.exchanged: list[tuple[object, object]] = []

    def poll(self, loop) -> None:
        pass

    def publish(self, loop, state) -> None:
        self.published.append((loop, state))

    def exchange(self, loop, state) -> None:
        self.exchanged.append((loop, state))


def _moving_loop(ur10):
    """A loop whose reference moves (0.3 s of a 40 N push), its driver's commands recorded from then on."""
    loop, sim = make_loop(ur10)
    run(loop, 0.3, wrench=[40.0, 0, 0, 0, 0, 0])
    assert np.max(np.abs(loop.qd_ref)) > 0.02
    sent: list[tuple[np.ndarray, np.ndarray]] = []
    orig = sim.send
    sim.send = lambda q, qd: (sent.append((np.array(q), np.array(qd))), orig(q, qd))  # type: ignore[method-assign]
    rec = _Recorder()
    loop.io, loop.exchange = rec, rec.exchange
    return loop, sim, sent, rec


def test_a_fault_holds_with_one_braking_step_and_says_when_it_began(ur10):
    """A cycle that raised (ControlLoop._run hands it to _on_exception): the fault and when it began, a hold,
    the goals dropped, and exactly one braking step of the linear ramp at the acceleration limit sent,
    published and exchanged — written out here: q̇ (1 − 1/r), r = max_j |q̇_j| / (a_j dt)."""
    loop, _sim, sent, rec = _moving_loop(ur10)
    target = ur10.pose(loop.state.q)
    loop.set_target(target)
    prev, q_ref = loop.qd_ref.copy(), loop.state.q_ref.copy()
    a = loop.limits.max_acceleration
    r = float(np.max(np.abs(prev) / (a * loop.period)))
    assert r > 1
    want = prev * (1 - 1 / r)
    t0 = time.monotonic()
    loop._on_exception(OSError("x" * 500))
    t1 = time.monotonic()
    assert loop.fault == ("OSError: " + "x" * 500)[:400] and len(loop.fault) == 400
    assert t0 <= loop.fault_at <= t1 and t0 <= loop.last_cycle_at <= t1
    assert loop._hold_request and loop._held and loop._target is None
    np.testing.assert_allclose(loop.qd_ref, want, rtol=0, atol=1e-15)
    assert len(sent) == 1
    np.testing.assert_allclose(sent[0][1], want, rtol=0, atol=1e-15)
    np.testing.assert_allclose(sent[0][0], q_ref + loop.period * want, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(loop.qd_state, want)
    loop.qd_state[0] += 1.0  # the filter's state is its own array, not the reference sent
    assert loop.qd_ref[0] == pytest.approx(want[0], abs=1e-15)
    s = loop.state
    assert s.fault == loop.fault and s.fault_at == loop.fault_at and s.holding
    np.testing.assert_allclose(s.qd_ref, want, rtol=0, atol=1e-15)
    assert s.safety_mode == loop.driver.safety_mode
    assert rec.published == [(loop, s)] and rec.exchanged == [(loop, s)]
    # the same failure again: a new message, the time it began kept, the ramp's next step
    began = loop.fault_at
    loop._on_exception(RuntimeError("again"))
    assert loop.fault == "RuntimeError: again" and loop.fault_at == began
    np.testing.assert_allclose(sent[1][1], want * (1 - 1 / (r - 1)), rtol=1e-12, atol=1e-15)


def test_a_fault_with_a_non_finite_reference_or_a_dead_driver_still_holds(ur10, capsys):
    loop, sim, sent, rec = _moving_loop(ur10)
    loop.qd_ref = np.array([np.inf, 0, 0, 0, 0, 0])  # the ramp from it is not finite: zero instead
    loop._on_exception(ValueError("bad"))
    assert sent[-1][1].shape == (6,) and loop.qd_ref.shape == (6,)
    assert np.array_equal(sent[-1][1], np.zeros(6)) and np.array_equal(loop.qd_ref, np.zeros(6))
    loop.qd_ref = np.full(6, np.nan)
    loop._on_exception(ValueError("bad"))
    assert loop.qd_ref.shape == (6,) and np.array_equal(loop.qd_ref, np.zeros(6))

    def broken(*args):
        raise RuntimeError("broken")

    loop.end_goals = broken  # type: ignore[method-assign]  # dropping the goals fails: still held, no raise
    loop.exchange = broken  # the driver's exchange fails: no raise either
    loop._on_exception(ValueError("once more"))
    assert loop.state.holding and loop.state.fault == "ValueError: once more"
    loop.exchange = rec.exchange

    def dead(q, qd):
        raise OSError("gone")

    sim.send = dead  # type: ignore[method-assign]

    class BadIO(_Recorder):
        def publish(self, loop, state) -> None:
            raise RuntimeError("shared memory gone")

    bad = BadIO()
    loop.io = bad
    loop.limits = None  # type: ignore[assignment]  # the braking step itself fails: zero, still held
    loop._on_exception(ValueError("worse"))
    assert loop.state.holding and loop.state.fault == "ValueError: worse"
    np.testing.assert_array_equal(loop.qd_ref, np.zeros(6))
    err = capsys.readouterr().err
    assert ("fdcontrol loop: ValueError: worse; publishing the fault failed: RuntimeError: shared memory gone"
            in err)
    assert rec.exchanged[-1] == (loop, loop.state)  # the exchange still got the held state


def test_stop_without_a_thread_sends_rest_and_says_why_when_the_driver_is_dead(ur10):
    loop, sim, sent, rec = _moving_loop(ur10)
    reads = []
    read = sim.read
    sim.read = lambda: reads.append(read()) or reads[-1]  # type: ignore[method-assign]
    loop.stop()
    js = reads[-1]
    assert len(sent) == 1
    np.testing.assert_array_equal(sent[0][0], js.q)
    np.testing.assert_array_equal(sent[0][1], np.zeros(6))
    s = loop.state
    assert s.running is False and not loop.running and loop._thread is None
    np.testing.assert_array_equal(s.q, js.q)
    np.testing.assert_array_equal(s.q_ref, js.q)
    np.testing.assert_array_equal(s.qd, js.qd)
    np.testing.assert_array_equal(s.qd_ref, np.zeros(6))
    np.testing.assert_array_equal(loop.qd_ref, np.zeros(6))
    assert rec.published[-1] == (loop, s) and rec.exchanged[-1] == (loop, s)

    def dead():
        raise OSError("gone")

    sim.read = dead  # type: ignore[method-assign]
    loop.stop()
    assert loop.state.fault == "OSError: gone" and loop.state.running is False
    loop.fault = "an earlier fault"  # the first fault stays the one reported
    loop.stop()
    assert loop.state.fault == "an earlier fault"


def test_braking_time_and_brake_step_closed_form(ur10):
    from fdcontrol.loop.cycle import brake_step

    loop, _sim = make_loop(ur10)
    loop.qd_ref = np.array([0.4, -0.8, 0.0, 0.1, 0.0, 0.0])
    assert loop.braking_time() == pytest.approx(0.8 / 4.0, rel=1e-15)  # max |q̇_j| / a_j at 4 rad/s²
    loop.limits.max_acceleration = 1.0  # lowered: a stop never brakes softer than the loop was built with
    assert loop.braking_time() == pytest.approx(0.2, rel=1e-15)
    loop.limits.max_acceleration = 8.0  # raised: a stop beginning now brakes at the limit in force
    assert loop.braking_time() == pytest.approx(0.1, rel=1e-15)
    np.testing.assert_allclose(brake_step(np.array([1.0, -0.05, 0.0, -1.0]), np.array([2.0, 2.0, 2.0, 1.0]), 0.1),
                               [0.8, 0.0, 0.0, -0.9], rtol=0, atol=1e-15)
    np.testing.assert_allclose(brake_step(np.array([0.3, -0.3]), 1.0, 0.1), [0.2, -0.2], rtol=0, atol=1e-15)


def test_an_input_is_fresh_up_to_its_timeout_on_its_own_clock():
    from fdcontrol.loop.cycle import Command, _fresh

    c = Command(np.zeros(6), 1, 10.0)
    assert _fresh(None, 11.0, 0.1) is None
    assert _fresh(c, None, 0.1) is c and _fresh(Command(np.zeros(6), 1, None), 99.0, 0.1) is not None
    assert _fresh(c, 10.25, 0.25) is c  # exactly the timeout: still fresh
    assert _fresh(c, 10.2500001, 0.25) is None
    assert _fresh(c, 9.0, 0.25) is c  # (a stamp from after now: not stale)


def test_hold_and_release(ur10):
    loop, _sim = make_loop(ur10, law=ControlLaw(mode="motion"))
    run(loop, 0.05, wrench=[5.0, 0, 0, 0, 0, 0])
    loop.set_target(ur10.pose(loop.state.q))
    loop.set_twist([0.01, 0, 0, 0, 0, 0])
    loop.set_wrench([1.0, 0, 0, 0, 0, 0])
    assert loop._command is not None and loop._twist is not None and loop._target is not None
    loop.fault, loop.fault_at = "a fault", 5.0
    loop.hold()  # holding keeps the fault and the inputs (the watchdog and the API report them)
    assert loop._hold_request and loop.fault == "a fault" and loop.fault_at == 5.0 and loop._twist is not None
    loop.hold(False)  # an explicit release: the fault, the stale inputs and the goals are gone
    assert not loop._hold_request and loop.fault is None and np.isnan(loop.fault_at)
    assert loop._command is None and loop._twist is None and loop._target is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, -0.0, 0.3, -0.3, 0.9, -0.9, 2.0, float("nan"), float("inf")]),
                          st.sampled_from([0.0, -0.0, 0.3, -0.3, 0.9, -0.9, 2.0, float("nan"), float("-inf")])),
                min_size=1, max_size=7))
def test_following_verdict_and_worst_joints_are_numpys_argmax(pairs):
    """The plain-float scan the check runs names the joints numpy's argmax names (the first of equals, a NaN
    first of all) with their values, for the lag verdict (|q̇ − q̇_ref|) and the run-on deviation alike; the
    verdict after FOLLOW_TIME names that joint and its difference."""
    from fdcontrol.loop.liveness import FOLLOW_SPEED, FOLLOW_TIME, Following, worst_joints

    qd = np.array([p[0] for p in pairs])
    ref = np.array([p[1] for p in pairs])
    with np.errstate(invalid="ignore"):
        off = np.abs(qd - ref)
        dev = np.where(np.sign(qd) == np.sign(ref), np.abs(qd) - np.abs(ref), np.abs(qd))
    j, k = int(np.argmax(off)), int(np.argmax(dev))
    got = worst_joints(qd.tolist(), ref.tolist())
    assert (got[0], got[2]) == (j, k)
    np.testing.assert_array_equal([got[1], got[3]], [off[j], dev[k]])
    from fdcontrol.loop import liveness

    for scan in (liveness._worst_arrays, liveness._scan):  # the compiled scan the check runs, and its source
        if scan is not None:
            c = scan(qd, ref)
            assert (c[0], c[2]) == (j, k)
            np.testing.assert_array_equal([c[1], c[3]], [off[j], dev[k]])
    f = Following()
    f.check(qd, ref, 10.0)
    f.check(qd, ref, 10.0 + FOLLOW_TIME)
    if off[j] > FOLLOW_SPEED:
        assert (f.ok, f.joint, f.error) == (False, j, float(off[j]))
    else:
        assert f.ok and f.joint == -1


def test_stop_brakes_to_standstill_while_the_input_stream_goes_on(ur10):
    """stop() while a wrench stream keeps the arm moving: the thread brakes through the limits (never a step
    above a·dt), ends at rest within the braking time on its own cycle count, and only then stop() returns."""
    import threading

    loop, sim = make_loop(ur10)
    sent: list[np.ndarray] = []
    orig = sim.send
    sim.send = lambda q, qd: (sent.append(np.array(qd)), orig(q, qd))  # type: ignore[method-assign]
    streaming = threading.Event()
    streaming.set()

    def stream() -> None:
        for _ in range(3000):  # bounded: 30 s at most
            if not streaming.is_set():
                return
            loop.set_wrench([40.0, 0, 0, 0, 0, 0])
            time.sleep(0.01)

    feeder = threading.Thread(target=stream, daemon=True)
    loop.start()
    feeder.start()
    try:
        until(lambda: loop.cycle, lambda n: n > 0.4 / DT, what="0.4 s of the loop's cycles")
        before = loop.cycle
        need = loop.braking_time() / DT  # cycles of the ramp from the speed now
        assert np.max(np.abs(loop.qd_ref)) > 0.02
        assert loop.state.running is True
        loop.stop()  # the stream goes on meanwhile
        assert not loop.running and loop.state.running is False
        assert loop.cycle - before <= need + 0.2 / DT  # braked and ended, not run on until the join's bound
    finally:
        streaming.clear()
        feeder.join(5)
        loop.stop()
    assert _velocity_steps_ok(sent, loop.limits.max_acceleration) <= 1 + 1e-9
    assert np.max(np.abs(sent[-1])) == 0.0


def test_a_fault_brakes_at_the_limit_in_force_when_it_is_above_the_floor_and_reports_the_safety_mode(ur10):
    """The braking step of a fault at a_b = max(the acceleration limit in force, the floor the loop was built
    with): raised to 8 rad/s² (floor 4), the ramp's step is q̇ (1 − 1/r), r = max_j |q̇_j| / (8 dt); the
    robot controller's safety mode goes into the held state."""
    loop, sim, sent, _rec = _moving_loop(ur10)
    loop.limits.max_acceleration = 8.0
    sim.safety_mode = "PROTECTIVE_STOP"
    prev = loop.qd_ref.copy()
    r = float(np.max(np.abs(prev) / (8.0 * loop.period)))
    assert r > 1
    loop._on_exception(OSError("lost"))
    np.testing.assert_allclose(sent[-1][1], prev * (1 - 1 / r), rtol=0, atol=1e-15)
    assert loop.state.safety_mode == "PROTECTIVE_STOP"
