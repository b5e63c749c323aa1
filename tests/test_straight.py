"""Straight hand guiding by default, on any arm: the γ schedule, the default limits, and arms with
continuous joints (docs/physics.md, "The default γ: scheduled on the conditioning")."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol import RobotModel, make_mapping
from fdcontrol.control.law import ControlLaw, ForceTerm
from fdcontrol.experiments import drift as D
from fdcontrol.experiments.arms import example_robot_data_dir, load_arm, stripped_urdf
from fdcontrol.experiments.batch import evaluate, joint_space, sigmas
from fdcontrol.experiments.singular_path import path
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import ModelError
from fdcontrol.model.virtual import GAMMA, GAMMA_STRAIGHT, scheduled_gamma

DT = D.DT
#: the defaults' check: a 10 N push, every regular one under 0.5 % sideways (the controller alone)
BOUND = 0.005
#: the push's duration in the tests (the experiment's is 1 s): long enough for the path to bend
#: (the tip travels 5–15 cm), short enough for CI
SECONDS = 0.4
FIXED = {"gamma": 1e3, "gamma_schedule": "fixed"}


# ------------------------------------------------------------------------------------------- the defaults
@pytest.mark.parametrize("name", ["ur10", "panda", "fr3", "kinova"])
def test_defaults_push_straight_on_every_regular_pose(name):
    """20 seeded poses ≥ 0.2 rad inside the joint limits, each pushed 10 N along ±x, ±y, ±z with the
    settings a user gets (the FD mapping and the limits as built with no argument), on the ideal arm:
    every regular push (σ_min(J) ≥ 0.05 all along, no position limit) drifts < 0.5 %. ``kinova`` is
    the Kinova Jaco2 from example-robot-data (continuous joints; no default was tuned on it)."""
    arm = load_arm(name)
    pushes = D.regular_pushes(arm, 20, D.DEFAULTS, SECONDS)
    regular = [r for r in pushes if r["regular"]]
    assert not [r for r in pushes if r["fault"]]
    assert len(regular) >= 0.5 * len(pushes), len(regular)
    worst = max(regular, key=lambda r: r["drift"])
    drifts = 100 * np.array([r["drift"] for r in regular])
    print(f"{name}: {len(regular)}/{len(pushes)} regular pushes, drift p50 {np.median(drifts):.3f} % "
          f"max {drifts.max():.3f} %, worst pose {np.round(worst['pose'], 4).tolist()} "
          f"pushed along {worst['direction']}, σmin {worst['sigma_min']:.3f}, γ ≥ {worst['gamma_min']:.3g}")
    assert worst["drift"] < BOUND
    assert all(r["along_m"] > 0.002 for r in regular)  # the tool did move along the push


#: the MuJoCo arms' check: every regular 10 N push under 1 % sideways (servo, tool and flange sensor)
MUJOCO_BOUND = 0.01


@pytest.mark.parametrize("name", ["ur10", "panda", "fr3"])
def test_mujoco_arms_with_their_sensor_push_straight_under_the_defaults(name):
    """Hand guiding on the MuJoCo arm as the service simulates it (PI velocity servo, the 0.8 kg tool
    on the flange's force–torque sensor, the sensor model's gravity compensation) with every setting
    at its default: the same 20 seeded poses × ±x, ±y, ±z as the ideal arm's check, 10 N for 1 s
    (the in-process equivalent of ``/sim/push``): every regular push drifts < 1 % sideways."""
    arm = load_arm(name)
    pushes = D.regular_pushes(arm, 20, D.MUJOCO_DEFAULTS, D.GUIDE_S)
    regular = [r for r in pushes if r["regular"]]
    assert not [r for r in pushes if r["fault"]]
    assert len(regular) >= 0.4 * len(pushes), len(regular)
    worst = max(regular, key=lambda r: r["drift"])
    drifts = 100 * np.array([r["drift"] for r in regular])
    print(f"{name} (MuJoCo, sensor): {len(regular)}/{len(pushes)} regular pushes, drift p50 {np.median(drifts):.3f} % "
          f"max {drifts.max():.3f} %, worst pose {np.round(worst['pose'], 4).tolist()} "
          f"pushed along {worst['direction']}, σmin {worst['sigma_min']:.3f}")
    assert worst["drift"] < MUJOCO_BOUND
    assert all(r["along_m"] > 0.05 for r in regular)  # the tool followed the hand


def test_the_paper_gamma_is_not_straight_at_the_same_pushes():
    """The check can fail: at the paper's fixed γ = 1e3 (default limits otherwise) the same UR10
    pushes drift beyond the bound."""
    arm = load_arm("ur10")
    pushes = D.regular_pushes(arm, 6, D.Variant(servo="ideal", limits="default"), SECONDS)
    assert max(r["drift"] for r in pushes if r["regular"]) > BOUND


# ------------------------------------------------------------------------------------ near singularities
def test_singular_path_gain_no_larger_than_the_fixed_gamma():
    """The paper's UR10 path through four singular configurations (section 4.3): the default
    mapping's largest joint-space gain σmax(H⁻¹Jᵀ) — joint acceleration per newton (eq. 10), and
    joint velocity per newton over c in steady state — is no larger than the fixed γ = 1e3's, while
    γ does rise to gamma_straight between the crossings and falls to γ = 1e3 at them."""
    robot = RobotModel.load("ur10")
    s, Q = path(601, robot.dof)
    fixed = sigmas(joint_space(evaluate(robot, Q), "fd", 1e3))[:, 0]  # batched: H(γ) = JᵀJ + H_l/γ
    fd = make_mapping("fd", robot)  # the default, evaluated by pinocchio's CRBA at its scheduled γ
    default, gammas = np.empty(len(Q)), np.empty(len(Q))
    for i, q in enumerate(Q):
        default[i] = np.linalg.svd(fd.joint_space(q), compute_uv=False)[0]
        gammas[i] = fd.gamma
    print(f"peak gain: default {default.max():.4f}, fixed γ=1e3 {fixed.max():.4f}")
    assert default.max() <= fixed.max() * (1 + 1e-9)
    assert gammas.max() == GAMMA_STRAIGHT.default and gammas.min() == GAMMA.default
    for c in (1 / 6, 0.5, 5 / 6):  # at the elbow crossings: the paper's regularization
        assert gammas[int(np.argmin(np.abs(s - c)))] == GAMMA.default
    # the gain is larger than the fixed γ's where γ was raised (the schedule did something) but
    # never beyond the fixed γ's peak
    assert np.any(default > fixed * 1.1)


def test_the_schedule_is_continuous_and_monotone_in_sigma():
    """γ(σ) for one singular direction: γ₀ near σ = 0, non-decreasing, gamma_straight from
    σ ≥ 0.05 on, FD's gain along it never above the larger of γ₀'s peak and 1/0.05, and no jump
    (a fine sweep changes the model's 1/γ by small steps)."""
    sigma = np.linspace(0.0, 0.08, 40001)
    for h in (0.1, 0.38, 1.2, 5.0):
        others = np.tile([[1.0, 0.8, 0.5, 0.3, 0.2]], (len(sigma), 1))
        g = scheduled_gamma(np.column_stack((others, sigma)), np.full((len(sigma), 6), h), 1e3, 1e6)
        assert g[0] == 1e3 and g[-1] == 1e6 and np.all(np.diff(g) >= 0)
        assert np.all(g[sigma >= 0.05] == 1e6)
        gain = sigma / (sigma ** 2 + h / g)
        peak = 0.5 * np.sqrt(1e3 / h)
        assert gain.max() <= max(peak, 1 / 0.05) * (1 + 1e-12)
        inside = (g > 1e3) & (g < 1e6)
        assert inside.any()
        # no jump in the model: H = JᵀJ + H_l/γ moves with 1/γ, which moves by < 0.2 % of 1/γ₀ per 2 µm of σ
        assert np.max(np.abs(np.diff(1 / g))) * 1e3 < 2e-3


def test_the_mappings_schedule_is_the_equation_along_a_random_walk(ur10):
    """The mapping's γ (its Cholesky test for a regular pose, and its SVD) equals scheduled_gamma evaluated from
    scratch, along a random walk that crosses the elbow singularity: bit for bit from the SVD it takes (by Jacobi
    rotations, fdcontrol.model.linalg.svd_jacobi) and to rounding from LAPACK's (numpy)."""
    from fdcontrol.model.configuration import Configuration
    from fdcontrol.model.linalg import svd_jacobi

    fd = make_mapping("fd", ur10)
    conf = Configuration(ur10, virtual=fd.virtual)
    rng = np.random.default_rng(0)
    q = np.array([0.2, -1.0, 0.6, -1.2, 0.5, 0.3])
    seen = set()
    for _ in range(1500):
        q = q + rng.normal(size=6) * 0.01
        q[2] = 0.6 * np.sin(0.01 * _)  # through q3 = 0 (elbow stretched) and back
        _, s, Vt = svd_jacobi(ur10.jacobian(q))
        expected = float(scheduled_gamma(s, fd.virtual.link_inertia(q, Vt.T), GAMMA.default, GAMMA_STRAIGHT.default))
        assert fd.gamma_at(q) == expected
        _, s, Vt = np.linalg.svd(ur10.jacobian(q), full_matrices=False)
        lapack = float(scheduled_gamma(s, fd.virtual.link_inertia(q, Vt.T), GAMMA.default, GAMMA_STRAIGHT.default))
        # (σ and h agree to ~1e-15; near the band's end γ's slope in σ magnifies that up to γ_straight/γ₀ = 1e3)
        assert expected == pytest.approx(lapack, rel=1e-11, abs=0)
        # and from the loop's Configuration at q (its J, from the CRBA pass): with its SVD (shared with the
        # limits) and that pass's link Jacobians, the same bits as from a fresh SVD and computeJointJacobians
        conf.update(q)
        assert fd.gamma_at(conf.q, conf.jacobian, conf) == fd.gamma_at(conf.q, conf.jacobian)
        assert conf.known_svd() is not None or expected == GAMMA_STRAIGHT.default
        assert np.array_equal(fd.virtual.link_jacobians(conf.q, conf.data), fd.virtual.link_jacobians(q))
        seen.add("low" if expected == GAMMA.default else "high" if expected == GAMMA_STRAIGHT.default else "band")
    assert seen == {"low", "band", "high"}


def test_the_one_pose_schedule_equals_the_array_form():
    """scheduled_gamma_at (plain floats, what the mapping runs each cycle in the band) gives the bits of
    scheduled_gamma (numpy) on random poses' σ and h: in the band, below it, past it, h = 0 and NaN."""
    from fdcontrol.model.virtual import scheduled_gamma_at

    rng = np.random.default_rng(2)
    kinds = set()
    for i in range(5000):
        k = (2, 6, 7)[i % 3]
        sigma = np.sort(rng.uniform(0.0, 1.0, k))[::-1]
        sigma[-1] = rng.uniform(0.0, 0.06) * rng.choice([1.0, 0.1, 0.01])
        h = rng.uniform(0.0, 3.0, k) * rng.choice([1.0, 0.01, 1e-4])
        if i % 97 == 0:
            h[rng.integers(k)] = 0.0
        if i % 211 == 0:
            (sigma if i % 2 else h)[rng.integers(k)] = np.nan
        g0, gs = rng.choice([1e3, 1e4]), rng.choice([1e5, 1e6])
        want = float(scheduled_gamma(sigma, h, g0, gs))
        got = scheduled_gamma_at(sigma.tolist(), h.tolist(), g0, gs)
        assert got == want or (np.isnan(got) and np.isnan(want)), (sigma, h, got, want)
        kinds.add("low" if want == g0 else "high" if want == gs else "band")
    assert kinds == {"low", "band", "high"}


def test_the_compiled_schedule_equals_the_plain_forms(ur10):
    """The mapping's compiled schedule (h from A V, the band's end, the schedule) gives the bits of the plain
    forms it replaces — ``(AV * AV).sum(axis=0)`` of a C-ordered A V (A @ Vᵀ's layout: numpy sums its rows in
    order), gamma_at's end test, scheduled_gamma_at — on random A V and σ:
    below, in and past the band, h = 0, and NaN (then it hands over: NaN, and the plain forms decide); and the
    link Jacobians it reads are np.vstack's rows of pinocchio's."""
    import math

    from fdcontrol.model.virtual import GAIN_MARGIN, REGULAR_SIGMA, scheduled_gamma_at, scheduled_gamma_compiled

    if scheduled_gamma_compiled is None:
        pytest.skip("numba is not installed")

    def plain(AV: np.ndarray, s: np.ndarray, g0: float, gs: float) -> float:
        h = (AV * AV).sum(axis=0)
        end = min(2.0 * math.sqrt(max(float(h.min()), 0.0) / g0) / GAIN_MARGIN, REGULAR_SIGMA)
        if s[-1] >= end:
            return gs
        return scheduled_gamma_at(s.tolist(), h.tolist(), g0, gs)

    rng = np.random.default_rng(3)
    kinds: set[str] = set()
    for i in range(6000):
        k, rows = ((6, 30), (6, 36), (2, 12))[i % 3]
        AV = rng.normal(size=(rows, k)) * rng.choice([1.0, 0.1, 0.01, 1e-3])
        if i % 5 == 0:
            AV[:, rng.integers(k)] *= rng.choice([0.0, 1e-4])
        s = np.sort(rng.uniform(0.0, 1.0, k))[::-1]
        s[-1] = rng.uniform(0.0, 0.06) * rng.choice([1.0, 0.1, 0.01])
        if i % 211 == 0:
            (s if i % 2 else AV)[..., rng.integers(k)] = np.nan
        g0, gs = float(rng.choice([1e3, 1e4])), float(rng.choice([1e5, 1e6]))
        want = plain(AV, s, g0, gs)
        got = scheduled_gamma_compiled(AV, s, g0, gs, GAIN_MARGIN, REGULAR_SIGMA)
        if not np.isfinite(AV).all() or not np.isfinite(s).all():
            assert math.isnan(got)  # handed over
            continue
        assert got == want, (AV, s, got, want)
        kinds.add("low" if want == g0 else "high" if want == gs else "band")
    assert kinds == {"low", "band", "high"}
    vm = make_mapping("fd", ur10).virtual
    for q in (np.zeros(6), np.array([0.2, -1.0, 0.6, -1.2, 0.5, 0.3])):
        pin.computeJointJacobians(vm.model, vm.data, q)
        rows = np.vstack([pin.getJointJacobian(vm.model, vm.data, j, pin.LOCAL)
                          for j in range(1, vm.model.njoints) if j != vm.tip_joint])
        assert np.array_equal(vm.link_jacobians(q), rows)


@pytest.mark.parametrize("compiled", [True, False])
def test_sigma_min_above_agrees_with_the_svd(compiled, monkeypatch):
    """σ_min(J) > s by the shifted Cholesky test (compiled, and numpy's where numba is missing) against
    the SVD, on random 6×N matrices (N = 2, 6, 7) scaled so σ_min lands on both sides of s, rank-deficient
    ones among them; only where σ_min is within 1e-9 of s may the two differ."""
    from fdcontrol.model import conditioning

    if not compiled:
        monkeypatch.setattr(conditioning, "numba", None)
    rng = np.random.default_rng(1)
    checked = {True: 0, False: 0}
    for i in range(3000):
        n = (2, 6, 7)[i % 3]
        U, _ = np.linalg.qr(rng.normal(size=(6, 6)))
        V, _ = np.linalg.qr(rng.normal(size=(n, n)))
        sv = np.sort(rng.uniform(0.0, 2.0, min(6, n)))[::-1]
        sv[-1] = rng.choice([0.0, 0.05 * rng.uniform(0.5, 1.5), rng.uniform(0.0, 0.1)])
        J = U[:, :len(sv)] @ np.diag(sv) @ V[:, :len(sv)].T
        if i % 2:
            J = np.asfortranarray(J)
        smin = np.linalg.svd(J, compute_uv=False)[-1]
        if abs(smin - 0.05) < 1e-9:
            continue
        got = conditioning.sigma_min_above(J, 0.05)
        assert got == (smin > 0.05), (smin, J)
        checked[got] += 1
    assert min(checked.values()) > 500


def _push_loop(robot, q0, force, **mapping):
    drv = D.IdealArm(robot, q0)
    law = ControlLaw(mode="force", force=ForceTerm(gain=np.ones(6), target=np.zeros(6)))
    loop = ControlLoop(robot, drv, make_solver(make_mapping("fd", robot, **mapping)), law=law,
                       limits=SafetyLimits.from_robot(robot), rate=1 / DT)
    p = robot.pose(q0)[:3, 3]
    u = np.array([p[0], p[1], 0.0]) / np.linalg.norm(p[:2])
    drv.set_push(np.concatenate((force * u, np.zeros(3))))
    return loop


def test_pushed_through_the_stretched_singularity_no_faster_than_the_fixed_gamma():
    """UR10 at the paper path's start, pushed radially outwards (10 N, then 50 N) for 2 s on the ideal arm
    with the default limits: it stretches through the elbow singularity without a fault, and the
    default's peak joint speed and joint acceleration references are no larger than the fixed
    γ = 1e3's; the published γ falls to 1e3 at the singularity."""
    robot = RobotModel.load("ur10")
    q0 = path(2, robot.dof)[1][0]
    for force in (10.0, 50.0):
        peaks = {}
        for label, kw in (("default", {}), ("fixed", FIXED)):
            loop = _push_loop(robot, q0, force, **kw)
            states = [loop.step(now=k * DT) for k in range(1000)]
            qd = np.array([s.qd_ref for s in states])
            sig = min(np.linalg.svd(robot.jacobian(s.q), compute_uv=False)[-1] for s in states)
            assert loop.fault is None and sig < 1e-2, (loop.fault, sig)  # it went through
            peaks[label] = (np.abs(qd).max(), np.abs(np.diff(qd, axis=0)).max() / DT)
            if label == "default":
                g = np.array([s.gamma for s in states])
                assert g.min() == GAMMA.default and g[0] == GAMMA_STRAIGHT.default
        print(force, peaks)
        assert peaks["default"][0] <= peaks["fixed"][0] + 1e-9
        assert peaks["default"][1] <= peaks["fixed"][1] + 1e-6


def test_gamma_moving_keeps_the_joint_velocity_state():
    """When γ moves between cycles the solver's q̇ is carried as is: one step with no wrench, no
    decay and no Coriolis term returns the q̇ it was given, at the new γ's virtual model."""
    robot = RobotModel.load("ur10")
    fd = make_mapping("fd", robot)
    solver = make_solver(fd, decay=1e-9, coriolis=False)
    q_far, q_near = np.array([0.2, -1.0, 0.9, -1.2, 0.5, 0.3]), np.array([0.2, -1.0, 0.02, -1.2, 0.5, 0.3])
    qd = np.array([0.1, -0.2, 0.3, 0.1, 0.0, 0.2])
    _, v1 = solver.step(q_far, qd, np.zeros(6), DT)
    g1 = fd.gamma
    _, v2 = solver.step(q_near, v1, np.zeros(6), DT)
    assert g1 == GAMMA_STRAIGHT.default and fd.gamma == GAMMA.default
    np.testing.assert_allclose(v2, qd, rtol=1e-10)


# ----------------------------------------------------------------------------------- continuous joints
def _continuous_twin(tmp_path, joints=("shoulder_pan_joint", "wrist_1_joint", "wrist_3_joint")):
    """The shipped UR10 URDF with `joints` declared continuous (their <limit> kept for velocity)."""
    from fdcontrol.model.robot import URDF_DIR

    text = (URDF_DIR / "ur10.urdf").read_text()
    for j in joints:
        key = f'<joint name="{j}" type="revolute">'
        assert key in text
        text = text.replace(key, f'<joint name="{j}" type="continuous">')
    out = tmp_path / "ur10_continuous.urdf"
    out.write_text(text)
    return out


def test_continuous_joints_load_as_unbounded_revolute(tmp_path, ur10):
    """A URDF with continuous joints: same Jacobian, FD mapping and drift as its revolute twin, no
    position limit on those joints; and the same kinematics as pinocchio's own continuous model
    (q = (cos θ, sin θ)), an independent construction."""
    f = _continuous_twin(tmp_path)
    r = RobotModel.from_urdf(f, "base_link", "tool0")
    assert r.dof == 6 and r.continuous == ["shoulder_pan_joint", "wrist_1_joint", "wrist_3_joint"]
    lim = r.limits
    for i in (0, 3, 5):
        assert lim.lower[i] == -np.inf and lim.upper[i] == np.inf
    np.testing.assert_array_equal(lim.velocity, ur10.limits.velocity)
    full = pin.buildModelFromUrdf(str(f))  # pinocchio's continuous joints: nq = 9, nv = 6
    assert (full.nq, full.nv) == (9, 6)
    data = full.createData()
    fid = full.getFrameId("tool0")
    rng = np.random.default_rng(4)
    for _ in range(10):
        q = ur10.random_q(rng)
        np.testing.assert_allclose(r.jacobian(q), ur10.jacobian(q), atol=1e-14)
        np.testing.assert_allclose(make_mapping("fd", r).joint_space(q), make_mapping("fd", ur10).joint_space(q),
                                   rtol=1e-10, atol=1e-12)
        qc = []
        for jid in range(1, full.njoints):
            th = q[full.joints[jid].idx_v]
            qc += [np.cos(th), np.sin(th)] if full.joints[jid].nq == 2 else [th]
        J = pin.computeFrameJacobian(full, data, np.array(qc), fid, pin.LOCAL_WORLD_ALIGNED)
        np.testing.assert_allclose(r.jacobian(q), J, atol=1e-12)
    # beyond ±2π, where the revolute twin's limits would stop it
    q = np.array([7.0, -1.0, 0.9, -7.5, 0.5, 9.0])
    np.testing.assert_allclose(r.pose(q), ur10.pose(q - np.array([2 * np.pi, 0, 0, -2 * np.pi, 0, 2 * np.pi])),
                               atol=1e-12)
    twin = D.Arm("twin", r, str(f), np.array(ur10.limits.lower) * 0)
    shipped = load_arm("ur10")
    q0 = np.array(shipped.home)
    a = D.guide(twin, q0, D.DEFAULTS, 0.2, (0.0, 1.0, 0.0))
    b = D.guide(shipped, q0, D.DEFAULTS, 0.2, (0.0, 1.0, 0.0))
    assert a["drift"] == pytest.approx(b["drift"], rel=1e-6, abs=1e-9)
    assert a["along_m"] == pytest.approx(b["along_m"], rel=1e-9)


@pytest.mark.parametrize(("joint", "kind", "words"), [
    ("floating", "floating", "floating base"), ("planar", "planar", "planar joint")])
def test_unsupported_joints_are_refused_in_one_line(tmp_path, joint, kind, words):
    from fdcontrol.model.robot import URDF_DIR

    text = (URDF_DIR / "ur10.urdf").read_text().replace(
        '<joint name="elbow_joint" type="revolute">', f'<joint name="elbow_joint" type="{kind}">')
    f = tmp_path / f"ur10_{joint}.urdf"
    f.write_text(text)
    with pytest.raises(ModelError) as e:
        RobotModel.from_urdf(f, "base_link", "tool0")
    msg = str(e.value)
    assert "\n" not in msg and "'elbow_joint'" in msg and words in msg and "fdcontrol drives" in msg


@pytest.mark.parametrize(("kind", "words"), [("ball", "spherical (ball) joint"), ("free", "floating base")])
def test_mjcf_ball_and_free_joints_are_refused_in_one_line(tmp_path, kind, words):
    """The shipped UR10 converted to MJCF by MuJoCo with its elbow a ball joint, or its base on a free joint:
    refused in one line naming the joint and what to do."""
    import mujoco

    from fdcontrol.model.robot import URDF_DIR

    spec = mujoco.MjSpec.from_file(str(URDF_DIR / "ur10.urdf"))
    spec.compiler.discardvisual, spec.compiler.fusestatic = True, False
    if kind == "ball":
        j = spec.joint("elbow_joint")
        j.type, j.range = mujoco.mjtJoint.mjJNT_BALL, [0.0, 3.0]
    else:
        spec.body("base_link").add_freejoint()
    spec.compile()  # MuJoCo takes the model as it is
    f = tmp_path / "arm.xml"
    f.write_text(spec.to_xml())
    with pytest.raises(ModelError) as e:
        RobotModel.from_mjcf(f, "world", "tool0", velocity_limits=2.0)
    msg = str(e.value)
    assert "\n" not in msg and words in msg and "fdcontrol drives" in msg and "fix the arm to its base" in msg
    assert ("'elbow_joint'" in msg) if kind == "ball" else ("Joint" in msg)


def test_frames_without_a_path_are_refused_naming_them(ur10):
    from fdcontrol.model.robot import SHIPPED, URDF_DIR

    f = URDF_DIR / SHIPPED["ur10"][0]
    with pytest.raises(ModelError, match=r"'tool0' is not an ancestor of 'base_link'.*pick base and tip"):
        RobotModel.from_urdf(f, "tool0", "base_link")


def test_kinova_from_example_robot_data_has_three_continuous_joints():
    arm = load_arm("kinova")
    assert arm.robot.continuous == ["j2s6s200_joint_1", "j2s6s200_joint_4", "j2s6s200_joint_6"]
    src = example_robot_data_dir() / "robots/kinova_description/robots/kinova.urdf"
    assert 'type="continuous"' in stripped_urdf(src, "kinova").read_text()


# ------------------------------------------------------------------------------------------- the twist path
@pytest.mark.parametrize("name", ["ur10", "panda", "fr3"])
def test_a_commanded_twist_is_tracked_under_the_defaults(name):
    """A 50 mm/s tool twist along base x, y and z at the start pose (the loop's defaults: FD with its
    γ schedule, the default limits, the twist term's defaults; kinematic simulator): over the last
    0.5 s of 2 s the tip moves at the commanded speed within 1 % and sideways by < 0.5 % of it."""
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.model.robot import HOME

    robot = RobotModel.load(name)
    for axis in range(3):
        sim = SimulatedRobot(robot, dt=DT, q0=np.array(HOME[name]))
        loop = ControlLoop(robot, sim, make_solver(make_mapping("fd", robot)), rate=1 / DT)
        v_c = np.zeros(6)
        v_c[axis] = 0.05
        tips = []
        for i in range(1000):
            loop.set_twist(v_c, "base", t=i * DT)
            s = loop.step(now=i * DT)
            tips.append(s.tip_pose[:3, 3].copy())
        v = (tips[-1] - tips[-251]) / (250 * DT)
        along = float(v[axis])
        side = float(np.linalg.norm(np.delete(v, axis)))
        print(f"{name} axis {axis}: {along * 1e3:.3f} mm/s, sideways {side / 0.05 * 100:.4f} %, γ {s.gamma:g}")
        assert abs(along / 0.05 - 1) < 0.01 and side < 0.005 * 0.05
        assert s.watchdog == "ok" and not s.holding and s.fault is None


def test_analyze_command_on_a_urdf_with_continuous_joints(tmp_path):
    """`fdcontrol analyze` (a real subprocess) on the continuous twin gives the shipped UR10's numbers."""
    import json
    import subprocess
    import sys

    f = _continuous_twin(tmp_path)
    q = "7.0,-1.2,1.5,-0.3,1.2,-6.0"  # joints 1 and 6 beyond ±2π: no position limit
    outs = []
    for robot in (["--robot", str(f), "--base", "base_link", "--tip", "tool0"], ["--robot", "ur10"]):
        p = subprocess.run([sys.executable, "-m", "fdcontrol.cli", "analyze", *robot, "--q", q, "--mapping", "fd",
                            "--json"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        outs.append(json.loads(p.stdout))
    np.testing.assert_allclose(outs[0]["mappings"]["fd"]["singular_values"],
                               outs[1]["mappings"]["fd"]["singular_values"], rtol=1e-9)


def _band_end_by_svd(J: np.ndarray, A: np.ndarray, gamma: float, cap: bool = True,
                     svd: object = None) -> tuple[float, float]:
    """(σ_N, the band's end) as ForwardDynamics.gamma_at evaluates them from numpy's SVD, or from ``svd``'s (the
    schedule's own: fdcontrol.model.linalg.svd_jacobi) (``cap``: at REGULAR_SIGMA as it does, else 2√(h_min/γ)/ρ)."""
    import math

    from fdcontrol.model.virtual import GAIN_MARGIN, REGULAR_SIGMA

    _, s, Vt = np.linalg.svd(J, full_matrices=False) if svd is None else svd(J)  # type: ignore[operator]
    AV = A @ Vt.T
    h = (AV * AV).sum(axis=0)
    end = 2.0 * math.sqrt(max(float(h.min()), 0.0) / gamma) / GAIN_MARGIN
    return float(s[-1]), min(end, REGULAR_SIGMA) if cap else end


def test_past_band_end_is_never_wrong_at_the_bands_edge():
    """past_band_end (the γ schedule's test for a pose past its band, without an SVD) says True only where the
    SVD's σ_N ≥ the band's end: on random 6×N Jacobians (N = 2…6) with random light-link Jacobians A, scaled so
    that the band's end lies within relative 1e-14 … 0.3 of σ_N on either side, ill-separated σ_(N−1) among
    them; it does say True on most of those past the end by more than 1 %."""
    from fdcontrol.model.conditioning import past_band_end
    from fdcontrol.model.linalg import svd_jacobi
    from fdcontrol.model.virtual import GAIN_MARGIN

    if past_band_end is None:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(5)
    said, clear, close = 0, 0, 0
    for i in range(6000):
        n = int(rng.integers(2, 7))
        U, _ = np.linalg.qr(rng.normal(size=(6, 6)))
        V, _ = np.linalg.qr(rng.normal(size=(n, n)))
        sv = np.sort(rng.uniform(0.1, 2.0, n))[::-1]
        sv[-1] = rng.uniform(0.005, 0.05)
        if i % 4 == 0:
            sv[-2] = sv[-1] * rng.uniform(1.0, 1.5)  # σ_(N−1) close to σ_N: v_N ill-determined
        J = U[:, :n] @ np.diag(sv) @ V.T
        A = rng.normal(size=(6 * (n - 1), n)) * rng.uniform(0.1, 2.0)
        gamma = 1e3
        s_n, end = _band_end_by_svd(J, A, gamma, cap=False)
        # scale A so that the end lands at σ_N (1 + d), d of either sign, down to rounding
        d = rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(-14, -0.5)
        A *= s_n * (1 + d) / end
        s_n, end = _band_end_by_svd(J, A, gamma)
        got = past_band_end(J, A, gamma, GAIN_MARGIN)
        if got:
            said += 1
            assert s_n >= end, (i, s_n, end)
            s_j, end_j = _band_end_by_svd(J, A, gamma, svd=svd_jacobi)  # and the schedule's own SVD's answer
            assert s_j >= end_j, (i, s_j, end_j)
        if abs(s_n - end) < 1e-9 * end:
            close += 1
        elif s_n > 1.01 * end:
            clear += 1
    assert close > 1000 and said > 0.5 * clear > 100, (close, said, clear)


def test_past_band_end_leaves_a_tiny_jacobian_to_the_svd():
    """At ‖J‖ ≈ 1e-77 the residual's squares underflow: counted as zero, the certificate took sin θ far too small
    and said True where the SVD puts σ_N (8.9e-78) inside the band (a reviewer's case, found by a sweep over tiny
    scales). Below ‖JᵀJ‖_F² = 1e-280 it leaves the pose to the SVD; the same pose scaled by 2¹⁰⁰ (exact) is
    decided as before, and False there too."""
    from fdcontrol.model.conditioning import past_band_end
    from fdcontrol.model.virtual import GAIN_MARGIN

    if past_band_end is None:
        pytest.skip("numba is not installed")
    J = np.array([[7.912814317973476e-78, 5.761702712018295e-79], [1.4666733635257544e-78, -5.673183794524464e-78],
                  [-2.371127215098323e-78, 3.134664196502616e-78], [-2.869600773228155e-78, -4.649371674137281e-78],
                  [6.676912041908279e-79, 1.9020605046014711e-78], [9.694063905221609e-79, -3.5254187491344956e-78]])
    A = np.array([[1.2974934470136683e-76, -1.2974908679662059e-76], [-7.3268276036636e-77, 7.326881487615118e-77],
                  [1.856679558147059e-76, -1.8566793736121393e-76], [8.878999182579507e-78, -8.8791579575697e-78],
                  [-6.828939279630301e-76, 6.82894141765762e-76], [8.291929435434548e-76, -8.291924214817226e-76]])
    gamma = 2232.160799598371
    k = 2.0 ** 100
    s_n, end = _band_end_by_svd(J * k, A * k, gamma, cap=False)
    assert s_n < end  # inside the band: the SVD's path does not give gamma_straight
    assert not past_band_end(J, A, gamma, GAIN_MARGIN)
    assert not past_band_end(J * k, A * k, gamma, GAIN_MARGIN)


@pytest.mark.parametrize("name", ["ur10", "panda"])
def test_the_held_push_schedules_with_less_and_the_same_gamma(name, monkeypatch):
    """The held push of bench_cycle stretches the arm through the band to a singular pose: just past the band's
    end (UR10) the schedule certifies γ = gamma_straight without J's SVD (past_band_end), at the band's start γ₀
    without the link Jacobians (at_band_start) or, J near the last J that test certified, without J's SVD
    (near_band_start, from that J's SVD): every scheduled γ equals the one from the schedule's SVD (Jacobi
    rotations) and the link Jacobians of the cycle's J (and LAPACK's to rounding), and those tests decide most of
    the cycles they are tried on."""
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop import build_loop
    from fdcontrol.mappings import fd as fd_module
    from fdcontrol.model.linalg import svd_jacobi
    from fdcontrol.model.robot import HOME
    from fdcontrol.model.virtual import GAIN_MARGIN, REGULAR_SIGMA, scheduled_gamma_compiled

    if fd_module.past_band_end is None or fd_module.at_band_start is None:
        pytest.skip("numba is not installed")
    robot = RobotModel.load(name)
    sim = SimulatedRobot(robot, dt=2e-3, q0=np.array(HOME[name]))
    loop = build_loop(driver=sim, robot=robot, rate=500.0)
    fd = loop.solver.mapping
    scratch = make_mapping("fd", robot)
    verdicts: dict[str, list[bool]] = {"past": [], "start": [], "near": []}

    def spying(real, out):
        def spy(*args):
            out.append(real(*args))
            return out[-1]
        return spy

    monkeypatch.setattr(fd_module, "past_band_end", spying(fd_module.past_band_end, verdicts["past"]))
    monkeypatch.setattr(fd_module, "at_band_start", spying(fd_module.at_band_start, verdicts["start"]))
    monkeypatch.setattr(fd_module, "near_band_start", spying(fd_module.near_band_start, verdicts["near"]))
    loop.set_wrench([5.0, -3.0, 2.0, 0.1, 0.0, 0.2], t=1e12)
    past = start = 0
    for i in range(3000):
        loop.step(now=0.0)
        q, J = loop.config.q, loop.config.jacobian  # the cycle's J, from its CRBA pass: as the schedule reads it
        _, s, Vt = svd_jacobi(J)  # the schedule's SVD (Jacobi rotations): the same bits
        want = scheduled_gamma_compiled(scratch.virtual.link_jacobians(q) @ Vt.T, s, GAMMA.default,
                                        GAMMA_STRAIGHT.default, GAIN_MARGIN, REGULAR_SIGMA)
        assert fd.gamma == want, i
        _, s0, Vt0 = np.linalg.svd(J, full_matrices=False)  # LAPACK's: to rounding (magnified near the band's end)
        lapack = scheduled_gamma_compiled(scratch.virtual.link_jacobians(q) @ Vt0.T, s0, GAMMA.default,
                                          GAMMA_STRAIGHT.default, GAIN_MARGIN, REGULAR_SIGMA)
        assert want == pytest.approx(lapack, rel=1e-9, abs=0), i
        past += want == GAMMA_STRAIGHT.default and s[-1] < 0.05
        start += want == GAMMA.default
    near = sum(v >= 0.0 for v in verdicts["near"])  # (near_band_start: ≥ 0 where certain)
    decided = sum(verdicts["start"]) + near
    assert start > 1000 and decided > 0.9 * start, (start, decided)
    if name == "ur10":  # (the Panda's wide J: its σ_N too near its null space's 0 for the step J takes a cycle)
        # a run of cycles on the way to the pose (there κ(J) ≥ 1e4: the path speed limit reads J's SVD each cycle,
        # and the schedule takes it and at_band_start decides)
        assert near > 100, (start, near)
    if name == "ur10":
        assert past >= 10 and sum(verdicts["past"]) >= 0.5 * past, (past, sum(verdicts["past"]))


@pytest.mark.parametrize("name", ["ur10", "panda", "fr3"])
def test_at_band_start_is_never_wrong_at_the_bands_start(name):
    """at_band_start (the γ schedule's test for σ_N ≤ s, where γ is its lowest, from the SVD and the
    Configuration's H instead of the link Jacobians) says True only where the schedule from that SVD and the link
    Jacobians gives its lowest value: at random poses of the arm, singular and not, with H at γ_M = 1e3 … 1e6 and
    γ₀ chosen so that s lies within relative 1e-14 … 0.3 of σ_N on either side; it says True on most poses where
    σ_N < s/4."""
    from fdcontrol.model.configuration import Configuration
    from fdcontrol.model.linalg import svd_jacobi
    from fdcontrol.model.virtual import GAIN_MARGIN, REGULAR_SIGMA, at_band_start, scheduled_gamma_compiled

    if at_band_start is None:
        pytest.skip("numba is not installed")
    robot = RobotModel.load(name)
    fd = make_mapping("fd", robot)
    vm = fd.virtual
    conf = Configuration(robot, virtual=vm)
    rng = np.random.default_rng(8)
    said, deep, close = 0, 0, 0
    for i in range(3000):
        q = robot.random_q(rng)
        if i % 2:  # near a singular pose: the elbow or the wrist stretched
            q[2 if name == "ur10" else 3] = rng.normal() * 0.02 + (0.0 if name == "ur10" else -0.07)
        vm.set_gamma(float(10.0 ** rng.uniform(3, 6)))
        conf.update(q)
        _, s, Vt = np.linalg.svd(conf.jacobian, full_matrices=False)
        AV = vm.link_jacobians(q, conf.data) @ Vt.T
        hmin = float((AV * AV).sum(axis=0).min())
        d = rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(-14, -0.5) if i % 3 else rng.uniform(-0.9, 20.0)
        g0 = hmin / (s[-1] * (1 + d) * GAIN_MARGIN) ** 2  # s = σ_N (1 + d) at this γ₀
        if not 1e-6 <= g0 <= 1e12 or s[-1] == 0.0:
            continue
        gs = g0 * 1e3
        want = scheduled_gamma_compiled(AV, s, g0, gs, GAIN_MARGIN, REGULAR_SIGMA)
        got = at_band_start(conf.data.M, conf.jacobian, s, Vt, vm.link_joints, conf.gamma, g0, GAIN_MARGIN,
                            REGULAR_SIGMA)
        band_start = min(np.sqrt(hmin / g0) / GAIN_MARGIN, REGULAR_SIGMA / 2)
        if got:
            said += 1
            assert want == g0, (i, s[-1], band_start, want)
        # the same from the schedule's own SVD (Jacobi rotations), as the cycle hands it over
        _, sj, Vtj = svd_jacobi(conf.jacobian)
        if at_band_start(conf.data.M, conf.jacobian, sj, Vtj, vm.link_joints, conf.gamma, g0, GAIN_MARGIN,
                         REGULAR_SIGMA):
            want_j = scheduled_gamma_compiled(vm.link_jacobians(q, conf.data) @ Vtj.T, sj, g0, gs, GAIN_MARGIN,
                                              REGULAR_SIGMA)
            assert want_j == g0, (i, sj[-1], band_start, want_j)
        if abs(s[-1] - band_start) < 1e-9 * band_start:
            close += 1
        elif s[-1] < 0.25 * band_start:
            deep += 1
    assert close > 40 and deep > 10 and said > 0.5 * deep, (close, said, deep)


@pytest.mark.parametrize("name", ["ur10", "panda", "fr3"])
def test_near_band_start_is_never_wrong_at_the_bands_start(name):
    """near_band_start (at_band_start's test for J from the SVD of an earlier J0: the held push's cycles between two
    SVDs) says True only where the schedule from J's own SVD (Jacobi rotations) and link Jacobians gives its lowest
    value: J0 at random poses near a singular one, J at q0 moved by 1e-7 … 3e-2 rad, H at γ_M = 1e3 … 1e6 and γ₀
    chosen so that the band's start lies within relative 1e-14 … 0.3 of J's σ_N on either side; it says True on
    most of the small moves well inside the band's start."""
    from fdcontrol.model.configuration import Configuration
    from fdcontrol.model.linalg import svd_jacobi
    from fdcontrol.model.virtual import GAIN_MARGIN, REGULAR_SIGMA, near_band_start, scheduled_gamma_compiled

    if near_band_start is None:
        pytest.skip("numba is not installed")
    from fdcontrol.mappings import fd as fd_module

    assert fd_module._NEAR is near_band_start and fd_module._near_call is not near_band_start
    robot = RobotModel.load(name)
    fd = make_mapping("fd", robot)
    vm = fd.virtual
    conf = Configuration(robot, virtual=vm)
    rng = np.random.default_rng(9)
    said, deep, close = 0, 0, 0
    for i in range(3000):
        q0 = robot.random_q(rng)
        q0[2 if name == "ur10" else 3] = rng.normal() * 0.02 + (0.0 if name == "ur10" else -0.07)
        if i % 5 == 0:  # the wrist too: two small singular values
            q0[4 if name == "ur10" else 5] = rng.normal() * 0.02
        J0 = robot.jacobian(q0)
        _, s0, Vt0 = svd_jacobi(J0)
        step = 10.0 ** rng.uniform(-7, -1.5)
        q = q0 + rng.normal(size=robot.dof) * step
        vm.set_gamma(float(10.0 ** rng.uniform(3, 6)))
        conf.update(q)
        J = conf.jacobian
        _, s, Vt = svd_jacobi(J)
        AV = vm.link_jacobians(q, conf.data) @ Vt.T
        hmin = float((AV * AV).sum(axis=0).min())
        d = rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(-14, -0.5) if i % 3 else rng.uniform(-0.9, 20.0)
        g0 = hmin / (s[-1] * (1 + d) * GAIN_MARGIN) ** 2  # the band's start at σ_N (1 + d) for this γ₀
        if not 1e-6 <= g0 <= 1e12 or s[-1] == 0.0:
            continue
        want = scheduled_gamma_compiled(AV, s, g0, g0 * 1e3, GAIN_MARGIN, REGULAR_SIGMA)
        kappa2 = near_band_start(conf.data.M, J, J0, s0, Vt0, vm.link_joints, conf.gamma, g0, GAIN_MARGIN,
                                 REGULAR_SIGMA)
        # the schedule's call, without numba's dispatch: the same compiled function, the same value
        assert fd_module._near_call(conf.data.M, J, J0, s0, Vt0, vm.link_joints, conf.gamma, g0, GAIN_MARGIN,
                                    REGULAR_SIGMA) == kappa2, i
        got = kappa2 >= 0.0
        if got:  # its bound above κ(J)²: ‖J‖²_F k / σ_N² ≥ tr(G) tr(G⁻¹)
            assert kappa2 >= (s[0] / s[-1]) ** 2 * (1 - 1e-9), (i, kappa2, s)
        band_start = min(np.sqrt(hmin / g0) / GAIN_MARGIN, REGULAR_SIGMA / 2)
        if got:
            said += 1
            assert want == g0, (i, step, s[-1], band_start, want)
        if abs(s[-1] - band_start) < 1e-9 * band_start:
            close += 1
        elif s[-1] < 0.25 * band_start and step < 1e-4:
            deep += 1
    assert close > 40 and deep > 10 and said > 0.5 * deep, (close, said, deep)

