"""Control laws: the Cartesian control signal f_c of seed 004 Fig. 2, by composition.

Sign convention for measured wrenches: ``f_measured`` is the wrench the robot's tool exerts
ON the environment, at the tip origin (a wrench sensor's reading of the contact, minus the
tool's own weight and the sensor bias). So a person pushing the tool towards +x gives
f_measured along −x, and pure force control with f_target = 0 (hand guiding) moves the
tool towards +x; pressing on a wall with f_target = +10 N·n settles where the wall pushes
back with 10 N.

All wrenches and twists are [linear; angular] (N, N·m; m/s, rad/s). A law returns f_c in
the base frame; ``frame = "tool"`` makes per-axis gains act along the tool axes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pinocchio as pin

from .spatial import cross, rotate6
from .twist import TwistTerm

Frame = Literal["base", "tool"]
Mode = Literal["admittance", "force", "motion", "compliance"]
MODES: tuple[str, ...] = ("admittance", "force", "motion", "compliance")
GRAVITY = np.array([0.0, 0.0, -9.81])


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
class WrenchFilter:
    """Conditioning of the measured (sensor) wrench, in order:

    1. tool gravity compensation: subtract the tool's weight seen at the sensor,
       w_g = [m Rᵀg; c × m Rᵀg] in the sensor (tool) frame (m = ``tool_mass``, c =
       ``tool_com``, g = (0, 0, −9.81) in the base frame),
    2. bias: subtract ``bias`` (set by :meth:`zero`),
    3. deadband: force / torque norms below the thresholds read as zero, above shifted down
       so the output stays continuous,
    4. first-order low-pass y += (1 − e^(−2π f_c dt)) (x − y), ``cutoff`` in Hz (0 = off).

    ``apply`` takes the raw reading in the tool frame and the tool rotation R (base ← tool),
    and returns the filtered wrench in the base frame.
    """

    tool_mass: float = 0.0
    tool_com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    deadband_force: float = 0.0
    deadband_torque: float = 0.0
    cutoff: float = 0.0
    bias: np.ndarray = field(default_factory=lambda: np.zeros(6))
    _state: np.ndarray | None = None

    def gravity_wrench(self, R: np.ndarray) -> np.ndarray:
        F = self.tool_mass * (R.T @ GRAVITY)
        return np.concatenate((F, cross(self.tool_com, F)))

    def zero(self, raw: np.ndarray, R: np.ndarray) -> None:
        """Sensor bias zeroing: the current reading, less the tool's weight, becomes zero."""
        self.bias = np.asarray(raw, dtype=float) - self.gravity_wrench(R)
        self._state = None

    def apply(self, raw: np.ndarray, R: np.ndarray, dt: float) -> np.ndarray:
        w = np.asarray(raw, dtype=float) - self.gravity_wrench(R) - self.bias
        w = np.concatenate((_deadband(w[:3], self.deadband_force),
                            _deadband(w[3:], self.deadband_torque)))
        w = rotate6(R, w)
        if self.cutoff > 0:
            if self._state is None:
                self._state = w
            else:
                self._state = self._state + (1 - math.exp(-2 * math.pi * self.cutoff * dt)) * (
                    w - self._state)
            w = self._state
        return w


def _deadband(v: np.ndarray, d: float) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return np.zeros(3) if n <= d else v * (1 - d / n)


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
