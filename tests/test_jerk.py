"""The jerk limit alone (fdcontrol.limits.jerk): property tests against finite differences of
its own output and the closed-form time-optimal jerk-limited ramp."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdcontrol.limits import LIMITS, JointAcceleration, JointJerk
from fdcontrol.limits.safety import LimitParams, SafetyLimits
from fdcontrol.model.robot import RobotModel

DT, A, J = 1e-3, 10.0, 5000.0
EPS = 1e-9


def run_sequence(limit, targets: np.ndarray, dt: float = DT) -> np.ndarray:
    """The references the limit makes of the desired velocities `targets` (cycles × joints),
    each cycle's output fed back as the next q̇_prev, as the loop does."""
    n = targets.shape[1]
    prev, out = np.zeros(n), []
    for t in targets:
        prev = limit.limit(np.zeros(n), t, prev, None, dt)
        out.append(prev)
    return np.array(out)


def derivatives(v: np.ndarray, dt: float = DT) -> tuple[np.ndarray, np.ndarray]:
    """Acceleration and jerk of a velocity sequence that starts from rest, by finite differences."""
    v = np.vstack([np.zeros((2, v.shape[1])), v])
    a = np.diff(v, axis=0) / dt
    return a[1:], np.diff(a, axis=0) / dt


steps = st.lists(st.tuples(st.integers(1, 120), st.lists(st.floats(-2.5, 2.5), min_size=3, max_size=3)),
                 min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(steps)
def test_random_steps_stay_within_acceleration_and_jerk(seq):
    targets = np.array([v for k, v in seq for _ in range(k)] + [[0.0] * 3] * 80)
    lim = JointJerk(np.full(3, J), np.full(3, A))
    v = run_sequence(lim, targets)
    a, j = derivatives(v)
    assert np.all(np.abs(a) <= A * (1 + EPS))
    assert np.all(np.abs(j) <= J * (1 + EPS))
    # never beyond a velocity that was asked for (no overshoot of the approach)
    assert np.all(np.abs(v) <= np.max(np.abs(targets), axis=0) + 1e-12)


def test_acceleration_limit_alone_steps_in_jerk():
    """What the jerk limit is for: the acceleration limit alone turns a step into a jerk of a/dt."""
    targets = np.full((50, 1), 1.0)
    _, j = derivatives(run_sequence(JointAcceleration(np.array([A])), targets))
    assert np.max(np.abs(j)) == pytest.approx(A / DT)  # 10 000 rad/s³ > 5000
    _, j = derivatives(run_sequence(JointJerk(np.array([J]), np.array([A])), targets))
    assert np.max(np.abs(j)) <= J * (1 + EPS)


@pytest.mark.parametrize("v_target", [0.005, 0.02, 1.0, 2.5])
def test_reaches_a_step_in_the_time_optimal_time(v_target):
    """Closed form of the time-optimal jerk-limited ramp from rest to v: T = 2√(v/J) when
    v < A²/J (triangular acceleration), else T = v/A + A/J; reached exactly, a few cycles late at most."""
    lim = JointJerk(np.array([J]), np.array([A]))
    v = run_sequence(lim, np.full((3000, 1), v_target))[:, 0]
    reached = int(np.argmax(v == v_target)) + 1
    assert v[reached - 1] == v_target and np.all(v[reached:] == v_target)
    T = 2 * math.sqrt(v_target / J) if v_target < A * A / J else v_target / A + A / J
    assert T / DT - 1 <= reached <= T / DT + 4


def test_nan_target_brakes_within_limits():
    lim = JointJerk(np.full(2, J), np.full(2, A))
    targets = np.array([[1.0, -1.0]] * 300 + [[math.nan, math.inf]] * 400)
    v = run_sequence(lim, targets)
    a, j = derivatives(v)
    assert np.all(np.isfinite(v)) and np.all(v[-1] == 0.0)
    assert np.all(np.abs(a) <= A * (1 + EPS)) and np.all(np.abs(j) <= J * (1 + EPS))


def test_crossed_limits():
    """Invalid parameters are refused; an acceleration beyond a lowered limit ramps back at the jerk limit."""
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            JointJerk(np.array([bad]), np.array([A])).validate()
        with pytest.raises(ValueError):
            JointJerk(np.array([J]), np.array([bad])).validate()
    with pytest.raises(ValueError):
        JointJerk(np.full(2, J), np.full(3, A)).validate()
    lim = JointJerk(np.array([J]), np.array([A]))
    v = run_sequence(lim, np.full((20, 1), 2.0))  # accelerating at up to A
    lim.max_acceleration = np.array([1.0])  # lowered: a_prev is beyond the new box
    prev, vs = v[-1], [v[-2], v[-1]]
    for _ in range(20):
        prev = lim.limit(np.zeros(1), np.array([2.0]), prev, None, DT)
        vs.append(prev)
    a = np.diff(np.array(vs)[:, 0]) / DT
    assert np.all(np.abs(np.diff(a)) / DT <= J * (1 + EPS))
    assert abs(a[-1]) <= 1.0 + EPS


def test_restart_from_rest_forgets_the_previous_acceleration():
    lim = JointJerk(np.array([J]), np.array([A]))
    run_sequence(lim, np.full((40, 1), 2.0))  # mid-ramp, large reference
    v = run_sequence(lim, np.full((5, 1), 2.0))  # a new run from q̇_prev = 0
    _, j = derivatives(v)
    assert np.all(np.abs(j) <= J * (1 + EPS))


def test_from_settings_uses_the_published_limits():
    fr3, panda, ur10 = (RobotModel.load(n) for n in ("fr3", "panda", "ur10"))
    p = LimitParams(max_joint_acceleration=50.0, max_joint_jerk=1e6, limits=(*LimitParams().limits, "jerk"))
    assert np.all(JointJerk.from_settings(fr3, p).max_jerk == 5000.0)
    assert np.all(JointJerk.from_settings(fr3, p).max_acceleration == 10.0)
    assert JointJerk.from_settings(panda, p).max_jerk.tolist() == [7500, 3750, 5000, 6250, 7500, 10000, 10000]
    assert np.all(JointJerk.from_settings(ur10, p).max_jerk == 1e6)
    lim = SafetyLimits.from_settings(fr3, p)
    assert lim.names[-1] == "jerk" and "jerk" in LIMITS


def test_from_settings_without_a_jerk_parameter_takes_the_default():
    """The settings protocol (fdcontrol.limits.base.LimitSettings) does not name the jerk: settings
    without it get 5000 rad/s³ (lowered to a robot's published limits, none for ur10)."""
    from types import SimpleNamespace

    ur10 = RobotModel.load("ur10")
    p = SimpleNamespace(velocity_scale=0.5, max_joint_acceleration=3.0, max_linear_speed=0.5, max_angular_speed=1.5)
    lim = JointJerk.from_settings(ur10, p)
    assert lim.max_jerk.tolist() == [5000.0] * 6 and lim.max_acceleration.tolist() == [3.0] * 6


def test_bad_jerk_parameters_are_refused_naming_the_parameter():
    ur10 = RobotModel.load("ur10")
    with pytest.raises(ValueError, match=r"^max_jerk must be a scalar or have 6 entries, got shape \(2,\)$"):
        JointJerk.from_settings(ur10, LimitParams(max_joint_jerk=np.array([1.0, 2.0])))
    with pytest.raises(ValueError, match=r"^max_acceleration must be a scalar or have 6 entries, got shape \(3,\)$"):
        JointJerk.from_settings(ur10, LimitParams(max_joint_acceleration=np.ones(3)))
    with pytest.raises(ValueError, match=r"^max_jerk must be finite and > 0 for every joint$"):
        JointJerk(np.array([5000.0, -1.0]), np.array([1.0, 1.0])).validate()
    with pytest.raises(ValueError, match=r"^max_acceleration must be finite and > 0 for every joint$"):
        JointJerk(np.array([5000.0, 5000.0]), np.array([1.0, math.nan])).validate()
    with pytest.raises(ValueError, match=r"^max_jerk and max_acceleration must have one entry per joint each$"):
        JointJerk(np.array([5000.0, 5000.0]), np.array([1.0])).validate()


def test_missed_cycles_keep_the_robots_tick_signal_within_the_limits():
    """A loop paced by the robot's clock misses cycles now and then (dt = k ticks of h): the robot fills
    each missing command at the constant acceleration of its last tick (at rest it stays at rest). The
    velocity the robot executes, tick by tick, built here from the references alone, keeps |a| ≤ a_max
    and |Δa| ≤ j_max h around every miss, also over two misses in a row."""
    from fdcontrol.limits import Cycle

    h = 1e-3
    lim = JointJerk(np.array([J, J]), np.array([A, A]))
    rng = np.random.default_rng(7)
    prev = np.zeros(2)  # the last reference = the robot's velocity at its last commanded tick
    acc = np.zeros(2)  # the acceleration of the robot's last tick
    misses = 0
    for i in range(400):
        k = 1 if i < 5 or rng.random() < 0.6 else int(rng.integers(2, 5))
        misses += k > 1
        v = prev.copy()
        for _ in range(k - 1):  # the robot's fill of the commands that did not come
            if np.any(prev):
                v = v + acc * h
            else:
                acc = np.zeros(2)
        target = np.array([2.0, -1.0]) * (1.0 if (i // 60) % 2 == 0 else -1.0)
        qd = target.tolist()
        lim.apply(Cycle(np.zeros(2), prev, None, k * h, h), qd)
        out = np.array(qd)
        a = (out - v) / h  # the robot's acceleration in the tick the new reference arrives
        assert np.all(np.abs(a) <= A * (1 + EPS) + EPS), (i, k, a)
        assert np.all(np.abs(a - acc) <= J * h * (1 + EPS) + 1e-6), (i, k, a, acc)
        prev, acc = out, a
    assert misses > 50


def test_a_reference_changed_outside_the_limit_counts_with_its_own_step():
    """Closed form, one joint (j_max = 5000 rad/s³, a_max = 10 rad/s², dt = 1 ms, far target): from rest the
    first step is a = j dt = 5 rad/s², q̇ = 0.005. Fed back, the next is a = 10 (q̇ = 0.015); a previous
    reference changed to 0.003 outside the limit counts as a_prev = 0.003/dt = 3, so a = 3 + 5 = 8."""
    from fdcontrol.limits import Cycle

    def two_cycles(second_prev: float) -> float:
        lim = JointJerk(np.array([5000.0]), np.array([10.0]))
        qd = [2.0]
        lim.apply(Cycle(np.zeros(1), np.zeros(1), None, 1e-3), qd)
        assert qd[0] == pytest.approx(0.005, rel=1e-12)
        qd2 = [2.0]
        lim.apply(Cycle(np.zeros(1), np.array([second_prev]), None, 1e-3), qd2)
        return qd2[0]

    assert two_cycles(0.005) == pytest.approx(0.015, rel=1e-12)  # its own reference
    assert two_cycles(0.003) == pytest.approx(0.011, rel=1e-12)  # changed outside


def test_the_jerk_limit_says_whether_it_acted():
    from fdcontrol.limits import Cycle

    lim = JointJerk(np.array([5000.0, 5000.0]), np.array([10.0, 10.0]))
    qd = [0.0, 0.0]  # at rest, asked to stay: reached at once
    assert lim.apply(Cycle(np.zeros(2), np.zeros(2), None, 1e-3), qd) is False and qd == [0.0, 0.0]
    qd = [2.0, 0.0]  # a far target: ramped
    assert lim.apply(Cycle(np.zeros(2), np.zeros(2), None, 1e-3), qd) is True and qd[1] == 0.0
    assert qd[0] == pytest.approx(0.005, rel=1e-12)


def test_a_change_outside_after_a_moving_reference_and_a_target_reached_within_rounding():
    """Closed forms. (1) Fed back twice (q̇ = 0.005, 0.015 from rest), then the previous reference changed
    outside the limit to 0.02: a_prev = (0.02 − 0.005)/dt = 15 rad/s², the acceleration is capped at
    a_max = 10, which the jerk box [15 − 5, 15 + 5] allows: q̇ = 0.02 + 10·dt = 0.03. (2) A target a
    rounding error away (±1e-20 rad/s from rest) is reached exactly, and the limit says it did not act."""
    from fdcontrol.limits import Cycle

    lim = JointJerk(np.array([5000.0]), np.array([10.0]))
    qd = [2.0]
    lim.apply(Cycle(np.zeros(1), np.zeros(1), None, 1e-3), qd)
    qd2 = [2.0]
    lim.apply(Cycle(np.zeros(1), np.array(qd), None, 1e-3), qd2)
    assert qd2[0] == pytest.approx(0.015, rel=1e-12)
    qd3 = [2.0]
    lim.apply(Cycle(np.zeros(1), np.array([0.02]), None, 1e-3), qd3)
    assert qd3[0] == pytest.approx(0.03, rel=1e-12)
    for target in (1e-20, -1e-20):
        lim = JointJerk(np.array([5000.0]), np.array([10.0]))
        qd = [target]
        assert lim.apply(Cycle(np.zeros(1), np.zeros(1), None, 1e-3), qd) is False and qd == [target]


def test_a_missed_cycle_counts_from_more_than_one_and_a_half_periods():
    """Closed form at the boundary (j_max = 1 rad/s³, a_max = 10 rad/s², period 1 s, far target 100): from rest
    the first step is a = 1, q̇ = 1. A dt of exactly 1.5 periods is one late tick of h = 1.5 (a ≤ 1 + 1.5,
    q̇ = 1 + 2.5·1.5 = 4.75); at 1.6 periods it is two ticks of h = 0.8, the first filled by the robot at
    a = 1 (q̇ 1.8), then a ≤ 1 + 0.8: q̇ = 1.8 + 1.8·0.8 = 3.24."""
    from fdcontrol.limits import Cycle

    for dt, expected in ((1.5, 4.75), (1.6, 3.24)):
        lim = JointJerk(np.array([1.0]), np.array([10.0]))
        qd = [100.0]
        lim.apply(Cycle(np.zeros(1), np.zeros(1), None, 1.0, 1.0), qd)
        assert qd == [1.0]
        qd = [100.0]
        lim.apply(Cycle(np.zeros(1), np.array([1.0]), None, dt, 1.0), qd)
        assert qd[0] == pytest.approx(expected, rel=1e-12), dt


def test_a_restart_from_rest_is_a_previous_reference_beyond_one_step_of_the_acceleration_limit():
    """j_max = 1, a_max = 10, dt = 1: a reference of exactly a·dt = 10, then rest, is a step the acceleration
    limit allows: it counts with its own step a_prev = −10, toward the target −20 and so kept up to
    a* = 2·20/(√(1 + 2·20) + 1) (the most from which −20 is still reached without passing it): q̇ = −a*.
    Just beyond a·dt it is a restart from rest (a_prev = 0, a ∈ [−1, 1]): q̇ = −1. Toward the target 0 instead,
    the step is not continued at all (it would pass 0): q̇ stays 0 either way."""
    from fdcontrol.limits import Cycle

    a_star = 2 * 20 / (math.sqrt(1 + 2 * 20) + 1)
    for last, target, expected in ((10.0, -20.0, -a_star), (10.5, -20.0, -1.0), (10.0, 0.0, 0.0), (10.5, 0.0, 0.0)):
        lim = JointJerk(np.array([1.0]), np.array([10.0]))
        qd = [last]
        lim.apply(Cycle(np.zeros(1), np.array([last]), None, 1.0), qd)
        assert qd == [last]  # held where it was: the reference is exactly the previous one
        qd = [target]
        lim.apply(Cycle(np.zeros(1), np.zeros(1), None, 1.0), qd)
        assert qd[0] == pytest.approx(expected, abs=1e-12), (last, target)


def _after_outside_change(j: float, a: float, dt: float, made: float, changed: float, target: float) -> float:
    """One joint: the limit makes the reference `made` (held there: its own step zero), the reference is then
    changed outside it to `changed` (the hard box, a lagging robot), and the next cycle asks for `target`."""
    from fdcontrol.limits import Cycle

    lim = JointJerk(np.array([j]), np.array([a]))
    qd = [made]
    lim.apply(Cycle(np.zeros(1), np.array([made]), None, dt), qd)
    assert qd == [made]
    qd = [target]
    lim.apply(Cycle(np.zeros(1), np.array([changed]), None, dt), qd)
    return qd[0]


def _a_star(r: float, j: float, h: float) -> float:
    """The most acceleration from which a velocity r away is still reached without passing it (the class doc)."""
    return 2.0 * r / (math.sqrt(h * h + 2.0 * r / j) + h)


def test_a_step_made_outside_is_continued_only_as_far_as_the_limit_would_itself():
    """Closed forms, dt = 1 s (a step of a rad/s is an acceleration of a rad/s²). The step the reference was given
    outside the limit counts as its previous acceleration only as far as the limit would have gone on with it:
    (1) away from the target not at all — from 5 changed to 3 (−2) with the target 10 and j = 1, the next
    acceleration is 0 + j·dt = 1, not −2 + 1: q̇ = 4; (2) toward the target at most a*, so it does not pass it —
    from 1 to 4 (+3) with the target 5: a* = 2/(√3 + 1), q̇ = 4 + a* < 5 (went on at 3 − 1 = 2 it would pass 5 at
    6), and mirrored; (3) toward it within a*, kept as it was — a small step (+0.3, j = 0.1) is continued: q̇ =
    1.3 + min(a*, 0.3 + 0.1), not restarted from 0 (1.3 + 0.1); (4) at most a_max — from ±1 to ±31 (±30) toward
    ±1000 with a_max = 10, j = 1: the next acceleration is ±10 (the jerk box around ±10), q̇ = ±41, not ±(31 + 29)."""
    assert _after_outside_change(1.0, 10.0, 1.0, 5.0, 3.0, 10.0) == 4.0
    for sign in (1.0, -1.0):
        got = _after_outside_change(1.0, 10.0, 1.0, sign * 1.0, sign * 4.0, sign * 5.0)
        assert got == pytest.approx(sign * (4.0 + _a_star(1.0, 1.0, 1.0)), rel=1e-12) and abs(got) < 5.0, sign
        assert _after_outside_change(1.0, 10.0, 1.0, sign * 1.0, sign * 31.0, sign * 1000.0) == sign * 41.0
    small = _after_outside_change(0.1, 10.0, 1.0, 1.0, 1.3, 2.3)
    r = 2.3 - 1.3
    assert _a_star(r, 0.1, 1.0) < (1.3 - 1.0) + 0.1  # the jerk box does not bind: a* does
    assert small == pytest.approx(1.3 + _a_star(r, 0.1, 1.0), rel=1e-12)


def test_a_restart_from_rest_is_counted_in_steps_of_a_max_times_dt():
    """The restart from rest at another dt than 1 s (j = 1, a_max = 10, dt = 0.5 s: one step is a·dt = 5 rad/s):
    a reference of exactly 5, then rest, is a step the acceleration limit allows — continued toward −20 at most
    a* (h = 0.5): q̇ = −a*·h; just beyond it (5.5) the limit starts afresh from a_prev = 0 within the jerk box
    ±j·h: q̇ = −j·h·h = −0.25."""
    from fdcontrol.limits import Cycle

    for last, expected in ((5.0, -_a_star(20.0, 1.0, 0.5) * 0.5), (5.5, -0.25)):
        lim = JointJerk(np.array([1.0]), np.array([10.0]))
        qd = [last]
        lim.apply(Cycle(np.zeros(1), np.array([last]), None, 0.5), qd)
        assert qd == [last]
        qd = [-20.0]
        lim.apply(Cycle(np.zeros(1), np.zeros(1), None, 0.5), qd)
        assert qd[0] == pytest.approx(expected, rel=1e-12), last


def test_a_reset_limit_starts_afresh_like_a_new_one():
    """After cycles that ramped up, ``reset()`` (a stop, a restart) forgets them: from a moving previous reference
    the next reference is the one a new limit makes from it (a_prev = 0, not the ramp's acceleration)."""
    from fdcontrol.limits import Cycle

    used, new = (JointJerk(np.array([5000.0, 800.0]), np.array([10.0, 4.0])) for _ in range(2))
    prev = np.zeros(2)
    for _ in range(5):
        qd = [2.0, -1.0]
        used.apply(Cycle(np.zeros(2), prev, None, 1e-3), qd)
        prev = np.array(qd)
    used.reset()
    a, b = [2.0, -1.0], [2.0, -1.0]
    used.apply(Cycle(np.zeros(2), prev, None, 1e-3), a)
    new.apply(Cycle(np.zeros(2), prev, None, 1e-3), b)
    assert a == b
    c = [2.0, -1.0]  # (without the reset the ramp goes on: another reference)
    kept = JointJerk(np.array([5000.0, 800.0]), np.array([10.0, 4.0]))
    p = np.zeros(2)
    for _ in range(5):
        qd = [2.0, -1.0]
        kept.apply(Cycle(np.zeros(2), p, None, 1e-3), qd)
        p = np.array(qd)
    kept.apply(Cycle(np.zeros(2), p, None, 1e-3), c)
    assert c != a
