"""Tiny base of the control laws: the per-cycle input, and a mode = a class that adds the terms it
composes to f_c."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from fdcontrol.model.spatial import rotate6

if TYPE_CHECKING:
    from fdcontrol.control.laws.force import ForceTerm
    from fdcontrol.control.laws.motion import MotionTerm


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


class Terms(Protocol):
    """The terms a law composes (:class:`fdcontrol.control.law.ControlLaw` holds them, with their gains)."""

    force: ForceTerm
    motion: MotionTerm


class Law:
    """A mode of seed 004 Fig. 2: f_c = f_applied + Σ its terms (+ twist tracking if streamed).

    :meth:`add` adds the law's terms to f (which holds f_applied) — the law composes terms, it
    does not compute them. ``terms`` lists their names for the documentation; a law that names
    terms must say how it adds them (override :meth:`add`).
    """

    name: ClassVar[str] = "law"
    terms: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.terms and cls.add is Law.add:
            raise TypeError(f"law {cls.__name__} names terms {cls.terms} but does not override add()")

    def add(self, terms: Terms, x: ControlInput, R: np.ndarray, f: np.ndarray) -> None:
        """Add this law's terms to f in place (R: the gains' frame, base ← frame); f_c = f_applied
        by default."""
        return None
