"""Motion term of seed 004 Fig. 2: spatial PD f = K_p ⊙ e − K_d ⊙ ẋ on the pose error."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from fdcontrol.control.laws.base import ControlInput, in_frame_gains
from fdcontrol.model.spatial import rotate6


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


def clip_error(e: np.ndarray, R: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """e clipped per axis of the frame with rotation R (base ← frame) to ±bounds, back in the base frame."""
    return rotate6(R, np.clip(rotate6(R.T, e), -bounds, bounds))


@dataclass
class MotionTerm:
    """Spatial PD on the pose error: f = K_p ⊙ e − K_d ⊙ ẋ (e from :func:`pose_error`).

    Reference limiting (``error_clip``, 6 bounds [m ×3, rad ×3] or None): e is clipped per axis of
    the law's frame, e_i ← clip(e_i, −b_i, b_i), as SERL's impedance controller clips its
    reference (Luo et al., "SERL: A Software Suite for Sample-Efficient Robotic Reinforcement
    Learning", sec. IV-C). A target inside a surface then presses with a bounded force: at rest
    in contact the stiffness term is at most K_p,i·b_i along axis i.
    """

    stiffness: np.ndarray = field(default_factory=lambda: np.array([200.0] * 3 + [50.0] * 3))
    damping: np.ndarray = field(default_factory=lambda: np.array([10.0] * 3 + [5.0] * 3))
    max_position_error: float = 0.1  # m
    max_rotation_error: float = 0.5  # rad
    error_clip: np.ndarray | None = None  # per-axis bounds on e in the law's frame (m ×3, rad ×3); None: off

    def __call__(self, x: ControlInput, R: np.ndarray) -> np.ndarray:
        if x.target is None:
            return np.zeros(6)
        e = pose_error(x.pose, x.target, self.max_position_error, self.max_rotation_error)
        if self.error_clip is not None:
            e = clip_error(e, R, self.error_clip)
        return in_frame_gains(R, self.stiffness, e) - in_frame_gains(R, self.damping, x.twist)
