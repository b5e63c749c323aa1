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
    """A velocity- or position-actuated arm. The contract:

    Units and frames: SI (rad, rad/s, s; N, N·m); joint order is the RobotModel's chain order.

    ``read()`` returns the measured joint state.

    ``read_wrench()`` returns the raw 6-axis force–torque reading [F; τ] of a sensor mounted
    between flange and tool, in the SENSOR frame with the torque about the sensor origin, or
    None without a sensor. Its sign is the sensor's convention (``sensor_sign`` in the settings,
    :mod:`fdcontrol.control.sensing`): ``robot_on_tool`` = the wrench the robot exerts on the tool
    (at rest without contact: minus the tool's weight), ``tool_on_robot`` the negative. The
    sensor's pose relative to the tip frame (``sensor_position`` / ``sensor_rpy``), the tool's
    mass and centre of mass and the bias are the WrenchFilter's business, not the driver's:
    a driver passes the reading through unchanged (units converted to N, N·m).

    ``send(q_ref, qd_ref)`` is called once per control cycle (period dt) with the reference
    at the END of the cycle: q̇_ref (rad/s) and q_ref (rad). A driver uses what its interface
    takes:

    * ``interface = "velocity"`` (default when the attribute is absent; UR speedj): command
      q̇_ref; q_ref = q + dt·q̇_ref is informative only,
    * ``interface = "position"`` (UR servoj, KUKA RSI, Franka joint position): command q_ref.
      The loop integrates it from its previous reference, q_ref,k = q_ref,k−1 + dt·q̇_ref (so
      a servoed arm does not sag under load), with |q_ref − q| bounded per joint by
      ``ControlLoop.max_tracking_error`` (rad).

    ``send(None, qd)`` is a stop request from a failing cycle (after an exception): velocity
    interfaces command qd (zeros: stop); position interfaces hold their last reference
    (advanced by dt·qd when qd is non-zero). A driver never receives NaN or Inf from the loop.

    ``close()`` releases the hardware; the robot must be left stopped.
    """

    dof: int

    def read(self) -> JointState: ...

    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None: ...

    def read_wrench(self) -> np.ndarray | None: ...

    def close(self) -> None: ...
