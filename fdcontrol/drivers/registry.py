"""The drivers fdcontrol can run, by name (``driver:`` in the settings, ``--driver`` on the CLI).

A driver is one class implementing :class:`~fdcontrol.drivers.base.RobotDriver`, built as
``Class.from_options(robot, dt, options)`` when it defines that classmethod, else
``Class(robot=robot, dt=dt, **options)``. Drivers with optional dependencies register lazily.
"""

from __future__ import annotations

from typing import Any

from fdcontrol.drivers.base import RobotDriver
from fdcontrol.model.robot import RobotModel
from fdcontrol.registry import Registry

DRIVERS: Registry[RobotDriver] = Registry("driver")
DRIVERS.register_lazy("simulated", "fdcontrol.drivers.simulated:SimulatedRobot")
DRIVERS.register_lazy("udp", "fdcontrol.drivers.udp:UdpBridgeDriver")
DRIVERS.register_lazy("mujoco", "fdcontrol.drivers.mujoco:MujocoRobot")
DRIVERS.register_lazy("ros2", "fdcontrol.drivers.ros2:Ros2Driver")
DRIVERS.register_lazy("ur_rtde", "fdcontrol.drivers.ur_rtde:UrRtdeDriver")
DRIVERS.register_lazy("franka", "fdcontrol.drivers.franka:FrankaDriver")


def build_driver(name: str, robot: RobotModel, dt: float, options: dict[str, Any]) -> RobotDriver:
    """Construct the driver registered as `name` (see the module doc)."""
    cls = DRIVERS.get(name)
    factory = getattr(cls, "from_options", None)
    driver = factory(robot, dt, dict(options)) if factory is not None else cls(robot=robot, dt=dt, **options)
    if not isinstance(driver, RobotDriver):
        raise TypeError(f"driver {name!r} does not implement fdcontrol.drivers.RobotDriver")
    return driver
