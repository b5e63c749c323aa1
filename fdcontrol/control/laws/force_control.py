"""Force mode (seed 004 Fig. 2): f_c = K_f ⊙ (f_target − f_measured) + f_applied."""

import numpy as np

from fdcontrol.control.laws.base import ControlInput, Law, Terms


class ForceControl(Law):
    """f_c = K_f ⊙ (f_target − f_measured) + f_applied."""

    name = "force"
    terms = ("force",)

    def add(self, terms: Terms, x: ControlInput, R: np.ndarray, f: np.ndarray) -> None:
        f += terms.force(x, R)
