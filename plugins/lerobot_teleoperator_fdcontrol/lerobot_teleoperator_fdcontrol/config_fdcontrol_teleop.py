"""The configurations of the ``fdcontrol_spacemouse`` and ``fdcontrol_keyboard`` teleoperator types."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lerobot.teleoperators import TeleoperatorConfig

#: the robot plugin's action types these teleoperators produce (a tip motion or a wrench)
TELEOP_ACTIONS: tuple[str, ...] = ("delta_pose", "twist", "wrench")


@dataclass
class FdcontrolTeleopConfig(TeleoperatorConfig):
    """What both teleoperators share (``--teleop.<field>=…``)."""

    # the robot's --robot.action_type: delta_pose (a twist held over one frame, 1/fps), twist or wrench
    action_type: str = "delta_pose"
    # frames per second of the recording (--dataset.fps): a delta_pose is the twist × 1/fps
    fps: float = 30.0
    # fraction of full deflection read as zero, and what full deflection commands
    deadband: float = 0.1
    linear: float = 0.1  # m/s
    angular: float = 0.5  # rad/s
    force: float = 20.0  # N (wrench)
    torque: float = 2.0  # N·m (wrench)
    # optional: the service (and its token), so that the hold button holds and releases the arm itself
    url: str | None = None
    token: str | None = None

    def __post_init__(self) -> None:
        if self.action_type not in TELEOP_ACTIONS:
            raise ValueError(f"action_type {self.action_type!r}: expected one of {', '.join(TELEOP_ACTIONS)}")
        if not (math.isfinite(self.fps) and 1.0 <= self.fps <= 200.0):
            raise ValueError("fps must be within [1, 200]")


@TeleoperatorConfig.register_subclass("fdcontrol_spacemouse")
@dataclass
class FdcontrolSpacemouseConfig(FdcontrolTeleopConfig):
    """A 3-D mouse (pyspacemouse): ``device`` its name (default: the first found); ``hold_button`` the
    button that holds and releases (the action is zero while held)."""

    device: str | None = None
    hold_button: int = 0


@TeleoperatorConfig.register_subclass("fdcontrol_keyboard")
@dataclass
class FdcontrolKeyboardConfig(FdcontrolTeleopConfig):
    """The keyboard (pynput, needs a display): w/s a/d q/e along ±x ±y ±z, i/k j/l u/o about them, h holds
    and releases."""
