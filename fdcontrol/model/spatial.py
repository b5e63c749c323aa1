"""Small spatial-vector helpers on [linear; angular] 6-vectors, cheap for the hot path."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b for 3-vectors (numpy.cross costs ~30 µs per call; this ~2 µs)."""
    return np.array((a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]))


def rotate6(R: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Re-express a wrench or twist [a; b] by the rotation R: [R a; R b]."""
    return np.concatenate((R @ w[:3], R @ w[3:]))


def finite(x: np.ndarray) -> bool:
    """True when every entry is finite: the sum is finite (nan and ±inf propagate into it).

    A vector is summed as Python floats (~0.3 µs for N ≈ 7, against ~1.3 µs for a numpy
    reduction and ~8 µs for ``np.isfinite(x).all()``); other shapes by one numpy reduction.
    """
    if x.ndim == 1:
        return math.isfinite(sum(x.tolist()))
    return math.isfinite(float(np.add.reduce(x, axis=None)))


def first_max(v: list[float]) -> tuple[int, float]:
    """(j, v_j) where ``np.argmax(v)`` points: the first largest entry, the first NaN before any number."""
    j, m = 0, v[0]
    for i in range(1, len(v)):
        x = v[i]
        if x > m or (x != x and m == m):
            j, m = i, x
    return j, m


def check_vec6(x: np.ndarray | list[float], name: str, labels: tuple[str, str, str, str, str],
               max_linear: float, max_angular: float, frame: str, error: type[ValueError]) -> np.ndarray:
    """A finite 6-vector [linear; angular] with |linear| ≤ max_linear, |angular| ≤ max_angular and
    frame "base" or "tool", else `error`. `labels`: (entries, linear norm, its unit, angular norm, its unit)."""
    entries, lin, lin_unit, ang, ang_unit = labels
    w = np.asarray(x, dtype=float)
    if w.shape != (6,):
        raise error(f"{name} must have 6 entries [{entries}], got shape {w.shape}")
    a = w.tolist()  # plain floats: math.hypot is ~10× cheaper than np.linalg.norm on 3 entries
    if not math.isfinite(sum(a)):  # finite(w), on the same floats (a vector: finite's own test)
        raise error(f"{name} contains NaN or Inf")
    if math.hypot(a[0], a[1], a[2]) > max_linear or math.hypot(a[3], a[4], a[5]) > max_angular:
        raise error(f"{name} out of range: {lin} ≤ {max_linear} {lin_unit}, {ang} ≤ {max_angular} {ang_unit}")
    if frame not in ("base", "tool"):
        raise error(f"frame must be 'base' or 'tool', got {frame!r}")
    return w


def target_pose(position: Any, orientation: Any, current: np.ndarray,
                error: type[Exception] = ValueError) -> np.ndarray:
    """The 4×4 pose (base frame) at `position`; `orientation` a unit quaternion [x, y, z, w], or None to
    keep `current`'s rotation. A quaternion off unit norm by more than 1e-3 raises `error`."""
    T = np.eye(4)
    T[:3, 3] = position
    if orientation is None:
        T[:3, :3] = current[:3, :3]
    else:
        x, y, z, w = orientation
        n = math.sqrt(x * x + y * y + z * z + w * w)
        if abs(n - 1.0) > 1e-3:
            raise error(f"orientation must be a unit quaternion [x, y, z, w], norm is {n:.4g}")
        import pinocchio as pin

        T[:3, :3] = pin.Quaternion(w / n, x / n, y / n, z / n).toRotationMatrix()
    return T


def quaternion(R: np.ndarray) -> list[float]:
    """Unit quaternion [x, y, z, w] of a rotation matrix (Shepperd's method, w ≥ 0)."""
    m = np.asarray(R, dtype=float)
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    if tr > 0:
        s = 2.0 * math.sqrt(1.0 + tr)
        q = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s]
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(max(1.0 + m[i, i] - m[j, j] - m[k, k], 1e-300))
        q = [0.0, 0.0, 0.0, (m[k, j] - m[j, k]) / s]
        q[i], q[j], q[k] = 0.25 * s, (m[j, i] + m[i, j]) / s, (m[k, i] + m[i, k]) / s
        if q[3] < 0:
            q = [-x for x in q]
    return q
