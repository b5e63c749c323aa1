"""Compliance mode (seed 004 Fig. 2): motion PD + force term + f_applied."""

import numpy as np

from fdcontrol.control.laws.base import ControlInput, Law, Terms


class Compliance(Law):
    """f_c = K_p ⊙ e − K_d ⊙ ẋ + K_f ⊙ (f_target − f_measured) + f_applied.

    At rest K_p e = −(f_applied + K_f(f_target − f_measured)): the displacement from the
    target is F/K per axis.
    """

    name = "compliance"
    terms = ("motion", "force")

    def add(self, terms: Terms, x: ControlInput, R: np.ndarray, f: np.ndarray) -> None:
        f += terms.motion(x, R)
        f += terms.force(x, R)
