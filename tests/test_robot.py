"""RobotModel: URDFs against independent DH code, Jacobian against finite differences."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fdcontrol import ModelError, RobotModel
from fdcontrol.model.robot import URDF_DIR


def rz(t):
    c, s = np.cos(t), np.sin(t)
    T = np.eye(4)
    T[:2, :2] = [[c, -s], [s, c]]
    return T


def rx(t):
    c, s = np.cos(t), np.sin(t)
    T = np.eye(4)
    T[1:3, 1:3] = [[c, -s], [s, c]]
    return T


def tr(x, y, z):
    T = np.eye(4)
    T[:3, 3] = [x, y, z]
    return T


def ur10_dh(q):
    """Universal Robots' standard DH: T_i = Rz(q_i) Tz(d_i) Tx(a_i) Rx(α_i)."""
    d = [0.1273, 0, 0, 0.163941, 0.1157, 0.0922]
    a = [0, -0.612, -0.5723, 0, 0, 0]
    al = [np.pi / 2, 0, 0, np.pi / 2, -np.pi / 2, 0]
    T = np.eye(4)
    for i in range(6):
        T = T @ rz(q[i]) @ tr(0, 0, d[i]) @ tr(a[i], 0, 0) @ rx(al[i])
    return T


def panda_mdh(q):
    """Franka's modified (Craig) DH: T_i = Rx(α_{i-1}) Tx(a_{i-1}) Rz(q_i) Tz(d_i); flange d=0.107."""
    rows = [(0, 0.333, 0), (0, 0, -np.pi / 2), (0, 0.316, np.pi / 2), (0.0825, 0, np.pi / 2),
            (-0.0825, 0.384, -np.pi / 2), (0, 0, np.pi / 2), (0.088, 0, np.pi / 2)]
    T = np.eye(4)
    for (a, d, al), qi in zip(rows, q, strict=True):
        T = T @ rx(al) @ tr(a, 0, 0) @ rz(qi) @ tr(0, 0, d)
    return T @ tr(0, 0, 0.107)


def planar2_fk(q):
    l1, l2 = 1.0, 0.8
    T = rz(q[0] + q[1])
    T[:2, 3] = [l1 * np.cos(q[0]) + l2 * np.cos(q[0] + q[1]),
                l1 * np.sin(q[0]) + l2 * np.sin(q[0] + q[1])]
    return T


@pytest.mark.parametrize("name,fk", [("ur10", ur10_dh), ("panda", panda_mdh),
                                     ("planar2", planar2_fk)])
def test_urdf_matches_independent_dh(name, fk, rng):
    robot = RobotModel.load(name)
    for _ in range(50):
        q = robot.random_q(rng)
        np.testing.assert_allclose(robot.pose(q), fk(q), atol=1e-9)


def test_ur10_description(ur10):
    assert ur10.dof == 6
    assert ur10.joint_names[0] == "shoulder_pan_joint" and ur10.joint_names[-1] == "wrist_3_joint"
    lim = ur10.limits
    np.testing.assert_allclose(lim.upper, 2 * np.pi)
    np.testing.assert_allclose(lim.velocity, [2.0944, 2.0944, 3.1416, 3.1416, 3.1416, 3.1416])
    masses = [ur10.model.inertias[j].mass for j in range(1, 7)]
    np.testing.assert_allclose(masses, [7.1, 12.7, 4.27, 2.0, 2.0, 0.365])


def test_panda_limits(panda):
    assert panda.dof == 7
    assert panda.limits.upper[3] == pytest.approx(-0.0698)
    assert panda.limits.lower[5] == pytest.approx(-0.0175)


