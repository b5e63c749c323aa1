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


def test_magnitudes_whose_products_overflow_or_underflow_give_nan():
    """The rotations' stopping test formed a·b (sums of squares: x⁴) and app·aqq: from about 1e77 they
    overflowed (every rotation was skipped and sigma_min answered the smallest row norm, 9.3e99 where LAPACK
    gives 5.0e99; κ 3.4 instead of 50 at 1e155), below about 1e-162 they underflow (σmin 0). Outside
    [SCALE_MIN, SCALE_MAX] the answer is NaN and LAPACK answers; inside, the same matrix scaled by a power of
    two (exact) gives the same value scaled."""
    rng = np.random.default_rng(11)
    A = rng.standard_normal((6, 7))
    H = A.T @ A + 0.1 * np.eye(7)
    s0, k0 = smin(A), kappa(H)
    for scale in (2.0 ** 520, 2.0 ** -540, 1e200, 1e-200):
        assert math.isnan(smin(A * scale)), scale
        assert math.isnan(kappa(H * scale)), scale
    for scale in (2.0 ** 400, 2.0 ** -400):
        assert smin(A * scale) == s0 * scale
        assert kappa(H * scale) == k0
    assert smin(np.zeros((6, 7))) == 0.0  # zero is no underflow


def test_a_nearly_converged_pair_does_not_keep_the_sweeps_going():
    """JᵀJ + μI of a J that lacks one to five of its six singular values (eigenvalues μ repeated, κ up to 1e10): at a
    stopping threshold of 2⁻⁵² rounding noise kept some of these rotating for all 60 sweeps (about 9 % of them;
    then NaN, and LAPACK's slower call after 90 µs); with a few units of rounding every one converges, to
    LAPACK's value within its own rounding (λmin's absolute error about ε·λmax)."""
    rng = np.random.default_rng(0)
    for _ in range(1000):
        sv = np.sort(10.0 ** rng.uniform(-1, 1, 6))[::-1]
        sv[-int(rng.integers(1, 6)):] = 0.0
        D = np.zeros((6, 7))
        D[:6, :6] = np.diag(sv)
        J = orthogonal(rng, 6) @ D @ orthogonal(rng, 7).T
        H = J.T @ J + np.eye(7) * sv[0] ** 2 * 10.0 ** rng.uniform(-10, 0)
        H = (H + H.T) / 2
        w = np.linalg.eigvalsh(H)
        want = w[-1] / w[0]
        got = kappa(H)
        assert not math.isnan(got)
        assert abs(got - want) <= (1e-12 + 100 * EPS * want) * want


def test_a_held_push_jacobian_converges():
    """A UR10 Jacobian of the held push (σmin 3.5e-5): at a stopping threshold of 2⁻⁵² its rows kept rotating for
    all 60 sweeps (21 µs, then LAPACK); with a few units of rounding it converges to LAPACK's σmin."""
    J = np.array([
        [0.3849616799370756, -0.7786602877150999, -0.32678068915250524, 0.09583963622944403, 0.02075342381716988, 0.0],
        [-0.8091544945243806, -0.19249607927822412, -0.08078491023380535, 0.02369294351424442, -0.08847898973620394,
         0.0],
        [0.0, -0.8778941475468524, -0.4805662689457684, -0.10907773796499043, 0.015543608819243632, 0.0],
        [0.0, 0.23998971950626508, 0.23998971950626508, 0.23998971950626508, -0.9684097198020105,
         0.10731492053938735],
        [0.0, -0.9707754295053538, -0.9707754295053538, -0.9707754295053538, -0.2394048818693796,
         -0.14755537883824882],
        [1.0, 2.220446049250313e-16, 2.220446049250313e-16, 2.220446049250313e-16, -0.06977046029731854,
         -0.9832145839060392]])
    want = np.linalg.svd(J, compute_uv=False)[-1]
    got = smin(J)
    assert not math.isnan(got)
    assert abs(got - want) <= 10 * EPS * np.linalg.norm(J, 2)


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
