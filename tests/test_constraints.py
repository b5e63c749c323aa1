"""Joint limits as constraints (seed 001 eq. 7/8, seed 002 projection) vs clamping."""

from __future__ import annotations

import numpy as np
import pytest

from fdcontrol import ForwardDynamics, RobotModel, VirtualModel
from fdcontrol.experiments.limits import (
    DT,
    FORCE,
    JOINT,
    Q0,
    limited_robot,
    loop_inset,
    metrics,
    simulate,
    simulate_loop,
)
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.solvers import ForwardDynamicsSolver
from fdcontrol.model.constraints import (
    JointLimitConstraints,
    constraint_forces,
    locked_acceleration,
    locked_acceleration_eq8,
)


def test_locked_joint_dynamics_two_forms_agree(ur10, rng):
    vm = VirtualModel(ur10, 100.0)
    for _ in range(5):
        q, f = ur10.random_q(rng), rng.normal(size=6)
        H, b = vm.equation(q, f)
        locked = rng.random(6) < 0.4
        a7 = locked_acceleration(H, b, locked)
        a8 = locked_acceleration_eq8(np.linalg.inv(H), b, locked)
        assert np.all(a7[locked] == 0.0)
        np.testing.assert_allclose(a8, a7, rtol=1e-8, atol=1e-10)
        if locked.any():  # the constraint force is what makes the locked rows balance
            lam = np.zeros(6)
            lam[locked] = constraint_forces(np.linalg.inv(H), b, locked)
            np.testing.assert_allclose(H @ a7, b + lam, rtol=1e-8, atol=1e-9)


def test_locked_acceleration_is_the_free_block_solved_by_scipy_bit_for_bit(rng):
    """Eq. 7 as written: the free block H[np.ix_(free, free)] factored and solved by scipy's cho_factor and
    cho_solve, zero on the locked joints — the same bits by the LAPACK form (the free block is taken without
    np.ix_), the same to rounding by the compiled one the loop runs (its own Cholesky: κ·ε)."""
    import scipy.linalg

    from fdcontrol.model import constraints

    for k in range(200):
        n = 1 + k % 7
        M = rng.normal(size=(n, n))
        H, b = M @ M.T + n * np.eye(n), rng.normal(size=n)
        locked = rng.random(n) < 0.4
        free = ~locked
        want = np.zeros(n)
        if free.any():
            want[free] = scipy.linalg.cho_solve(scipy.linalg.cho_factor(H[np.ix_(free, free)]), b[free])
        assert np.array_equal(constraints.locked_acceleration_lapack(H, b, locked), want), k
        got = locked_acceleration(H, b, locked)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14 * np.abs(want).max(), err_msg=str(k))
        assert not got[locked].any()
        if constraints._locked is not None:  # the compiled form is what ran
            out = np.empty(n)
            assert constraints._locked(H, b, locked, out) and np.array_equal(out, got)


@pytest.mark.parametrize("bad", ["nan_free", "nan_b", "indefinite", "ints", "nan_locked_row"])
def test_locked_acceleration_on_bad_input_does_what_scipy_does(bad):
    """What the compiled eq. 7 cannot take goes to scipy's form: a non-finite value in the free block or in b
    raises as scipy raises, an indefinite free block raises LinAlgError, integers are solved as floats; a NaN
    only in a locked joint's row and column is never read, by either form."""
    import scipy.linalg

    from fdcontrol.model import constraints

    n = 4
    H, b = np.diag([2.0, 3.0, 4.0, 5.0]) + 0.5, np.array([1.0, -2.0, 0.5, 3.0])
    locked = np.array([False, True, False, False])
    if bad == "nan_free":
        H[0, 2] = H[2, 0] = np.nan
    elif bad == "nan_b":
        b[3] = np.nan
    elif bad == "indefinite":
        H = -H
    elif bad == "ints":
        H, b = np.eye(n, dtype=int) * 2, np.arange(n)
    else:
        H[1, :] = H[:, 1] = np.nan
    try:
        want = constraints.locked_acceleration_lapack(H, b, locked)
    except (ValueError, np.linalg.LinAlgError, scipy.linalg.LinAlgError) as exc:
        with pytest.raises(type(exc)):
            locked_acceleration(H, b, locked)
    else:
        np.testing.assert_allclose(locked_acceleration(H, b, locked), want, rtol=1e-14)
        assert bad in ("ints", "nan_locked_row")


