"""Motion term of seed 004 Fig. 2: spatial PD f = K_p ⊙ e − K_d ⊙ ẋ on the pose error."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from fdcontrol.control.laws.base import ControlInput, in_frame_gains


def pose_error(pose: np.ndarray, target: np.ndarray, max_position: float, max_rotation: float
               ) -> np.ndarray:
    """e = [p_t − p; log(R_t Rᵀ)] in the base frame, each part clamped in norm.

    The orientation error is the axis-angle vector of the rotation from the current to the
    target orientation (pinocchio's log3), so e·dt is the twist that closes the gap.
    """
    dp = target[:3, 3] - pose[:3, 3]
    dr = pin.log3(target[:3, :3] @ pose[:3, :3].T)
    n = float(np.linalg.norm(dp))
    if n > max_position:
        dp *= max_position / n
    n = float(np.linalg.norm(dr))
    if n > max_rotation:
        dr *= max_rotation / n
    return np.concatenate((dp, dr))


@dataclass
class MotionTerm:
    """Spatial PD on the pose error: f = K_p ⊙ e − K_d ⊙ ẋ (e from :func:`pose_error`)."""

    stiffness: np.ndarray = field(default_factory=lambda: np.array([200.0] * 3 + [50.0] * 3))
    damping: np.ndarray = field(default_factory=lambda: np.array([10.0] * 3 + [5.0] * 3))
    max_position_error: float = 0.1  # m
    max_rotation_error: float = 0.5  # rad

    def __call__(self, x: ControlInput, R: np.ndarray) -> np.ndarray:
        if x.target is None:
            return np.zeros(6)
        e = pose_error(x.pose, x.target, self.max_position_error, self.max_rotation_error)
        return in_frame_gains(R, self.stiffness, e) - in_frame_gains(R, self.damping, x.twist)
