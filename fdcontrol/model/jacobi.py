"""σmin(J) and κ(H) for the loop state's telemetry by Jacobi rotations, compiled: a few µs where LAPACK's
general routines cost ~15 µs inside a control cycle (their large code is cold there; measured on the FR3's
robot-paced cycle).

* :func:`sigma_min`: the smallest singular value of a matrix A (m×n) by one-sided Jacobi (Hestenes): the
  k = min(m, n) rows (or columns) of A are rotated pairwise until every pair is orthogonal to working precision;
  their norms are then A's singular values (Demmel & Veselić, "Jacobi's method is more accurate than QR",
  SIAM J. Matrix Anal. Appl. 13(4), 1992, section 4).
* :func:`svd_rows` (:func:`svd_rows_into`: into the caller's arrays): the thin SVD of a matrix A (m×n, m ≤ n) by the
  same one-sided rotations of its rows, the rotations accumulated: A = U diag(σ) Vᵀ with σ descending — the γ
  schedule's and the path speed limit's SVD of J (fdcontrol.model.linalg.svd_jacobi; in the cycle ~3 µs where
  LAPACK's took ~7 µs alone and ~15 µs inside it).
* :func:`pinv_apply_lq`: J⁺y by J's LQ factorization (Householder reflections) where it certifies that κ(J) is
  small enough for the pseudo-inverse to drop no singular value — the path speed limit's J⁺ near a singularity
  without an SVD (~1 µs where the SVD took ~4.4 µs).
* :func:`condition_spd`: κ = λmax/λmin of a symmetric matrix H by the cyclic two-sided Jacobi method (each
  rotation zeroes one off-diagonal pair; the diagonal converges to the eigenvalues; same paper, section 5);
  ∞ when λmin ≤ 0.

Both agree with LAPACK's SVD and symmetric eigenvalues to rounding — not to the last bit: they are other
algorithms (tests/test_jacobi.py compares them with numpy on random, ill-conditioned and closed-form cases).
Each returns NaN for a matrix with a value that is not finite or of a magnitude outside
[``SCALE_MIN``, ``SCALE_MAX``] (its products would overflow or underflow), or when the sweeps (at most
``MAX_SWEEPS``) did not converge: the caller then asks LAPACK (fdcontrol.model.configuration), which raises
or answers as before.
The functions are compiled by numba once per process when this module is first imported (cached on disk),
never in the loop thread. ``work`` is the caller's scratch: min(m, n) × max(m, n) for :func:`sigma_min`,
n × n for :func:`condition_spd`.
"""

from __future__ import annotations

import math

import numpy as np

from fdcontrol.extras import missing
from fdcontrol.model.linalg import LQ_KAPPA

try:
    import numba
    from numba import types
except ImportError as exc:  # the telemetry then asks LAPACK (Configuration.sigma_min, kappa_h)
    raise missing("fast", "the compiled telemetry", exc) from exc

MAX_SWEEPS = 60  # a 7×7 converges in 5–10 sweeps
# a pair counts as orthogonal (a coupling as zero) below EPS relative to its scale: a few units of rounding, so
# that rounding noise in a nearly converged pair cannot keep the sweeps going (at 2⁻⁵² some held-push Jacobians ran
# all 60 sweeps, and JᵀJ + μI of a rank-deficient J often did)
EPS = 8.0 * 2.0 ** -52
# entries of magnitude outside [SCALE_MIN, SCALE_MAX] (zero excepted) give NaN, and LAPACK answers: the sums of
# squares the rotations form would overflow or underflow there
SCALE_MIN, SCALE_MAX = 1e-150, 1e150

_MAT = types.Array(types.float64, 2, "A")
_SIG = types.float64(_MAT, _MAT)
_OUT2 = types.Array(types.float64, 2, "C")
_SVD_SIG = types.Tuple((types.boolean, _OUT2, types.Array(types.float64, 1, "C"), _OUT2))(_MAT)
_INTO_SIG = types.boolean(_MAT, _OUT2, types.Array(types.float64, 1, "C"), _OUT2)


