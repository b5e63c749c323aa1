"""Issue 7 (part): the QR square-root FD, accuracy against a 50-digit reference, γ bounds, telemetry."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol import ForwardDynamics, ModelError, RobotModel, VirtualModel, make_mapping
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.experiments.numerics import reference
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.virtual import GAMMA_MAX

NEAR_SINGULAR = [np.array([0.3, -1.2, 1.6, -1.9, 10.0**-k, 0.2]) for k in (2, 5, 8)]


@pytest.mark.parametrize("algorithm", ["cholesky", "aba", "qr"])
def test_fd_algorithms_meet_the_reference_up_to_their_bound(ur10, rng, algorithm):
    gamma = GAMMA_MAX[algorithm]
    vm = VirtualModel(ur10, gamma)
    worst = 0.0
    for q in [ur10.random_q(rng) for _ in range(5)] + NEAR_SINGULAR + [np.zeros(6)]:
        f = rng.normal(size=6)
        x = reference(ur10.jacobian(q), vm.link_jacobians(q), gamma, f)
        y = vm.acceleration(q, f, algorithm=algorithm)
        worst = max(worst, np.linalg.norm(y - x) / np.linalg.norm(x))
    print(f"{algorithm} at γ = {gamma:g}: worst relative error {worst:.2e}")
    assert worst < 1e-6


def test_qr_matches_cholesky_and_aba(panda, rng):
    vm = VirtualModel(panda, 300.0)
    for _ in range(5):
        q, f = panda.random_q(rng), rng.normal(size=6)
        a = vm.acceleration(q, f, algorithm="qr")
        np.testing.assert_allclose(a, vm.acceleration(q, f), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(vm.joint_space(q, "qr"), vm.joint_space(q), rtol=1e-8, atol=1e-11)
    # joint-space loads go through the semi-normal equations: compare with the dense solve
    q, f, tau = panda.random_q(rng), rng.normal(size=6), rng.normal(size=7)
    H = vm.inertia(q)
    np.testing.assert_allclose(vm.acceleration(q, f, tau=tau, algorithm="qr"),
                               np.linalg.solve(H, panda.jacobian(q).T @ f + tau), rtol=1e-9)


def test_exactly_singular_pose_gives_finite_accelerations(ur10):
    for algorithm, gamma in GAMMA_MAX.items():
        a = VirtualModel(ur10, gamma).acceleration(np.zeros(6), np.ones(6), algorithm=algorithm)
        assert np.all(np.isfinite(a)), algorithm


def test_inertia_is_the_sum_of_body_inertias(ur10, rng):
    """Seed 001 eq. 15: H = Σ_b J_bᵀ I_b J_b, with every body's 6×6 spatial inertia —
    for the real robot's masses and for the virtual model's."""
    for model in (ur10.model, VirtualModel(ur10, 50.0).model):
        data = model.createData()
        q = ur10.random_q(rng)
        pin.computeJointJacobians(model, data, q)
        H = sum(pin.getJointJacobian(model, data, j, pin.LOCAL).T @ model.inertias[j].matrix()
                @ pin.getJointJacobian(model, data, j, pin.LOCAL) for j in range(1, model.njoints))
        M = pin.crba(model, data, q)
        np.testing.assert_allclose(np.triu(M) + np.triu(M, 1).T, H, atol=1e-10)


def test_gamma_beyond_the_bound_is_rejected(ur10):
    with pytest.raises(ModelError, match="exceeds the accurate range of the cholesky"):
        ForwardDynamics(ur10, 1e10)
    ForwardDynamics(ur10, 1e10, algorithm="qr")  # within QR's range
    with pytest.raises(ModelError, match=r"gamma must be ≥ 1e-06 and ≤ 1e\+12"):  # beyond every algorithm
        VirtualModel(ur10, 1e13)


def test_loop_reports_singularity_telemetry(ur10):
    for mapping, finite in (("fd", True), ("jt", False)):
        sim = SimulatedRobot(ur10, q0=np.array([0.3, -1.2, 1.6, -1.9, 1e-3, 0.2]))
        loop = ControlLoop(ur10, sim, make_solver(make_mapping(mapping, ur10)))
        s = loop.step(now=0.0)
        assert s.sigma_min_j < 1e-2
        assert np.isfinite(s.kappa_h) == finite
        if finite:
            assert s.kappa_h == pytest.approx(np.linalg.cond(VirtualModel(ur10, 1e3).inertia(s.q)), rel=1e-9)


def test_sub_chain_qr(rng):
    from fdcontrol.model.robot import URDF_DIR

    sub = RobotModel.from_urdf(URDF_DIR / "ur10.urdf", base="upper_arm_link", tip="tool0")
    vm = VirtualModel(sub, 100.0)
    q, f = sub.random_q(rng), rng.normal(size=6)
    np.testing.assert_allclose(vm.acceleration(q, f, algorithm="qr"), vm.acceleration(q, f), rtol=1e-9)


def locked_reference(J: np.ndarray, A: np.ndarray, gamma: float, f: np.ndarray, locked: np.ndarray) -> np.ndarray:
    """Seed 001 eq. 7 in 50 digits: H_FF x_F = J_Fᵀ f with H_FF = J_FᵀJ_F + A_FᵀA_F/γ, x_locked = 0."""
    free = ~locked
    x = np.zeros(J.shape[1])
    x[free] = reference(J[:, free], A[:, free], gamma, f)
    return x


@pytest.mark.parametrize("algorithm", ["cholesky", "aba", "qr"])
def test_constrained_fd_meets_the_reference_up_to_the_bound(ur10, rng, algorithm):
    """At a limit, the locked-joint q̈ of each algorithm (its own exact form) vs 50 digits, γ = GAMMA_MAX."""
    from fdcontrol.loop.solvers import ForwardDynamicsSolver

    gamma = GAMMA_MAX[algorithm]
    solver = ForwardDynamicsSolver(ForwardDynamics(ur10, gamma, algorithm), coriolis=False)
    vm = solver.virtual
    worst, zero = 0.0, np.zeros(6)
    for q in [ur10.random_q(rng) for _ in range(3)] + NEAR_SINGULAR + [np.zeros(6)]:
        for lock in ([0], [1], [2], [3], [4], [5], [1, 4]):
            locked = np.zeros(6, dtype=bool)
            locked[lock] = True
            f = rng.normal(size=6)
            x = locked_reference(ur10.jacobian(q), vm.link_jacobians(q), gamma, f, locked)
            y = solver.locked_solve(q, f, zero, locked)
            assert np.all(y[locked] == 0.0)
            worst = max(worst, np.linalg.norm(y - x) / np.linalg.norm(x))
    print(f"constrained {algorithm} at γ = {gamma:g}: worst relative error {worst:.2e}")
    assert worst < 1e-6


@pytest.mark.parametrize("algorithm", ["cholesky", "aba", "qr"])
def test_constrained_step_uses_the_selected_algorithm(ur10, rng, algorithm):
    """A joint sitting on its limit, pushed outward: one Euler step gives q̇ = dt · x_locked with the
    joint locked, and joint-space loads (τ) enter as in H_FF x = J_Fᵀf + τ_F."""
    import copy

    from fdcontrol.loop.solvers import ForwardDynamicsSolver

    q = np.array([0.3, -1.2, 1.6, -1.9, 1e-3, 0.2])
    f, tau = rng.normal(size=6), rng.normal(size=6)
    robot = copy.copy(ur10)
    robot.model = ur10.model.copy()
    robot.data = robot.model.createData()
    x_free = VirtualModel(ur10, 1e3).acceleration(q, f, tau=tau)
    j = 1
    if x_free[j] > 0:
        robot.model.upperPositionLimit[j] = q[j]
    else:
        robot.model.lowerPositionLimit[j] = q[j]
    s = ForwardDynamicsSolver(ForwardDynamics(robot, 1e3, algorithm), coriolis=False, decay=0.0)
    _, qd = s.step(q, np.zeros(6), f, 0.01, tau=tau)
    locked = np.zeros(6, dtype=bool)
    locked[j] = True
    H = VirtualModel(ur10, 1e3).inertia(q)
    b = ur10.jacobian(q).T @ f + tau
    expected = np.zeros(6)
    expected[~locked] = np.linalg.solve(H[np.ix_(~locked, ~locked)], b[~locked])
    assert s.constraints.active[j] and qd[j] == 0.0
    np.testing.assert_allclose(qd, 0.01 * expected, rtol=1e-9, atol=1e-12)


def test_a_virtual_model_whose_gamma_changed_in_place_is_the_model_built_at_that_gamma():
    """set_gamma (the γ schedule's change in place) gives the H, and the q̈, of a VirtualModel built at that γ
    from the start, to the bit, on random poses and γ in both directions; an equal γ changes nothing."""
    robot = RobotModel.load("fr3")
    vm = VirtualModel(robot, 1e3)
    rng = np.random.default_rng(2)
    for g in [*rng.uniform(1e3, 1e6, 30), 1e3, 1e6, 1e3]:
        vm.set_gamma(float(g))
        fresh = VirtualModel(robot, float(g))
        q, f = rng.uniform(robot.limits.lower, robot.limits.upper), rng.normal(size=6)
        assert vm.gamma == fresh.gamma
        np.testing.assert_array_equal(vm.inertia(q), fresh.inertia(q))
        np.testing.assert_array_equal(vm.acceleration(q, f), fresh.acceleration(q, f))
    with pytest.raises(ModelError):
        vm.set_gamma(0.0)
    for bad in (1e13, 5e-7, float("nan"), float("inf"), True, "2e3"):  # the checks of a γ given from outside
        with pytest.raises(ModelError):
            vm.set_gamma(bad)
    vm.set_gamma(np.float64(2e3))  # a numpy float: check_gamma's plain float
    assert type(vm.gamma) is float and vm.gamma == 2e3
