"""The few LAPACK calls of the control cycle without the per-call cost of their wrappers.

``np.linalg.eigh``/``svd`` and ``scipy.linalg.cho_factor``/``cho_solve`` spend most of their time on a
small matrix (N ≤ 7) in Python: argument conversion, type dispatch, batching and an error-state
context. The functions here call the *same* routines (numpy's ``_umath_linalg`` gufuncs, scipy's
``dpotrf``/``dpotrs``) on the same arrays, so they return the same bits; each keeps the wrapper's
behaviour on bad input by handing anything but a finite float64 2-D array (and a failed factorization)
to the wrapper itself, which then raises as it always did.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.linalg
from numpy.linalg import _umath_linalg  # type: ignore[attr-defined]
from scipy.linalg.lapack import dpotrf, dpotrs

_F64 = np.dtype(np.float64)
#: fdcontrol.model.jacobi.pinv_apply_lq answers only where ‖J‖_F ‖J⁺‖_F ≤ this (so κ(J) ≤ it): a factor 2 below the
#: 1e6 at which the pseudo-inverse ``np.linalg.pinv(J, rcond=1e-6)`` would drop a singular value
LQ_KAPPA = 5e5


def _plain(a: np.ndarray) -> bool:
    """`a` a finite float64 2-D ndarray (Σa² finite ⇒ every entry finite; one that overflows goes to the
    wrapper, whose result is the same; ``x.dot(x)`` is half the cost of ``a.sum()``)."""
    if type(a) is np.ndarray and a.dtype == _F64 and a.ndim == 2:
        x = a.ravel()
        return math.isfinite(x.dot(x))
    return False


def eigh(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.linalg.eigh(a)`` (lower triangle) of a real symmetric matrix: (w ascending, V)."""
    if _plain(a) and a.shape[0] == a.shape[1]:
        w, v = _umath_linalg.eigh_lo(a, signature="d->dd")
        if math.isfinite(w.sum()):  # a failed LAPACK call fills NaN (numpy's wrapper then raises)
            return w, v
    w, v = np.linalg.eigh(a)
    return w, v


def eigvalsh(a: np.ndarray) -> np.ndarray:
    """``np.linalg.eigvalsh(a)`` (lower triangle) of a real symmetric matrix: w ascending."""
    if _EIGVALSH is not None and _plain(a) and a.shape[0] == a.shape[1]:
        w = _EIGVALSH(a, signature="d->d")
        if math.isfinite(w.dot(w)):  # a failed LAPACK call fills NaN (the wrapper then raises)
            return w
    w = np.linalg.eigvalsh(a)
    return w


def svdvals(a: np.ndarray) -> np.ndarray:
    """``np.linalg.svd(a, compute_uv=False)``: the singular values, descending."""
    if _SVDVALS is not None and _plain(a):
        s = _SVDVALS(a, signature="d->d")
        if math.isfinite(s.dot(s)):
            return s
    s = np.linalg.svd(a, compute_uv=False)
    return s


# the gufuncs the wrappers call, where this numpy has them (numpy ≥ 2 names its values-only SVD ``svd``
# beside ``svd_s``/``svd_f``; without them the wrappers above are called instead)
_EIGVALSH: Any = getattr(_umath_linalg, "eigvalsh_lo", None)
_SVD_S: Any = getattr(_umath_linalg, "svd_s", None)
_SVDVALS: Any = getattr(_umath_linalg, "svd", None) if _SVD_S is not None else None


