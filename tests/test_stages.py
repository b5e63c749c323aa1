"""The cycle's stages: a part that is not configured is not in the cycle and does no work; one assembly
(build_loop) gives the service's loop; a stage added to the list runs in its place, with the cycle's dt."""

from __future__ import annotations

import math
from types import SimpleNamespace as NS

import numpy as np
import pytest

from fdcontrol.control.gains import GainRamp
from fdcontrol.control.link_loads import LinkLoads
from fdcontrol.control.posture import PostureTask
from fdcontrol.control.reactions import Rule
from fdcontrol.control.task import TaskSpace
from fdcontrol.control.trajectory import Move
from fdcontrol.control.workspace import Workspace
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.limits import LIMITS
from fdcontrol.limits.safety import BASIC_LIMITS
from fdcontrol.loop import ControlLoop, Stage, build_loop
from fdcontrol.loop import stages as st
from fdcontrol.loop.action import ActionInput
from fdcontrol.model.robot import HOME

DT = 0.002
BOX = {"min": [-2.0, -2.0, -1.0], "max": [2.0, 2.0, 2.5], "margin": 0.05}
LOAD = [{"link": "panda_link4", "plane": {"point": [0, 0, -1.0], "normal": [0, 0, 1]}, "margin": 0.05}]


def names(loop: ControlLoop) -> list[str]:
    return [s.name for s in loop.stages]


def run(loop: ControlLoop, n: int, t0: float = 0.0, wrench: bool = True) -> list:
    out = []
    for i in range(n):
        if wrench:
            loop.set_wrench([3.0, -2.0, 1.0, 0.0, 0.1, 0.0], t=t0 + i * DT)
        out.append(loop.step(now=t0 + i * DT))
    return out


@pytest.fixture
def count(monkeypatch):
    """count(cls, "method") → a list whose length is the number of calls of that method from now on."""
    def spy(cls, name):
        calls: list[int] = []
        real = getattr(cls, name)

        def wrapped(*a, **k):
            calls.append(1)
            return real(*a, **k)

        monkeypatch.setattr(cls, name, wrapped)
        return calls
    return spy


def lean(**kw) -> ControlLoop:
    return build_loop(driver="simulated", rate=1 / DT, **kw)


def test_the_default_loop_runs_only_the_core_stages():
    loop = lean()
    assert names(loop) == ["read", "sensor", "inputs", "law", "solver", "limits", "send", "publish"]
    assert [st.phase_of(s.order) for s in loop.stages] == ["read", "sense", "sense", "law", "map", "limits",
                                                          "send", "publish"]


# ---------------------------------------------------------------------- one test per optional stage
def test_task_space_parts_do_no_work_until_used(count):
    """No volumes, rules, move or ramp: the task space (there for the API) is not in the cycle."""
    calls = {m: count(TaskSpace, m) for m in ("step_gains", "step_volumes", "react", "step_move", "wrench",
                                              "joint_torque", "before")}
    loop = lean()
    assert isinstance(loop.task, TaskSpace)  # present (moves, rules and ramps arrive through the API)
    run(loop, 50)
    assert not set(names(loop)) & {"gain_ramps", "volumes", "reactions", "move", "task_wrench", "volumes_load"}
    assert {m: len(c) for m, c in calls.items()} == dict.fromkeys(calls, 0)
    # the same spies count once the parts are used: a ramp, then rules (the test can fail)
    k = loop.law.motion.stiffness
    loop.task.ramp = GainRamp(k, loop.law.motion.damping, 2 * k, loop.law.motion.damping, 0.02)
    run(loop, 2, t0=1.0)
    assert "gain_ramps" in names(loop) and len(calls["step_gains"]) == 2
    run(loop, 20, t0=1.1)
    assert "gain_ramps" not in names(loop)  # done: out of the cycle again
    assert np.allclose(loop.law.motion.stiffness, 2 * k)
    n = len(calls["step_gains"])
    run(loop, 10, t0=1.2)
    assert len(calls["step_gains"]) == n
    loop.task.request(None, [Rule("far", "force", ">", 1e6)])
    run(loop, 3, t0=1.3)
    assert "reactions" in names(loop) and len(calls["react"]) >= 2


def test_volumes_stage_only_with_a_workspace(count):
    tip, load = count(Workspace, "tip_wrench"), count(Workspace, "joint_torque")
    loop = lean()
    run(loop, 20)
    assert (len(tip), len(load)) == (0, 0)
    loop = lean(workspace_box=BOX)
    assert {"volumes", "task_wrench", "volumes_load"} <= set(names(loop))
    run(loop, 20)
    assert len(tip) == 20 and len(load) > 0


