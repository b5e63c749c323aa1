"""Tiny base of the control laws: the per-cycle input and a mode = the terms it composes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fdcontrol.model.spatial import rotate6


@dataclass
class ControlInput:
    """Everything a law reads in one cycle (base frame unless named otherwise)."""

    pose: np.ndarray  # 4×4 tip in base
    twist: np.ndarray  # measured tip twist J q̇ [v; ω]
    f_measured: np.ndarray  # filtered sensor wrench (robot on environment), base frame
    f_applied: np.ndarray  # streamed external push, base frame
    target: np.ndarray | None  # 4×4 target pose for motion / compliance
    twist_cmd: np.ndarray | None = None  # streamed tip twist [v; ω], base frame (teleoperation)


def in_frame_gains(R: np.ndarray, gains: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Apply diagonal gains along the axes of the frame with rotation R (base ← frame)."""
    return rotate6(R, gains * rotate6(R.T, w))


class Law:
    """A mode of seed 004 Fig. 2: f_c = f_applied + Σ the named terms (+ twist tracking if streamed).

    ``terms`` names attributes of :class:`fdcontrol.control.law.ControlLaw` (``"force"``,
    ``"motion"``) — the law composes terms, it does not compute them.
    """

    terms: ClassVar[tuple[str, ...]] = ()
