"""Is J well conditioned? σ_min(J) > s decided without a singular value decomposition.

The singular values of a 6×N Jacobian J are the square roots of the eigenvalues of its smaller Gram
matrix G (J Jᵀ for N ≥ 6, JᵀJ otherwise), so σ_min(J) > s exactly when G − s²I is positive definite,
i.e. when its Cholesky factorization succeeds (Golub & Van Loan, "Matrix Computations", 4th ed.,
section 4.2: a symmetric matrix is positive definite iff it has a Cholesky factorization). For a 6×6
G that is ~80 multiply-adds against the ~10 µs of an SVD call: the γ schedule's test for a regular
pose (fdcontrol.mappings.fd) runs it every cycle. Decided in floating point, the answer can differ
from the exact one only where σ_min is within rounding (~1e-16·‖J‖²/s) of s.
"""

from __future__ import annotations

import math

import numpy as np

try:
    import numba
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    numba = None


def _shifted_cholesky(J: np.ndarray, s2: float) -> bool:
    """G − s2·I positive definite (G the smaller Gram matrix of J), by an attempted Cholesky factorization."""
    m, n = J.shape
    k = m if n >= m else n
    L = np.zeros((k, k))
    for j in range(k):
        for i in range(j, k):
            g = 0.0  # G[i, j]
            if n >= m:
                for c in range(n):
                    g += J[i, c] * J[j, c]
            else:
                for c in range(m):
                    g += J[c, i] * J[c, j]
            if i == j:
                g -= s2
            for c in range(j):
                g -= L[i, c] * L[j, c]
            if i == j:
                if not g > 0.0:
                    return False
                L[j, j] = math.sqrt(g)
            else:
                L[i, j] = g / L[j, j]
    return True


def _cholesky_shifted(M: np.ndarray, k: int, shift: float, L: np.ndarray) -> bool:  # pragma: no mutate block
    """The Cholesky factor of M[:k, :k] − shift·I into L's lower triangle; False where it is not positive
    definite (a pivot ≤ 0 or NaN)."""
    for j in range(k):
        for i in range(j, k):
            g = M[i, j]
            if i == j:
                g -= shift
            for c in range(j):
                g -= L[i, c] * L[j, c]
            if i == j:
                if not g > 0.0:
                    return False
                L[j, j] = math.sqrt(g)
            else:
                L[i, j] = g / L[j, j]
    return True


#: the certificate's room for rounding: relative to ‖JᵀJ‖_F for what is computed from it (G, the Householder
#: compression, the residual), and for the SVD's own errors in σ (× ‖J‖_F) and in v (× ‖J‖_F / gap) — the schedule's
#: Jacobi rotations (fdcontrol.model.linalg.svd_jacobi) or LAPACK's, both backward stable — orders of magnitude above
#: double precision's 1.1e-16 times the few dozen operations behind each value
_ROOM = 1e-10
_LAPACK_ROOM = 1e-11
GF_MIN = 1e-280  # past_band_end: the smallest ‖JᵀJ‖_F² it decides (its residual underflows below)


