"""Motion mode (seed 004 Fig. 2): f_c = K_p ⊙ e − K_d ⊙ ẋ + f_applied."""

from fdcontrol.control.laws.base import Law


class MotionControl(Law):
    """f_c = K_p ⊙ e − K_d ⊙ ẋ + f_applied."""

    name = "motion"
    terms = ("motion",)
