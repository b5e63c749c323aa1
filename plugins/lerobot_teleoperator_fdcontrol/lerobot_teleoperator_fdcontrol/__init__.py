"""LeRobot teleoperator plugin: a 3-D mouse and the keyboard as Cartesian tip commands for fdcontrol's arm.

LeRobot's command line imports this package by its distribution name (``register_third_party_plugins``),
which registers the teleoperator types ``fdcontrol_spacemouse`` and ``fdcontrol_keyboard``:

    lerobot-teleoperate --robot.type=fdcontrol --robot.action_type=twist --teleop.type=fdcontrol_spacemouse \\
        --teleop.action_type=twist

Their actions carry the robot plugin's action names for ``delta_pose``, ``twist`` or ``wrench``
(``fdcontrol.env.features``), so they drive ``--robot.type=fdcontrol`` with the same action type.
"""

from .config_fdcontrol_teleop import FdcontrolKeyboardConfig, FdcontrolSpacemouseConfig
from .fdcontrol_teleop import FdcontrolKeyboard, FdcontrolSpacemouse

__all__ = ["FdcontrolKeyboard", "FdcontrolKeyboardConfig", "FdcontrolSpacemouse", "FdcontrolSpacemouseConfig"]
