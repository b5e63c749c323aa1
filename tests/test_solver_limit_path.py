"""The FD solver's step at a virtual joint limit (the loop's case: the cycle's Configuration, one Euler step,
Cholesky) gives bit for bit what its general path (before_substep, the integrator, accel, after_substep) gives.

The step reuses work the general path repeats — the Coriolis load when zeroing the locked q̇ leaves its bits as
they were, and the active-set decision's last solve — so the states drawn here cover each case: a locked q̇ of
+0.0 (reused), of −0.0 or nonzero (recomputed at the zeroed q̇), and no joint locked (moving inward)."""

from __future__ import annotations

import numpy as np
import pytest

from fdcontrol import RobotModel, make_mapping
from fdcontrol.loop.solvers import _AccelerationSolver, make_solver
from fdcontrol.model.configuration import Configuration
from fdcontrol.model.robot import URDF_DIR
from fdcontrol.model.spatial import finite

DT = 1e-3


def _robot(name: str) -> RobotModel:
    if name == "tilted":  # a base that is not the world: UR10 from the shoulder (tests/test_configuration.py)
        return RobotModel.from_urdf(URDF_DIR / "ur10.urdf", "upper_arm_link", "tool0")
    return RobotModel.load(name)


def _count_crba(solver) -> list[int]:
    """Count the CRBA passes of the solver's own virtual model (VirtualModel._crba_and_jacobian)."""
    calls = [0]
    inner = solver.virtual._crba_and_jacobian

    def counted(q):
        calls[0] += 1
        return inner(q)

    solver.virtual._crba_and_jacobian = counted
    return calls