def test_move_stage_only_while_a_move_runs(count):
    step = count(Move, "step")
    loop = lean()
    run(loop, 5, wrench=False)
    assert "move" not in names(loop) and len(step) == 0
    s = loop.state
    goal = s.tip_pose.copy()
    goal[2, 3] += 0.01
    loop.task.request(Move(loop.robot, s.tip_pose, loop.period, loop.task.move_limits, goal_pose=goal))
    run(loop, 5, t0=0.1, wrench=False)
    assert "move" in names(loop) and len(step) == 5
    loop.task.move.cancel()
    run(loop, 3, t0=0.2, wrench=False)
    assert "move" not in names(loop)
    n = len(step)
    run(loop, 5, t0=0.3, wrench=False)
    assert len(step) == n


def test_posture_stage_only_when_configured(count):
    torque = count(PostureTask, "load")  # the stage's one call: N̄ᵀ and the posture's torque
    loop = build_loop(driver="simulated", robot="panda", rate=1 / DT, posture="off")
    run(loop, 20)
    assert "posture" not in names(loop) and len(torque) == 0
    loop = build_loop(driver="simulated", robot="panda", rate=1 / DT)  # auto: on for a redundant arm
    assert "posture" in names(loop)
    run(loop, 20)
    assert len(torque) >= 19  # (not on the activation cycle's hold… every cycle that moves)


def test_link_loads_stage_only_when_configured(count):
    torque = count(LinkLoads, "torque")
    loop = build_loop(driver="simulated", robot="panda", rate=1 / DT, posture="off")
    run(loop, 20)
    assert "link_loads" not in names(loop) and len(torque) == 0
    loop = build_loop(driver="simulated", robot="panda", rate=1 / DT, posture="off", link_loads=LOAD)
    assert "link_loads" in names(loop)
    run(loop, 20)
    assert len(torque) >= 19


def test_gamma_is_scheduled_before_the_joint_loads_only_when_there_are_some(count):
    """With a joint load (here link loads) and the γ schedule, γ is set at the cycle's q before the loads
    read H: one schedule evaluation per cycle (the solver finds it done); without joint loads, or with a
    fixed γ, the stage is not in the cycle."""
    from fdcontrol.mappings.fd import ForwardDynamics

    gamma_at = count(ForwardDynamics, "gamma_at")
    loop = build_loop(driver="simulated", robot="panda", rate=1 / DT, posture="off")
    assert "gamma_schedule" not in names(loop)
    loop = build_loop(driver="simulated", robot="panda", rate=1 / DT, posture="off", link_loads=LOAD,
                      gamma_schedule="fixed")
    assert "gamma_schedule" not in names(loop)
    loop = build_loop(driver="simulated", robot="panda", rate=1 / DT, posture="off", link_loads=LOAD)
    n = names(loop)
    assert n.index("gamma_schedule") < n.index("link_loads") < n.index("solver")
    del gamma_at[:]
    run(loop, 20)
    assert 10 <= len(gamma_at) <= 20  # at most once per cycle (none where q did not move), not again in the solver


def test_the_published_gamma_at_rest_is_the_schedules_value_there():
    """No input (the arm rests, the solver does not run): the state's γ is the schedule's value at the
    arm's q — 1e6 at the UR10's start pose, 1e3 with its elbow stretched — not the virtual model's
    initial γ; with a fixed γ it is that γ."""
    from fdcontrol.model.virtual import GAMMA, GAMMA_STRAIGHT

    stretched = [0.3, -1.2, 0.0, -1.9, -1.4, 0.2]
    for q0, expected in ((HOME["ur10"], GAMMA_STRAIGHT.default), (stretched, GAMMA.default)):
        loop = lean(driver_options={"q0": q0})
        states = run(loop, 5, wrench=False)
        assert not states[-1].qd_ref.any()  # at rest
        assert states[-1].gamma == expected == loop.solver.mapping.gamma_at(states[-1].q)
    loop = lean(driver_options={"q0": HOME["ur10"]}, gamma_schedule="fixed", gamma=3e3)
    assert run(loop, 3, wrench=False)[-1].gamma == 3e3


