"""Jacobian transpose (seed 004 eq. 5)."""

from __future__ import annotations

import numpy as np

from fdcontrol.mappings.base import MAPPINGS, Mapping


@MAPPINGS.register("jt")
class JacobianTranspose(Mapping):
    """Seed eq. 5: τ = Jᵀ f (Wolovich & Elliott), driven as q̈ = Jᵀ f (unit joint inertia)."""

    name = "jt"
    solver = "transpose"

    def from_jacobian(self, J: np.ndarray) -> np.ndarray:
        return J.T
