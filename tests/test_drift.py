"""Straight hand guiding at seeded random poses and DLS on contact, on MuJoCo arms (physics
nobody here wrote). The full 20-pose sweep over three arms is `fdcontrol experiments drift`
(numbers in docs/physics.md); these tests run a few seeded poses per arm."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from fdcontrol.experiments import drift as D
from fdcontrol.experiments.arms import load_arm
from fdcontrol.experiments.contact import DLS_CUTOFF_HZ, Press, press
from fdcontrol.limits import PathAcceleration
from fdcontrol.limits.base import run
from fdcontrol.loop.reference import ReferenceIntegration
from fdcontrol.model.robot import RobotModel

POSES = 3
#: straight hand guiding as the README documents it: every setting at its default (the γ schedule from
#: gamma = 1e3 up to gamma_straight = 1e6, the default limits with path_acceleration and path_speed)
STRAIGHT = D.MUJOCO_DEFAULTS
#: the README's defaults, as it states them ("Straight by default"; docs/limits.md's default set)
DOCUMENTED_LIMITS = {"cartesian", "position", "velocity", "acceleration", "path_acceleration", "path_speed"}


@pytest.fixture(scope="module", params=("ur10", "panda"))
def arm_poses(request):
    arm = load_arm(request.param)
    return arm, D.random_poses(arm, POSES)


def test_fd_hand_guiding_drifts_under_1_percent_at_seeded_poses(arm_poses):
    """10 N along +x for 1 s on the MuJoCo arm (real servo, tool, flange sensor) with the settings the
    README documents for straight hand guiding — the defaults: force mode, FD with γ scheduled on J's
    conditioning (1e3 near singularities, 1e6 away from them), the default limits including
    path_acceleration and path_speed: the tip's lateral/along ratio stays under 1 % at every pose
    (the README: at most 0.82 % on the UR10, 0.77 % on the Panda)."""
    arm, poses = arm_poses
    built = D.build(arm, poses[0], STRAIGHT)
    fd = built.solver.mapping
    assert (fd.name, fd.scheduled, fd.gamma0, fd.gamma_straight) == ("fd", True, 1e3, 1e6)
    assert set(built.limits.names) == DOCUMENTED_LIMITS
    for q in poses:
        r = D.guide(arm, q, STRAIGHT)
        assert r["fault"] is None
        assert r["along_m"] > 0.1  # it did move with the hand
        assert r["drift"] < 0.01, (arm.name, q, r)


def test_the_gentle_push_drift_is_what_the_sensor_reads_of_the_tool(arm_poses):
    """3 N for 1 s at γ = 1e6 with path_acceleration: the same MuJoCo arm, servo and tool with a
    sensor that reads the hand alone goes straight (< 0.2 %); MuJoCo's flange sensor, read at the
    end of each period while the servo answers the period's new reference, bends the path several
    times more; averaged over the period it does not."""
    arm, poses = arm_poses
    real, exact, averaged = [], [], []
    for q in poses:
        exact.append(D.guide(arm, q, D.Variant(limits="path", gamma=1e6, push=3.0, sensor="exact"))["drift"])
        real.append(D.guide(arm, q, D.Variant(limits="path", gamma=1e6, push=3.0))["drift"])
        averaged.append(D.guide(arm, q, D.Variant(limits="path", gamma=1e6, push=3.0, sensor="averaged"))["drift"])
    assert max(exact) < 2e-3, exact
    assert max(real) > 3 * max(exact), (real, exact)
    # the same tool, its inertia read by a sensor averaged over the loop period: straight again —
    # what bends the path is the wrench sampled at one instant of the servo's response to a new reference
    assert max(averaged) < 2e-3, averaged


def test_gamma_1e3_drift_is_the_virtual_models_coupling_and_shrinks_as_1_over_gamma(arm_poses):
    """Controller alone (ideal arm, exact sensor, no limits): the drift at γ = 1e3 is the virtual
    model's anisotropy J H⁻¹ Jᵀ ≠ I; to first order it scales with 1/γ (H = JᵀJ + H_l/γ), so
    γ = 1e4 has a tenth of it — a prediction from the model's structure, not from the code."""
    arm, poses = arm_poses
    ratios = []
    for q in poses:
        # a 2 N push: a hand on the sensor is a live input above 1 N (docs/security.md)
        d3 = D.guide(arm, q, D.Variant(servo="ideal", limits="none", push=2.0))["drift"]
        d4 = D.guide(arm, q, D.Variant(servo="ideal", limits="none", push=2.0, gamma=1e4))["drift"]
        d6 = D.guide(arm, q, D.Variant(servo="ideal", limits="none", push=2.0, gamma=1e6))["drift"]
        assert d6 < 2e-3
        if d3 > 3e-3:
            ratios.append(d3 / d4)
    assert ratios, "no pose with a measurable γ = 1e3 drift"
    assert all(5 < r < 20 for r in ratios), ratios


