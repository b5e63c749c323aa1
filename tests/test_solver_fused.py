"""The FD solver's fused calls in the loop's common case (one Euler step from inside the virtual limits, the cycle's
Cholesky factor) against what they replace, bit for bit: ``_fd_in`` — Jᵀf ± the joint load, pinocchio's LDLᵀ
solve, − c q̇, the Euler step and the limits' test of q⁺ — and ``_pre`` — the γ schedule's test of J
(``sigma_min_above``), ``JointLimitConstraints.inside`` and ``any(q̇)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol import RobotModel, make_mapping
from fdcontrol.loop import solvers
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.conditioning import sigma_min_above
from fdcontrol.model.spatial import finite
from fdcontrol.model.virtual import REGULAR_SIGMA, VirtualModel

if TYPE_CHECKING:
    from fdcontrol.control.law import ControlLaw

pytestmark = pytest.mark.skipif(solvers._fd_in is None, reason="numba (the fast extra) is not installed")


def _special(rng: np.random.Generator, v: np.ndarray, k: int) -> np.ndarray:
    """v with, every few draws, a zero of either sign, a NaN or an infinity in one entry."""
    v = v.copy()
    if k % 5 == 0:
        v[k % len(v)] = (0.0, -0.0, np.nan, np.inf, -np.inf)[(k // 5) % 5]
    return v


@pytest.mark.parametrize("name", ["ur10", "panda", "fr3"])
def test_the_fused_inside_step_is_the_solve_and_euler_step_bit_for_bit(name: str) -> None:
    """_fd_in against rhs = Jᵀf − load (or + load) by numpy, pinocchio.cholesky.solve and _euler_step with the
    inside test, on random poses, γ, loads, q̇ (zeros of either sign, NaN, ±∞ among them) and scales."""
    robot = RobotModel.load(name)
    rng = np.random.default_rng(7)
    c = make_solver(make_mapping("fd", robot)).constraints
    bounds = c._tol_bounds  # rows: c._lo_tol, c._up_tol (views of them)
    assert np.shares_memory(bounds, c._lo_tol) and (bounds[0] == c._lo_tol).all() and (bounds[1] == c._up_tol).all()
    outside = checked = 0
    for gamma in (1e3, 3.7e4, 1e6, 1e9):
        vm = VirtualModel(robot, gamma)
        m, d = vm.model, vm.model.createData()
        U, D, nvt = d.U, d.D, np.array(d.nvSubtree_fromRow, dtype=np.int64)  # views: the factor decompose writes
        n = m.nv
        for k in range(500):
            q = rng.uniform(robot.limits.lower, robot.limits.upper)
            pin.crba(m, d, q, pin.Convention.WORLD)
            pin.cholesky.decompose(m, d)
            scale = 10.0 ** rng.uniform(-6, 4)
            jtf = _special(rng, rng.normal(size=n) * scale, k)
            load = _special(rng, rng.normal(size=n) * scale, k + 2)
            qd = _special(rng, rng.normal(scale=3.0, size=n), k + 3)
            dt, decay = float(rng.choice([1e-3, 2e-3])), float(rng.choice([10.0, 0.0, 3.3]))
            sub = bool(k % 2)
            x = pin.cholesky.solve(m, d, jtf - load if sub else jtf + load)
            q1, qd1 = solvers._euler(q, qd, x, decay, dt)
            inside = c.inside(q1)
            got_q, got_qd = np.empty(n), np.empty(n)
            got = solvers._fd_in(U, D, nvt, jtf, load, sub, q, qd, decay, dt, bounds, got_q, got_qd)
            assert got_q.tobytes() == q1.tobytes() and got_qd.tobytes() == qd1.tobytes(), (gamma, k)
            assert bool(got & 1) == inside, (gamma, k)
            assert bool(got & 2) == finite(qd1), (gamma, k)
            checked += bool(got & 2)
            outside += not inside
    assert outside > 100 and 100 < checked < 5500, (outside, checked)


def test_the_fused_tests_are_the_schedules_the_limits_and_any() -> None:
    """_pre's bits against sigma_min_above(J, REGULAR_SIGMA), JointLimitConstraints.inside(q) and any(q̇.tolist()):
    Jacobians on both sides of σ_reg (C and Fortran order), q strictly inside, on and past a limit, NaN, and q̇ of
    zeros of either sign, NaN and ∞."""
    robot = RobotModel.load("ur10")
    c = make_solver(make_mapping("fd", robot)).constraints
    rng = np.random.default_rng(11)
    seen = set()
    for k in range(3000):
        U, _ = np.linalg.qr(rng.normal(size=(6, 6)))
        V, _ = np.linalg.qr(rng.normal(size=(6, 6)))
        sv = np.sort(rng.uniform(0.0, 2.0, 6))[::-1]
        sv[-1] = rng.choice([0.0, REGULAR_SIGMA * rng.uniform(0.5, 1.5)])
        J = U @ np.diag(sv) @ V.T
        if k % 2:
            J = np.asfortranarray(J)
        q = rng.uniform(c.lower, c.upper)
        j = k % 6
        q[j] = (q[j], c.lower[j], c.upper[j], c.upper[j] + 1e-3, c._lo_tol[j], np.nan)[k % 6]
        qd = np.zeros(6) if k % 7 < 4 else rng.normal(size=6)
        qd[(k // 3) % 6] = (0.0, -0.0, np.nan, np.inf, 0.5)[k % 5] if k % 4 else qd[(k // 3) % 6]
        for test in (True, False):
            want = (1 if not test or sigma_min_above(J, REGULAR_SIGMA) else 0) | (2 if c.inside(q) else 0) \
                | (4 if any(qd.tolist()) else 0)
            got = solvers._pre(J, solvers._REGULAR2, test, q, qd, c._tol_bounds)
            assert got == want, (k, test)
            seen.add(got)
    assert seen == set(range(8)), seen


@pytest.mark.parametrize("compiled", [True, False, "tests only"])
def test_the_loop_case_follows_the_schedule_as_the_general_path(compiled: bool | str, monkeypatch) -> None:
    """Stepping into and out of the singular neighbourhood (γ moving between γ₀ and gamma_straight): the fast path
    (its tests fused, the schedule told their answer or left as it was; without the fused calls, numba's absence,
    the schedule, inside and the numpy step) gives, cycle by cycle, the step and γ the general path gives after
    ``schedule`` at the same q."""
    if compiled is not True:  # without the fused step (and, False, without the fused tests too)
        monkeypatch.setattr(solvers, "_fd_in", None)
    if compiled is False:
        monkeypatch.setattr(solvers, "_pre", None)
    from fdcontrol.loop.solvers import _AccelerationSolver
    from fdcontrol.model.configuration import Configuration

    robot = RobotModel.load("ur10")
    fast, general = (make_solver(make_mapping("fd", robot)) for _ in range(2))
    cf, cg = Configuration(robot, virtual=fast.virtual), Configuration(robot, virtual=general.virtual)
    home = np.array([0.0, -1.2, 1.4, -1.8, -1.5, 0.3])
    stretched = np.array([0.3, -1.2, 0.0, -1.9, -1.4, 0.2])
    rng = np.random.default_rng(5)
    gammas = set()
    for k in range(400):
        s = 0.5 + 0.5 * np.cos(k / 25.0)  # home → stretched → home …
        q = home + s * (stretched - home) + rng.normal(scale=1e-4, size=6)
        qd, f = rng.normal(scale=0.5, size=6), rng.normal(scale=20.0, size=6)
        cf.update(q)
        cg.update(q.copy())
        got = fast.step(cf.q, qd, f, 2e-3, config=cf)
        general.mapping.schedule(cg.q, cg)
        want = _AccelerationSolver.step(general, cg.q, qd, f, 2e-3, config=cg)
        assert fast.virtual.gamma == general.virtual.gamma, k
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes(), k
        gammas.add(fast.virtual.gamma)
    assert len(gammas) > 3, gammas


def test_the_step_tells_the_stage_which_velocity_it_found_finite() -> None:
    """``checked`` is the returned q̇ exactly when the fused step found it finite (finite()'s test: the sum of its
    entries) — not for a q̇ with a NaN or ±∞, nor one whose entries overflow in the sum, nor a projected one — and a
    non-finite q̇ still faults the loop's solver stage."""
    from fdcontrol.model.configuration import Configuration

    robot = RobotModel.load("ur10")
    solver = make_solver(make_mapping("fd", robot))
    conf = Configuration(robot, virtual=solver.virtual)
    conf.update(np.array([0.1, -1.2, 1.3, -1.5, -1.4, 0.2]))
    f = np.array([5.0, -3.0, 2.0, 0.1, 0.0, 0.2])
    _, qd1 = solver.step(conf.q, np.full(6, 0.1), f, 2e-3, config=conf)
    assert solver.checked is qd1 and finite(qd1)
    for bad in (np.nan, np.inf, 1e308):
        qd = np.full(6, 0.1)
        qd[1] = bad
        qd[2] = bad if bad == 1e308 else 0.1  # two of 1e308: each finite, their sum not
        _, qd1 = solver.step(conf.q, qd, f, 2e-3, config=conf)
        assert solver.checked is not qd1 and not finite(qd1), bad


