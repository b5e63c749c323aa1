"""Joint acceleration limits by time scaling: the twist's direction is kept, only its speed drops."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fdcontrol.limits.base import Cycle, Limit, LimitSettings, check_positive, per_joint
from fdcontrol.model.robot import RobotModel


@dataclass
class PathAcceleration(Limit):
    """|σ q̇_j − q̇_prev,j| ≤ a_j dt with the largest σ ∈ [0, 1] for which every joint holds.

    The acceleration limit (:class:`~fdcontrol.limits.acceleration.JointAcceleration`) scales
    the *change* Δq̇ = q̇ − q̇_prev; q̇_prev + sΔq̇ is then a mix of the previous and the new
    reference, and its tip twist J q̇ points between them. When the change carries the term
    that turns the joint velocities so the tip keeps its direction as J changes (the virtual
    model's Coriolis term, Scherzinger et al., "Virtual Forward Dynamics Models for Cartesian
    Robot Control", section 5), the tip leaves its path. This limit scales the new reference
    itself instead, q̇ = σ q̇_d: the twist J q̇_d keeps its direction and the tip its path, and
    only its speed along the path is lower (time scaling, Dahl & Nielsen, "Torque-limited path
    following by online trajectory time scaling", IEEE Trans. Robot. Autom. 6(5), 1990).

    Per joint the admissible σ form an interval [(p − a dt)/d, (p + a dt)/d] (ends swapped for
    d < 0; for d = 0 the joint must already satisfy |p| ≤ a dt); σ is the largest value in
    their intersection with [0, 1]. Where the intersection is empty — a change of direction
    larger than a dt allows (braking, a reversal) — the reference is left as it was and the
    acceleration limit after it (order 40) scales the change as before; it still guarantees
    |Δq̇_j| ≤ a_j dt in every case. Scaling by σ ≤ 1 never leaves the velocity box or the
    braking envelope of the limits before it (both contain 0).
    """

    max_acceleration: np.ndarray  # rad/s²

    name = "path_acceleration"
    order = 35.0

    @classmethod
    def from_settings(cls, robot: RobotModel, params: LimitSettings) -> PathAcceleration:
        """``max_joint_acceleration`` (rad/s²), the same as the acceleration limit's."""
        out = cls(per_joint(params.max_joint_acceleration, robot.dof, "max_acceleration"))
        out.validate()
        return out

    def validate(self) -> None:
        check_positive(self.max_acceleration, "max_acceleration")

    def apply(self, c: Cycle, qd: list[float]) -> bool:
        dt, prev = c.dt, c.prev
        step = [a * dt for a in self.max_acceleration.tolist()]
        if all(abs(qd[j] - prev[j]) <= step[j] for j in range(c.n)):
            return False
        lo, hi = 0.0, 1.0
        for j in range(c.n):
            d, p, s = qd[j], prev[j], step[j]
            if d == 0.0:
                if abs(p) > s:
                    return False  # no σ brings this joint within reach
                continue
            u, v = (p - s) / d, (p + s) / d
            if u > v:
                u, v = v, u
            lo, hi = max(lo, u), min(hi, v)
            if lo > hi:
                return False
        for j in range(c.n):
            qd[j] *= hi
        return True
