"""Force term of seed 004 Fig. 2: f = K_f ⊙ (f_target − f_measured)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fdcontrol.control.laws.base import ControlInput, in_frame_gains


@dataclass
class ForceTerm:
    """Force control: f = K_f ⊙ (f_target − f_measured), gains along ``frame`` axes (N)."""

    gain: np.ndarray = field(default_factory=lambda: np.ones(6))
    target: np.ndarray = field(default_factory=lambda: np.zeros(6))  # base frame

    def __call__(self, x: ControlInput, R: np.ndarray) -> np.ndarray:
        return in_frame_gains(R, self.gain, self.target - x.f_measured)
