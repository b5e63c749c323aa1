"""Each limit alone (property tests), their composition in SafetyLimits, and the loop.

The oracles are written here from the equations in the docstrings (braking distance v²/2a,
uniform scaling, a·dt per cycle), not taken from the code under test.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from fdcontrol import RobotModel
from fdcontrol.limits import (
    LIMITS,
    CartesianSpeed,
    JointAcceleration,
    JointVelocity,
    Limit,
    PositionEnvelope,
    braking_steps,
)
from fdcontrol.limits.safety import BASIC_LIMITS, DEFAULT_LIMITS, SafetyLimits

EPS = 1e-9
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

finite = st.floats(-50.0, 50.0, allow_nan=False, allow_infinity=False)
positive = st.floats(0.05, 20.0)
dts = st.sampled_from([1e-3, 2e-3, 4e-3, 1e-2])


@st.composite
def joints(draw, n=None):
    """A random joint set: limits, v_max, a_max and a measured q inside or beyond a limit."""
    n = draw(st.integers(1, 7)) if n is None else n
    lower = np.array(draw(st.lists(st.floats(-3.0, 0.0), min_size=n, max_size=n)))
    width = np.array(draw(st.lists(st.floats(0.01, 4.0), min_size=n, max_size=n)))
    upper = lower + width
    # where in the range: <0 below the lower limit, >1 beyond the upper one
    frac = np.array(draw(st.lists(st.floats(-0.3, 1.3), min_size=n, max_size=n)))
    q = lower + frac * width
    vmax = np.array(draw(st.lists(st.floats(0.1, 3.0), min_size=n, max_size=n)))
    amax = np.array(draw(st.lists(st.floats(0.5, 20.0), min_size=n, max_size=n)))
    return {"n": n, "lower": lower, "upper": upper, "q": q, "vmax": vmax, "amax": amax}


def vec(draw, n, lo=-5.0, hi=5.0):
    return np.array(draw(st.lists(st.floats(lo, hi), min_size=n, max_size=n)))


def parallel(a: np.ndarray, b: np.ndarray) -> bool:
    """a = s·b with s ∈ [0, 1] (same direction, not longer)."""
    nb = np.linalg.norm(b)
    if nb == 0:
        return bool(np.linalg.norm(a) <= EPS)
    s = float(a @ b) / nb**2
    return -EPS <= s <= 1 + EPS and np.allclose(a, s * b, atol=1e-9 * (1 + nb))


# ------------------------------------------------------------------------- registry
def test_every_limit_is_registered_by_its_name():
    assert set(LIMITS.names()) == {"cartesian", "position", "velocity", "acceleration", "path_acceleration",
                                   "path_speed", "workspace", "jerk", "collision"}
    for name in LIMITS:
        cls = LIMITS.get(name)
        assert issubclass(cls, Limit) and cls.name == name
        assert cls.__doc__ and ("≤" in cls.__doc__)  # the equation is stated


def test_safety_limits_compose_every_registered_limit(ur10):
    lim = SafetyLimits.from_robot(ur10)
    # in composition order: the path-keeping limits (default) act between the velocity and acceleration limits
    assert [type(x) for x in lim.limits] == [LIMITS.get(n) for n in ("cartesian", "position", "velocity",
                                                                      "path_speed", "path_acceleration",
                                                                      "acceleration")]
    # optional, not default: jerk (opt-in); workspace joins with workspace volumes, collision with link
    # geometry and volumes or self-collision
    assert {x.name for x in lim.limits} == set(LIMITS.names()) - {"workspace", "jerk", "collision"}


@PROPS
@given(joints(), st.data(), dts)
def test_braking_stops_within_the_acceleration_limit(j, data, dt):
    qd = vec(data.draw, j["n"], -3, 3)
    refs = list(braking_steps(qd, j["amax"], dt))
    prev = qd
    for r in refs:
        assert np.all(np.abs(r - prev) <= j["amax"] * dt + 1e-12)
        assert parallel(r, qd)
        prev = r
    if np.any(qd):
        assert np.array_equal(refs[-1], np.zeros(j["n"]))
        # no faster than possible, no slower than needed: within one cycle of max |q̇_j|/(a_j dt)
        x = float(np.max(np.abs(qd) / (j["amax"] * dt)))
        assert x * (1 - 1e-12) <= len(refs) <= x + 1
    else:
        assert refs == []


# ------------------------------------------------------------------------- position alone
@PROPS
@given(joints(), st.data(), dts)
def test_position_envelope_alone(j, data, dt):
    qd = vec(data.draw, j["n"], -10, 10)
    lim = PositionEnvelope(j["lower"], j["upper"], j["amax"], j["vmax"], recovery=0.1)
    out = lim.limit(j["q"], qd, np.zeros(j["n"]), None, dt)
    q, lo, up = j["q"], j["lower"], j["upper"]
    inside = (q >= lo) & (q <= up)
    nxt = q + out * dt
    # inside: the next reference position stays inside, and the speed towards a limit is
    # one that can still stop before it at a_max (braking distance v²/2a ≤ d)
    assert np.all(nxt[inside] <= up[inside] + EPS) and np.all(nxt[inside] >= lo[inside] - EPS)
    towards_up = np.clip(out, 0, None)
    towards_lo = np.clip(-out, 0, None)
    assert np.all((towards_up**2 / (2 * j["amax"]) <= (up - q) + EPS)[inside])
    assert np.all((towards_lo**2 / (2 * j["amax"]) <= (q - lo) + EPS)[inside])
    # beyond: back towards the limit at up to the recovery speed, never past it, never out
    above, below = q > up, q < lo
    back = 0.1 * j["vmax"]
    assert np.all(out[above] <= 0) and np.all(out[above] >= -back[above] - EPS)
    assert np.all(nxt[above] >= up[above] - EPS)
    assert np.all(out[below] >= 0) and np.all(out[below] <= back[below] + EPS)
    assert np.all(nxt[below] <= lo[below] + EPS)
    # a joint already within its envelope is left alone
    free = inside & (np.abs(qd) < 1e-3) & (np.minimum(up - q, q - lo) > 1e-3)
    np.testing.assert_array_equal(out[free], qd[free])


def test_position_envelope_stops_a_joint_driven_into_its_limit():
    """Closed form: driven at v_max straight at the limit, the joint stops at it, within a·dt."""
    dt, a = 0.002, 4.0
    lim = SafetyLimits(np.array([-1.0]), np.array([1.0]), np.array([1.0]), np.array([a]))
    q, prev = np.array([0.0]), np.array([0.0])
    for _ in range(5000):
        out = lim.apply(q, np.array([5.0]), prev, np.zeros((6, 1)), dt)
        assert abs(out[0] - prev[0]) <= a * dt + EPS
        q, prev = q + out * dt, out
        assert q[0] <= 1.0 + EPS
    assert q[0] > 1.0 - 1e-3 and abs(prev[0]) < 1e-2  # it got there and stopped


# ------------------------------------------------------------------------- velocity alone
@PROPS
@given(joints(), st.data())
def test_velocity_alone_scales_uniformly_within_the_limit(j, data):
    qd = vec(data.draw, j["n"], -10, 10)
    out = JointVelocity(j["vmax"]).limit(j["q"], qd, np.zeros(j["n"]), None, 0.002)
    assert np.all(np.abs(out) <= j["vmax"] * (1 + EPS))
    assert parallel(out, qd)
    if np.all(np.abs(qd) <= j["vmax"]):
        np.testing.assert_array_equal(out, qd)


# ------------------------------------------------------------------------- acceleration alone
@PROPS
@given(joints(), st.data(), dts)
def test_acceleration_alone_bounds_the_step_and_keeps_its_direction(j, data, dt):
    qd, prev = vec(data.draw, j["n"], -10, 10), vec(data.draw, j["n"], -3, 3)
    out = JointAcceleration(j["amax"]).limit(j["q"], qd, prev, None, dt)
    assert np.all(np.abs(out - prev) <= j["amax"] * dt * (1 + EPS) + EPS)
    assert parallel(out - prev, qd - prev)


# ------------------------------------------------------------------------- Cartesian alone
@PROPS
@given(st.integers(1, 7), st.data(), positive, positive)
def test_cartesian_alone_bounds_the_tip_speed(n, data, vlin, vang):
    J = np.array(data.draw(st.lists(st.floats(-2, 2), min_size=6 * n, max_size=6 * n))).reshape(6, n)
    qd = vec(data.draw, n, -10, 10)
    out = CartesianSpeed(vlin, vang).limit(np.zeros(n), qd, np.zeros(n), J, 0.002)
    tw = J @ out
    assert np.linalg.norm(tw[:3]) <= vlin * (1 + 1e-9) + EPS
    assert np.linalg.norm(tw[3:]) <= vang * (1 + 1e-9) + EPS
    assert parallel(out, qd)
    t0 = J @ qd
    if np.linalg.norm(t0[:3]) <= vlin and np.linalg.norm(t0[3:]) <= vang:
        np.testing.assert_array_equal(out, qd)


def test_cartesian_needs_a_jacobian():
    with pytest.raises(ValueError, match=r"^the Cartesian speed limit needs the Jacobian J$"):
        CartesianSpeed().limit(np.zeros(2), np.ones(2), np.zeros(2), None, 0.002)


# ------------------------------------------------------------------------- composition
def cannot_stop(q, prev, step, lo, up, dt):
    """The documented exception (fdcontrol/limits/safety.py): braking at a·dt for one cycle, the joint
    would still pass a limit (or, beyond one, keep moving out)."""
    return (prev - step > np.maximum(up - q, 0) / dt) | (prev + step < -np.maximum(q - lo, 0) / dt)


def safety(j, recovery=0.1) -> SafetyLimits:
    return SafetyLimits(j["lower"], j["upper"], j["vmax"], j["amax"], max_linear_speed=1e9,
                        max_angular_speed=1e9, recovery_speed=recovery)


@PROPS
@given(joints(), st.data(), dts)
def test_composition_keeps_limits_and_steps_except_where_documented(j, data, dt):
    """References within position/velocity limits; a step > a·dt only in the documented cases."""
    n, q, lo, up, vmax, amax = j["n"], j["q"], j["lower"], j["upper"], j["vmax"], j["amax"]
    qd = vec(data.draw, n, -10, 10)
    prev = np.clip(vec(data.draw, n, -3, 3), -vmax, vmax)
    lim = safety(j)
    out = lim.apply(q, qd, prev, np.zeros((6, n)), dt)
    assert set(lim.active) == {"cartesian", "position", "velocity", "acceleration"}
    nxt = q + out * dt
    inside = (q >= lo) & (q <= up)
    assert np.all(nxt[inside] <= up[inside] + EPS) and np.all(nxt[inside] >= lo[inside] - EPS)
    assert np.all(out[q > up] <= 0) and np.all(out[q < lo] >= 0)
    assert np.all(np.abs(out) <= vmax + EPS)
    step = amax * dt
    big = np.abs(out - prev) > step + 1e-9
    # the documented exception (fdcontrol/limits/safety.py), written out independently
    assert np.all(~big | cannot_stop(q, prev, step, lo, up, dt)), (j, prev, out, step)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(joints(), st.data(), st.sampled_from([1e-3, 2e-3]), st.sampled_from([0.0, 0.01]))
def test_random_starts_beyond_limits_never_step_more_than_a_dt(j, data, dt, tau):
    """Activation anywhere (beyond limits too), random desired q̇ every cycle, a robot that
    tracks exactly (tau = 0) or lags its reference by a first-order τ = 10 ms."""
    n, lo, up, vmax, amax = j["n"], j["lower"], j["upper"], j["vmax"], j["amax"]
    lim = safety(j, recovery=data.draw(st.floats(0.05, 1.0)))
    step = amax * dt
    q, prev, qd_meas = j["q"].copy(), np.zeros(n), np.zeros(n)
    rng = np.random.default_rng(data.draw(st.lists(st.integers(0, 2**31), min_size=1, max_size=4)))
    lagged = 0
    for k in range(400):
        if k % 40 == 0:
            desired = rng.uniform(-2, 2, n) * vmax * 3
        out = lim.apply(q, desired, prev, np.zeros((6, n)), dt)
        info = (k, j, q, prev, out, dt, tau)
        big = np.abs(out - prev) > step + 1e-9
        if tau == 0:
            assert not big.any(), info
        else:  # a lagging robot runs ahead of a braking reference: the documented exceptions only
            assert np.all(~big | cannot_stop(q, prev, step, lo, up, dt)), info
            lagged += int(big.any())
        assert np.all(np.abs(out) <= vmax + EPS)
        q_ref = q + out * dt
        # inside: stays inside; beyond: never further out than measured
        inside = (q >= lo) & (q <= up)
        assert np.all(q_ref[inside] <= up[inside] + EPS) and np.all(q_ref[inside] >= lo[inside] - EPS), info
        assert np.all(out[q > up] <= 0) and np.all(out[q < lo] >= 0), info
        if tau == 0:
            q = q_ref
        else:  # first-order velocity tracking q̈ = (q̇_ref − q̇)/τ
            qd_meas += dt / tau * (out - qd_meas)
            q = q + qd_meas * dt
        prev = out
    if tau == 0:  # whatever started beyond a limit has moved back towards it
        d0 = np.maximum(j["q"] - up, lo - j["q"])
        d1 = np.maximum(q - up, lo - q)
        # (a start beyond by less than float resolution — hypothesis found −5e-324 — cannot move back:
        # ≤ 1e-12 rad counts as at the limit)
        assert np.all(((d1 < d0) | (d1 <= 1e-12))[d0 > 0]), (j, q)
    note(f"cycles where a lagging robot forced a step > a·dt: {lagged}")


def test_activation_beyond_a_limit_ramps_instead_of_stepping(ur10):
    """Issue 12: the reference used to step 0 → −0.105 rad/s in one cycle (13× a·dt)."""
    from fdcontrol import make_mapping
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop.cycle import ControlLoop
    from fdcontrol.loop.solvers import make_solver

    q0, dt = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2]), 0.002
    lim = SafetyLimits.from_robot(ur10)
    lim.upper[1] = q0[1] - 0.05
    loop = ControlLoop(ur10, SimulatedRobot(ur10, dt=dt, q0=q0), make_solver(make_mapping("fd", ur10)),
                       limits=lim, rate=1 / dt)
    prev, speeds = np.zeros(6), []
    for i in range(500):
        loop.set_wrench(np.zeros(6), t=i * dt)  # a live input: the arm moves (here: back inside) only on one
        s = loop.step(now=i * dt)
        assert np.all(np.abs(s.qd_ref - prev) <= lim.max_acceleration * dt + 1e-12), i
        prev = s.qd_ref
        speeds.append(s.qd_ref[1])
    back = lim.recovery_speed * lim.max_velocity[1]
    assert back > 10 * lim.max_acceleration[1] * dt  # the old one-cycle step would fail above
    assert min(speeds) == pytest.approx(-back)  # it does reach the recovery speed
    assert loop.state.q[1] < q0[1] - 0.01


# ------------------------------------------------------------------------- the public API
def test_safety_limits_fields_validate_and_share_one_source(ur10):
    lim = SafetyLimits.from_robot(ur10, velocity_scale=0.25, max_acceleration=2.0, max_linear_speed=0.3)
    np.testing.assert_allclose(lim.max_velocity, 0.25 * ur10.limits.velocity)
    np.testing.assert_allclose(lim.max_acceleration, np.full(6, 2.0))
    assert lim.max_linear_speed == 0.3 and lim.max_angular_speed == 1.5 and lim.recovery_speed == 0.1
    lim.upper[0] = 0.1  # in place, as tests and callers do
    assert lim.position.upper[0] == 0.1
    lim.max_acceleration = 3.0
    assert lim.acceleration.max_acceleration[2] == 3.0 and lim.position.max_acceleration[2] == 3.0
    for bad in ({"max_acceleration": -1.0}, {"max_linear_speed": math.inf}, {"recovery_speed": 0.0},
                {"max_angular_speed": 0.0}):
        with pytest.raises(ValueError):
            SafetyLimits.from_robot(ur10, **bad)
    with pytest.raises(ValueError, match="max_velocity"):
        SafetyLimits.from_robot(ur10, velocity_scale=0.0)


def test_cartesian_speed_limit_in_the_loop(ur10):
    """A large push: the tip speed of the references stays at the Cartesian limit (the
    acceleration limit only interpolates between twists that respect it, up to the change of
    J within one cycle), and the limit reports itself active."""
    from fdcontrol import make_mapping
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop.cycle import ControlLoop
    from fdcontrol.loop.solvers import make_solver

    q0, dt = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2]), 0.002
    lim = SafetyLimits.from_robot(ur10, velocity_scale=1.0, max_acceleration=20.0, max_linear_speed=0.1,
                                  max_angular_speed=0.3)
    loop = ControlLoop(ur10, SimulatedRobot(ur10, dt=dt, q0=q0), make_solver(make_mapping("fd", ur10)),
                       limits=lim, rate=1 / dt)
    v, w, seen = [], [], False
    for i in range(400):
        loop.set_wrench([300.0, 0, 0, 0, 0, 10.0], t=i * dt)
        s = loop.step(now=i * dt)
        tw = ur10.jacobian(s.q) @ s.qd_ref
        v.append(np.linalg.norm(tw[:3]))
        w.append(np.linalg.norm(tw[3:]))
        seen |= s.limits_active["cartesian"]
    assert seen and max(v) > 0.09  # it did push against the limit
    assert max(v) <= 0.1 * 1.01 and max(w) <= 0.3 * 1.01


# ------------------------------------------------------------------------- the compiled twin
@PROPS
@given(joints(), st.data(), dts, st.floats(0.05, 3.0), st.floats(0.1, 5.0))
def test_compiled_default_four_equals_the_limit_classes_bit_for_bit(j, data, dt, vlin, vang):
    """SafetyLimits.apply with the four basic limits runs their compiled twin
    (fdcontrol.limits.compiled); it must give exactly what the classes' float loops give
    (base.run over the same limit objects): the reference and which limits acted."""
    pytest.importorskip("numba")
    from fdcontrol.limits import run

    n = j["n"]
    lim = SafetyLimits(j["lower"], j["upper"], j["vmax"], j["amax"], max_linear_speed=vlin,
                       max_angular_speed=vang, recovery_speed=data.draw(st.floats(0.01, 1.0)))
    assert lim._compiled is not None  # the basic four (the constructor's): the compiled path is the one under test
    J = np.array(data.draw(st.lists(st.floats(-2.0, 2.0), min_size=6 * n, max_size=6 * n))).reshape(6, n)
    if data.draw(st.booleans()):
        J = np.asfortranarray(J)  # pinocchio hands over column-major Jacobians
    qd, prev = vec(data.draw, n, -10, 10), vec(data.draw, n, -3, 3)
    if data.draw(st.booleans()):  # a non-finite value somewhere: both must agree on it too
        bad = data.draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        (qd if data.draw(st.booleans()) else prev)[data.draw(st.integers(0, n - 1))] = bad
    want_active: dict[str, bool] = {}
    want = run(lim.limits, j["q"], qd, prev, J, dt, want_active)
    got = lim.apply(j["q"], qd, prev, J, dt)
    note(f"float loops {want}, compiled {got}")
    np.testing.assert_array_equal(got, want)
    assert lim.active == want_active


def test_compiled_twin_for_the_default_sets_only(ur10):
    """The default six, the basic four and the required three run the compiled twin, and so does a set with
    limits after the acceleration limit (jerk: compiled too; the others run on the twin's result); a parameter
    changed in place, or replaced, reaches the compiled path at once."""
    pytest.importorskip("numba")
    q, J = np.zeros(6), ur10.jacobian(np.full(6, 0.3))
    assert SafetyLimits.from_robot(ur10, limits=BASIC_LIMITS)._compiled is not None
    assert SafetyLimits.from_robot(ur10, limits=("position", "velocity", "acceleration"))._compiled is not None
    assert SafetyLimits.from_robot(ur10)._compiled is not None  # the default six (with the path-keeping limits)
    assert SafetyLimits.from_robot(ur10, limits=(*BASIC_LIMITS, "jerk"))._compiled is not None
    for names in (BASIC_LIMITS, DEFAULT_LIMITS):
        lim = SafetyLimits.from_robot(ur10, limits=names)
        lim.max_velocity[2] = 0.01  # in place, as callers do
        out = lim.apply(q, np.full(6, 0.5), np.full(6, 0.5), J, 0.002)
        assert abs(out[2]) <= 0.01 + 1e-12 and lim.active["velocity"]
        lim.max_velocity = np.full(6, 0.02)  # a new array
        out = lim.apply(q, np.full(6, 0.5), np.full(6, 0.5), J, 0.002)
        assert np.abs(out).max() <= 0.02 + 1e-12 and lim.active["velocity"]
        if lim.path_acceleration is not None:  # replaced: only σ ≈ a·dt/q̇ = 1e-3·0.002/0.01 keeps within it
            lim.path_acceleration.max_acceleration = np.full(6, 1e-3)
            out = lim.apply(q, np.full(6, 0.01), np.zeros(6), J, 0.002)
            assert lim.active["path_acceleration"]
            np.testing.assert_allclose(out, np.full(6, 2e-6), rtol=1e-9)


ROBOTS = {name: RobotModel.load(name) for name in ("ur10", "panda")}


@PROPS
@given(st.sampled_from(["ur10", "panda"]), st.data(), dts, st.sampled_from([DEFAULT_LIMITS, BASIC_LIMITS,
       ("position", "velocity", "acceleration", "path_speed"), ("position", "velocity", "acceleration",
                                                              "path_acceleration")]))
def test_compiled_twin_equals_the_limit_classes_with_the_path_limits(name, data, dt, names):
    """Every set the compiled twin runs (the default six among them) against the classes' float loops
    (base.run over the same limit objects) on random arm states — q anywhere (also beyond a limit), a
    desired q̇ from a crawl to far beyond the limits, the previous reference near it or not, a
    non-finite value now and then: the same reference to rounding (the path speed limit solves J⁺
    another way) and the same limits acted."""
    pytest.importorskip("numba")
    from fdcontrol.limits import run

    robot = ROBOTS[name]
    lim = SafetyLimits.from_robot(robot, data.draw(st.floats(0.05, 1.0)), data.draw(st.floats(0.5, 20.0)),
                                  limits=names, max_linear_speed=data.draw(st.floats(0.05, 3.0)),
                                  max_angular_speed=data.draw(st.floats(0.1, 5.0)))
    assert lim._compiled is not None
    n, lo, hi = robot.dof, robot.limits.lower, robot.limits.upper
    q = lo + np.array(data.draw(st.lists(st.floats(-0.1, 1.1), min_size=n, max_size=n))) * (hi - lo)
    J = robot.jacobian(q)
    scale = data.draw(st.sampled_from([1e-3, 0.1, 1.0, 10.0]))
    qd = scale * vec(data.draw, n, -1, 1)
    # the previous reference along q̇ (the path acceleration limit then finds its σ) and off it
    prev = data.draw(st.floats(0.0, 1.2)) * qd + data.draw(st.sampled_from([0.0, 1e-4, 1e-2, 1.0])) \
        * vec(data.draw, n, -1, 1)
    if data.draw(st.integers(0, 9)) == 0:
        bad = data.draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        (qd if data.draw(st.booleans()) else prev)[data.draw(st.integers(0, n - 1))] = bad
    want_active: dict[str, bool] = {}
    want = run(lim.limits, q, qd, prev, J, dt, want_active)
    got = lim.apply(q, qd, prev, J, dt)
    note(f"float loops {want}, compiled {got}, acted {want_active}")
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    if want_active.get("path_acceleration"):
        # the path acceleration limit scaled Δq̇ onto a·dt: the acceleration limit's ratio is then 1 to
        # rounding, and the path speed limit's rounding (J⁺ solved another way) may tip its flag either way
        # while the references agree (a Panda at dt = 4 ms with a subnormal q̇ did)
        assert {**lim.active, "acceleration": None} == {**want_active, "acceleration": None}
    else:
        assert lim.active == want_active


class _NarrowAfter(Limit):
    """A plugin's limit after the acceleration limit: halves q̇ of joint 0 and narrows the hard box of joint 1 to
    ±1e-4 rad/s (what the composition's last step, the box, must then respect)."""

    name, order = "narrow_after", 44.0

    def validate(self) -> None:
        pass

    def apply(self, c, qd):
        qd[0] *= 0.5
        c.hard_lo[1], c.hard_hi[1] = max(c.hard_lo[1], -1e-4), min(c.hard_hi[1], 1e-4)
        return qd[0] != 0.0


@pytest.fixture
def narrow_after():
    """_NarrowAfter registered as a limit for one test."""
    LIMITS.register(_NarrowAfter.name)(_NarrowAfter)
    yield
    LIMITS._entries.pop(_NarrowAfter.name)


@settings(PROPS, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # registered once
@given(st.sampled_from(["ur10", "panda"]), st.data(), st.sampled_from([
    (*BASIC_LIMITS, "jerk"), (*DEFAULT_LIMITS, "jerk"), ("position", "velocity", "acceleration", "jerk"),
    (*BASIC_LIMITS, "jerk", "narrow_after"), (*BASIC_LIMITS, "narrow_after"), (*BASIC_LIMITS, "workspace", "jerk"),
    (*BASIC_LIMITS, "workspace")]))
def test_compiled_twin_with_the_limits_after_the_acceleration_limit_equals_the_classes(narrow_after, name, data,
                                                                                        names):
    """The jerk limit (compiled too), the workspace stop and a plugin's limit after the acceleration limit (their
    own loops on the twin's result), cycle after cycle against the classes' float loops on a second, independent
    set (base.run): random desired q̇ near and beyond the limits, each set's output fed back as the loop does,
    the previous reference changed outside now and then, a stop to rest, missed robot ticks (dt 2–3 periods)
    and a non-finite value: the same bits (with the path speed limit: to rounding), the same limits acted
    (with the path acceleration limit, which scales Δq̇ onto a·dt, the acceleration limit's tie aside) and the
    same jerk history."""
    pytest.importorskip("numba")
    from fdcontrol.control.workspace import WorkspaceBox
    from fdcontrol.limits import WorkspaceStop, run

    robot = ROBOTS[name]
    n, lo, hi, period = robot.dof, robot.limits.lower, robot.limits.upper, 1e-3
    scale_v, acc = data.draw(st.floats(0.05, 1.0)), data.draw(st.floats(0.5, 20.0))
    q = lo + np.array(data.draw(st.lists(st.floats(-0.05, 1.05), min_size=n, max_size=n))) * (hi - lo)
    J = robot.jacobian(q)
    tip = robot.pose(q)[:3, 3]
    box = WorkspaceBox(tip - data.draw(st.floats(1e-4, 0.05)), tip + data.draw(st.floats(1e-4, 0.05)))

    def build() -> SafetyLimits:
        made = SafetyLimits.from_robot(robot, scale_v, acc, limits=tuple(
            x for x in names if x not in ("workspace", "narrow_after")))
        extra: list[Limit] = [_NarrowAfter()] if "narrow_after" in names else []
        if "workspace" in names:
            extra.append(WorkspaceStop(robot, list(box.faces), 5.0))
        return SafetyLimits.compose([*made.limits, *extra]) if extra else made

    twin, loops = build(), build()
    assert twin._compiled is not None and twin.names == loops.names
    loops._compiled = None
    exact = "path_speed" not in names
    prev = prev_twin = np.zeros(n)  # each set's own output fed back (the path speed limit: they differ by rounding)
    for k in range(data.draw(st.integers(5, 40))):
        kind = data.draw(st.integers(0, 19))
        scale = data.draw(st.sampled_from([1e-3, 0.1, 1.0, 10.0]))
        qd = np.zeros(n) if kind == 0 else scale * vec(data.draw, n, -1, 1)
        if kind == 1:  # the previous reference changed outside the limits
            step = data.draw(st.sampled_from([1e-6, 1e-2])) * vec(data.draw, n, -1, 1)
            prev, prev_twin = prev + step, prev_twin + step
        if kind == 2:
            qd[data.draw(st.integers(0, n - 1))] = data.draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        dt = period * (data.draw(st.integers(2, 3)) if kind == 3 else 1)
        want_active: dict[str, bool] = {}
        want = run(loops.limits, q, qd, prev, J, dt, want_active, period)
        got = twin.apply(q, qd, prev_twin, J, dt, period)
        note(f"cycle {k}: float loops {want}, compiled {got}, acted {want_active}")
        if exact:
            np.testing.assert_array_equal(got, want)
            assert twin.active == want_active
        else:
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
            assert {**twin.active, "acceleration": None} == {**want_active, "acceleration": None}
        if "jerk" in names:
            jt, jl = (dict(zip(x.names, x.limits, strict=True))["jerk"] for x in (twin, loops))
            if exact:
                np.testing.assert_array_equal(jt._state, jl._state)
            if k == 0:
                history = jt._state
            assert jt._state is history  # the compiled twin ran: it writes the history in place
        prev, prev_twin = want, got


@pytest.mark.parametrize("name", ["ur10", "panda"])
def test_path_speed_reuses_a_given_svd_of_j_near_a_singularity(name):
    """Near a singularity (κ(J) > 1e4) the compiled path speed limit needs J⁺ by an SVD: given the SVD of
    this J (the one the γ schedule took this cycle) it gives what its own SVD and the classes' float loops
    give, to rounding; given the SVD of another J it does not (so the given one is what it uses)."""
    pytest.importorskip("numba")
    from fdcontrol.limits import run
    from fdcontrol.model.linalg import svd

    robot = ROBOTS[name]
    lim = SafetyLimits.from_robot(robot)
    rng = np.random.default_rng(7)
    n = robot.dof
    # a singular pose: the arm stretched by a held push (as in the loop), then turned about the base axis and
    # the flange axis — both keep J's singular values (the whole J rotates; the tip stays on the last axis)
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop import build_loop
    from fdcontrol.model.robot import HOME

    loop = build_loop(driver=SimulatedRobot(robot, dt=2e-3, q0=np.array(HOME[name])), robot=robot, rate=500.0)
    loop.set_wrench([5.0, -3.0, 2.0, 0.1, 0.0, 0.2], t=1e12)
    for _ in range(3000):
        loop.step(now=0.0)
    stretched = loop.state.q.copy()
    acted = differs = 0
    for _ in range(40):
        q = stretched.copy()
        q[0] += rng.uniform(-1.0, 1.0)
        q[-1] += rng.uniform(-1.0, 1.0)
        J = robot.jacobian(q)
        s = svd(J)
        assert s[1][-1] < 1e-4 * s[1][0]  # the SVD branch (κ(J) > 1e4)
        qd = rng.normal(scale=1.5, size=n)
        prev = np.zeros(n)
        for _ in range(400):  # the previous reference where the limits settle at this q (the acceleration
            prev = lim.apply(q, qd, prev, J, 2e-3)  # limit then no longer decides alone)
        want_active: dict[str, bool] = {}
        want = run(lim.limits, q, qd, prev, J, 2e-3, want_active)
        own = lim.apply(q, qd, prev, J, 2e-3)
        got = lim.apply(q, qd, prev, J, 2e-3, svd=s)
        np.testing.assert_allclose(got, own, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        assert lim.active == want_active
        acted += want_active["path_speed"]
        other = svd(robot.jacobian(q + 0.3))
        differs += not np.allclose(lim.apply(q, qd, prev, J, 2e-3, svd=other), want, rtol=1e-9, atol=1e-12)
    assert acted > 10 and differs > 10, (acted, differs)


def test_loop_shares_the_gamma_schedules_svd_with_the_limits():
    """Where the γ schedule takes J's SVD (near and at a singular pose) the limits stage is handed that same
    decomposition (one SVD per cycle for both); held at the singular pose the schedule mostly spares it (its
    certificate from a nearby J's) and the path speed limit takes J⁺ its own way (J's LQ factorization); either way
    the cycle's reference is the one the limits give with their own."""
    import copy

    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop import build_loop
    from fdcontrol.model.robot import HOME

    robot = ROBOTS["ur10"]
    sim = SimulatedRobot(robot, dt=2e-3, q0=np.array(HOME["ur10"]))
    loop = build_loop(driver=sim, robot=robot, rate=500.0)
    seen = []
    apply, twin = loop.limits.apply, copy.deepcopy(loop.limits)

    def spy(q, qd, prev, J, dt, period=None, svd=None, conf=None):
        seen.append(svd)
        assert svd is loop.config.known_svd()  # the schedule's, this cycle's, or none
        out = apply(q, qd, prev, J, dt, period, svd=svd, conf=conf)
        np.testing.assert_allclose(out, twin.apply(q, qd, prev, J, dt, period), rtol=1e-9, atol=1e-12)
        return out

    loop.limits.apply = spy
    loop.set_wrench([5.0, -3.0, 2.0, 0.1, 0.0, 0.2], t=1e12)  # held: the arm ends stretched, singular
    for _ in range(3000):
        loop.step(now=0.0)
    assert loop.state.gamma == loop.solver.mapping.gamma0  # at the singularity: the regularizing γ
    assert sum(x is not None for x in seen) > 100  # the schedule's decompositions, handed on as they are
    assert sum(x is not None for x in seen[-1000:]) < 100  # held there: mostly spared


# ------------------------------------------------------------------------- the path limits alone, at their edges
class _CountingRobot:
    """A robot whose J̇(q, q̇)q̇ counts its evaluations (the path speed limit's cost per cycle)."""

    def __init__(self, robot: RobotModel) -> None:
        self.robot, self.calls = robot, 0

    def jacobian_rate(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        self.calls += 1
        return self.robot.jacobian_rate(q, qd)


def test_path_speed_does_nothing_and_computes_nothing_at_rest_or_without_a_finite_velocity(ur10):
    """At rest, with a non-finite q̇ or without a Jacobian the path speed limit leaves q̇ as it is, says it
    did not act, and never evaluates J̇ (one forward-kinematics pass per cycle only while moving)."""
    from fdcontrol.limits import Cycle, PathSpeed

    robot = _CountingRobot(ur10)
    lim = PathSpeed(robot, np.full(6, 4.0))  # type: ignore[arg-type]
    q = np.full(6, 0.3)
    J = ur10.jacobian(q)
    for qd, jac in (([0.0] * 6, J), ([math.inf, 0, 0, 0, 0, 0], J), ([math.nan, 1, 0, 0, 0, 0], J),
                    ([0.5] * 6, None)):
        out = list(qd)
        with np.errstate(invalid="ignore"):  # J·inf meets 0·inf: a NaN speed, refused like the rest
            assert lim.apply(Cycle(q, np.zeros(6), jac, 0.002), out) is False
        assert out == qd or (not math.isfinite(qd[0]) and out[1:] == qd[1:])
    assert robot.calls == 0
    fast = [2.0] * 6  # and it does act, and evaluate J̇, on a fast move
    assert lim.apply(Cycle(q, np.zeros(6), J, 0.002), fast) is True and robot.calls == 1
    assert 0 < fast[0] < 2.0 and len(set(fast)) == 1  # scaled uniformly


class _FixedRate:
    """A robot whose J̇(q, q') q' is a fixed vector (closed forms for the path speed limit), counting calls."""

    def __init__(self, rate: list[float]) -> None:
        self.rate = np.array(rate, dtype=float)
        self.calls = 0

    def jacobian_rate(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        self.calls += 1
        return self.rate.copy()


def test_path_speed_at_its_edges():
    """Closed forms with J = I (so q'' = −J⁺ J̇q' is minus the robot's fixed rate) and a = 4, reserve 1: the
    cap is √(a / max|q''|). A tip speed exactly at the cap is within the limit (not acted); a tip speed of
    1e-9 m/s counts as rest (J̇ never evaluated); q'' = 0 (a path without curvature) caps nothing and says so;
    a non-finite q'' leaves q̇ alone; a direction whose singular value is at or below 1e-6 of the largest
    counts as singular (J⁺ leaves it out, as the compiled twin's J⁺ does), so J̇ along it caps nothing."""
    from fdcontrol.limits import Cycle, PathSpeed

    def run(rate: list[float], qd: list[float], J: np.ndarray | None = None) -> tuple[bool, list[float], int]:
        robot = _FixedRate(rate)
        lim = PathSpeed(robot, np.full(6, 4.0), 1.0)  # type: ignore[arg-type]
        out = list(qd)
        with np.errstate(invalid="ignore"):
            acted = lim.apply(Cycle(np.zeros(6), np.zeros(6), np.eye(6) if J is None else J, 0.002), out)
        return acted, out, robot.calls

    bend = [1.0, 0, 0, 0, 0, 0]  # |q''_0| = 1: cap = √(4 / 1) = 2
    assert run(bend, [2.0, 0, 0, 0, 0, 0]) == (False, [2.0, 0, 0, 0, 0, 0], 1)  # exactly at the cap
    acted, out, _ = run(bend, [4.0, 0, 0, 0, 0, 0])  # twice the cap: scaled onto it
    assert acted is True and out == [2.0, 0, 0, 0, 0, 0]
    assert run(bend, [1e-9, 0, 0, 0, 0, 0]) == (False, [1e-9, 0, 0, 0, 0, 0], 0)  # rest: nothing computed
    assert run([0.0] * 6, [4.0, 0, 0, 0, 0, 0]) == (False, [4.0, 0, 0, 0, 0, 0], 1)  # a straight path
    assert run([math.inf, 0, 0, 0, 0, 0], [4.0, 0, 0, 0, 0, 0])[:2] == (False, [4.0, 0, 0, 0, 0, 0])
    assert run([math.nan, 0, 0, 0, 0, 0], [4.0, 0, 0, 0, 0, 0])[:2] == (False, [4.0, 0, 0, 0, 0, 0])
    near = np.diag([1.0, 1, 1, 1, 1, 1e-8])  # σ_min / σ_max = 1e-8 ≤ 1e-6: singular
    assert run([0, 0, 0, 0, 0, 1e-3], [4.0, 0, 0, 0, 0, 0], near) == (False, [4.0, 0, 0, 0, 0, 0], 1)
    # at 1e-5 it is not: q''_5 = 1e-3 / 1e-5 = 100 caps at √(4 / 100) = 0.2
    acted, out, _ = run([0, 0, 0, 0, 0, 1e-3], [4.0, 0, 0, 0, 0, 0], np.diag([1.0, 1, 1, 1, 1, 1e-5]))
    assert acted is True and out[0] == pytest.approx(0.2, rel=1e-12) and out[1:] == [0.0] * 5


def test_path_acceleration_at_its_edges():
    """Closed forms: a change of exactly a·dt is within the limit (not acted); where the joints' σ intervals
    meet in one point, that σ scales the reference; where they miss each other it is left to the
    acceleration limit."""
    from fdcontrol.limits import Cycle, PathAcceleration

    lim = PathAcceleration(np.array([0.5, 0.5]))  # a·dt = 0.5 exactly at dt = 1
    qd = [0.5, -0.5]
    assert lim.apply(Cycle(np.zeros(2), np.zeros(2), None, 1.0), qd) is False and qd == [0.5, -0.5]
    # joint 0: |σ·1 − 0| ≤ 0.5 → σ ∈ [−0.5, 0.5]; joint 1: |σ·1 − 1| ≤ 0.5 → σ ∈ [0.5, 1.5]: σ = 0.5
    qd = [1.0, 1.0]
    assert lim.apply(Cycle(np.zeros(2), np.array([0.0, 1.0]), None, 1.0), qd) is True and qd == [0.5, 0.5]
    # joint 1 needs σ ≥ 0.6: no σ for both, the reference stays for the acceleration limit
    qd = [1.0, 1.0]
    assert lim.apply(Cycle(np.zeros(2), np.array([0.0, 1.1]), None, 1.0), qd) is False and qd == [1.0, 1.0]
    # a joint asked to rest exactly a·dt from its previous reference is within reach for any σ: joint 1 alone
    # sets σ ∈ [−0.25, 0.25], so σ = 0.25
    qd = [0.0, 2.0]
    assert lim.apply(Cycle(np.zeros(2), np.array([0.5, 0.0]), None, 1.0), qd) is True and qd == [0.0, 0.5]


# ------------------------------------------------------------------------- SafetyLimits: names, fields, refusals
def test_limit_names_are_put_in_their_order_and_refused_by_exact_reason():
    from fdcontrol.limits.safety import check_limit_names

    assert check_limit_names(["acceleration", "velocity", "position"]) == ("position", "velocity", "acceleration")
    assert check_limit_names(reversed(DEFAULT_LIMITS)) == ("cartesian", "position", "velocity", "path_speed",
                                                           "path_acceleration", "acceleration")
    with pytest.raises(ValueError, match=r"^limit 'velocity' given more than once$"):
        check_limit_names(["position", "velocity", "acceleration", "velocity"])
    with pytest.raises(ValueError, match=r"^limit 'position', 'velocity' given more than once$"):
        check_limit_names(["velocity", "position", "velocity", "acceleration", "position"])
    with pytest.raises(ValueError, match=r"^unknown limit 'nope'; expected one of cartesian, "):
        check_limit_names(["position", "velocity", "acceleration", "nope"])
    for name in ("position", "velocity", "acceleration"):
        rest = [n for n in ("position", "velocity", "acceleration") if n != name]
        reason = LIMITS.get(name).required
        with pytest.raises(ValueError, match=f"^the '{name}' limit may not be left out: {reason}$".replace("(", r"\(")
                           .replace(")", r"\)").replace("+", r"\+").replace(".", r"\.").replace("[", r"\[")
                           .replace("]", r"\]")):
            check_limit_names(rest)


def test_safety_limits_compose_refuses_a_limit_twice_and_reads_the_parameters_it_was_given(ur10):
    p = PositionEnvelope(np.array([-1.0]), np.array([1.0]), np.array([2.0]), np.array([1.0]))
    with pytest.raises(ValueError, match=r"^limit 'velocity' given more than once$"):
        SafetyLimits.compose([p, JointVelocity(np.array([1.0])), JointVelocity(np.array([2.0])),
                              JointAcceleration(np.array([2.0]))])
    active: dict[str, bool] = {}
    lim = SafetyLimits(np.array([-1.0, -2.0]), np.array([1.0, 2.0]), 0.7, np.array([3.0, 4.0]),
                       max_linear_speed=0.2, max_angular_speed=0.6, recovery_speed=0.3, active=active)
    assert lim.names == BASIC_LIMITS and lim.active is active
    assert lim.lower.tolist() == [-1.0, -2.0] and lim.upper.tolist() == [1.0, 2.0]
    assert lim.max_velocity.tolist() == [0.7, 0.7] and lim.position.max_velocity.tolist() == [0.7, 0.7]
    assert lim.max_acceleration.tolist() == [3.0, 4.0] and lim.position.max_acceleration.tolist() == [3.0, 4.0]
    assert (lim.max_linear_speed, lim.max_angular_speed, lim.recovery_speed) == (0.2, 0.6, 0.3)
    lim.apply(np.zeros(2), np.array([1.0, 0.0]), np.zeros(2), np.zeros((6, 2)), 0.002)  # within the envelope
    assert active == {"cartesian": False, "position": False, "velocity": True, "acceleration": True}
    # the setters reach the limits that use the value (the position envelope reads v_max and a_max too)
    lim.max_linear_speed, lim.max_angular_speed, lim.recovery_speed = 0.1, 0.4, 0.5
    assert (lim.cartesian.max_linear_speed, lim.cartesian.max_angular_speed, lim.position.recovery) == (0.1, 0.4, 0.5)
    lim.max_velocity = 0.25
    assert lim.velocity.max_velocity.tolist() == [0.25, 0.25] == lim.position.max_velocity.tolist()
    lim.max_acceleration = [1.0, 2.0]
    assert lim.acceleration.max_acceleration.tolist() == [1.0, 2.0] == lim.position.max_acceleration.tolist()
    lim.lower, lim.upper = [-0.5, -0.5], [0.5, 0.5]
    assert lim.position.lower.tolist() == [-0.5, -0.5] and lim.position.upper.tolist() == [0.5, 0.5]
    assert lim.position.lower.dtype == float and lim.position.upper.dtype == float
    # and the compiled path reads the new values, 0.5 rad from the upper limits: the envelope √(2·0.5·a·0.5)
    # = [0.707, 1] rad/s, scaled uniformly into 0.25 rad/s = [0.177, 0.25], joint 0 then braked from its
    # previous 0.25 by a·dt = 0.002 only
    out = lim.apply(np.zeros(2), np.array([5.0, 5.0]), np.array([0.25, 0.25]), np.zeros((6, 2)), 0.002)
    assert out.tolist() == pytest.approx([0.25 - 0.002, 0.25], abs=1e-12)
    lim.recovery_speed = 0.0
    with pytest.raises(ValueError, match=r"^recovery_speed must be in \(0, 1\]$"):
        lim.validate()


def test_safety_limits_refusals_name_the_problem(ur10):
    three = SafetyLimits.from_robot(ur10, limits=("position", "velocity", "acceleration"))
    assert three.cartesian is None and three.max_linear_speed == math.inf and three.max_angular_speed == math.inf
    for field in ("max_linear_speed", "max_angular_speed"):
        with pytest.raises(ValueError, match=r"^the Cartesian speed limit is not composed \(settings limits\)$"):
            setattr(three, field, 0.3)
    lim = SafetyLimits.from_robot(ur10)
    with pytest.raises(ValueError, match=r"^the limits need the Jacobian J$"):
        lim.apply(np.zeros(6), np.zeros(6), np.zeros(6), None, 0.002)
    with pytest.raises(ValueError, match=r"^q has 5 entries, the limits 6$"):
        lim.apply(np.zeros(5), np.zeros(6), np.zeros(6), ur10.jacobian(np.zeros(6)), 0.002)
    lim.position.upper = np.ones(5)  # a replaced vector of the wrong length: refused when packed
    with pytest.raises(ValueError, match=r"^every per-joint limit must have 6 entries$"):
        lim.apply(np.zeros(6), np.zeros(6), np.zeros(6), ur10.jacobian(np.zeros(6)), 0.002)
    with pytest.raises(ValueError, match=r"^max_velocity must be a scalar or have 2 entries, got shape \(3,\)$"):
        SafetyLimits(np.zeros(2), np.ones(2), np.ones(3), 1.0)
    with pytest.raises(ValueError, match=r"^max_acceleration must be a scalar or have 2 entries, got shape \(3,\)$"):
        SafetyLimits(np.zeros(2), np.ones(2), 1.0, np.ones(3))


@pytest.mark.parametrize("dt", [1e-3, 4e-3])
def test_position_envelope_boxes_are_the_documented_ones(dt):
    """The envelope and hard box of PositionEnvelope against its docstring's formulas, written out here, at
    joints inside (in the middle, within the braking distance, within one step of a limit), exactly at a limit
    and beyond one (by less and by more than a recovery step)."""
    from fdcontrol.limits import Cycle

    m, rec = 0.5, 0.2
    lower, upper = -1.0, 1.0
    amax, vmax = 3.0, 2.0
    step = rec * vmax * dt  # how far the recovery speed moves in one cycle
    qs = [0.0, 0.9, -0.95, upper - 1e-7, lower + 1e-7, upper, lower, upper + 0.3 * step, lower - 0.3 * step,
          upper + 5 * step, lower - 5 * step]
    n = len(qs)
    q = np.array(qs)
    lim = PositionEnvelope(np.full(n, lower), np.full(n, upper), np.full(n, amax), np.full(n, vmax), rec, m)
    c = Cycle(q, np.zeros(n), None, dt)
    qd = [0.0] * n
    hit = lim.apply(c, qd)
    assert hit  # the joints beyond a limit are driven back
    for j, x in enumerate(qs):
        du, dl = upper - x, x - lower
        if du < 0:
            want_lo, want_hi = -min(rec * vmax, -du / dt), 0.0
            assert qd[j] == pytest.approx(want_lo, rel=1e-12), j  # set to the lower end: back towards the limit
        elif dl < 0:
            want_lo, want_hi = 0.0, min(rec * vmax, -dl / dt)
            assert qd[j] == pytest.approx(want_hi, rel=1e-12), j
        else:
            want_lo, want_hi = -min(math.sqrt(2 * m * amax * dl), dl / dt), min(math.sqrt(2 * m * amax * du), du / dt)
            assert qd[j] == 0.0, j  # inside: at rest is within the envelope, left alone
        assert c.lo[j] == pytest.approx(want_lo, rel=1e-12, abs=1e-300), j
        assert c.hi[j] == pytest.approx(want_hi, rel=1e-12, abs=1e-300), j
        assert c.hard_lo[j] == pytest.approx(-max(dl, 0.0) / dt, rel=1e-12, abs=1e-300), j
        assert c.hard_hi[j] == pytest.approx(max(du, 0.0) / dt, rel=1e-12, abs=1e-300), j
    # inside, a velocity within the envelope (or on its end) is left alone and one beyond it is put on its end
    inside = [0, 1, 2, 3, 4]
    for scale, acts in ((0.999, False), (1.0, False), (1.001, True)):
        sub = PositionEnvelope(np.full(5, lower), np.full(5, upper), np.full(5, amax), np.full(5, vmax), rec, m)
        probe = Cycle(q[inside], np.zeros(5), None, dt)
        sub.apply(probe, [0.0] * 5)
        for side in (probe.hi, probe.lo):
            qd = [scale * v for v in side]
            assert sub.apply(Cycle(q[inside], np.zeros(5), None, dt), qd) is acts
            assert qd == pytest.approx([scale * v if not acts else v for v in side], rel=1e-12)


def test_a_reference_exactly_at_a_limit_is_not_limited():
    """Never act when inside: a joint exactly at its velocity limit, a change of exactly a·dt, a tip exactly at
    its speed limit are within the limits — left as they are, and the limit says it did not act."""
    from fdcontrol.limits import Cycle

    c = Cycle(np.zeros(2), np.zeros(2), None, 0.5)
    qd = [0.5, -0.25]
    assert JointVelocity(np.array([0.5, 0.5])).apply(c, qd) is False and qd == [0.5, -0.25]
    qd = [1.0, -0.5]  # a·dt = 2 · 0.5 = 1 from rest
    assert JointAcceleration(np.array([2.0, 2.0])).apply(c, qd) is False and qd == [1.0, -0.5]
    J = np.zeros((6, 2))
    J[0, 0], J[5, 1] = 1.0, 1.0
    qd = [0.5, 1.5]
    assert CartesianSpeed(0.5, 1.5).apply(Cycle(np.zeros(2), np.zeros(2), J, 0.5), qd) is False and qd == [0.5, 1.5]


def test_path_limits_never_speed_up_and_refuse_bad_parameters_by_exact_message(ur10):
    """σ ∈ [0, 1]: a joint that could only keep within a·dt by going faster than asked (σ ≥ 1.1) is left to the
    acceleration limit, never sped up; the parameters come from the settings and are refused by name."""
    from types import SimpleNamespace

    from fdcontrol.limits import Cycle, PathAcceleration, PathSpeed

    qd = [1.0]
    assert PathAcceleration(np.array([0.5])).apply(Cycle(np.zeros(1), np.array([1.6]), None, 1.0), qd) is False
    assert qd == [1.0]
    p = SimpleNamespace(max_joint_acceleration=3.0, path_speed_reserve=0.25)
    ps = PathSpeed.from_settings(ur10, p)
    assert ps.reserve == 0.25 and ps.max_acceleration.tolist() == [3.0] * 6
    assert PathSpeed.from_settings(ur10, SimpleNamespace(max_joint_acceleration=3.0)).reserve == 0.5
    assert PathAcceleration.from_settings(ur10, p).max_acceleration.tolist() == [3.0] * 6
    for cls in (PathSpeed, PathAcceleration):
        wrong = r"^max_acceleration must be a scalar or have 6 entries, got shape \(2,\)$"
        with pytest.raises(ValueError, match=wrong):
            cls.from_settings(ur10, SimpleNamespace(max_joint_acceleration=np.ones(2)))
        with pytest.raises(ValueError, match=r"^max_acceleration must be finite and > 0 for every joint$"):
            cls.from_settings(ur10, SimpleNamespace(max_joint_acceleration=0.0))
    for bad in (0.0, 1.5, math.inf, math.nan, -0.1):
        with pytest.raises(ValueError, match=r"^path_speed_reserve must be in \(0, 1\]$"):
            PathSpeed(ur10, np.full(6, 3.0), bad).validate()
    PathSpeed(ur10, np.full(6, 3.0), 1.0).validate()  # the end of the range is allowed


def test_safety_limits_defaults_are_the_services():
    """Built without them, the tip speeds and the recovery speed are the service's defaults (the declared
    parameters), also what LimitParams says."""
    from fdcontrol.limits.safety import PARAMS, LimitParams

    declared = {p.name: p.default for p in PARAMS}
    lim = SafetyLimits(np.array([-1.0]), np.array([1.0]), 1.0, 2.0)
    assert lim.max_linear_speed == declared["max_linear_speed"] == LimitParams().max_linear_speed == 0.5
    assert lim.max_angular_speed == declared["max_angular_speed"] == LimitParams().max_angular_speed == 1.5
    assert lim.recovery_speed == LimitParams().recovery_speed == 0.1


@pytest.mark.parametrize("compiled", [True, False])
def test_a_set_with_the_jerk_limit_passes_every_input_and_the_period_to_its_limits(compiled):
    """A set with the jerk limit, by the compiled twin and by the classes' loops. Closed form, one joint, j_max =
    1 rad/s³, a_max = 10 rad/s², the other limits far away, a far target 100 rad/s: from rest the jerk limit
    gives q̇ = j·dt = 1; then a dt of 1.6 periods of 1 s is a missed robot tick — two ticks of 0.8 s, the first
    filled by the robot at a = 1 (q̇ 1.8), then a ≤ 1 + 0.8: q̇ = 1.8 + 1.8·0.8 = 3.24. Without the period it
    would be one tick of 1.6 s: q̇ = 1 + 2.6·1.6 = 5.16. The composed limits say which acted."""
    from fdcontrol.limits import JointJerk

    def composed() -> SafetyLimits:
        big, acc = np.array([1e6]), np.array([10.0])
        return SafetyLimits.compose([CartesianSpeed(0.5, 1.5), PositionEnvelope(-big, big, acc, np.array([1e3])),
                                     JointVelocity(np.array([1e3])), JointAcceleration(acc),
                                     JointJerk(np.array([1.0]), acc)])

    J = np.zeros((6, 1))
    J[0, 0] = 1e-3  # a tip speed of 1 mm/s per rad/s: within the Cartesian limit at these speeds
    for period, expected in ((1.0, 3.24), (None, 5.16)):
        lim = composed()
        assert lim.names == ("cartesian", "position", "velocity", "acceleration", "jerk")
        if compiled:
            pytest.importorskip("numba")
            assert lim._compiled is not None
        else:
            lim._compiled = None
        out = lim.apply(np.array([0.5]), np.array([100.0]), np.zeros(1), J, 1.0, 1.0)
        assert out.tolist() == [1.0]
        assert lim.active == {"cartesian": False, "position": False, "velocity": False, "acceleration": True,
                              "jerk": True}
        out = lim.apply(np.array([0.5]), np.array([100.0]), np.array([1.0]), J, 1.6, period)
        assert out[0] == pytest.approx(expected, rel=1e-12), period
    lim = composed()
    if not compiled:
        lim._compiled = None
    why = "the limits need" if compiled else "the Cartesian speed limit needs"
    with pytest.raises(ValueError, match=rf"^{why} the Jacobian J$"):
        lim.apply(np.zeros(1), np.ones(1), np.zeros(1), None, 1e-3)


#: each parameter vector the compiled twin reads: (the limit holding it, its attribute, a new value from the old)
_VECTORS = (("position", "lower", lambda v, lo, hi: v + 0.3 * (hi - lo)),
            ("position", "upper", lambda v, lo, hi: v - 0.3 * (hi - lo)),
            ("position", "max_acceleration", lambda v, lo, hi: 0.01 * v),
            ("position", "max_velocity", lambda v, lo, hi: 0.2 * v),
            ("velocity", "max_velocity", lambda v, lo, hi: 0.05 * v),
            ("acceleration", "max_acceleration", lambda v, lo, hi: 0.1 * v),
            ("path_acceleration", "max_acceleration", lambda v, lo, hi: 0.1 * v),
            ("path_speed", "max_acceleration", lambda v, lo, hi: 1e-4 * v))


@pytest.mark.parametrize("how", ["replaced", "in place"])
@pytest.mark.parametrize(("holder", "attr", "new"), _VECTORS, ids=[f"{h}.{a}" for h, a, _ in _VECTORS])
def test_compiled_twin_reads_each_parameter_vector_changed_alone(ur10, holder, attr, new, how):
    """One parameter vector of the default six changed — a new array, or the array the limit held written in
    place after a cycle — and nothing else: the compiled path gives what the classes' float loops give with
    that value (limits built afresh with it, base.run), on arm states inside and beyond the limits where the
    change matters."""
    from fdcontrol.limits import run

    lo, hi, dt = ur10.limits.lower, ur10.limits.upper, 0.002
    rng = np.random.default_rng(11)
    states = []
    for _ in range(25):
        q = lo + rng.uniform(-0.05, 1.05, 6) * (hi - lo)
        qd = rng.uniform(-2.0, 2.0, 6)
        off = rng.choice([0.0, 1e-4, 1e-2])  # the previous reference along q̇ or off it
        states.append((q, qd, rng.uniform(0.0, 1.1) * qd + rng.normal(0.0, off, 6), ur10.jacobian(q)))
    lim, fresh = SafetyLimits.from_robot(ur10), SafetyLimits.from_robot(ur10)
    held = getattr(getattr(lim, holder), attr)
    value = new(held.copy(), lo, hi)
    before = [lim.apply(*s, dt) for s in states]  # cycles with the old value first
    for x in (lim, fresh):
        if how == "replaced":
            setattr(getattr(x, holder), attr, value.copy())
        else:  # (an array the limits share, e.g. one a_max for all: every limit reading it sees the change)
            (held if x is lim else getattr(getattr(x, holder), attr))[:] = value  # lim's: taken before those cycles
    changed = 0
    for s, b in zip(states, before, strict=True):
        want_active: dict[str, bool] = {}
        want = run(fresh.limits, *s, dt, want_active)
        got = lim.apply(*s, dt)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        assert lim.active == want_active
        changed += not np.allclose(b, want, rtol=1e-6, atol=1e-9)
    assert changed >= 3  # the states do tell the old value from the new
    for h, a, _ in _VECTORS:  # and every limit holds the value it reads, the changed one and the others
        np.testing.assert_array_equal(getattr(getattr(lim, h), a), getattr(getattr(fresh, h), a), err_msg=f"{h}.{a}")


def test_a_limit_without_parameters_is_built_and_validated_by_the_base_from_settings(ur10):
    """A limit (a plugin's) that reads no settings needs no ``from_settings`` of its own: the base builds it and
    validates it, and it runs, alone and then in the hard box, through ``limit``."""
    from fdcontrol.limits.safety import LimitParams

    class HoldFirst(Limit):
        """q̇_0 ≤ 0 and ≥ 0: the first joint held."""

        name = "hold_first"
        refuse = False

        def validate(self) -> None:
            if self.refuse:
                raise ValueError("hold_first refused")

        def apply(self, c, qd):
            hit = qd[0] != 0.0
            qd[0] = 0.0
            return hit

    lim = HoldFirst.from_settings(ur10, LimitParams())
    assert type(lim) is HoldFirst
    assert lim.limit(np.zeros(2), np.array([1.0, -2.0]), np.zeros(2), None, 0.002).tolist() == [0.0, -2.0]
    HoldFirst.refuse = True
    with pytest.raises(ValueError, match=r"^hold_first refused$"):
        HoldFirst.from_settings(ur10, LimitParams())


def test_the_compiled_path_computes_no_path_curvature_at_rest(ur10):
    """The default six compiled: J̇(q, q̇)q̇ (one forward-kinematics pass) is evaluated only while the q̇ the
    limits before the path speed limit leave moves: at rest the path speed limit costs nothing."""
    lim = SafetyLimits.from_robot(ur10)
    robot = _CountingRobot(ur10)
    lim.path_speed.robot = robot  # type: ignore[union-attr,assignment]
    q = np.full(6, 0.3)
    J = ur10.jacobian(q)
    for _ in range(3):
        lim.apply(q, np.zeros(6), np.zeros(6), J, 0.002)
    assert robot.calls == 0
    lim.apply(q, np.full(6, 0.001), np.zeros(6), J, 0.002)
    assert robot.calls == 1


def test_safety_limits_builders_read_their_defaults_and_the_active_record(ur10):
    """from_robot without arguments: the declared defaults (half the URDF velocity limits, 4 rad/s², the default
    six); from_settings with settings that name no limits: the default six; compose records into the dict it is
    given."""
    from types import SimpleNamespace

    from fdcontrol.limits.safety import PARAMS

    declared = {p.name: p.default for p in PARAMS}
    lim = SafetyLimits.from_robot(ur10)
    np.testing.assert_array_equal(lim.max_velocity, declared["velocity_scale"] * ur10.limits.velocity)
    np.testing.assert_array_equal(lim.max_velocity, 0.5 * ur10.limits.velocity)
    assert lim.max_acceleration.tolist() == [declared["max_joint_acceleration"]] * 6 == [4.0] * 6
    assert lim.names == check_order(DEFAULT_LIMITS)
    bare = SimpleNamespace(velocity_scale=0.3, max_joint_acceleration=2.0, max_linear_speed=0.2,
                           max_angular_speed=0.4)  # no ``limits``
    lim = SafetyLimits.from_settings(ur10, bare)
    assert lim.names == check_order(DEFAULT_LIMITS) and lim.max_acceleration.tolist() == [2.0] * 6
    active: dict[str, bool] = {}
    lim = SafetyLimits.compose(list(lim.limits), active)
    assert lim.active is active
    lim.apply(np.zeros(6), np.zeros(6), np.zeros(6), ur10.jacobian(np.zeros(6)), 0.002)
    assert active == dict.fromkeys(lim.names, False)


def check_order(names):
    from fdcontrol.limits.safety import check_limit_names

    return check_limit_names(names)


def test_per_joint_is_a_float_copy_of_the_right_length():
    """per_joint's contract: a float64 vector of n entries, a copy (an integer given stays a float where the
    limits write into it; the caller's array is not shared)."""
    from fdcontrol.limits.base import per_joint

    for value in (2, [1, 2, 3], np.array([1, 2, 3])):
        out = per_joint(value, 3, "x")
        assert out.dtype == np.float64 and out.shape == (3,)
        out[0] = 0.5
        assert out[0] == 0.5
    given_ = np.array([1.0, 2.0, 3.0])
    per_joint(given_, 3, "x")[0] = 9.0
    assert given_.tolist() == [1.0, 2.0, 3.0]


def test_velocity_and_acceleration_changed_in_place_reach_the_position_envelope():
    """One joint in [−1, 1], v_max 1 rad/s, a_max 2 rad/s², recovery 0.1, dt 2 ms. Changed in place through the
    fields, the envelope reads the new values too (closed forms): beyond the upper limit at q = 1.5 with v_max
    0.5 the joint comes back at −0.1·0.5 = −0.05 rad/s (from −0.05: no step); inside at q = 0.9 with a_max 0.5
    its speed towards the limit is capped at √(2·0.5·0.5·0.1) = √0.05 (from there: no step). The limits are built
    each from its own arrays, as from the settings: the composition makes the equal ones one."""
    def fresh() -> SafetyLimits:
        return SafetyLimits.compose([PositionEnvelope(np.array([-1.0]), np.array([1.0]), np.array([2.0]),
                                                      np.array([1.0]), 0.1),
                                     JointVelocity(np.array([1.0])), JointAcceleration(np.array([2.0]))])

    J = np.zeros((6, 1))
    lim = fresh()
    lim.max_velocity[0] = 0.5
    out = lim.apply(np.array([1.5]), np.array([-10.0]), np.array([-0.05]), J, 0.002)
    assert out[0] == pytest.approx(-0.05, rel=1e-12)
    lim = fresh()
    lim.max_acceleration[0] = 0.5
    v = math.sqrt(0.05)
    out = lim.apply(np.array([0.9]), np.array([10.0]), np.array([v]), J, 0.002)
    assert out[0] == pytest.approx(v, rel=1e-12)


def test_integer_parameter_vectors_are_read_as_floats():
    """Limits composed from integer vectors give what the same float vectors give, and a value written into
    them in place is kept as written (not truncated)."""
    def composed(dtype) -> SafetyLimits:
        v = {k: np.array(x, dtype=dtype) for k, x in (("lo", [-1, -2]), ("hi", [1, 2]), ("a", [2, 3]), ("v", [1, 1]))}
        return SafetyLimits.compose([PositionEnvelope(v["lo"], v["hi"], v["a"], v["v"]), JointVelocity(v["v"]),
                                     JointAcceleration(v["a"])])

    J = np.zeros((6, 2))
    for q, qd, prev in (([0.9, -1.9], [5.0, -5.0], [0.5, -0.5]), ([1.2, 0.0], [1.0, 1.0], [0.0, 0.9])):
        args = (np.array(q), np.array(qd), np.array(prev), J, 0.002)
        np.testing.assert_array_equal(composed(int).apply(*args), composed(float).apply(*args))
    lim = composed(int)
    lim.max_velocity[1] = 0.25
    out = lim.apply(np.zeros(2), np.array([0.0, 1.0]), np.array([0.0, 0.25]), J, 0.002)
    assert out.tolist() == [0.0, 0.25]


def test_a_vector_held_apart_and_written_in_place_after_cycles_reaches_the_compiled_path():
    """The position envelope's v_max (1 rad/s, the recovery speed's scale) and the velocity limit's (0.8) are two
    arrays. The velocity limit's array, taken before some cycles and written in place after them (0.1), is the
    one the next cycle reads: a far target from 0.1 rad/s stays at 0.1 (a·dt = 2 rad/s allows any step)."""
    lim = SafetyLimits.compose([PositionEnvelope(np.array([-10.0]), np.array([10.0]), np.array([1000.0]),
                                                 np.array([1.0])),
                                JointVelocity(np.array([0.8])), JointAcceleration(np.array([1000.0]))])
    held, J = lim.velocity.max_velocity, np.zeros((6, 1))
    for _ in range(3):
        assert lim.apply(np.zeros(1), np.array([5.0]), np.zeros(1), J, 0.002).tolist() == [0.8]
    held[0] = 0.1
    assert lim.apply(np.zeros(1), np.array([5.0]), np.array([0.1]), J, 0.002).tolist() == [0.1]


class _LastWord(Limit):
    """A plugin's limit after the workspace stop (order 47): keeps a copy of the cycle it is handed (q, the
    previous reference, J, dt, the period, both boxes) and halves q̇ of the last joint."""

    name, order = "last_word", 47.0

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def validate(self) -> None:
        pass

    def apply(self, c, qd):
        self.seen.append((np.array(c.q), np.array(c.prev), None if c.J is None else np.array(c.J), c.dt, c.period,
                          list(c.lo), list(c.hi), list(c.hard_lo), list(c.hard_hi)))
        qd[-1] *= 0.5
        return qd[-1] != 0.0


@pytest.fixture
def last_word():
    """_LastWord registered as a limit for one test."""
    LIMITS.register(_LastWord.name)(_LastWord)
    yield
    LIMITS._entries.pop(_LastWord.name)


@pytest.mark.parametrize("names", [(*BASIC_LIMITS, "narrow_after", "workspace", "last_word"),
                                   (*BASIC_LIMITS, "workspace", "last_word"),
                                   (*BASIC_LIMITS, "jerk", "last_word"),
                                   (*BASIC_LIMITS, "jerk")])
def test_compiled_twin_hands_the_limits_after_the_workspace_stop_the_cycle_the_classes_do(narrow_after, last_word,
                                                                                         names):
    """Plugins' limits before and after the workspace stop, and the jerk limit, on the compiled twin against the
    classes' float loops on a second set (base.run), for cycles of one period, a missed robot tick (dt 2 and
    1.5 periods: at 1.5 exactly still one tick, as the jerk limit's own apply counts them) and a cycle shorter
    than half a period: the same bits out, the same limits acted, and every plugin handed the same cycle — the
    same q, previous reference, J, dt and period, and the boxes as the limits before it left them. The general path
    (``_apply``: where the one call does not serve) on a third set, every cycle, gives the same again; the velocity
    limit lowered while moving (the previous reference outside the hard box, which only the last step applies) and
    a jerk limit reset midway (a stop) change nothing of that."""
    pytest.importorskip("numba")
    from fdcontrol.control.workspace import WorkspaceBox
    from fdcontrol.limits import WorkspaceStop, run

    robot = ROBOTS["ur10"]
    n, lo, hi, period = robot.dof, robot.limits.lower, robot.limits.upper, 1e-3
    rng = np.random.default_rng(11)
    q = lo + rng.uniform(0.3, 0.7, size=n) * (hi - lo)
    J = robot.jacobian(q)
    tip = robot.pose(q)[:3, 3]
    box = WorkspaceBox(tip - 2e-5, tip + 2e-5)

    def build() -> SafetyLimits:
        made = SafetyLimits.from_robot(robot, 0.5, 20.0, limits=tuple(
            x for x in names if x not in ("workspace", "narrow_after", "last_word")))
        extra: list[Limit] = [_NarrowAfter()] if "narrow_after" in names else []
        if "workspace" in names:
            extra.append(WorkspaceStop(robot, list(box.faces), 5.0))
        if "last_word" in names:
            extra.append(_LastWord())
        return SafetyLimits.compose([*made.limits, *extra]) if extra else made

    twin, loops, general = build(), build(), build()
    assert twin._compiled is not None and twin.names == loops.names
    loops._compiled = None
    prev = np.zeros(n)
    ticks = 0
    for k, m in enumerate((1, 1, 2, 1.5, 0.4, 1, 1.5, 2, 0.4, 1)):
        dt = m * period
        qd = rng.uniform(-1, 1, size=n) * (0.05 if k % 3 else 2.0)
        if k == 7 and "jerk" in names:  # a stop: the jerk limit forgets its history, in every set
            for x in (twin, loops, general):
                dict(zip(x.names, x.limits, strict=True))["jerk"].reset()
        if k == 5:  # the velocity limit lowered while moving: the previous reference lies outside the hard box
            for x in (twin, loops, general):
                x.max_velocity = 0.001 * x.max_velocity
        want_active: dict[str, bool] = {}
        want = run(loops.limits, q, qd, prev, J, dt, want_active, period)
        got = twin.apply(q, qd, prev, J, dt, period)
        np.testing.assert_array_equal(got, want, err_msg=f"cycle {k}, dt {m} periods")
        assert twin.active == want_active
        if general._stale:  # (as apply does first: a parameter set is packed)
            general._refresh()
        got = general._apply(q, qd, prev, J, dt, period, None, None)
        np.testing.assert_array_equal(got, want, err_msg=f"the general path: cycle {k}, dt {m} periods")
        assert general.active == want_active
        ticks += bool(want_active.get("workspace")) + bool(want_active.get("jerk"))
        if "last_word" in names:
            a, b, c = (dict(zip(x.names, x.limits, strict=True))["last_word"].seen for x in (twin, loops, general))
            assert len(a) == len(b) == len(c) == k + 1
            for x, y, z in zip(a[-1], b[-1], c[-1], strict=True):
                if isinstance(x, np.ndarray):
                    np.testing.assert_array_equal(x, y)
                    np.testing.assert_array_equal(z, y)
                else:
                    assert x == y == z
            assert a[-1][3] == dt and a[-1][4] == period
            np.testing.assert_array_equal(a[-1][2], J)
        prev = want
    assert ticks  # the workspace stop or the jerk limit did act


class _Before(Limit):
    """A plugin's limit before the acceleration limit (``order`` set per test): halves q̇ of joint 0 and counts
    the cycles it was run."""

    name, order = "before_acceleration", 38.0

    def __init__(self) -> None:
        self.runs = 0

    def validate(self) -> None:
        pass

    def apply(self, c, qd):
        self.runs += 1
        qd[0] *= 0.5
        return qd[0] != 0.0


@pytest.mark.parametrize("order", [5.0, 34.0, 38.0])
def test_a_plugins_limit_before_the_acceleration_limit_is_run_in_its_place(ur10, order, monkeypatch):
    """A limit of a plugin anywhere before the acceleration limit (first of all, between the path limits, just
    before the acceleration limit) is run every cycle in its place, by the classes' loops (the compiled twin
    knows only its own classes): the same bits and the same limits acted as base.run on a second set, and the
    plugin run once per cycle."""
    from fdcontrol.limits import run

    monkeypatch.setattr(_Before, "order", order)
    LIMITS.register(_Before.name)(_Before)
    try:
        def build() -> SafetyLimits:
            return SafetyLimits.compose([*SafetyLimits.from_robot(ur10).limits, _Before()])

        lim, ref = build(), build()
        names = lim.names
        assert names.index("before_acceleration") < names.index("acceleration")
        q, J = np.full(6, 0.3), ur10.jacobian(np.full(6, 0.3))
        rng = np.random.default_rng(5)
        prev = np.zeros(6)
        for k in range(8):
            qd = rng.uniform(-0.02, 0.02, size=6)
            want_active: dict[str, bool] = {}
            want = run(ref.limits, q, qd, prev, J, 0.002, want_active)
            got = lim.apply(q, qd, prev, J, 0.002)
            np.testing.assert_array_equal(got, want)
            assert lim.active == want_active
            assert dict(zip(names, lim.limits, strict=True))["before_acceleration"].runs == k + 1
            prev = want
    finally:
        LIMITS._entries.pop(_Before.name)


@pytest.mark.parametrize("names", [(*BASIC_LIMITS, "jerk"), (*BASIC_LIMITS, "narrow_after", "jerk")])
def test_a_jerk_limit_given_whole_numbers_after_it_was_built_limits_as_with_floats(ur10, narrow_after, names):
    """The jerk limit's max_jerk and max_acceleration replaced after it was built by integer arrays (whole
    numbers, as a caller may write them): the set limits exactly as with the same values as floats, and as the
    classes' float loops do, cycle after cycle (the compiled jerk takes float64 vectors only; the class takes
    the rest) — right after the acceleration limit (in the one call) and after a plugin's limit (run on the
    one call's result)."""
    pytest.importorskip("numba")
    from fdcontrol.limits import run

    def build(jerk, acc) -> SafetyLimits:
        lim = SafetyLimits.from_robot(ur10, limits=names)
        j = dict(zip(lim.names, lim.limits, strict=True))["jerk"]
        j.max_jerk, j.max_acceleration = jerk, acc
        return lim

    ints = (np.full(6, 40, dtype=np.int64), np.full(6, 3, dtype=np.int64))
    whole, floats, ref = build(*ints), build(*(x.astype(float) for x in ints)), build(*ints)
    ref._compiled = None
    q, J = np.full(6, 0.3), ur10.jacobian(np.full(6, 0.3))
    rng = np.random.default_rng(3)
    prev = np.zeros(6)
    acted = 0
    for _ in range(12):
        qd = rng.uniform(-1, 1, size=6)
        want_active: dict[str, bool] = {}
        want = run(ref.limits, q, qd, prev, J, 0.002, want_active)
        np.testing.assert_array_equal(whole.apply(q, qd, prev, J, 0.002), want)
        np.testing.assert_array_equal(floats.apply(q, qd, prev, J, 0.002), want)
        assert whole.active == floats.active == want_active
        acted += want_active["jerk"]
        prev = want
    assert acted  # the jerk limit did act


# ------------------------------------------------------------------------- the compiled J̇q̇ of the path speed limit
@pytest.mark.parametrize("name", ["ur10", "panda", "fr3", "planar2"])
def test_compiled_jdot_is_the_robots_to_rounding(name, rng):
    """The compiled twin computes the path speed limit's J̇(q, q̇)q̇ itself from the robot's chain
    (limits.compiled.chain / rate): for every shipped robot, on random q and q̇ from a crawl to 10 rad/s, what
    RobotModel.jacobian_rate (pinocchio) gives, to rounding; q̇ = 0 gives zeros."""
    pytest.importorskip("numba")
    from fdcontrol.limits.compiled import chain, rate

    robot = RobotModel.load(name)
    K = chain(robot)
    assert K is not None and K.shape == (robot.dof + 1, 15)
    for _ in range(300):
        q = robot.random_q(rng)
        qd = rng.normal(size=robot.dof) * rng.choice([1e-3, 1.0, 10.0])
        want = robot.jacobian_rate(q, qd)
        np.testing.assert_allclose(rate(q, qd, K), want, rtol=0, atol=1e-13 * max(1.0, np.abs(want).max()))
    assert not rate(q, np.zeros(robot.dof), K).any()


@pytest.mark.parametrize("names", [DEFAULT_LIMITS, tuple(x for x in DEFAULT_LIMITS if x != "cartesian")])
def test_a_robot_that_is_no_plain_chain_keeps_its_own_jdot(ur10, names):
    """A robot the compiled J̇q̇ does not take (a stand-in with its own jacobian_rate, a base not aligned with the
    world) gives no chain; the compiled twin then calls the robot's jacobian_rate between its two calls, once per
    moving cycle, and gives what the one-call path gives with the robot's chain, to rounding, the same limits
    acted — with the Cartesian speed limit and without it; the path speed limit given another robot at run time is
    noticed."""
    import copy

    pytest.importorskip("numba")
    from fdcontrol.limits.compiled import chain

    assert chain(_CountingRobot(ur10)) is None
    turned = copy.copy(ur10)
    turned._world_is_base = False
    assert chain(turned) is None
    one, two = SafetyLimits.from_robot(ur10, limits=names), SafetyLimits.from_robot(ur10, limits=names)
    assert one._chain_of is ur10 and one._chain is not None  # made with the limits, not in their first cycle
    counting = _CountingRobot(ur10)
    two.path_speed.robot = counting  # type: ignore[union-attr,assignment]
    rng = np.random.default_rng(3)
    q = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
    J = ur10.jacobian(q)
    moving = 0
    for k in range(300):
        qd = rng.normal(size=6) * rng.choice([0.0, 1e-3, 0.3, 3.0])
        prev = qd * rng.uniform(0.0, 1.2)
        if k % 10 == 9:  # a non-finite q̇ now and then: no J̇q̇ evaluated
            qd[k % 6] = (math.nan, math.inf, -math.inf)[k % 3]
        with np.errstate(invalid="ignore"):
            a, b = one.apply(q, qd, prev, J, 0.002), two.apply(q, qd, prev, J, 0.002)
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        if one.active.get("path_acceleration") and "cartesian" not in names:  # Δq̇ scaled onto a·dt: the
            # acceleration limit's ratio is 1 to rounding, and J̇q̇ computed another way may tip its flag either way
            # while the references agree (without the Cartesian speed limit; with the default limits the flags
            # agree exactly, and are asserted so)
            assert {**one.active, "acceleration": None} == {**two.active, "acceleration": None}
        else:
            assert one.active == two.active
        d = two._work[0]
        moving += bool(d.any() and np.isfinite(d).all())
        assert counting.calls == moving, k
    assert one._chain is not None and two._chain is None and moving > 100 and one.active["path_speed"] in (True, False)
    assert one._chain_of is ur10 and two._chain_of is counting  # each chain made once, not every cycle
    two.path_speed.robot = ur10  # type: ignore[union-attr]
    two.apply(q, np.full(6, 0.3), np.zeros(6), J, 0.002)
    assert two._chain is not None and counting.calls == moving


@pytest.mark.parametrize("name", ["ur10", "planar2"])
def test_the_path_speed_scratch_space_changes_no_bit(name, rng):
    """The compiled path speed limit solves J⁺ in the rows of the work space after the boxes (8 + 2N rows), never
    reading what they held before (NaN there); given a work space of the boxes alone (5 rows) it takes its own
    scratch space: the same references, bit for bit, and the same limits acted, on random states (J with fewer
    columns than rows too: the planar arm)."""
    pytest.importorskip("numba")
    robot = RobotModel.load(name)
    big, small = (SafetyLimits.from_robot(robot, max_acceleration=0.2) for _ in range(2))  # the path speed caps
    n = robot.dof
    assert big._work.shape == (8 + 2 * n, n)
    small._work = np.empty((5, n))
    lo, hi = robot.limits.lower, robot.limits.upper
    acted = 0
    for _ in range(300):
        q = lo + rng.uniform(0.05, 0.95, n) * (hi - lo)
        J = robot.jacobian(q)
        qd = rng.normal(size=n) * rng.choice([0.1, 1.0, 10.0])
        prev = qd * rng.uniform(0.0, 1.2)
        big._work[5:] = math.nan  # what the scratch space held before: never read
        a, b = big.apply(q, qd, prev, J, 0.002), small.apply(q, qd, prev, J, 0.002)
        assert a.tobytes() == b.tobytes() and big.active == small.active
        acted += big.active["path_speed"]
    assert acted > 0  # the path speed limit's J⁺ was solved


def test_compiled_jdot_of_a_chain_with_unaligned_and_other_axes(rng):
    """The chain the compiled J̇q̇ takes has revolute joints about any axis (pinocchio's unaligned revolute, RY here;
    rotated placements): the same J̇q̇ as RobotModel.jacobian_rate to rounding; a prismatic joint gives no chain."""
    pytest.importorskip("numba")
    import pinocchio as pin

    from fdcontrol.limits.compiled import chain, rate

    def arm(prismatic: bool) -> RobotModel:
        m, j = pin.Model(), 0
        axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
        for i in range(4):
            jm = pin.JointModelRevoluteUnaligned(axis) if i % 2 == 0 else pin.JointModelRY()
            if prismatic and i == 3:
                jm = pin.JointModelPZ()
            placement = pin.SE3(pin.utils.rpyToMatrix(0.1 * i, -0.2, 0.3), np.array([0.1, 0.2 * i, 0.3]))
            j = m.addJoint(j, jm, placement, f"j{i}")
            m.appendBodyToJoint(j, pin.Inertia.FromSphere(1.0, 0.05), pin.SE3.Identity())
        m.addFrame(pin.Frame("tip", j, 0, pin.SE3(np.eye(3), np.array([0.05, 0.0, 0.1])), pin.FrameType.OP_FRAME))
        m.addFrame(pin.Frame("base", 0, 0, pin.SE3.Identity(), pin.FrameType.OP_FRAME))
        return RobotModel(m, "base", "tip")

    robot = arm(False)
    K = chain(robot)
    assert K is not None
    for _ in range(300):
        q, qd = rng.uniform(-3.0, 3.0, 4), rng.normal(size=4)
        want = robot.jacobian_rate(q, qd)
        np.testing.assert_allclose(rate(q, qd, K), want, rtol=0, atol=1e-13 * max(1.0, np.abs(want).max()))
    assert chain(arm(True)) is None


@pytest.mark.parametrize("names", [DEFAULT_LIMITS, BASIC_LIMITS, (*BASIC_LIMITS, "jerk")])
def test_the_compiled_twin_names_the_reference_it_found_finite(ur10, names):
    """SafetyLimits.checked is the array apply returned when the one compiled call found it finite (the sum of its
    entries, as fdcontrol.model.spatial.finite sums them), else None: on random references with NaN and ±inf in
    the desired or the previous q̇ or in q it is that array exactly where finite() is true — with the jerk limit in
    the call too (its sum taken after the jerk limit and the hard box); without numba and for a robot that is no
    chain, None; the limits stage skips its own test only for that very array."""
    pytest.importorskip("numba")
    from fdcontrol.model.spatial import finite

    lim = SafetyLimits.from_robot(ur10, limits=names)
    rng = np.random.default_rng(11)
    lo, hi = ur10.limits.lower, ur10.limits.upper
    seen = {True: 0, False: 0}
    for k in range(1500):
        q = lo + rng.uniform(-0.1, 1.1, 6) * (hi - lo)
        J = ur10.jacobian(q)
        qd = rng.normal(size=6) * rng.choice([1e-3, 0.3, 10.0])
        prev = qd * rng.uniform(0.0, 1.2)
        if k % 3:
            (qd, prev, q)[k % 3 - 1 if k % 7 else 2][k % 6] = (math.nan, math.inf, -math.inf)[k % 5 % 3]
        with np.errstate(invalid="ignore"):
            out = lim.apply(q, qd, prev, J, 0.002)
        ok = finite(out)
        seen[ok] += 1
        assert (lim.checked is out) if ok else (lim.checked is None), (k, out)
    assert seen[True] > 100 and (seen[False] > 100 or "jerk" in names)  # (the jerk limit brakes a NaN to 0)
    two = SafetyLimits.from_robot(ur10, limits=names)
    two.path_speed = None if "path_speed" not in names else two.path_speed
    if two.path_speed is not None:
        two.path_speed.robot = _CountingRobot(ur10)  # type: ignore[assignment]  # no chain: two calls
        two.apply(q, np.full(6, 0.1), np.zeros(6), J, 0.002)
        assert two.checked is None
    two._compiled = None  # numba missing: the classes
    two.apply(q, np.full(6, 0.1), np.zeros(6), J, 0.002)
    assert two.checked is None


def test_the_cartesian_twist_is_summed_from_the_left(rng):
    """CartesianSpeed.twist, what the class and the compiled twin both sum: each row of J times q̇ summed left to
    right from 0.0 (the same bits as that loop written out), numpy's J q̇ to rounding; lengths that do not match
    raise as numpy's product does."""
    for n in (2, 6, 7):
        for _ in range(200):
            J = rng.normal(size=(6, n)) * 10.0 ** rng.integers(-3, 3)
            qd = (rng.normal(size=n) * 10.0 ** rng.integers(-3, 3, n)).tolist()
            want = []
            for row in J.tolist():
                s = 0.0
                for a, b in zip(row, qd, strict=True):
                    s = s + a * b
                want.append(s)
            t = CartesianSpeed.twist(J, qd)
            assert t == want and all(type(x) is float for x in t)
            np.testing.assert_allclose(t, J @ np.array(qd), rtol=1e-12, atol=1e-12 * np.abs(J).max() * max(
                map(abs, qd)))
        with pytest.raises(ValueError):
            CartesianSpeed.twist(J, qd + [1.0])
    assert CartesianSpeed.twist(np.eye(6, dtype=int), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


@pytest.mark.parametrize("names", [(*BASIC_LIMITS, "jerk"), (*BASIC_LIMITS, "jerk", "workspace"),
                                   ("position", "velocity", "acceleration", "jerk")])
def test_the_jerk_limit_in_the_one_call_is_the_jerk_limit_after_it(names):
    """The jerk limit right after the acceleration limit runs inside the compiled call (limits_jerk) — but not where
    the caller hands over J's SVD: then the call before it and the jerk limit after it, as any limit after the
    acceleration limit. Without the path speed limit nothing reads the SVD, so the two twins must agree bit for bit,
    cycle after cycle: the references, which limits acted, the jerk limit's history — through missed robot ticks
    (dt a multiple of the period), stops to rest and NaN in the desired velocity."""
    pytest.importorskip("numba")
    robot = ROBOTS["panda"]
    n = robot.dof
    one, two = (SafetyLimits.from_robot(robot, max_acceleration=3.0, limits=names) for _ in range(2))
    assert one._jerk is not None and one._compiled is not None
    rng = np.random.default_rng(12)
    q = 0.5 * (robot.limits.lower + robot.limits.upper)
    J = robot.jacobian(q)
    svd = np.linalg.svd(J, full_matrices=False)
    prev_a = prev_b = np.zeros(n)
    period, acted, nan = 1e-3, 0, 0
    for k in range(1500):
        qd = rng.normal(size=n) * rng.choice([0.0, 0.05, 0.5, 3.0])
        if k % 97 == 5:
            qd[k % n] = math.nan
            nan += 1
        dt = period * (1 + (k % 13 == 0) + 2 * (k % 29 == 0))  # a missed tick now and then
        a = one.apply(q, qd, prev_a, J, dt, period)
        b = two.apply(q, qd, prev_b, J, dt, period, svd)
        assert a.tobytes() == b.tobytes(), k
        assert one.active == two.active, k
        assert one._jerk._state.tobytes() == two._jerk._state.tobytes(), k
        acted += one.active["jerk"]
        prev_a, prev_b = (np.zeros(n), np.zeros(n)) if k % 200 == 199 else (a, b)  # a stop to rest
    assert acted > 100 and nan > 10


#: each parameter the compiled call reads from its packed array, set at run time: (holder, attribute, new value
#: from the old, how) — holder None: SafetyLimits' own field
_SET_AT_RUN_TIME = (("cartesian", "max_linear_speed", lambda v: 0.05, "set"),
                    ("cartesian", "max_angular_speed", lambda v: 0.05, "set"),
                    (None, "max_linear_speed", lambda v: 0.02, "set"),
                    ("position", "recovery", lambda v: 0.9, "set"),
                    ("position", "margin", lambda v: 0.02, "set"),
                    ("jerk", "max_jerk", lambda v: 0.01 * v, "set"),
                    ("jerk", "max_jerk", lambda v: 0.01 * v, "in place"),
                    ("jerk", "max_acceleration", lambda v: 0.05 * v, "set"),
                    ("jerk", "max_acceleration", lambda v: 0.05 * v, "in place"),
                    ("jerk", "reset", None, "call"))


@pytest.mark.parametrize(("holder", "attr", "new", "how"), _SET_AT_RUN_TIME,
                         ids=[f"{h}.{a}-{w}" for h, a, _, w in _SET_AT_RUN_TIME])
def test_a_parameter_set_at_run_time_reaches_the_next_compiled_cycle(ur10, holder, attr, new, how):
    """The compiled call reads its scalar parameters, the jerk limit's vectors and history from one packed array:
    a parameter set between two cycles (a new value, a vector written in place, the jerk limit reset) is the one
    the very next cycle reads — the compiled set gives, cycle by cycle, what the classes' float loops give with the
    same change (bit for bit: no path speed limit), the same limits acted, the same jerk history; and the change
    matters (a set without it differs)."""
    pytest.importorskip("numba")
    names = ("cartesian", "position", "velocity", "acceleration", "path_acceleration", "jerk")
    twin, loops, old = (SafetyLimits.from_robot(ur10, 0.8, 6.0, limits=names, max_joint_jerk=500.0) for _ in range(3))
    assert twin._fast is not None and twin._S is not None  # the jerk limit inside the one call
    loops._compiled = None
    lo, hi, dt = ur10.limits.lower, ur10.limits.upper, 0.002
    rng = np.random.default_rng(5)
    prev = {id(x): np.zeros(6) for x in (twin, loops, old)}
    changed = 0
    for k in range(80):
        if k == 30:
            assert old._jerk._state[2].any()  # type: ignore[union-attr]  # (the history a reset forgets)
            for x in (twin, loops):
                lim = x if holder is None else dict(zip(x.names, x.limits, strict=True))[holder]
                if how == "call":
                    getattr(lim, attr)()
                elif how == "set":
                    setattr(lim, attr, new(np.array(getattr(lim, attr))))
                else:
                    getattr(lim, attr)[:] = new(getattr(lim, attr).copy())
        q = lo + rng.uniform(-0.03, 1.03, 6) * (hi - lo) if k % 2 else 0.5 * (lo + hi)
        J = ur10.jacobian(q)
        qd = rng.normal(size=6) * rng.choice([0.05, 0.5, 5.0])
        if k % 17 == 3:
            prev = {i: np.zeros(6) for i in prev}  # a stop to rest
        out = {id(x): x.apply(q, qd, prev[id(x)], J, dt, dt) for x in (twin, loops, old)}
        assert out[id(twin)].tobytes() == out[id(loops)].tobytes(), k
        assert twin.active == loops.active, k
        jt, jl = twin._jerk, dict(zip(loops.names, loops.limits, strict=True))["jerk"]
        assert jt._state.tobytes() == jl._state.tobytes(), k  # type: ignore[union-attr]
        changed += k >= 30 and out[id(twin)].tobytes() != out[id(old)].tobytes()
        prev = out
    assert changed >= 3


def test_the_path_speed_reserve_set_at_run_time_reaches_the_next_compiled_cycle(ur10):
    """The path speed limit's reserve, set between two cycles, is the one the next one-call cycle reads: what the
    two-call path (a robot that is no chain: it reads the reserve where it calls) gives, to rounding, cycle by
    cycle; and the change matters."""
    pytest.importorskip("numba")
    one, two, old = (SafetyLimits.from_robot(ur10, max_acceleration=0.2) for _ in range(3))
    two.path_speed.robot = _CountingRobot(ur10)  # type: ignore[union-attr,assignment]
    rng = np.random.default_rng(8)
    lo, hi = ur10.limits.lower, ur10.limits.upper
    changed = 0
    for k in range(60):
        if k == 20:
            one.path_speed.reserve = two.path_speed.reserve = 0.01  # type: ignore[union-attr]
        q = lo + rng.uniform(0.1, 0.9, 6) * (hi - lo)
        J = ur10.jacobian(q)
        qd = rng.normal(size=6) * rng.choice([0.3, 3.0])
        prev = qd * rng.uniform(0.0, 1.2)
        a, b, c = (x.apply(q, qd, prev, J, 0.002) for x in (one, two, old))
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        assert one.active == two.active, k
        changed += k >= 20 and not np.allclose(a, c, rtol=1e-6, atol=1e-9)
    assert changed >= 3 and one._fast is not None and two._chain is None  # (the robot noticed at the first cycle)


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "copy"])
def test_a_copy_of_the_limits_packs_its_own_parameters_and_hears_of_their_changes(ur10, how):
    """A SafetyLimits pickled or deep-copied (its own limits) gives what the original gives, bit for bit, jerk
    history included; a parameter then set on the copy's limits (a scalar, a vector in
    place) reaches the copy's next cycle — and with its own limits not the original's; a shallow copy (the same
    limits) too."""
    import copy
    import pickle

    pytest.importorskip("numba")
    names = (*BASIC_LIMITS, "jerk")
    one, ref = (SafetyLimits.from_robot(ur10, limits=names, max_joint_jerk=500.0) for _ in range(2))
    q = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
    J = ur10.jacobian(q)
    prev = np.zeros(6)
    for _ in range(5):
        prev = one.apply(q, np.full(6, 2.0), prev, J, 0.002)
    two = {"pickle": lambda x: pickle.loads(pickle.dumps(x)), "deepcopy": copy.deepcopy, "copy": copy.copy}[how](one)
    a, b = one.apply(q, np.full(6, -2.0), prev, J, 0.002), two.apply(q, np.full(6, -2.0), prev, J, 0.002)
    if how != "copy":  # (a shallow copy shares the jerk limit: its history is the cycle the original just made)
        assert a.tobytes() == b.tobytes() and one.active == two.active  # the same history before this cycle
    two.cartesian.max_linear_speed = 1e-3  # type: ignore[union-attr]
    two.max_velocity[:] = 0.01
    fresh = SafetyLimits.from_robot(ur10, limits=names, max_joint_jerk=500.0)
    fresh.cartesian.max_linear_speed, fresh.max_velocity = 1e-3, np.full(6, 0.01)  # type: ignore[union-attr]
    fresh._jerk.reset()  # type: ignore[union-attr]
    two._jerk.reset()  # type: ignore[union-attr]
    want = fresh.apply(q, np.full(6, 2.0), np.zeros(6), J, 0.002)
    assert two.apply(q, np.full(6, 2.0), np.zeros(6), J, 0.002).tobytes() == want.tobytes()
    if how != "copy":  # its own limits: the original's parameters as they were
        one._jerk.reset()  # type: ignore[union-attr]
        ref._jerk.reset()  # type: ignore[union-attr]
        assert one.apply(q, np.full(6, 2.0), np.zeros(6), J, 0.002).tobytes() == \
            ref.apply(q, np.full(6, 2.0), np.zeros(6), J, 0.002).tobytes() != want.tobytes()


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "copy"])
def test_a_plugins_limit_with_no_attributes_of_its_own_is_copied_with_the_limits(ur10, narrow_after, how):
    """A plugin's limit whose parameters are all class constants (no attribute of its own: nothing for a copy to
    carry) in a composition: the set pickles and copies, and the copy limits as the original, bit for bit."""
    import copy
    import pickle

    one = SafetyLimits.from_robot(ur10, limits=(*BASIC_LIMITS, "narrow_after"))
    assert not vars(dict(zip(one.names, one.limits, strict=True))["narrow_after"])
    two = {"pickle": lambda x: pickle.loads(pickle.dumps(x)), "deepcopy": copy.deepcopy, "copy": copy.copy}[how](one)
    q = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
    J = ur10.jacobian(q)
    a, b = one.apply(q, np.full(6, 0.2), np.zeros(6), J, 0.002), two.apply(q, np.full(6, 0.2), np.zeros(6), J, 0.002)
    assert a.tobytes() == b.tobytes() and one.active == two.active and one.active["narrow_after"]


@pytest.mark.parametrize(("dt", "period"), [(math.inf, 1e-3), (1e-3, 0.0)])
def test_a_robot_time_the_jerk_limit_cannot_count_in_ticks_raises_as_the_classes_do(ur10, dt, period):
    """dt/period no count of robot ticks (inf, a zero period): the one compiled call computes nothing and the
    limits raise what the classes' loops raise (JointJerk.apply's round), with its message."""
    pytest.importorskip("numba")
    names = (*BASIC_LIMITS, "jerk")
    twin, loops = (SafetyLimits.from_robot(ur10, limits=names) for _ in range(2))
    loops._compiled = None
    q = np.full(6, 0.3)
    J = ur10.jacobian(q)
    errors = []
    for x in (twin, loops):
        x.apply(q, np.full(6, 0.3), np.zeros(6), J, 0.002, 0.002)
        with pytest.raises((OverflowError, ZeroDivisionError)) as e:
            x.apply(q, np.full(6, 0.3), np.full(6, 0.1), J, dt, period)
        errors.append((e.type, str(e.value)))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("set_before", [False, True])
def test_a_jerk_limit_starts_without_history_and_keeps_it_when_packed_again(ur10, set_before):
    """A jerk limit composed (and with ``set_before`` its parameters set before the first cycle, so packed again
    while its rows in B hold no history yet) starts afresh in the first cycle — in the compiled call and in the
    classes' loops (numba taken away after the composition: its history is no array the compiled call made) —
    from a previous reference that is not at rest, bit for bit; and a repack after cycles keeps the history."""
    pytest.importorskip("numba")
    names = (*BASIC_LIMITS, "jerk")
    twin, loops = (SafetyLimits.from_robot(ur10, limits=names, max_joint_jerk=500.0) for _ in range(2))
    loops._compiled = None
    q = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
    J = ur10.jacobian(q)
    prev = np.full(6, 0.05)
    for x in (twin, loops) if set_before else ():
        jk = dict(zip(x.names, x.limits, strict=True))["jerk"]
        jk.max_jerk = 0.5 * jk.max_jerk
    for k in range(4):
        if k == 2:  # packed again after cycles: the history goes on
            for x in (twin, loops):
                x.max_velocity = 0.9 * x.max_velocity
        a, b = twin.apply(q, np.full(6, 1.0), prev, J, 0.002), loops.apply(q, np.full(6, 1.0), prev, J, 0.002)
        assert a.tobytes() == b.tobytes() and twin.active == loops.active, k
        prev = a


@pytest.mark.parametrize("names", [DEFAULT_LIMITS, BASIC_LIMITS, (*BASIC_LIMITS, "jerk"), (*DEFAULT_LIMITS, "jerk"),
                                   ("position", "velocity", "acceleration", "path_acceleration", "jerk")])
def test_the_general_path_of_apply_is_its_one_call_bit_for_bit(names):
    """SafetyLimits._apply — where apply's one call does not serve: J's SVD handed to the path speed limit, a robot
    that is no chain, a tick count the call leaves to Python — run on every cycle gives what apply's one call gives
    (without an SVD both make the same calls: the limits up to the acceleration limit, then the jerk limit by its
    own compiled call): the same bits, the same limits acted, the same reference found finite (without the jerk
    limit), the same jerk history, cycle after cycle through missed ticks, stops to rest, NaN and ±inf, states
    beyond the limits."""
    pytest.importorskip("numba")
    robot = ROBOTS["panda"]
    n = robot.dof
    one, two = (SafetyLimits.from_robot(robot, max_acceleration=3.0, limits=names, max_joint_jerk=800.0)
                for _ in range(2))
    assert one._fast is not None
    rng = np.random.default_rng(21)
    lo, hi, period = robot.limits.lower, robot.limits.upper, 1e-3
    prev_a = prev_b = np.zeros(n)
    acted: dict[str, int] = {}
    for k in range(1200):
        q = lo + rng.uniform(-0.05, 1.05, n) * (hi - lo) if k % 3 else 0.5 * (lo + hi)
        J = robot.jacobian(q)
        qd = rng.normal(size=n) * rng.choice([0.0, 0.05, 0.5, 3.0])
        if k % 37 == 5:
            qd[k % n] = (math.nan, math.inf, -math.inf)[k % 3]
        dt = period * (1 + (k % 13 == 0) + 2 * (k % 29 == 0))
        with np.errstate(invalid="ignore"):
            a = one.apply(q, qd, prev_a, J, dt, period)
            b = two._apply(q, qd, prev_b, J, dt, period, None, None)
        assert a.tobytes() == b.tobytes(), k
        assert one.active == two.active, k
        # (with the jerk limit the one call tests the reference after it too; the general path leaves it to the loop)
        assert (one.checked is a) == (two.checked is b) or ("jerk" in names and two.checked is None), k
        if "jerk" in names:
            assert one._jerk._state.tobytes() == two._jerk._state.tobytes(), k  # type: ignore[union-attr]
        for name, hit in one.active.items():
            acted[name] = acted.get(name, 0) + hit
        prev_a, prev_b = (np.zeros(n), np.zeros(n)) if k % 200 == 199 else (a, b)
    assert all(acted[name] > 0 for name in names if name != "cartesian"), acted


def test_a_tick_count_past_the_one_calls_reach_gives_what_the_classes_give(ur10):
    """dt/period ≥ 2⁵² robot ticks (finite: an exact integer in Python, past what the one call rounds exactly): the
    one call leaves the cycle to the general path, which counts the ticks in Python — the same reference as the
    classes' loops, bit for bit, and the same limits acted."""
    pytest.importorskip("numba")
    names = (*BASIC_LIMITS, "jerk")
    twin, loops = (SafetyLimits.from_robot(ur10, limits=names, max_joint_jerk=500.0) for _ in range(2))
    loops._compiled = None
    q = np.full(6, 0.3)
    J = ur10.jacobian(q)
    prev = {id(twin): np.zeros(6), id(loops): np.zeros(6)}
    for dt, period in ((0.002, 0.002), (0.002, 0.002), (1.0, 1e-16), (0.002, 0.002)):
        out = {id(x): x.apply(q, np.full(6, 0.5), prev[id(x)], J, dt, period) for x in (twin, loops)}
        assert out[id(twin)].tobytes() == out[id(loops)].tobytes() and twin.active == loops.active, (dt, period)
        prev = out


@pytest.mark.parametrize("fraction", [0.2, 0.02, 0.001])
@pytest.mark.parametrize("names", [(*BASIC_LIMITS, "jerk"), ("position", "velocity", "acceleration", "jerk")])
def test_a_velocity_limit_lowered_while_moving_with_the_jerk_limit_never_turns_the_arm_back(ur10, names, fraction):
    """The arm moves fast, then its velocity limit is lowered to a fifth of that speed (``velocity_scale`` may be
    tightened at any time): the hard box clips the reference in one cycle — the documented step beyond a·dt — and
    from there the jerk limit counts that step as at most a_max, so the reference stays on its side of zero, within
    the new box, and changes by at most a_max·dt a cycle (uncapped, the step was continued at −240 rad/s² to the
    other side of the box). The compiled call with the jerk limit inside it gives, cycle by cycle, what the classes'
    float loops give: the references, which limits acted, the jerk history, bit for bit."""
    pytest.importorskip("numba")
    dt, a_max = 0.002, 6.0
    twin, loops = (SafetyLimits.from_robot(ur10, 0.8, a_max, limits=names, max_joint_jerk=500.0) for _ in range(2))
    assert twin._fast is not None and twin._S is not None  # the jerk limit inside the one call
    loops._compiled = None
    q = 0.5 * (ur10.limits.lower + ur10.limits.upper)
    J = ur10.jacobian(q)
    want = np.array([1.0, -0.8, 0.9, 1.2, -1.1, 0.7])
    box = fraction * np.abs(want)  # a fifth, also below a_max²/(2 j_max) = 0.036 rad/s: a dip at −a_max crosses zero
    prev = {id(x): np.zeros(6) for x in (twin, loops)}
    for k in range(300):
        if k == 150:  # moving at more than a third of `want`: lowered to a fifth of it
            assert np.all(np.abs(prev[id(twin)]) > 0.3 * np.abs(want))
            for x in (twin, loops):
                x.velocity.max_velocity = box.copy()
        out = {id(x): x.apply(q, want, prev[id(x)], J, dt, dt) for x in (twin, loops)}
        assert out[id(twin)].tobytes() == out[id(loops)].tobytes(), k
        assert twin.active == loops.active, k
        jt, jl = twin._jerk, dict(zip(loops.names, loops.limits, strict=True))["jerk"]
        assert jt._state.tobytes() == jl._state.tobytes(), k  # type: ignore[union-attr]
        qd, before = out[id(twin)], prev[id(twin)]
        if k == 150:
            assert twin.active["velocity"] and np.array_equal(np.abs(qd), box)  # clipped in one cycle
        elif k > 150:
            assert np.all(qd * want > 0), (k, qd)  # never turned back
            assert np.all(np.abs(qd) <= box), (k, qd)
            assert np.all(np.abs(qd - before) <= a_max * dt * (1 + 1e-12)), (k, qd - before)
        prev = out
    np.testing.assert_allclose(prev[id(twin)], np.sign(want) * box, rtol=1e-12)  # back at the new limit


@pytest.mark.parametrize("compiled", [True, False])
def test_a_nan_previous_reference_is_not_read_as_an_acceleration_by_the_jerk_limit(ur10, compiled):
    """A NaN in the previous reference (a caller's own loop: the control loop's limits stage makes a non-finite
    reference zeros) is no step of a_max: one cycle later, from a finite reference again, the braking joint brakes —
    its reference falls from the first cycle on and never rises (a NaN read as +a_max accelerated it while braking)."""
    if compiled:
        pytest.importorskip("numba")
    dt = 0.001
    lim = SafetyLimits.from_robot(ur10, 1.0, 10.0, limits=(*BASIC_LIMITS, "jerk"), max_joint_jerk=5000.0)
    if not compiled:
        lim._compiled = None
    q = 0.5 * (ur10.limits.lower + ur10.limits.upper)
    J = ur10.jacobian(q)
    prev = np.zeros(6)
    for _ in range(1000):  # joint 0 up to 0.5 rad/s or the Cartesian speed limit's share, steady
        before, prev = prev, lim.apply(q, np.array([0.5, 0, 0, 0, 0, 0]), prev, J, dt, dt)
    v0 = float(prev[0])
    assert v0 > 0.1 and prev[0] == before[0]
    before = prev.copy()
    bad = prev.copy()
    bad[0] = np.nan
    lim.apply(q, np.zeros(6), bad, J, dt, dt)  # its history now holds the NaN
    prev = lim.apply(q, np.zeros(6), before, J, dt, dt)  # the caller goes on from a finite reference
    seen = [float(prev[0])]
    for _ in range(100):
        prev = lim.apply(q, np.zeros(6), prev, J, dt, dt)
        seen.append(float(prev[0]))
    finite = [x for x in seen if math.isfinite(x)]
    assert finite and all(b <= a + 1e-12 for a, b in itertools.pairwise(finite)), finite[:10]
    assert all(x <= v0 + 1e-12 for x in finite), finite[:10]
    assert finite[-1] < v0 - 0.1  # braking


@pytest.mark.parametrize("bad", ["vector", "scalar"])
def test_a_parameter_that_cannot_be_packed_raises_every_cycle_not_once(ur10, bad):
    """A limit's parameter set to what the compiled call cannot take (a vector of the wrong length, a scalar that is
    no number) raises in every cycle until it is set right — as the classes' loops do — and never falls back to the
    parameters packed before after the first failure."""
    pytest.importorskip("numba")
    lim = SafetyLimits.from_robot(ur10, limits=BASIC_LIMITS)
    assert lim._compiled is not None
    q = 0.5 * (ur10.limits.lower + ur10.limits.upper)
    J = ur10.jacobian(q)
    qd = np.full(6, 0.1)
    good = lim.apply(q, qd, qd, J, 0.002)
    if bad == "vector":
        lim.velocity.max_velocity = np.full(5, 0.01)
    else:
        lim.cartesian.max_linear_speed = "fast"  # type: ignore[assignment]
    for _ in range(3):
        with pytest.raises((ValueError, TypeError, IndexError)):
            lim.apply(q, qd, qd, J, 0.002)
    if bad == "vector":
        lim.velocity.max_velocity = np.full(6, 0.01)
        out = lim.apply(q, qd, qd, J, 0.002)
        assert np.all(np.abs(out) <= 0.01 + 1e-12) and not np.array_equal(out, good)


@pytest.mark.parametrize("names", [DEFAULT_LIMITS, (*DEFAULT_LIMITS, "jerk")])
def test_the_active_record_is_what_every_call_wrote_though_the_fast_call_skips_an_unchanged_one(ur10, names):
    """The compiled call writes ``active`` only when its verdicts differ from the last it wrote into that very dict:
    cycle by cycle over random references (the limits acting or not, the general path between — J's SVD given —,
    the record replaced, a shallow copy sharing it) the record is the one a composition given its own dict holds,
    which writes it every call."""
    import copy

    rng = np.random.default_rng(7)
    lim = SafetyLimits.from_robot(ur10, limits=names)
    ref = SafetyLimits.compose(copy.deepcopy(lim.limits), active={})  # a caller's dict: written every call
    assert lim._shown is not None and ref._shown is None
    skipped, general = 0, 0
    prev = np.zeros(ur10.dof)
    last = None
    for k in range(600):
        q = rng.uniform(ur10.limits.lower, ur10.limits.upper)
        J = ur10.jacobian(q)
        qd = rng.normal(scale=[0.01, 0.3, 2.0][k % 3], size=ur10.dof)
        svd = None
        if k % 11 == 5:  # the general path writes the record itself
            svd, general = np.linalg.svd(J, full_matrices=False), general + 1
        if k % 97 == 50 and last is not None:  # a new record: written whole at the next call, the same verdicts too
            lim.active = {}
            lim.apply(*last)
            assert lim.active == ref.active, k
        target = lim
        if k % 41 == 20:  # a shallow copy writes the shared record; the original then writes it again
            target = copy.copy(lim)
            assert target.active is lim.active and target._shown is lim._shown
        before = target._shown[0] if target._shown is not None else None
        out = target.apply(q, qd, prev, J, 2e-3, svd=svd)
        want = ref.apply(q, qd, prev, J, 2e-3, svd=svd)
        np.testing.assert_array_equal(out, want)
        assert target.active == ref.active and lim.active == ref.active, k
        last = (q, qd, prev, J, 2e-3, None, svd)
        skipped += svd is None and before is not None and target._shown[0] is before
        prev = want
    assert skipped > 50 and general > 40  # both paths taken
