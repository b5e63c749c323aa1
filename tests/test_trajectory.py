"""Moves (Ruckig) tracked compliantly on the MuJoCo arm: the goal is reached (MuJoCo's own tip pose),
the references keep their velocity, acceleration and jerk limits (finite differences of the
sampled reference), and a push during the move makes the arm yield; the move resumes after it."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol.control.law import ControlLaw
from fdcontrol.control.task import TaskSpace
from fdcontrol.control.trajectory import Move, MoveError, MoveLimits
from fdcontrol.experiments import physics as P
from fdcontrol.model.robot import RobotModel

LIM = MoveLimits()


def mujoco_pose(drv) -> np.ndarray:
    """The tip body's pose from MuJoCo, in the base frame."""
    Rb, pb = drv._base_pose()
    T = np.eye(4)
    T[:3, :3] = Rb.T @ drv.data.xmat[drv._tip_id].reshape(3, 3)
    T[:3, 3] = Rb.T @ (drv.data.xpos[drv._tip_id] - pb)
    return T


def setup(mode: str = "admittance"):
    robot = RobotModel.load("ur10")
    r = P.rig(robot, law=ControlLaw(mode=mode))
    task = TaskSpace(move_limits=LIM)
    r.loop.task = task
    T0 = robot.pose(r.drv.read().q)
    goal = T0.copy()
    goal[:3, 3] += [0.10, -0.15, 0.05]
    goal[:3, :3] = pin.exp3(np.array([0.1, 0.2, -0.15])) @ T0[:3, :3]
    task.move = Move(robot, T0, P.DT, LIM, goal_pose=goal)
    return r, task, goal


def run(r, task, seconds: float, push_at: tuple[float, float] | None = None, push=(0, 0, 0, 0, 0, 0),
        streamed: bool = False):
    """Step the loop; between push_at[0] and push_at[1] s a hand pushes the tool (MuJoCo force on
    the tool) or, ``streamed``, the wrench streams in (admittance: the loop's input)."""
    refs, status, tips = [], [], []
    for i in range(round(seconds / P.DT)):
        t = i * P.DT
        on = push_at is not None and push_at[0] <= t < push_at[1]
        if streamed and push_at is not None and t >= push_at[0]:  # a live stream: the push, then zeros
            r.loop.set_wrench(np.array(push, dtype=float) if on else np.zeros(6), t=t)
        elif push_at is not None and abs(t - push_at[0]) < P.DT / 2:
            r.drv.set_push(np.array(push, dtype=float))
        elif push_at is not None and abs(t - push_at[1]) < P.DT / 2:
            r.drv.set_push(np.zeros(6))
        r.loop.step(now=t)
        refs.append(task.move.x.copy())
        status.append(task.move.status)
        tips.append(mujoco_pose(r.drv)[:3, 3])
    return np.array(refs), status, np.array(tips)


def errors(T: np.ndarray, goal: np.ndarray) -> tuple[float, float]:
    return (float(np.linalg.norm(T[:3, 3] - goal[:3, 3])),
            float(np.linalg.norm(pin.log3(goal[:3, :3] @ T[:3, :3].T))))


def check_limits(refs: np.ndarray) -> None:
    v = np.diff(refs, axis=0) / P.DT
    a = np.diff(v, axis=0) / P.DT
    j = np.diff(a, axis=0) / P.DT
    tol = 1 + 1e-6
    for k, x in enumerate((v, a, j)):
        assert np.max(np.linalg.norm(x[:, :3], axis=1)) <= LIM.linear[k] * tol
        assert np.max(np.abs(x[:, 3])) <= LIM.angular[k] * tol


@pytest.mark.parametrize("mode", ["admittance", "motion"])
def test_a_move_reaches_its_cartesian_goal_within_the_limits(mode):
    r, task, goal = setup(mode)
    refs, status, _ = run(r, task, 2.5)
    ep, er = errors(mujoco_pose(r.drv), goal)
    print(f"{mode}: done after {status.index('done') * P.DT:.3f} s (Ruckig duration {task.move.duration:.3f} s); "
          f"error {ep * 1e3:.3f} mm, {er:.4f} rad")
    assert r.loop.fault is None and "done" in status
    assert ep < 1e-3 and er < 0.01
    check_limits(refs)
    v = np.diff(refs, axis=0) / P.DT
    assert np.max(np.linalg.norm(v[:, :3], axis=1)) > 0.9 * LIM.linear[0]  # time-optimal: it uses the limit


@pytest.mark.parametrize("mode", ["compliance", "admittance"])
def test_a_push_during_the_move_yields_and_the_move_resumes(mode):
    """compliance: a hand pushes the tool (the force term yields to the measured wrench);
    admittance: the push streams in as the loop's wrench input."""
    r, task, goal = setup(mode)
    refs, status, tips = run(r, task, 4.0, push_at=(0.3, 0.8), push=(0, 0, 30.0, 0, 0, 0),
                             streamed=mode == "admittance")
    i0, i1 = round(0.3 / P.DT), round(0.8 / P.DT)
    # yields: the arm moves with the push, away from the straight line the reference follows
    assert "paused" in status[i0:i1]
    z_line = np.interp(np.arange(len(tips)), [0, len(tips) - 1], [tips[0, 2], goal[2, 3]])
    assert np.max(tips[i0:i1 + 100, 2] - z_line[i0:i1 + 100]) > 0.02
    # and resumes after the push: reaches the goal
    ep, er = errors(mujoco_pose(r.drv), goal)
    print(f"paused for {status.count('paused') * P.DT:.3f} s; final error {ep * 1e3:.3f} mm, {er:.4f} rad")
    assert status[-1] == "done" and ep < 1e-3 and er < 0.01
    assert r.loop.fault is None
    check_limits(refs)


def test_bad_scaling_is_refused():
    with pytest.raises(MoveError, match="scaling"):
        LIM.scaled(0.0, 1.0)
    with pytest.raises(MoveError, match="scaling"):
        LIM.scaled(1.0, float("nan"))
