"""The default composition of the limits, compiled: one call instead of six Python loops.

:func:`limits` — :func:`head` then :func:`tail` in one call — computes what
:func:`fdcontrol.limits.base.run` computes for the limits cartesian → position → velocity →
(path_speed) → (path_acceleration) → acceleration, then the hard box — the equations of
:class:`~fdcontrol.limits.CartesianSpeed`,
:class:`~fdcontrol.limits.PositionEnvelope`, :class:`~fdcontrol.limits.JointVelocity`,
:class:`~fdcontrol.limits.PathSpeed`, :class:`~fdcontrol.limits.PathAcceleration` and
:class:`~fdcontrol.limits.JointAcceleration` (see their docstrings). The basic four are computed in
the same order of floating-point operations as the classes, so with exactly those four the result
is the same to the last bit; the path speed limit solves J⁺ by the Cholesky factor of the 6×6 Gram
matrix where J is well conditioned (the SVD pseudo-inverse otherwise), so with it the result agrees
to rounding (tests/test_limits.py checks both on random inputs, limits crossed, NaN and Inf).
J̇(q, q̇)q̇ for the path speed limit, at the q̇ the limits before it left, is computed inside the call from
the robot's chain of revolute joints (:func:`chain`, :func:`rate`: pinocchio's second-order forward
kinematics to rounding); for a robot that is no such chain the caller calls :func:`head`, the robot's
``jacobian_rate`` and :func:`tail`. The classes stay the definition and the readable form; this is their
twin for the hot path, compiled by numba once per process when first imported (cached on disk),
never in the loop thread.

Parameters arrive packed (each call argument costs ~0.05–0.1 µs of numba dispatch, so few arguments): ``P``
holds each distinct parameter vector once as a row, ``idx`` says which row is which —
position lower, upper, deceleration, v_max; velocity v_max; acceleration a; path_acceleration a;
path_speed a; :func:`limits` takes them, the chain, the flags of the configuration, the scalar parameters
(recovery, margin, v, ω, reserve), the work space and — in :func:`limits_jerk` — the jerk limit's vectors and
history in one array B (:func:`pack`; the caller writes a scalar set at run time into it before its next call).
``W`` (5×N, or 8 + 2N rows) is the work space: q̇, the envelope lo/hi and the hard box, then the path speed limit's
scratch space (its own where W has 5 rows). The tip twist J q̇ of the Cartesian limit
is summed inside, row by row from the left, as :meth:`CartesianSpeed.twist
<fdcontrol.limits.CartesianSpeed.twist>` sums it (numpy's BLAS product sums in another order).
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

from fdcontrol.model.jacobi import pinv_apply_lq, svd_rows, svd_rows_into  # (compiled too: numba is there)

_VEC = types.Array(types.float64, 1, "A")  # any layout: pinocchio and numpy hand over both
_MAT = types.Array(types.float64, 2, "A")
_IDX = types.Array(types.int64, 1, "A")
#: the rows of ``idx``: which row of P holds each parameter vector
LOWER, UPPER, P_AMAX, P_VMAX, VMAX, AMAX, PA_AMAX, PS_AMAX = range(8)
#: the rows of the work space W
QD, LO, HI, HARD_LO, HARD_HI = range(5)
#: J⁺ by the Gram matrix's Cholesky factor only while κ(J) ≤ this (error ~κ²·1e-16); else the SVD
GRAM_KAPPA = 1e4

_HEAD = types.Tuple((types.boolean, types.boolean, types.boolean))(
    _VEC, _VEC, _MAT, types.float64,  # q, q̇_d, J (the tip twist J q̇_d for the Cartesian limit), dt
    _MAT, _IDX, _MAT,  # P, idx, W
    types.float64, types.float64, types.float64, types.float64, types.boolean)  # recovery, margin, v, ω, cartesian?
_TAIL = types.Tuple((_VEC, types.boolean, types.boolean, types.boolean))(
    _VEC, _MAT, _VEC, types.float64,  # q̇_prev, J, J̇(q, q̇)q̇ at W's q̇, dt
    _MAT, _VEC, _MAT,  # J's thin SVD U, σ, Vᵀ when known (σ empty: none)
    _MAT, _IDX, _MAT,  # P, idx, W
    types.float64, types.boolean, types.boolean,  # path_speed reserve, path_speed?, path_acceleration?
    types.boolean)  # the hard box last? (false: limits after the acceleration limit follow, then the box)


#: the rows of a chain table (:func:`chain`): per joint its placement in its parent (rotation row-major, then
#: translation) and its unit axis; last, the tip frame's placement in the last joint (its axis entries unused)
CHAIN_COLUMNS = 15
_NO_CHAIN = np.zeros((0, CHAIN_COLUMNS))
#: pinocchio's revolute joints the compiled J̇q̇ takes, with their axes (any other: RobotModel.jacobian_rate)
_AXES = {"JointModelRX": (1.0, 0.0, 0.0), "JointModelRY": (0.0, 1.0, 0.0), "JointModelRZ": (0.0, 0.0, 1.0)}


def chain(robot) -> np.ndarray | None:
    """The table :func:`limits` computes J̇(q, q̇)q̇ from for ``robot`` (a RobotModel): a serial chain of revolute
    joints (pinocchio's RX, RY, RZ or unaligned revolute; nq = nv = N, each joint's parent the one before) with
    the tip on the last joint and the base the world's orientation; None for any other model (the path speed
    limit then calls ``robot.jacobian_rate``)."""
    m = getattr(robot, "model", None)
    if m is None or not getattr(robot, "_world_is_base", False):
        return None
    n = m.njoints - 1
    if n < 1 or m.nq != n or m.nv != n or list(m.parents) != [0, *range(n)]:
        return None
    frame = m.frames[robot.tip_id]
    if frame.parentJoint != n:
        return None
    K = np.zeros((n + 1, CHAIN_COLUMNS))
    for i in range(1, n + 1):
        jm = m.joints[i]
        kind = jm.shortname()
        if kind in _AXES:
            axis = np.array(_AXES[kind])
        elif kind == "JointModelRevoluteUnaligned":
            axis = np.asarray(jm.extract().axis, dtype=float)
        else:
            return None
        M = m.jointPlacements[i]
        K[i - 1, :9], K[i - 1, 9:12], K[i - 1, 12:] = M.rotation.reshape(9), M.translation, axis
    K[n, :9], K[n, 9:12] = frame.placement.rotation.reshape(9), frame.placement.translation
    return K


@numba.njit(cache=True)
def _mul3(A, B):
    """A B of two 3×3 matrices held as row-major 9-tuples (no array: nothing allocated per joint)."""
    return (A[0] * B[0] + A[1] * B[3] + A[2] * B[6], A[0] * B[1] + A[1] * B[4] + A[2] * B[7],
            A[0] * B[2] + A[1] * B[5] + A[2] * B[8],
            A[3] * B[0] + A[4] * B[3] + A[5] * B[6], A[3] * B[1] + A[4] * B[4] + A[5] * B[7],
            A[3] * B[2] + A[4] * B[5] + A[5] * B[8],
            A[6] * B[0] + A[7] * B[3] + A[8] * B[6], A[6] * B[1] + A[7] * B[4] + A[8] * B[7],
            A[6] * B[2] + A[7] * B[5] + A[8] * B[8])


@numba.njit(cache=True, boundscheck=True)
def _rate(q, qd, K):
    """J̇(q, q̇)q̇ = [a; α], the classical acceleration of the tip frame's origin at q̈ = 0 in the base frame, as
    :meth:`fdcontrol.model.robot.RobotModel.jacobian_rate` (pinocchio's second-order forward kinematics) gives it
    to rounding, for the chain ``K`` (:func:`chain`): in world coordinates, joint by joint, with ω, α the link's
    angular velocity and acceleration, a the acceleration of its frame's origin and z the joint's axis (fixed in
    the link before it, so ż = ω × z): α += (ω × z) q̇_j, ω += z q̇_j, and from one origin to the next, r apart on
    one link, a += α × r + ω × (ω × r)."""
    n = K.shape[0] - 1
    R = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    wx, wy, wz, lx, ly, lz, ax, ay, az = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    for j in range(n + 1):
        px, py, pz = K[j, 9], K[j, 10], K[j, 11]  # r = R p_j: this link's origin to the next origin (or the tip)
        rx = R[0] * px + R[1] * py + R[2] * pz
        ry = R[3] * px + R[4] * py + R[5] * pz
        rz = R[6] * px + R[7] * py + R[8] * pz
        vx, vy, vz = wy * rz - wz * ry, wz * rx - wx * rz, wx * ry - wy * rx
        ax += (ly * rz - lz * ry) + (wy * vz - wz * vy)
        ay += (lz * rx - lx * rz) + (wz * vx - wx * vz)
        az += (lx * ry - ly * rx) + (wx * vy - wy * vx)
        if j == n:
            break
        Rj = _mul3(R, (K[j, 0], K[j, 1], K[j, 2], K[j, 3], K[j, 4], K[j, 5], K[j, 6], K[j, 7], K[j, 8]))
        ux, uy, uz = K[j, 12], K[j, 13], K[j, 14]
        zx = Rj[0] * ux + Rj[1] * uy + Rj[2] * uz
        zy = Rj[3] * ux + Rj[4] * uy + Rj[5] * uz
        zz = Rj[6] * ux + Rj[7] * uy + Rj[8] * uz
        d = qd[j]
        lx += (wy * zz - wz * zy) * d
        ly += (wz * zx - wx * zz) * d
        lz += (wx * zy - wy * zx) * d
        wx += zx * d
        wy += zy * d
        wz += zz * d
        c, s = math.cos(q[j]), math.sin(q[j])
        k = 1.0 - c  # Rodrigues: the rotation by q_j about the joint's axis u, then R = Rj · it
        R = _mul3(Rj, (c + k * ux * ux, k * ux * uy - s * uz, k * ux * uz + s * uy,
                       k * uy * ux + s * uz, c + k * uy * uy, k * uy * uz - s * ux,
                       k * uz * ux - s * uy, k * uz * uy + s * ux, c + k * uz * uz))
    out = np.empty(6)
    out[0], out[1], out[2], out[3], out[4], out[5] = ax, ay, az, lx, ly, lz
    return out


@numba.njit(cache=True, boundscheck=True)
def _head(q, qd_in, J, dt, P, idx, W, recovery, margin, max_linear, max_angular, cartesian_on):
    """:func:`head`'s body (shared with :func:`limits`)."""
    n = q.shape[0]
    qd, lo, hi, hard_lo, hard_hi = W[QD], W[LO], W[HI], W[HARD_LO], W[HARD_HI]
    lower, upper = P[int(idx[LOWER])], P[int(idx[UPPER])]
    p_amax, p_vmax, vmax = P[int(idx[P_AMAX])], P[int(idx[P_VMAX])], P[int(idx[VMAX])]
    for j in range(n):
        qd[j] = qd_in[j]
        lo[j], hi[j], hard_lo[j], hard_hi[j] = -np.inf, np.inf, -np.inf, np.inf
    # Cartesian speed: q̇ scaled by s = min(1, v_max/‖v‖, ω_max/‖ω‖), [v; ω] = J q̇ (CartesianSpeed.twist's sums)
    cartesian = False
    if cartesian_on:
        t0, t1, t2, t3, t4, t5 = _row(J, 0, qd_in), _row(J, 1, qd_in), _row(J, 2, qd_in), _row(J, 3, qd_in), \
            _row(J, 4, qd_in), _row(J, 5, qd_in)
        v = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
        w = math.sqrt(t3 * t3 + t4 * t4 + t5 * t5)
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
    return cartesian, position, velocity


@numba.njit(cache=True, boundscheck=True)
def _row(J, i, x):
    """Row i of J times x, summed left to right from 0.0 (CartesianSpeed.twist's order)."""
    s = 0.0
    for c in range(x.shape[0]):
        s += J[i, c] * x[c]
    return s


@numba.njit(cache=True)
def _t_times(M, z, rows):
    """Mᵀ z over M's first ``rows`` rows, summed row by row in order (the same float operations wherever
    a pseudo-inverse below forms one)."""
    return _t_times_into(M, z, rows, np.empty(M.shape[1]))


@numba.njit(cache=True)
def _t_times_into(M, z, rows, x):
    """:func:`_t_times` into ``x`` (its first M.shape[1] entries), returned."""
    for c in range(M.shape[1]):
        s = 0.0
        for i in range(rows):
            s += M[i, c] * z[i]
        x[c] = s
    return x


@numba.njit(cache=True)
def _pinv_apply(J, y, U, sv, Vt, S):
    """J⁺ y (J 6×N, y a 6-vector) as ``np.linalg.pinv(J, rcond=1e-6) @ y``: by the Cholesky factor
    of the smaller Gram matrix (J Jᵀ or JᵀJ) when κ(J) ≤ GRAM_KAPPA is certain — κ(G) ≤ tr(G)·tr(G⁻¹),
    tr(G⁻¹) = ‖L⁻¹‖²_F — so that no singular value is truncated and the two agree to rounding; by the
    SVD pseudo-inverse otherwise — from ``U, sv, Vt``, the SVD of this very J when the caller has it (the γ
    schedule took it this cycle: one decomposition instead of two), else by J's LQ factorization where it certifies
    κ(J) ≤ LQ_KAPPA (:func:`fdcontrol.model.jacobi.pinv_apply_lq`: no singular value truncated either, the same J⁺ y
    to rounding at a quarter of an SVD's cost), else by its own SVD (``sv`` empty): the one the schedule would have
    taken (:func:`fdcontrol.model.linalg.svd_jacobi`'s rotations, the same bits), LAPACK's where they fail. ``S``:
    scratch space (2k + 3 rows of N, k = min(6, N); smaller: its own), where the Cholesky path's result is left."""
    m, n = J.shape
    k = m if n >= m else n
    if S.shape[0] < 2 * k + 3 or S.shape[1] < n:
        S = np.empty((2 * k + 3, n))
    G = S[:k, :k]
    for i in range(k):
        for j in range(i + 1):
            s = 0.0
            if n >= m:
                for c in range(n):
                    s += J[i, c] * J[j, c]
            else:
                for c in range(m):
                    s += J[c, i] * J[c, j]
            G[i, j] = s
    L = S[k:2 * k, :k]  # only its lower triangle is written and read
    ok = True
    for j in range(k):
        s = G[j, j]
        for c in range(j):
            s -= L[j, c] * L[j, c]
        if not s > 0.0:
            ok = False
            break
        L[j, j] = math.sqrt(s)
        for i in range(j + 1, k):
            s = G[i, j]
            for c in range(j):
                s -= L[i, c] * L[j, c]
            L[i, j] = s / L[j, j]
    if ok:  # tr(G⁻¹) = ‖L⁻¹‖²_F: the columns of L⁻¹ by forward substitution
        tr_g, tr_inv = 0.0, 0.0
        for i in range(k):
            tr_g += G[i, i]
        e = S[2 * k]
        for col in range(k):
            for i in range(k):
                s = 1.0 if i == col else 0.0
                for c in range(col, i):
                    s -= L[i, c] * e[c]
                e[i] = s / L[i, i] if i >= col else 0.0
                if i >= col:
                    tr_inv += e[i] * e[i]
        ok = tr_g * tr_inv <= GRAM_KAPPA * GRAM_KAPPA
    if not ok:
        if sv.shape[0] == 0:
            x = np.empty(n)
            if pinv_apply_lq(J, y, x):
                return x
            if n >= m:  # J's SVD as fdcontrol.model.linalg.svd_jacobi takes it (the same kernel: the same bits)
                u, s, vt = np.empty((m, m)), np.empty(m), np.empty((m, n))
                if svd_rows_into(J, u, s, vt):
                    return _svd_apply(u, s, vt, y)
            else:  # (of Jᵀ, as svd_jacobi takes it for a tall J)
                done, u, s, vt = svd_rows(J.T)
                if done:
                    return _svd_apply(vt.T, s, u.T, y)
            return np.linalg.pinv(np.ascontiguousarray(J), 1e-6) @ np.ascontiguousarray(y)
        return _svd_apply(U, sv, Vt, y)
    x = S[2 * k + 2]
    rhs = y if n >= m else _t_times_into(J, y, m, x)  # n ≥ m: G z = y, x = Jᵀ z;  n < m: G x = Jᵀ y
    z = S[2 * k + 1]
    for i in range(k):  # L z' = rhs
        s = rhs[i]
        for c in range(i):
            s -= L[i, c] * z[c]
        z[i] = s / L[i, i]
    for i in range(k - 1, -1, -1):  # Lᵀ z = z'
        s = z[i]
        for c in range(i + 1, k):
            s -= L[c, i] * z[c]
        z[i] = s / L[i, i]
    if n < m:
        return z[:k]
    return _t_times_into(J, z, m, x)


@numba.njit(cache=True)
def _svd_apply(U, sv, Vt, y):
    """J⁺ y from J = U diag(sv) Vt (thin SVD, sv descending) as ``np.linalg.pinv`` forms it: singular values
    at or below 1e-6 × the largest count as zero."""
    k = sv.shape[0]
    cutoff = 1e-6 * sv[0]
    z = np.zeros(k)
    for i in range(k):
        if sv[i] > cutoff:
            s = 0.0
            for r in range(U.shape[0]):
                s += U[r, i] * y[r]
            z[i] = s / sv[i]
    return _t_times(Vt, z, k)


@numba.njit(cache=True, boundscheck=True)
def _tail(prev, J, jdot, dt, U, sv, Vt, P, idx, W, reserve, path_speed_on, path_acceleration_on, box, K, q, out):
    """:func:`tail`'s body (shared with :func:`limits`), q̇_ref into ``out``: J̇(q, q̇)q̇ is ``jdot``, or with a chain
    ``K`` (rows: see :func:`chain`) computed here at ``q`` (:func:`_rate`), only where the path speed limit reads it."""
    qd, lo, hi, hard_lo, hard_hi = W[QD], W[LO], W[HI], W[HARD_LO], W[HARD_HI]
    n = qd.shape[0]
    # path speed (PathSpeed.apply): ṡ ≤ min_j √(r a_j / |q''_j|), q'' = −J⁺ (J̇(q, q')q'), q' = q̇/ṡ
    path_speed = False
    if path_speed_on:
        s2 = 0.0
        for i in range(J.shape[0]):
            s = 0.0
            for c in range(n):
                s += J[i, c] * qd[c]
            s2 += s * s
        speed = math.sqrt(s2)
        fin = True
        for c in range(n):
            if not math.isfinite(qd[c]):
                fin = False
        if speed > 1e-9 and fin:
            if K.shape[0] > 0:
                jdot = _rate(q, qd, K)
            x = _pinv_apply(J, jdot, U, sv, Vt, W[5:])  # J̇(q, q')q' = jdot/ṡ² (quadratic in q̇)
            inv2 = 1.0 / (speed * speed)
            amax = P[int(idx[PS_AMAX])]
            top, cap, good = 0.0, np.inf, True
            for c in range(n):
                need = abs(x[c] * inv2)
                if not math.isfinite(need):
                    good = False
                if need > top:
                    top = need
                c_j = math.sqrt(reserve * amax[c] / max(need, 1e-300))
                if c_j < cap:
                    cap = c_j
            if good and top > 0 and speed > cap:
                s = cap / speed
                for c in range(n):
                    qd[c] *= s
                path_speed = True
    # path acceleration (PathAcceleration.apply): q̇ = σ q̇_d, the largest σ ∈ [0, 1] within ±a dt
    path_acceleration = False
    if path_acceleration_on:
        amax = P[int(idx[PA_AMAX])]
        inside = True
        for j in range(n):
            if not abs(qd[j] - prev[j]) <= amax[j] * dt:
                inside = False
                break
        if not inside:
            lo_s, hi_s, found = 0.0, 1.0, True
            for j in range(n):
                d, p, s = qd[j], prev[j], amax[j] * dt
                if d == 0.0:
                    if abs(p) > s:
                        found = False
                        break
                    continue
                u, v = (p - s) / d, (p + s) / d
                if u > v:
                    u, v = v, u
                if u > lo_s:
                    lo_s = u
                if v < hi_s:
                    hi_s = v
                if lo_s > hi_s:
                    found = False
                    break
            if found:
                for j in range(n):
                    qd[j] *= hi_s
                path_acceleration = True
    # acceleration: uniform scale of Δq̇, back into the envelope within ±a·dt (JointAcceleration.apply)
    amax = P[int(idx[AMAX])]
    r = 0.0
    for j in range(n):
        x_ = abs(qd[j] - prev[j]) / (amax[j] * dt)
        if x_ > r:
            r = x_
    acceleration = r > 1.0
    for j in range(n):
        x_ = prev[j] + (qd[j] - prev[j]) / r if acceleration else qd[j]
        if x_ > hi[j]:
            x_ = hi[j]
        elif x_ < lo[j]:
            x_ = lo[j]
        p, st = prev[j], amax[j] * dt
        if x_ > p + st:
            x_ = p + st
        elif x_ < p - st:
            x_ = p - st
        if box:  # the hard box, last (run)
            if x_ > hard_hi[j]:
                x_ = hard_hi[j]
            elif x_ < hard_lo[j]:
                x_ = hard_lo[j]
        out[j] = x_
    return path_speed, path_acceleration, acceleration


@numba.njit(_HEAD, cache=True, boundscheck=True)  # a too short vector raises, never reads past
def head(q, qd_in, J, dt, P, idx, W, recovery, margin, max_linear, max_angular, cartesian_on):
    """Cartesian speed, position envelope, joint velocity: q̇ into W[QD], the boxes into W; which acted.

    The tip twist J q̇_d is summed row by row, left to right, as CartesianSpeed.twist sums it."""
    return _head(q, qd_in, J, dt, P, idx, W, recovery, margin, max_linear, max_angular, cartesian_on)


@numba.njit(_TAIL, cache=True, boundscheck=True)
def tail(prev, J, jdot, dt, U, sv, Vt, P, idx, W, reserve, path_speed_on, path_acceleration_on, box):
    """Path speed, path acceleration, joint acceleration, then (with ``box``) the hard box, on W from :func:`head`:
    (q̇_ref — a new array, path speed acted, path acceleration acted, acceleration acted).

    ``jdot`` = J̇(q, q̇)q̇ at W[QD] (:meth:`fdcontrol.model.robot.RobotModel.jacobian_rate`)."""
    out = np.empty(W.shape[1])
    ps, pa, acc = _tail(prev, J, jdot, dt, U, sv, Vt, P, idx, W, reserve, path_speed_on, path_acceleration_on, box,
                        _NO_CHAIN, jdot, out)
    return out, ps, pa, acc


@numba.njit(_VEC(_VEC, _VEC, _MAT), cache=True, boundscheck=True)
def rate(q, qd, K):
    """J̇(q, q̇)q̇ of the chain ``K`` (:func:`chain`), what :func:`limits` computes for the path speed limit."""
    return _rate(q, qd, K)

#: the header row of B (:func:`pack`): P's rows, K's rows, the flags (FLAG_*), idx (8 entries), the scalar
#: parameters, the jerk limit's history flag (1: S holds its last cycle), W's rows, the jerk limit's rows in P
B_ROWS, B_CHAIN, B_FLAGS, B_IDX = 0, 1, 2, 3
B_RECOVERY, B_MARGIN, B_LINEAR, B_ANGULAR, B_RESERVE, B_HISTORY, B_WORK, B_JERK, B_JERK_ACC = range(11, 20)
B_HEADER = 20
FLAG_CARTESIAN, FLAG_PATH_ACCELERATION, FLAG_BOX = 1, 2, 4
#: B holds the jerk limit (its two rows in P, its history S after W); with FLAG_JERK_BOX the hard box follows it
FLAG_JERK, FLAG_JERK_BOX = 8, 16
#: the bits of :func:`limits`' result: which limit acted, and q̇_ref finite
HIT_CARTESIAN, HIT_POSITION, HIT_VELOCITY, HIT_PATH_SPEED, HIT_PATH_ACCELERATION, HIT_ACCELERATION, FINITE = (
    1, 2, 4, 8, 16, 32, 64)
HIT_JERK = 128  # (limits_jerk)

_LIMITS = types.int64(
    _VEC, _VEC, _VEC, _MAT, types.float64,  # q, q̇_d, q̇_prev, J, dt
    _MAT, _VEC, _MAT, _MAT,  # J's SVD (as tail), B (the configuration and the work space: pack)
    _VEC)  # q̇_ref (written)
_LIMITS_NO_SVD = types.int64(_VEC, _VEC, _VEC, _MAT, types.float64, _MAT, _VEC)  # as limits, without J's SVD
_LIMITS_JERK = types.int64(_VEC, _VEC, _VEC, _MAT, types.float64, types.float64, _MAT, _VEC)  # and the period


def pack(P: np.ndarray, idx, K: np.ndarray, flags: int, scalars=(0.1, 0.5, math.inf, math.inf, 1.0),
         work: int = 5, jerk: tuple[int, int] | None = None) -> np.ndarray:
    """B, what :func:`limits` reads of a configuration in one array (few arguments: each costs numba's dispatch):
    a header row (P's rows, K's rows, the flags, idx as floats, the scalars — recovery, margin, v, ω, reserve —,
    the jerk limit's history flag, W's rows, the jerk limit's rows of P), P's rows (their first N columns), the
    chain K's rows (CHAIN_COLUMNS), the work space W (``work`` rows of N: see the module doc), with ``jerk`` (the
    rows of P holding its j_max and a_max: FLAG_JERK is set) its history S (3 rows of N, see :func:`jerk`); as
    wide as the widest of them. W and S are the caller's views of B's rows (:func:`views`)."""
    r, n, k = P.shape[0], P.shape[1], K.shape[0]
    B = np.zeros((1 + r + k + work + (3 if jerk is not None else 0), max(n, CHAIN_COLUMNS, B_HEADER)))
    B[0, B_ROWS], B[0, B_CHAIN], B[0, B_FLAGS] = r, k, flags | (FLAG_JERK if jerk is not None else 0)
    B[0, B_IDX:B_IDX + 8] = idx
    B[0, B_RECOVERY:B_RESERVE + 1] = scalars
    B[0, B_WORK] = work
    if jerk is not None:
        B[0, B_JERK], B[0, B_JERK_ACC] = jerk
    B[1:1 + r, :n] = P
    B[1 + r:1 + r + k, :CHAIN_COLUMNS] = K
    return B


def views(B: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """B's (P, W, S) as views: the parameter rows, the work space and the jerk limit's history (None without it)."""
    r, k, w = int(B[0, B_ROWS]), int(B[0, B_CHAIN]), int(B[0, B_WORK])
    P, W = B[1:1 + r, :n], B[1 + r + k:1 + r + k + w, :n]
    S = B[1 + r + k + w:4 + r + k + w, :n] if int(B[0, B_FLAGS]) & FLAG_JERK else None
    return P, W, S


@numba.njit(cache=True, boundscheck=True)
def _limits(q, qd_in, prev, J, dt, U, sv, Vt, B, W, recovery, margin, max_linear, max_angular, reserve, out):
    """:func:`head` then :func:`tail` in one call, J̇(q, q̇)q̇ for the path speed limit (on when B holds a chain)
    computed between them from the chain, q̇_ref into ``out`` (the caller's new array: returning one from the
    compiled call costs more). ``B`` (:func:`pack`) holds P, idx, the chain and the flags (the Cartesian limit,
    the path acceleration limit, the hard box last). The bits of the result: which limits acted (HIT_*) and
    FINITE — q̇_ref finite, the sum of its entries in order, as :func:`fdcontrol.model.spatial.finite` sums them."""
    n = q.shape[0]
    r, k, flags = int(B[0, B_ROWS]), int(B[0, B_CHAIN]), int(B[0, B_FLAGS])
    idx = B[0, B_IDX:B_IDX + 8]
    P = B[1:1 + r, :n]
    K = B[1 + r:1 + r + k, :CHAIN_COLUMNS]
    c, p, v = _head(q, qd_in, J, dt, P, idx, W, recovery, margin, max_linear, max_angular,
                    (flags & FLAG_CARTESIAN) != 0)
    ps, pa, acc = _tail(prev, J, qd_in, dt, U, sv, Vt, P, idx, W, reserve, k > 0, (flags & FLAG_PATH_ACCELERATION) != 0,
                        (flags & FLAG_BOX) != 0, K, q, out)
    total = 0.0
    for j in range(out.shape[0]):
        total += out[j]
    bits = HIT_CARTESIAN if c else 0
    if p:
        bits |= HIT_POSITION
    if v:
        bits |= HIT_VELOCITY
    if ps:
        bits |= HIT_PATH_SPEED
    if pa:
        bits |= HIT_PATH_ACCELERATION
    if acc:
        bits |= HIT_ACCELERATION
    if math.isfinite(total):
        bits |= FINITE
    return bits


@numba.njit(cache=True, boundscheck=True)
def _from_b(q, qd_in, prev, J, dt, U, sv, Vt, B, out):
    """:func:`_limits` with its configuration, scalars and work space read from B (:func:`pack`)."""
    n = q.shape[0]
    r, k, w = int(B[0, B_ROWS]), int(B[0, B_CHAIN]), int(B[0, B_WORK])
    W = B[1 + r + k:1 + r + k + w, :n]
    return _limits(q, qd_in, prev, J, dt, U, sv, Vt, B, W, B[0, B_RECOVERY], B[0, B_MARGIN], B[0, B_LINEAR],
                   B[0, B_ANGULAR], B[0, B_RESERVE], out)


@numba.njit(_LIMITS_NO_SVD, cache=True, boundscheck=True)
def limits_own_svd(q, qd_in, prev, J, dt, B, out):
    """:func:`limits` where the caller has no SVD of J (the path speed limit takes its own where it needs one): three
    arguments fewer to dispatch in most cycles."""
    return _from_b(q, qd_in, prev, J, dt, np.empty((0, 0)), np.empty(0), np.empty((0, 0)), B, out)


@numba.njit(_LIMITS, cache=True, boundscheck=True)
def limits(q, qd_in, prev, J, dt, U, sv, Vt, B, out):
    """:func:`_limits`: the default composition of the limits in one call, B (:func:`pack`) holding its
    configuration, its scalar parameters and its work space."""
    return _from_b(q, qd_in, prev, J, dt, U, sv, Vt, B, out)


_JERK = types.boolean(_VEC, _VEC, types.float64, types.int64, types.float64, _VEC, _VEC, _MAT, types.boolean,
                      _MAT, types.boolean)


@numba.njit(cache=True, boundscheck=True)
def _jerk(qd, prev, dt, k, h, max_jerk, max_acc, S, history, W, box):
    """:func:`jerk`'s body (shared with :func:`limits_jerk`)."""
    n = qd.shape[0]
    restart = not history
    moving = False
    for j in range(n):
        if prev[j] != 0.0:
            moving = True
    if not restart and not moving:  # a restart from rest: the reference before was beyond one step of a_max
        for j in range(n):
            if abs(S[1, j]) > max_acc[j] * dt:
                restart = True
                break
    own = not restart
    if own:  # prev is the reference this limit made
        for j in range(n):
            if not S[1, j] == prev[j]:
                own = False
                break
    hit = False
    for j in range(n):
        A, J, v = max_acc[j], max_jerk[j], prev[j]
        if restart:
            a_prev = 0.0
        elif own:
            a_prev = S[2, j]
        else:  # changed outside the limit: its own step
            a_prev = (v - S[0, j]) / dt
        if k > 1 and moving:
            v = v + (k - 1) * a_prev * h
        target = qd[j] if math.isfinite(qd[j]) else 0.0
        e = target - v
        r = abs(e)
        a_star = 2.0 * r / (math.sqrt(h * h + 2.0 * r / J) + h)
        if not (restart or own):  # a step made outside: none away from the target, else ≤ a*, ±a_max (JointJerk)
            if a_prev * e < 0.0:
                a_prev = 0.0
            elif a_prev > a_star:
                a_prev = a_star
            elif a_prev < -a_star:
                a_prev = -a_star
            if a_prev > A:
                a_prev = A
            elif a_prev < -A:
                a_prev = -A
        a_t = r / h if r / h <= a_star else a_star
        a_t = a_t if e >= 0 else -a_t
        a = a_t if a_t <= A else A
        a = a if a >= -A else -A
        s = J * h
        if a > a_prev + s:
            a = a_prev + s
        elif a < a_prev - s:
            a = a_prev - s
        S[0, j] = prev[j]
        if a == r / h or a == -r / h:
            qd[j] = target
        else:
            qd[j] = v + a * h
            hit = True
        S[2, j] = a
    for j in range(n):
        S[1, j] = qd[j]
        if box:
            x = qd[j]
            if x > W[HARD_HI, j]:
                qd[j] = W[HARD_HI, j]
            elif x < W[HARD_LO, j]:
                qd[j] = W[HARD_LO, j]
    return hit


@numba.njit(_JERK, cache=True, boundscheck=True)
def jerk(qd, prev, dt, k, h, max_jerk, max_acc, S, history, W, box):
    """The jerk limit (JointJerk.apply) on ``qd`` in place, the same float operations in the same order; which
    acted. ``k`` robot ticks of ``h`` since the last reference (k·h = dt); ``S`` (3×N) the limit's history —
    q̇_prev of the cycle before, the reference it made, its last tick's acceleration — read when ``history``
    and written in place; then, with ``box``, the hard box of W (the last step of :func:`fdcontrol.limits.base.run`)."""
    return _jerk(qd, prev, dt, k, h, max_jerk, max_acc, S, history, W, box)


@numba.njit(_LIMITS_JERK, cache=True, boundscheck=True)
def limits_jerk(q, qd_in, prev, J, dt, period, B, out):
    """:func:`limits_own_svd`, then the jerk limit right after the acceleration limit (:func:`jerk` on ``out``, its
    parameters and history S in B: FLAG_JERK) in the same call, ``k`` = round(dt/period) robot ticks of h = dt/k
    when dt > 1.5·period (else one: JointJerk.apply's rule); its verdict in the bit HIT_JERK, FINITE for the
    reference after it. B's history flag is set once S holds a cycle. −1, nothing computed or written, where
    round(dt/period) would be no exact integer (dt/period ≥ 2⁵² or inf, a zero period: the caller's Python does
    it, raising as JointJerk.apply raises)."""
    k = 1
    if dt > 1.5 * period:
        if period == 0.0:
            return -1
        x = dt / period
        if not x < 4503599627370496.0:
            return -1
        k = round(x)
    h = dt / k
    n = q.shape[0]
    r, c, w = int(B[0, B_ROWS]), int(B[0, B_CHAIN]), int(B[0, B_WORK])
    W = B[1 + r + c:1 + r + c + w, :n]
    S = B[1 + r + c + w:4 + r + c + w, :n]
    bits = _limits(q, qd_in, prev, J, dt, np.empty((0, 0)), np.empty(0), np.empty((0, 0)), B, W, B[0, B_RECOVERY],
                   B[0, B_MARGIN], B[0, B_LINEAR], B[0, B_ANGULAR], B[0, B_RESERVE], out)
    flags = int(B[0, B_FLAGS])
    if _jerk(out, prev, dt, k, h, B[1 + int(B[0, B_JERK]), :n], B[1 + int(B[0, B_JERK_ACC]), :n], S,
             B[0, B_HISTORY] != 0.0, W, (flags & FLAG_JERK_BOX) != 0):
        bits |= HIT_JERK
    B[0, B_HISTORY] = 1.0
    total = 0.0
    for j in range(out.shape[0]):
        total += out[j]
    if math.isfinite(total):
        bits |= FINITE
    else:
        bits &= ~FINITE
    return bits


@numba.njit(types.none(_VEC, _MAT), cache=True, boundscheck=True)
def box(qd, W):
    """The hard box of W on ``qd`` in place (the last step of :func:`fdcontrol.limits.base.run`)."""
    for j in range(qd.shape[0]):
        x = qd[j]
        if x > W[HARD_HI, j]:
            qd[j] = W[HARD_HI, j]
        elif x < W[HARD_LO, j]:
            qd[j] = W[HARD_LO, j]


_CLAMP = _VEC(_VEC, _VEC, _VEC, types.float64)


@numba.njit(_CLAMP, cache=True, boundscheck=True, error_model="numpy")  # IEEE division: a zero step gives inf/NaN
def brake_clamp(qd, prev, a, dt):
    """:meth:`fdcontrol.limits.braking.BrakingProfile.clamp` with the deceleration ``a``: the same float operations
    as its numpy form, to the last bit (signed zeros, NaN and ±inf alike) — r = max_j |q̇_prev,j| / (a_j dt) (NaN
    if any is), the bound |q̇_prev (1 − 1/r)| (zero unless r > 1), the reference with NaN → 0 and ±inf → ±max
    float clipped to ± the bound as ``np.clip`` clips (max first, then min). A new array; ValueError when the three
    vectors' lengths differ (the numpy form then broadcasts or raises)."""
    n = qd.shape[0]
    if prev.shape[0] != n or a.shape[0] != n:
        raise ValueError("clamp: vectors of different lengths")
    out = np.empty(n)
    r = 0.0
    if n:
        r = abs(prev[0]) / (a[0] * dt)
        for j in range(1, n):
            x = abs(prev[j]) / (a[j] * dt)
            if math.isnan(x) or x > r:  # np.max: a NaN propagates (nothing is > NaN)
                r = x
    big = np.finfo(np.float64).max
    c = 1.0 - 1.0 / r
    for j in range(n):
        b = abs(prev[j] * c) if r > 1.0 else 0.0
        x = qd[j]
        if math.isnan(x):
            x = 0.0
        elif x == np.inf:
            x = big
        elif x == -np.inf:
            x = -big
        lo = -b
        x = x if x > lo else lo
        out[j] = x if x < b else b
    return out
