"""The loop's one Configuration per cycle gives the references of the un-wired computation.

Oracle: each cycle is recomputed independently — robot.kinematics for pose and J, the control
law, joint_load and solver.step on a twin solver *without* a Configuration (so the FD solver runs
its own CRBA / Cholesky), and the same safety limits — and compared with the wired loop's q̇_ref.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from fdcontrol import RobotModel, make_mapping
from fdcontrol.control.law import ControlInput
from fdcontrol.control.posture import PostureTask, joint_load
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME

DT = 0.002


@pytest.mark.parametrize(("name", "mapping", "posture"), [
    ("ur10", "fd", False), ("panda", "fd", True), ("ur10", "jt", False), ("panda", "dls", False)])
def test_wired_loop_matches_unwired_computation(name: str, mapping: str, posture: bool) -> None:
    robot = RobotModel.load(name)
    sim = SimulatedRobot(robot, dt=DT, q0=np.array(HOME[name]))
    task = PostureTask(robot, stiffness=10.0, damping=2.0) if posture else None
    loop = ControlLoop(robot, sim, make_solver(make_mapping(mapping, robot)), rate=1 / DT, posture=task)
    twin = make_solver(make_mapping(mapping, robot))  # its own virtual model and pinocchio data
    limits = copy.deepcopy(loop.limits)
    worst, moved = 0.0, 0.0
    for k in range(300):
        now = k * DT
        loop.set_wrench([20 * np.cos(k / 40), 15 * np.sin(k / 30), -10.0, 0.5, -0.3, 1.0], t=now)
        q, qd, qd_state, prev = sim.q.copy(), sim.qd.copy(), loop.qd_state.copy(), loop.qd_ref.copy()
        pose, J = robot.kinematics(q)
        fc = loop.law(ControlInput(pose, J @ qd, np.zeros(6), loop._command.wrench, None, None))
        vm = getattr(twin, "virtual", None)
        tau = joint_load(vm, q, qd_state, task, None) if vm is not None else None
        _, qd_des = twin.step(q, qd_state, fc, DT) if tau is None else twin.step(q, qd_state, fc, DT, tau)
        expected = limits.apply(q, qd_des, prev, J, DT) if k else np.zeros(robot.dof)
        got = loop.step(now=now).qd_ref
        worst = max(worst, float(np.max(np.abs(got - expected))))
        moved = max(moved, float(np.max(np.abs(got))))
    assert moved > 1e-2  # the comparison is not between two arms at rest
    assert worst < 1e-12


def test_loop_updates_one_configuration_on_the_solvers_virtual_model() -> None:
    robot = RobotModel.load("ur10")
    sim = SimulatedRobot(robot, dt=DT, q0=np.array(HOME["ur10"]))
    solver = make_solver(make_mapping("fd", robot))
    loop = ControlLoop(robot, sim, solver, rate=1 / DT)
    loop.step(now=0.0)
    assert loop.config.virtual is solver.virtual
    np.testing.assert_allclose(loop.state.tip_pose, robot.pose(loop.state.q), atol=1e-12)
    other = make_solver(make_mapping("fd", robot))
    loop.reconfigure(solver=other)
    loop.step(now=DT)
    assert loop.config.virtual is other.virtual  # a new solver brings its own virtual model


def test_fd_inside_step_equals_the_general_path() -> None:
    """The FD solver's common case (one Euler step from inside the virtual limits, the cycle's factor)
    gives bit for bit what its general path (hooks, integrator, active set) gives — also where the step
    leaves the limits and is projected back, and from outside them (the general path itself)."""
    from fdcontrol.loop.solvers import _AccelerationSolver
    from fdcontrol.model.configuration import Configuration

    robot = RobotModel.load("ur10")
    rng = np.random.default_rng(3)
    fast, general = (make_solver(make_mapping("fd", robot)) for _ in range(2))
    conf = Configuration(robot, virtual=fast.virtual)
    lo, up = robot.limits.lower, robot.limits.upper
    used = {"inside": 0, "projected": 0, "outside": 0}
    for k in range(300):
        q = rng.uniform(lo, up)
        if k % 3 == 1:  # a hair inside a limit, moving out fast: the step crosses it
            j = k % robot.dof
            q[j] = up[j] - 1e-6
        elif k % 3 == 2:  # at a limit: not strictly inside
            q[k % robot.dof] = lo[k % robot.dof]
        qd, f = rng.normal(scale=2.0, size=robot.dof), rng.normal(scale=50.0, size=6)
        qd[k % robot.dof] = abs(qd[k % robot.dof]) + 1.0 if k % 3 == 1 else qd[k % robot.dof]
        conf.update(q)
        got = fast.step(conf.q, qd, f, DT, config=conf)
        want = _AccelerationSolver.step(general, conf.q, qd, f, DT, config=conf)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), k
        assert np.array_equal(fast.constraints.active, general.constraints.active), k
        inside = fast.constraints.inside(q)
        used["inside" if inside and fast.constraints.inside(got[0]) else "projected" if inside else "outside"] += 1
    assert min(used.values()) > 20, used


def test_fd_locked_step_reuses_the_equation_of_its_active_set_bit_for_bit() -> None:
    """At a virtual joint limit the FD step decides the active set on (H, b) at the projected q; its q̈ then
    reuses that H and J (one CRBA per step, not two) and gives bit for bit what the locked dynamics computed
    afresh (LockedDynamics: CRBA, H, b = Jᵀf + τ at the same q) give."""
    robot = RobotModel.load("panda")
    rng = np.random.default_rng(11)
    reuse, afresh = (make_solver(make_mapping("fd", robot)) for _ in range(2))
    crba = {"reuse": 0, "afresh": 0}
    for key, sol in (("reuse", reuse), ("afresh", afresh)):
        def counted(q, inner=sol.virtual._crba_and_jacobian, key=key):
            crba[key] += 1
            return inner(q)
        sol.virtual._crba_and_jacobian = counted
    before = afresh.before_substep

    def forget(*args):  # the twin computes the step's q̈ afresh (as before the reuse)
        out = before(*args)
        afresh._equation = None
        return out

    afresh.before_substep = forget
    lo, up = afresh.constraints.lower, afresh.constraints.upper
    locked_steps = 0
    for k in range(200):
        q = rng.uniform(lo, up)
        j = k % robot.dof
        q[j] = (up[j] + 0.01) if k % 2 else (lo[j] - 0.01)  # beyond a virtual limit: the general path
        qd = rng.normal(scale=1.0, size=robot.dof)
        f = rng.normal(scale=30.0, size=6)
        a, b = reuse.step(q, qd, f, DT), afresh.step(q, qd, f, DT)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), k
        assert np.array_equal(reuse.constraints.active, afresh.constraints.active), k
        locked_steps += bool(afresh.constraints.active.any())
    assert locked_steps > 40, locked_steps
    assert crba["afresh"] - crba["reuse"] == locked_steps, crba  # one CRBA fewer per locked step


@pytest.mark.parametrize("name", ["panda", "fr3"])
def test_fd_step_skips_the_schedule_the_gamma_schedule_stage_ran_on_this_configuration(name: str) -> None:
    """With a joint load (the posture task) the loop's gamma_schedule stage schedules γ on the cycle's Configuration
    before the solver: the solver's step then skips its own test of J and the schedule's call (that very update's J:
    the schedule would return at once) — bit for bit the references and γ of a twin loop whose solver is made to run
    them, cycle after cycle, the arm pushed through the γ band, to its regularizing γ and against virtual limits
    (inset). On an update the schedule did not see (a stale J, or none) the step schedules γ itself."""
    robot = RobotModel.load(name)

    def build() -> ControlLoop:
        sim = SimulatedRobot(robot, dt=DT, q0=np.array(HOME[name]))
        return ControlLoop(robot, sim, make_solver(make_mapping("fd", robot), limit_inset=0.4), rate=1 / DT,
                           posture=PostureTask(robot, stiffness=10.0, damping=2.0))

    loop, twin = build(), build()
    assert "gamma_schedule" in [s.name for s in loop.stages]
    m, tm = loop.solver.mapping, twin.solver.mapping
    step, twin_step, at_limit = loop.solver.step, twin.solver.step, loop.solver._euler_limit
    skipped, limited, gammas, poses = [0], [0], set(), []

    def counted(q, qd, wrench, dt, tau=None, config=None):
        skipped[0] += config is not None and m.scheduled_jacobian is config.jacobian
        return step(q, qd, wrench, dt, tau, config)

    def unskipped(q, qd, wrench, dt, tau=None, config=None):
        tm.scheduled_jacobian = None  # as before the stage's schedule: the solver runs the test and the schedule
        return twin_step(q, qd, wrench, dt, tau, config)

    def limit(*args):
        limited[0] += 1
        return at_limit(*args)

    loop.solver.step, twin.solver.step, loop.solver._euler_limit = counted, unskipped, limit  # type: ignore[method-assign]
    for k in range(1500):
        now = k * DT
        w = [60.0, 30 * np.sin(k / 300), -20.0, 0.0, 0.0, 0.0]
        loop.set_wrench(w, t=now)
        twin.set_wrench(w, t=now)
        got, want = loop.step(now=now), twin.step(now=now)
        np.testing.assert_array_equal(got.qd_ref, want.qd_ref)
        assert m.gamma == tm.gamma
        gammas.add(m.gamma)
        poses.append(got.q)
    assert skipped[0] > 1000 and limited[0] > 100 and m.gamma0 in gammas and len(gammas) > 20, \
        (skipped[0], limited[0], len(gammas))
    # the Configuration updated at the run's poses, the schedule not run on it (or run, then at another q without it):
    # the step schedules γ at the Configuration's q — the value of the schedule of an independent mapping there
    oracle = make_mapping("fd", robot)
    conf, qd = loop.config, np.zeros(robot.dof)
    seen = set()
    for k, q in enumerate(poses[::25]):
        conf.update(q)
        if k % 2:
            m.schedule(conf.q, conf)  # the stage's, then one at another q (no Configuration)
            m.schedule(poses[0])
        step(conf.q, qd, np.ones(6), DT, None, conf)
        want = oracle.gamma_at(q, conf.jacobian)
        assert m.gamma == want, (k, m.gamma, want)
        seen.add(want)
    assert len(seen) > 5