def test_projection_puts_the_state_on_the_limit():
    c = JointLimitConstraints(lower=np.full(3, -1.0), upper=np.full(3, 1.0))
    q, qd = c.project(np.array([1.2, 0.5, -1.3]), np.array([0.4, 0.2, -0.1]))
    np.testing.assert_array_equal(q, [1.0, 0.5, -1.0])
    np.testing.assert_array_equal(qd, [0.0, 0.2, 0.0])


def test_active_set_locks_only_pushing_joints_releases_and_re_adds():
    H = np.diag([1.0, 2.0])
    c = JointLimitConstraints(lower=np.array([-1.0, -1.0]), upper=np.array([1.0, 1.0]))
    q, qd = np.array([1.0, 0.0]), np.zeros(2)

    def decide(b, q=q, qd=qd):
        locked = c.decide(q, qd, lambda lk: locked_acceleration(H, b, lk), H, b)
        return locked, locked_acceleration(H, b, locked)

    locked, a = decide(np.array([3.0, 4.0]))  # pushes joint 0 up into its limit: locked
    assert locked.tolist() == [True, False] and a == pytest.approx([0.0, 2.0], rel=1e-14)
    locked, a = decide(np.array([-3.0, 4.0]))  # pulls it back inside: released
    assert not locked.any() and a == pytest.approx([-3.0, 2.0], rel=1e-14)
    # moving back inside at the start: not locked at first, re-added because q̈ points outward
    H2 = np.array([[2.0, 1.0], [1.0, 2.0]])
    b = np.array([1.0, 0.0])
    locked = c.decide(q, np.array([0.0, 0.0]), lambda lk: locked_acceleration(H2, b, lk), H2, b)
    assert locked.tolist() == [True, False]
    # both at upper limits, coupled: both locked, λ = −b; joint 1's λ = 0.5 > 0 would pull it onto its
    # limit → released; with 0 locked, x₁ = −0.25 (inward) and λ₀ = −1.25 ≤ 0 → 0 stays locked
    q2 = np.array([1.0, 1.0])
    b2 = np.array([1.0, -0.5])
    locked = c.decide(q2, np.zeros(2), lambda lk: locked_acceleration(H2, b2, lk), H2, b2)
    x = locked_acceleration(H2, b2, locked)
    lam = H2 @ x - b2
    assert locked.tolist() == [True, False] and x[1] < 0 and lam[0] <= 0


def test_solver_keeps_the_virtual_model_on_its_limit(ur10):
    robot, side = limited_robot(ur10)
    s = ForwardDynamicsSolver(ForwardDynamics(robot, 1e3), joint_limits="constraints")
    q, qd = Q0.copy(), np.zeros(6)
    lim = robot.limits.upper[JOINT] if side > 0 else robot.limits.lower[JOINT]
    for _ in range(100):
        q, qd = s.step(q, qd, FORCE, 0.002)
    assert q[JOINT] == lim and qd[JOINT] == 0.0 and s.constraints.active[JOINT]


def test_constraints_follow_the_force_better_than_clamping():
    robot, _ = limited_robot(RobotModel.load("ur10"))
    runs = {m: simulate(robot, m) for m in ("constraints", "clamp")}
    t = np.arange(len(runs["clamp"]["q"])) * 0.002
    m = {k: metrics(r, t, 1.0) for k, r in runs.items()}
    print(m)
    assert m["constraints"]["cycles_at_limit"] > 50 and m["clamp"]["cycles_at_limit"] > 50
    assert m["constraints"]["mean_cos_tip_velocity_force"] > m["clamp"]["mean_cos_tip_velocity_force"] + 0.2
    assert m["constraints"]["across_over_along"] < 0.5 * m["clamp"]["across_over_along"]
    # released cleanly: it leaves the limit once the load pulls it away, the clamp run only after reversal
    assert m["constraints"]["left_limit_s"] is not None and m["clamp"]["left_limit_s"] >= 1.0


def test_loop_reports_the_active_virtual_constraint(ur10):
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.limits.safety import SafetyLimits
    from fdcontrol.loop.cycle import ControlLoop

    robot, side = limited_robot(ur10)
    sim = SimulatedRobot(robot, q0=Q0)
    lim = SafetyLimits.from_robot(robot)
    loop = ControlLoop(robot, sim, ForwardDynamicsSolver(ForwardDynamics(robot, 1e3)), limits=lim)
    seen = False
    for _i in range(400):
        loop.set_wrench(FORCE)
        s = loop.step(now=loop._command.t)
        seen |= s.limits_active["virtual_joint_limit"]
        bound = robot.limits.upper[JOINT] if side > 0 else robot.limits.lower[JOINT]
        assert (s.q_ref[JOINT] - bound) * side <= 1e-12  # never past the limit
    assert seen


