"""Variable stiffness: the motion term's per-axis stiffness K_p and damping K_d changed live, ramped.

A change from (K₀, D₀) to (K₁, D₁) is spread over ``duration`` s with the smooth step
s(τ) = 3τ² − 2τ³, τ = t/duration ∈ [0, 1] (zero slope at both ends):

    K(t) = K₀ + s(τ) (K₁ − K₀),    D(t) = D₀ + s(τ) (D₁ − D₀),

applied once per cycle in the loop, so the control signal K_p ⊙ e − K_d ⊙ ẋ never steps. New
values must lie within the bounds fixed at startup (0 ≤ K ≤ K_max, 0 ≤ D ≤ D_max).
"""

from __future__ import annotations

import math

import numpy as np

from fdcontrol.params import Param, declare

#: the bounds of live gain changes, declared once (fdcontrol.params)
PARAMS = declare(
    "gains",
    Param("max_stiffness", "vector", [5000.0] * 3 + [500.0] * 3, "upper bound of live stiffness changes "
          "(N/m ×3, N·m/rad ×3)", "N/m, N·m/rad", policy="startup", size=6, ge=0, le=1e5),
    Param("max_damping", "vector", [500.0] * 3 + [50.0] * 3, "upper bound of live damping changes "
          "(N·s/m ×3, N·m·s/rad ×3)", "N·s/m, N·m·s/rad", policy="startup", size=6, ge=0, le=1e5),
)


class GainError(ValueError):
    """Gains that cannot be accepted."""


def check_gains(value: list[float] | np.ndarray, upper: np.ndarray, name: str) -> np.ndarray:
    v = np.asarray(value, dtype=float)
    if v.shape != (6,) or not np.all(np.isfinite(v)):
        raise GainError(f"{name} must be 6 finite numbers")
    bad = [i for i in range(6) if not (0 <= v[i] <= upper[i])]
    if bad:
        raise GainError(f"{name} axis {bad[0]} = {v[bad[0]]:g} is outside [0, {upper[bad[0]]:g}] "
                        "(the bounds set at startup)")
    return v


class GainRamp:
    """A ramp of (K, D) from the current values to new ones; :meth:`step` once per cycle."""

    def __init__(self, k0: np.ndarray, d0: np.ndarray, k1: np.ndarray, d1: np.ndarray, duration: float) -> None:
        if not (math.isfinite(duration) and 0 <= duration <= 60):
            raise GainError("ramp time must be in [0, 60] s")
        self.k0, self.d0 = np.array(k0, dtype=float), np.array(d0, dtype=float)
        self.k1, self.d1 = np.array(k1, dtype=float), np.array(d1, dtype=float)
        self.duration, self.t = float(duration), 0.0

    @property
    def done(self) -> bool:
        return self.t >= self.duration

    def step(self, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Advance by dt (s); the (K, D) of this cycle."""
        self.t = min(self.t + dt, self.duration)
        tau = 1.0 if self.duration == 0 else self.t / self.duration
        s = tau * tau * (3.0 - 2.0 * tau)
        return self.k0 + s * (self.k1 - self.k0), self.d0 + s * (self.d1 - self.d0)
