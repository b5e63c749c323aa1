"""RobotDriver: what the control loop needs from a robot (real or simulated)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class JointState:
    """Measured joint positions (rad) and velocities (rad/s) at time t (s, driver clock)."""

    q: np.ndarray
    qd: np.ndarray
    t: float


@runtime_checkable
class RobotDriver(Protocol):
    """A velocity- and/or position-actuated arm.

    ``send`` is called once per control cycle with the joint references; a driver uses
    whichever its hardware interface takes. ``read_wrench`` returns the raw force-torque
    sensor reading [F; τ] in the tool frame, or None without a sensor.
    """

    dof: int

    def read(self) -> JointState: ...

    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None: ...

    def read_wrench(self) -> np.ndarray | None: ...

    def close(self) -> None: ...
