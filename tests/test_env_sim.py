"""The learning interface's parts: target interpolation, reference limiting, action spaces, the in-process env."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol.control.interpolator import PEAK_ACCELERATION, PEAK_SPEED, TargetInterpolator, quintic
from fdcontrol.control.laws import ControlInput, MotionTerm
from fdcontrol.control.laws.motion import clip_error

gym = pytest.importorskip("gymnasium", reason="the env extra (gymnasium) is not installed")

from fdcontrol.env.spaces import ActionError, ActionSpec, check_action, goal_pose  # noqa: E402


# ---------------------------------------------------------------------- interpolator
def test_quintic_from_rest_is_the_minimum_jerk_profile():
    d, T = np.array([0.3, -0.1, 0.05, 0.2, 0.0, -0.4]), 0.7
    for s in np.linspace(0, 1, 11):
        x, _, _ = quintic(d, np.zeros(6), np.zeros(6), T, s * T)
        np.testing.assert_allclose(x, d * (10 * s**3 - 15 * s**4 + 6 * s**5), atol=1e-12)  # Flash & Hogan


def test_quintic_boundary_conditions_by_finite_differences():
    rng = np.random.default_rng(3)
    d, v0, a0, T, h = rng.normal(size=6), rng.normal(size=6), rng.normal(size=6), 0.4, 1e-5
    x = lambda t: quintic(d, v0, a0, T, t)[0]  # noqa: E731
    np.testing.assert_allclose(x(0.0), 0, atol=1e-12)
    np.testing.assert_allclose(x(T), d, atol=1e-12)
    np.testing.assert_allclose((x(h) - x(0)) / h, v0, atol=1e-3)  # one-sided at the ends
    np.testing.assert_allclose((x(T) - x(T - h)) / h, 0, atol=1e-3)
    k = 1e-4  # second-order one-sided second differences (2x₀ − 5x₁ + 4x₂ − x₃)/k²
    np.testing.assert_allclose((2 * x(0) - 5 * x(k) + 4 * x(2 * k) - x(3 * k)) / k**2, a0, atol=1e-2)
    np.testing.assert_allclose((2 * x(T) - 5 * x(T - k) + 4 * x(T - 2 * k) - x(T - 3 * k)) / k**2, 0, atol=1e-2)
    for t in (0.1, 0.25):  # the returned velocity and acceleration are the derivatives
        _, v, a = quintic(d, v0, a0, T, t)
        np.testing.assert_allclose((x(t + h) - x(t - h)) / (2 * h), v, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose((x(t + h) - 2 * x(t) + x(t - h)) / h**2, a, rtol=1e-4, atol=1e-4)


def _positions(interp: TargetInterpolator, times: np.ndarray) -> np.ndarray:
    return np.array([interp.sample(t)[:3, 3] for t in times])


def test_new_goal_mid_segment_keeps_velocity_and_acceleration_continuous():
    start = np.eye(4)
    ip = TargetInterpolator()
    ip.reset(start, 0.0)
    g1 = np.eye(4)
    g1[:3, 3] = [0.02, 0.0, 0.0]
    ip.set_goal(g1, 0.1, 0.0)
    g2 = np.eye(4)
    g2[:3, 3] = [0.02, 0.03, 0.0]
    dt = 1e-4
    before = _positions(ip, 0.06 + dt * np.arange(-3, 1))
    ip.set_goal(g2, 0.1, 0.06)
    after = _positions(ip, 0.06 + dt * np.arange(0, 4))
    x = np.vstack((before[:-1], after))  # positions at 0.06 + k·dt, k = −3 … 3
    v_before, v_after = (x[3] - x[2]) / dt, (x[4] - x[3]) / dt
    a_before, a_after = (x[3] - 2 * x[2] + x[1]) / dt**2, (x[5] - 2 * x[4] + x[3]) / dt**2
    np.testing.assert_allclose(v_after, v_before, atol=0.002 * np.abs(v_before).max() + 1e-4)
    assert np.linalg.norm(a_after - a_before) < 0.05 * max(np.linalg.norm(a_before), 1.0)
    np.testing.assert_allclose(ip.sample(1.0), g2, atol=1e-12)  # and it ends at the new goal


def test_segment_from_rest_respects_speed_and_acceleration_bounds():
    ip = TargetInterpolator(max_linear_speed=0.1, max_angular_speed=0.5, max_linear_acceleration=1.0,
                            max_angular_acceleration=4.0)
    ip.reset(np.eye(4), 0.0)
    goal = np.eye(4)
    goal[:3, 3] = [0.05, 0.02, 0.0]
    goal[:3, :3] = pin.exp3(np.array([0.0, 0.0, 0.3]))
    ip.set_goal(goal, 0.05, 0.0)  # far more than 0.05 s of motion: the duration stretches
    d = math.hypot(0.05, 0.02)
    assert ip.duration == pytest.approx(max(PEAK_SPEED * d / 0.1, PEAK_SPEED * 0.3 / 0.5,
                                            math.sqrt(PEAK_ACCELERATION * d / 1.0)))
    dt = 1e-4
    t = np.arange(0, ip.duration + 0.01, dt)
    x = _positions(ip, t)
    v = np.linalg.norm(np.diff(x, axis=0), axis=1) / dt
    a = np.linalg.norm(np.diff(x, 2, axis=0), axis=1) / dt**2
    assert v.max() <= 0.1 * 1.001 and a.max() <= 1.0 * 1.01
    rot = np.array([pin.log3(ip.sample(ti)[:3, :3])[2] for ti in t])
    assert np.abs(np.diff(rot)).max() / dt <= 0.5 * 1.001


# ---------------------------------------------------------------------- reference limiting
def test_clip_error_per_axis_of_the_tool_frame():
    R = pin.exp3(np.array([0.3, -0.5, 1.1]))
    e = np.array([0.02, -0.004, 0.01, 0.3, -0.02, 0.0])
    b = np.array([0.005, 0.005, 0.02, 0.1, 0.1, 0.1])
    got = clip_error(e, R, b)
    # independently: the error in tool coordinates, clipped, and back
    e_tool = np.concatenate((R.T @ e[:3], R.T @ e[3:]))
    want_tool = np.minimum(np.maximum(e_tool, -b), b)
    np.testing.assert_allclose(np.concatenate((R.T @ got[:3], R.T @ got[3:])), want_tool, atol=1e-15)
    np.testing.assert_allclose(clip_error(e, np.eye(3), np.full(6, 10.0)), e)  # loose bounds: unchanged


def test_clipped_motion_term_pushes_with_at_most_stiffness_times_bound():
    K = np.array([200.0, 300.0, 400.0, 50.0, 60.0, 70.0])
    b = np.array([0.005, 0.01, 0.002, 0.05, 0.05, 0.05])
    term = MotionTerm(stiffness=K, damping=np.zeros(6), error_clip=b)
    target = np.eye(4)
    target[:3, 3] = [0.2, -0.3, -0.03]  # far beyond the bounds on every axis
    target[:3, :3] = pin.exp3(np.array([0.0, 0.4, 0.0]))
    x = ControlInput(np.eye(4), np.zeros(6), np.zeros(6), np.zeros(6), target)
    f = term(x, np.eye(3))
    np.testing.assert_allclose(np.abs(f[:3]), K[:3] * b[:3])
    np.testing.assert_allclose(f[4], K[4] * b[4])
    f_off = MotionTerm(stiffness=K, damping=np.zeros(6))(x, np.eye(3))
    dp = target[:3, 3]
    np.testing.assert_allclose(f_off[:3], K[:3] * dp * 0.1 / np.linalg.norm(dp))  # unclipped: K·e, |e| ≤ 0.1 m


# ---------------------------------------------------------------------- action spaces
def test_delta_actions_compose_in_base_and_tool_frames():
    goal = np.eye(4)
    goal[:3, :3] = pin.exp3(np.array([0.2, -0.7, 0.4]))
    goal[:3, 3] = [0.5, 0.1, 0.3]
    a = np.array([0.01, -0.02, 0.005, 0.03, 0.0, -0.05])
    M = pin.SE3(goal[:3, :3], goal[:3, 3])
    base, _ = goal_pose(ActionSpec(), a, goal, goal, 0.05)
    np.testing.assert_allclose(base[:3, 3], goal[:3, 3] + a[:3])
    np.testing.assert_allclose(base[:3, :3], pin.exp3(a[3:]) @ goal[:3, :3], atol=1e-15)
    tool, _ = goal_pose(ActionSpec(frame="tool"), a, goal, goal, 0.05)
    want = M * pin.SE3(pin.exp3(a[3:]), a[:3])  # a motion expressed in the tool frame: right-multiplied
    np.testing.assert_allclose(tool, want.homogeneous, atol=1e-15)


def test_check_action_names_the_problem():
    space = ActionSpec().space(6)
    with pytest.raises(ActionError, match="shape"):
        check_action(space, np.zeros(7))
    with pytest.raises(ActionError, match="finite"):
        check_action(space, [0, 0, math.nan, 0, 0, 0])
    with pytest.raises(ActionError, match=r"action\[3\]"):
        check_action(space, [0, 0, 0, 1.0, 0, 0])
    with pytest.raises(ActionError):
        check_action(space, "abc")
    np.testing.assert_array_equal(check_action(space, [0.01, 0, 0, 0, 0, 0]), [0.01, 0, 0, 0, 0, 0])


# ---------------------------------------------------------------------- in-process env
@pytest.fixture(scope="module")
def sim_env():
    from fdcontrol.env.sim import SimEnv

    env = SimEnv(rate=20.0)
    yield env
    env.close()


def test_sim_env_40_delta_steps(sim_env):
    obs, _ = sim_env.reset(seed=0)
    p0 = obs["tip_pose"][:3].copy()
    for _ in range(40):
        obs, _, _, _, info = sim_env.step(np.array([0.005, 0, 0, 0, 0, 0]))
        assert info["action_delay"] == 0.0  # used by the very next loop cycle
    for _ in range(20):
        obs, *_ = sim_env.step(np.zeros(6))
    d = obs["tip_pose"][:3] - p0
    assert abs(d[0] - 0.2) <= 0.01 and math.hypot(d[1], d[2]) < 0.002


def test_sim_env_passes_gymnasium_env_checker(sim_env):
    from gymnasium.utils.env_checker import check_env

    check_env(sim_env, skip_render_check=True, skip_close_check=True)  # determinism included


def test_sim_env_bad_action_changes_nothing(sim_env):
    sim_env.reset(seed=1)
    cycle, t = sim_env.loop.cycle, sim_env.t
    for bad in ([math.nan] * 6, [0.0] * 3, [0.5, 0, 0, 0, 0, 0]):
        with pytest.raises(ActionError):
            sim_env.step(bad)
    assert sim_env.loop.cycle == cycle and sim_env.t == t and sim_env.loop.action is None
