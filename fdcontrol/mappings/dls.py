"""Damped least squares (seed 004 eq. 8)."""

from __future__ import annotations

import numpy as np

from fdcontrol.mappings.base import MAPPINGS, Mapping, check_positive
from fdcontrol.model.robot import RobotModel


@MAPPINGS.register("dls")
class DampedLeastSquares(Mapping):
    """Seed eq. 8: q̇ = (JᵀJ + α² I)⁻¹ Jᵀ ẋ (Wampler 1986, Nakamura & Hanafusa 1986)."""

    name = "dls"
    solver = "velocity"

    def __init__(self, robot: RobotModel, alpha: float = 0.1) -> None:
        super().__init__(robot)
        self.alpha = check_positive("alpha", alpha)

    def from_jacobian(self, J: np.ndarray) -> np.ndarray:
        A = J.T @ J + self.alpha**2 * np.eye(J.shape[1])
        return np.linalg.solve(A, J.T)

    def params(self) -> dict[str, float | str]:
        return {"alpha": self.alpha}
