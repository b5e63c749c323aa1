"""A hand on the sensor is a live input; the tool's own inertia is not — on the MuJoCo arm; and the
liveness module's parts (the load, the live-input rule, the following check) against their definitions.

The service's loop (``Runtime``, the default simulated UR10 with its 0.5 kg tool) in compliance mode (a law
that reads the force sensor), stepped synchronously on its own clock. A hand (MuJoCo's applied force at the
tool) pushes the arm into motion and lets go: the arm brakes, and while it does the sensor reads the force
that decelerates the tool (about 1 N, at the load threshold). That is no hand: the arm rests within the
braking time of the profile in force. A hand that stays on the tool with 2 N, along the motion or against
it, is: the arm keeps following it.
"""

from __future__ import annotations

import math
from types import SimpleNamespace as NS

import numpy as np
import pytest

from fdcontrol.loop.liveness import (
    FOLLOW_SPEED,
    FOLLOW_TIME,
    LOAD_FORCE,
    LOAD_TORQUE,
    Following,
    Liveness,
    worst_joints,
)

PUSH = 30.0  # N, the push that sets the arm moving
PUSH_CYCLES = 150


class Arm:
    """The service's loop on the MuJoCo arm, stepped by the test (as the loop's thread would)."""

    def __init__(self, mode: str = "compliance") -> None:
        pytest.importorskip("mujoco")
        from fdcontrol.server import runtime as runtime_module
        from fdcontrol.server.runtime import Runtime
        from fdcontrol.server.settings import Settings

        runtime_module.BRAKE_WAIT = 0.0  # the test steps the loop itself: PATCH never waits for a thread
        self.rt = Runtime(Settings(realtime=False))
        self.loop = self.rt.loop
        self.loop._running.set()  # "running" without a thread: the test is its clock
        self.t = 0.0
        self.steps(5)
        self.rt.update({"mode": mode, "workspace_box": None})  # the push may carry the tip past the start box
        self.loop = self.rt.loop
        self.loop.hold(False)
        self.steps(5)

    def steps(self, n: int) -> None:
        for _ in range(n):
            self.loop.step(now=self.t)  # never raises
            self.t += self.loop.period

    def push(self, f: list[float], n: int) -> None:
        self.loop.driver.set_push([*f, 0.0, 0.0, 0.0])
        self.steps(n)

    def braking_time(self, v0: np.ndarray) -> float:
        """The braking time of the profile a stop beginning now fixes (fdcontrol.limits.braking)."""
        a = np.maximum(self.loop.limits.max_acceleration, self.loop.braking.floor)
        return float(np.max(np.abs(v0) / a))

    def close(self) -> None:
        self.loop._running.clear()
        self.loop.driver.close()


@pytest.fixture
def arm():
    a = Arm()
    yield a
    a.close()


@pytest.mark.parametrize("direction", [[1.0, 0.0, 0.0], [0.0, -0.8, 0.6]])
def test_the_tools_own_deceleration_is_no_hand_the_arm_rests_within_its_braking_time(arm, direction):
    loop, dt = arm.loop, arm.loop.period
    arm.push([PUSH * d for d in direction], PUSH_CYCLES)
    arm.loop.driver.set_push([0.0] * 6)  # the hand lets go
    v0 = loop.qd_ref.copy()
    assert np.abs(v0).max() > 0.3, v0  # the push set the arm moving
    tb = arm.braking_time(v0)
    n, travelled, reading = 0, np.zeros_like(v0), []
    while loop.qd_ref.any():
        arm.steps(1)
        n += 1
        travelled += np.abs(loop.qd_ref) * dt
        reading.append(float(np.linalg.norm(loop.state.f_measured[:3])))
        assert n * dt <= tb + 3 * dt, f"still moving {n} cycles after the hand let go (braking time {tb / dt:.1f})"
    assert np.all(travelled <= np.abs(v0) * (tb / 2 + 2 * dt) + 1e-9), (travelled, v0)
    # what makes it a test: the braking tool itself read above the load threshold on the law's reading
    assert max(reading[3:]) > LOAD_FORCE, max(reading[3:])
    arm.steps(25)
    assert not loop.qd_ref.any()  # and nothing moves it at rest


