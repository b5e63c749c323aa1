"""A move's planned path against keep-out volumes: the sampled Ruckig trajectory is the reference
the loop sends (checked cycle by cycle against the online generator), a straight move through a
sphere is refused with the closest approach of the closed-form segment–sphere distance, a joint
move whose tip passes through a sphere (placed on the tip's position midway along the joint path,
by forward kinematics of the midpoint) is refused, and moves around the volumes pass."""

from __future__ import annotations

import numpy as np
import pytest

from fdcontrol.control.path_check import path_violations, planned_points, planned_samples
from fdcontrol.control.trajectory import Move, MoveLimits
from fdcontrol.control.workspace import workspace_from_config
from fdcontrol.model.robot import HOME, RobotModel

DT = 0.002
LIM = MoveLimits(joint_velocity=np.full(6, 1.0), joint_acceleration=np.full(6, 2.0), joint_jerk=np.full(6, 20.0))


def start() -> tuple[RobotModel, np.ndarray, np.ndarray]:
    robot = RobotModel.load("ur10")
    q0 = np.array(HOME["ur10"])
    return robot, q0, robot.pose(q0)


def cartesian(robot, T0, offset) -> Move:
    goal = T0.copy()
    goal[:3, 3] += offset
    return Move(robot, T0, DT, LIM, goal_pose=goal)


def segment_sphere(a: np.ndarray, b: np.ndarray, c: np.ndarray, r: float) -> float:
    """Closed form: the distance of the segment ab from the sphere's surface (negative inside)."""
    t = float(np.clip((c - a) @ (b - a) / ((b - a) @ (b - a)), 0, 1))
    return float(np.linalg.norm(a + t * (b - a) - c)) - r


def test_the_samples_are_the_references_the_loop_generates():
    robot, _, T0 = start()
    mv = cartesian(robot, T0, [0.15, -0.1, 0.05])
    times, xs = planned_samples(mv)
    online = [mv.x.copy()]
    while mv.status == "moving" and len(online) < 10_000:
        mv.step(mv.pose)  # the arm on its reference: no pause
        online.append(mv.x.copy())
    n = min(len(online), len(xs) - 1)
    assert np.allclose(np.array(online[1:n]), xs[1:n], atol=1e-9)
    assert np.allclose(xs[-1][:3], T0[:3, 3] + [0.15, -0.1, 0.05])
    assert times[-1] == pytest.approx(mv.duration, abs=2 * DT)


def test_a_straight_move_through_a_sphere_is_refused_around_it_allowed():
    robot, _, T0 = start()
    a = T0[:3, 3]
    offset = np.array([0.25, 0.0, 0.0])
    c, r = a + [0.12, 0.02, 0.0], 0.04
    ws = workspace_from_config(robot, None, [{"name": "ball", "sphere": {"center": c.tolist(), "radius": r}}])
    bad = path_violations(cartesian(robot, T0, offset), ws)
    assert len(bad) == 1 and "through 'ball'" in bad[0], bad
    closest = float(bad[0].split("closest ")[1].split(" mm")[0]) / 1e3
    assert closest == pytest.approx(segment_sphere(a, a + offset, c, r), abs=1e-3)
    # a goal beside it whose straight path clears the sphere and its margin: allowed
    side = np.array([0.0, 0.2, 0.1])
    assert segment_sphere(a, a + side, c, r) > 0.05
    assert path_violations(cartesian(robot, T0, side), ws) == []
    # the margin counts: a path 3 cm from the surface with a 5 cm margin is refused, not "through"
    near = workspace_from_config(robot, None, [{"name": "ball", "sphere": {"center": (c + [0, 0.05, 0]).tolist(),
                                                                          "radius": r}, "margin": 0.05}])
    bad = path_violations(cartesian(robot, T0, offset), near)
    assert len(bad) == 1 and "within the margin of 'ball'" in bad[0], bad


def test_a_joint_move_whose_tip_sweeps_through_a_sphere_is_refused():
    robot, q0, _ = start()
    qg = q0 + np.array([0.8, 0.3, -0.4, 0.2, 0.0, 0.0])
    mid = robot.pose((q0 + qg) / 2)[:3, 3]  # phase-synchronised: the joint path is a straight line
    assert np.linalg.norm(mid - robot.pose(q0)[:3, 3]) > 0.15 and np.linalg.norm(mid - robot.pose(qg)[:3, 3]) > 0.15
    ws = workspace_from_config(robot, None, [{"name": "post", "sphere": {"center": mid.tolist(), "radius": 0.03},
                                              "margin": 0.02}])
    mv = Move(robot, robot.pose(q0), DT, LIM, goal_q=qg, start_q=q0)
    bad = path_violations(mv, ws)
    assert len(bad) == 1 and "tool centre point passes through 'post'" in bad[0], bad
    # moved 20 cm off the swept path: allowed
    _, pts = planned_points(mv, [])
    away = mid + [0, 0, 0.2]
    assert np.min(np.linalg.norm(pts["tip"] - away, axis=1)) > 0.06
    ws2 = workspace_from_config(robot, None, [{"name": "post", "sphere": {"center": away.tolist(), "radius": 0.03},
                                               "margin": 0.02}])
    assert path_violations(mv, ws2) == []


def test_a_joint_move_checks_the_workspace_links_too():
    robot, q0, _ = start()
    qg = q0 + np.array([0.8, 0.3, -0.4, 0.2, 0.0, 0.0])
    mv = Move(robot, robot.pose(q0), DT, LIM, goal_q=qg, start_q=q0)
    _, pts = planned_points(mv, ["forearm_link"])
    elbow_mid = pts["forearm_link"][len(pts["forearm_link"]) // 2]
    keep = [{"name": "lamp", "sphere": {"center": elbow_mid.tolist(), "radius": 0.03}, "margin": 0.02}]
    assert np.min(np.linalg.norm(pts["tip"] - elbow_mid, axis=1)) > 0.1  # the tip never comes near it
    assert path_violations(mv, workspace_from_config(robot, None, keep)) == []
    bad = path_violations(mv, workspace_from_config(robot, None, keep, ["forearm_link"]))
    assert len(bad) == 1 and "link forearm_link passes through 'lamp'" in bad[0], bad
