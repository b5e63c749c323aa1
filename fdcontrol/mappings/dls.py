"""Damped least squares (seed 004 eq. 8)."""

from __future__ import annotations

import numpy as np

from fdcontrol.mappings.base import MAPPINGS, Mapping, check_param
from fdcontrol.model.robot import RobotModel
from fdcontrol.params import Param, declare


@MAPPINGS.register("dls")
class DampedLeastSquares(Mapping):
    """Seed eq. 8: q̇ = (JᵀJ + α² I)⁻¹ Jᵀ ẋ (Wampler 1986, Nakamura & Hanafusa 1986)."""

    name = "dls"
    solver = "velocity"
    PARAMS = declare("mapping dls", Param("alpha", "float", 0.1, "damping α of damped least squares "
                                          "(α² adds to JᵀJ; α and σ share units)", ge=1e-12, le=10))

    def __init__(self, robot: RobotModel, alpha: float = PARAMS[0].default) -> None:
        super().__init__(robot)
        self.alpha = check_param(self.PARAMS[0], alpha)

    def from_jacobian(self, J: np.ndarray) -> np.ndarray:
        A = J.T @ J + self.alpha**2 * np.eye(J.shape[1])
        return np.linalg.solve(A, J.T)

    def params(self) -> dict[str, float | str]:
        return {"alpha": self.alpha}