@numba.njit(cache=True, boundscheck=True)
def _rotate_rows(W: np.ndarray, k: int, ln: int, Q: np.ndarray, accumulate: bool) -> bool:  # pragma: no cover
    """One-sided Jacobi sweeps over the first ``k`` rows of ``W`` (``ln`` entries each): every pair rotated until
    it is orthogonal to working precision; with ``accumulate`` each rotation applied to ``Q``'s first k rows (k
    entries) too. True: converged within ``MAX_SWEEPS``."""
    for _ in range(MAX_SWEEPS):
        rotated = False
        for p in range(k - 1):
            for q in range(p + 1, k):
                a = 0.0
                b = 0.0
                c = 0.0
                for j in range(ln):
                    x = W[p, j]
                    y = W[q, j]
                    a += x * x
                    b += y * y
                    c += x * y
                if abs(c) <= EPS * math.sqrt(a) * math.sqrt(b):  # (a·b would overflow first)
                    continue
                rotated = True
                zeta = (b - a) / (2.0 * c)
                t = (1.0 if zeta >= 0.0 else -1.0) / (abs(zeta) + math.sqrt(1.0 + zeta * zeta))
                cs = 1.0 / math.sqrt(1.0 + t * t)
                sn = cs * t
                for j in range(ln):
                    x = W[p, j]
                    y = W[q, j]
                    W[p, j] = cs * x - sn * y
                    W[q, j] = sn * x + cs * y
                if accumulate:
                    for j in range(k):
                        x = Q[p, j]
                        y = Q[q, j]
                        Q[p, j] = cs * x - sn * y
                        Q[q, j] = sn * x + cs * y
        if not rotated:
            return True
    return False


@numba.njit(_SIG, cache=True, boundscheck=True)
def sigma_min(A: np.ndarray, work: np.ndarray) -> float:  # pragma: no cover - compiled
    """The smallest singular value of ``A`` (NaN: not finite, or not converged)."""
    m, n = A.shape
    rows = m <= n  # rotate the shorter side's vectors
    k, ln = (m, n) if rows else (n, m)
    for i in range(k):
        for j in range(ln):
            x = A[i, j] if rows else A[j, i]
            if not math.isfinite(x) or abs(x) > SCALE_MAX or (x != 0.0 and abs(x) < SCALE_MIN):
                return math.nan
            work[i, j] = x
    if not _rotate_rows(work, k, ln, work, False):
        return math.nan
    smallest = math.inf
    for i in range(k):
        a = 0.0
        for j in range(ln):
            a += work[i, j] * work[i, j]
        smallest = min(smallest, math.sqrt(a))
    return smallest


@numba.njit(_INTO_SIG, cache=True, boundscheck=True)
def svd_rows_into(A: np.ndarray, U: np.ndarray, s: np.ndarray, Vt: np.ndarray) -> bool:  # pragma: no cover - compiled
    """:func:`svd_rows` into the caller's U (m×m), σ (m) and Vᵀ (m×n): its ``ok`` (the outputs' contents are
    undefined where it is False)."""
    m, n = A.shape
    if m > n or m == 0:
        return False
    W = np.empty((m, n))
    Q = np.empty((m, m))
    for i in range(m):
        for j in range(n):
            x = A[i, j]
            if not math.isfinite(x) or abs(x) > SCALE_MAX or (x != 0.0 and abs(x) < SCALE_MIN):
                return False
            W[i, j] = x
        for j in range(m):
            Q[i, j] = 1.0 if i == j else 0.0
    if not _rotate_rows(W, m, n, Q, True):
        return False
    norm = np.empty(m)
    for i in range(m):
        a = 0.0
        for j in range(n):
            a += W[i, j] * W[i, j]
        norm[i] = math.sqrt(a)
        if not norm[i] > SCALE_MIN:  # (σ² subnormal below ~1e-154: its row's rotations lost their precision)
            return False
    done = np.zeros(m, dtype=np.bool_)
    for r in range(m):  # selection by descending norm (ties: the first row)
        i = -1
        for k in range(m):
            if not done[k] and (i < 0 or norm[k] > norm[i]):
                i = k
        done[i] = True
        sv = norm[i]
        s[r] = sv
        for j in range(n):
            Vt[r, j] = W[i, j] / sv
        for j in range(m):
            U[j, r] = Q[i, j]  # A = Qᵀ W: U's column r is Q's row i
    return True


