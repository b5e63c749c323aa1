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


def _fk_jacobian(robot, q, eps=1e-6):
    """J by central differences of the forward kinematics (base-frame linear and angular velocity of
    the tip): independent of the model's analytic Jacobian."""
    J = np.zeros((6, len(q)))
    for i in range(len(q)):
        dq = np.zeros(len(q))
        dq[i] = eps
        Tp, Tm = robot.pose(q + dq), robot.pose(q - dq)
        J[:3, i] = (Tp[:3, 3] - Tm[:3, 3]) / (2 * eps)
        A = Tp[:3, :3] @ Tm[:3, :3].T  # ≈ exp(2ε [ω]×)
        J[3:, i] = np.array([A[2, 1] - A[1, 2], A[0, 2] - A[2, 0], A[1, 0] - A[0, 1]]) / (4 * eps)
    return J


def _virtual_inertia_by_rnea(model, q):
    """H(q) column by column as the joint torques of unit accelerations at rest (RNEA, minus gravity):
    a second algorithm beside the CRBA and Cholesky factor the FD mapping uses."""
    import pinocchio as pin

    data, n = model.createData(), model.nv
    bias = pin.rnea(model, data, q, np.zeros(n), np.zeros(n)).copy()
    return np.column_stack([pin.rnea(model, data, q, np.zeros(n), e) - bias for e in np.eye(n)])


def test_all_mappings_share_the_interface(panda, rng):
    """Each mapping's M(q) against its closed form built here from J by finite differences of the
    forward kinematics (not the code's Jacobian): JI J⁺, JT Jᵀ, DLS Jᵀ(JJᵀ + α²I)⁻¹ (the push-through
    form of the code's (JᵀJ + α²I)⁻¹Jᵀ), FD H⁻¹Jᵀ checked as H·M = Jᵀ with H of the virtual model by
    RNEA (the code factors the CRBA's H); SDLS, whose clamps make it no fixed matrix, has its own tests
    above. The Cartesian map J·M then follows; JI's is the identity."""
    q = nonsingular_q(panda, rng)
    J = _fk_jacobian(panda, q)
    tol = 1e-6
    for name in ("ji", "jt", "dls", "sdls", "fd"):
        m = make_mapping(name, panda)
        M = m.joint_space(q)
        assert M.shape == (7, 6)
        if name == "ji":
            np.testing.assert_allclose(M, np.linalg.pinv(J), atol=tol * np.abs(M).max())
        elif name == "jt":
            np.testing.assert_allclose(M, J.T, atol=tol)
        elif name == "dls":
            np.testing.assert_allclose(M, J.T @ np.linalg.inv(J @ J.T + m.alpha**2 * np.eye(6)),
                                       atol=tol * np.abs(M).max())
        elif name == "fd":
            H = _virtual_inertia_by_rnea(m.virtual.model, q)
            np.testing.assert_allclose(H, H.T, atol=1e-9 * np.abs(H).max())
            np.testing.assert_allclose(H @ M, J.T, atol=tol * max(1.0, np.abs(J).max()))
        C = m.cartesian(q)
        np.testing.assert_allclose(C, J @ M, atol=tol * max(1.0, np.abs(C).max()))
    np.testing.assert_allclose(make_mapping("ji", panda).cartesian(q), np.eye(6), atol=1e-8)


def test_mapping_errors(ur10):
    with pytest.raises(ModelError, match="unknown mapping 'foo'"):
        make_mapping("foo", ur10)
    with pytest.raises(ModelError, match="alpha must be ≥ 1e-12"):
        DampedLeastSquares(ur10, -0.1)
    with pytest.raises(ModelError, match="gamma must be a finite number"):
        ForwardDynamics(ur10, float("nan"))
    with pytest.raises(ModelError, match="unknown algorithm"):
        ForwardDynamics(ur10, 10.0, "lu")  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="finite 2-D matrix"):
        analyze(np.array([[np.inf]]))


def test_misspelled_mapping_parameters_raise_naming_the_valid_ones(ur10):
    """make_mapping checks names against the mapping's declarations: a typo is an error, not the default."""
    with pytest.raises(ModelError, match=r"unknown parameter of mapping 'fd': 'gama' \(did you mean 'gamma'\?\)"):
        make_mapping("fd", ur10, gama=5)
    with pytest.raises(ModelError, match="valid: algorithm, gamma"):
        make_mapping("fd", ur10, gama=5)
    with pytest.raises(ModelError, match="unknown parameter of mapping 'dls': 'gamma'"):
        make_mapping("dls", ur10, gamma=5)  # another mapping's parameter
    # setting names and constructor keywords both reach the mapping
    assert make_mapping("sdls", ur10, sdls_length=0.3).length == 0.3
    assert make_mapping("sdls", ur10, length=0.4).length == 0.4
    assert make_mapping("fd", ur10, gamma=5.0).gamma == 5.0


