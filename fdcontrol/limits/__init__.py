"""Limits on the joint-velocity reference: one class per file against a tiny base.

``LIMITS`` registers them by name; :class:`fdcontrol.safety.SafetyLimits` composes the
configured set (settings ``limits``) in each class's ``order`` — cartesian → position →
velocity → acceleration — then the hard box. A new limit is one class with a ``name``,
``apply`` and, if it has parameters, ``from_settings``, registered here or by a plugin
(:mod:`fdcontrol.registry`).
"""

from ..registry import Registry
from .acceleration import JointAcceleration
from .base import Cycle, Limit, LimitSettings, run
from .braking import braking_steps
from .cartesian import CartesianSpeed
from .position import BRAKING_MARGIN, PositionEnvelope
from .velocity import JointVelocity

LIMITS: Registry[Limit] = Registry("limit")
for _cls in (CartesianSpeed, PositionEnvelope, JointVelocity, JointAcceleration):
    LIMITS.register(_cls.name)(_cls)

__all__ = ["BRAKING_MARGIN", "LIMITS", "CartesianSpeed", "Cycle", "JointAcceleration", "JointVelocity",
           "Limit", "LimitSettings", "PositionEnvelope", "braking_steps", "run"]
