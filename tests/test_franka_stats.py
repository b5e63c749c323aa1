"""The robot's own view of the loop reaches the statistics as the robot reports it: franky-sim always
reports a command success rate of 1.0, so a test against it cannot tell a driver that passes the
value on from one that makes it up. The stand-in robot (tests/franka_inject.py, libfranka's API
without a network) reports what the test sets, state by state."""

from __future__ import annotations

import numpy as np
import pytest

from fdcontrol import RobotModel
from fdcontrol.model.robot import HOME
from tests.franka_inject import StandInFranka


@pytest.fixture(scope="module")
def fr3() -> RobotModel:
    return RobotModel.load("fr3")


def test_the_success_rate_is_the_last_state_the_robot_reported(fr3):
    drv = StandInFranka(fr3)
    try:
        robot = drv._robot
        q0 = np.array(HOME["fr3"], dtype=float)
        drv.read()
        for rate in (0.97, 0.5, 0.0, 0.875):  # the robot's value, each in a state of its own
            robot.success_rate = rate
            drv.send(q0, np.zeros(fr3.dof))
            drv.read()
            got = drv.clock_stats()["robot_success_rate"]
            assert got == pytest.approx(rate, abs=1e-7), (rate, got)
    finally:
        drv.close()
