"""Selectively damped least squares (Buss & Kim 2005), one end effector with 6 rows."""

from __future__ import annotations

import math

import numpy as np

from fdcontrol.mappings.base import MAPPINGS, Mapping, check_param
from fdcontrol.model.configuration import Configuration
from fdcontrol.model.robot import RobotModel
from fdcontrol.params import Param, declare


def clamp_max_abs(w: np.ndarray, d: float) -> np.ndarray:
    """Buss & Kim's ClampMaxAbs: scale w so that max_j |w_j| ≤ d."""
    m = float(np.max(np.abs(w))) if w.size else 0.0
    return w if m <= d else w * (d / m)


def clamp_mag(w: np.ndarray, d: float) -> np.ndarray:
    """Buss & Kim's ClampMag (target clamping): scale w so that ‖w‖ ≤ d."""
    m = float(np.linalg.norm(w))
    return w if m <= d else w * (d / m)


@MAPPINGS.register("sdls")
class SelectivelyDampedLeastSquares(Mapping):
    """Selectively damped least squares (Buss & Kim 2005) for a 6-row tip task.

    Units: the rows of J and of the error e = [Δp; Δφ] mix metres and radians. Rotations are
    weighted by a characteristic length L (``length``, m): J' = S J and e' = S e with
    S = diag(I₃, L·I₃), so every quantity below is in metres. The tip is treated as Buss &
    Kim's two "end effectors", its position block and its L-scaled rotation block.

    With J' = Σ σ_i u_i v_iᵀ (SVD):

    * target clamp (Buss & Kim §3, ClampMag): each block of e' to ‖·‖ ≤ D_max (``max_error``,
      m; so ‖Δp‖ ≤ D_max and ‖Δφ‖ ≤ D_max/L rad),
    * α_i = u_iᵀ e',  N_i = ‖u_i,pos‖ + ‖u_i,rot‖,
      M_i = σ_i⁻¹ Σ_j |v_ji| ρ_j with ρ_j = ‖J'_j,pos‖ + ‖J'_j,rot‖,
    * γ_i = min(1, N_i / M_i) · γ_max,   φ_i = ClampMaxAbs(σ_i⁻¹ α_i v_i, γ_i),
    * Δθ = ClampMaxAbs(Σ_i φ_i, γ_max),

    so no joint moves more than γ_max (``gamma_max``, rad; π/4 as in the paper) per solve, and
    the response along u_i at most γ_i. ``solve(q, e)`` is the full nonlinear algorithm;
    ``joint_space(q)`` its linear map for a unit-magnitude e' along each u_i,
    M = Σ_i min(σ_i⁻¹, γ_i / ‖v_i‖_∞) v_i u_iᵀ S (the final clamp and the target clamp
    omitted), so it can be analysed like the other mappings.

    The algorithm is positively homogeneous: solve(k e; k γ_max, k D_max) = k solve(e), which is
    what makes the loop's per-second use rate-independent (``fdcontrol.loop.solvers.VelocitySolver``).
    """

    name = "sdls"
    solver = "velocity"
    PARAMS = declare(
        "mapping sdls",
        Param("gamma_max", "float", math.pi / 4, "largest joint step γ_max of one solve", "rad", ge=1e-9, le=10),
        # upper bounds wide enough for a model in millimetres (the algorithm is unit-consistent)
        Param("sdls_length", "float", 0.5, "characteristic length L: a rotation of 1 rad weighs L metres", "m",
              ge=1e-6, le=1e4, arg="length"),
        Param("sdls_max_error", "float", 0.1, "clamp D_max of the Cartesian error per solve", "m", ge=1e-9,
              le=1e4, arg="max_error"))

    def __init__(self, robot: RobotModel, gamma_max: float = PARAMS[0].default, length: float = PARAMS[1].default,
                 max_error: float = PARAMS[2].default) -> None:
        super().__init__(robot)
        self.gamma_max, self.length, self.max_error = (
            check_param(p, v) for p, v in zip(self.PARAMS, (gamma_max, length, max_error), strict=True))
        self._scale = np.array([1.0, 1.0, 1.0, self.length, self.length, self.length])

    solves_displacement = True

    def _svd(self, J: np.ndarray):
        J = J * self._scale[:, None]  # J' = S J
        U, s, Vt = np.linalg.svd(J, full_matrices=False)
        rho = np.linalg.norm(J[:3], axis=0) + np.linalg.norm(J[3:], axis=0)  # ρ_j, m
        keep = s > s[0] * 1e-12 if s[0] > 0 else np.zeros_like(s, dtype=bool)
        N = np.linalg.norm(U[:3], axis=0) + np.linalg.norm(U[3:], axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            M = np.where(keep, (np.abs(Vt) @ rho) / np.where(keep, s, 1.0), np.inf)
            gam = np.minimum(1.0, N / M) * self.gamma_max
        return U, s, Vt, gam, keep

    def scaled_error(self, error: np.ndarray) -> np.ndarray:
        """e' = S e with the target clamp applied to its position and rotation blocks (m)."""
        e = np.asarray(error, dtype=float) * self._scale
        return np.concatenate((clamp_mag(e[:3], self.max_error), clamp_mag(e[3:], self.max_error)))

    def from_jacobian(self, J: np.ndarray) -> np.ndarray:
        U, s, Vt, gam, keep = self._svd(J)
        vmax = np.max(np.abs(Vt), axis=1)
        with np.errstate(divide="ignore"):
            gain = np.where(keep, np.minimum(1.0 / np.where(keep, s, 1.0), gam / vmax), 0.0)
        return ((Vt.T * gain) @ U.T) * self._scale

    def solve(self, q: np.ndarray, error: np.ndarray) -> np.ndarray:
        """Buss & Kim's Δθ (rad) for a Cartesian error e = [Δp; Δφ] (m, rad), all three clamps."""
        return self.solve_jacobian(self.robot.jacobian(q), error)

    def solve_at(self, conf: Configuration, error: np.ndarray) -> np.ndarray:
        """:meth:`solve` from the cycle's Jacobian."""
        return self.solve_jacobian(conf.jacobian, error)

    def solve_jacobian(self, J: np.ndarray, error: np.ndarray) -> np.ndarray:
        """:meth:`solve` for the tip Jacobian J (6×N, base frame)."""
        U, s, Vt, gam, keep = self._svd(J)
        e = self.scaled_error(error)
        dq = np.zeros(Vt.shape[1])
        for i in np.flatnonzero(keep):
            dq += clamp_max_abs((U[:, i] @ e) / s[i] * Vt[i], gam[i])
        return clamp_max_abs(dq, self.gamma_max)

    def params(self) -> dict[str, float | str]:
        return {"gamma_max": self.gamma_max, "length": self.length, "max_error": self.max_error}