def test_the_acceleration_limit_bends_the_path_and_path_acceleration_keeps_it():
    """Ideal arm, γ = 1e6: with the default limits the 10 N push asks for more joint acceleration
    than 4 rad/s²; scaling the change Δq̇ bends the tip's path, scaling q̇ keeps it."""
    arm = load_arm("ur10")
    q = D.random_poses(arm, 4)[3]
    bent = D.guide(arm, q, D.Variant(servo="ideal", gamma=1e6))["drift"]
    kept = D.guide(arm, q, D.Variant(servo="ideal", gamma=1e6, limits="path"))["drift"]
    assert bent > 0.01 and kept < 0.002, (bent, kept)


def test_path_acceleration_keeps_the_direction_and_the_acceleration_bound():
    rng = np.random.default_rng(3)
    a, dt = np.full(6, 4.0), 0.002
    lim = PathAcceleration(a)
    acted = 0
    for _ in range(300):
        prev = rng.normal(size=6) * 0.5
        qd = prev * rng.uniform(0.5, 1.5) + rng.normal(size=6) * rng.choice([1e-3, 2e-2])
        out = run((lim,), np.zeros(6), qd, prev, None, dt)
        if np.array_equal(out, qd):  # feasible without scaling, or no σ exists (left to the next limit)
            continue
        acted += 1
        sigma = out @ qd / (qd @ qd)
        assert 0 <= sigma < 1
        np.testing.assert_allclose(out, sigma * qd, atol=1e-12)  # direction kept
        assert np.all(np.abs(out - prev) <= a * dt + 1e-12)  # within the acceleration bound
        # the largest such σ: a little more violates some joint
        assert np.any(np.abs((sigma + 1e-6) * qd - prev) > a * dt)
    assert acted > 30


def test_reference_integration_starts_at_the_integrated_reference_within_the_bound():
    calls = []

    class Probe:
        def step(self, q, qd, f, dt, tau=None, config=None):
            calls.append(q.copy())
            return q + dt * qd, qd

    s = ReferenceIntegration(Probe(), max_tracking_error=0.05)
    q = np.zeros(3)
    s.step(q, np.zeros(3), np.zeros(6), 0.01)
    s.step(q, np.array([1.0, 0.0, -10.0]), np.zeros(6), 0.01)  # the servo integrated 1 rad/s for 10 ms
    np.testing.assert_allclose(calls[-1], [0.01, 0.0, -0.05])  # −0.1 clipped to the 0.05 bound
    s.reset()
    s.step(np.ones(3), np.ones(3), np.zeros(6), 0.01)
    np.testing.assert_allclose(calls[-1], np.ones(3))
    with pytest.raises(ValueError):
        ReferenceIntegration(Probe(), max_tracking_error=float("nan"))


def test_xarm7_from_example_robot_data_compiles_with_pinocchio_kinematics():
    arm = load_arm("xarm7")
    from fdcontrol.drivers.mujoco import MujocoRobot

    drv = MujocoRobot(arm.robot, q0=arm.home, tool=D.TOOL, urdf=arm.urdf)
    rng = np.random.default_rng(2)
    for _ in range(20):
        q = arm.robot.random_q(rng)
        drv.data.qpos[:] = q
        mujoco.mj_kinematics(drv.model, drv.data)
        T = arm.robot.pose(q)
        assert np.abs(drv.data.xpos[drv._tip_id] - T[:3, 3]).max() < 1e-12


def test_dls_rings_on_the_table_without_a_low_pass_and_settles_with_the_documented_one():
    robot = RobotModel.load("ur10")
    bare = press(robot, Press(), seconds=2.5)
    assert bare["settle_s"] is None and bare["ripple_N"] > 1.0  # the 250 Hz limit cycle
    best = press(robot, Press(cutoff=DLS_CUTOFF_HZ), seconds=3.0)
    assert best["fault"] is None
    assert best["settle_s"] is not None and best["settle_s"] < 2.0
    assert abs(best["mean_N"] - 10.0) < 0.05 and best["ripple_N"] < 0.1
    assert best["peak_N"] < 15.0


def test_dls_creeps_without_a_push_unless_the_low_pass_is_on():
    """Force mode, no push, 2 s: DLS's unfiltered loop chatters and the tip creeps; with the
    documented low-pass it stands still like FD (tip displacement from the loop's own state)."""
    from fdcontrol.experiments import physics as P

    robot = RobotModel.load("ur10")
    moved = {}
    for cutoff in (0.0, DLS_CUTOFF_HZ):
        r = P.rig(robot, "dls", law=P.force_law())
        r.loop.filter.cutoff = cutoff
        p0 = r.loop.state.tip_pose[:3, 3].copy()
        moved[cutoff] = max(float(np.linalg.norm(s.tip_pose[:3, 3] - p0)) for s in P.advance(r, 2.0))
    assert moved[0.0] > 5e-5  # the creep (0.47 mm here)
    assert moved[DLS_CUTOFF_HZ] < 1e-6


