"""The posture task's default preferred posture is the configuration at activation: switching the
task on moves nothing, and q_p is a pose the arm was in (not mid-range, which for symmetric joint
ranges is q = 0, the stretched singular arm)."""

from __future__ import annotations

import numpy as np
import pytest

from fdcontrol import RobotModel, make_mapping
from fdcontrol.control.posture import PostureTask, mid_range
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver

DT = 0.002
Q0 = np.array([0.2, -0.4, 0.1, -2.0, 0.1, 1.6, 0.8])  # a Panda pose with its elbow off mid-range


def switch_on(preferred) -> tuple[np.ndarray, np.ndarray, ControlLoop]:
    robot = RobotModel.load("panda")
    sim = SimulatedRobot(robot, dt=DT, q0=Q0)
    loop = ControlLoop(robot, sim, make_solver(make_mapping("fd", robot)), rate=1 / DT)
    # running, released, a live stream of zero wrenches (the null-space loads act only while an input is
    # live: docs/security.md, what counts as a live input)
    for k in range(50):
        loop.set_wrench(np.zeros(6), t=k * DT)
        loop.step(now=k * DT)
    q0 = sim.q.copy()
    loop.reconfigure(posture=PostureTask(robot, stiffness=10.0, preferred=preferred))
    for k in range(50, 50 + round(2.0 / DT)):
        loop.set_wrench(np.zeros(6), t=k * DT)
        loop.step(now=k * DT)
    return q0, sim.q.copy(), loop


def test_switching_the_task_on_moves_nothing():
    q0, q1, loop = switch_on(None)
    print(f"default q_p: joints moved {np.abs(q1 - q0).max():.2e} rad in 2 s")
    np.testing.assert_allclose(q1, q0, atol=1e-9)
    np.testing.assert_allclose(loop.posture.preferred, q0, atol=1e-12)
    robot = loop.robot
    assert np.linalg.svd(robot.jacobian(loop.posture.preferred), compute_uv=False)[-1] > 0.05


def test_control_an_explicit_mid_range_posture_does_move_the_elbow():
    """The same switch with q_p = mid-range: the self-motion the default avoids (the test above can fail)."""
    robot = RobotModel.load("panda")
    q0, q1, _ = switch_on(mid_range(robot))
    print(f"mid-range q_p: joints moved {np.abs(q1 - q0).max():.3f} rad in 2 s")
    assert np.abs(q1 - q0).max() > 1e-2


@pytest.mark.parametrize("name", ["panda", "ur10"])
def test_mid_range_is_not_a_safe_default_for_symmetric_ranges(name):
    """Why mid-range is no default: an arm with symmetric ranges has mid-range q = 0 (the UR10's
    ranges are symmetric: there q = 0 is the stretched, singular arm)."""
    robot = RobotModel.load(name)
    lim = robot.limits
    if np.allclose(lim.lower, -lim.upper):
        q = mid_range(robot)
        np.testing.assert_allclose(q, 0.0)
        assert np.linalg.svd(robot.jacobian(q), compute_uv=False)[-1] < 1e-6
