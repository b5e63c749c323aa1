"""Joint acceleration limits on the change of the reference between cycles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fdcontrol.limits.base import Cycle, Limit, LimitSettings, check_positive, per_joint
from fdcontrol.model.robot import RobotModel


@dataclass
class JointAcceleration(Limit):
    """|q̇_j − q̇_prev,j| ≤ a_j dt (rad/s² · s) for the reference sent the cycle before.

    1. The change Δq̇ = q̇ − q̇_prev is scaled uniformly by 1 / max_j(|Δq̇_j| / (a_j dt)) when
       that exceeds 1, keeping the direction of the change (Dahl & Nielsen 1990, as for the
       velocity limit).
    2. Each joint is then put back into the envelope [lo_j, hi_j] of the limits applied before
       (the braking curve of :class:`~fdcontrol.limits.position.PositionEnvelope`): the uniform
       scaling, dominated by another joint, may under-brake a joint that approaches a limit.
       That correction stays within q̇_prev,j ± a_j dt — where the envelope is out of reach in
       one step, the acceleration limit wins and the joint converges to the envelope at a_j.

    The result is within ±a_j dt of q̇_prev,j; only the hard box applied after all limits can
    override it (see fdcontrol.limits.safety for exactly when).
    """

    max_acceleration: np.ndarray  # rad/s²

    name = "acceleration"
    order = 40.0
    required = ("without it the reference may step: nothing ramps a joint into its braking envelope, "
                "a joint beyond a limit is snapped back, and a real drive faults on the step")

    @classmethod
    def from_settings(cls, robot: RobotModel, params: LimitSettings) -> JointAcceleration:
        """``max_joint_acceleration`` (rad/s²) for every joint."""
        out = cls(per_joint(params.max_joint_acceleration, robot.dof, "max_acceleration"))
        out.validate()
        return out

    def validate(self) -> None:
        check_positive(self.max_acceleration, "max_acceleration")

    def apply(self, c: Cycle, qd: list[float]) -> bool:
        dt, prev, n = c.dt, c.prev, c.n
        step = [a * dt for a in self.max_acceleration.tolist()]
        r = 0.0
        for j in range(n):
            x = abs(qd[j] - prev[j]) / step[j]
            if x > r:
                r = x
        hit = r > 1.0
        lo, hi = c.lo, c.hi
        for j in range(n):
            x = prev[j] + (qd[j] - prev[j]) / r if hit else qd[j]
            if x > hi[j]:
                x = hi[j]
            elif x < lo[j]:
                x = lo[j]
            p, s = prev[j], step[j]
            if x > p + s:
                x = p + s
            elif x < p - s:
                x = p - s
            qd[j] = x
        return hit