def test_closed_loop_virtual_limit_acts_first_with_the_constrained_dynamics(ur10):
    """The loop on the simulated arm: the virtual limit (inset by the braking distance) engages before
    the safety envelope, the locked joint's reference stays put, the other joints follow seed 001
    eq. 8 computed here from H = JᵀJ + AᵀA/γ (not the solver's CRBA/Cholesky), and the tip follows
    the force better than with clamping or with the safety envelope alone."""
    inset = loop_inset(ur10)
    robot, side = limited_robot(ur10, float(inset[JOINT]))
    r = simulate_loop(robot, "constraints", coriolis=False)
    vlim = (r["virtual_upper"] if side > 0 else r["virtual_lower"])[JOINT]
    slim = (robot.limits.upper if side > 0 else robot.limits.lower)[JOINT]
    assert not any(a["position"] for a in r["safety_active"])  # the envelope never had to brake
    assert np.all((r["q_ref"][:, JOINT] - slim) * side < -0.5 * inset[JOINT])  # far from the safety limit
    locked = r["locked"][:, JOINT]
    assert locked.sum() > 300
    vm = VirtualModel(robot, 1e3)
    checked = 0
    for i in np.flatnonzero(locked):
        if any(r["safety_active"][i].values()):
            continue  # a safety limit shaped this reference (the impact transient)
        q = np.clip(r["q"][i], r["virtual_lower"], r["virtual_upper"])
        J, A = robot.jacobian(q), vm.link_jacobians(q)
        Hinv = np.linalg.inv(J.T @ J + A.T @ A / 1e3)
        v = np.where(r["locked"][i], 0.0, r["qd_state"][i])
        lk = r["locked"][i]
        expected = v + DT * (locked_acceleration_eq8(Hinv, J.T @ r["wrench"][i], lk) - 10.0 * v)
        np.testing.assert_allclose(r["qd_ref"][i], expected, rtol=1e-7, atol=1e-10)
        assert r["qd_ref"][i][JOINT] == 0.0 and r["q_ref"][i][JOINT] == r["q"][i][JOINT]
        checked += 1
    assert checked > 200
    overshoot = np.max((r["q_ref"][:, JOINT] - vlim) * side)
    print(f"checked {checked} locked cycles; reference beyond the virtual limit by at most {overshoot:.4f} rad")
    safety = SafetyLimits.from_robot(robot)  # the loop's defaults
    assert overshoot <= safety.max_velocity[JOINT] ** 2 / (2 * safety.max_acceleration[JOINT])  # stopping distance
    t = np.arange(len(locked)) * DT
    m = {"constraints": metrics(r, t, 1.0)}
    m["clamp"] = metrics(simulate_loop(robot, "clamp", coriolis=False), t, 1.0)
    env = simulate_loop(robot, "none", coriolis=False)
    env["at_limit"] = (env["q"][:, JOINT] - slim) * side >= -1e-3  # stopped by the envelope at the safety limit
    m["envelope only"] = metrics(env, t, 1.0)
    cos = {k: v["mean_cos_tip_velocity_force"] for k, v in m.items()}
    print(cos)
    assert cos["constraints"] > 0.55 and cos["constraints"] > cos["clamp"] + 0.3
    assert cos["constraints"] > cos["envelope only"] + 0.15


def _decide_arrays(c, q, qd, solve, H, b, decay):
    """The active-set rule of JointLimitConstraints.decide written with numpy arrays (the reference)."""
    up, lo = c.at_limit(q)
    locked = (up & (qd >= 0)) | (lo & (qd <= 0))
    if not (up | lo).any():
        return locked
    for _ in range(2 * len(q) + 1):
        x = solve(locked)
        lam = np.where(locked, H @ x - b, 0.0)
        pull = np.where(up, lam, 0.0) - np.where(lo, lam, 0.0)
        acc = np.where(locked, 0.0, x - decay * qd)
        out = np.where(up & (qd >= 0), acc, 0.0) - np.where(lo & (qd <= 0), acc, 0.0)
        j_rel, j_add = int(np.argmax(pull)), int(np.argmax(out))
        if pull[j_rel] > 0:
            locked = locked.copy()
            locked[j_rel] = False
        elif out[j_add] > 0:
            locked = locked.copy()
            locked[j_add] = True
        else:
            break
    return locked