def test_action_interpolation_only_with_a_policy(count):
    target = count(ActionInput, "target")
    loop = lean(mode="compliance")
    run(loop, 10, wrench=False)
    assert "action" not in names(loop) and len(target) == 0
    loop.set_action(loop.state.tip_pose, 0.05, 1, t=0.1)
    run(loop, 5, t0=0.1, wrench=False)
    assert "action" in names(loop) and len(target) == 5
    loop.set_target(None)  # a target set directly ends the policy's goals
    run(loop, 5, t0=0.2, wrench=False)
    assert "action" not in names(loop) and len(target) == 5


def test_sensor_watchdog_only_with_a_law_that_reads_the_sensor(count):
    calls = count(st.SensorWatchdog, "run")
    loop = lean(mode="admittance")
    run(loop, 10)
    assert "sensor_watchdog" not in names(loop) and len(calls) == 0
    loop.law.mode = "force"  # a reaction or a test switches the mode in place: the stage joins
    run(loop, 10, t0=0.1)
    assert "sensor_watchdog" in names(loop) and len(calls) >= 9
    loop.law.mode = "admittance"
    run(loop, 3, t0=0.2)
    n = len(calls)
    run(loop, 10, t0=0.3)
    assert len(calls) == n


@pytest.mark.parametrize("name", ["jerk", "path_acceleration", "path_speed"])
def test_jerk_and_path_limits_only_when_configured(count, name):
    """Not configured: the limit's class is never called, the path speed's J̇q̇ is never evaluated, the
    limit is not among those that act. Configured: it runs every cycle — its class (the jerk limit, and
    every limit where numba is missing) or its part of the compiled twin (fdcontrol.limits.compiled,
    which records whether it acted, and for the path speed evaluates J̇q̇ on every cycle that moves: from the
    robot's chain inside its one call, so RobotModel.jacobian_rate is never called — test_limits checks that
    J̇q̇ against it and the robot's own jacobian_rate, called once per moving cycle, where there is no chain)."""
    from fdcontrol.model.robot import RobotModel

    calls, rate = count(LIMITS.get(name), "apply"), count(RobotModel, "jacobian_rate")
    loop = lean(limits=list(BASIC_LIMITS))
    seen = [dict(s.limits_active) for s in run(loop, 10)]
    assert name not in loop.limits.names and len(calls) == 0 and len(rate) == 0
    assert all(name not in a for a in seen)
    loop = lean(limits=[*BASIC_LIMITS, name])
    seen = [dict(s.limits_active) for s in run(loop, 10)]
    assert name in loop.limits.names
    if loop.limits._compiled is None:
        assert len(calls) == 10
    else:
        assert len(calls) == 0 and all(name in a for a in seen)
        assert not rate  # the path speed's J̇q̇: from the chain, inside the compiled call
        if name == "path_speed":
            assert loop.limits._chain is not None and loop.limits._chain.shape[0] == loop.robot.dof + 1


def test_position_reference_only_for_a_position_interface(count):
    calls = count(ControlLoop, "_position_reference")
    loop = lean()
    run(loop, 5)
    assert len(calls) == 0 and isinstance(loop.stages[names(loop).index("send")], st.SendVelocity)
    drv = SimulatedRobot(loop.robot, dt=DT, q0=np.array(HOME["ur10"]))
    drv.interface = "position"
    loop = build_loop(driver=drv, robot=loop.robot, rate=1 / DT)
    run(loop, 5)
    assert len(calls) == 5


# ---------------------------------------------------------------------- adding a stage
class Recorder(Stage):
    """A limit stage of one's own: it sees the cycle's dt and the solver's q̇, before the safety limits."""

    name, order = "recorder", st.SAFETY - 10

    def __init__(self) -> None:
        self.seen: list[float] = []

    def run(self, loop, c) -> None:
        self.seen.append(c.dt)
        c.qd_des = 0.5 * c.qd_des  # halves what the limits get


def test_an_added_stage_runs_in_its_place_with_the_cycles_dt():
    rec = Recorder()
    loop = lean(stages=(rec,))
    assert names(loop) == ["read", "sensor", "inputs", "law", "solver", "recorder", "limits", "send", "publish"]
    ref = lean()
    a, b = run(loop, 30), run(ref, 30)
    assert rec.seen == [DT] * 30
    # its effect on the references: the limits got half the solver's velocity (the first cycle that moves,
    # both from rest at the same q, no limit engaged: the reference of the loop with the stage is half the other's)
    assert a[0].qd_ref.tolist() == [0.0] * 6  # activation
    assert np.abs(b[1].qd_ref).max() > 1e-4 and np.allclose(a[1].qd_ref, 0.5 * b[1].qd_ref, rtol=1e-12, atol=0)
    with pytest.raises(TypeError, match="Stage"):
        lean(stages=(object(),))


