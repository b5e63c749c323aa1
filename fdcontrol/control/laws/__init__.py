"""Control laws of seed 004 Fig. 2: one mode per file, each a class listing the terms it composes.

``LAWS`` registers them by name; adding a mode is one file with one registered class.
The twist-tracking term (:mod:`fdcontrol.control.twist`) is added in every mode while a twist streams.
"""

from fdcontrol.control.laws.admittance import Admittance
from fdcontrol.control.laws.base import ControlInput, Law, in_frame_gains
from fdcontrol.control.laws.compliance import Compliance
from fdcontrol.control.laws.force import ForceTerm
from fdcontrol.control.laws.force_control import ForceControl
from fdcontrol.control.laws.motion import MotionTerm, pose_error
from fdcontrol.control.laws.motion_control import MotionControl
from fdcontrol.registry import Registry

LAWS: Registry[Law] = Registry("control law")
for _cls in (Admittance, ForceControl, MotionControl, Compliance):
    LAWS.register(_cls.name)(_cls)

__all__ = ["LAWS", "Admittance", "Compliance", "ControlInput", "ForceControl", "ForceTerm", "Law",
           "MotionControl", "MotionTerm", "in_frame_gains", "pose_error"]
