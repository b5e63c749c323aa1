"""LeRobot robot plugin ``fdcontrol``: an arm under fdcontrol's compliant Cartesian control.

LeRobot's command line (``lerobot-record``, ``lerobot-replay``, ``lerobot-teleoperate``) imports this
package by its distribution name (``register_third_party_plugins``), which registers the robot type
``fdcontrol``: ``--robot.type=fdcontrol --robot.url=… --robot.token=…`` or ``--robot.embedded=true``.
"""

from .config_fdcontrol_robot import FdcontrolRobotConfig
from .fdcontrol_robot import FdcontrolRobot

__all__ = ["FdcontrolRobot", "FdcontrolRobotConfig"]
