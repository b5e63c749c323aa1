"""Jacobian inverse (seed 004 eq. 4)."""

from __future__ import annotations

import numpy as np

from fdcontrol.mappings.base import MAPPINGS, Mapping


@MAPPINGS.register("ji")
class JacobianInverse(Mapping):
    """Seed eq. 4: q̇ = J⁻¹ ẋ; the Moore–Penrose pseudo-inverse J⁺ when N ≠ 6.

    For a square J the inverse is formed from the SVD without truncation, V Σ⁻¹ Uᵀ, with
    σ_i floored at ε·σmax so that an exactly singular J gives a huge but finite matrix
    (σmax ≈ 1/(ε σmax(J))) — analyze() reports it as singular (κ = inf).
    """

    name = "ji"
    solver = "velocity"

    def from_jacobian(self, J: np.ndarray) -> np.ndarray:
        if J.shape[0] != J.shape[1]:
            return np.linalg.pinv(J)
        U, s, Vt = np.linalg.svd(J)
        s = np.maximum(s, s[0] * np.finfo(float).eps)
        return (Vt.T / s) @ U.T
