"""The loop's input guards, declared once below the loop: rate, watchdogs and input bounds.

The parameters here are the loop's (their owner is "loop"), but the control layer reads them too
(a reaction may tighten a watchdog), so they are declared at this level: the control layer never
imports the loop (dependencies run loop → control → model). :class:`InputError` and
:func:`check_wrench` are the checks every streamed input passes before the loop sees it.
"""

from __future__ import annotations

import numpy as np

from fdcontrol.model.spatial import check_vec6
from fdcontrol.params import Param, declare

#: the loop's parameters, declared once (fdcontrol.params)
PARAMS = declare(
    "loop",
    Param("rate", "float", 500.0, "control loop rate", "Hz", policy="stopped", ge=10, le=2000),
    Param("command_timeout", "float", 0.1, "watchdog: a streamed wrench or twist older than this counts as zero "
          "and the arm holds", "s", policy="tighten", ge=0.005, le=10),
    Param("sensor_timeout", "float", 0.05, "sensor watchdog: a law that reads the force sensor holds the arm when "
          "its newest reading is older than this", "s", policy="tighten", ge=0.002, le=10),
    Param("telemetry_decimation", "int", 10, "σmin(J) and κ(H) every n-th cycle", ge=1, le=10000),
    Param("max_force", "float", 500.0, "largest |F| of an input wrench", "N", policy="tighten", gt=0, le=1e4),
    Param("max_torque", "float", 50.0, "largest |τ| of an input wrench", "N·m", policy="tighten", gt=0, le=1e3),
)


class InputError(ValueError):
    """A rejected input; the loop keeps its previous valid one."""


def check_wrench(wrench: np.ndarray | list[float], max_force: float, max_torque: float,
                 frame: str = "base") -> np.ndarray:
    """A finite 6-vector [F; τ] within |F| ≤ max_force, |τ| ≤ max_torque, else InputError."""
    return check_vec6(wrench, "wrench", ("fx, fy, fz, tx, ty, tz", "|F|", "N", "|τ|", "N·m"),
                      max_force, max_torque, frame, InputError)


def check_params(changes: dict[str, object]) -> None:
    """The loop's declared parameters among `changes`, checked by their declarations (construction and
    reconfigure): ParamError (a ValueError) names the parameter and its bounds."""
    for p in PARAMS:
        if p.name in changes:
            p.check(changes[p.name])
