"""The drivers fdcontrol can run, by name (``driver:`` in the settings, ``--driver`` on the CLI).

A driver is one subclass of :class:`~fdcontrol.drivers.base.RobotDriver`, built as
``Class.from_options(robot, dt, options)`` (by default ``Class(robot=robot, dt=dt, **options)``).
Drivers with optional dependencies register lazily.
"""

from __future__ import annotations

from typing import Any

from fdcontrol.drivers.base import RobotDriver
from fdcontrol.model.robot import RobotModel
from fdcontrol.params import Param, declare
from fdcontrol.registry import Registry

DRIVERS: Registry[RobotDriver] = Registry("driver")
#: the driver's parameters, declared once (fdcontrol.params): startup only (nothing executable or
#: file-system shaped from the network)
PARAMS = declare(
    "driver",
    Param("driver", "str", "mujoco", "a registered driver or, at startup only, 'package.module:Class'",
          policy="startup"),
    Param("driver_options", "spec", {}, "the driver's own options (see its documentation)", policy="startup"),
)
DRIVERS.register_lazy("simulated", "fdcontrol.drivers.simulated:SimulatedRobot")
DRIVERS.register_lazy("udp", "fdcontrol.drivers.udp:UdpBridgeDriver")
DRIVERS.register_lazy("mujoco", "fdcontrol.drivers.mujoco:MujocoRobot")
DRIVERS.register_lazy("ros2", "fdcontrol.drivers.ros2:Ros2Driver")
DRIVERS.register_lazy("ur_rtde", "fdcontrol.drivers.ur_rtde:UrRtdeDriver")


def build_driver(name: str, robot: RobotModel, dt: float, options: dict[str, Any]) -> RobotDriver:
    """Construct the driver registered as `name` (see the module doc)."""
    cls = DRIVERS.get(name)
    if not (isinstance(cls, type) and issubclass(cls, RobotDriver)):
        raise TypeError(f"driver {name!r} is not a subclass of fdcontrol.drivers.RobotDriver")
    return cls.from_options(robot, dt, dict(options))