# ---------------------------------------------------------------------- one assembly
def test_the_service_loop_and_the_library_loop_give_the_same_references():
    """The service's loop (its Runtime, from its settings) and build_loop in-process from the same
    parameters (the service's GET /config) produce the same references cycle by cycle on the same inputs."""
    from fdcontrol.server.runtime import Runtime
    from fdcontrol.server.settings import Settings

    cfg = dict(driver="simulated", robot="panda", stiffness=[300.0] * 3 + [30.0] * 3, mode="compliance",
               workspace_box=BOX, link_loads=LOAD, limits=["cartesian", "position", "velocity", "acceleration",
                                                           "jerk", "path_acceleration"], gamma=2000.0)
    service = Runtime(Settings(**cfg, autostart=False))
    lib = build_loop(service.params.model_dump())  # what GET /config returns, as plain data
    assert names(service.loop) == names(lib)
    assert {"volumes", "posture", "link_loads", "volumes_load"} <= set(names(lib))
    goal = lib.state.tip_pose.copy()
    goal[:3, 3] += [0.03, -0.02, 0.01]
    for loop in (service.loop, lib):
        loop.set_target(goal)
    a = [(s.q_ref.copy(), s.qd_ref.copy()) for s in run(service.loop, 300)]
    b = [(s.q_ref.copy(), s.qd_ref.copy()) for s in run(lib, 300)]
    assert np.abs(a[-1][1]).max() > 1e-3  # it moves
    for i, ((qa, va), (qb, vb)) in enumerate(zip(a, b, strict=True)):
        assert np.array_equal(qa, qb) and np.array_equal(va, vb), i
    # and a different parameter gives different references (the comparison can fail)
    other = build_loop({**service.params.model_dump(), "stiffness": [310.0] * 3 + [30.0] * 3})
    other.set_target(goal)
    c = [s.qd_ref.copy() for s in run(other, 300)]
    assert not all(np.array_equal(x, y) for x, (_, y) in zip(c, b, strict=True))
    service.close()


def test_build_loop_refuses_unknown_and_bad_parameters():
    with pytest.raises(ValueError, match="stifness"):
        build_loop(driver="simulated", stifness=[1.0] * 6)
    with pytest.raises(ValueError, match="command_timeout"):
        build_loop(driver="simulated", command_timeout=-1.0)
    with pytest.raises(ValueError, match="parts"):
        build_loop(driver="simulated", parts={"solvr": None})
    assert math.isclose(build_loop(driver="simulated", rate=250.0).period, 0.004)


# ---------------------------------------------------------------------- the docs' examples
def _block(path: str, after: str) -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / path).read_text()
    start = text.index("```python", text.index(after)) + len("```python")
    return text[start:text.index("```", start)]


def test_the_docs_added_stage_example_caps_the_wrist():
    ns: dict = {}
    exec(_block("docs/limits.md", "**Adding a stage.**"), ns)
    loop = ns["loop"]
    assert "wrist_guard" in names(loop)
    assert names(loop).index("wrist_guard") == names(loop).index("limits") - 1
    peak = 0.0
    for i in range(400):
        loop.set_wrench([0, 0, 0, 0, 0, 20.0], t=i * DT)  # a large torque about the tool axis
        peak = max(peak, abs(loop.step(now=i * DT).qd_ref[5]))
    assert 0.19 < peak <= 0.2 + 1e-12  # reached, never beyond


def test_the_readme_in_process_example():
    ns: dict = {}
    exec(_block("README.md", "The control loop in-process is the service's loop"), ns)
    assert ns["state"].cycle == 1 and names(ns["loop"]) == ["read", "sensor", "inputs", "law", "solver", "limits",
                                                            "send", "publish"]


