"""Limits on the joint-velocity reference: one class per file against a tiny base.

``LIMITS`` registers them by name; :class:`fdcontrol.safety.SafetyLimits` composes them in
the order cartesian → position → velocity → acceleration, then the hard box.
"""

from ..registry import Registry
from .acceleration import JointAcceleration
from .base import Cycle, Limit, run
from .braking import braking_steps
from .cartesian import CartesianSpeed
from .position import BRAKING_MARGIN, PositionEnvelope
from .velocity import JointVelocity

LIMITS: Registry[Limit] = Registry("limit")
for _cls in (CartesianSpeed, PositionEnvelope, JointVelocity, JointAcceleration):
    LIMITS.register(_cls.name)(_cls)

__all__ = ["BRAKING_MARGIN", "LIMITS", "CartesianSpeed", "Cycle", "JointAcceleration", "JointVelocity",
           "Limit", "PositionEnvelope", "braking_steps", "run"]
