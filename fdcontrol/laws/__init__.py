"""Control laws of seed 004 Fig. 2: one mode per file, each a class listing the terms it composes.

``LAWS`` registers them by name; adding a mode is one file with one registered class.
The twist-tracking term (:mod:`fdcontrol.twist`) is added in every mode while a twist streams.
"""

from ..registry import Registry
from .admittance import Admittance
from .base import ControlInput, Law, in_frame_gains
from .compliance import Compliance
from .force import ForceTerm
from .force_control import ForceControl
from .motion import MotionTerm, pose_error
from .motion_control import MotionControl

LAWS: Registry[Law] = Registry("control law")
for _cls in (Admittance, ForceControl, MotionControl, Compliance):
    LAWS.register(_cls.name)(_cls)

__all__ = ["LAWS", "Admittance", "Compliance", "ControlInput", "ForceControl", "ForceTerm", "Law",
           "MotionControl", "MotionTerm", "in_frame_gains", "pose_error"]
