"""Mappings of seed 004 Fig. 5 and their analysis, checked against independent computations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from fdcontrol import (
    DampedLeastSquares,
    ForwardDynamics,
    JacobianInverse,
    JacobianTranspose,
    ModelError,
    SelectivelyDampedLeastSquares,
    analyze,
    make_mapping,
)

from .conftest import nonsingular_q

WRIST_SINGULAR = np.array([0.3, -1.2, 1.4, -0.5, 0.0, 0.7])  # q5 = 0


def test_section_4_1_decoupling(ur10, rng):
    """γ = 1e3: mean of J H⁻¹ Jᵀ ≈ I; γ = 1: not; Jᵀ varies far more than FD."""
    qs = [nonsingular_q(ur10, rng) for _ in range(300)]
    cart = {
        name: np.array([m.cartesian(q) for q in qs])
        for name, m in {"fd1e3": ForwardDynamics(ur10, 1e3), "fd1": ForwardDynamics(ur10, 1.0),
                        "jt": JacobianTranspose(ur10)}.items()
    }
    dev = {k: np.abs(v.mean(axis=0) - np.eye(6)).max() for k, v in cart.items()}
    std = {k: np.linalg.norm(v.std(axis=0)) for k, v in cart.items()}
    print("max |mean - I|:", dev, "‖std‖_F:", std)
    assert dev["fd1e3"] < 0.08
    assert dev["fd1"] > 0.5
    assert std["jt"] > 10 * std["fd1e3"]


def test_ji_cartesian_is_identity_and_pinv_for_redundant(ur10, panda, rng):
    q = nonsingular_q(ur10, rng)
    np.testing.assert_allclose(JacobianInverse(ur10).cartesian(q), np.eye(6), atol=1e-10)
    qp = nonsingular_q(panda, rng)
    M = JacobianInverse(panda).joint_space(qp)
    J = panda.jacobian(qp)
    assert M.shape == (7, 6)
    np.testing.assert_allclose(J @ M, np.eye(6), atol=1e-10)
    # the minimum-norm solution: M f is orthogonal to J's null space
    null = np.linalg.svd(J)[2][-1]
    assert abs(null @ M @ np.ones(6)) < 1e-10


def test_dls_tends_to_ji_as_alpha_vanishes(ur10, rng):
    q = nonsingular_q(ur10, rng)
    ji = JacobianInverse(ur10).joint_space(q)
    errs = [np.linalg.norm(DampedLeastSquares(ur10, a).joint_space(q) - ji)
            for a in (0.3, 0.1, 1e-2, 1e-3, 1e-4)]
    assert all(b < a for a, b in itertools.pairwise(errs)), errs
    assert errs[-1] < 1e-5


def test_dls_closed_form_by_svd(ur10, rng):
    """(JᵀJ + α²I)⁻¹Jᵀ = Σ σ/(σ² + α²) v uᵀ (Buss 2004) — a second algorithm."""
    q, alpha = ur10.random_q(rng), 0.2
    U, s, Vt = np.linalg.svd(ur10.jacobian(q))
    expected = (Vt.T * (s / (s**2 + alpha**2))) @ U.T
    np.testing.assert_allclose(DampedLeastSquares(ur10, alpha).joint_space(q), expected, atol=1e-12)


def test_wrist_singularity(ur10):
    """At q5 = 0: J⁻¹ explodes, Jᵀ loses a direction, FD (γ = 1e3) stays bounded."""
    sv_j = np.linalg.svd(ur10.jacobian(WRIST_SINGULAR), compute_uv=False)
    assert sv_j[-1] < 1e-12
    ji = analyze(JacobianInverse(ur10).joint_space(WRIST_SINGULAR))
    jt = analyze(JacobianTranspose(ur10).joint_space(WRIST_SINGULAR))
    fd = analyze(ForwardDynamics(ur10, 1e3).joint_space(WRIST_SINGULAR))
    assert ji.singular and ji.sigma_max > 1e12
    assert jt.sigma_min < 1e-12 and jt.singular
    assert math.isfinite(fd.sigma_max) and fd.sigma_max < 10.0
    # FD's bound: σ/(σ² + λ) ≤ 1/(2√λ_min) with λ from H_l/γ, so growing γ loosens it
    fd_big = analyze(ForwardDynamics(ur10, 1e6).joint_space(WRIST_SINGULAR))
    assert fd.sigma_max < fd_big.sigma_max < 1e3


def test_sdls_matches_ji_for_small_errors_and_is_bounded(ur10, rng):
    sdls = SelectivelyDampedLeastSquares(ur10)
    q = nonsingular_q(ur10, rng, 0.2)
    e = 1e-4 * rng.normal(size=6)
    np.testing.assert_allclose(sdls.solve(q, e), JacobianInverse(ur10).joint_space(q) @ e,
                               atol=1e-12)
    # large errors are clamped to γ_max in max-abs
    assert np.max(np.abs(sdls.solve(q, 100 * rng.normal(size=6)))) <= sdls.gamma_max + 1e-12
    # at the wrist singularity its linear map stays bounded
    assert analyze(sdls.joint_space(WRIST_SINGULAR)).sigma_max < 10


def test_sdls_linear_map_agrees_with_solve_per_singular_direction(ur10, rng):
    """For e' = u_i (unit, scaled coordinates), solve() without the final and target clamps equals
    joint_space @ e, e = S⁻¹ u_i."""
    sdls = SelectivelyDampedLeastSquares(ur10, gamma_max=10.0, length=0.4, max_error=10.0)
    q = nonsingular_q(ur10, rng, 0.2)
    S = np.array([1, 1, 1, 0.4, 0.4, 0.4])
    U = np.linalg.svd(ur10.jacobian(q) * S[:, None])[0]
    M = sdls.joint_space(q)
    for i in range(6):
        e = U[:, i] / S
        np.testing.assert_allclose(sdls.solve(q, e), M @ e, atol=1e-10)


def test_analyze_against_numpy(ur10, rng):
    a = analyze(np.diag([3.0, 2.0, 0.5]))
    assert (a.sigma_max, a.sigma_min, a.condition) == (3.0, 0.5, 6.0)
    assert a.manipulability == pytest.approx(3.0)
    q = ur10.random_q(rng)
    J = ur10.jacobian(q)
    r = analyze(J)
    assert r.condition == pytest.approx(np.linalg.cond(J), rel=1e-9)
    assert r.manipulability == pytest.approx(np.sqrt(np.linalg.det(J @ J.T)), rel=1e-9)
    s = analyze(np.diag([1.0, 0.0]))
    assert s.singular and s.as_dict()["condition"] is None


def test_all_mappings_share_the_interface(panda, rng):
    q = panda.random_q(rng)
    for name in ("ji", "jt", "dls", "sdls", "fd"):
        m = make_mapping(name, panda)
        assert m.joint_space(q).shape == (7, 6)
        np.testing.assert_allclose(m.cartesian(q), panda.jacobian(q) @ m.joint_space(q))


def test_mapping_errors(ur10):
    with pytest.raises(ModelError, match="unknown mapping 'foo'"):
        make_mapping("foo", ur10)
    with pytest.raises(ModelError, match="alpha must be finite and > 0"):
        DampedLeastSquares(ur10, -0.1)
    with pytest.raises(ModelError, match="gamma must be finite"):
        ForwardDynamics(ur10, float("nan"))
    with pytest.raises(ModelError, match="unknown algorithm"):
        ForwardDynamics(ur10, 10.0, "lu")  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="finite 2-D matrix"):
        analyze(np.array([[np.inf]]))
