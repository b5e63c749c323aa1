"""Link geometry on the MuJoCo arm: every link keeps out of a keep-out box, and the links keep apart.

Ground truth is MuJoCo's own contact detection between the arm's collision shapes and the box (and between
links), physics the code under test did not write; a 20 N hand on the tool for 3 s."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from fdcontrol import make_mapping
from fdcontrol.control.sensing import WrenchFilter
from fdcontrol.control.task import TaskSpace
from fdcontrol.control.workspace import workspace_from_config
from fdcontrol.drivers.mujoco import EnvObject, MujocoRobot
from fdcontrol.experiments import physics as P
from fdcontrol.limits.collision import CollisionAvoidance
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.collision import Clearance
from fdcontrol.model.robot import HOME, RobotModel

SECONDS, PUSH_N, D_MIN = 3.0, 20.0, 0.01


class Params:  # what the limit reads from the settings
    velocity_scale = 0.5
    collision_distance = D_MIN

    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)


def _guide(robot: RobotModel, push: np.ndarray, objects: list[EnvObject], keep_out: list[dict] | None,
           self_collision: bool) -> dict:
    """Hand guiding (force law) under a physical push on the tool; MuJoCo's contacts counted per body pair."""
    q0 = np.asarray(HOME[robot.name])
    drv = MujocoRobot(robot, dt=P.DT, q0=q0, tool=P.TOOL, objects=objects, link_contacts=True)
    filt = WrenchFilter(tool_mass=P.TOOL.mass, tool_com=np.array(P.TOOL.com))
    limits, task = SafetyLimits.from_robot(robot), None
    if keep_out is not None or self_collision:
        ws = workspace_from_config(robot, None, keep_out or [], collision_links="keep_out",
                                   self_collision=self_collision)
        task = TaskSpace(ws)
        lim = CollisionAvoidance.from_settings(robot, Params(keep_out=keep_out or [],  # type: ignore[arg-type]
                                                             self_collision=self_collision))
        lim.clearance = ws.clearance  # one computation per cycle, as the assembled loop shares it
        limits = SafetyLimits.compose([*limits.limits, lim])
    loop = ControlLoop(robot, drv, make_solver(make_mapping("fd", robot)), law=P.force_law(),
                       limits=limits, wrench_filter=filt, rate=1 / P.DT, task=task)
    drv.set_push(push)
    m, tip0 = drv.model, robot.pose(q0)[:3, 3]
    contacts: dict[tuple[str, str], int] = {}
    dmin = np.inf
    for i in range(round(SECONDS / P.DT)):
        loop.step(now=i * P.DT)
        d = drv.data
        for k in range(d.ncon):
            c = d.contact[k]
            names = []
            for g in (c.geom1, c.geom2):
                gname = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g)
                names.append(gname if gname in [o.name for o in objects]
                             else mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, m.geom_bodyid[g]))
            key = (names[0], names[1])
            contacts[key] = contacts.get(key, 0) + 1
        if task is not None and task.workspace is not None and task.workspace.clearance is not None:
            dmin = min(dmin, float(task.workspace.clearance.d.min()))
    return {"travel": robot.pose(drv.read().q)[:3, 3] - tip0, "contacts": contacts, "fault": loop.fault,
            "dmin": dmin, "cycles": loop.cycle}


def test_ur10_elbow_keeps_out_of_a_box_and_the_tool_still_moves() -> None:
    """A box 10 cm beside the UR10's forearm, a 20 N push on the tool up and towards it: without the keep-out
    the forearm hits the box in MuJoCo; with it configured no link touches the box, and the tool still
    travels at least half its free travel upwards (the direction the box does not block)."""
    robot = RobotModel.load("ur10")
    q0 = np.asarray(HOME["ur10"])
    cl = Clearance(robot, robot.geometry, [])
    cl.compute(q0)
    fore = [c.link for c in robot.geometry.capsules].index("forearm_link")
    c = (cl.A[fore] + cl.B[fore]) / 2 + np.array([0.0, cl.cr[fore] + 0.1 + 0.1, 0.0])
    lo, hi = c - 0.1, c + 0.1
    box = EnvObject("fixture", tuple(c), (0.2, 0.2, 0.2), stiffness=5000.0, damping=50.0)
    keep_out = [{"name": "fixture", "box": {"min": lo.tolist(), "max": hi.tolist()}}]
    push = np.array([0.0, 1.0, 1.0, 0, 0, 0]) * PUSH_N / np.sqrt(2)
    free = _guide(robot, push, [box], None, False)
    kept = _guide(robot, push, [box], keep_out, False)
    hits = {k: n for k, n in free["contacts"].items() if "fixture" in k}
    print(f"free: travel {free['travel'].round(3)}, box contacts {hits}; keep-out: travel "
          f"{kept['travel'].round(3)}, contacts {kept['contacts']}, smallest distance {kept['dmin'] * 1e3:.1f} mm")
    assert free["fault"] is None and kept["fault"] is None and kept["cycles"] == round(SECONDS / P.DT)
    assert hits, "without the keep-out the arm must hit the box (else the test proves nothing)"
    assert not [k for k in kept["contacts"] if "fixture" in k]  # zero contacts between any link and the box
    assert kept["dmin"] >= D_MIN / 2  # no fault: the hard margin held
    free_up = _guide(robot, push, [], None, False)["travel"][2]  # free travel up, nothing in the way
    assert free_up > 0.2
    assert kept["travel"][2] >= 0.5 * free_up


@pytest.mark.parametrize("arm", ["ur10", "panda", "fr3"])
def test_self_collision_keeps_the_links_apart(arm: str) -> None:
    """A 20 N push of the tool towards the base (and down) for 3 s: without the check MuJoCo reports link–link
    contacts; with it none, and no fault (the hard margin is never crossed by half)."""
    robot = RobotModel.load(arm)
    tip = robot.pose(np.asarray(HOME[arm]))[:3, 3]
    inward = -np.array([tip[0], tip[1], 0.0]) / np.hypot(tip[0], tip[1]) + [0.0, 0.0, -0.5]
    push = np.concatenate((PUSH_N * inward / np.linalg.norm(inward), np.zeros(3)))
    free = _guide(robot, push, [], None, False)
    kept = _guide(robot, push, [], None, True)
    print(f"{arm}: free contacts {free['contacts']}, with self-collision {kept['contacts']}, "
          f"smallest distance {kept['dmin'] * 1e3:.1f} mm, travel {kept['travel'].round(3)}")
    assert free["contacts"], "without the check the links must touch (else the test proves nothing)"
    assert kept["contacts"] == {}
    assert kept["fault"] is None and kept["cycles"] == round(SECONDS / P.DT)
    assert kept["dmin"] >= D_MIN / 2
    assert np.linalg.norm(kept["travel"]) > 0.1  # the arm still follows the hand
