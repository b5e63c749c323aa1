"""Control laws: the Cartesian control signal f_c of seed 004 Fig. 2, by composition.

Sign convention for measured wrenches: ``f_measured`` is the wrench the robot's tool exerts
ON the environment, at the tip origin (the sensor model of :mod:`fdcontrol.control.sensing`: the
raw reading with its sign, the tool's weight and the bias compensated). So a person pushing the tool towards +x gives
f_measured along −x, and pure force control with f_target = 0 (hand guiding) moves the
tool towards +x; pressing on a wall with f_target = +10 N·n settles where the wall pushes
back with 10 N.

All wrenches and twists are [linear; angular] (N, N·m; m/s, rad/s). A law returns f_c in
the base frame; ``frame = "tool"`` makes per-axis gains act along the tool axes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fdcontrol.control.laws import LAWS, ControlInput, ForceTerm, MotionTerm, in_frame_gains, pose_error
from fdcontrol.control.sensing import GRAVITY as GRAVITY  # re-exported for compatibility
from fdcontrol.control.sensing import (
    WrenchFilter as WrenchFilter,  # moved to fdcontrol.control.sensing; importable here too
)
from fdcontrol.control.twist import TwistTerm

Frame = Literal["base", "tool"]
Mode = str  # a name in LAWS


def __getattr__(name: str) -> tuple[str, ...]:
    # MODES (the registered laws, plugins included) is derived when read, never a stale copy
    if name == "MODES":
        return LAWS.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["GRAVITY", "LAWS", "ControlInput", "ControlLaw", "ForceTerm", "Frame", "Mode", "MotionTerm",
           "TwistTerm", "WrenchFilter", "in_frame_gains", "pose_error"]


def _vec6(x: float | list[float] | np.ndarray, name: str, nonneg: bool = True) -> np.ndarray:
    msg = f"{name} must be 6 finite{' non-negative' if nonneg else ''} numbers (or one for all axes)"
    try:
        v = np.broadcast_to(np.asarray(x, dtype=float), (6,)).copy()
    except (ValueError, TypeError) as exc:
        raise ValueError(msg) from exc
    if not np.all(np.isfinite(v)) or (nonneg and np.any(v < 0)):
        raise ValueError(msg)
    return v


_IDENTITY = np.eye(3)
_IDENTITY.setflags(write=False)  # shared by every cycle: a term that wrote into R would fail here


@dataclass
class ControlLaw:
    """f_c = Σ terms + f_applied. The mode names a law registered in :data:`fdcontrol.control.laws.LAWS`,
    which adds its terms (see each law's docstring for its equation).

    In every mode a live streamed twist adds the velocity-tracking term (fdcontrol.control.twist).
    """

    mode: Mode = "admittance"
    frame: Frame = "base"
    force: ForceTerm = field(default_factory=ForceTerm)
    motion: MotionTerm = field(default_factory=MotionTerm)
    twist: TwistTerm = field(default_factory=TwistTerm)

    def __setattr__(self, key: str, value: object) -> None:
        # the mode is looked up once per change, not once per cycle; unknown names fail here
        if key == "mode":
            object.__setattr__(self, "_law", LAWS.create(str(value)))
        object.__setattr__(self, key, value)

    def __call__(self, x: ControlInput) -> np.ndarray:
        R = x.pose[:3, :3] if self.frame == "tool" else _IDENTITY
        f = x.f_applied.copy()
        self._law.add(self, x, R, f)
        if x.twist_cmd is not None:
            f += self.twist(x.twist_cmd, x.twist, R)
        return f

    def set_gains(self, *, stiffness=None, damping=None, force_gain=None) -> None:
        """Validated update of the per-axis gains (6 values or one for all axes)."""
        if stiffness is not None:
            self.motion.stiffness = _vec6(stiffness, "stiffness")
        if damping is not None:
            self.motion.damping = _vec6(damping, "damping")
        if force_gain is not None:
            self.force.gain = _vec6(force_gain, "force_gain")
