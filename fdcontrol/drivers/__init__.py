"""Robot drivers: the protocol and the embedded simulated arm."""

from .base import JointState, RobotDriver
from .simulated import SimulatedRobot, SimulatedSensor, SpringPlane

__all__ = ["JointState", "RobotDriver", "SimulatedRobot", "SimulatedSensor", "SpringPlane"]
