"""fdcontrol.model.linalg calls numpy's and scipy's own LAPACK routines without their wrappers: the same bits as
the wrappers on random matrices (also ill-conditioned and rank-deficient ones), and the wrappers' errors on bad
input (NaN, not positive definite)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from fdcontrol.model import linalg


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def matrices(rng: np.random.Generator, n: int = 300):
    for i in range(n):
        k = int(rng.integers(1, 8))
        A = rng.normal(size=(6, k)) * 10.0 ** rng.uniform(-6, 3, size=k)  # columns of very different scale
        if i % 5 == 0 and k > 1:
            A[:, -1] = A[:, 0]  # rank-deficient
        yield A


def test_svd_eigh_and_the_cholesky_solve_give_the_wrappers_bits():
    rng = np.random.default_rng(7)
    for A in matrices(rng):
        for x, y in zip(linalg.svd(A), np.linalg.svd(A, full_matrices=False), strict=True):
            assert same(x, y)
        G = A.T @ A
        S = 0.5 * (G + G.T)
        for x, y in zip(linalg.eigh(S), np.linalg.eigh(S), strict=True):
            assert same(x, y)
        assert same(linalg.svdvals(A), np.linalg.svd(A, compute_uv=False))
        assert same(linalg.svdvals(A.T), np.linalg.svd(A.T, compute_uv=False))  # wide, as the arm's 6×7 J
        assert same(linalg.eigvalsh(S), np.linalg.eigvalsh(S))
        H = G + np.eye(len(G)) * 1e-3
        B = rng.normal(size=(6, len(H))).T  # a transposed (Fortran-ordered) right-hand side, as the posture's Jᵀ
        got = linalg.cho_solve_upper(H, B)
        assert same(got, scipy.linalg.cho_solve(scipy.linalg.cho_factor(H), B))
        assert same(linalg.cho_solve_upper(H, B[:, 0]), scipy.linalg.cho_solve(scipy.linalg.cho_factor(H), B[:, 0]))


@pytest.mark.parametrize("bad", [np.full((3, 3), np.nan), np.diag([1.0, np.inf, 1.0]), np.diag([1.0, np.nan, 1.0])])
def test_non_finite_input_gives_what_the_wrappers_give(bad):
    """The wrapper's exception (type and message), or its result where it returns one."""
    for ours, theirs in ((lambda: linalg.svd(bad), lambda: np.linalg.svd(bad, full_matrices=False)),
                         (lambda: linalg.eigh(bad), lambda: np.linalg.eigh(bad)),
                         (lambda: (linalg.svdvals(bad),), lambda: (np.linalg.svd(bad, compute_uv=False),)),
                         (lambda: (linalg.eigvalsh(bad),), lambda: (np.linalg.eigvalsh(bad),)),
                         (lambda: linalg.cho_solve_upper(bad, np.ones(3)),
                          lambda: scipy.linalg.cho_solve(scipy.linalg.cho_factor(bad), np.ones(3)))):
        try:
            want = theirs()
        except Exception as exc:
            with pytest.raises(type(exc), match=str(exc)):
                ours()
        else:
            got = ours()
            for x, y in zip(got, want, strict=True):
                np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", ["_SVD_S", "_SVDVALS", "_EIGVALSH"])
def test_without_the_private_gufunc_the_public_call_answers(monkeypatch, name):
    """A numpy whose ``_umath_linalg`` lacks a gufunc (other names in other versions): the wrapper's result."""
    monkeypatch.setattr(linalg, name, None)
    A = np.random.default_rng(3).normal(size=(6, 7))
    S = A @ A.T
    for x, y in zip(linalg.svd(A), np.linalg.svd(A, full_matrices=False), strict=True):
        assert same(x, y)
    assert same(linalg.svdvals(A), np.linalg.svd(A, compute_uv=False))
    assert same(linalg.eigvalsh(S), np.linalg.eigvalsh(S))


def test_a_matrix_that_is_not_positive_definite_raises_as_cho_factor_does():
    H = np.diag([1.0, -1.0, 2.0])
    with pytest.raises(np.linalg.LinAlgError, match="2-th leading minor"):
        linalg.cho_solve_upper(H, np.ones(3))


def _awkward_square(rng: np.random.Generator) -> np.ndarray:
    """A random 1×1 to 8×8 matrix with −0.0 (about 30 %), NaN and −inf (about 5 % each) among its entries."""
    n = int(rng.integers(1, 9))
    M = rng.normal(size=(n, n))
    M[rng.random((n, n)) < 0.3] = -0.0
    M[rng.random((n, n)) < 0.05] = np.nan
    M[rng.random((n, n)) < 0.05] = -np.inf
    return M


def test_symmetric_upper_is_numpys_triu_sum_to_the_bit():
    """The upper triangle mirrored, −0.0, NaN and ±inf included (the triu sum turns −0.0 into +0.0)."""
    rng = np.random.default_rng(3)
    for _ in range(500):
        M = _awkward_square(rng)
        got = linalg.symmetric_upper(M)
        assert same(got, np.triu(M) + np.triu(M, 1).T) and got.flags.c_contiguous


@pytest.mark.parametrize("order", ["C", "F"])
def test_mirror_upper_is_the_fancy_indexed_copy_to_the_bit(order):
    """The Configuration's H: ``M.copy(); H[low] = H.T[low]``, every value as it is (−0.0 stays −0.0), NaN and
    ±inf included, from C- and Fortran-ordered M (pinocchio's matrices), into a C-ordered copy."""
    rng = np.random.default_rng(4)
    for _ in range(500):
        M = np.asarray(_awkward_square(rng), order=order)
        low = np.tril_indices(len(M), -1)
        want = M.copy()
        want[low] = want.T[low]
        got = linalg.mirror_upper(M, low)
        assert same(got, want) and got.flags.c_contiguous and got is not M