@pytest.mark.parametrize("name", ["ur10", "fr3", "tilted"])
def test_fd_step_at_a_limit_equals_the_general_path_bit_for_bit(name: str) -> None:
    """Also where H and J are the Configuration's (a q exactly at a limit: the clip leaves its bits; γ as the
    Configuration's): then the step runs no CRBA of its own — past a limit (the clip moves q), or on a base that
    is not the world, it runs one."""
    robot = _robot(name)
    rng = np.random.default_rng(5)
    fast, general = (make_solver(make_mapping("fd", robot)) for _ in range(2))
    conf_fast = Configuration(robot, virtual=fast.virtual)  # each solver its own: γ is scheduled on it
    conf_general = Configuration(robot, virtual=general.virtual)
    lo, up = fast.constraints.lower, fast.constraints.upper
    used = {"reused": 0, "zeroed": 0, "free": 0}
    crba, moved = _count_crba(fast), 0
    for k in range(600):
        q = rng.uniform(lo, up)
        j = k % robot.dof
        q[j] = (up[j] + 1e-3, lo[j] - 1e-3, up[j], lo[j])[k % 4]  # past or at a virtual limit
        qd, f = rng.normal(scale=1.0, size=robot.dof), rng.normal(scale=30.0, size=6)
        qd[j] = (0.0, -0.0, qd[j], 0.0, 1e-300)[(k // 4) % 5]
        if k % 7 == 0:
            qd[:] = 0.0
        conf_fast.update(q)
        conf_general.update(q.copy())
        moved += np.clip(q, lo, up).tobytes() != q.tobytes()
        got = fast.step(conf_fast.q, qd, f, DT, config=conf_fast)
        want = _AccelerationSolver.step(general, conf_general.q, qd, f, DT, config=conf_general)
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes(), k
        locked = general.constraints.active
        assert np.array_equal(fast.constraints.active, locked), k
        if not locked.any():
            used["free"] += 1
        elif np.where(locked, 0.0, qd).tobytes() == qd.tobytes():
            used["reused"] += 1
        else:
            used["zeroed"] += 1
    assert min(used.values()) > 50, used
    assert 200 < moved < 400, moved
    assert crba[0] == (600 if name == "tilted" else moved), (crba, moved)  # the Configuration's H at a limit


def _at_a_limit(rng: np.random.Generator, lo: np.ndarray, up: np.ndarray, k: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, q̇, f): q random within the limits with joint k mod N exactly at its upper (k even) or lower limit (the
    clip leaves q's bits), q̇ and a wrench random."""
    n = len(lo)
    q = rng.uniform(lo, up)
    q[k % n] = (up, lo)[k % 2][k % n]
    return q, rng.normal(scale=1.0, size=n), rng.normal(scale=30.0, size=6)


def test_fd_step_at_a_limit_takes_the_configurations_H_only_at_its_gamma() -> None:
    """A Configuration updated at another γ than the virtual model's now (a fixed γ changed after the update):
    its H is not this step's — the step forms H at the model's γ, as the general path does (bit for bit)."""
    robot = RobotModel.load("fr3")
    rng = np.random.default_rng(7)
    fast, general = (make_solver(make_mapping("fd", robot, gamma=1e3)) for _ in range(2))
    conf_fast, conf_general = Configuration(robot, virtual=fast.virtual), Configuration(robot, virtual=general.virtual)
    lo, up = fast.constraints.lower, fast.constraints.upper
    crba, differs = _count_crba(fast), 0
    for k in range(100):
        q, qd, f = _at_a_limit(rng, lo, up, k)
        for sol, conf in ((fast, conf_fast), (general, conf_general)):
            sol.virtual.set_gamma(1e3)
            conf.update(q.copy())
            sol.virtual.set_gamma(1e3 * (2 + k % 5))  # after the update: the Configuration's H is γ = 1e3's
        got = fast.step(conf_fast.q, qd, f, DT, config=conf_fast)
        want = _AccelerationSolver.step(general, conf_general.q, qd, f, DT, config=conf_general)
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes(), k
        stale = _AccelerationSolver.step(general, conf_general.q, qd, f, DT, config=conf_general)
        general.virtual.set_gamma(1e3)  # the step the Configuration's γ would give: another one
        at_conf = _AccelerationSolver.step(general, conf_general.q, qd, f, DT, config=conf_general)
        differs += at_conf[1].tobytes() != stale[1].tobytes()
    assert crba[0] == 100  # each step its own CRBA
    assert differs > 50, differs  # the test can tell the two γ apart


def test_fd_step_at_a_limit_takes_no_H_of_another_virtual_model() -> None:
    """A Configuration on another virtual model (a heavier tip, m_e = 2) at the same q and γ: its H is not this
    step's — the step forms H on its own model, as the general path does (bit for bit), and the two models' steps
    differ (the test can tell them apart)."""
    from fdcontrol.model.virtual import VirtualModel

    robot = RobotModel.load("fr3")
    rng = np.random.default_rng(11)
    fast, general = (make_solver(make_mapping("fd", robot, gamma=1e3)) for _ in range(2))
    foreign = Configuration(robot, virtual=VirtualModel(robot, 1e3, m_e=2.0))
    conf_general = Configuration(robot, virtual=general.virtual)
    lo, up = fast.constraints.lower, fast.constraints.upper
    crba, differs = _count_crba(fast), 0
    for k in range(50):
        q, qd, f = _at_a_limit(rng, lo, up, k)
        foreign.update(q.copy())
        conf_general.update(q.copy())
        got = fast.step(foreign.q, qd, f, DT, config=foreign)
        want = _AccelerationSolver.step(general, conf_general.q, qd, f, DT, config=conf_general)
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes(), k
        heavy = make_solver(make_mapping("fd", robot, gamma=1e3))
        heavy.virtual.model.inertias[robot.model.frames[robot.tip_id].parentJoint] = \
            foreign.virtual.model.inertias[robot.model.frames[robot.tip_id].parentJoint]
        other = _AccelerationSolver.step(heavy, foreign.q, qd, f, DT, config=None)
        differs += other[1].tobytes() != want[1].tobytes()
    assert crba[0] == 50  # each step its own CRBA
    assert differs > 25, differs


@pytest.mark.parametrize("name", ["ur10", "panda", "fr3"])
def test_the_configurations_H_and_J_are_the_virtual_models_bit_for_bit(name: str) -> None:
    """What the FD step at a limit takes from the cycle's Configuration: H (its CRBA's upper triangle, made
    symmetric) and J are the bits VirtualModel.equation_and_jacobian computes at the same q and γ — after an
    update, and after a refactor at a new γ (its own pinocchio data, the same model)."""
    from fdcontrol.model.linalg import symmetric_upper

    robot = RobotModel.load(name)
    solver = make_solver(make_mapping("fd", robot))
    vm, rng = solver.virtual, np.random.default_rng(13)
    conf = Configuration(robot, virtual=vm)
    for k in range(60):
        q = rng.uniform(robot.limits.lower, robot.limits.upper)
        vm.set_gamma((1e3, 1e6, 37.5)[k % 3])
        conf.update(q)
        if k % 2:
            vm.set_gamma(float(10 ** (1 + k % 8)))
            conf.refactor()
        f, t = rng.normal(size=6), rng.normal(size=robot.dof)
        H, b, J = vm.equation_and_jacobian(q, f, None, t)
        assert symmetric_upper(conf.data.M).tobytes() == H.tobytes(), k
        assert conf.jacobian.tobytes() == J.tobytes(), k
        assert (conf.jacobian.T @ f + t).tobytes() == b.tobytes(), k
        assert conf.gamma == vm.gamma


def test_the_fused_euler_step_and_projection_is_the_two_calls_bit_for_bit() -> None:
    """_euler_project (the FD step at a limit's last call) against what it fuses: the Euler step (_euler) then
    JointLimitConstraints.project with the step's active set engaged — on steps that end a hair past, at, or a
    hair inside either limit, with locked joints, zeros of either sign, a NaN and an infinite q̈ — and the solver
    stage's test of the q̇ it returns (finite())."""
    from fdcontrol.loop import solvers

    robot = RobotModel.load("fr3")
    c = make_solver(make_mapping("fd", robot)).constraints
    lo, up = c.lower, c.upper
    rng = np.random.default_rng(23)
    n, dt, decay = robot.dof, 1e-3, 10.0
    clipped = infinite = 0
    for k in range(3000):
        q = rng.uniform(lo, up)
        qd, x = rng.normal(size=n), rng.normal(scale=50.0, size=n)
        j = k % n
        # q⁺ = q + dt q̇⁺ lands on (a hair past, at, a hair inside) a bound: q̇⁺ chosen, x solved for it
        bound = (lo, up)[k % 2][j]
        target = bound + (-2e-13, 0.0, 2e-13, -1e-9, 1e-9)[(k // 2) % 5] * (1 if k % 2 else -1)
        v = (target - q[j]) / dt
        x[j] = (v - qd[j]) / dt + decay * qd[j]
        if k % 11 == 0:
            qd[(j + 1) % n], x[(j + 1) % n] = (-0.0, 0.0, 0.0)[k % 3], (0.0, -0.0, 0.0)[k % 3]
        if k % 97 == 0:
            x[(j + 2) % n] = (np.nan, np.inf, -np.inf)[k % 3]
        locked = rng.random(n) < 0.3
        c.set_active(locked)
        q1, qd1 = solvers._euler(q, qd, x, decay, dt)
        want_q, want_qd = c.project(q1, qd1)
        got_q, got_qd = np.empty(n), np.empty(n)
        fin = solvers._euler_project(q, qd, x, decay, dt, lo, up, c._lo_tol, c._up_tol, locked, got_q, got_qd)
        assert got_q.tobytes() == want_q.tobytes() and got_qd.tobytes() == want_qd.tobytes(), k
        assert fin == finite(want_qd), k  # the solver stage's test of q̇, on the same floats
        clipped += bool((q1 < lo).any() or (q1 > up).any())
        infinite += not fin
    assert clipped > 500 and infinite > 5, (clipped, infinite)


@pytest.mark.parametrize("at_limit", [True, False])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_q_that_is_not_finite_raises_at_a_limit_as_on_the_general_path(bad: float, at_limit: bool) -> None:
    """A Configuration updated without its check at a q with a NaN or an infinity (the clip keeps a NaN, moves an
    infinity onto a limit): the step at a limit raises check_q's ModelError, as the general path's
    equation_and_jacobian does — also where the Configuration's H and J would be taken."""
    from fdcontrol.model.robot import ModelError

    robot = RobotModel.load("fr3")
    # a fixed γ: the γ schedule's SVD of a J with a NaN would raise first (LinAlgError, on either path)
    fast, general = (make_solver(make_mapping("fd", robot, gamma=1e3)) for _ in range(2))
    lo, up = fast.constraints.lower, fast.constraints.upper
    for j in range(robot.dof):
        q = 0.5 * (lo + up)
        if at_limit:
            q[j] = up[j]  # at a limit (the fast path's case); else only the bad entry sends it there
        q[(j + 1) % robot.dof] = bad
        for sol, step in ((fast, fast.step), (general, lambda *a, **k: _AccelerationSolver.step(general, *a, **k))):
            conf = Configuration(robot, virtual=sol.virtual)
            conf.update(q, check=False)
            if bad == np.inf:  # the clip moves it onto the limit: a finite q, the same step on both paths
                got = step(conf.q, np.zeros(robot.dof), np.ones(6), DT, config=conf)
                assert np.all(np.isfinite(got[0]))
            else:
                with pytest.raises(ModelError, match="NaN or Inf"):
                    step(conf.q, np.zeros(robot.dof), np.ones(6), DT, config=conf)


def test_the_step_at_a_limit_tells_the_stage_which_velocity_it_found_finite() -> None:
    """At a virtual limit with a joint locked, ``checked`` is the returned q̇ where the step found it finite (finite()'s
    test, in its last call: the kernel's test above covers the rest); where no joint ends locked (the free dynamics
    and the projection), None: the solver stage tests the q̇ itself."""
    robot = RobotModel.load("fr3")
    solver = make_solver(make_mapping("fd", robot, gamma=1e3))
    c = solver.constraints
    conf = Configuration(robot, virtual=solver.virtual)
    rng = np.random.default_rng(4)
    engaged = free = 0
    for k in range(200):
        q = rng.uniform(c.lower, c.upper)
        j = k % robot.dof
        q[j] = (c.lower, c.upper)[k % 2][j] + (-1e-3, 1e-3)[k % 2]  # past a limit
        conf.update(q)
        _, qd1 = solver.step(conf.q, rng.normal(scale=0.3, size=robot.dof), rng.normal(scale=20.0, size=6), 2e-3,
                             config=conf)
        if c.engaged:
            engaged += 1
            assert solver.checked is qd1 and finite(qd1), k
        else:
            free += 1
            assert solver.checked is None, k
    assert engaged > 20 and free > 20, (engaged, free)


@pytest.mark.parametrize("name", ["ur10", "fr3"])
def test_the_compiled_step_at_a_limit_is_its_python_form_bit_for_bit(name: str, monkeypatch) -> None:
    """_euler_limit's one compiled call (_limit_kernel: H, b, the active set, the zeroed q̇, eq. 7, the Euler step
    and the projection; _limit_zeroed_kernel where the locked q̇ was not +0.0) against its Python form (the kernels
    switched off: decide, _solve_locked, _euler_project as separate calls) on states past, at and inside the
    limits, with joint loads, several joints at limits, q̇ of either sign or ±0, and now and then a NaN or an
    infinity in q̇ or τ: the same q, q̇, active set, ``checked`` and ``engaged`` to the bit, or the same error."""
    from fdcontrol.loop import solvers

    robot = RobotModel.load(name)
    kernel = solvers._limit
    if kernel is None:
        pytest.skip("numba not installed: the Python form is the only one")
    compiled, plain = (make_solver(make_mapping("fd", robot)) for _ in range(2))
    lo, up = compiled.constraints.lower, compiled.constraints.upper
    rng = np.random.default_rng(29)
    n = robot.dof
    codes = {"locked": 0, "zeroed": 0, "free": 0, "error": 0}
    for k in range(1500):
        q = rng.uniform(lo, up)
        for j in rng.choice(n, size=int(rng.integers(1, 4)), replace=False):
            q[j] = (up[j] + 1e-3, lo[j] - 1e-3, up[j], lo[j], up[j] - 5e-10)[int(rng.integers(0, 5))]
        qd, f = rng.normal(scale=0.5, size=n), rng.normal(scale=30.0, size=6)
        for j in range(n):
            if rng.random() < 0.3:
                qd[j] = (0.0, -0.0, 1e-300)[int(rng.integers(0, 3))]
        tau = rng.normal(scale=5.0, size=n) if k % 3 else None
        if k % 53 == 0:
            (qd if k % 2 else tau if tau is not None else qd)[k % n] = (np.nan, np.inf, -np.inf)[k % 3]
        results = []
        for sol, on in ((compiled, True), (plain, False)):
            monkeypatch.setattr(solvers, "_limit", kernel if on else None)
            try:
                q1, qd1 = sol._euler_limit(q.copy(), qd.copy(), f, DT, None if tau is None else tau.copy())
                results.append((q1.tobytes(), qd1.tobytes(), sol.constraints.active.tobytes(), sol.constraints.engaged,
                                sol.checked is qd1, sol._locked.tobytes()))
            except Exception as exc:
                results.append((type(exc), str(exc)))
        assert results[0] == results[1], k
        if len(results[0]) == 2:
            codes["error"] += 1
        elif not compiled.constraints.engaged:
            codes["free"] += 1
        elif np.where(compiled._locked, 0.0, qd).tobytes() == qd.tobytes():
            codes["locked"] += 1
        else:
            codes["zeroed"] += 1
    assert min(codes["locked"], codes["zeroed"], codes["free"]) > 50 and codes["error"] > 5, codes


def test_the_active_set_at_a_limit_meets_the_kkt_conditions() -> None:
    """Independently of decide's own arithmetic: at the active set the FD step at a limit settles on, λ = H q̈ − b
    (numpy's product, the free block solved by LAPACK) holds each locked joint on its limit (λ ≤ 0 at an upper limit,
    ≥ 0 at a lower one, to 1e-9 of the load's scale), locked joints have q̈ = 0, and no free joint at a limit that is
    not moving inward accelerates outward (x − c q̇, to the same tolerance)."""
    from fdcontrol.model.constraints import locked_acceleration_lapack
    from fdcontrol.model.linalg import symmetric_upper

    robot = RobotModel.load("fr3")
    solver = make_solver(make_mapping("fd", robot, gamma=1e3))
    c, vm = solver.constraints, solver.virtual
    rng = np.random.default_rng(31)
    n, checked = robot.dof, 0
    for k in range(600):
        q = rng.uniform(c.lower, c.upper)
        for j in rng.choice(n, size=int(rng.integers(1, 4)), replace=False):
            q[j] = (c.upper[j], c.lower[j])[int(rng.integers(0, 2))]
        qd, f = rng.normal(scale=0.5, size=n), rng.normal(scale=30.0, size=6)
        qd[rng.random(n) < 0.3] = 0.0
        solver._euler_limit(q, qd, f, DT, None)
        locked = c.active.copy()
        qz = np.where(locked, 0.0, qd)
        t = solver.joint_load(q, qz, None)
        J = vm._crba_and_jacobian(q)
        H = symmetric_upper(vm.data.M)
        b = J.T @ f + t
        x = locked_acceleration_lapack(H, b, locked)
        lam = H @ x - b
        tol = 1e-9 * (1.0 + np.abs(H).max() * np.abs(x).max() + np.abs(b).max())
        up, lo = c.at_limit(q)
        assert np.all(x[locked] == 0.0), k
        assert np.all(lam[locked & up] <= tol) and np.all(lam[locked & lo] >= -tol), (k, lam, locked)
        acc = x - solver.decay * qz
        assert np.all(acc[~locked & up & (qd >= 0)] <= tol) and np.all(acc[~locked & lo & (qd <= 0)] >= -tol), k
        checked += bool(locked.any())
    assert checked > 300, checked
