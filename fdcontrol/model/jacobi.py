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
