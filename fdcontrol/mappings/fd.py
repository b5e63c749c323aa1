"""Forward dynamics of the virtual model (seed 004 eq. 10, 13–14)."""

from __future__ import annotations

import numpy as np

from fdcontrol.mappings.base import MAPPINGS, Mapping
from fdcontrol.model.configuration import Configuration
from fdcontrol.model.robot import ModelError, RobotModel
from fdcontrol.model.virtual import ALGORITHM, ALGORITHMS, GAMMA, Algorithm, VirtualModel, check_gamma
from fdcontrol.params import declare


@MAPPINGS.register("fd")
class ForwardDynamics(Mapping):
    """Seed eq. 10: q̈ = H⁻¹(q) Jᵀ f on the γ-conditioned virtual model (eq. 13–14).

    The mapping owns the solver's one ``VirtualModel``.
    """

    name = "fd"
    solver = "forward_dynamics"
    PARAMS = declare("mapping fd", GAMMA, ALGORITHM)

    def __init__(self, robot: RobotModel, gamma: float = GAMMA.default, algorithm: Algorithm = ALGORITHM.default
                 ) -> None:
        super().__init__(robot)
        if algorithm not in ALGORITHMS:
            raise ModelError(f"unknown algorithm {algorithm!r}; expected 'cholesky', 'aba' or 'qr'")
        check_gamma(gamma, algorithm)
        self.virtual = VirtualModel(robot, gamma)
        self.algorithm: Algorithm = algorithm

    @property
    def gamma(self) -> float:
        return self.virtual.gamma

    def joint_space(self, q: np.ndarray) -> np.ndarray:
        return self.virtual.joint_space(q, self.algorithm)

    def joint_space_at(self, conf: Configuration) -> np.ndarray:
        """H⁻¹Jᵀ from the configuration's Cholesky factor when it is this mapping's virtual model
        and algorithm; otherwise by the algorithm at the configuration's q."""
        if self.algorithm == "cholesky" and conf.virtual is self.virtual:
            return conf.inertia_inverse @ conf.jacobian.T
        return self.joint_space(conf.q)

    def params(self) -> dict[str, float | str]:
        return {"gamma": self.gamma, "algorithm": self.algorithm}
