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


if numba is not None:
    _shifted_cholesky = numba.njit(cache=True)(_shifted_cholesky)


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
