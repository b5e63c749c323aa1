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

from fdcontrol.control.laws import LAWS, ControlInput, ForceTerm, Law, MotionTerm, in_frame_gains, pose_error
from fdcontrol.control.sensing import GRAVITY as GRAVITY  # re-exported for compatibility
from fdcontrol.control.sensing import (
    WrenchFilter as WrenchFilter,  # moved to fdcontrol.control.sensing; importable here too
)
from fdcontrol.control.twist import TwistTerm
from fdcontrol.params import Param, declare

Frame = Literal["base", "tool"]
Mode = str  # a name in LAWS

_GAIN = {"kind": "vector", "size": 6, "ge": 0, "le": 1e5}
#: the laws' parameters, declared once (fdcontrol.params); the mode and frame change only at standstill
PARAMS = declare(
    "law",
    Param("mode", "choice", "admittance", "the control law (a registered one): what f_c is made of",
          policy="holding", choices=lambda: LAWS.names()),
    Param("frame", "choice", "base", "axes of the per-axis gains: base or tool", policy="holding",
          choices=("base", "tool")),
    Param("stiffness", default=[200.0] * 3 + [50.0] * 3, description="motion law stiffness K "
          "(N/m ×3, N·m/rad ×3)", **_GAIN),
    Param("damping", default=[10.0] * 3 + [5.0] * 3, description="motion law damping "
          "(N·s/m ×3, N·m·s/rad ×3)", **_GAIN),
    Param("force_gain", default=[1.0] * 6, description="force law gain K_f (dimensionless)", **_GAIN),
    Param("force_target", "vector", [0.0] * 6, "force law setpoint: the wrench to press with (N ×3, N·m ×3); a "
          "setpoint, so it changes only at standstill", policy="holding", size=6, ge=-1e4, le=1e4),
    Param("twist_gain", default=[50.0] * 3 + [5.0] * 3, description="twist tracking gain K_v "
          "(N·s/m ×3, N·m·s/rad ×3)", **_GAIN),
    Param("error_clip", "vector", None, "reference limiting: per-axis bounds on the motion law's pose error in "
          "the law's frame (m ×3, rad ×3); a target inside a surface presses with at most stiffness·bound; "
          "null: off", "m, rad", policy="holding", size=6, gt=0, le=3.2, nullable=True),
)


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
            law = LAWS.create(str(value))
            object.__setattr__(self, "_law", law)
            object.__setattr__(self, "_adds", type(law).add is not Law.add)  # False: f_c = f_applied (no call)
            notify = self.__dict__.get("notify")  # the loop that runs this law: its stages may change
            if notify is not None:
                notify()
        object.__setattr__(self, key, value)

    @property
    def uses_sensor(self) -> bool:
        """The mode reads the force sensor (its force term): the loop's sensor watchdog guards it."""
        return "force" in self._law.terms

    def __call__(self, x: ControlInput) -> np.ndarray:
        f = x.f_applied.copy()
        twist_cmd = x.twist_cmd
        if self._adds or twist_cmd is not None:  # (a law without terms adds nothing: Law.add, not called)
            R = x.pose[:3, :3] if self.frame == "tool" else _IDENTITY
            if self._adds:
                self._law.add(self, x, R, f)
            if twist_cmd is not None:
                f += self.twist(twist_cmd, x.twist, R)
        return f

    def set_gains(self, *, stiffness=None, damping=None, force_gain=None) -> None:
        """Validated update of the per-axis gains (6 values or one for all axes)."""
        if stiffness is not None:
            self.motion.stiffness = _vec6(stiffness, "stiffness")
        if damping is not None:
            self.motion.damping = _vec6(damping, "damping")
        if force_gain is not None:
            self.force.gain = _vec6(force_gain, "force_gain")
