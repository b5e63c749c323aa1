"""The default composition of the limits, compiled: one call instead of four Python loops.

:func:`default_four` computes exactly what :func:`fdcontrol.limits.base.run` computes for the
limits cartesian → position → velocity → acceleration, then the hard box — the same equations
of :class:`~fdcontrol.limits.CartesianSpeed`, :class:`~fdcontrol.limits.PositionEnvelope`,
:class:`~fdcontrol.limits.JointVelocity` and :class:`~fdcontrol.limits.JointAcceleration` (see
their docstrings), in the same order of floating-point operations, so the result is the same
to the last bit (tests/test_limits.py checks it on random inputs, limits crossed, NaN and Inf).
The classes stay the definition and the readable form; this is their twin for the hot path
(~1 µs against ~7 µs for the float loops, benchmarks/bench_cycle.py), compiled by numba once per
process when first imported (cached on disk), never in the loop thread.
"""

from __future__ import annotations

import math

import numpy as np

from fdcontrol.extras import missing

try:
    import numba
    from numba import types
except ImportError as exc:  # SafetyLimits then runs the same limits as Python loops
    raise missing("fast", "the compiled default limits", exc) from exc

_VEC = types.Array(types.float64, 1, "A")  # any layout: pinocchio and numpy hand over both
_SIGNATURE = types.Tuple((_VEC, types.boolean, types.boolean, types.boolean, types.boolean))(
    _VEC, _VEC, _VEC, _VEC, types.float64,  # q, q̇_d, q̇_prev, the tip twist J q̇_d, dt
    _VEC, _VEC, _VEC, _VEC, types.float64, types.float64,  # position: lower, upper, a, v_max, recovery, margin
    _VEC, _VEC,  # velocity: v_max; acceleration: a
    types.float64, types.float64)  # Cartesian: v_max (m/s), ω_max (rad/s)


@numba.njit(_SIGNATURE, cache=True, boundscheck=True)  # a too short vector raises, never reads past
def default_four(q, qd_in, prev, t, dt, lower, upper, p_amax, p_vmax, recovery, margin,
                 vmax, amax, max_linear, max_angular):
    """(q̇_ref, cartesian acted, position acted, velocity acted, acceleration acted).

    ``t`` = J q̇_d is computed by the caller with numpy, as CartesianSpeed computes it: a sum in
    another order would differ in the last bit."""
    n = q.shape[0]
    qd = qd_in.copy()
    lo, hi = np.full(n, -np.inf), np.full(n, np.inf)
    hard_lo, hard_hi = np.full(n, -np.inf), np.full(n, np.inf)
    # Cartesian speed: q̇ scaled by s = min(1, v_max/‖v‖, ω_max/‖ω‖), [v; ω] = t
    v = math.sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2])
    w = math.sqrt(t[3] * t[3] + t[4] * t[4] + t[5] * t[5])
    s = 1.0
    if v > max_linear:
        s = max_linear / v
    if w > max_angular:
        s = min(s, max_angular / w)
    cartesian = s < 1.0
    if cartesian:
        for j in range(n):
            qd[j] *= s
    # position: braking envelope and hard box (PositionEnvelope.apply)
    inv_dt, m2, position = 1.0 / dt, 2.0 * margin, False
    for j in range(n):
        x = q[j]
        du, dl = upper[j] - x, x - lower[j]
        if du < 0:
            r = recovery * p_vmax[j]
            a = -r if r < -du * inv_dt else du * inv_dt
            b = 0.0
            qd[j], position = a, True
            du = 0.0
        elif dl < 0:
            r = recovery * p_vmax[j]
            a, b = 0.0, (r if r < -dl * inv_dt else -dl * inv_dt)
            qd[j], position = b, True
            dl = 0.0
        else:
            brake = m2 * p_amax[j]
            b, a = math.sqrt(brake * du), math.sqrt(brake * dl)
            if du * inv_dt < b:
                b = du * inv_dt
            a = -(dl * inv_dt) if dl * inv_dt < a else -a
            if qd[j] > b:
                qd[j], position = b, True
            elif qd[j] < a:
                qd[j], position = a, True
        if a > lo[j]:
            lo[j] = a
        if b < hi[j]:
            hi[j] = b
        h = -dl * inv_dt
        if h > hard_lo[j]:
            hard_lo[j] = h
        h = du * inv_dt
        if h < hard_hi[j]:
            hard_hi[j] = h
    # joint velocity: one uniform scale, hard box ±v_max (JointVelocity.apply)
    r = 0.0
    for j in range(n):
        x = abs(qd[j]) / vmax[j]
        if x > r:
            r = x
    for j in range(n):
        if vmax[j] < hard_hi[j]:
            hard_hi[j] = vmax[j]
        if -vmax[j] > hard_lo[j]:
            hard_lo[j] = -vmax[j]
    velocity = r > 1.0
    if velocity:
        for j in range(n):
            qd[j] /= r
    # acceleration: uniform scale of Δq̇, back into the envelope within ±a·dt (JointAcceleration.apply)
    r = 0.0
    for j in range(n):
        x = abs(qd[j] - prev[j]) / (amax[j] * dt)
        if x > r:
            r = x
    acceleration = r > 1.0
    for j in range(n):
        x = prev[j] + (qd[j] - prev[j]) / r if acceleration else qd[j]
        if x > hi[j]:
            x = hi[j]
        elif x < lo[j]:
            x = lo[j]
        p, st = prev[j], amax[j] * dt
        if x > p + st:
            x = p + st
        elif x < p - st:
            x = p - st
        qd[j] = x
    # the hard box, last (run)
    for j in range(n):
        x = qd[j]
        if x > hard_hi[j]:
            qd[j] = hard_hi[j]
        elif x < hard_lo[j]:
            qd[j] = hard_lo[j]
    return qd, cartesian, position, velocity, acceleration