def svd(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.linalg.svd(a, full_matrices=False)``: (U, s descending, Vᵀ)."""
    if _SVD_S is not None and _plain(a):
        u, s, vt = _SVD_S(a, signature="d->ddd")
        # a failed LAPACK call fills every output with NaN (the wrapper then raises): the first value tells, at a
        # fifth of s.sum()'s cost (a finite input that succeeds has finite values; none for an empty one)
        if s.shape[0] == 0 or math.isfinite(s[0]):
            return u, s, vt
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    return u, s, vt


def svd_jacobi(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The thin SVD of `a`, (U, σ descending, Vᵀ) as :func:`svd` returns it, by one-sided Jacobi rotations of the
    shorter side's vectors (fdcontrol.model.jacobi.svd_rows, compiled): ~3 µs for a 6×7 J where LAPACK's took ~7 µs
    alone and ~15 µs inside a control cycle. It agrees with LAPACK's to rounding, not to the last bit (another
    algorithm; its small singular values carry a smaller error: Demmel & Veselić, "Jacobi's method is more accurate
    than QR", section 4), and the signs of a singular pair may differ (U and V together). LAPACK's :func:`svd`
    answers where numba is missing and for what the rotations do not take: not a finite, writable float64 matrix
    within [1e-150, 1e150] in magnitude, a singular value below 1e-150 (zero), no convergence (tests/test_jacobi.py)."""
    kernel = svd_kernel()
    if kernel is not None and type(a) is np.ndarray and a.dtype == _F64 and a.ndim == 2 and a.flags.writeable:
        m, n = a.shape
        if m <= n:  # the kernel's computation into arrays made here (no tuple of new arrays to box: ~0.5 µs less)
            u, s, vt = np.empty((m, m)), np.empty(m), np.empty((m, n))
            if _SVD_KERNEL[1](a, u, s, vt):
                return u, s, vt
        else:  # rotate the columns: aᵀ = U' Σ V'ᵀ, so a = V' Σ U'ᵀ
            ok, u, s, vt = kernel(a.T)
            if ok:
                return np.ascontiguousarray(vt.T), s, np.ascontiguousarray(u.T)
    return svd(a)


#: fdcontrol.model.jacobi.svd_rows and svd_rows_into once imported (None: numba missing)
_SVD_KERNEL: list[Any] = []


def svd_kernel() -> Any:
    """The compiled kernel, imported (and so compiled or loaded from numba's cache) on first use — at the latest
    when a :class:`~fdcontrol.model.configuration.Configuration` is built, so never first inside a loop's cycle;
    None where numba is missing."""
    if not _SVD_KERNEL:
        try:
            from fdcontrol.model.jacobi import svd_rows, svd_rows_into
        except ImportError:
            svd_rows = svd_rows_into = None
        _SVD_KERNEL.extend((svd_rows, svd_rows_into))
    return _SVD_KERNEL[0]


def cho_solve_upper(H: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``scipy.linalg.cho_solve(scipy.linalg.cho_factor(H), B)``: H⁻¹B by the upper Cholesky factor of H."""
    if _plain(H) and H.shape[0] == H.shape[1] and H.size and type(B) is np.ndarray and B.dtype == _F64 \
            and B.ndim in (1, 2) and B.shape[0] == H.shape[0] and B.size and math.isfinite(B.sum()):
        c, info = dpotrf(H, lower=False, overwrite_a=False, clean=False)
        if info == 0:
            x, info = dpotrs(c, B, lower=False, overwrite_b=False)
            if info == 0:
                return x
    return scipy.linalg.cho_solve(scipy.linalg.cho_factor(H), B)


def symmetric_upper(M: np.ndarray) -> np.ndarray:
    """``np.triu(M) + np.triu(M, 1).T``: the symmetric matrix of M's upper triangle (pinocchio's CRBA fills only
    that one), as a new array with the same bits — the sum's +0.0 turns a −0.0 into +0.0, so does ``+= 0.0``.
    One compiled call for a square float64 matrix where numba is installed."""
    if _symmetric is not None and type(M) is np.ndarray and M.dtype == _F64 and M.ndim == 2 \
            and M.shape[0] == M.shape[1]:
        H = np.empty(M.shape)
        _symmetric(M, H)
        return H
    n = M.shape[0]
    low = _LOWER.get(n)
    if low is None:
        low = _LOWER[n] = np.tril_indices(n, -1)
    H = M.copy()
    H[low] = H.T[low]
    H += 0.0
    return H


_LOWER: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # the strict lower triangle's indices per size


def _symmetric_kernel(M: np.ndarray, H: np.ndarray) -> None:  # pragma: no mutate block
    """symmetric_upper into H: the upper triangle of M + 0.0, mirrored."""
    n = M.shape[0]
    for i in range(n):
        for j in range(i, n):
            x = M[i, j] + 0.0
            H[i, j] = x
            H[j, i] = x


def mirror_upper(M: np.ndarray, low: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """A copy of the square matrix M with its strict lower triangle (indices ``low``) taken from the upper one:
    ``H = M.copy(); H[low] = H.T[low]`` (a C-ordered copy, every value as it is — no +0.0 on a −0.0), one compiled
    call for a square float64 matrix where numba is installed."""
    if _mirror is not None and type(M) is np.ndarray and M.dtype == _F64 and M.ndim == 2 \
            and M.shape[0] == M.shape[1]:
        H = np.empty(M.shape)
        _mirror(M, H)
        return H
    H = M.copy()
    H[low] = H.T[low]
    return H


def _mirror_kernel(M: np.ndarray, H: np.ndarray) -> None:  # pragma: no mutate block
    """mirror_upper into H: the upper triangle of M (with its diagonal) as it is, mirrored."""
    n = M.shape[0]
    for i in range(n):
        for j in range(i, n):
            x = M[i, j]
            H[i, j] = x
            H[j, i] = x


def _cholesky_block_kernel(H: np.ndarray, idx: np.ndarray, m: int, L: np.ndarray) -> bool:  # pragma: no mutate block
    """The Cholesky factor of H's block on the rows and columns ``idx[:m]`` (increasing) into the lower triangle
    of L (m×m, zeros above), reading H's upper triangle as LAPACK's upper factorization does; False when the
    block is not positive definite or a value is not finite. Called from the compiled kernels (the locked
    dynamics, the posture projector)."""
    for j in range(m):
        fj = idx[j]
        s = H[fj, fj]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not s > 0.0 or not math.isfinite(s):
            return False
        d = math.sqrt(s)
        L[j, j] = d
        for i in range(j + 1, m):
            s = H[fj, idx[i]]  # the upper triangle
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / d
    return True


def _matmul_into_kernel(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> None:  # pragma: no mutate block
    """C = A B, each entry summed over k in order. Called from the compiled kernels (the posture projector)."""
    for i in range(A.shape[0]):
        for j in range(B.shape[1]):
            s = 0.0
            for k in range(A.shape[1]):
                s += A[i, k] * B[k, j]
            C[i, j] = s


def _clip_into_kernel(q: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                      out: np.ndarray) -> None:  # pragma: no mutate block
    """np.clip(q, lower, upper) into ``out`` for lower ≤ upper: a value equal to a bound kept as it is (its zero's
    sign), a NaN kept. Called from the compiled kernels (the joint limits' projection, the FD step at a limit)."""
    for j in range(q.shape[0]):
        x = q[j]
        if x < lower[j]:
            x = lower[j]
        if x > upper[j]:
            x = upper[j]
        out[j] = x


try:  # compiled at import (cached on disk), never in the loop thread; without numba numpy's indexing
    import numba
    from numba import types as _t

    _symmetric: Any = numba.njit(_t.none(_t.Array(_t.float64, 2, "A"), _t.Array(_t.float64, 2, "C")), cache=True,
                                 boundscheck=True)(_symmetric_kernel)
    _mirror: Any = numba.njit(_t.none(_t.Array(_t.float64, 2, "A"), _t.Array(_t.float64, 2, "C")), cache=True,
                              boundscheck=True)(_mirror_kernel)
    cholesky_block: Any = numba.njit(cache=True, boundscheck=True)(_cholesky_block_kernel)
    clip_into: Any = numba.njit(cache=True, boundscheck=True)(_clip_into_kernel)
    matmul_into: Any = numba.njit(cache=True, boundscheck=True)(_matmul_into_kernel)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    _symmetric = _mirror = None
    cholesky_block, clip_into, matmul_into = _cholesky_block_kernel, _clip_into_kernel, _matmul_into_kernel


def compiled_entry(kernel: Any) -> Any:
    """The compiled function of `kernel`'s one signature, called without numba's dispatch — its typing of every
    argument and choice of an overload, ~0.05–0.1 µs an argument: two thirds of a call of _fd_in's 13 arguments
    (1.9 → 1.2 µs) — the same machine code, so the same results; the kernel itself where numba is missing or the
    entry is not there. Only for calls whose arguments' types are certain: the entry converts what it is given as
    the signature says, and numba checks an array's item size there, not its dtype or dimensions."""
    if kernel is None:
        return None
    try:
        (sig,) = kernel.signatures
        entry = kernel.overloads[sig].entry_point
    except (AttributeError, KeyError, TypeError, ValueError):  # pragma: no cover - another numba
        return kernel
    return entry if callable(entry) else kernel
