"""Joint velocity limits, direction kept."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fdcontrol.limits.base import Cycle, Limit, LimitSettings, check_positive, per_joint
from fdcontrol.model.robot import RobotModel


@dataclass
class JointVelocity(Limit):
    """|q̇_j| ≤ v_max,j (rad/s) by one uniform scale s = 1 / max_j(|q̇_j| / v_max,j) when > 1.

    Scaling all joints by the same s keeps the direction of q̇, hence of the tip twist J q̇ —
    the velocity-scaling form of Cartesian path preservation (Dahl & Nielsen, "Torque-limited
    path following by online trajectory time scaling", IEEE Trans. Robot. Autom. 6(5) 1990).
    Hard box: [−v_max, v_max].
    """

    max_velocity: np.ndarray  # rad/s

    name = "velocity"
    order = 30.0
    required = "it keeps every joint within its velocity limit (the hard box: |q̇_j| ≤ v_max,j)"

    @classmethod
    def from_settings(cls, robot: RobotModel, params: LimitSettings) -> JointVelocity:
        """``velocity_scale`` × the robot description's velocity limits."""
        out = cls(per_joint(params.velocity_scale * robot.limits.velocity, robot.dof, "max_velocity"))
        out.validate()
        return out

    def validate(self) -> None:
        check_positive(self.max_velocity, "max_velocity")

    def apply(self, c: Cycle, qd: list[float]) -> bool:
        vmax = self.max_velocity.tolist()
        r = 0.0
        for j in range(c.n):
            x = abs(qd[j]) / vmax[j]
            if x > r:
                r = x
        hard_lo, hard_hi = c.hard_lo, c.hard_hi
        for j in range(c.n):
            v = vmax[j]
            if v < hard_hi[j]:
                hard_hi[j] = v
            if -v > hard_lo[j]:
                hard_lo[j] = -v
        if r <= 1.0:
            return False
        for j in range(c.n):
            qd[j] /= r
        return True