# ---------------------------------------------------------------------- send
def test_the_sent_reference_is_numpys_bit_for_bit():
    """The send stage's compiled q_ref = q + dt q̇_ref and q̇_state = q̇_ref: numpy's two calls bit for bit on
    random vectors with NaN, ±Inf, ±0 and huge values; vectors of other lengths are refused (nothing written)."""
    if st._advance is None:
        pytest.skip("numba missing: the stage runs numpy's calls")
    rng = np.random.default_rng(3)
    special = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 5e-324]
    for k in range(3000):
        n = 6 + k % 2
        q, qd = (rng.normal(size=n) * 10.0 ** rng.integers(-12, 12, n) for _ in range(2))
        q[rng.integers(n)], qd[rng.integers(n)] = rng.choice(special), rng.choice(special)
        dt = [0.001, 0.002, 0.003, 1 / 500, 1e-4][k % 5]
        q_ref, qd_state = np.empty(n), np.empty(n)
        assert st._advance(q, dt, qd, q_ref, qd_state)
        with np.errstate(all="ignore"):
            want = q + dt * qd
        assert np.array_equal(q_ref.view(np.uint64), want.view(np.uint64)), k
        assert np.array_equal(qd_state.view(np.uint64), qd.view(np.uint64)), k
    out = np.full(6, 7.0)
    assert not st._advance(np.zeros(6), DT, np.zeros(7), out, np.empty(6)) and (out == 7.0).all()
    assert not st._advance(np.zeros(6), DT, np.zeros(6), np.empty(5), np.empty(6))


def test_the_send_stage_without_numba_sends_the_same(monkeypatch):
    """The send stage on numpy's calls (numba missing) gives the same states bit for bit; a reference that is
    not a float64 vector (float32) takes numpy's calls too."""
    def trace(loop):
        return [np.concatenate((s.q, s.qd, s.q_ref, s.qd_ref)) for s in run(loop, 200)]

    def send(qd_ref):
        sent = []
        loop = NS(driver=NS(send=lambda *a: sent.append(a)), cycle=0, qd_ref=None, qd_state=None)
        c = NS(q=np.linspace(-1.0, 1.0, 6), dt=DT, qd_ref=qd_ref, now=1.5, q_ref=None)
        st.SendVelocity().run(loop, c)
        assert sent == [(c.q_ref, qd_ref)] and loop.qd_ref is qd_ref and loop.cycle == 1 and loop.last_cycle_at == 1.5
        assert loop.qd_state is not qd_ref and np.array_equal(loop.qd_state, qd_ref)
        return c.q_ref, loop.qd_state

    compiled = trace(lean())
    ref = np.array([0.3, -0.2, 0.1, 1e-3, -0.7, 0.0])
    for r in (ref, ref.astype(np.float32), ref[::-1].copy()):
        want = np.linspace(-1.0, 1.0, 6) + DT * np.asarray(r)
        assert np.array_equal(send(r)[0], want)
    monkeypatch.setattr(st, "_advance", None)
    plain = trace(lean())
    assert np.abs(compiled[-1][-6:]).max() > 1e-4  # it moves
    assert all(np.array_equal(a, b) for a, b in zip(compiled, plain, strict=True))
    assert np.array_equal(send(ref)[0], np.linspace(-1.0, 1.0, 6) + DT * ref)


# ---------------------------------------------------------------------- publish
def _published_by_its_sources(loop: ControlLoop, t, q, qd, q_ref, qd_ref, pose, fc, f_meas, watchdog, sigma, holding,
                              seq, kappa_h, twist, now) -> dict:
    """Every field of the state _publish builds, read from its source one by one (its former dict display)."""
    active = dict(loop.limits.active)
    c = loop.solver.constraints
    active["virtual_joint_limit"] = c is not None and c.engaged
    task, posture, ll, action, drv, fw = loop.task, loop.posture, loop.link_loads, loop.action, loop.driver, \
        loop.following
    ws_distance, move_status, move_progress, reactions, reaction = (
        task.telemetry() if task is not None else (math.nan, "idle", math.nan, 0, None))
    link_distance, link_pair = task.link_telemetry() if task is not None else (math.nan, None)
    vm = loop.solver.virtual
    return {
        "t": t, "cycle": loop.cycle, "q": q, "qd": qd, "q_ref": q_ref, "qd_ref": qd_ref, "tip_pose": pose,
        "wrench": fc, "f_measured": f_meas, "mode": loop.law.mode, "running": loop.running,
        "holding": holding, "watchdog": watchdog, "seq_ack": seq, "fault": loop.fault, "sigma_min_j": sigma,
        "limits_active": active, "kappa_h": kappa_h,
        "posture_distance": posture.distance(q) if posture is not None else math.nan,
        "link_clearance": ll.clearance() if ll is not None and ll.loads else math.nan,
        "speed_scaling": drv.speed_scaling, "safety_mode": drv.safety_mode,
        "tip_twist": loop._zero6 if twist is None else twist, "stamp": now,
        "action_seq": action.seq if action is not None else 0,
        "action_used_at": action.used_at if action is not None else math.nan,
        "workspace_distance": ws_distance, "move_status": move_status, "move_progress": move_progress,
        "reaction_count": reactions, "reaction_event": reaction, "fault_at": loop.fault_at,
        "link_distance": link_distance, "link_pair": link_pair,
        "gamma": vm.gamma if vm is not None else math.nan,
        "following": fw.ok, "follow_joint": fw.joint, "follow_error": fw.error,
        "sensor_status": drv.sensor_status}