#: the 14th seeded xArm7 pose of the 20-pose sweep: pushed along +x, joint 2 reaches its velocity
#: limit while the tip runs at the Cartesian speed limit (docs/physics.md, "The velocity-limit pose")
XARM7_VELOCITY_LIMIT_POSE = [0.2868898946547769, -1.2330349961066878, -0.4727607690206479, 0.7109655831946946,
                             1.187836607946402, 0.30598118055426227, -1.5008510699406785]


def test_path_speed_keeps_the_velocity_limit_pose_straight():
    """MuJoCo xArm7, 10 N for 1 s, γ = 1e6: with path_acceleration alone the path bends (12 %)
    where keeping the line would need more joint acceleration than the limit; capping the speed
    beforehand (path_speed) keeps it under 1 %, and every joint's reference stays within its
    velocity and acceleration limits."""
    arm = load_arm("xarm7")
    q0 = np.array(XARM7_VELOCITY_LIMIT_POSE)
    bent = D.guide(arm, q0, D.Variant(limits="path", gamma=1e6))
    assert bent["drift"] > 0.05, bent
    loop = D.build(arm, q0, D.Variant(limits="path_speed", gamma=1e6))
    loop.driver.set_push(np.array([10.0, 0, 0, 0, 0, 0]))
    p0 = arm.robot.pose(q0)[:3, 3]
    lim, prev = loop.limits, np.zeros(arm.robot.dof)
    for k in range(500):
        s = loop.step(now=k * D.DT)
        assert np.all(np.abs(s.qd_ref) <= lim.max_velocity + 1e-9)
        assert np.all(np.abs(s.qd_ref - prev) <= lim.max_acceleration * D.DT + 1e-9)
        prev = s.qd_ref
    d = arm.robot.pose(loop.driver.read().q)[:3, 3] - p0
    assert d[0] > 0.15  # it followed the hand
    assert np.linalg.norm(d[1:]) / d[0] < 0.01, d


@pytest.mark.parametrize("q0, u", [
    ([0.3, -1.1, 1.4, -0.9, 1.2, 0.2], [0.6, -0.3, 0.2, 0.1, 0.05, -0.2]),
    # a gently curved path: every |q''_j| < 1, so the cap is above √(reserve · a) (no floor of 1 on |q''|)
    ([0.6115016, -1.12587324, 1.50700145, -0.99890684, 1.28440709, 0.60723276],
     [0.22073232, -0.19790312, -0.02740396, -0.59694441, -0.14432695, 0.73088147]),
])
def test_path_speed_caps_at_the_speed_the_straight_line_allows(q0, u):
    """The cap against an independent construction: the joint path of a straight line at a constant
    twist, integrated with RK4 (J q' = u), differenced twice; the capped speed is
    min_j √(reserve · a_j / |q''_j|): not acted below it (also just below), scaled to it above."""
    from fdcontrol.limits import Cycle, PathSpeed

    robot = RobotModel.load("ur10")
    q0 = np.array(q0)
    u = np.array(u)
    u /= np.linalg.norm(u)

    def qprime(q):
        return np.linalg.solve(robot.jacobian(q), u)

    def walk(q, h, n=20):
        for _ in range(n):
            k1 = qprime(q)
            k2 = qprime(q + h / n / 2 * k1)
            k3 = qprime(q + h / n / 2 * k2)
            k4 = qprime(q + h / n * k3)
            q = q + h / n / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return q

    h = 1e-3
    qpp = (walk(q0, h) - 2 * q0 + walk(q0, -h)) / h ** 2
    a = np.full(6, 4.0)
    lim = PathSpeed(robot, a, reserve=0.5)
    expected = float(np.min(np.sqrt(0.5 * a / np.abs(qpp))))
    for speed, acted in ((0.5 * expected, False), (0.95 * expected, False), (3.0 * expected, True)):
        qd = speed * qprime(q0)
        out = qd.tolist()
        assert lim.apply(Cycle(q0, np.zeros(6), robot.jacobian(q0), 0.002), out) is acted
        out = np.array(out)
        np.testing.assert_allclose(np.linalg.norm(robot.jacobian(q0) @ out), min(speed, expected), rtol=2e-3)
        np.testing.assert_allclose(out / np.linalg.norm(out), qd / np.linalg.norm(qd), atol=1e-12)  # direction
