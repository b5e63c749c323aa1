"""fdcontrol.model.jacobi: σmin and κ by Jacobi rotations against LAPACK (numpy) and closed forms, and the loop
state's telemetry that uses them."""

from __future__ import annotations

import math

import numpy as np
import pytest

jacobi = pytest.importorskip("fdcontrol.model.jacobi")  # the fast extra (numba)

EPS = np.finfo(float).eps


def smin(A: np.ndarray) -> float:
    return jacobi.sigma_min(A, np.empty((min(A.shape), max(A.shape))))


def kappa(H: np.ndarray) -> float:
    return jacobi.condition_spd(H, np.empty(H.shape))


def orthogonal(rng: np.random.Generator, n: int) -> np.ndarray:
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.sign(np.diag(R))


@pytest.mark.parametrize("shape", [(6, 7), (6, 6), (7, 6), (6, 2), (3, 7), (1, 4), (4, 1)])
def test_sigma_min_is_lapacks_to_rounding(shape):
    """Random matrices, some with a near-dependent row or column (σmin down to ~1e-9 σmax): both are backward
    stable, so they agree within a few ulps of σmax (LAPACK's own error is of that size)."""
    rng = np.random.default_rng(sum(shape))
    for trial in range(400):
        A = rng.standard_normal(shape) * 10.0 ** rng.uniform(-2, 2)
        if trial % 2 and min(shape) > 1:
            if shape[0] <= shape[1]:
                A[-1] = 0.6 * A[0] - 0.3 * A[-2] + 10.0 ** rng.uniform(-9, -3) * rng.standard_normal(shape[1])
            else:
                A[:, -1] = 0.6 * A[:, 0] + 10.0 ** rng.uniform(-9, -3) * rng.standard_normal(shape[0])
        s = np.linalg.svd(A, compute_uv=False)
        assert abs(smin(A) - s[-1]) <= 64 * EPS * s[0], (trial, smin(A), s[-1])


def test_sigma_min_of_closed_forms():
    """A = U diag(s) Vᵀ with chosen singular values; a scaled permutation (exact); a rank-deficient matrix."""
    rng = np.random.default_rng(7)
    for _ in range(100):
        s = np.sort(10.0 ** rng.uniform(-6, 1, 6))[::-1]
        A = orthogonal(rng, 6) @ np.hstack([np.diag(s), np.zeros((6, 1))]) @ orthogonal(rng, 7).T
        assert abs(smin(A) - s[-1]) <= 64 * EPS * s[0]
    P = np.zeros((6, 7))
    P[[0, 1, 2, 3, 4, 5], [3, 0, 6, 1, 5, 2]] = [2.0, -3.0, 0.5, 7.0, -0.25, 4.0]
    assert smin(P) == 0.25
    R = np.ones((3, 5))  # rank one: two singular values are zero
    assert smin(R) <= 64 * EPS * math.sqrt(15)


def test_condition_is_lapacks_to_rounding():
    """Symmetric positive definite H = Q diag(λ) Qᵀ with κ up to ~1e9: the ratio of LAPACK's extreme eigenvalues
    and the closed form λmax/λmin, both within the rounding of an eigenvalue (~ε λmax, relative ε κ)."""
    rng = np.random.default_rng(3)
    for n in (2, 6, 7):
        for _ in range(300):
            lam = 10.0 ** rng.uniform(-5, 4, n)
            Q = orthogonal(rng, n)
            H = (Q * lam) @ Q.T
            H = (H + H.T) / 2
            ev = np.linalg.eigvalsh(H)
            k, exact = kappa(H), lam.max() / lam.min()
            tol = 256 * EPS * exact
            assert abs(k - ev[-1] / ev[0]) <= tol * ev[-1] / ev[0]
            assert abs(k - exact) <= tol * exact


def test_condition_of_closed_forms():
    assert kappa(np.diag([4.0, 0.5, 2.0])) == 8.0
    c, s = math.cos(0.3), math.sin(0.3)
    Q = np.array([[c, -s], [s, c]])
    H = Q @ np.diag([9.0, 1.0]) @ Q.T
    assert kappa(H) == pytest.approx(9.0, rel=8 * EPS)
    assert kappa(np.diag([1.0, -2.0, 3.0])) == math.inf  # not positive definite: as the eigvalsh form says
    assert kappa(np.zeros((3, 3))) == math.inf


def test_a_value_not_finite_gives_nan_for_the_caller_to_ask_lapack():
    for bad in (math.nan, math.inf, -math.inf):
        A = np.ones((6, 7))
        A[2, 3] = bad
        assert math.isnan(smin(A))
        H = np.eye(7)
        H[4, 4] = bad
        assert math.isnan(kappa(H))


def test_the_loop_state_telemetry_agrees_with_lapack(ur10):
    """The published σmin(J) and κ(H) are the compiled ones (not LAPACK's bits in general) and agree with the
    Configuration's LAPACK values to rounding; without the kernels the loop publishes LAPACK's."""
    from fdcontrol import make_mapping
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop.cycle import ControlLoop
    from fdcontrol.loop.solvers import make_solver
    from fdcontrol.model.configuration import Configuration

    q0 = np.array([0.3, -1.2, 1.6, -1.9, 1e-3, 0.2])  # near the wrist singularity
    runs = {}
    for compiled in (True, False):
        loop = ControlLoop(ur10, SimulatedRobot(ur10, q0=q0), make_solver(make_mapping("fd", ur10)),
                           telemetry_decimation=2)
        assert loop._jacobi is not None
        if not compiled:
            loop._jacobi = None
        states = []
        for i in range(12):
            loop.set_wrench([10.0, 0, 5.0, 0, 0, 0], t=i * 0.002)
            states.append(loop.step(now=i * 0.002))
        runs[compiled] = states
    differ = 0
    for a, b in zip(runs[True], runs[False], strict=True):
        np.testing.assert_array_equal(a.qd_ref, b.qd_ref)  # the references never read the telemetry
        s = np.linalg.svd(Configuration(ur10, a.q).jacobian, compute_uv=False)
        assert abs(a.sigma_min_j - b.sigma_min_j) <= 64 * EPS * s[0]
        assert a.kappa_h == pytest.approx(b.kappa_h, rel=256 * EPS * b.kappa_h)
        differ += a.sigma_min_j != b.sigma_min_j or a.kappa_h != b.kappa_h
    assert runs[True][0].sigma_min_j < 1e-2
    assert differ > 0  # the compiled values were published (another algorithm: some last bits differ)
