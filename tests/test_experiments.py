"""The paper's experiments: quick runs produce their files and the numbers carry the claims."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

from fdcontrol import DampedLeastSquares, ForwardDynamics, JacobianInverse, RobotModel
from fdcontrol.experiments import run
from fdcontrol.experiments.batch import evaluate, joint_space, uniform_q

FILES = {
    "decoupling": "fig6_decoupling.png",
    "conditioning": "fig7_conditioning.png",
    "singular-path": "figs8-10_singular_path.png",
    "singular-sweep": "figs11-12_singular_sweep.png",
    "timing": "fig13_timing.png",
    "numerics": "numerics_error_vs_gamma.png",
    "limits": "limits_constraints_vs_clamp.png",
    "integrators": "integrators_error_vs_cpu.png",
}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("experiments")
    p = subprocess.run([sys.executable, "-m", "fdcontrol.cli", "experiments", "all", "--quick",
                        "--no-progress", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return out


def load(out, name):
    return json.loads((out / name / "results.json").read_text())


def test_every_experiment_writes_its_files(quick):
    for name, png in FILES.items():
        for f in (png, "results.json", "summary.md"):
            assert (quick / name / f).stat().st_size > 100, (name, f)


def test_decoupling_claims(quick):
    c = load(quick, "decoupling")["cases"]
    assert c["J⁻¹"]["max_abs_mean_minus_identity"] < 1e-9
    assert c["FD γ=1e3"]["max_abs_mean_minus_identity"] < 0.15  # stated tolerance
    assert c["FD γ=1"]["max_abs_mean_minus_identity"] > 0.5
    assert c["FD γ=1e4"]["max_abs_mean_minus_identity"] < c["FD γ=1e3"]["max_abs_mean_minus_identity"]
    assert c["Jᵀ"]["std_frobenius"] > 5 * c["FD γ=1e3"]["std_frobenius"]


def test_conditioning_is_monotone(quick):
    r = load(quick, "conditioning")
    fd, dls = np.array(r["fd_median_kappa"]), np.array(r["dls_median_kappa"])
    assert np.all(np.diff(fd) <= 1e-9 * fd[:-1])  # falls with γ
    assert np.all(np.diff(dls) >= -1e-9 * dls[1:])  # falls as α → 0 (α grid ascending)
    assert fd[0] > 10 and fd[-1] < 1.01


def test_singular_path_claims(quick):
    r = load(quick, "singular-path")
    assert max(r["sigma_min_J_at_crossings"]) < 1e-3
    cases = r["cases"]
    assert max(cases["J⁻¹"]["sigma_max"]) > 1e10
    assert min(cases["Jᵀ"]["sigma_min"]) < 1e-12
    fd_max = [max(cases[f"FD γ=1e{k}"]["sigma_max"]) for k in (1, 2, 3, 4)]
    assert all(a < b for a, b in itertools.pairwise(fd_max)) and fd_max[-1] < 1e3
    # FD approaches J⁻¹'s manipulability away from the crossings as γ grows
    assert np.mean(cases["FD γ=1e4"]["sigma_min"]) > np.mean(cases["FD γ=1e1"]["sigma_min"])
    # the default (γ scheduled 1e3–1e6): the fixed γ = 1e3's peak gain, a larger σmin between the crossings
    default = cases["FD default (γ scheduled, 1e3–1e6)"]
    assert max(default["sigma_max"]) <= max(cases["FD γ=1e3"]["sigma_max"]) * (1 + 1e-9)
    assert np.mean(default["sigma_min"]) > np.mean(cases["FD γ=1e3"]["sigma_min"])


def test_singular_sweep_reaches_singularities(quick):
    r = load(quick, "singular-sweep")
    assert r["sigma_min_J"]["median"] < 1e-6
    fd = r["fd"]
    assert np.all(np.diff(fd["relative_manipulability"]) >= 0)
    assert max(fd["relative_instability"]) < 10  # FD's σmax bounded over γ ∈ [1, 1e8]


def test_timing_lists_every_method(quick):
    r = load(quick, "timing")
    assert set(r["median_us"]) == {"JT", "JI", "DLS", "SDLS", "FD (CRBA+Cholesky)", "FD (ABA)", "FD (QR)"}
    assert set(r["ratio_to_dls"]) == set(r["median_us"])
    for k, ratio in r["ratio_to_dls"].items():  # each ratio is its median over DLS's
        assert ratio == pytest.approx(r["median_us"][k] / r["median_us"]["DLS"], rel=1e-6), k


def test_numerics_study_claims(quick):
    r = load(quick, "numerics")
    w = r["worst_error"]
    assert max(w["singular"]["qr"]) < 1e-10  # QR never forms H: exact singularity is harmless
    assert max(w["random"]["cholesky-float32"]) > 1e3 * max(w["random"]["cholesky"])
    bound = r["largest_gamma_with_error_below_1e-6"]
    assert bound["qr"] >= bound["aba"] >= bound["cholesky"] >= 1e9


def test_integrator_study_claims(quick):
    r = load(quick, "integrators")["results"]
    e = {k: {p["dt"]: p["error"] for p in r[k]} for k in ("euler", "rk4")}
    assert e["euler"][0.004] / e["euler"][0.002] == pytest.approx(2, rel=0.15)  # first order
    assert e["rk4"][0.004] / e["rk4"][0.002] == pytest.approx(16, rel=0.25)  # fourth order
    bs = r["bs32"]
    assert bs[-1]["error"] < bs[0]["error"] and all(p["max_substeps"] <= 64 for p in bs)


def test_batched_matrices_match_the_library(ur10, rng):
    """The batch path (H = JᵀJ + H_l/γ) against ForwardDynamics' own CRBA at γ."""
    Q = uniform_q(ur10, 20, rng)
    b = evaluate(ur10, Q)
    for gamma in (1.0, 1e3):
        M = joint_space(b, "fd", gamma)
        fd = ForwardDynamics(ur10, gamma)
        for i in range(0, 20, 5):
            np.testing.assert_allclose(M[i], fd.joint_space(Q[i]), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(joint_space(b, "dls", 0.1)[3], DampedLeastSquares(ur10, 0.1).joint_space(Q[3]),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(joint_space(b, "ji")[4], JacobianInverse(ur10).joint_space(Q[4]), rtol=1e-7, atol=1e-12)


def test_same_seed_same_numbers(tmp_path):
    robot = RobotModel.load("ur10")
    a = run(["decoupling", "conditioning"], robot, tmp_path / "a", seed=3, samples=200, progress=False)
    b = run(["decoupling", "conditioning"], robot, tmp_path / "b", seed=3, samples=200, progress=False)
    c = run(["decoupling"], robot, tmp_path / "c", seed=4, samples=200, progress=False)
    same = (tmp_path / "a/conditioning/results.json").read_text()
    assert same == (tmp_path / "b/conditioning/results.json").read_text()
    ma = a["decoupling"]["cases"]["Jᵀ"]["mean"]
    np.testing.assert_array_equal(ma, b["decoupling"]["cases"]["Jᵀ"]["mean"])
    assert not np.array_equal(ma, c["decoupling"]["cases"]["Jᵀ"]["mean"])


def test_unknown_experiment_exits_2():
    p = subprocess.run([sys.executable, "-m", "fdcontrol.cli", "experiments", "fig99"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and "unknown experiment" in p.stderr


def test_limits_on_the_mujoco_arm_constraints_beat_clamping(ur10):
    """The joint-limit study through the loop on the MuJoCo arm (physics the code did not write):
    the constrained virtual model keeps the tip moving along the force; clamping does not."""
    from fdcontrol.experiments import limits as L

    robot, _ = L.limited_robot(ur10, float(L.loop_inset(ur10)[L.JOINT]))
    t = np.arange(round(1.5 / L.DT)) * L.DT
    res = L.physics_runs(robot, t)
    c, k = res["constraints (MuJoCo)"], res["clamp (MuJoCo)"]
    print(c, k)
    assert c["cycles_at_limit"] > 100 and k["cycles_at_limit"] > 100
    assert c["mean_cos_tip_velocity_force"] > k["mean_cos_tip_velocity_force"] + 0.3
    assert c["across_over_along"] < k["across_over_along"]
