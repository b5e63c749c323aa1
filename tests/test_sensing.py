"""The physical sensor model (fdcontrol.control.sensing) against independent statics, the MJCF loader
and the γ-only virtual model."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol.control.law import WrenchFilter as CompatFilter
from fdcontrol.control.sensing import WrenchFilter, move_wrench, physical_reading, tool_weight
from fdcontrol.model.robot import ModelError, RobotModel
from fdcontrol.model.virtual import VirtualModel

G = np.array([0, 0, -9.81])


def rot(rng):
    return pin.exp3(rng.normal(size=3))


def test_compat_import():
    assert CompatFilter is WrenchFilter


def test_move_wrench_equals_the_moment_of_the_point_forces(rng):
    """Independent check: a set of point forces; moments summed directly about each origin."""
    R, p = rot(rng), rng.normal(size=3)  # sensor S at (R, p) in tip frame T
    pts, fs = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))  # in S
    w_s = np.concatenate((fs.sum(0), np.cross(pts, fs).sum(0)))
    pts_t, fs_t = pts @ R.T + p, fs @ R.T
    w_t = np.concatenate((fs_t.sum(0), np.cross(pts_t, fs_t).sum(0)))
    np.testing.assert_allclose(move_wrench(w_s, R, p), w_t, atol=1e-12)


@pytest.mark.parametrize("sign", ["robot_on_tool", "tool_on_robot"])
def test_statics_of_a_tool_with_contact(rng, sign):
    """Tool statics written out by hand: the robot holds the tool against gravity and a contact
    force c applied at point a (sensor frame); the filter must return the tool-on-environment
    wrench (−c at a) at the tip origin in the base frame, for any tip pose and sensor mount."""
    m, com = 0.9, np.array([0.02, -0.01, 0.07])
    R_ts, p_ts = rot(rng), np.array([0.0, 0.01, -0.04])
    filt = WrenchFilter(tool_mass=m, tool_com=com, sign=sign, sensor_rotation=R_ts, sensor_position=p_ts)
    for _ in range(5):
        R_tip = rot(rng)
        R_bs = R_tip @ R_ts
        c_base, a = rng.normal(size=3) * 5, rng.normal(size=3) * 0.05  # env-on-tool force, point (S)
        c = R_bs.T @ c_base
        weight = m * (R_bs.T @ G)
        # robot-on-tool balances weight and contact about the sensor origin
        robot_on_tool = -np.concatenate((weight + c, np.cross(com, weight) + np.cross(a, c)))
        raw = robot_on_tool if sign == "robot_on_tool" else -robot_on_tool
        out = filt.apply(raw, R_tip, 0.002)
        # expected: −c at point a, moved to the tip origin, in the base frame
        a_t = R_ts @ a + p_ts
        F_t = -(R_ts @ c)
        expect = np.concatenate((R_tip @ F_t, R_tip @ np.cross(a_t, F_t)))
        np.testing.assert_allclose(out, expect, atol=1e-10)
        # the simulators' reading is the inverse of the model
        np.testing.assert_allclose(physical_reading(-np.concatenate((c, np.cross(a, c))), m, com, R_bs, sign),
                                   raw, atol=1e-12)


def test_bias_zeroing_holds_in_other_orientations(rng):
    m, com = 0.6, np.array([0.0, 0.03, 0.05])
    filt = WrenchFilter(tool_mass=m, tool_com=com)
    bias = rng.normal(size=6)
    R0 = rot(rng)
    filt.zero(-tool_weight(m, com, R0) + bias, R0)
    for _ in range(5):
        R = rot(rng)
        np.testing.assert_allclose(filt.apply(-tool_weight(m, com, R) + bias, R, 0.002), 0, atol=1e-12)


def test_wrong_mass_shows_up_and_bad_options_are_refused():
    R = np.eye(3)
    filt = WrenchFilter(tool_mass=1.0)
    # an unmodelled 0.2 kg looks like the environment pulling the tool down: tool on env = +0.2 g up
    assert filt.apply(-tool_weight(1.2, np.zeros(3), R), R, 0.002)[2] == pytest.approx(0.2 * 9.81)
    with pytest.raises(ValueError, match="sign"):
        WrenchFilter(sign="up")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rotation"):
        WrenchFilter(sensor_rotation=2 * np.eye(3))
    with pytest.raises(ValueError, match="tool_mass"):
        WrenchFilter(tool_mass=-1)


MJCF = """<mujoco model="arm2">
  <worldbody>
    <body name="base">
      <body name="l1" pos="0 0 0.1">
        <joint name="j1" type="hinge" axis="0 0 1" range="-3 3" armature="0.1" damping="2" frictionloss="1"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="2"/>
        <body name="l2" pos="0.4 0 0">
          <joint name="j2" type="hinge" axis="0 1 0" range="-2 2" armature="0.1" damping="2"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
          <site name="tip" pos="0.3 0 0"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_from_mjcf_needs_velocity_limits_and_matches_mujoco(tmp_path):
    import mujoco

    f = tmp_path / "arm2.xml"
    f.write_text(MJCF)
    with pytest.raises(ModelError, match="velocity"):
        RobotModel.from_mjcf(f, "base", "tip")
    robot = RobotModel.from_mjcf(f, "base", "tip", velocity_limits=[2.0, 3.0])
    np.testing.assert_array_equal(robot.limits.velocity, [2.0, 3.0])
    with pytest.raises(ModelError):
        RobotModel.from_mjcf(f, "base", "tip", velocity_limits=[np.inf, 1])
    m = mujoco.MjModel.from_xml_path(str(f))
    d = mujoco.MjData(m)
    q = np.array([0.7, -0.4])
    d.qpos[:] = q
    mujoco.mj_kinematics(m, d)
    np.testing.assert_allclose(robot.pose(q)[:3, 3], d.site_xpos[0], atol=1e-12)
    assert np.any(robot.model.armature > 0)  # the source model keeps its armature ...
    vm = VirtualModel(robot, gamma=1e3)  # ... the virtual model is the γ masses only
    assert np.all(vm.model.armature == 0) and np.all(vm.model.damping == 0) and np.all(vm.model.friction == 0)
    J = robot.jacobian(q)
    H = vm.inertia(q)
    # H = JᵀJ + H_l/γ exactly (seed eq. 11–13) — armature would add 0.1 on the diagonal
    assert np.abs(H - J.T @ J).max() < 2e-3


def test_virtual_model_ignores_armature_of_an_urdf_model(ur10):
    rng = np.random.default_rng(3)
    q = ur10.random_q(rng)
    ref = VirtualModel(ur10, 1e3).inertia(q)
    noisy = RobotModel.load("ur10")
    noisy.model.armature = np.full(noisy.dof, 0.1)
    noisy.model.damping = np.full(noisy.dof, 3.0)
    np.testing.assert_allclose(VirtualModel(noisy, 1e3).inertia(q), ref, atol=1e-12)
