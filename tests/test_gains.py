"""Variable stiffness: the ramp against its closed form, and a stiffness change in mid-motion on the
MuJoCo arm that never needs the limits to cut a reference step (a step change does)."""

from __future__ import annotations

import numpy as np
import pytest

from fdcontrol.control.gains import GainError, GainRamp, check_gains
from fdcontrol.control.law import ControlLaw, MotionTerm
from fdcontrol.control.task import TaskSpace
from fdcontrol.experiments import physics as P
from fdcontrol.model.robot import RobotModel

K0, D0 = np.array([50.0] * 3 + [20.0] * 3), np.array([10.0] * 3 + [5.0] * 3)
K1, D1 = np.array([500.0] * 3 + [100.0] * 3), np.array([40.0] * 3 + [10.0] * 3)


def test_ramp_follows_the_smooth_step():
    r = GainRamp(K0, D0, K1, D1, 1.0)
    ks = [r.step(0.01)[0] for _ in range(100)]
    t = np.arange(1, 101) * 0.01
    s = 3 * t**2 - 2 * t**3
    assert np.allclose([k[0] for k in ks], K0[0] + s * (K1[0] - K0[0]))
    assert r.done and np.allclose(ks[-1], K1)
    assert np.all(np.diff([k[0] for k in ks]) >= 0)


def test_gains_outside_the_startup_bounds_are_refused():
    with pytest.raises(GainError, match="outside"):
        check_gains([1e4] * 6, np.full(6, 5000.0), "stiffness")
    with pytest.raises(GainError, match="finite"):
        check_gains([np.nan] * 6, np.full(6, 5000.0), "stiffness")


def change_in_motion(ramp: float) -> tuple[int, float, float]:
    """Motion law tracking a target 15 cm away; at 0.5 s K, D change (ramped over ``ramp`` s).
    Returns the cycles any limit acted after the change, the largest reference acceleration
    after it (rad/s²) and the acceleration limit."""
    robot = RobotModel.load("ur10")
    law = ControlLaw(mode="motion", motion=MotionTerm(stiffness=K0.copy(), damping=D0.copy()))
    r = P.rig(robot, law=law)
    task = TaskSpace()
    r.loop.task = task
    T = robot.pose(r.drv.read().q)
    T[:3, 3] += [0.0, 0.15, 0.0]
    r.loop.set_target(T)
    active, acc, prev = 0, 0.0, np.zeros(robot.dof)
    for i in range(1500):
        if i == 250:
            task.ramp = GainRamp(law.motion.stiffness.copy(), law.motion.damping.copy(), K1, D1, ramp)
        s = r.loop.step(now=i * P.DT)
        if i >= 250:
            active += any(s.limits_active.values())
            acc = max(acc, float(np.max(np.abs(s.qd_ref - prev))) / P.DT)
        prev = s.qd_ref
    assert r.loop.fault is None
    return active, acc, float(np.max(r.loop.limits.max_acceleration))


def test_a_ramped_stiffness_change_in_mid_motion_needs_no_limit():
    active, acc, amax = change_in_motion(0.5)
    step_active, step_acc, _ = change_in_motion(0.0)
    print(f"ramped 0.5 s: limits acted in {active} cycles, peak reference acceleration {acc:.3f} rad/s²; "
          f"step: {step_active} cycles, {step_acc:.3f} rad/s² (limit {amax})")
    assert active == 0 and acc < amax
    assert step_active > 0  # the same change as a step would have reached the arm as a step
