"""Link loads on the MuJoCo arm: the elbow keeps out of a wall's margin while a hand pushes the tool
towards it. Ground truth is MuJoCo's own body position of the link (physics and kinematics the code
under test did not write), not pinocchio's."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from fdcontrol import make_mapping
from fdcontrol.control.link_loads import LinkLoad, LinkLoads
from fdcontrol.control.sensing import WrenchFilter
from fdcontrol.drivers.mujoco import MujocoRobot
from fdcontrol.experiments import physics as P
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver

from .test_link_loads import panda_wall

SECONDS, PUSH_N, MARGIN = 1.5, 3.0, 0.05


def guide(robot, q0, wall, side, mode: str | None) -> tuple[float, float, str | None]:
    """Hand guiding (force law, f_target = 0) under a physical push of the tool towards the wall.

    Returns the smallest elbow clearance to the margin (m, from MuJoCo's link4 body position),
    the tip's travel along the push (m) and the loop's fault.
    """
    loads = None if mode is None else LinkLoads(
        robot, [LinkLoad("panda_link4", wall, margin=MARGIN, stiffness=100.0)], mode)
    drv = MujocoRobot(robot, dt=P.DT, mode="velocity", q0=q0, tool=P.TOOL, objects=[])
    filt = WrenchFilter(tool_mass=P.TOOL.mass, tool_com=np.array(P.TOOL.com))
    loop = ControlLoop(robot, drv, make_solver(make_mapping("fd", robot)), law=P.force_law(),
                       limits=SafetyLimits.from_robot(robot), wrench_filter=filt, rate=1 / P.DT, link_loads=loads)
    elbow = mujoco.mj_name2id(drv.model, mujoco.mjtObj.mjOBJ_BODY, "panda_link4")
    tip0 = robot.pose(q0)[:3, 3]
    drv.set_push(np.array([0, PUSH_N * side, 0, 0, 0, 0]))
    clearance = np.inf
    for i in range(round(SECONDS / P.DT)):
        loop.step(now=i * P.DT)
        clearance = min(clearance, float(wall.distance(drv.data.xpos[elbow].copy())[0]) - MARGIN)
    travel = float((robot.pose(drv.read().q)[:3, 3] - tip0)[1] * side)
    return clearance, travel, loop.fault


@pytest.mark.parametrize("mode", ["projected", "physical"])
def test_mujoco_panda_link_load_keeps_the_elbow_out_of_the_margin(mode):
    robot, q0, wall, side = panda_wall()
    free_clear, free_travel, free_fault = guide(robot, q0, wall, side, None)
    clear, travel, fault = guide(robot, q0, wall, side, mode)
    print(f"{mode}: elbow clearance free {free_clear * 1e3:.1f} mm, with the load {clear * 1e3:.1f} mm; "
          f"tip travel free {free_travel * 1e3:.1f} mm, with {travel * 1e3:.1f} mm")
    assert free_fault is None and fault is None
    assert free_travel > 0.05  # the hand moves the tip towards the wall
    assert free_clear < -0.01  # without the load the elbow goes 1 cm+ into the margin
    assert clear > -0.005  # with it, at most 5 mm into the 50 mm margin, never through the wall
    assert travel > 0.5 * free_travel  # the tip still follows the hand
