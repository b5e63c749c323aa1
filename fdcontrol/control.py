"""Control laws: the Cartesian control signal f_c of seed 004 Fig. 2, by composition.

Sign convention for measured wrenches: ``f_measured`` is the wrench the robot's tool exerts
ON the environment, at the tip origin (the sensor model of :mod:`fdcontrol.sensing`: the
raw reading with its sign, the tool's weight and the bias compensated). So a person pushing the tool towards +x gives
f_measured along −x, and pure force control with f_target = 0 (hand guiding) moves the
tool towards +x; pressing on a wall with f_target = +10 N·n settles where the wall pushes
back with 10 N.

All wrenches and twists are [linear; angular] (N, N·m; m/s, rad/s). A law returns f_c in
the base frame; ``frame = "tool"`` makes per-axis gains act along the tool axes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pinocchio as pin

from .sensing import GRAVITY as GRAVITY  # re-exported for compatibility
from .sensing import WrenchFilter as WrenchFilter  # moved to fdcontrol.sensing; importable here too
from .spatial import rotate6
from .twist import TwistTerm

Frame = Literal["base", "tool"]
Mode = Literal["admittance", "force", "motion", "compliance"]
MODES: tuple[str, ...] = ("admittance", "force", "motion", "compliance")


def _vec6(x: float | list[float] | np.ndarray, name: str, nonneg: bool = True) -> np.ndarray:
    msg = f"{name} must be 6 finite{' non-negative' if nonneg else ''} numbers (or one for all axes)"
    try:
        v = np.broadcast_to(np.asarray(x, dtype=float), (6,)).copy()
    except (ValueError, TypeError) as exc:
        raise ValueError(msg) from exc
    if not np.all(np.isfinite(v)) or (nonneg and np.any(v < 0)):
        raise ValueError(msg)
    return v


def in_frame_gains(R: np.ndarray, gains: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Apply diagonal gains along the axes of the frame with rotation R (base ← frame)."""
    return rotate6(R, gains * rotate6(R.T, w))


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
class ControlInput:
    """Everything a law reads in one cycle (base frame unless named otherwise)."""

    pose: np.ndarray  # 4×4 tip in base
    twist: np.ndarray  # measured tip twist J q̇ [v; ω]
    f_measured: np.ndarray  # filtered sensor wrench (robot on environment), base frame
    f_applied: np.ndarray  # streamed external push, base frame
    target: np.ndarray | None  # 4×4 target pose for motion / compliance
    twist_cmd: np.ndarray | None = None  # streamed tip twist [v; ω], base frame (teleoperation)


@dataclass
class ForceTerm:
    """Force control: f = K_f ⊙ (f_target − f_measured), gains along ``frame`` axes."""

    gain: np.ndarray = field(default_factory=lambda: np.ones(6))
    target: np.ndarray = field(default_factory=lambda: np.zeros(6))  # base frame

    def __call__(self, x: ControlInput, R: np.ndarray) -> np.ndarray:
        return in_frame_gains(R, self.gain, self.target - x.f_measured)


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


@dataclass
class ControlLaw:
    """f_c = Σ terms + f_applied. The mode picks the terms:

    * ``admittance`` — f_applied only (the streamed wrench drives the virtual model),
    * ``force`` — force term + f_applied,
    * ``motion`` — motion PD + f_applied,
    * ``compliance`` — motion PD + force term + f_applied: at rest K_p e = −(f_applied +
      K_f(f_target − f_measured)), i.e. the displacement from the target is F/K per axis.

    In every mode a live streamed twist adds the velocity-tracking term (fdcontrol.twist).
    """

    mode: Mode = "admittance"
    frame: Frame = "base"
    force: ForceTerm = field(default_factory=ForceTerm)
    motion: MotionTerm = field(default_factory=MotionTerm)
    twist: TwistTerm = field(default_factory=TwistTerm)

    def __call__(self, x: ControlInput) -> np.ndarray:
        R = x.pose[:3, :3] if self.frame == "tool" else np.eye(3)
        f = x.f_applied.copy()
        if self.mode in ("force", "compliance"):
            f += self.force(x, R)
        if self.mode in ("motion", "compliance"):
            f += self.motion(x, R)
        if x.twist_cmd is not None:
            f += self.twist(x.twist_cmd, x.twist, R)
        return f

    def set_gains(self, *, stiffness=None, damping=None, force_gain=None) -> None:
        """Validated update of the per-axis gains (6 values or one for all axes)."""
        if stiffness is not None:
            self.motion.stiffness = _vec6(stiffness, "stiffness")
        if damping is not None:
            self.motion.damping = _vec6(damping, "damping")
        if force_gain is not None:
            self.force.gain = _vec6(force_gain, "force_gain")