@pytest.mark.parametrize("along", [1.0, -1.0])
def test_a_hand_that_stays_on_the_tool_while_the_arm_brakes_keeps_it_moving(arm, along):
    """2 N held — along the motion, or against it (where the tool's inertia cancels half of it on the
    sensor) — is a hand: the arm never comes to rest, and in the end it moves the way the hand pushes."""
    loop = arm.loop
    arm.push([PUSH, 0.0, 0.0], PUSH_CYCLES)
    v0 = loop.qd_ref.copy()
    tb = arm.braking_time(v0)
    hand = np.array([2.0 * along, 0.0, 0.0])
    loop.driver.set_push([*hand, 0.0, 0.0, 0.0])
    for _ in range(math.ceil(3 * tb / loop.period)):
        arm.steps(1)
        assert loop.qd_ref.any(), "the arm came to rest under a hand"
    v_tip = loop.state.tip_twist[:3]
    assert float(v_tip @ hand) / np.linalg.norm(hand) > 0.01, v_tip


# ---------------------------------------------------------------------- the parts, against their definitions
def test_a_hand_is_the_contact_reading_and_zeroing_waits_for_the_reading_the_law_sees():
    """``sensed(f_meas, now, contact)``: the load that refuses zeroing is the law's reading; the hand that is a
    live input is the contact reading (the tool's inertia out); without one, the law's reading is both."""
    force_law = NS(task=None, law=NS(_law=NS(terms=("force",))))
    lv = Liveness()
    assert lv.live(force_law, "idle", np.zeros(6), None, 0.0) is False  # nothing sensed yet: an answer, False
    inertia_only, hand_against = np.array([1.5, 0, 0, 0, 0, 0]), np.array([0.5, 0, 0, 0, 0, 0])
    lv.sensed(inertia_only, 2.0, np.array([0.2, 0, 0, 0, 0, 0]))  # a braking tool: reads 1.5 N, touches nothing
    assert lv.loaded_now and lv.loaded_at == 2.0 and not lv.hand_now
    assert lv.loaded_reason(2.0) == "it reads a load"
    assert not lv.live(force_law, "idle", inertia_only, None, 2.0)
    lv.sensed(hand_against, 2.5, np.array([0, 0, 0, 0, 0, 2 * LOAD_TORQUE]))  # a hand's torque, half hidden
    assert not lv.loaded_now and lv.loaded_at == 2.0 and lv.hand_now
    assert lv.live(force_law, "idle", hand_against, None, 2.5)
    lv.sensed(inertia_only, 3.0)  # no contact reading: the law's reading is the hand
    assert lv.loaded_now and lv.hand_now
    lv.sensed(hand_against, 3.5, hand_against)  # the same object: the same verdict
    assert not lv.loaded_now and not lv.hand_now and lv.loaded_at == 3.0
    assert lv.loaded_reason(3.5) == "it read a load 0.50 s ago"


def _worst(qd, ref):
    """worst_joints by numpy (an independent computation of its definition)."""
    qd, ref = np.asarray(qd, dtype=float), np.asarray(ref, dtype=float)
    off = np.abs(qd - ref)
    dev = np.where(np.sign(qd) == np.sign(ref), np.abs(qd) - np.abs(ref), np.abs(qd))
    j, k = int(np.argmax(off)), int(np.argmax(dev))
    return j, float(off[j]), k, float(dev[k])


def test_the_worst_joints_are_numpys_argmax_of_the_difference_and_of_the_run_on(rng):
    cases = [([0.0, 0.0], [0.0, 0.0]), ([0.0, 0.3], [1.0, 0.3]), ([-1.0, 0.5], [1.0, 0.2]), ([2.0, -3.0], [1.0, -1.0]),
             ([1.0, 0.5], [2.0, 0.1]), ([0.5, -0.5], [0.0, 0.0]), ([0.2, math.nan, 3.0], [0.1, 0.0, 0.0]),
             ([0.2, 1.0, 3.0], [0.1, math.nan, 0.0]), ([-0.0, 0.7], [0.0, -0.7]), ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])]
    cases += [(list(rng.normal(size=6) * rng.integers(0, 2, 6)), list(rng.normal(size=6) * rng.integers(0, 2, 6)))
              for _ in range(200)]
    for qd, ref in cases:
        got, want = worst_joints(qd, ref), _worst(qd, ref)
        assert got[0] == want[0] and got[2] == want[2], (qd, ref, got, want)
        np.testing.assert_array_equal([got[1], got[3]], [want[1], want[3]])
    j, off, k, dev = worst_joints([], [])
    assert (j, k) == (0, 0) and math.isnan(off) and math.isnan(dev)
    for qd, ref in (([1.0], [1.0, 2.0]), ([], [1.0]), ([1.0], [])):  # lengths that differ: an error, no verdict
        with pytest.raises(ValueError):
            worst_joints(qd, ref)