@numba.njit(_SVD_SIG, cache=True, boundscheck=True)
def svd_rows(A: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """(ok, U, σ, Vᵀ): the thin SVD of ``A`` (m×n, m ≤ n; U m×m, σ descending, Vᵀ m×n). Its m rows are rotated
    pairwise until orthogonal (as :func:`sigma_min`), the rotations accumulated in Q (Q A = W): σ_i = ‖W_i‖,
    Vᵀ's rows W_i/σ_i and U's columns Q's rows, in descending σ (ties in row order). ``ok`` False — a value not
    finite or out of scale, no convergence, m > n, or a σ not above ``SCALE_MIN`` (zero: its singular vector is not
    W_i/σ_i; below ~1e-154 σ² is subnormal and the rotations lost their precision) — and the caller asks LAPACK.
    (:func:`svd_rows_into` computes it, into arrays made here.)"""
    m, n = A.shape
    U = np.empty((m, m))
    s = np.empty(m)
    Vt = np.empty((m, n))
    return svd_rows_into(A, U, s, Vt), U, s, Vt


@numba.njit(_SIG, cache=True, boundscheck=True)
def condition_spd(H: np.ndarray, work: np.ndarray) -> float:  # pragma: no cover - compiled
    """λmax/λmin of the symmetric ``H`` (∞ when λmin ≤ 0; NaN: not finite, or not converged)."""
    n = H.shape[0]
    big = 0.0
    for i in range(n):
        for j in range(n):
            x = H[i, j]
            if not math.isfinite(x) or abs(x) > SCALE_MAX or (x != 0.0 and abs(x) < SCALE_MIN):
                return math.nan
            work[i, j] = x
            big = max(big, abs(x))
    # a coupling at rounding level of H's largest entry counts as zero too: below it the rotations cannot reduce it
    # (a cluster of small eigenvalues beside large ones kept rotating for all the sweeps), and LAPACK's eigenvalues
    # carry the same absolute error (about ε‖H‖)
    floor = EPS * big
    converged = False
    for _ in range(MAX_SWEEPS):
        rotated = False
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = work[p, q]
                app = work[p, p]
                aqq = work[q, q]
                if abs(apq) <= max(EPS * math.sqrt(abs(app)) * math.sqrt(abs(aqq)), floor):
                    continue
                rotated = True
                theta = (aqq - app) / (2.0 * apq)
                t = (1.0 if theta >= 0.0 else -1.0) / (abs(theta) + math.sqrt(1.0 + theta * theta))
                c = 1.0 / math.sqrt(1.0 + t * t)
                s = t * c
                for i in range(n):
                    x = work[i, p]
                    y = work[i, q]
                    work[i, p] = c * x - s * y
                    work[i, q] = s * x + c * y
                for j in range(n):
                    x = work[p, j]
                    y = work[q, j]
                    work[p, j] = c * x - s * y
                    work[q, j] = s * x + c * y
        if not rotated:
            converged = True
            break
    if not converged:
        return math.nan
    lo = math.inf
    hi = -math.inf
    for i in range(n):
        lo = min(lo, work[i, i])
        hi = max(hi, work[i, i])
    return hi / lo if lo > 0.0 else math.inf


_LQ_SIG = types.boolean(_MAT, types.Array(types.float64, 1, "A"), types.Array(types.float64, 1, "A"))


@numba.njit(_LQ_SIG, cache=True, boundscheck=True)
def pinv_apply_lq(J: np.ndarray, y: np.ndarray, x: np.ndarray) -> bool:  # pragma: no cover - compiled
    """x = J⁺ y (J m×n, y m entries, x n entries) by Householder reflections, without an SVD: B = J (n ≥ m) or Jᵀ
    (n < m), k × p, is reduced to B = L Q (L k×k lower triangular, Q's k rows orthonormal: LQ, the transpose of a QR
    factorization; Golub & Van Loan, "Matrix Computations", 4th ed., 5.2) — then J⁺ y = Qᵀ L⁻¹ y (n ≥ m) or L⁻ᵀ Q y
    (n < m), backward stable: within ~κ(J) ε of the exact J⁺ y, as the SVD's pseudo-inverse is. True only where
    ‖L‖_F ‖L⁻¹‖_F ≤ :data:`fdcontrol.model.linalg.LQ_KAPPA` — an upper bound of κ(J) = κ(L), so that
    ``np.linalg.pinv(J, rcond=1e-6)`` drops no singular value and both are J⁺ y to rounding — and every value is
    finite; False: x undefined (the caller takes the SVD)."""
    m, n = J.shape
    wide = n >= m
    k, p = (m, n) if wide else (n, m)
    if k == 0 or y.shape[0] != m or x.shape[0] != n:
        return False
    W = np.empty((k, p))  # B, reduced in place to [L 0]
    V = np.zeros((k, p))  # the reflectors' vectors v_i (entries i..p−1)
    vv = np.empty(k)
    for i in range(k):
        for j in range(p):
            W[i, j] = J[i, j] if wide else J[j, i]
    for i in range(k):
        a = 0.0
        for j in range(i, p):
            a += W[i, j] * W[i, j]
        a = math.sqrt(a)
        if not (a > 0.0 and a < math.inf):
            return False
        alpha = -a if W[i, i] >= 0.0 else a
        s = 0.0
        for j in range(i, p):
            V[i, j] = W[i, j]
        V[i, i] -= alpha
        for j in range(i, p):
            s += V[i, j] * V[i, j]
        if not s > 0.0:
            return False
        vv[i] = s
        W[i, i] = alpha
        for j in range(i + 1, p):
            W[i, j] = 0.0
        for r in range(i + 1, k):  # the rows below: W_r ← W_r (I − 2 v vᵀ / vᵀv)
            d = 0.0
            for j in range(i, p):
                d += W[r, j] * V[i, j]
            f = 2.0 * d / s
            for j in range(i, p):
                W[r, j] -= f * V[i, j]
    # ‖L‖_F ‖L⁻¹‖_F: the columns of L⁻¹ by forward substitution
    lf = 0.0
    for i in range(k):
        for j in range(i + 1):
            lf += W[i, j] * W[i, j]
    e = np.empty(k)
    li = 0.0
    for col in range(k):
        for i in range(col, k):
            t = 1.0 if i == col else 0.0
            for c in range(col, i):
                t -= W[i, c] * e[c]
            e[i] = t / W[i, i]
            li += e[i] * e[i]
    if not lf * li <= LQ_KAPPA * LQ_KAPPA:  # (NaN: refused)
        return False
    z = np.zeros(p)
    if wide:  # L w = y, then x = Qᵀ [w; 0] = H_0 ⋯ H_(k−1) [w; 0]
        for i in range(k):
            t = y[i]
            for c in range(i):
                t -= W[i, c] * z[c]
            z[i] = t / W[i, i]
        for i in range(k - 1, -1, -1):
            d = 0.0
            for j in range(i, p):
                d += V[i, j] * z[j]
            f = 2.0 * d / vv[i]
            for j in range(i, p):
                z[j] -= f * V[i, j]
        t = 0.0
        for j in range(n):
            x[j] = z[j]
            t += z[j]
    else:  # u = (H_(k−1) ⋯ H_0 y)[:k], then Lᵀ x = u
        for j in range(p):
            z[j] = y[j]
        for i in range(k):
            d = 0.0
            for j in range(i, p):
                d += V[i, j] * z[j]
            f = 2.0 * d / vv[i]
            for j in range(i, p):
                z[j] -= f * V[i, j]
        t = 0.0
        for i in range(k - 1, -1, -1):
            s = z[i]
            for c in range(i + 1, k):
                s -= W[c, i] * x[c]
            x[i] = s / W[i, i]
            t += x[i]
    return math.isfinite(t)
