"""Joint position limits as a braking envelope, with jerk-free recovery from beyond a limit."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fdcontrol.limits.base import Cycle, Limit, LimitSettings, check_positive, per_joint
from fdcontrol.model.robot import RobotModel

BRAKING_MARGIN = 0.5  # brake along √(2·0.5·a·d): room for the discrete envelope and a lagging robot


@dataclass
class PositionEnvelope(Limit):
    """q̇_j kept inside the braking envelope of joint j's position limits (rad, rad/s, rad/s²).

    Inside the limits, with d_u = upper − q and d_l = q − lower (rad):

        −min(√(2 m a d_l), d_l/dt) ≤ q̇_j ≤ min(√(2 m a d_u), d_u/dt)

    A joint moving at v with deceleration a stops within v²/(2a), so v ≤ √(2 a d) lets it stop
    before the limit (the viable velocities of Del Prete, "Joint position and velocity bounds
    in discrete-time acceleration/torque control of robot manipulators", IEEE RA-L 3(1) 2018);
    the margin m = ``margin`` < 1 leaves room for the discrete steps and for a robot that
    lags its reference, and the d/dt term keeps q + q̇ dt inside within one step.

    Beyond a limit (d_u < 0, mirrored below) the joint is driven back at up to
    ``recovery``·v_max: the envelope is [−min(recovery·v_max, −d_u/dt), 0], the desired
    velocity is set to its lower end, and the acceleration limit ramps towards it — a joint
    that starts beyond a limit is never snapped back (no velocity step at activation).

    Hard box (never left): −max(d_l, 0)/dt ≤ q̇_j ≤ max(d_u, 0)/dt, i.e. q + q̇ dt ∈ [lower, upper]
    inside, and beyond a limit no motion further out (nor past the opposite limit).
    """

    lower: np.ndarray
    upper: np.ndarray
    max_acceleration: np.ndarray  # rad/s², the deceleration the envelope assumes
    max_velocity: np.ndarray  # rad/s, scales the recovery speed
    recovery: float = 0.1  # fraction of max_velocity used to move back inside a limit
    margin: float = BRAKING_MARGIN

    name = "position"
    order = 20.0
    required = "it keeps every joint inside its position limits (the hard box: q + q̇·dt ∈ [lower, upper])"

    @classmethod
    def from_settings(cls, robot: RobotModel, params: LimitSettings) -> PositionEnvelope:
        """The robot description's position limits; the braking deceleration and recovery
        speed from ``max_joint_acceleration`` and ``velocity_scale`` × its velocity limits."""
        n = robot.dof
        out = cls(robot.limits.lower.copy(), robot.limits.upper.copy(),
                  per_joint(params.max_joint_acceleration, n, "max_acceleration"),
                  per_joint(params.velocity_scale * robot.limits.velocity, n, "max_velocity"),
                  float(getattr(params, "recovery_speed", cls.recovery)))
        out.validate()
        return out

    def validate(self) -> None:
        if np.any(~(self.lower <= self.upper)):
            raise ValueError("lower position limits must be <= upper ones")
        check_positive(self.max_acceleration, "max_acceleration")
        check_positive(self.max_velocity, "max_velocity")
        if not 0 < self.recovery <= 1:
            raise ValueError("recovery_speed must be in (0, 1]")
        if not 0 < self.margin <= 1:
            raise ValueError("braking margin must be in (0, 1]")

    def apply(self, c: Cycle, qd: list[float]) -> bool:
        # plain comparisons instead of min()/max(): this runs for every joint every cycle
        dt, q, sqrt = c.dt, c.q, math.sqrt
        inv_dt = 1.0 / dt
        lower, upper = self.lower.tolist(), self.upper.tolist()
        amax, vmax = self.max_acceleration.tolist(), self.max_velocity.tolist()
        m2, back = 2.0 * self.margin, self.recovery
        lo, hi, hard_lo, hard_hi = c.lo, c.hi, c.hard_lo, c.hard_hi
        hit = False
        for j in range(c.n):
            du, dl = upper[j] - q[j], q[j] - lower[j]
            if du < 0:  # above the upper limit: come back down (never further up), ramped by a·dt
                r = back * vmax[j]
                a = -r if r < -du * inv_dt else du * inv_dt
                b = 0.0
                qd[j], hit = a, True
                du = 0.0
            elif dl < 0:  # below the lower limit
                r = back * vmax[j]
                a, b = 0.0, (r if r < -dl * inv_dt else -dl * inv_dt)
                qd[j], hit = b, True
                dl = 0.0
            else:
                brake = m2 * amax[j]
                b, a = sqrt(brake * du), sqrt(brake * dl)
                if du * inv_dt < b:
                    b = du * inv_dt
                a = -(dl * inv_dt) if dl * inv_dt < a else -a
                x = qd[j]
                if x > b:
                    qd[j], hit = b, True
                elif x < a:
                    qd[j], hit = a, True
            if a > lo[j]:
                lo[j] = a
            if b < hi[j]:
                hi[j] = b
            h = -dl * inv_dt  # hard box: −max(d_l, 0)/dt ≤ q̇ ≤ max(d_u, 0)/dt
            if h > hard_lo[j]:
                hard_lo[j] = h
            h = du * inv_dt
            if h < hard_hi[j]:
                hard_hi[j] = h
        return hit
