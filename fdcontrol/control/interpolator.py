"""Per-step target interpolation: a policy's sparse goal poses become a smooth motion-law target.

A policy sends a goal pose every step (10–50 Hz); the loop runs at its own rate (e.g. 500 Hz).
Handing the goal to the motion law at once would be a step in the target — a jump in force.
Instead each new goal starts a quintic (minimum-jerk family) segment from the interpolated
target's current position, velocity and acceleration to the goal at rest, over the step period T
(longer when the bounds below require it). In the 6-D tangent of the segment's start pose
(position in the base frame, rotation vector in the base frame), per component x:

    x(t) = v₀ t + a₀ t²/2 + c₃ t³ + c₄ t⁴ + c₅ t⁵,      0 ≤ t ≤ T,
    c₃ = (20 d − 12 v₀ T − 3 a₀ T²) / (2 T³),
    c₄ = (−30 d + 16 v₀ T + 3 a₀ T²) / (2 T⁴),
    c₅ = (12 d − 6 v₀ T − a₀ T²) / (2 T⁵),

so x(0) = 0, ẋ(0) = v₀, ẍ(0) = a₀ and x(T) = d, ẋ(T) = ẍ(T) = 0: position, velocity and
acceleration are continuous at every new goal, and the jerk is bounded within a segment
(Flash & Hogan, "The coordination of arm movements", 1985: the minimum-jerk profile for
v₀ = a₀ = 0, x = d (10 s³ − 15 s⁴ + 6 s⁵), s = t/T). The target pose is
[p₀ + x_p(t); Exp(x_r(t)) R₀] with d = [p_goal − p₀; log(R_goal R₀ᵀ)].

Bounds. From rest the profile's peak speed is 15/8 · |d|/T and its peak acceleration
10/√3 · |d|/T² (≈ 5.77); the segment duration is stretched to
T = max(T_step, 15/8·|d_p|/v_max, 15/8·|d_r|/ω_max, √(5.77·|d_p|/a_max), √(5.77·|d_r|/α_max)),
so a segment started at rest never exceeds the linear / angular speed and acceleration bounds.
A segment started in motion carries its initial velocity, and may exceed them briefly by that
velocity's share; the loop's safety limits bound the joint motion in every case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

PEAK_SPEED = 15.0 / 8.0  # max of d/ds (10 s³ − 15 s⁴ + 6 s⁵)
PEAK_ACCELERATION = 10.0 / math.sqrt(3.0)  # max |d²/ds²| of the same


def quintic(d: np.ndarray, v0: np.ndarray, a0: np.ndarray, T: float, t: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Position, velocity and acceleration at time t ∈ [0, T] of the segment above (clamped to T)."""
    t = min(max(t, 0.0), T)
    c3 = (20 * d - 12 * v0 * T - 3 * a0 * T**2) / (2 * T**3)
    c4 = (-30 * d + 16 * v0 * T + 3 * a0 * T**2) / (2 * T**4)
    c5 = (12 * d - 6 * v0 * T - a0 * T**2) / (2 * T**5)
    x = v0 * t + a0 * t**2 / 2 + c3 * t**3 + c4 * t**4 + c5 * t**5
    v = v0 + a0 * t + 3 * c3 * t**2 + 4 * c4 * t**3 + 5 * c5 * t**4
    a = a0 + 6 * c3 * t + 12 * c4 * t**2 + 20 * c5 * t**3
    return x, v, a


@dataclass
class TargetInterpolator:
    """Turns goal poses (4×4, base frame) into a C²-continuous target sampled every cycle.

    Bounds (for segments started at rest, see the module docstring): ``max_linear_speed`` (m/s),
    ``max_angular_speed`` (rad/s), ``max_linear_acceleration`` (m/s²), ``max_angular_acceleration``
    (rad/s²).
    """

    max_linear_speed: float = 0.25
    max_angular_speed: float = 1.0
    max_linear_acceleration: float = 2.5
    max_angular_acceleration: float = 10.0
    _start: np.ndarray = field(default_factory=lambda: np.eye(4), repr=False)
    _goal: np.ndarray = field(default_factory=lambda: np.eye(4), repr=False)
    _d: np.ndarray = field(default_factory=lambda: np.zeros(6), repr=False)
    _v0: np.ndarray = field(default_factory=lambda: np.zeros(6), repr=False)
    _a0: np.ndarray = field(default_factory=lambda: np.zeros(6), repr=False)
    _t0: float = 0.0
    _T: float = 1.0

    def __post_init__(self) -> None:
        for name in ("max_linear_speed", "max_angular_speed", "max_linear_acceleration", "max_angular_acceleration"):
            v = float(getattr(self, name))
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0")

    def reset(self, pose: np.ndarray, now: float) -> None:
        """At rest at ``pose``."""
        self._start, self._goal = np.array(pose, dtype=float), np.array(pose, dtype=float)
        self._d, self._v0, self._a0 = np.zeros(6), np.zeros(6), np.zeros(6)
        self._t0, self._T = now, 1.0

    @property
    def goal(self) -> np.ndarray:
        return self._goal

    @property
    def duration(self) -> float:
        """The current segment's duration T (s)."""
        return self._T

    def duration_for(self, d: np.ndarray, step: float) -> float:
        """The segment duration for displacement d (6-D tangent) and the policy's step period."""
        dp, dr = float(np.linalg.norm(d[:3])), float(np.linalg.norm(d[3:]))
        return max(step, 1e-3, PEAK_SPEED * dp / self.max_linear_speed, PEAK_SPEED * dr / self.max_angular_speed,
                   math.sqrt(PEAK_ACCELERATION * dp / self.max_linear_acceleration),
                   math.sqrt(PEAK_ACCELERATION * dr / self.max_angular_acceleration))

    def set_goal(self, goal: np.ndarray, step: float, now: float) -> None:
        """A new goal from the interpolated target's state at ``now``, over ``step`` s (or longer)."""
        x, v, a = self._sample(now)
        start = self._pose(x)
        goal = np.array(goal, dtype=float)
        d = np.concatenate((goal[:3, 3] - start[:3, 3], pin.log3(goal[:3, :3] @ start[:3, :3].T)))
        self._start, self._goal, self._d, self._v0, self._a0 = start, goal, d, v, a
        self._t0, self._T = now, self.duration_for(d, step)

    def _sample(self, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return quintic(self._d, self._v0, self._a0, self._T, now - self._t0)

    def _pose(self, x: np.ndarray) -> np.ndarray:
        T = np.eye(4)
        T[:3, 3] = self._start[:3, 3] + x[:3]
        T[:3, :3] = pin.exp3(x[3:]) @ self._start[:3, :3]
        return T

    def sample(self, now: float) -> np.ndarray:
        """The target pose at ``now`` (the goal itself once the segment has ended)."""
        if now - self._t0 >= self._T:
            return self._goal
        return self._pose(self._sample(now)[0])

    def velocity(self, now: float) -> np.ndarray:
        """The target's tangent velocity [ṗ; ω] at ``now`` (m/s, rad/s)."""
        return self._sample(now)[1]