def _past_band_end(J: np.ndarray, A: np.ndarray, gamma: float, margin: float) -> bool:  # pragma: no mutate block
    """True only when it is certain that J's SVD puts the γ schedule past its band: σ_N ≥ 2√(h_min/γ)/ρ, with
    σ_N the smallest of the N singular values of J (6×N, N ≤ 6) and h_min the smallest h_k = ‖A v_k‖² over J's
    right singular vectors — as ``ForwardDynamics.gamma_at`` evaluates it from J's SVD (Jacobi rotations, or LAPACK's
    without numba), whose rounding is allowed for. False: not certain (the caller takes the SVD).

    h_min ≤ h_N, so the band ends at or before 2√(h_N/γ)/ρ, and only v_N is needed: x ≈ v_N by inverse
    iteration on G = JᵀJ; the rest of G's spectrum is ≥ t, certified by a Cholesky factorization of G compressed
    to x⊥ (a Householder reflector; Courant–Fischer: λ_(N−1)(G) ≥ λ_min of any compression to N−1 dimensions)
    minus t·I; then sin θ(x, v_N) ≤ ‖Gx − λ̃x‖ / (t − λ̃) (Davis–Kahan, λ̃ = xᵀGx), so ‖A v_N‖ ≤ ‖Ax‖ +
    ‖A‖_F √2 (sin θ + the SVD's angle error); σ_N above that bound on the band's end (plus the SVD's error in σ)
    by a Cholesky factorization of G − c·I (G − c·I positive definite ⇔ σ_N² > c; Golub & Van Loan 4.2)."""
    m, n = J.shape
    if n > m or n < 2:
        return False
    G = np.empty((n, n))
    trace, gf = 0.0, 0.0
    for i in range(n):
        for j in range(i, n):
            g = 0.0
            for c in range(m):
                g += J[c, i] * J[c, j]
            G[i, j] = g
            G[j, i] = g
            gf += g * g if i == j else 2.0 * g * g
        trace += G[i, i]
    # ‖G‖_F² within [1e-280, ∞): below it the residual's squares underflow (counted as 0, the residual would be
    # taken as the rounding room alone and sin θ far too small: seen at ‖J‖ ≈ 1e-77) — then the SVD decides
    if not (math.isfinite(gf) and gf > GF_MIN):
        return False
    tol = _ROOM * math.sqrt(gf)
    jf = math.sqrt(trace)  # ‖J‖_F ≥ ‖J‖₂
    L = np.zeros((n, n))
    if not _cholesky_shifted(G, n, 0.0, L):
        return False  # singular in floating point: in the band
    # inverse iteration: x ← G⁻¹x / ‖G⁻¹x‖ (the ratio λ_N/λ_(N−1) per step)
    x = np.full(n, 1.0 / math.sqrt(n))
    y = np.empty(n)
    for _ in range(8):
        for i in range(n):  # L y = x
            v = x[i]
            for c in range(i):
                v -= L[i, c] * y[c]
            y[i] = v / L[i, i]
        for i in range(n - 1, -1, -1):  # Lᵀ x = y
            v = y[i]
            for c in range(i + 1, n):
                v -= L[c, i] * x[c]
            x[i] = v / L[i, i]
        nx = 0.0
        for i in range(n):
            nx += x[i] * x[i]
        nx = math.sqrt(nx)
        if not (nx > 0.0 and math.isfinite(nx)):
            return False
        for i in range(n):
            x[i] /= nx
    lam, rr = 0.0, 0.0  # λ̃ = xᵀGx, ‖Gx − λ̃x‖²
    gx = np.empty(n)
    for i in range(n):
        v = 0.0
        for c in range(n):
            v += G[i, c] * x[c]
        gx[i] = v
        lam += x[i] * v
    for i in range(n):
        d = gx[i] - lam * x[i]
        rr += d * d
    res = math.sqrt(rr) + tol
    lam_hi = lam + tol  # ≥ the Rayleigh quotient of the exact unit x
    # ‖Ax‖ and ‖A‖_F
    ax, af = 0.0, 0.0
    for i in range(A.shape[0]):
        v = 0.0
        for c in range(n):
            a = A[i, c]
            v += a * x[c]
            af += a * a
        ax += v * v
    ax, af = math.sqrt(ax), math.sqrt(af)
    # quick refusal: σ_N² ≤ λ̃ and h_N ≈ ‖Ax‖², so a pose well inside the band is not certified at any gap
    if lam_hi < 4.0 * ax * ax / (gamma * margin * margin) * (1.0 - 1e-6):
        return False
    # x⊥: the Householder reflector P = I − 2wwᵀ/wᵀw with P x = a e_N; M = (P G P) without its last row and column
    a = -1.0 if x[n - 1] >= 0.0 else 1.0
    w = x.copy()
    w[n - 1] -= a
    ww = 0.0
    for i in range(n):
        ww += w[i] * w[i]
    if not ww > 0.0:
        return False
    gw = np.empty(n)  # G w
    for i in range(n):
        v = 0.0
        for c in range(n):
            v += G[i, c] * w[c]
        gw[i] = v
    wgw = 0.0
    for i in range(n):
        wgw += w[i] * gw[i]
    f = 2.0 / ww
    M = np.empty((n, n))  # P G P = G − f(w gwᵀ + gw wᵀ) + f² (wᵀGw) w wᵀ
    for i in range(n):
        for j in range(n):
            M[i, j] = G[i, j] - f * (w[i] * gw[j] + gw[i] * w[j]) + f * f * wgw * w[i] * w[j]
    dmin = M[0, 0]
    for i in range(1, n - 1):
        if M[i, i] < dmin:
            dmin = M[i, i]
    # the largest t of a few between λ̃ and min diag(M) ≥ λ_min(M) at which M − t·I is positive definite
    t = -1.0
    step = 0.5 * (dmin - lam_hi)
    for _ in range(8):
        if not step > 0.0:
            return False
        c = lam_hi + step
        if _cholesky_shifted(M, n - 1, c + tol, L):
            t = c
            break
        step *= 0.25
    if not t > lam_hi:
        return False
    sin_x = res / (t - lam_hi)  # Davis–Kahan: sin θ(x, v_N)
    sin_l = _LAPACK_ROOM * jf / (math.sqrt(t) - math.sqrt(lam_hi))  # the SVD's v̂_N against v_N
    b = sin_x + sin_l
    if not b < 0.5:
        return False
    h_up = (ax + af * (math.sqrt(2.0) * b + _ROOM)) ** 2 * (1.0 + 1e-9)
    end = 2.0 * math.sqrt(h_up / gamma) / margin * (1.0 + 1e-9) + _LAPACK_ROOM * jf
    return _cholesky_shifted(G, n, end * end + tol, L)


if numba is not None:
    _shifted_cholesky = numba.njit(cache=True)(_shifted_cholesky)
    _cholesky_shifted = numba.njit(cache=True, boundscheck=True)(_cholesky_shifted)
    past_band_end = numba.njit(numba.boolean(numba.types.Array(numba.float64, 2, "A"),
                                             numba.types.Array(numba.float64, 2, "C"), numba.float64, numba.float64),
                               cache=True, boundscheck=True)(_past_band_end)
else:  # pragma: no cover - the fast extra is installed with the tests
    past_band_end = None


def sigma_min_above(J: np.ndarray, s: float) -> bool:
    """σ_min(J) > s (J a 6×N Jacobian; its min(6, N) singular values), without an SVD."""
    if numba is not None:
        return bool(_shifted_cholesky(J, s * s))
    m, n = J.shape
    G = J @ J.T if n >= m else J.T @ J
    try:
        np.linalg.cholesky(G - s * s * np.eye(len(G)))
    except np.linalg.LinAlgError:
        return False
    return True