def _loops_with_and_without_parts():
    from fdcontrol import make_mapping
    from fdcontrol.loop.solvers import make_solver
    from fdcontrol.model.robot import RobotModel

    yield "default", lean()
    ur10 = RobotModel.load("ur10")
    yield "no task space, not FD", ControlLoop(ur10, SimulatedRobot(ur10, q0=np.array(HOME["ur10"])),
                                               make_solver(make_mapping("dls", ur10)))
    loop = build_loop(driver="simulated", robot="panda", rate=1 / DT, link_loads=LOAD, workspace_box=BOX)
    assert loop.posture is not None and loop.link_loads is not None
    yield "posture, link loads, volumes", loop
    loop = lean(mode="compliance")
    loop.set_action(loop.state.tip_pose, 0.05, 7, t=0.0)
    loop.task.request(None, [Rule("far", "force", ">", 1e6)])
    yield "action, reactions", loop
    loop = lean()
    s = loop.state
    goal = s.tip_pose.copy()
    goal[2, 3] += 0.01
    loop.task.request(Move(loop.robot, s.tip_pose, loop.period, loop.task.move_limits, goal_pose=goal))
    loop.fault, loop.fault_at = "a fault of the test's", 0.5
    loop.driver.speed_scaling, loop.driver.safety_mode, loop.driver.sensor_status = 0.25, "REDUCED", "status 7"
    loop.following.ok, loop.following.joint, loop.following.error = False, 3, 0.75
    yield "move, fault, driver's telemetry, not following", loop


@pytest.mark.parametrize("case", range(5))
def test_the_published_state_is_every_field_from_its_source(case):
    """_publish starts from the fields' values without their parts and writes the rest: with and without each
    part (posture, link loads, volumes, an action, reactions, a move, a task space, an FD virtual model), every
    field — key order, value, the very object — is the one read from its source."""
    name, loop = list(_loops_with_and_without_parts())[case]
    run(loop, 30)
    rng = np.random.default_rng(case)
    dof = loop.robot.dof
    for twist in (None, rng.normal(size=6)):
        args = (1.5, rng.normal(size=dof), rng.normal(size=dof), rng.normal(size=dof), rng.normal(size=dof),
                np.eye(4), rng.normal(size=6), rng.normal(size=6), "ok", 0.125, True, 42, 3.5, twist, 9.0)
        want = _published_by_its_sources(loop, *args)
        got = vars(loop._publish(*args))
        assert list(got) == list(want), name
        for k, v in want.items():
            w = got[k]
            same = w is v or w == v or (isinstance(v, float) and math.isnan(v) and math.isnan(w))
            assert same and type(w) is type(v), (name, k, w, v)
            if isinstance(v, np.ndarray | dict):
                assert w is v or (k == "limits_active" and w is not loop.limits.active), (name, k)


def test_the_limits_stage_tests_every_reference_the_limits_did_not_check():
    """The limits stage skips its test of the reference only for the very array the compiled limits found finite
    (SafetyLimits.checked): a NaN reference in another array (here from a wrapper around apply) is caught, the fault
    recorded and the arm held, though the limits checked the array they made."""
    loop = lean()
    run(loop, 3)
    real, made = loop.limits.apply, []

    def apply(*args, **kw):
        made.append(real(*args, **kw))
        return np.full(loop.robot.dof, np.nan)

    loop.limits.apply = apply  # type: ignore[method-assign]
    s = run(loop, 2, t0=0.1)[-1]
    if loop.limits._compiled is not None:
        assert made[-1] is loop.limits.checked  # the limits' own array: checked (the skip would have applied)
    assert s.fault and "non-finite reference" in s.fault and s.holding
    assert np.all(np.isfinite(s.qd_ref))
