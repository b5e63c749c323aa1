"""fdcontrol: Cartesian admittance control for velocity-actuated arms with virtual forward dynamics."""

from fdcontrol.mappings import (
    Analysis,
    DampedLeastSquares,
    ForwardDynamics,
    JacobianInverse,
    JacobianTranspose,
    Mapping,
    SelectivelyDampedLeastSquares,
    analyze,
    make_mapping,
)
from fdcontrol.model.robot import ModelError, RobotModel
from fdcontrol.model.virtual import VirtualModel

__all__ = [
    "Analysis",
    "DampedLeastSquares",
    "ForwardDynamics",
    "JacobianInverse",
    "JacobianTranspose",
    "Mapping",
    "ModelError",
    "RobotModel",
    "SelectivelyDampedLeastSquares",
    "VirtualModel",
    "analyze",
    "make_mapping",
]
__version__ = "0.1.0"
