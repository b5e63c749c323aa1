"""Joint jerk limit: the change of the reference's acceleration between cycles."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fdcontrol.limits.base import Cycle, Limit, LimitSettings, check_positive, per_joint
from fdcontrol.model.published import published_limits
from fdcontrol.model.robot import RobotModel

DEFAULT_MAX_JERK = 5000.0  # rad/s³ (Franka Research 3, every joint)


@dataclass
class JointJerk(Limit):
    """|a_j − a_prev,j| ≤ j_max,j dt and |a_j| ≤ a_max,j for the reference's acceleration
    a_j = (q̇_j − q̇_prev,j)/dt, with a_prev the acceleration of the reference sent the cycle
    before, and no overshoot of the desired velocity by the jerk-limited approach.

    Per joint, with e = q̇_d − q̇_prev the velocity the limits before asked for:

    1. the largest acceleration from which the velocity still reaches q̇_d without passing it
       when the acceleration is then ramped down at the jerk limit: a velocity that grows by
       a dt this cycle and by at most a²/(2 j_max) while a is ramped to zero gives
       a* = j_max (√(dt² + 2|e|/j_max) − dt) (the discrete form of the time-optimal
       jerk-limited approach, e.g. Kröger & Wahl, "Online Trajectory Generation: Basic
       Concepts for Instantaneous Reactions to Unforeseen Events", IEEE T-RO 2010, Type IV);
       the target acceleration is sign(e)·min(|e|/dt, a*),
    2. clipped to ±a_max, then to a_prev ± j_max dt: the jerk box is applied last, so where
       both cannot hold (a_prev outside ±a_max after the limit was lowered) the acceleration
       ramps back into its box at the jerk limit. A previous reference changed outside this
       limit (the hard box after a velocity limit lowered while moving, a lagging robot) counts
       with its own step as a_prev only as far as this limit would have gone on with it: none
       when it points away from the desired velocity, toward it at most a* (no overshoot) and
       ±a_max (continued, a velocity clipped from 0.68 to 0.2 rad/s in one 2 ms cycle would go on
       at −240 rad/s², through zero to the other side of the box; even at −a_max it would dip
       a_max²/(2 j_max) further, through zero when the new box is smaller than that). Over
       missed robot ticks the robot's own fill continues that step as it was (below).

    The velocity reference then never passes a desired velocity it approaches (so it stays
    within the velocity limit the limits before enforce) and brakes to zero (stop, hold,
    watchdog) with the deceleration ramped. Joints are limited independently: during a
    jerk-limited transient the joint-space direction is not kept exactly. Only the hard box
    (position and velocity, :mod:`fdcontrol.limits.safety`) applied after all limits can
    override it. Runs after the acceleration limit (``order`` 45). A non-finite desired
    velocity brakes that joint to zero.

    A missed robot cycle (a loop paced by the robot's clock, whose ``dt`` is then k ≥ 2 of its
    periods h, :class:`~fdcontrol.limits.base.Cycle`): a Franka fills each command that did not
    come with the last one extrapolated at constant acceleration (libfranka's ``rate_limiting.h``,
    ``kTolNumberPacketsLost``: "When a packet is lost, FCI assumes a constant acceleration
    model"), so the robot's velocity went on to q̇_prev + (k−1)·a_prev·h. The reference after the
    miss continues that signal: the rules above apply to the one tick h from there, and the
    signal the robot executes, tick by tick, keeps |a| ≤ a_max and |Δa| ≤ j_max h also around the
    miss. ``a_prev`` is then the acceleration of the last tick, not the mean over the k ticks. A
    reference at rest (q̇_prev = 0 in every joint) is not extrapolated: a reference at rest never
    starts to move by itself after a missed cycle.

    The limit keeps the previous cycle's q̇_prev and its last tick's acceleration to know a_prev;
    a loop that restarts from rest (q̇_prev = 0 after a reference far from zero) starts from a_prev
    = 0, and a reference changed outside the limit between two cycles counts with its own step.
    """

    max_jerk: np.ndarray  # rad/s³
    max_acceleration: np.ndarray  # rad/s²
    #: the history, one row each: the previous cycle's q̇_prev, the reference this limit made, its last tick's
    #: acceleration (None: none yet); the compiled twin (fdcontrol.limits.compiled.jerk) keeps it in place
    _state: np.ndarray | None = field(default=None, init=False, repr=False)

    name = "jerk"
    order = 45.0

    @classmethod
    def from_settings(cls, robot: RobotModel, params: LimitSettings) -> JointJerk:
        """``max_joint_jerk`` (rad/s³, default 5000) and ``max_joint_acceleration`` (rad/s²) for every
        joint, each lowered to the robot's published limits (:mod:`fdcontrol.model.published`)."""
        n = robot.dof
        jerk = per_joint(getattr(params, "max_joint_jerk", DEFAULT_MAX_JERK), n, "max_jerk")
        acc = per_joint(params.max_joint_acceleration, n, "max_acceleration")
        pub = published_limits(robot.name)
        if pub is not None and len(pub.jerk) == n:
            jerk = np.minimum(jerk, pub.jerk)
            acc = np.minimum(acc, pub.acceleration)
        out = cls(jerk, acc)
        out.validate()
        return out

    def validate(self) -> None:
        self.max_jerk = np.asarray(self.max_jerk, dtype=float)
        self.max_acceleration = np.asarray(self.max_acceleration, dtype=float)
        check_positive(self.max_jerk, "max_jerk")
        check_positive(self.max_acceleration, "max_acceleration")
        if self.max_jerk.shape != self.max_acceleration.shape:
            raise ValueError("max_jerk and max_acceleration must have one entry per joint each")

    def reset(self) -> None:
        """Forget the previous cycles (the next reference starts from a_prev = 0)."""
        self._state = None

    def apply(self, c: Cycle, qd: list[float]) -> bool:
        dt, prev, n = c.dt, c.prev, c.n
        # k robot ticks of h since the last reference: k − 1 of them filled by the robot (see the class doc)
        k = round(dt / c.period) if dt > 1.5 * c.period else 1
        h = dt / k
        jerk, acc = self.max_jerk.tolist(), self.max_acceleration.tolist()
        st = self._state
        restart = st is None or st.shape != (3, n)
        if not restart:
            p2, last, acc_last = st.tolist()  # type: ignore[union-attr]
            restart = not any(prev) and any(abs(x) > a * dt for x, a in zip(last, acc, strict=True))
        own = not restart and last == prev  # prev is the reference this limit made
        moving = any(prev)  # at rest the robot has no motion to extrapolate (a Franka ends it there)
        hit = False
        out_acc = [0.0] * n
        for j in range(n):
            A, J, v = acc[j], jerk[j], prev[j]
            if restart:
                a_prev = 0.0
            elif own:
                a_prev = acc_last[j]  # type: ignore[index]
            else:  # changed outside this limit: its own step
                a_prev = (v - p2[j]) / dt  # type: ignore[index]
            if k > 1 and moving:
                v = v + (k - 1) * a_prev * h  # where the robot's constant-acceleration fill took it
            target = qd[j] if math.isfinite(qd[j]) else 0.0
            e = target - v
            r = abs(e)
            a_star = 2.0 * r / (math.sqrt(h * h + 2.0 * r / J) + h)  # = j(√(h² + 2r/j) − h), no cancellation
            if not (restart or own):  # a step made outside (the hard box after a lowered velocity limit, a
                # lagging robot) is no acceleration this limit chose to go on with: none away from the target,
                # toward it at most a* (no overshoot) and ±a_max; a NaN passes through as it came
                if a_prev * e < 0.0:
                    a_prev = 0.0
                elif a_prev > a_star:
                    a_prev = a_star
                elif a_prev < -a_star:
                    a_prev = -a_star
                if a_prev > A:
                    a_prev = A
                elif a_prev < -A:
                    a_prev = -A
            a_t = r / h if r / h <= a_star else a_star
            a_t = a_t if e >= 0 else -a_t
            a = a_t if a_t <= A else A
            a = a if a >= -A else -A
            s = J * h
            if a > a_prev + s:
                a = a_prev + s
            elif a < a_prev - s:
                a = a_prev - s
            if a == r / h or a == -r / h:  # reached exactly (no round-off residue at standstill)
                qd[j] = target
            else:
                qd[j] = v + a * h
                hit = True
            out_acc[j] = a
        self._state = np.array([prev, qd, out_acc], dtype=float)
        return hit
