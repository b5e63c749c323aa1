"""Null-space posture task (fdcontrol.control.posture) on the 7-DoF Panda."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol import make_mapping
from fdcontrol.control.posture import PostureTask, mid_range, nullspace_transpose
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME

from .conftest import nonsingular_q

DT = 0.002


def self_motion(robot, q, angle, steps=200):
    """Walk `angle` rad along the Jacobian's null vector with a pose correction each step: a
    configuration with the same tip pose and another elbow (independent of the code under test)."""
    T0 = robot.pose(q)
    for _ in range(steps):
        n = np.linalg.svd(robot.jacobian(q))[2][-1]
        q = q + angle / steps * (n if n[2] >= 0 else -n)
        T = robot.pose(q)
        e = np.concatenate((T0[:3, 3] - T[:3, 3], pin.log3(T0[:3, :3] @ T[:3, :3].T)))
        q = q + np.linalg.pinv(robot.jacobian(q)) @ e
    return q


def loop_for(robot, q0, posture=None, **kw):
    sim = SimulatedRobot(robot, dt=DT, q0=q0)
    return ControlLoop(robot, sim, make_solver(make_mapping("fd", robot)), rate=1 / DT, posture=posture, **kw), sim


def test_projector_against_explicit_inverse(panda, rng):
    """N̄ᵀ from the truncated eigen-inverse equals I − Jᵀ (H⁻¹JᵀΛ)ᵀ with explicit inverses."""
    solver = make_solver(make_mapping("fd", panda))
    for _ in range(10):
        q = nonsingular_q(panda, rng)
        H, J = solver.virtual.inertia(q), panda.jacobian(q)
        Hi = np.linalg.inv(H)
        Lam = np.linalg.inv(J @ Hi @ J.T)
        expected = np.eye(7) - J.T @ (Hi @ J.T @ Lam).T
        Nt = nullspace_transpose(H, J)
        np.testing.assert_allclose(Nt, expected, atol=1e-9)
        np.testing.assert_allclose(Nt @ Nt, Nt, atol=1e-9)  # a projector
        np.testing.assert_allclose(J @ Hi @ Nt, 0, atol=1e-9)  # dynamically consistent


@pytest.mark.parametrize("algorithm", ["cholesky", "aba", "qr"])
def test_tip_acceleration_unchanged_by_posture(panda, rng, algorithm):
    """J q̈ with the posture load equals J q̈ without it to 1e-9 relative (Coriolis on, q̇ ≠ 0)."""
    solver = make_solver(make_mapping("fd", panda, algorithm=algorithm))
    task = PostureTask(panda, stiffness=10.0, damping=2.0, preferred=mid_range(panda))
    worst = 0.0
    for _ in range(20):
        q, qd, f = nonsingular_q(panda, rng), rng.normal(scale=0.5, size=7), rng.normal(size=6)
        H, J = solver.virtual.inertia(q), panda.jacobian(q)
        tau = task.torque(H, J, q, qd)
        assert np.linalg.norm(tau) > 0
        a0 = solver.accel(q, qd, f)
        a1 = solver.accel(q, qd, f, tau)
        assert np.linalg.norm(a1 - a0) > 1e-3 * np.linalg.norm(a0)  # the posture does act on the joints
        worst = max(worst, np.linalg.norm(J @ (a1 - a0)) / np.linalg.norm(J @ a0))
        # and it acts exactly as the null-space part of a_p: q̈₁ − q̈₀ = N̄ a_p (H⁻¹ N̄ᵀ H = N̄)
        Nt = nullspace_transpose(H, J)
        np.testing.assert_allclose(a1 - a0, np.linalg.solve(H, Nt @ H) @ task.acceleration(q, qd),
                                   rtol=1e-6, atol=1e-9)
    print(f"{algorithm}: max ‖J Δq̈‖/‖J q̈‖ = {worst:.2e}")
    assert worst < 1e-9


def test_elbow_converges_while_tip_holds_still(panda):
    q0 = np.array([0.2, -0.4, 0.1, -2.0, 0.1, 1.6, 0.8])
    qp = self_motion(panda, q0, 0.8)  # same tip pose, elbow swung by 0.8 rad
    assert np.linalg.norm(panda.pose(qp) - panda.pose(q0)) < 1e-9
    task = PostureTask(panda, stiffness=10.0, preferred=qp)
    loop, sim = loop_for(panda, q0, task)
    T0 = panda.pose(q0)
    dev = 0.0
    for i in range(round(5.0 / DT)):
        loop.set_wrench(np.zeros(6), t=i * DT)  # a live (zero) stream: null-space loads act only on live input
        loop.step(now=i * DT)
        dev = max(dev, float(np.linalg.norm(panda.pose(sim.q)[:3, 3] - T0[:3, 3])))
    d = task.distance(sim.q)
    print(f"posture distance 0.798 → {d:.4f} rad in 5 s; max tip deviation {dev * 1e3:.3f} mm")
    assert d < 0.01
    assert dev < 0.5e-3
    assert loop.state.posture_distance == pytest.approx(task.distance(loop.state.q))


def test_no_posture_no_motion(panda):
    """Control: without the task the same start does not move at all (the test above can fail)."""
    q0 = np.array([0.2, -0.4, 0.1, -2.0, 0.1, 1.6, 0.8])
    loop, sim = loop_for(panda, q0)
    for i in range(200):
        loop.step(now=i * DT)
    assert np.linalg.norm(sim.q - q0) < 1e-12


def wrench(t):
    """A hand pushing and twisting the tool: whole periods in 10 s, so it pushes back and forth."""
    w = 2 * np.pi * np.array([0.4, 0.3, 0.6, 0.5, 0.2, 0.7])
    return np.array([15, 15, 10, 2, 2, 2]) * np.sin(w * t)


def guide(panda, posture):
    """10 s of hand guiding (admittance), then 3 s back to the start pose in motion mode, so
    the remaining ‖q − q_p‖ is self-motion only."""
    q0 = np.array(HOME["panda"])
    task = PostureTask(panda, stiffness=10.0, preferred=q0)
    loop, sim = loop_for(panda, q0, task if posture else None)
    d = []
    for i in range(round(13.0 / DT)):
        t = i * DT
        if t < 10.0:
            loop.set_wrench(wrench(t), t=t)
        elif loop.law.mode != "motion":
            loop.law.mode = "motion"
            loop.set_target(panda.pose(q0))
        loop.step(now=t)
        d.append(task.distance(sim.q))
    tip = float(np.linalg.norm(panda.pose(sim.q)[:3, 3] - panda.pose(q0)[:3, 3]))
    return max(d), d[round(10.0 / DT) - 1], d[-1], tip


def test_hand_guiding_posture_bounded_vs_drift(panda):
    with_ = guide(panda, True)
    without = guide(panda, False)
    for name, (mx, at10, end, tip) in (("with posture", with_), ("without", without)):
        print(f"{name}: max ‖q − q_p‖ {mx:.3f} rad, at 10 s {at10:.3f} rad, "
              f"after return {end:.4f} rad (tip {tip * 1e3:.2f} mm from start)")
    assert with_[3] < 1e-3 and without[3] < 1e-3  # the tip is back: what remains is self-motion
    assert with_[2] < 0.02  # the posture task pulled the elbow back
    assert without[2] > 2 * with_[2]  # without it the self-motion drift stays


def test_non_redundant_arm_has_no_posture_load(ur10, rng):
    solver = make_solver(make_mapping("fd", ur10))
    task = PostureTask(ur10, stiffness=10.0, preferred=mid_range(ur10))
    for _ in range(5):
        q = nonsingular_q(ur10, rng)
        H, J = solver.virtual.inertia(q), ur10.jacobian(q)
        assert np.linalg.norm(task.torque(H, J, q, np.zeros(6))) < 1e-9 * np.linalg.norm(H @ task.acceleration(
            q, np.zeros(6)))


def test_singular_configuration_stays_finite(panda):
    """At the stretched-out singularity (q = 0) Λ is truncated, not inverted: τ stays finite."""
    solver = make_solver(make_mapping("fd", panda))
    q = np.zeros(7)
    H, J = solver.virtual.inertia(q), panda.jacobian(q)
    task = PostureTask(panda, stiffness=10.0, preferred=mid_range(panda))
    tau = task.torque(H, J, q, np.zeros(7))
    assert np.all(np.isfinite(tau))
    assert np.all(np.isfinite(solver.accel(q, np.zeros(7), np.zeros(6), tau)))


def test_defaults_and_validation(panda):
    task = PostureTask(panda)
    assert task.preferred is None and task.distance(np.ones(7)) == 0.0  # until activation
    q = np.linspace(-0.5, 0.5, 7)
    np.testing.assert_allclose(task.acceleration(q, np.zeros(7)), 0.0)  # activation: q_p = q
    np.testing.assert_allclose(task.preferred, q)
    assert float(np.min(task.stiffness)) == 4.0  # the library's default K (the service's is 10)
    with pytest.raises(ValueError, match="stiffness"):
        PostureTask(panda, stiffness=-1.0)
    with pytest.raises(ValueError):
        PostureTask(panda, preferred=[0.0] * 6)


def test_nullspace_transpose_is_its_masked_eigen_inverse_bit_for_bit():
    """N̄ᵀ as the module doc writes it by LAPACK — Λ by the eigenvalues of J H⁻¹ Jᵀ above RCOND × the largest,
    taken by a mask — gives the same bits whether every eigenvalue is kept (regular poses: no mask copy) or some
    are cut (at a singularity)."""
    from fdcontrol import RobotModel, VirtualModel
    from fdcontrol.control.posture import RCOND, nullspace_transpose_lapack
    from fdcontrol.model.linalg import cho_solve_upper, eigh

    robot = RobotModel.load("panda")
    vm = VirtualModel(robot, 1e3)
    rng = np.random.default_rng(5)
    cut = 0
    for k in range(200):
        q = rng.uniform(robot.limits.lower, robot.limits.upper)
        H, J = vm.inertia(q), robot.jacobian(q)
        if k % 4 == 1:
            J = J.copy()
            J[5] = J[4]  # two equal rows: J H⁻¹ Jᵀ singular, an eigenvalue cut
        X = cho_solve_upper(H, J.T)
        A = J @ X
        w, V = eigh(0.5 * (A + A.T))
        keep = w > RCOND * max(float(w[-1]), 0.0)
        cut += int(not keep.all())
        want = np.eye(7) - J.T @ (X @ ((V[:, keep] / w[keep]) @ V[:, keep].T)).T
        assert np.array_equal(nullspace_transpose_lapack(H, J), want), k
    assert 10 < cut < 200, cut


@pytest.mark.parametrize("name", ["panda", "fr3", "ur10"])
def test_the_compiled_projector_is_the_lapack_one_to_rounding(name):
    """The compiled N̄ᵀ (Cholesky, Jacobi eigen-decomposition: one call) against numpy's and LAPACK's
    (cho_solve, eigh) on random poses of the virtual model, regular and singular (two equal rows of J: an
    eigenvalue of J H⁻¹ Jᵀ cut): the same projector to 1e-9 of its size; the compiled one is what the loop
    runs where numba is installed."""
    pytest.importorskip("numba")
    from fdcontrol import RobotModel, VirtualModel
    from fdcontrol.control import posture

    assert posture._projector is not None
    robot = RobotModel.load(name)
    vm = VirtualModel(robot, 1e3)
    rng = np.random.default_rng(7)
    for k in range(300):
        q = rng.uniform(robot.limits.lower, robot.limits.upper)
        H, J = vm.inertia(q), robot.jacobian(q)
        if k % 3 == 1:
            J = J.copy()
            J[5] = J[4]
        want = posture.nullspace_transpose_lapack(H, J)
        Nt = np.empty_like(H)
        assert posture._projector(H, J, posture.RCOND, Nt), k  # the compiled path, not its fallback
        np.testing.assert_allclose(Nt, want, rtol=0, atol=1e-9 * max(1.0, np.abs(want).max()), err_msg=str(k))
        np.testing.assert_array_equal(posture.nullspace_transpose(H, J), Nt)


@pytest.mark.parametrize("bad", ["nan_h", "inf_j", "indefinite", "int"])
def test_the_projector_on_bad_input_raises_as_lapack_does(bad):
    """What the compiled projector cannot take (a non-finite value, an H that is not positive definite, another
    dtype) goes to the LAPACK form, which raises (or computes) as numpy's and scipy's wrappers do."""
    from fdcontrol import RobotModel, VirtualModel
    from fdcontrol.control.posture import nullspace_transpose, nullspace_transpose_lapack

    robot = RobotModel.load("panda")
    q = np.full(7, 0.3)
    H, J = VirtualModel(robot, 1e3).inertia(q), robot.jacobian(q)
    if bad == "nan_h":
        H = H.copy()
        H[2, 3] = H[3, 2] = np.nan
    elif bad == "inf_j":
        J = J.copy()
        J[1, 1] = np.inf
    elif bad == "indefinite":
        H = -H
    else:
        H, J = np.eye(7, dtype=int), np.ones((6, 7), dtype=int)
    try:
        want = nullspace_transpose_lapack(H, J)
    except (ValueError, np.linalg.LinAlgError) as exc:
        with pytest.raises(type(exc)):
            nullspace_transpose(H, J)
    else:
        np.testing.assert_array_equal(nullspace_transpose(H, J), want)


def test_the_compiled_posture_torque_is_numpys_to_rounding():
    """τ_p = N̄ᵀ H (K (q_p − q) − D q̇) in one compiled call against numpy's products on random FR3 states (the
    first call fixes q_p by numpy's form; lists take numpy's form too)."""
    pytest.importorskip("numba")
    from fdcontrol import RobotModel, VirtualModel
    from fdcontrol.control import posture

    assert posture._torque is not None
    robot = RobotModel.load("fr3")
    vm = VirtualModel(robot, 1e3)
    rng = np.random.default_rng(3)
    task = PostureTask(robot, stiffness=rng.uniform(1, 20, 7), damping=rng.uniform(0, 3, 7))
    q0 = rng.uniform(robot.limits.lower, robot.limits.upper)
    H0, J0 = vm.inertia(q0), robot.jacobian(q0)
    assert not np.any(task.torque(H0, J0, q0, np.zeros(7)))  # activation: q_p = q, at rest
    np.testing.assert_array_equal(task.preferred, q0)
    for _ in range(200):
        q, qd = rng.uniform(robot.limits.lower, robot.limits.upper), rng.normal(size=7)
        H, J = vm.inertia(q), robot.jacobian(q)
        Nt = nullspace_transpose(H, J)
        want = Nt @ (H @ (task.stiffness * (task.preferred - q) - task.damping * qd))
        got = task.torque(H, J, q, qd, Nt)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * np.abs(want).max())
        np.testing.assert_allclose(task.torque(H, J, q.tolist(), qd.tolist(), Nt), want, rtol=0,
                                   atol=1e-9 * np.abs(want).max())


@pytest.mark.parametrize("name", ["panda", "fr3"])
def test_the_posture_load_is_the_projector_and_the_torque_bit_for_bit(name):
    """PostureTask.load — the posture stage's one call — gives the bits of nullspace_transpose(H, J) and
    torque(H, J, q, q̇, N̄ᵀ) on random states (the loop's virtual model, γ from 1 to 1e6, near-singular poses), also
    before q_p is set (the first call fixes it, as torque does), on lists and on a non-positive-definite H (where
    the projector's kernel gives up and LAPACK's form answers or raises)."""
    from fdcontrol import RobotModel, VirtualModel

    robot = RobotModel.load(name)
    vm = VirtualModel(robot, 1e3)
    rng = np.random.default_rng(17)
    task, twin = (PostureTask(robot, stiffness=rng.uniform(1, 20, 7), damping=rng.uniform(0, 3, 7)) for _ in "ab")
    twin.stiffness, twin.damping = task.stiffness.copy(), task.damping.copy()
    for k in range(300):
        q, qd = rng.uniform(robot.limits.lower, robot.limits.upper), rng.normal(size=7)
        if k % 10 == 3:
            q[1:] = 0.0  # stretched: J H⁻¹ Jᵀ loses rank (the truncated eigen-inverse)
        vm.set_gamma(float(10.0 ** (k % 7)))
        H, J = vm.inertia(q), robot.jacobian(q)
        if k % 50 == 7:
            q, qd = q.tolist(), qd.tolist()
        Nt, tau = task.load(H, J, q, qd)
        want_nt = nullspace_transpose(H, J)
        want = twin.torque(H, J, q, qd, want_nt)
        assert Nt.tobytes() == want_nt.tobytes() and tau.tobytes() == want.tobytes(), k
        assert np.array_equal(task.preferred, twin.preferred)
    bad = -np.eye(7)
    with pytest.raises(np.linalg.LinAlgError):
        nullspace_transpose(bad, J)
    with pytest.raises(np.linalg.LinAlgError):
        task.load(bad, J, np.zeros(7), np.zeros(7))


def test_a_posture_torque_of_the_wrong_length_is_refused():
    """q and q̇ shorter or longer than the arm raise ValueError on either path: the compiled call never reads a
    corner of H and N̄ᵀ for a shorter vector."""
    from fdcontrol import RobotModel, VirtualModel

    robot = RobotModel.load("panda")
    q = np.full(7, 0.3)
    H, J = VirtualModel(robot, 1e3).inertia(q), robot.jacobian(q)
    task = PostureTask(robot, stiffness=np.full(7, 5.0), damping=np.full(7, 1.0))
    task.torque(H, J, q, np.zeros(7))  # activation: q_p = q
    for n in (6, 8):
        with pytest.raises(ValueError):
            task.torque(H, J, np.full(n, 0.2), np.zeros(n))


def test_the_projector_sweeps_running_out_take_the_lapack_path(monkeypatch):
    """The Jacobi kernel (its Python form, with the sweep budget patched) reports failure when the sweeps run out
    before J H⁻¹ Jᵀ is diagonal, so the caller takes LAPACK's form instead of a half-rotated projector; with the
    budget it has, the same kernel succeeds on the same pose."""
    pytest.importorskip("numba")
    from fdcontrol import RobotModel, VirtualModel
    from fdcontrol.control import posture

    robot = RobotModel.load("panda")
    q = np.array([0.3, -0.5, 0.2, -2.0, 0.1, 1.6, 0.4])
    H, J = VirtualModel(robot, 1e3).inertia(q), robot.jacobian(q)
    Nt = np.empty_like(H)
    # the Jacobi path (not the Cholesky inverse of a well-conditioned J H⁻¹ Jᵀ), in its Python form
    monkeypatch.setattr(posture, "_cholesky_inverse", lambda A, Lam: False)
    monkeypatch.setattr(posture, "_jacobi_inverse", posture._jacobi_inverse_kernel)
    assert posture._projector.py_func(H, J, posture.RCOND, Nt)
    np.testing.assert_allclose(Nt, posture.nullspace_transpose_lapack(H, J), rtol=0, atol=1e-9 * np.abs(Nt).max())
    monkeypatch.setattr(posture, "JACOBI_SWEEPS", 1)
    assert not posture._projector.py_func(H, J, posture.RCOND, np.empty_like(H))


@pytest.mark.parametrize("name", ["panda", "fr3"])
def test_the_compiled_projector_at_the_straight_gamma_is_a_dynamically_consistent_projector(name):
    """At γ = 1e6 (the schedule's top, where H is nearly JᵀJ) the compiled N̄ᵀ and LAPACK's differ beyond 1e-9,
    so they are judged by what N̄ᵀ must be: a projector (N̄ᵀ N̄ᵀ = N̄ᵀ) whose torques do not accelerate the tip
    (J H⁻¹ N̄ᵀ = 0), relative to the sizes involved, at random poses."""
    pytest.importorskip("numba")
    from fdcontrol import RobotModel, VirtualModel
    from fdcontrol.control import posture

    robot = RobotModel.load(name)
    vm = VirtualModel(robot, 1e6)
    rng = np.random.default_rng(11)
    for k in range(100):
        q = rng.uniform(robot.limits.lower, robot.limits.upper)
        H, J = vm.inertia(q), robot.jacobian(q)
        Nt = np.empty_like(H)
        if not posture._projector(H, J, posture.RCOND, Nt):
            continue  # not positive definite to the kernel: the LAPACK form decides
        scale = max(1.0, np.abs(Nt).max())
        np.testing.assert_allclose(Nt @ Nt, Nt, rtol=0, atol=1e-6 * scale * scale, err_msg=str(k))
        tip = J @ np.linalg.solve(H, Nt)
        ref = np.abs(J @ np.linalg.solve(H, np.eye(H.shape[0]))).max() * scale
        assert np.abs(tip).max() <= 1e-6 * ref, (k, np.abs(tip).max(), ref)


@pytest.mark.parametrize("name", ["panda", "fr3"])
def test_the_cholesky_inverse_of_the_projector_is_the_jacobi_one_to_rounding(name):
    """Λ = (J H⁻¹ Jᵀ)⁻¹ by the Cholesky factor (taken where κ ≤ CHOLESKY_KAPPA is certain: most poses of the
    virtual model) against the truncated Jacobi eigen-inverse of the same matrix: the same Λ to rounding; a singular
    J H⁻¹ Jᵀ (two equal rows of J: an eigenvalue to cut) or an ill-conditioned one is left to the Jacobi path."""
    pytest.importorskip("numba")
    from fdcontrol import RobotModel, VirtualModel
    from fdcontrol.control import posture

    robot = RobotModel.load(name)
    vm = VirtualModel(robot, 1e3)
    rng = np.random.default_rng(3)
    taken = 0
    for k in range(200):
        q = rng.uniform(robot.limits.lower, robot.limits.upper)
        H, J = vm.inertia(q), robot.jacobian(q)
        if k % 4 == 1:
            J = J.copy()
            J[5] = J[4]
        A = J @ np.linalg.solve(H, J.T)
        A = 0.5 * (A + A.T)
        chol, jac = np.zeros((6, 6)), np.zeros((6, 6))
        ok = posture._cholesky_inverse(A.copy(), chol)
        assert posture._jacobi_inverse(A.copy(), posture.RCOND, jac)
        w = np.linalg.eigvalsh(A)
        if k % 4 == 1 or w[-1] > posture.CHOLESKY_KAPPA * max(w[0], 0.0):
            assert not ok, k  # singular or beyond the bound: never the Cholesky inverse
            assert not chol.any()
            continue
        if ok:
            taken += 1
            np.testing.assert_allclose(chol, jac, rtol=0, atol=1e-11 * np.abs(jac).max(), err_msg=str(k))
            np.testing.assert_array_equal(chol, chol.T)
    assert taken > 120, taken


def test_the_posture_load_of_wrong_shapes_takes_the_two_calls():
    """The one compiled call checks the shapes itself: a q, q̇ or J of another size than H goes to the projector and
    the torque, which raise as before; an integer q̇ (numba's dispatch refuses it) gives the same load."""
    from fdcontrol import RobotModel, VirtualModel

    robot = RobotModel.load("panda")
    q = np.full(7, 0.3)
    H, J = VirtualModel(robot, 1e3).inertia(q), robot.jacobian(q)
    task = PostureTask(robot, 10.0, 1.0, preferred=q + 0.1)
    for bad in (np.full(6, 0.3), np.full(8, 0.3)):
        with pytest.raises(ValueError):
            task.load(H, J, bad, np.zeros(len(bad)))
    with pytest.raises(ValueError):
        task.load(H, J[:, :6], q, np.zeros(7))
    Nt, tau = task.load(H, J, q, np.ones(7))
    Nt2, tau2 = task.load(H, J, q, np.ones(7, dtype=int))
    np.testing.assert_allclose(Nt2, Nt, rtol=0, atol=1e-12)
    np.testing.assert_allclose(tau2, tau, rtol=0, atol=1e-9 * np.abs(tau).max())


@pytest.mark.parametrize("compiled", [True, False])
def test_the_posture_load_from_the_upper_triangle_is_the_load_from_h(compiled, monkeypatch):
    """The posture stage hands the load CRBA's matrix as pinocchio leaves it (H's upper triangle; the strict lower one
    whatever it holds, NaN here): the same N̄ᵀ and τ_p, bit for bit, as from the mirrored H — by the one compiled
    call, and by the two calls where it is not taken."""
    from fdcontrol import RobotModel, VirtualModel
    from fdcontrol.control import posture

    if not compiled:
        monkeypatch.setattr(posture, "_load", None)
    robot = RobotModel.load("fr3")
    vm = VirtualModel(robot, 1e3)
    rng = np.random.default_rng(5)
    for k in range(100):
        q = rng.uniform(robot.limits.lower, robot.limits.upper)
        H, J = vm.inertia(q), robot.jacobian(q)
        M = np.asfortranarray(H) if k % 2 else H.copy()  # pinocchio's data.M is column-major
        M[np.tril_indices(7, -1)] = math.nan if k % 3 else 1e3  # never read
        task = PostureTask(robot, rng.uniform(0.0, 20.0, 7), rng.uniform(0.0, 5.0, 7), preferred=q + 0.2)
        qd = rng.normal(size=7)
        Nt, tau = task.load(H, J, q, qd)
        Nt2, tau2 = task.load(M, J, q, qd, True)
        assert Nt.tobytes() == Nt2.tobytes() and tau.tobytes() == tau2.tobytes(), k