SDLS_Q = np.array([0.3, -1.2, 1.6, -1.9, 0.05, 0.2])  # near the wrist singularity: the clamps bind


class _Millimetres:
    """The UR10 with lengths in mm: J's position rows × 1000 (for the unit-consistency test)."""

    def __init__(self, robot):
        self.robot = robot

    def jacobian(self, q):
        return self.robot.jacobian(q) * np.array([1e3, 1e3, 1e3, 1, 1, 1])[:, None]


def test_sdls_is_unit_consistent(ur10, rng):
    """Lengths in mm instead of m (J, e, L and D_max alike) give the same Δθ: ρ_j, N_i, M_i mix no units."""
    m = SelectivelyDampedLeastSquares(ur10, length=0.4, max_error=0.05)
    mm = SelectivelyDampedLeastSquares(ur10, length=400.0, max_error=50.0)
    mm.robot = _Millimetres(ur10)
    for q in (SDLS_Q, ur10.random_q(rng)):
        e = rng.normal(size=6) * np.array([0.1, 0.1, 0.1, 0.5, 0.5, 0.5])
        np.testing.assert_allclose(mm.solve(q, e * np.array([1e3, 1e3, 1e3, 1, 1, 1])), m.solve(q, e),
                                   rtol=1e-9, atol=1e-12)


def test_sdls_clamps_bound_the_joint_step_as_buss_and_kim_state(ur10, rng):
    """Buss & Kim: |Δθ_j| ≤ γ_max for any error; the response to an error along one singular direction
    u_i is at most γ_i = min(1, N_i/M_i)·γ_max in max-abs (N_i, M_i recomputed here from their
    definitions); the target clamp makes errors beyond D_max act like D_max."""
    L, D = 0.5, 0.1
    sdls = SelectivelyDampedLeastSquares(ur10, gamma_max=0.2, length=L, max_error=D)
    for q in (SDLS_Q, np.array([0.3, -1.2, 1.6, -1.9, 1e-4, 0.2]), ur10.random_q(rng)):
        for _ in range(20):
            assert np.max(np.abs(sdls.solve(q, 10 * rng.normal(size=6)))) <= 0.2 + 1e-12
        Js = ur10.jacobian(q) * np.array([1, 1, 1, L, L, L])[:, None]
        U, s, Vt = np.linalg.svd(Js)
        for i in range(6):
            N = sum(np.sqrt(sum(U[r, i] ** 2 for r in rows)) for rows in ((0, 1, 2), (3, 4, 5)))
            M = sum(abs(Vt[i, j]) * (np.linalg.norm(Js[:3, j]) + np.linalg.norm(Js[3:, j])) for j in range(6)) / s[i]
            gamma_i = min(1.0, N / M) * 0.2
            e = 0.05 * U[:, i] / np.array([1, 1, 1, L, L, L])  # within the target clamp: ‖blocks‖ ≤ 0.05
            dq = sdls.solve(q, e)
            assert np.max(np.abs(dq)) <= gamma_i * (1 + 1e-9)
            np.testing.assert_allclose(dq, Vt[i] * min(0.05 / s[i], gamma_i / np.max(np.abs(Vt[i])))
                                       * np.sign(0.05 / s[i]), rtol=1e-8, atol=1e-14)
    e = np.array([0.3, -0.4, 0.0, 0.0, 0.0, 0.0])  # 0.5 m: clamped to D_max along its direction
    np.testing.assert_allclose(sdls.solve(SDLS_Q, e), sdls.solve(SDLS_Q, e * D / 0.5), rtol=1e-12)
    r = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0])  # 1 rad: clamped to D_max / L = 0.2 rad
    np.testing.assert_allclose(sdls.solve(SDLS_Q, r), sdls.solve(SDLS_Q, r * D / L), rtol=1e-12)


