"""Published joint acceleration and jerk limits that a URDF cannot carry, by shipped robot name.

Franka's documentation of its control interfaces ("Limits for Franka Research 3", "Limits for
Panda") gives, besides the position and velocity limits in the URDFs, per-joint acceleration
(rad/s²) and jerk (rad/s³) limits: references that exceed them make the robot abort the motion
with a reflex (e.g. ``joint_motion_generator_acceleration_discontinuity``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DynamicLimits:
    """Per-joint acceleration (rad/s²) and jerk (rad/s³) limits of a robot's references."""

    acceleration: tuple[float, ...]
    jerk: tuple[float, ...]


#: shipped robot name → its published limits (robots not listed publish none)
PUBLISHED: dict[str, DynamicLimits] = {
    "fr3": DynamicLimits(acceleration=(10.0,) * 7, jerk=(5000.0,) * 7),
    "panda": DynamicLimits(acceleration=(15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0),
                           jerk=(7500.0, 3750.0, 5000.0, 6250.0, 7500.0, 10000.0, 10000.0)),
}


def published_limits(name: str) -> DynamicLimits | None:
    """The published limits of the shipped robot `name`, or None."""
    return PUBLISHED.get(name)
