"""What the control layer's per-cycle parts see of the loop that runs them (a structural type).

The task space (:mod:`fdcontrol.control.task`) and the reactions' parameter switches
(:mod:`fdcontrol.control.switch`) act on the loop they run in: they hold the arm, set its target,
switch its law's gains. They see it through :class:`LoopHost`, a protocol the loop
(:class:`fdcontrol.loop.ControlLoop`) satisfies, so the control layer never imports the loop.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from fdcontrol.model.robot import RobotModel


class LoopHost(Protocol):
    """The loop's attributes the control layer reads or sets (in the loop thread, inside a cycle)."""

    robot: RobotModel
    period: float  # s, the nominal period (a stage's dt is the cycle's own)
    cycle: int  # cycles completed before this one
    law: Any  # fdcontrol.control.law.ControlLaw
    filter: Any  # fdcontrol.control.law.WrenchFilter
    posture: Any  # fdcontrol.control.posture.PostureTask | None
    fault: str | None
    qd_state: np.ndarray  # rad/s, the virtual model's velocity state
    _target: np.ndarray | None  # the pose the motion law tracks (4×4)
    _hold_request: bool
    command_timeout: float
    sensor_timeout: float
    max_force: float
    max_torque: float
    telemetry_decimation: int
