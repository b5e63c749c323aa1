"""VirtualModel: closed-form planar arm, the DLS identity, CRBA+Cholesky vs ABA."""

from __future__ import annotations

import itertools

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol import ModelError, RobotModel, VirtualModel

from .conftest import nonsingular_q


def test_planar2_closed_form(planar2):
    """Tip: m_e = 1 at distance l2 from joint 2 with izz = 1; link 1: 1/γ at joint 1."""
    gamma, l1, l2 = 50.0, 1.0, 0.8
    vm = VirtualModel(planar2, gamma)
    for q in ([0.3, -1.1], [1.0, 0.0], [-2.0, 2.5]):
        q = np.array(q)
        c2 = np.cos(q[1])
        h11 = 1 / gamma + 1 + (l1**2 + l2**2 + 2 * l1 * l2 * c2)
        h12 = 1 + l2**2 + l1 * l2 * c2
        h22 = 1 + l2**2
        H = np.array([[h11, h12], [h12, h22]])
        np.testing.assert_allclose(vm.inertia(q), H, atol=1e-12)
        f = np.array([3.0, -2.0, 0.0, 0.0, 0.0, 0.7])
        J = planar2.jacobian(q)
        expected = np.linalg.solve(H, J.T @ f)
        for alg in ("cholesky", "aba"):
            np.testing.assert_allclose(vm.acceleration(q, f, algorithm=alg), expected, atol=1e-12)


def _h_links(vm: VirtualModel, q) -> np.ndarray:
    """Σ over light links of J_bᵀ J_b: body Jacobians at the joint origins, unit mass/inertia."""
    m, d = vm.model, vm.model.createData()
    pin.computeJointJacobians(m, d, q)
    H = np.zeros((m.nv, m.nv))
    for j in range(1, m.njoints):
        if j == vm.tip_joint:
            continue
        Jb = pin.getJointJacobian(m, d, j, pin.LOCAL)
        H += Jb.T @ Jb
    return H


@pytest.mark.parametrize("name", ["ur10", "panda"])
@pytest.mark.parametrize("gamma", [1.0, 1e3, 1e6])
def test_inertia_is_dls_with_configuration_damping(name, gamma, rng):
    """H = JᵀJ + H_l(q)/γ when the tip mass sits at the Jacobian's reference point."""
    robot = RobotModel.load(name)
    vm = VirtualModel(robot, gamma)
    for _ in range(10):
        q = robot.random_q(rng)
        J = robot.jacobian(q)
        np.testing.assert_allclose(vm.inertia(q), J.T @ J + _h_links(vm, q) / gamma, atol=1e-10)


@pytest.mark.parametrize("name", ["ur10", "panda"])
def test_cholesky_and_aba_agree(name, rng):
    robot = RobotModel.load(name)
    worst = {}
    for gamma in (1.0, 10.0, 1e3):
        vm = VirtualModel(robot, gamma)
        rel = []
        for _ in range(30):
            q, f = robot.random_q(rng), rng.normal(size=6)
            a = vm.acceleration(q, f, algorithm="cholesky")
            b = vm.acceleration(q, f, algorithm="aba")
            rel.append(np.linalg.norm(a - b) / np.linalg.norm(a))
            np.testing.assert_allclose(vm.joint_space(q, "aba"), vm.joint_space(q, "cholesky"),
                                       rtol=1e-6, atol=1e-8 * gamma)
        worst[gamma] = max(rel)
    print(f"{name}: max relative difference cholesky vs aba per gamma: {worst}")
    assert all(v < 1e-8 for v in worst.values())


def test_gravity_and_coriolis_flags_agree_between_algorithms(ur10, rng):
    vm = VirtualModel(ur10, 100.0, gravity=True, coriolis=True)
    q, qd, f = ur10.random_q(rng), rng.normal(size=6), rng.normal(size=6)
    a = vm.acceleration(q, f, qd, algorithm="cholesky")
    np.testing.assert_allclose(a, vm.acceleration(q, f, qd, algorithm="aba"), rtol=1e-9)
    # independently: H q̈ = Jᵀf − rnea(q, q̇, 0) on the same virtual model
    H = vm.inertia(q)
    b = pin.rnea(vm.model, vm.model.createData(), q, qd, np.zeros(6))
    np.testing.assert_allclose(H @ a, ur10.jacobian(q).T @ f - b, atol=1e-9)
    # the flags matter: without them q̈ is plain eq. 10
    plain = VirtualModel(ur10, 100.0)
    np.testing.assert_allclose(plain.acceleration(q, f, qd), np.linalg.solve(H, ur10.jacobian(q).T @ f),
                               rtol=1e-9)
    assert np.linalg.norm(a - plain.acceleration(q, f, qd)) > 1e-3


def test_tip_wrench_expressed_in_a_rotated_base(rng):
    """ABA's external force is converted correctly when the base frame is rotated."""
    from fdcontrol.model.robot import URDF_DIR

    sub = RobotModel.from_urdf(URDF_DIR / "ur10.urdf", base="upper_arm_link", tip="tool0")
    vm = VirtualModel(sub, 30.0)
    q, f = sub.random_q(rng), rng.normal(size=6)
    np.testing.assert_allclose(vm.acceleration(q, f, algorithm="aba"),
                               vm.acceleration(q, f, algorithm="cholesky"), rtol=1e-9)


def test_decoupling_improves_with_gamma(ur10, rng):
    q = nonsingular_q(ur10, rng)
    err = []
    for gamma in (1.0, 10.0, 1e3, 1e5):
        vm = VirtualModel(ur10, gamma)
        err.append(np.linalg.norm(ur10.jacobian(q) @ vm.joint_space(q) - np.eye(6)))
    assert all(b < a for a, b in itertools.pairwise(err)), err


@pytest.mark.parametrize("gamma", [0.0, -1.0, float("nan"), float("inf")])
def test_gamma_is_validated(ur10, gamma):
    with pytest.raises(ModelError, match="gamma must be"):
        VirtualModel(ur10, gamma)


def test_bad_wrench_and_algorithm(ur10):
    vm = VirtualModel(ur10)
    with pytest.raises(ModelError, match="6 entries"):
        vm.acceleration(np.zeros(6), np.zeros(3))
    with pytest.raises(ModelError, match="unknown algorithm"):
        vm.acceleration(np.zeros(6), np.zeros(6), algorithm="lu")  # type: ignore[arg-type]