def _fd_jacobian(robot, q, h=1e-6):
    T0 = robot.pose(q)
    J = np.zeros((6, robot.dof))
    for i in range(robot.dof):
        dq = np.zeros(robot.dof)
        dq[i] = h
        Tp, Tm = robot.pose(q + dq), robot.pose(q - dq)
        J[:3, i] = (Tp[:3, 3] - Tm[:3, 3]) / (2 * h)
        W = (Tp[:3, :3] - Tm[:3, :3]) / (2 * h) @ T0[:3, :3].T  # Ṙ Rᵀ = [ω]×
        J[3:, i] = [W[2, 1], W[0, 2], W[1, 0]]
    return J


@pytest.mark.parametrize("name", ["ur10", "panda", "planar2"])
def test_jacobian_matches_finite_differences(name, rng):
    robot = RobotModel.load(name)
    for _ in range(10):
        q = robot.random_q(rng)
        np.testing.assert_allclose(robot.jacobian(q), _fd_jacobian(robot, q), atol=1e-7)


def test_planar2_jacobian_closed_form(planar2):
    q = np.array([0.3, -1.1])
    l1, l2 = 1.0, 0.8
    s1, c1, s12, c12 = np.sin(q[0]), np.cos(q[0]), np.sin(q.sum()), np.cos(q.sum())
    expected = np.zeros((6, 2))
    expected[0] = [-l1 * s1 - l2 * s12, -l2 * s12]
    expected[1] = [l1 * c1 + l2 * c12, l2 * c12]
    expected[5] = [1, 1]
    np.testing.assert_allclose(planar2.jacobian(q), expected, atol=1e-12)


def test_sub_chain_of_any_urdf(ur10, rng):
    """A chain between two inner frames: joints off the chain are locked at zero."""
    sub = RobotModel.from_urdf(URDF_DIR / "ur10.urdf", base="upper_arm_link", tip="wrist_2_link")
    assert sub.joint_names == ["elbow_joint", "wrist_1_joint", "wrist_2_joint"]
    q3 = rng.uniform(-3, 3, 3)
    full_q = np.array([0.0, 0.0, *q3, 0.0])
    import pinocchio as pin

    pin.framesForwardKinematics(ur10.model, ur10.data, full_q)
    oMb = ur10.data.oMf[ur10.model.getFrameId("upper_arm_link")]
    oMt = ur10.data.oMf[ur10.model.getFrameId("wrist_2_link")]
    np.testing.assert_allclose(sub.pose(q3), (oMb.actInv(oMt)).homogeneous, atol=1e-12)
    # Jacobian expressed in the (rotated) base frame still matches finite differences
    np.testing.assert_allclose(sub.jacobian(q3), _fd_jacobian(sub, q3), atol=1e-7)


def test_manipulability_is_yoshikawa(ur10, rng):
    q = ur10.random_q(rng)
    J = ur10.jacobian(q)
    assert ur10.manipulability(q) == pytest.approx(np.sqrt(np.linalg.det(J @ J.T)), rel=1e-9)


def test_errors_name_what_was_expected(ur10, tmp_path: Path):
    with pytest.raises(ModelError, match="URDF file not found"):
        RobotModel.from_urdf(tmp_path / "nope.urdf", "a", "b")
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot name='x'><link name='a'/><joint")
    with pytest.raises(ModelError, match="cannot parse URDF"):
        RobotModel.from_urdf(bad, "a", "b")
    with pytest.raises(ModelError, match=r"available frames: .*tool0"):
        RobotModel.from_urdf(URDF_DIR / "ur10.urdf", "base_link", "flange")
    with pytest.raises(ModelError, match="not an ancestor"):
        RobotModel.from_urdf(URDF_DIR / "ur10.urdf", "tool0", "base_link")
    with pytest.raises(ModelError, match=r"unknown robot .ur5.: the shipped robots are ur10, panda, fr3, "
                                         r"planar2; or give a robot description file"):
        RobotModel.load("ur5")
    with pytest.raises(ModelError, match="must have 6 entries"):
        ur10.pose(np.zeros(5))
    with pytest.raises(ModelError, match="NaN or Inf"):
        ur10.jacobian([0, 0, np.nan, 0, 0, 0])