def test_the_kernels_called_without_numbas_dispatch_are_the_kernels() -> None:
    """_pre_call, _fd_in_call (and the send stage's _advance_call) are the compiled functions of the kernels' one
    signature, entered without numba's dispatch: not the dispatchers, and bit for bit their results on the same
    float64 arguments (zeros of either sign, NaN and ±∞ among them)."""
    from fdcontrol.loop import stages

    pairs = ((solvers._pre, solvers._pre_call), (solvers._fd_in, solvers._fd_in_call),
             (stages._advance, stages._advance_call))
    for kernel, call in pairs:
        assert call is not kernel and call is not None and callable(call)
    robot = RobotModel.load("ur10")
    c = make_solver(make_mapping("fd", robot)).constraints
    vm = VirtualModel(robot, 1e4)
    m, d = vm.model, vm.model.createData()
    U, D, nvt = d.U, d.D, np.array(d.nvSubtree_fromRow, dtype=np.int64)
    rng = np.random.default_rng(3)
    for k in range(300):
        q = rng.uniform(robot.limits.lower, robot.limits.upper)
        pin.crba(m, d, q, pin.Convention.WORLD)
        pin.cholesky.decompose(m, d)
        J = pin.getFrameJacobian(m, d, robot.tip_id, pin.LOCAL_WORLD_ALIGNED)
        qd = _special(rng, rng.normal(size=6), k)
        jtf, load = _special(rng, rng.normal(size=6), k + 1), rng.normal(size=6)
        for test in (True, False):
            assert solvers._pre_call(J, solvers._REGULAR2, test, q, qd, c._tol_bounds) \
                == solvers._pre(J, solvers._REGULAR2, test, q, qd, c._tol_bounds), k
        a, b = [np.empty(6) for _ in range(2)], [np.empty(6) for _ in range(2)]
        args = (U, D, nvt, jtf, load, bool(k % 2), q, qd, 10.0, 2e-3, c._tol_bounds)
        assert solvers._fd_in_call(*args, *a) == solvers._fd_in(*args, *b), k
        assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True)), k
        a, b = [np.empty(6) for _ in range(2)], [np.empty(6) for _ in range(2)]
        assert stages._advance_call(q, 2e-3, qd, *a) and stages._advance(q, 2e-3, qd, *b)
        assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True)), k