def test_the_load_is_the_force_norm_over_fx_fy_fz_and_the_torque_norm_over_tx_ty_tz():
    """Each component counts in its own norm and in no other: a torque never adds to the force, nor a force
    to the torque."""
    from fdcontrol.loop.liveness import loaded

    for i in range(3):
        f = np.zeros(6)
        f[i] = 1.01 * LOAD_FORCE
        assert loaded(f)
        f[i], f[3 + i] = LOAD_FORCE, 0.9 * LOAD_TORQUE  # at the force threshold, a torque below its own
        assert not loaded(f)
        f[i], f[3 + i] = 0.0, 1.01 * LOAD_TORQUE
        assert loaded(f)
        f[3 + i], f[(i + 1) % 3] = LOAD_TORQUE, 0.9 * LOAD_FORCE
        assert not loaded(f)


def test_following_reads_the_velocities_as_floats():
    """Integer velocities (a driver that reports whole numbers) are velocities like any others."""
    f = Following()
    assert f.check(np.array([0, 2]), np.array([0, 0]), 0.0) is None
    assert f.check(np.array([0, 2]), np.array([0, 0]), FOLLOW_TIME) == (
        "the arm does not follow the reference: joint 1 moves at 2.000 rad/s, the loop asked 0.000 rad/s "
        "for 0.25 s; holding")
    assert not f.ok and f.joint == 1 and f.error == 2.0
    assert Following().check([0.0, 0.0], [1, 0], 0.0) is None  # an integer reference too


def test_following_refuses_velocities_of_different_lengths():
    """A measured q̇ and a reference of different lengths are an error (the cycle that raises holds with a
    fault), never a verdict read past the end of the shorter one."""
    for qd, ref in (([0.0, 3.0], [0.0]), ([0.0], [0.0, 3.0]), ([], [1.0]), ([1.0], [])):
        with pytest.raises(ValueError):
            Following().check(np.array(qd), np.array(ref), 0.0)


def test_following_turns_false_after_follow_time_of_a_lag_and_a_run_on_is_a_fault_after_as_long():
    """Times in exact binary fractions: the boundaries are read exactly (≥ FOLLOW_TIME, > FOLLOW_SPEED)."""
    assert FOLLOW_TIME == 0.25 and FOLLOW_SPEED == 0.5  # the times and speeds below are built on these
    f = Following()
    assert f.ok and f.joint == -1 and math.isnan(f.error)
    held_back = ([0.0, 0.0, 0.1], [0.0, 0.0, 0.625])  # slower than asked: a lag, never a run-on
    for t in (1.0, 1.125, 1.25 - 2 ** -20):
        assert f.check(*held_back, t) is None
        assert f.ok and f.joint == -1 and math.isnan(f.error)
    assert f.check(*held_back, 1.25) is None
    assert not f.ok and f.joint == 2 and f.error == 0.525
    assert f.check(*held_back, 1.5) is None and not f.ok  # goes on
    assert f.check([0.0, 0.0, 0.125], [0.0, 0.0, 0.625], 1.625) is None  # exactly FOLLOW_SPEED off: follows
    assert f.ok and f.joint == -1 and math.isnan(f.error)
    assert f.check(*held_back, 2.0) is None and f.ok  # a new lag starts its own FOLLOW_TIME
    assert f.check(*held_back, 2.125) is None and f.ok
    f.reset()
    assert f.ok and f.joint == -1 and math.isnan(f.error)
    assert f.check(*held_back, 2.25) is None and f.ok  # reset: from now, not from 2.0

    f = Following()
    runs_on = ([0.0, -1.0], [0.0, 0.25])  # against the reference: |q̇| = 1 > FOLLOW_SPEED
    assert f.check(*runs_on, 10.0) is None
    assert f.check(*runs_on, 10.25 - 2 ** -20) is None
    why = f.check(*runs_on, 10.25)
    assert why == ("the arm does not follow the reference: joint 1 moves at -1.000 rad/s, "
                   "the loop asked 0.250 rad/s for 0.25 s; holding")
    assert not f.ok and f.joint == 1 and f.error == 1.25
    assert f.check([0.0, 0.875], [0.0, 0.25], 10.5) is not None  # faster than asked (0.625 more): runs on still
    assert f.check([0.0, 0.75], [0.0, 0.25], 10.75) is None  # exactly FOLLOW_SPEED faster: no run-on
    assert f.check([0.0, 0.875], [0.0, 0.25], 11.0) is None  # a new run-on starts its own FOLLOW_TIME
    f.reset()
    assert f.check([0.0, 0.875], [0.0, 0.25], 11.25) is None  # reset: from now
    assert f.check([math.nan, 0.0], [0.0, 0.0], 12.0) is None  # NaN: no verdict of its own (the driver's fault)
    assert f.ok and f.joint == -1


