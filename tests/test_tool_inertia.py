"""The tool's inertial wrench seen by the flange sensor and its compensation, against MuJoCo's
physics (its sensor, its body accelerations) and finite differences."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from fdcontrol.control.sensing import WrenchFilter, rotate6
from fdcontrol.control.tool_inertia import ToolMotion, inertia_matrix, inertial_wrench
from fdcontrol.experiments import drift as D
from fdcontrol.experiments.arms import load_arm

PUSH = 3.0


def _loop(arm, q0, comp: bool):
    loop = D.build(arm, q0, D.Variant(limits="path", gamma=1e6, push=PUSH, inertia_comp=comp))
    loop.driver.set_push(np.array([PUSH, 0, 0, 0, 0, 0]))
    return loop


def test_newton_euler_with_mujocos_own_acceleration_gives_mujocos_sensor_reading():
    """During hand guiding, MuJoCo's flange sensor minus the hand's wrench and the tool's weight
    is the wrench that accelerates the tool. With the tool body's true motion (MuJoCo's
    accelerations, not ours) the module's Newton–Euler equation reproduces it."""
    arm = load_arm("ur10")
    q0 = D.random_poses(arm, 1)[0]
    loop = _loop(arm, q0, comp=False)
    drv = loop.driver
    m, site = drv.model, mujoco.mj_name2id(drv.model, mujoco.mjtObj.mjOBJ_SITE, "fd_ft")
    inertia = inertia_matrix(D.TOOL.inertia)
    seen = []
    for k in range(150):
        loop.step(now=k * D.DT)
        if k % 10:
            continue
        d = drv.data
        R = d.site_xmat[site].reshape(3, 3)  # base ← sensor
        acc, vel = np.zeros(6), np.zeros(6)
        mujoco.mj_objectAcceleration(m, d, mujoco.mjtObj.mjOBJ_SITE, site, acc, 1)  # [α; a − g], local
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_SITE, site, vel, 1)
        a_o = acc[3:] + R.T @ m.opt.gravity
        w_in = inertial_wrench(D.TOOL.mass, np.array(D.TOOL.com), inertia, a_o, vel[:3], acc[:3])
        filt = WrenchFilter(tool_mass=D.TOOL.mass, tool_com=np.array(D.TOOL.com))
        raw = d.sensordata[:6].copy()  # robot on tool, sensor frame
        f_s = raw + filt.gravity_wrench(R) - w_in  # what the tool exerts on the environment
        hand = np.concatenate((R.T @ np.array([PUSH, 0.0, 0.0]), np.zeros(3)))
        seen.append(float(np.abs(w_in).max()))
        np.testing.assert_allclose(f_s, -hand, atol=2e-6 * (1 + np.abs(w_in).max()))
    assert max(seen) > 0.1  # the tool did accelerate: the check was not of zeros


def test_sensor_frame_motion_matches_finite_differences_of_a_rigid_body():
    """a_o, ω, α of a point fixed in the tip frame, from the tip's twist and acceleration, against
    central differences of that point's position and the frame's rotation along a smooth motion."""
    rng = np.random.default_rng(4)
    w0, w1, v0, v1 = (rng.normal(size=3) for _ in range(4))
    p_ts, rpy = np.array([0.02, -0.03, 0.1]), np.array([0.3, -0.2, 0.5])
    from scipy.spatial.transform import Rotation

    R_ts = Rotation.from_euler("xyz", rpy).as_matrix()

    def omega(t):
        return w0 + w1 * t

    def R_tip(t, n=4000):  # integrate Ṙ = [ω]× R with tiny exponential steps from R(0) = I
        R, h = np.eye(3), t / n
        for i in range(n):
            R = Rotation.from_rotvec(omega((i + 0.5) * h) * h).as_matrix() @ R
        return R

    def p_tip(t):
        return v0 * t + 0.5 * v1 * t * t

    t, h = 0.3, 1e-3
    Rs = [R_tip(t + k * h) for k in (-1, 0, 1)]
    pts = [p_tip(t + k * h) + Rs[i] @ p_ts for i, k in enumerate((-1, 0, 1))]
    a_fd = (pts[2] - 2 * pts[1] + pts[0]) / h ** 2
    twist = np.concatenate((v0 + v1 * t, omega(t)))
    acc = np.concatenate((v1, w1))
    a_o, om, al = ToolMotion.at_sensor(twist, acc, Rs[1], R_ts, p_ts)
    R = Rs[1] @ R_ts
    np.testing.assert_allclose(R @ a_o, a_fd, atol=2e-4)
    np.testing.assert_allclose(R @ om, omega(t), atol=1e-12)
    np.testing.assert_allclose(R @ al, w1, atol=1e-12)


def test_tool_motion_differentiates_the_twist_and_rejects_bad_input():
    mot = ToolMotion()
    np.testing.assert_array_equal(mot.update(np.ones(6), 0.002), np.zeros(6))  # no history yet
    np.testing.assert_allclose(mot.update(np.ones(6) * 1.01, 0.002), np.full(6, 5.0))
    lp = ToolMotion(cutoff=10.0)
    lp.update(np.zeros(6), 0.002)
    assert 0 < lp.update(np.ones(6) * 0.01, 0.002)[0] < 5.0  # smoothed
    with pytest.raises(ValueError):
        ToolMotion(cutoff=float("nan"))
    with pytest.raises(ValueError):
        inertia_matrix([1.0, 1.0, 5.0, 0, 0, 0])  # violates the triangle inequality
    with pytest.raises(ValueError):
        inertia_matrix([1.0, 1.0, float("inf"), 0, 0, 0])
    with pytest.raises(ValueError):
        WrenchFilter(tool_inertia=np.array([-1.0, 1, 1, 0, 0, 0]))


