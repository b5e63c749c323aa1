"""Braking to standstill within the acceleration limits, direction kept."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np


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