def test_the_step_leaves_arguments_of_uncertain_type_to_the_dispatcher() -> None:
    """The step enters the kernels without numba's dispatch only where every argument's type is certain: a wrench
    whose Jᵀf is no float64 vector (an object array, a 6×1 matrix) still raises the dispatcher's TypeError, never
    reads its memory as floats; an integer wrench is the float one."""
    from fdcontrol.model.configuration import Configuration

    robot = RobotModel.load("ur10")
    solver = make_solver(make_mapping("fd", robot))
    conf = Configuration(robot, virtual=solver.virtual)
    conf.update(np.array([0.0, -1.2, 1.4, -1.8, -1.5, 0.3]))
    qd = np.full(6, 0.1)
    for bad in (np.array([1.0, 2.0, 3.0, 0.0, 0.0, 0.0], dtype=object), np.ones((6, 1))):
        with pytest.raises(TypeError):
            solver.step(conf.q, qd, bad, 2e-3, config=conf)
    got = solver.step(conf.q, qd, np.array([1, 2, 3, 0, 0, 0]), 2e-3, config=conf)
    want = solver.step(conf.q, qd, np.array([1.0, 2.0, 3.0, 0.0, 0.0, 0.0]), 2e-3, config=conf)
    assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()


def test_the_step_vouches_for_the_wrench_only_where_its_finite_velocity_shows_it_finite() -> None:
    """``checked_wrench`` is the given wrench exactly where the fused step's q̇ is ``checked`` (finite): over random
    poses, velocities and wrenches with a NaN or ±∞ in one or more entries (and zeros of either sign), a wrench that
    is not finite is never vouched for — its NaN or ∞ reaches every entry of Jᵀf and so q̇ — and every finite one
    whose q̇ is finite is; a step that does not take the fused path (a joint at its virtual limit) vouches for none."""
    from fdcontrol.model.configuration import Configuration

    robot = RobotModel.load("ur10")
    solver = make_solver(make_mapping("fd", robot))
    conf = Configuration(robot, virtual=solver.virtual)
    lim = robot.limits
    rng = np.random.default_rng(11)
    vouched = refused = 0
    for k in range(3000):
        q = rng.uniform(lim.lower + 0.2, lim.upper - 0.2)
        conf.update(q)
        qd = rng.normal(scale=0.5, size=6) if k % 3 else np.zeros(6)
        f = rng.normal(scale=20.0, size=6)
        for j in rng.choice(6, size=k % 4, replace=False):  # none, or one to three entries not finite (or ±0)
            f[j] = (np.nan, np.inf, -np.inf, 0.0, -0.0)[(k + int(j)) % 5]
        _, qd1 = solver.step(conf.q, qd, f, 2e-3, config=conf)
        if not np.all(np.isfinite(f)):
            assert solver.checked is not qd1 and solver.checked_wrench is not f, (k, f)
            refused += 1
        elif solver.checked is qd1:
            assert solver.checked_wrench is f and finite(qd1) and finite(f), k
            vouched += 1
        else:
            assert solver.checked_wrench is not f, k
    assert vouched > 1000 and refused > 1000, (vouched, refused)
    # every joint at its limit and moving out: all locked, q̇ = 0 whatever f — checked, yet it tells nothing of f
    conf.update(lim.upper.copy())
    for f in (np.ones(6), np.full(6, np.nan)):
        _, qd1 = solver.step(conf.q, np.full(6, 0.1), f, 2e-3, config=conf)
        assert solver.checked is qd1 and solver.checked_wrench is None


