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
       ramps back into its box at the jerk limit.

    The velocity reference then never passes a desired velocity it approaches (so it stays
    within the velocity limit the limits before enforce) and brakes to zero (stop, hold,
    watchdog) with the deceleration ramped. Joints are limited independently: during a
    jerk-limited transient the joint-space direction is not kept exactly. Only the hard box
    (position and velocity, :mod:`fdcontrol.limits.safety`) applied after all limits can
    override it. Runs after the acceleration limit (``order`` 45). A non-finite desired
    velocity brakes that joint to zero.

    The limit keeps the previous cycle's q̇_prev to know a_prev; a loop that restarts from
    rest (q̇_prev = 0 after a reference far from zero) starts from a_prev = 0.
    """

    max_jerk: np.ndarray  # rad/s³
    max_acceleration: np.ndarray  # rad/s²
    _prev2: list[float] | None = field(default=None, init=False, repr=False)
    _last: list[float] | None = field(default=None, init=False, repr=False)

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
        self._prev2 = self._last = None

    def apply(self, c: Cycle, qd: list[float]) -> bool:
        dt, prev, n = c.dt, c.prev, c.n
        jerk, acc = self.max_jerk.tolist(), self.max_acceleration.tolist()
        p2, last = self._prev2, self._last
        restart = p2 is None or len(p2) != n or (
            last is not None and not any(prev) and any(abs(x) > a * dt for x, a in zip(last, acc, strict=True)))
        hit = False
        for j in range(n):
            A, J, v = acc[j], jerk[j], prev[j]
            a_prev = 0.0 if restart else (v - p2[j]) / dt  # type: ignore[index]
            target = qd[j] if math.isfinite(qd[j]) else 0.0
            e = target - v
            r = abs(e)
            a_star = 2.0 * r / (math.sqrt(dt * dt + 2.0 * r / J) + dt)  # = j(√(dt² + 2r/j) − dt), no cancellation
            a_t = r / dt if r / dt <= a_star else a_star
            a_t = a_t if e >= 0 else -a_t
            a = a_t if a_t <= A else A
            a = a if a >= -A else -A
            s = J * dt
            if a > a_prev + s:
                a = a_prev + s
            elif a < a_prev - s:
                a = a_prev - s
            if a == r / dt or a == -r / dt:  # reached exactly (no round-off residue at standstill)
                qd[j] = target
            else:
                qd[j] = v + a * dt
                hit = True
        self._prev2 = list(prev)
        self._last = list(qd)
        return hit
