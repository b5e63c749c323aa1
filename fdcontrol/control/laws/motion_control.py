"""Motion mode (seed 004 Fig. 2): f_c = K_p ⊙ e − K_d ⊙ ẋ + f_applied."""

import numpy as np

from fdcontrol.control.laws.base import ControlInput, Law, Terms


class MotionControl(Law):
    """f_c = K_p ⊙ e − K_d ⊙ ẋ + f_applied."""

    name = "motion"
    terms = ("motion",)

    def add(self, terms: Terms, x: ControlInput, R: np.ndarray, f: np.ndarray) -> None:
        f += terms.motion(x, R)