def servo_braking(kp_kd: float = 10.0, v: float = 1.3, a: float = 8.0, h: float = 1e-3):
    """A joint servoed to commanded positions, as a joint impedance controller does (k_p (q_c − q) − k_d q̇,
    inertia neglected: q̇ = k_p/k_d (q_c − q); franky-sim's joint 4 has k_p/k_d = 3500/350 = 10 /s), through
    a reference that speeds up at ``a`` to ``v``, cruises, brakes at ``a`` to rest and rests: per robot tick
    the measured q̇ and q, the reference sent the tick before and the position commanded with it."""
    ramp = np.minimum(np.arange(1, round(v / a / h) + 1) * a * h, v)
    ref = np.r_[ramp, np.full(100, v), ramp[::-1][1:], np.zeros(400)]
    q, q_c, rows = 0.0, 0.0, []
    for r in ref:
        q_c += h * r  # the command of this tick
        qd = kp_kd * (q_c - q)
        q += h * qd  # the arm over the tick
        rows.append((kp_kd * (q_c - q), q, r, q_c))  # the next state: its q̇ and q against what was sent
    return rows


def test_a_servo_catching_up_with_its_commanded_position_does_not_run_on():
    """A joint impedance controller lags 0.13 rad behind a 1.3 rad/s ramp and covers that gap once the
    reference brakes: more than FOLLOW_SPEED faster than the reference for 50 ms of the robot's time here
    (85 ms recorded from franky-sim under the loop's jerk-limited braking) — on a loaded machine, where the
    simulator runs at a fraction of real time (a sixth here), longer than FOLLOW_TIME on the loop's clock.
    Moving toward the commanded position is no run-on; without the commanded position it was a fault."""
    rows = servo_braking()
    dev = [abs(qd) - abs(r) for qd, _, r, _ in rows]
    assert max(dev) > FOLLOW_SPEED + 0.05  # the catch-up is faster than the reference by more than FOLLOW_SPEED
    assert all(qd * (q_c - q) > 0 for qd, q, _, q_c in rows if abs(qd) > FOLLOW_SPEED)  # toward q_c, all along
    slow = 6e-3  # the loop's clock per robot tick: the simulator behind on a loaded machine
    blind, seeing = Following(), Following()
    faults = [blind.check([qd], [r], i * slow) for i, (qd, _, r, _) in enumerate(rows)]
    assert any(faults)  # the check as it was: a fault for a servo's lag
    for i, (qd, q, r, q_c) in enumerate(rows):
        assert seeing.check([qd], [r], i * slow, np.array([q]), lambda c=q_c: np.array([c])) is None
    assert seeing.ok  # and no lag report either at rest