def _broken_law(bad: float) -> ControlLaw:
    """The default control law, but with `bad` (a NaN or ±∞) in the torque about x of every f_c it returns."""
    from fdcontrol.control.law import ControlLaw

    class Broken(ControlLaw):
        def __call__(self, x):  # type: ignore[no-untyped-def]
            f = super().__call__(x)
            f[3] = bad
            return f

    return Broken()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_law_whose_wrench_is_not_finite_still_faults_the_loop(bad: float) -> None:
    """A control law that returns a NaN or ±∞ in f_c, the arm moving inside its limits (the fused step): the solver
    stage holds the arm with its fault, the same message as ever, and no reference sent is ever non-finite."""
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop import build_loop
    from fdcontrol.model.robot import HOME

    robot = RobotModel.load("ur10")
    sim = SimulatedRobot(robot, dt=2e-3, q0=np.array(HOME["ur10"]))
    loop = build_loop(driver=sim, robot=robot, rate=500.0)
    loop.set_wrench([5.0, -3.0, 2.0, 0.1, 0.0, 0.2], t=1e12)
    for _ in range(20):
        loop.step(now=0.0)
    assert loop.fault is None and np.any(loop.qd_ref)
    sent = []
    send = sim.send
    sim.send = lambda q, qd: (sent.append((q.copy(), qd.copy())), send(q, qd))  # type: ignore[method-assign]
    loop.law = _broken_law(bad)
    s = loop.step(now=0.0)
    assert s.fault == "non-finite value in the model at cycle 20; holding" and s.holding
    for _ in range(5):
        s = loop.step(now=0.0)
    assert s.holding and all(np.all(np.isfinite(q)) and np.all(np.isfinite(v)) for q, v in sent)


