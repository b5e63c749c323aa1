"""Cartesian speed of the tip, direction kept."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fdcontrol.limits.base import Cycle, Limit, LimitSettings
from fdcontrol.model.robot import RobotModel


@dataclass
class CartesianSpeed(Limit):
    """‖v‖ ≤ v_max (m/s) and ‖ω‖ ≤ ω_max (rad/s) for the tip twist [v; ω] = J q̇ (seed eq. 3).

    q̇ is scaled by s = min(1, v_max/‖v‖, ω_max/‖ω‖); the twist scales with it, so its direction
    is kept (the tool speed limit of ISO 10218-1 / ISO/TS 15066, enforced by
    uniform scaling as in Dahl & Nielsen 1990). J is 6×N in the base frame, rows [v; ω].
    No hard box: the limits applied after it only slow the joints further, except the
    acceleration limit, which may keep a faster twist for the cycles it needs to brake.
    """

    max_linear_speed: float = 0.5  # m/s
    max_angular_speed: float = 1.5  # rad/s

    name = "cartesian"
    order = 10.0

    @classmethod
    def from_settings(cls, robot: RobotModel, params: LimitSettings) -> CartesianSpeed:
        out = cls(float(params.max_linear_speed), float(params.max_angular_speed))
        out.validate()
        return out

    def validate(self) -> None:
        for name in ("max_linear_speed", "max_angular_speed"):
            v = getattr(self, name)
            if not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be finite and > 0")

    @staticmethod
    def twist(J: Any, qd: list[float]) -> list[float]:
        """The tip twist J q̇ (6 entries): each row's products summed left to right from 0.0 — the order the
        compiled limits (fdcontrol.limits.compiled) sum in, so both give the same bits."""
        rows = np.asarray(J, dtype=float).tolist()
        t = []
        for i in range(6):
            s = 0.0
            for a, b in zip(rows[i], qd, strict=True):
                s += a * b
            t.append(s)
        return t

    def apply(self, c: Cycle, qd: list[float]) -> bool:
        if c.J is None:
            raise ValueError("the Cartesian speed limit needs the Jacobian J")
        t = self.twist(c.J, qd)
        v = math.sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2])
        w = math.sqrt(t[3] * t[3] + t[4] * t[4] + t[5] * t[5])
        s = 1.0
        if v > self.max_linear_speed:
            s = self.max_linear_speed / v
        if w > self.max_angular_speed:
            s = min(s, self.max_angular_speed / w)
        if s >= 1.0:
            return False
        for j in range(c.n):
            qd[j] *= s
        return True
