"""Limits on the joint-velocity reference: one class per file against a tiny base.

``LIMITS`` registers them by name; :class:`fdcontrol.limits.safety.SafetyLimits` composes the
configured set (settings ``limits``) in each class's ``order`` — cartesian → position →
velocity → acceleration — then the hard box. A new limit is one class with a ``name``,
``apply`` and, if it has parameters, ``from_settings``, registered here or by a plugin
(:mod:`fdcontrol.registry`).
"""

from fdcontrol.limits.acceleration import JointAcceleration
from fdcontrol.limits.base import Cycle, Limit, LimitSettings, run
from fdcontrol.limits.braking import braking_steps
from fdcontrol.limits.cartesian import CartesianSpeed
from fdcontrol.limits.collision import CollisionAvoidance
from fdcontrol.limits.jerk import JointJerk
from fdcontrol.limits.path_acceleration import PathAcceleration
from fdcontrol.limits.path_speed import PathSpeed
from fdcontrol.limits.position import BRAKING_MARGIN, PositionEnvelope
from fdcontrol.limits.velocity import JointVelocity
from fdcontrol.limits.workspace import WorkspaceStop
from fdcontrol.registry import Registry

LIMITS: Registry[Limit] = Registry("limit")
for _cls in (CartesianSpeed, PositionEnvelope, JointVelocity, JointAcceleration, WorkspaceStop, JointJerk):
    LIMITS.register(_cls.name)(_cls)
LIMITS.register(PathAcceleration.name)(PathAcceleration)  # optional: select it in the settings' ``limits``
LIMITS.register(PathSpeed.name)(PathSpeed)  # optional, with path_acceleration: straight paths at a joint's limits
LIMITS.register(CollisionAvoidance.name)(CollisionAvoidance)  # joined with link geometry and volumes / self-collision

__all__ = ["BRAKING_MARGIN", "LIMITS", "CartesianSpeed", "CollisionAvoidance",
           "Cycle", "JointAcceleration", "JointJerk", "JointVelocity",
           "Limit", "LimitSettings", "PathAcceleration", "PathSpeed", "PositionEnvelope", "WorkspaceStop",
           "braking_steps", "run"]
