"""Force mode (seed 004 Fig. 2): f_c = K_f ⊙ (f_target − f_measured) + f_applied."""

from fdcontrol.control.laws.base import Law


class ForceControl(Law):
    """f_c = K_f ⊙ (f_target − f_measured) + f_applied."""

    name = "force"
    terms = ("force",)