def test_the_active_set_is_the_array_rules_on_random_states_at_the_limits(rng):
    """decide (plain floats per joint) locks what the numpy form of the same rule locks: random SPD H, loads b,
    joints on their lower or upper limit or inside, velocities of either sign or zero, a decay."""
    n_cases = 0
    for _ in range(400):
        n = int(rng.integers(2, 8))
        c = JointLimitConstraints(-np.ones(n), np.ones(n))
        A = rng.normal(size=(n, n))
        H = A @ A.T + 0.1 * np.eye(n)
        b = rng.normal(size=n) * 5
        q = rng.uniform(-0.9, 0.9, size=n)
        at = rng.random(n) < 0.6
        q[at] = rng.choice([-1.0, 1.0], size=int(at.sum()))
        qd = rng.choice([-0.5, 0.0, 0.5], size=n) * rng.random(n)
        decay = float(rng.choice([0.0, 2.0]))

        def solve(lk, H=H, b=b):
            return locked_acceleration(H, b, lk)

        want = _decide_arrays(c, q, qd, solve, H, b, decay)
        got = c.decide(q, qd, solve, H, b, decay)
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(c.active, got)
        n_cases += bool(at.any())
    assert n_cases > 300


def test_first_max_is_numpys_argmax(rng):
    from fdcontrol.model.constraints import first_max

    for _ in range(2000):
        v = rng.choice([0.0, -0.0, 1.0, -1.0, 2.0, np.nan, np.inf], size=int(rng.integers(1, 8)))
        j, m = first_max(v.tolist())
        assert j == int(np.argmax(v))
        np.testing.assert_array_equal(m, v[j])


def _project_arrays(c, q, qd):
    """JointLimitConstraints.project written with numpy arrays (the reference)."""
    if not c.engaged and c.inside(q):
        return q, qd
    q = np.clip(q, c.lower, c.upper)
    up, lo = c.at_limit(q)
    out = (up & (qd > 0)) | (lo & (qd < 0)) | c.active
    if out.any():
        qd = qd.copy()
        qd[out] = 0.0
    return q, qd


@pytest.mark.parametrize("kernels", ["compiled", "plain"])
def test_the_compiled_active_set_and_projection_are_the_array_rules(rng, kernels, monkeypatch):
    """decide and project as the loop runs them (compiled per-joint rules where numba is installed; ``plain``:
    the module's plain-float forms, the compiled kernels switched off) against their numpy forms on random
    states on, beyond and inside the limits, locked sets, NaN now and then: the same locked set, the same q
    and q̇ to the bit, and q̇ handed back as is when nothing was zeroed."""
    from fdcontrol.model import constraints

    if kernels == "plain":
        for name in ("_start", "_verdict", "_project"):
            monkeypatch.setattr(constraints, name, None)
    zeroed = 0
    for k in range(600):
        n = int(rng.integers(2, 8))
        c = JointLimitConstraints(-np.ones(n), np.ones(n), tol=1e-9)
        q = rng.uniform(-1.2, 1.2, size=n)
        at = rng.random(n) < 0.4
        q[at] = rng.choice([-1.0, 1.0, -1.0 + 5e-10, 1.0 - 5e-10], size=int(at.sum()))
        qd = rng.choice([-0.5, 0.0, 0.5], size=n) * rng.random(n)
        if k % 25 == 0:
            (q if k % 50 else qd)[int(rng.integers(0, n))] = np.nan
        c.set_active(rng.random(n) < 0.2)
        want_q, want_qd = _project_arrays(c, q, qd)
        got_q, got_qd = c.project(q, qd)
        np.testing.assert_array_equal(got_q, want_q)
        np.testing.assert_array_equal(got_qd, want_qd)
        assert (got_qd is qd) == (want_qd is qd)
        zeroed += want_qd is not qd
        A = rng.normal(size=(n, n))
        H, b = A @ A.T + 0.1 * np.eye(n), rng.normal(size=n) * 5

        def solve(lk, H=H, b=b):
            return locked_acceleration(H, b, lk)

        if np.isfinite(q).all() and np.isfinite(qd).all():
            decay = float(rng.choice([0.0, 2.0]))
            np.testing.assert_array_equal(c.decide(q, qd, solve, H, b, decay),
                                          _decide_arrays(c, q, qd, solve, H, b, decay))
    assert zeroed > 100
    if kernels == "compiled" and constraints._project is None:
        pytest.skip("numba not installed: the numpy forms ran")
