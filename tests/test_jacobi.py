"""fdcontrol.model.jacobi: σmin and κ by Jacobi rotations against LAPACK (numpy) and closed forms, and the loop
state's telemetry that uses them."""

from __future__ import annotations

import math

import numpy as np
import pytest

jacobi = pytest.importorskip("fdcontrol.model.jacobi")  # the fast extra (numba)

EPS = np.finfo(float).eps


#: a UR10 Jacobian of the held push (σmin 3.5e-5): at a stopping threshold of 2⁻⁵² its rows kept rotating for all
#: 60 sweeps
HELD_PUSH_J = np.array([
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


def smin(A: np.ndarray) -> float:
    return jacobi.sigma_min(A, np.empty((min(A.shape), max(A.shape))))


def kappa(H: np.ndarray) -> float:
    return jacobi.condition_spd(H, np.empty(H.shape))


def orthogonal(rng: np.random.Generator, n: int) -> np.ndarray:
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.sign(np.diag(R))


def _random_matrices(rng: np.random.Generator, shape: tuple[int, int], n: int):
    """`n` random matrices of `shape`, scaled over four decades; every other one with its last row (column, for a
    tall shape) nearly a combination of others (σmin down to ~1e-9 σmax)."""
    for trial in range(n):
        A = rng.standard_normal(shape) * 10.0 ** rng.uniform(-2, 2)
        if trial % 2 and min(shape) > 1:
            if shape[0] <= shape[1]:
                A[-1] = 0.6 * A[0] - 0.3 * A[-2] + 10.0 ** rng.uniform(-9, -3) * rng.standard_normal(shape[1])
            else:
                A[:, -1] = 0.6 * A[:, 0] + 10.0 ** rng.uniform(-9, -3) * rng.standard_normal(shape[0])
        yield A


@pytest.mark.parametrize("shape", [(6, 7), (6, 6), (7, 6), (6, 2), (3, 7), (1, 4), (4, 1)])
def test_sigma_min_is_lapacks_to_rounding(shape):
    """Random matrices, some with a near-dependent row or column (σmin down to ~1e-9 σmax): both are backward
    stable, so they agree within a few ulps of σmax (LAPACK's own error is of that size)."""
    for trial, A in enumerate(_random_matrices(np.random.default_rng(sum(shape)), shape, 400)):
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
    J = HELD_PUSH_J.copy()
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


# ---------------------------------------------------------------------- J's SVD (linalg.svd_jacobi)
def _check_svd(A: np.ndarray, U: np.ndarray, s: np.ndarray, Vt: np.ndarray, tol: float) -> None:
    """(U, σ, Vᵀ) a thin SVD of A within `tol` · σmax: shapes, A = U diag(σ) Vᵀ, orthonormal U and V, σ descending
    and LAPACK's (numpy) within the rounding of both."""
    u0, s0, vt0 = np.linalg.svd(A, full_matrices=False)
    assert U.shape == u0.shape and s.shape == s0.shape and Vt.shape == vt0.shape
    assert U.flags.c_contiguous and Vt.flags.c_contiguous and s.flags.c_contiguous
    top = s0[0]
    assert np.all(np.diff(s) <= 0)
    assert np.max(np.abs(s - s0)) <= tol * top
    assert np.max(np.abs((U * s) @ Vt - A)) <= tol * top
    k = len(s)
    assert np.max(np.abs(U.T @ U - np.eye(k))) <= tol
    assert np.max(np.abs(Vt @ Vt.T - np.eye(k))) <= tol
    # each singular pair is LAPACK's up to its sign where σ is apart from its neighbours (Davis–Kahan: the angle is
    # at most the error over the gap) — and, for a matrix that is not square, from zero (the thin SVD leaves out
    # the longer side's null space, which a small σ's vector is to be told from)
    others = [0.0] if A.shape[0] != A.shape[1] else []
    for i in range(k):
        gap = min([abs(s0[i] - s0[j]) for j in range(k) if j != i] + [abs(s0[i] - o) for o in others] + [math.inf])
        if gap > 1e-3 * top:
            bound = 4 * tol * top / gap + 4 * EPS  # sin θ (the part of one vector off the other: no cancellation)
            for a, b in ((vt0[i], Vt[i]), (u0[:, i], U[:, i])):
                assert np.linalg.norm(b - (a @ b) * a) <= bound, (i, np.linalg.norm(b - (a @ b) * a), bound)
            assert np.sign(vt0[i] @ Vt[i]) == np.sign(u0[:, i] @ U[:, i])  # U and V flip together


@pytest.mark.parametrize("shape", [(6, 7), (6, 6), (7, 6), (6, 2), (3, 7), (1, 4), (4, 1)])
def test_the_svd_is_lapacks_to_rounding(shape):
    """Random matrices, some with a near-dependent row or column (σmin down to ~1e-9 σmax), scaled over four decades:
    the Jacobi SVD agrees with LAPACK's — values, reconstruction, orthonormal factors, singular vectors — within
    a few ulps of σmax."""
    from fdcontrol.model.linalg import svd_jacobi

    for A in _random_matrices(np.random.default_rng(100 + sum(shape)), shape, 300):
        _check_svd(A, *svd_jacobi(A), tol=64 * EPS)


def test_the_svd_of_closed_forms():
    """A = Q₁ [diag(σ) 0] Q₂ᵀ with chosen σ (six decades, and tied pairs): those σ within rounding; a scaled
    permutation: its entries' magnitudes exactly, its singular vectors ± unit vectors."""
    from fdcontrol.model.linalg import svd_jacobi

    rng = np.random.default_rng(17)
    for trial in range(200):
        sv = np.sort(10.0 ** rng.uniform(-6, 1, 6))[::-1]
        if trial % 4 == 0:
            sv[2] = sv[1]  # a tied pair: any basis of its plane
        A = orthogonal(rng, 6) @ np.hstack([np.diag(sv), np.zeros((6, 1))]) @ orthogonal(rng, 7).T
        U, s, Vt = svd_jacobi(A)
        assert np.max(np.abs(s - sv)) <= 64 * EPS * sv[0]
        _check_svd(A, U, s, Vt, tol=64 * EPS)
    P = np.zeros((6, 7))
    P[[0, 1, 2, 3, 4, 5], [3, 0, 6, 1, 5, 2]] = [2.0, -3.0, 0.5, 7.0, -0.25, 4.0]
    U, s, Vt = svd_jacobi(P)
    assert s.tolist() == [7.0, 4.0, 3.0, 2.0, 0.5, 0.25]
    assert np.array_equal(np.abs(U) @ np.diag(s) @ np.abs(Vt), np.abs(P))


def test_the_svd_leaves_to_lapack_what_the_rotations_do_not_take(monkeypatch):
    """A singular value of zero (its vector is not a row over σ), a value not finite or out of scale, another
    dtype: LAPACK's answer (the same bits as fdcontrol.model.linalg.svd), or its error; without numba, LAPACK's
    always."""
    from fdcontrol.model import linalg

    rng = np.random.default_rng(5)
    A = rng.standard_normal((6, 7))
    rank5 = A.copy()
    rank5[5] = 0.0
    for M in (rank5, np.ones((3, 5)), A * 1e-200, A * 1e200, np.zeros((6, 6))):
        got, want = linalg.svd_jacobi(M), linalg.svd(M)
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    ints = np.arange(42).reshape(6, 7)
    assert all(np.array_equal(g, w) for g, w in zip(linalg.svd_jacobi(ints), linalg.svd(ints), strict=True))
    bad = A.copy()
    bad[1, 2] = math.nan
    with pytest.raises(np.linalg.LinAlgError):
        linalg.svd_jacobi(bad)
    assert not all(np.array_equal(g, w) for g, w in zip(linalg.svd_jacobi(A), linalg.svd(A), strict=True))
    monkeypatch.setattr(linalg, "_SVD_KERNEL", [None])  # numba missing
    assert all(np.array_equal(g, w) for g, w in zip(linalg.svd_jacobi(A), linalg.svd(A), strict=True))


def test_the_held_push_jacobian_svd_converges():
    """The held push's UR10 Jacobian (σmin 3.5e-5, the one that kept sigma_min rotating at 2⁻⁵²): its SVD converges
    to LAPACK's; and the Configuration's SVD of J, shared by the γ schedule and the path speed limit, is this one."""
    from fdcontrol.model.configuration import Configuration
    from fdcontrol.model.linalg import svd_jacobi
    from fdcontrol.model.robot import HOME

    J = HELD_PUSH_J.copy()
    _check_svd(J, *svd_jacobi(J), tol=16 * EPS)
    from fdcontrol.model.linalg import svd_kernel

    assert svd_kernel()(J)[0]  # the rotations answer it (not LAPACK): σmin 3.5e-5 is no zero
    tiny = J.copy()
    tiny[5] = tiny[4] * (1 + 1e-12)  # σmin ~1e-12: still theirs
    assert svd_kernel()(tiny)[0]
    tiny[5] = 0.0  # σmin = 0: LAPACK's
    assert not svd_kernel()(tiny)[0]
    from fdcontrol import RobotModel

    robot = RobotModel.load("fr3")
    conf = Configuration(robot, q=np.array(HOME["fr3"]))
    got, want = conf.svd, svd_jacobi(conf.jacobian)
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def test_a_singular_value_whose_square_is_subnormal_goes_to_lapack():
    """Entries of 1e-147 … 1e-140 are within scale, but a nearly dependent row leaves σ_N near 1e-160, whose square
    is subnormal: the rotations lose that row's precision (Vᵀ rows off unit length by up to 0.75, a reviewer's
    sweep). Below SCALE_MIN a σ goes to LAPACK: every answer is a thin SVD of A within rounding."""
    from fdcontrol.model.linalg import svd_jacobi

    rng = np.random.default_rng(23)
    for _ in range(400):
        A = rng.standard_normal((6, 7))
        A[-1] = 0.6 * A[0] - 0.3 * A[-2] + 1e-15 * 10.0 ** rng.uniform(-3, 3) * rng.standard_normal(7)
        A *= 10.0 ** rng.uniform(-147, -140)
        _check_svd(A, *svd_jacobi(A), tol=64 * EPS)


def test_a_read_only_matrix_goes_to_lapack():
    """A read-only J (a view of a frozen buffer) is LAPACK's to decompose (the compiled kernel takes writable arrays):
    the same bits as fdcontrol.model.linalg.svd, no error."""
    from fdcontrol.model import linalg

    A = np.random.default_rng(3).standard_normal((6, 7))
    A.flags.writeable = False
    assert all(np.array_equal(g, w) for g, w in zip(linalg.svd_jacobi(A), linalg.svd(A), strict=True))
    assert all(np.array_equal(g, w) for g, w in zip(linalg.svd_jacobi(A.T), linalg.svd(A.T), strict=True))


def _with_kappa(rng: np.random.Generator, shape: tuple[int, int], kappa: float) -> np.ndarray:
    """A random matrix of `shape` with singular values spread over [1, kappa] (both ends taken), scaled."""
    m, n = shape
    k = min(m, n)
    s = np.sort(np.exp(rng.uniform(0.0, math.log(kappa), k)))[::-1]
    s[0], s[-1] = kappa, 1.0
    return orthogonal(rng, m)[:, :k] @ np.diag(s * 10.0 ** rng.uniform(-3, 3)) @ orthogonal(rng, n)[:, :k].T


@pytest.mark.parametrize("shape", [(6, 7), (6, 6), (6, 3), (6, 1)])
def test_the_lq_pseudo_inverse_is_pinvs_to_rounding_where_it_answers(shape):
    """pinv_apply_lq against np.linalg.pinv(J, rcond=1e-6) @ y on random J with κ from 1 to 1e7: where it answers
    (only where κ(J) ≤ LQ_KAPPA, certain: the pseudo-inverse then drops no singular value) J⁺y within a few hundred
    κ ε (a tall J: plus y's residual, amplified by κ²) — as close as the SVD's pseudo-inverse from the Jacobi
    rotations comes to LAPACK's on the same J; it answers wherever ‖J‖_F ‖J⁺‖_F is below LQ_KAPPA."""
    from fdcontrol.limits.compiled import _svd_apply
    from fdcontrol.model.linalg import LQ_KAPPA, svd_jacobi

    rng = np.random.default_rng(sum(shape))
    answered = refused = 0
    for trial in range(600):
        kappa = 10.0 ** rng.uniform(0.0, 7.0) if shape[1] > 1 else 1.0
        J = _with_kappa(rng, shape, kappa)
        y = rng.standard_normal(shape[0])
        x = np.full(shape[1], np.nan)
        ok = jacobi.pinv_apply_lq(J, y, x)
        bound = np.linalg.norm(J) * np.linalg.norm(np.linalg.pinv(J))  # ‖J‖_F ‖J⁺‖_F ≥ κ
        if not ok:
            refused += 1
            assert bound > LQ_KAPPA * (1 - 1e-6), (trial, kappa, bound)
            continue
        answered += 1
        assert kappa <= LQ_KAPPA * (1 + 1e-6) and bound <= LQ_KAPPA * (1 + 1e-6), (trial, kappa, bound)
        want = np.linalg.pinv(J, 1e-6) @ y
        scale = np.linalg.norm(want) * kappa * EPS
        if shape[0] > shape[1]:  # a tall J: y's part outside J's range counts too, amplified by κ² / ‖J‖ in any method
            smin = np.linalg.svd(J, compute_uv=False)[-1]
            scale += np.linalg.norm(y - J @ want) * kappa * kappa * EPS / (kappa * smin)
        assert np.linalg.norm(x - want) <= 200 * scale, (trial, kappa, np.linalg.norm(x - want) / scale)
        if shape[0] <= shape[1]:  # (a tall J: y's part outside J's range is amplified by κ² in any method)
            u, s, vt = svd_jacobi(J)
            assert np.linalg.norm(_svd_apply(u, s, vt, y) - want) <= 200 * scale
    assert answered > 100 and (refused > 100 or shape[1] == 1), (answered, refused)


def test_the_lq_pseudo_inverse_refuses_what_it_cannot_certify():
    """A value not finite, a zero or rank-deficient J, mismatched shapes, κ past LQ_KAPPA: False (the caller takes
    the SVD), x left to the caller."""
    rng = np.random.default_rng(5)
    J = _with_kappa(rng, (6, 6), 10.0)
    y, x = rng.standard_normal(6), np.empty(6)
    assert jacobi.pinv_apply_lq(J, y, x)
    for bad in (math.nan, math.inf, -math.inf):
        Jb = J.copy()
        Jb[2, 3] = bad
        assert not jacobi.pinv_apply_lq(Jb, y, x)
        yb = y.copy()
        yb[4] = bad
        assert not jacobi.pinv_apply_lq(J, yb, x)
    assert not jacobi.pinv_apply_lq(np.zeros((6, 6)), y, x)
    Jr = J.copy()
    Jr[:, 5] = Jr[:, 4]
    assert not jacobi.pinv_apply_lq(Jr, y, x)
    assert not jacobi.pinv_apply_lq(J, y[:5], x)
    assert not jacobi.pinv_apply_lq(J, y, x[:5])
    assert not jacobi.pinv_apply_lq(_with_kappa(rng, (6, 7), 1.5e6), y, np.empty(7))


def test_the_path_speed_limits_pseudo_inverse_without_an_svd_near_a_singularity():
    """The compiled path speed limit's J⁺y (limits.compiled._pinv_apply) past the Gram matrix's bound (κ > 1e4), no
    SVD given: J's LQ factorization where it certifies κ (np.linalg.pinv's to rounding), past it the pseudo-inverse of
    J's SVD by the rotations the γ schedule's Configuration takes — the same bits as when that SVD is handed to it."""
    from fdcontrol.limits.compiled import _pinv_apply, _svd_apply
    from fdcontrol.model.linalg import svd_jacobi

    rng = np.random.default_rng(11)
    S, U, Vt, none = np.zeros((15, 7)), np.zeros((6, 6)), np.zeros((6, 7)), np.zeros(0)
    lq = own = 0
    for trial in range(300):
        n = 6 if trial % 2 else 7
        kappa = 10.0 ** rng.uniform(4.2, 6.5)
        J = _with_kappa(rng, (6, n), kappa)
        y = rng.standard_normal(6)
        got = _pinv_apply(J, y, U, none, Vt, S)
        want = np.linalg.pinv(J, 1e-6) @ y
        x = np.empty(n)
        if jacobi.pinv_apply_lq(J, y, x):
            lq += 1
            np.testing.assert_array_equal(got, x)
            assert np.linalg.norm(got - want) <= 200 * np.linalg.norm(want) * kappa * EPS
        else:
            own += 1
            np.testing.assert_array_equal(got, _svd_apply(*svd_jacobi(J), y))
            np.testing.assert_array_equal(got, _pinv_apply(J, y, *svd_jacobi(J), S))
            assert np.linalg.norm(got - want) <= 200 * np.linalg.norm(want) * kappa * EPS
    assert lq > 50 and own > 50, (lq, own)