def test_the_schedule_at_a_singular_pose_by_its_short_path_is_the_schedules() -> None:
    """The default loop pushed into the stretched singular pose and held there (γ at its lowest, near_band_start's
    certificate every cycle): the step's short path of the schedule (``schedule_irregular``) gives, cycle by cycle,
    the same references, the same γ and the same schedule state as ``schedule`` itself — and takes its short path
    on most of those cycles."""
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop import build_loop
    from fdcontrol.model.robot import HOME

    robot = RobotModel.load("ur10")
    loops = []
    for _ in range(2):
        sim = SimulatedRobot(robot, dt=2e-3, q0=np.array(HOME["ur10"]))
        loop = build_loop(driver=sim, robot=robot, rate=500.0)
        loop.set_wrench([5.0, -3.0, 2.0, 0.1, 0.0, 0.2], t=1e12)
        loops.append(loop)
    short, plain = loops
    assert short.solver._irregular
    plain.solver._irregular = False
    fd = short.solver.mapping
    calls = [0]
    schedule = fd.schedule

    def counted(*args):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return schedule(*args)

    fd.schedule = counted  # type: ignore[method-assign]
    low = 0
    for k in range(4000):
        if k == 3000:  # pulled out of the singular pose: the schedule leaves its lowest value
            for lp in loops:
                lp.set_wrench([-20.0, 0.0, -20.0, 0.0, 0.0, 0.0], t=1e12)
        for at, name, value in ((2400, "_near_wait", 3), (2500, "_wait", 2), (2600, "_past", True)):
            if k == at:  # a test waiting, past_band_end to be tried: the short path is not gamma_at's path then
                for lp in loops:
                    m = lp.solver.mapping
                    setattr(m, name, value)
                    m._near_first = m._goes_near()
        a, b = short.step(now=0.0), plain.step(now=0.0)
        assert a.q_ref.tobytes() == b.q_ref.tobytes() and a.qd_ref.tobytes() == b.qd_ref.tobytes(), k
        f, g = short.solver.mapping, plain.solver.mapping
        assert f.gamma == g.gamma, k
        assert (f._scheduled_at, f._near_age, f._near_wait, f._wait, f._past, f._low) == \
            (g._scheduled_at, g._near_age, g._near_wait, g._wait, g._past, g._low), k
        assert (f.scheduled_jacobian is None) == (g.scheduled_jacobian is None), k
        # the short path's test, kept as the state changes, is the state's
        assert f._near_first == f._goes_near() and g._near_first == g._goes_near(), k
        low += f.gamma == f.gamma0
    assert a.fault is None and low > 1000, low
    assert calls[0] < 4000 - 1000, calls[0]
    assert f.gamma != f.gamma0  # (it left the lowest value)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_law_whose_wrench_is_not_finite_faults_the_loop_with_every_joint_locked(bad: float) -> None:
    """Every joint at its virtual upper limit and moving outward: the step locks them all, its q̇ is zero whatever
    f_c is — finite, so it shows nothing of f_c. The solver stage still tests f_c: a law returning a NaN or ∞ faults
    the loop into hold with its message (the stage's own test, not the step's, is what catches it here)."""
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop import build_loop

    robot = RobotModel.load("ur10")
    sim = SimulatedRobot(robot, dt=2e-3, q0=np.zeros(6))
    loop = build_loop(driver=sim, robot=robot, rate=500.0)
    upper = np.array(loop.solver.constraints.upper, dtype=float)
    sim = SimulatedRobot(robot, dt=2e-3, q0=upper)
    loop = build_loop(driver=sim, robot=robot, rate=500.0)
    loop.set_wrench([5.0, -3.0, 2.0, 0.1, 0.0, 0.2], t=1e12)
    loop.law = _broken_law(bad)
    loop.qd_state = np.full(6, 0.1)
    s = loop.step(now=0.0)
    assert loop.solver.checked_wrench is None  # the step vouched for nothing: the stage's test decided
    assert s.fault == "non-finite value in the model at cycle 0; holding" and s.holding, (s.fault, s.holding)