@pytest.mark.parametrize("commanded", ["ahead", "behind", "at"])
def test_an_arm_that_runs_past_or_away_from_its_commanded_position_still_runs_on(commanded):
    """A driver ignoring commands: the arm goes on at 1 rad/s while the reference is 0 and the commanded
    position stays where the loop left it, 0.05 rad ahead of the arm, behind it, or at it. Ahead, the arm
    covers the gap (no run-on for those 50 ms) and runs past: a fault FOLLOW_TIME after it passed; behind
    or at it, FOLLOW_TIME after it started. Against the reference and away from the commanded position:
    a fault as before."""
    h = 2 ** -10
    q_c = {"ahead": 0.05, "behind": -0.05, "at": 0.0}[commanded]
    f = Following()
    faults = []
    for i in range(1024):
        q = i * h * 1.0
        faults.append((q, i * h, f.check([1.0], [0.0], i * h, np.array([q]), lambda: np.array([q_c]))))
    first = next((q, t) for q, t, why in faults if why)
    passed = max(q_c, 0.0)  # where the arm is no longer moving toward q_c
    assert first[1] == pytest.approx(passed / 1.0 + FOLLOW_TIME, abs=2 * h), (first, commanded)
    assert "joint 0 moves at 1.000 rad/s, the loop asked 0.000 rad/s" in next(w for _, _, w in faults if w)

    f = Following()  # against the reference, moving away from the commanded position
    away = [f.check([-1.0], [0.25], t, np.array([0.0]), lambda: np.array([0.01])) for t in (0.0, 0.125, 0.25)]
    assert away[:2] == [None, None] and away[2] is not None
    f = Following()  # against the reference, toward the commanded position: catching up, no run-on
    assert all(f.check([-1.0], [0.25], t, np.array([0.0]), lambda: np.array([-0.01])) is None
               for t in (0.0, 0.125, 0.25, 0.5))
    f = Following()  # NaN in the commanded position: no catching up (the run-on counts)
    assert [f.check([1.0], [0.0], t, np.array([0.0]), lambda: np.array([math.nan])) for t in (0.0, 0.25)][1]
    f = Following()  # no commanded position known (a velocity interface): as before
    assert [f.check([1.0], [0.0], t, np.array([0.0]), lambda: None) for t in (0.0, 0.25)][1]


def test_loaded_is_the_norms_of_numpy_in_plain_floats():
    """``loaded`` in plain floats against np.linalg.norm on random wrenches around both thresholds, on each
    threshold exactly (one axis), and with NaN and Inf: the same verdict every time, for the wrench as a float64
    array (the loop's) and as a list or a tuple of floats."""
    from fdcontrol.loop.liveness import loaded

    rng = np.random.default_rng(4)
    cases = [rng.normal(scale=s, size=6) for s in (0.05, 0.3, 0.6, 1.0) for _ in range(500)]
    for i in range(6):
        for x in (LOAD_FORCE if i < 3 else LOAD_TORQUE, math.nan, math.inf, -math.inf):
            f = np.zeros(6)
            f[i] = x
            cases.append(f)
    verdicts = set()
    for f in cases:
        want = bool(np.linalg.norm(f[:3]) > LOAD_FORCE or np.linalg.norm(f[3:]) > LOAD_TORQUE)
        assert loaded(f) is want, f
        assert loaded(f.tolist()) is want and loaded(tuple(f)) is want, f
        verdicts.add(want)
    assert verdicts == {True, False}


def test_the_following_check_takes_lists_and_other_dtypes_as_float64():
    """The check reads the loop's float64 vectors as they are and anything else through np.asarray: lists and
    float32 vectors give the verdicts the float64 vectors give, cycle by cycle."""
    qd = np.array([0.1, -0.9, 0.3, 0.0, 2.0, -0.2])
    ref = np.array([0.1, 0.2, 0.3, 0.0, 0.5, -0.2])
    verdicts = []
    for a, b in ((qd, ref), (qd.tolist(), ref.tolist()), (qd.astype(np.float32).astype(float), ref)):
        f, seen = Following(), []
        for i in range(200):
            why = f.check(a, b, i * 0.002)
            seen.append((why, f.ok, f.joint, f.error))
        verdicts.append(seen)
    assert verdicts[0][-1][0] is not None and not verdicts[0][-1][1]  # it ran on: a fault, not following
    assert verdicts[1] == verdicts[0]
    assert [v[:3] for v in verdicts[2]] == [v[:3] for v in verdicts[0]]
    from fdcontrol.loop import liveness

    for scan in (liveness._worst_arrays, liveness._scan):  # vectors the compiled scan does not take: -1, no verdict
        if scan is not None:
            for a, b in ((np.zeros(2), np.zeros(3)), (np.zeros(0), np.zeros(0)), (np.zeros(3), np.zeros(0))):
                j, off, k, dev = scan(a, b)
                assert (j, k) == (-1, -1) and math.isnan(off) and math.isnan(dev)
    f = Following()
    assert f.check(np.zeros(0), np.zeros(0), 0.0) is None and f.ok  # no joints: worst_joints' answer, following
    with pytest.raises(TypeError):
        f.check(np.zeros((2, 3)), np.zeros(3), 0.0)  # not a vector: worst_joints refuses it (as it always did)
