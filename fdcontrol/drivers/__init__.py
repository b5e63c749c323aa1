"""Robot drivers: the protocol and the embedded simulated arm."""

from fdcontrol.drivers.base import JointState, RobotDriver
from fdcontrol.drivers.simulated import SimulatedRobot, SimulatedSensor, SpringPlane

__all__ = ["JointState", "RobotDriver", "SimulatedRobot", "SimulatedSensor", "SpringPlane"]
