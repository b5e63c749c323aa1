"""Reactions: rules on the loop's signals. Unit checks of the rule semantics, and on the MuJoCo arm
the guarded approach onto the table — move down until |f_z| > 5 N, then hold — with MuJoCo's own
contact force as the ground truth for the peak."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fdcontrol.control.law import ControlLaw
from fdcontrol.control.reactions import Reactions, Rule, Signals, rules_from_config
from fdcontrol.control.task import TaskSpace
from fdcontrol.control.trajectory import Move, MoveLimits
from fdcontrol.drivers.mujoco import TABLE_GAP, MujocoRobot, table
from fdcontrol.experiments import physics as P
from fdcontrol.model.robot import RobotModel
from fdcontrol.server.settings import ControlParams

THRESHOLD = 5.0


def sig(f=(0, 0, 0, 0, 0, 0), twist=(0, 0, 0, 0, 0, 0), pose=None) -> Signals:
    return Signals(np.eye(4) if pose is None else pose, np.asarray(twist, float), np.asarray(f, float))


def test_a_rule_fires_after_its_cycles_once_and_never_on_nan():
    r = Rule("c", "fz", "abs>", 5.0, "hold", cycles=3)
    rx = Reactions([r])
    assert [bool(rx.evaluate(sig(f=(0, 0, -6, 0, 0, 0)), k)) for k in range(5)] == [False, False, True, False, False]
    assert rx.count == 1 and not r.armed  # once: disarmed after firing
    r2 = Rule("n", "tracking_error", ">", 0.0, "stop")
    assert not Reactions([r2]).evaluate(sig(), 0)  # NaN (no move) never satisfies
    r3 = Rule("again", "force", ">", 1.0, "stop", once=False)
    rx3 = Reactions([r3])
    hits = [bool(rx3.evaluate(sig(f=(x, 0, 0, 0, 0, 0)), k)) for k, x in enumerate([2, 2, 0, 2])]
    assert hits == [True, True, False, True]


def test_tool_frame_signals_rotate_the_wrench():
    pose = np.eye(4)
    pose[:3, :3] = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1.0]])  # tool x = base y
    s = sig(f=(0, 3.0, 0, 0, 0, 0), pose=pose)
    assert Rule("t", "tool_fx", ">", 2.9).check(s)
    assert not Rule("b", "fx", ">", 0.1).check(s)
    assert math.isclose(Signals(pose, np.zeros(6), np.array([3, 4, 0, 0, 0, 0.0])).f_tool()[0], 4.0)


@pytest.mark.parametrize("bad, reason", [
    ({"signal": "fq", "op": ">", "value": 1}, "unknown signal 'fq'"),
    ({"signal": "fz", "op": "=~", "value": 1}, "unknown operator"),
    ({"signal": "fz", "op": ">", "value": float("nan")}, "finite"),
    ({"signal": "fz", "op": ">", "value": 1, "action": "dance"}, "unknown action"),
    ({"signal": "fz", "op": ">", "value": 1, "action": "retract"}, "distance"),
])
def test_bad_rules_are_refused_with_the_reason(bad, reason):
    with pytest.raises(ValueError, match=reason):
        rules_from_config([bad])


def guarded(speed: float):
    robot = RobotModel.load("ur10")
    end = MujocoRobot(robot, dt=P.DT, tool=P.TOOL).tool_end()
    top = end[2] - P.TOOL.radius - TABLE_GAP
    r = P.rig(robot, law=ControlLaw(mode="admittance"), objects=[table(top, (end[0], end[1]))])
    lim = MoveLimits()
    lim = MoveLimits((speed, lim.linear[1], lim.linear[2]), lim.angular)
    task = TaskSpace(rules=[Rule("contact", "fz", "abs>", THRESHOLD, "hold")], move_limits=lim)
    r.loop.task = task
    T0 = robot.pose(r.drv.read().q)
    goal = T0.copy()
    goal[2, 3] -= 0.15  # 10 cm below the table top: the move cannot end without contact
    task.move = Move(robot, T0, P.DT, lim, goal_pose=goal)
    states, contact = [], []
    for i in range(round((2.5 * TABLE_GAP / speed + 0.5) / P.DT)):
        states.append(r.loop.step(now=i * P.DT))
        contact.append(r.drv.contact_force()[2])
    return states, np.array(contact), task, r


def test_guarded_approach_onto_the_table_stops_within_one_cycle_below_twice_the_threshold():
    speed = ControlParams().approach_speed  # the default speed of a guarded move
    states, contact, task, r = guarded(speed)
    first = next(i for i, s in enumerate(states) if abs(s.f_measured[2]) > THRESHOLD)
    fired = next(i for i, s in enumerate(states) if s.reaction_count)
    peak = float(np.max(np.abs(contact)))
    print(f"approach at {speed} m/s: |f_z| > {THRESHOLD} N first in cycle {states[first].cycle}, rule fired in "
          f"cycle {states[fired].cycle}; MuJoCo contact peak {peak:.2f} N; event: {states[fired].reaction_event}")
    assert fired == first  # the same cycle: the rule saw this cycle's filtered wrench
    assert states[fired].holding  # and that cycle's reference already brakes
    assert task.move.status == "cancelled"
    assert np.max(np.abs(contact[:first])) > 0  # it did touch the table before the threshold
    assert peak < 2 * THRESHOLD
    assert all(s.holding for s in states[fired:])
    assert r.loop.fault is None


def test_a_fast_approach_overshoots_the_threshold():
    """The same approach at 10× the default speed presses much harder: the peak bound is not a given."""
    _, contact, _, _ = guarded(10 * ControlParams().approach_speed)
    assert float(np.max(np.abs(contact))) > 2 * THRESHOLD


def test_retract_on_contact_moves_away_from_the_table():
    """The same approach with `retract 2 cm`: the arm leaves the table along the contact force."""
    robot = RobotModel.load("ur10")
    end = MujocoRobot(robot, dt=P.DT, tool=P.TOOL).tool_end()
    top = end[2] - P.TOOL.radius - TABLE_GAP
    r = P.rig(robot, law=ControlLaw(mode="admittance"), objects=[table(top, (end[0], end[1]))])
    lim = MoveLimits()
    lim = MoveLimits((ControlParams().approach_speed, lim.linear[1], lim.linear[2]), lim.angular)
    task = TaskSpace(rules=[Rule("contact", "fz", "abs>", THRESHOLD, "retract", distance=0.02)], move_limits=lim)
    r.loop.task = task
    T0 = robot.pose(r.drv.read().q)
    goal = T0.copy()
    goal[2, 3] -= 0.15
    task.move = Move(robot, T0, P.DT, lim, goal_pose=goal)
    z_fire = None
    for i in range(round(4.0 / P.DT)):
        s = r.loop.step(now=i * P.DT)
        if z_fire is None and s.reaction_count:
            z_fire = s.tip_pose[2, 3]
    z_end = robot.pose(r.drv.read().q)[2, 3]
    assert z_fire is not None and task.move.status == "done"
    assert z_end - z_fire == pytest.approx(0.02, abs=2e-3)
    assert abs(r.drv.contact_force()[2]) < 1e-6  # off the table
    assert r.loop.fault is None
