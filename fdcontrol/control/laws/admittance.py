"""Admittance mode (seed 004 Fig. 2): f_c = f_applied — the streamed wrench drives the virtual model."""

from fdcontrol.control.laws.base import Law


class Admittance(Law):
    """f_c = f_applied."""

    name = "admittance"
    terms = ()
