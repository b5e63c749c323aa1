"""A speed cap that keeps a straight tip path within the joint acceleration limits."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fdcontrol.limits.base import Cycle, Limit, LimitSettings, check_positive, per_joint
from fdcontrol.model.robot import RobotModel
from fdcontrol.params import Param, declare

DEFAULT_RESERVE = 0.5


@dataclass
class PathSpeed(Limit):
    """The tip's speed along its current straight path, capped so that following the path needs
    at most ``reserve`` × a_j of each joint's acceleration limit; q̇ is scaled uniformly (the
    twist's direction is kept).

    Moving at a constant twist V = J q̇ along a straight line, with s the path parameter
    (|V| = ṡ) and q' = q̇/ṡ, J(q) q' stays constant, so J q'' + (∂J/∂s) q' = 0 and

        q'' = −J⁺ (∂J/∂s) q',    q̈ = ṡ² q'' + s̈ q'.

    The first term is the acceleration the joints need only to keep the line as J changes (the
    virtual model's Coriolis term supplies it); it grows with ṡ². When ṡ² |q''_j| exceeds a_j, no
    scaling of a single cycle keeps the line — the acceleration limit then bends the path
    (:class:`~fdcontrol.limits.path_acceleration.PathAcceleration` finds no scale and leaves the
    cycle to it). This limit lowers the speed beforehand, ṡ ≤ min_j √(reserve · a_j / |q''_j|), so
    the rest of the budget is left for the change of speed itself (time scaling along the path:
    Bobrow, Dubowsky & Gibson, "Time-optimal control of robotic manipulators along specified
    paths", IJRR 4(3), 1985 — here without look-ahead, one cycle at a time). (∂J/∂s) q' = J̇(q, q') q',
    the tip's acceleration at q̈ = 0 with q̇ = q' (one second-order forward kinematics pass,
    :meth:`~fdcontrol.model.robot.RobotModel.jacobian_rate`). Scaling by σ ≤ 1 never leaves the boxes
    of the limits before it.
    """

    robot: RobotModel
    max_acceleration: np.ndarray  # rad/s²
    reserve: float = DEFAULT_RESERVE

    name = "path_speed"
    order = 33.0
    PARAMS = declare(
        "limits",
        Param("path_speed_reserve", "float", DEFAULT_RESERVE, "limit path_speed: the share of each joint's "
              "acceleration limit that keeping a straight tip path may use at the capped speed", policy="tighten",
              gt=0, le=1),
    )

    @classmethod
    def from_settings(cls, robot: RobotModel, params: LimitSettings) -> PathSpeed:
        """``max_joint_acceleration`` (rad/s²) and ``path_speed_reserve``."""
        out = cls(robot, per_joint(params.max_joint_acceleration, robot.dof, "max_acceleration"),
                  float(getattr(params, "path_speed_reserve", DEFAULT_RESERVE)))
        out.validate()
        return out

    def validate(self) -> None:
        check_positive(self.max_acceleration, "max_acceleration")
        if not (math.isfinite(self.reserve) and 0 < self.reserve <= 1):
            raise ValueError("path_speed_reserve must be in (0, 1]")

    def apply(self, c: Cycle, qd: list[float]) -> bool:
        J = c.J
        if J is None:
            return False
        d = np.asarray(qd, dtype=float)
        speed = float(np.linalg.norm(J @ d))
        if not (speed > 1e-9) or not np.all(np.isfinite(d)):
            return False
        qp = d / speed
        q = np.asarray(c.q, dtype=float)
        qpp = -np.linalg.pinv(J, rcond=1e-6) @ self.robot.jacobian_rate(q, qp)
        need = np.abs(qpp)
        if not np.all(np.isfinite(need)) or need.max() <= 0:
            return False
        cap = float(np.min(np.sqrt(self.reserve * self.max_acceleration / np.maximum(need, 1e-300))))
        if speed <= cap:
            return False
        s = cap / speed
        for j in range(c.n):
            qd[j] *= s
        return True