@pytest.mark.parametrize("name", ["ur10", "panda"])
def test_compensation_brings_an_averaged_reading_to_the_hands_force(name):
    """Hand guiding on the MuJoCo arm (3 N along +x), its sensor averaged over the loop period:
    f_measured should be −hand. Without the compensation it carries the force accelerating the
    0.8 kg tool (0.3–0.5 N rms); with it, the tool's motion estimated from the joint state, the
    error is below 1 mN rms (the period's mean acceleration is what the differenced twist gives)."""
    arm = load_arm(name)
    hand = np.array([-PUSH, 0, 0, 0, 0, 0])
    for q0 in D.random_poses(arm, 2):
        rms = {}
        for comp in (False, True):
            v = D.Variant(limits="path", gamma=1e6, push=PUSH, inertia_comp=comp, sensor="averaged")
            loop = D.build(arm, q0, v)
            loop.driver.set_push(-hand)
            err = np.array([loop.step(now=k * D.DT).f_measured - hand for k in range(400)][3:])
            rms[comp] = float(np.sqrt(np.mean(np.sum(err ** 2, axis=1))))  # force and torque together
        assert rms[False] > 0.2, rms  # the tool's inertia is there to be compensated
        assert rms[True] < 1e-3, rms


@pytest.mark.parametrize("name", ["ur10", "panda"])
def test_compensation_helps_an_end_of_period_reading_only_partly(name):
    """The same with MuJoCo's sensor read at the end of each period: the compensation removes the
    error of the period's mean acceleration (median ratio ≈ 0.15 over six poses per arm), not the
    servo's response within the period to the new reference (docs/physics.md)."""
    arm = load_arm(name)
    hand = np.array([-PUSH, 0, 0, 0, 0, 0])
    ratios = []
    for q0 in D.random_poses(arm, 3):
        rms = {}
        for comp in (False, True):
            loop = _loop(arm, q0, comp)
            err = [loop.step(now=k * D.DT).f_measured - hand for k in range(400)][3:]
            rms[comp] = float(np.sqrt(np.mean(np.sum(np.array(err)[:, :3] ** 2, axis=1))))
        assert rms[False] > 0.15, rms
        assert rms[True] < 0.8 * rms[False], rms
        ratios.append(rms[True] / rms[False])
    assert float(np.median(ratios)) < 0.35, ratios
    assert min(ratios) > 0.02, ratios  # … and not to zero: the part within the period stays


def test_compensation_is_a_wrench_about_the_tip_in_the_base_frame():
    """The filter subtracts the inertial wrench in the sensor frame before moving it to the tip:
    a pure linear acceleration of a tool with its centre of mass on the sensor axis reads m·a."""
    filt = WrenchFilter(tool_mass=2.0, tool_com=np.zeros(3), tool_inertia=np.zeros(6), inertia_compensation=True)
    R = np.eye(3)
    raw = -filt.gravity_wrench(R)  # at rest without contact the reading is the weight
    filt.apply(raw, R, 0.01, np.zeros(6))
    out = filt.apply(raw, R, 0.01, np.array([0.03, 0, 0, 0, 0, 0]))  # 3 m/s² along x
    np.testing.assert_allclose(out, rotate6(R, np.array([-6.0, 0, 0, 0, 0, 0])), atol=1e-12)


def test_the_averaged_mujoco_sensor_reads_the_weight_at_rest_and_the_periods_mean_in_motion():
    """``sensor_average``: at rest the same reading as the sensor read at the period's end (the
    tool's weight); while the servo answers a new reference the end-of-period value differs from
    the period's mean, and the averaged sensor gives that mean (computed here by stepping MuJoCo)."""
    from fdcontrol.drivers.mujoco import MujocoRobot

    arm = load_arm("ur10")
    q0 = arm.home
    end = MujocoRobot(arm.robot, q0=q0, tool=D.TOOL, urdf=arm.urdf)
    avg = MujocoRobot(arm.robot, q0=q0, tool=D.TOOL, urdf=arm.urdf, sensor_average=True)
    for drv in (end, avg):
        drv.send(None, np.zeros(arm.robot.dof))
    np.testing.assert_allclose(avg.read_wrench(), end.read_wrench(), atol=1e-6)
    assert np.linalg.norm(end.read_wrench()[:3]) == pytest.approx(D.TOOL.mass * 9.81, rel=1e-3)
    step = np.zeros(arm.robot.dof)
    step[1] = 0.2  # a new velocity reference: the servo kicks the arm within the period
    for drv in (end, avg):
        drv.send(None, step)
    # the period again on a copy of the state before it, sub-step by sub-step
    ref = MujocoRobot(arm.robot, q0=q0, tool=D.TOOL, urdf=arm.urdf)
    ref.send(None, np.zeros(arm.robot.dof))
    ref.read()
    ref.send(None, step)
    rd = ref._data
    (_, _), ref._due = ref._due, None
    ref._apply_push()
    mean = np.zeros(6)
    for _ in range(ref.nsub):
        v0 = rd.qvel.copy()
        mujoco.mj_step(ref.model, rd)
        rd.qacc[:] = (rd.qvel - v0) / ref.model.opt.timestep
        mujoco.mj_rnePostConstraint(ref.model, rd)
        mujoco.mj_sensorAcc(ref.model, rd)
        mean += rd.sensordata[:6] / ref.nsub
    np.testing.assert_allclose(avg.read_wrench(), mean, atol=1e-9)
    assert np.abs(end.read_wrench() - mean).max() > 0.05  # the end-of-period sample is another value
