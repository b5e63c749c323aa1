"""The configuration of the ``fdcontrol`` robot type (``--robot.type=fdcontrol --robot.<field>=…``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from lerobot.cameras import CameraConfig
from lerobot.robots import RobotConfig

from fdcontrol.env.features import ACTION_KINDS, MODES


@RobotConfig.register_subclass("fdcontrol")
@dataclass
class FdcontrolRobotConfig(RobotConfig):
    """An arm under fdcontrol's compliant Cartesian control: a running service (``url``, ``token``) or,
    with ``embedded=true``, fdcontrol's service on the simulated MuJoCo arm started for this robot."""

    # the service: its URL and API token (or a file whose first line is the token)
    url: str = "http://127.0.0.1:8000"
    token: str | None = None
    token_file: str | None = None
    # start fdcontrol's own service on the MuJoCo arm (loopback, a free port, a random token) instead
    embedded: bool = False
    # the embedded service's robot (ur10, panda, fr3, planar2) and further `fdcontrol serve` flags
    robot: str = "ur10"
    embedded_args: list[str] = field(default_factory=list)
    startup_timeout: float = 120.0
    # the action kind: delta_pose, pose, twist, wrench or joint_delta (fdcontrol.env.features)
    action_type: str = "delta_pose"
    # deltas in the base or the tool frame (delta_pose, and the wrench's frame); applied to the previous
    # goal ("goal") or the measured tip ("measured")
    frame: str = "base"
    origin: str = "goal"
    # the action bounds: m and rad per step, m/s and rad/s, N and N·m, rad per step
    max_delta: tuple[float, float] = (0.02, 0.1)
    max_twist: tuple[float, float] = (0.25, 1.0)
    max_wrench: tuple[float, float] = (50.0, 5.0)
    max_joint_delta: float = 0.1
    # out-of-bounds actions are clipped to the bounds (the returned action is the applied one); with
    # false they are refused like a NaN
    clip: bool = True
    # actions per second (set it to lerobot-record's --dataset.fps): each goal is reached over 1/fps
    fps: float = 30.0
    # the control law selected at connect (compliance reacts to contact; admittance lets a wrench drive
    # the arm freely)
    mode: str = "compliance"
    # connect releases a hold (after making the tip's own pose the target: releasing moves nothing)
    release_hold: bool = True
    cameras: dict[str, CameraConfig] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.action_type not in ACTION_KINDS:
            raise ValueError(f"action_type {self.action_type!r}: expected one of {', '.join(ACTION_KINDS)}")
        if self.frame not in ("base", "tool") or self.origin not in ("goal", "measured"):
            raise ValueError("frame must be 'base' or 'tool', origin 'goal' or 'measured'")
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if not (math.isfinite(self.fps) and 1.0 <= self.fps <= 200.0):
            raise ValueError("fps must be within [1, 200]")
        bounds = [*self.max_delta, *self.max_twist, *self.max_wrench, self.max_joint_delta]
        if not all(math.isfinite(b) and b > 0 for b in bounds):
            raise ValueError("the action bounds must be finite numbers > 0")