def test_sdls_in_the_loop_is_rate_independent(ur10):
    """The same wrench at 250, 500 and 1000 Hz: tip paths agree within 2 mm over 0.5 s and ~0.5 m of travel
    (Euler's O(dt) discretisation only; measured 1.1 mm), while clamps acting on the per-cycle error (the
    former form) differ by far more (measured 169 mm)."""
    from fdcontrol.experiments.sdls_rate import tip_path

    w = np.array([20.0, 10.0, 0.0, 0.0, 0.0, 5.0])  # e = f/c² is beyond D_max: the target clamp binds
    paths = {r: tip_path(ur10, r, 0.5, wrench=w, q0=SDLS_Q) for r in (250, 500, 1000)}
    dev = max(np.max(np.linalg.norm(paths[r] - paths[1000], axis=1)) for r in (250, 500))
    moved = np.linalg.norm(paths[1000][-1] - paths[1000][0])
    old = {r: tip_path(ur10, r, 0.5, per_cycle=True, wrench=w, q0=SDLS_Q) for r in (250, 1000)}
    dev_old = np.max(np.linalg.norm(old[250] - old[1000], axis=1))
    print(f"tip moved {moved:.3f} m; max deviation 250/500 vs 1000 Hz: {dev * 1e3:.3f} mm "
          f"(per-cycle clamps: {dev_old * 1e3:.1f} mm)")
    assert moved > 0.05
    assert dev < 2e-3
    assert dev_old > 5 * dev


def test_every_registered_mapping_is_selectable_through_settings_api_and_cli():
    """Settings, PATCH /config (real service), and the CLI accept every name in the registry."""
    import json
    import subprocess
    import sys
    import time

    from fdcontrol.client import Client
    from fdcontrol.mappings import MAPPINGS
    from fdcontrol.server.settings import ControlParams

    from .service import Service

    names = MAPPINGS.names()
    assert set(names) >= {"ji", "jt", "dls", "sdls", "fd"}
    for name in names:
        assert ControlParams(mapping=name).mapping == name
        p = subprocess.run([sys.executable, "-m", "fdcontrol.cli", "analyze", "--q=0.1,-1.2,1.5,-0.3,1.2,0.4",
                            "--mapping", name, "--json"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert list(json.loads(p.stdout)["mappings"]) == [name]
    svc = Service()
    try:
        c = Client(svc.url)
        for name in names:
            assert c.patch_config(mapping=name)["mapping"] == name
            cycle = c.state()["cycle"]
            deadline = time.monotonic() + 5
            while c.state()["cycle"] < cycle + 20 and time.monotonic() < deadline:
                time.sleep(0.02)
            s = c.state()
            assert s["cycle"] >= cycle + 20 and s["fault"] is None, (name, s["fault"])
        assert c.stats()["integrator_nonconverged"] == 0  # visible in /stats (fixed-step Euler: never)
        assert c.patch_config(telemetry_decimation=1)["telemetry_decimation"] == 1
    finally:
        svc.stop()


def test_adding_a_mapping_is_one_file(tmp_path):
    """A copy of the package with one more file in fdcontrol/mappings/: the settings, the API schema and
    the CLI offer it, make_mapping builds it and make_solver drives it — no other change."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for src, dst in (("fdcontrol", "fdcontrol"), ("server", "fdcontrol/server"), ("urdf", "urdf")):  # wheel layout
        shutil.copytree(root / src, tmp_path / dst, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "fdcontrol" / "mappings" / "scaled_jt.py").write_text('''
"""Twice the Jacobian transpose (a test mapping)."""
from .base import MAPPINGS, Mapping


@MAPPINGS.register("scaled_jt")
class ScaledTranspose(Mapping):
    solver = "transpose"

    def joint_space(self, q):
        return 2.0 * self.robot.jacobian(q).T
''')
    code = """
import numpy as np
from fdcontrol import RobotModel, make_mapping
from fdcontrol.cli import build_parser
from fdcontrol.loop.solvers import make_solver
from fdcontrol.server.schemas import MappingSpec
from fdcontrol.server.settings import ControlParams
r = RobotModel.load("ur10")
m = make_mapping("scaled_jt", r)
try:  # it declares no parameters: gamma is not silently dropped
    make_mapping("scaled_jt", r, gamma=5.0)
    raise SystemExit("gamma accepted")
except ValueError as exc:
    assert "unknown parameter" in str(exc), exc
q = np.array([0.1, -1.2, 1.5, -0.3, 1.2, 0.4])
assert np.allclose(m.joint_space(q), 2 * r.jacobian(q).T)
make_solver(m).step(q, np.zeros(6), np.ones(6), 0.002)
assert ControlParams(mapping="scaled_jt").mapping == "scaled_jt"
assert MappingSpec(name="scaled_jt").name == "scaled_jt"
build_parser().parse_args(["analyze", "--q=0,0,0,0,0,0", "--mapping", "scaled_jt"])
print("ok")
"""
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr
