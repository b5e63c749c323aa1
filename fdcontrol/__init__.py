"""fdcontrol: Cartesian admittance control for velocity-actuated arms with virtual forward dynamics."""

from fdcontrol import kernel_cache as _kernel_cache

_kernel_cache.guard()  # before any numba kernel loads (fdcontrol.model.virtual's, below): a broken cache is said

from fdcontrol.mappings import (  # noqa: E402
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
from fdcontrol.model.robot import ModelError, RobotModel  # noqa: E402
from fdcontrol.model.virtual import VirtualModel  # noqa: E402

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
