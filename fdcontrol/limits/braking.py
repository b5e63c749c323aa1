"""Braking to standstill within the acceleration limits, direction kept."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np


def _clamp_kernel() -> Callable[..., np.ndarray] | None:
    """limits.compiled's ``brake_clamp`` (compiled on first import), or None where numba is missing."""
    try:
        from fdcontrol.limits.compiled import brake_clamp
    except ImportError:
        return None
    return brake_clamp


def braking_steps(qd: np.ndarray, max_acceleration: np.ndarray, dt: float) -> Iterator[np.ndarray]:
    """Joint-velocity references from q̇ down to exactly zero, one per cycle (rad/s).

    All joints decelerate along the same direction and stop in the same cycle:
    k = ⌈max_j |q̇_j| / (a_j dt)⌉ cycles and q̇_i = (1 − i/k) q̇, so every step is
    |Δq̇_j| = |q̇_j|/k ≤ a_j dt — a linear velocity ramp, the time-optimal stop of the
    slowest-to-stop joint with the others scaled to it (Dahl & Nielsen 1990 time scaling).
    For stop, hold and driver faults wherever the driver still takes commands (issue 12).
    """
    qd = np.asarray(qd, dtype=float)
    step = np.asarray(max_acceleration, dtype=float) * dt
    k = math.ceil(float(np.max(np.abs(qd) / step))) if qd.size else 0
    for i in range(1, k + 1):
        yield qd * (1.0 - i / k) if i < k else np.zeros_like(qd)


class BrakingProfile:
    """The deceleration every stop brakes with, fixed when the stop begins; no run-time change weakens it.

    ``floor`` (rad/s² per joint) is the loop's own braking capability, taken once when the loop is
    built (its acceleration limits then: the robot's configured limits at startup). When a stop begins
    — hold, the watchdog, a fault, ``stop``, a change that waits for standstill, no live input — the
    profile fixes its deceleration a_b = max(a_now, floor) per joint, the larger of the acceleration
    limit in force and the floor, and keeps it until the stop ends: a limit lowered during the stop
    (or before it, to 1e-6 rad/s²) never lengthens it, nor does a small jerk limit.

    :meth:`clamp` bounds the reference the limits computed for the stop: every joint's speed is at most
    that of the linear ramp from the previous reference to zero at a_b, direction kept (the uniform
    scaling of :func:`braking_steps`); the limits may brake harder (position envelope, hard box), never
    softer. With the limits as configured the two coincide (the acceleration limit already ramps at a_b).
    """

    def __init__(self, floor: np.ndarray) -> None:
        floor = np.array(floor, dtype=float)
        if floor.ndim != 1 or not np.all(np.isfinite(floor)) or np.any(floor <= 0):
            raise ValueError("the braking floor must be finite and > 0 for every joint (rad/s²)")
        self.floor = floor
        self.deceleration: np.ndarray | None = None  # a_b while a stop is under way
        self._clamp = _clamp_kernel()  # loaded now, never in the loop's first stop

    @property
    def active(self) -> bool:
        return self.deceleration is not None

    def begin(self, max_acceleration: np.ndarray) -> None:
        """A stop begins: fix a_b = max(the acceleration limit in force, the floor); no-op while one runs."""
        if self.deceleration is None:
            a = np.broadcast_to(np.asarray(max_acceleration, dtype=float), self.floor.shape)
            self.deceleration = np.where(np.isfinite(a), np.maximum(a, self.floor), self.floor)

    def end(self) -> None:
        self.deceleration = None

    def current(self, max_acceleration: np.ndarray) -> np.ndarray:
        """a_b of the stop under way, or the one a stop beginning now would fix."""
        if self.deceleration is not None:
            return self.deceleration
        a = np.broadcast_to(np.asarray(max_acceleration, dtype=float), self.floor.shape)
        return np.where(np.isfinite(a), np.maximum(a, self.floor), self.floor)

    def bound(self, qd_prev: np.ndarray, dt: float, max_acceleration: np.ndarray | None = None) -> np.ndarray:
        """The ramp's next velocity from ``qd_prev`` (rad/s): q̇_prev (1 − 1/r), r = max_j |q̇_j|/(a_b,j dt), or 0."""
        a = self.current(self.floor if max_acceleration is None else max_acceleration)
        qd_prev = np.asarray(qd_prev, dtype=float)
        r = float(np.max(np.abs(qd_prev) / (a * dt))) if qd_prev.size else 0.0
        return qd_prev * (1.0 - 1.0 / r) if r > 1.0 else np.zeros_like(qd_prev)

    def clamp(self, qd: np.ndarray, qd_prev: np.ndarray, dt: float) -> np.ndarray:
        """``qd`` (the limits' braking reference) bounded per joint by the ramp: |q̇_j| ≤ |bound_j|, a NaN
        clamped to rest. Every holding cycle runs it: float64 vectors of one length go to the compiled twin
        (fdcontrol.limits.compiled.brake_clamp, the same numbers to the last bit), anything else to the
        numpy form (:meth:`clamp_numpy`)."""
        k = self._clamp
        if k is not None:
            a = self.floor if self.deceleration is None else self.deceleration
            try:
                return k(qd, qd_prev, a, dt)
            except (TypeError, ValueError):  # not float64 vectors (no matching signature) or lengths differ
                pass
        return self.clamp_numpy(qd, qd_prev, dt)

    def clamp_numpy(self, qd: np.ndarray, qd_prev: np.ndarray, dt: float) -> np.ndarray:
        """:meth:`clamp` by numpy calls (without numba, and for inputs the compiled twin does not take)."""
        b = np.abs(self.bound(qd_prev, dt))
        return np.clip(np.nan_to_num(np.asarray(qd, dtype=float), nan=0.0), -b, b)

    def time(self, qd: np.ndarray, max_acceleration: np.ndarray) -> float:
        """Time (s) to bring ``qd`` to rest at a_b."""
        a = self.current(max_acceleration)
        t = np.abs(np.asarray(qd, dtype=float)) / a
        return float(np.max(t)) if t.size and np.all(np.isfinite(t)) else 0.0

    def distance(self, qd: np.ndarray, max_acceleration: np.ndarray) -> np.ndarray:
        """Per joint, the distance (rad) the ramp from ``qd`` to rest covers: |q̇| t_b / 2, t_b the common time."""
        return np.abs(np.asarray(qd, dtype=float)) * self.time(qd, max_acceleration) / 2.0
