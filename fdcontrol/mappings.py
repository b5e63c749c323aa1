"""Cartesian → joint mappings compared in seed 004 (Fig. 5) and their SVD analysis.

Every mapping has the same small interface:

* ``joint_space(q)`` — M(q), N×6, type (a) of Fig. 5: joint quantity = M · Cartesian quantity;
* ``cartesian(q)`` — J(q) M(q), 6×6, type (b): how a Cartesian input reappears in Cartesian
  space (the identity is ideal decoupling).

Adding a mapping is one class with ``name`` and ``joint_space``; subclassing ``Mapping``
gives ``cartesian`` for free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .robot import ModelError, RobotModel
from .virtual import Algorithm, VirtualModel, check_gamma

MAPPING_NAMES: tuple[str, ...] = ("ji", "jt", "dls", "sdls", "fd")


class MappingProtocol(Protocol):
    name: str
    robot: RobotModel

    def joint_space(self, q: np.ndarray) -> np.ndarray: ...

    def cartesian(self, q: np.ndarray) -> np.ndarray: ...


class Mapping:
    """Base class: subclasses implement ``joint_space``; ``cartesian`` is J · joint_space."""

    name = "mapping"

    def __init__(self, robot: RobotModel) -> None:
        self.robot = robot

    def joint_space(self, q: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def cartesian(self, q: np.ndarray) -> np.ndarray:
        """Type (b) of Fig. 5: J(q) M(q), 6×6."""
        return self.robot.jacobian(q) @ self.joint_space(q)

    def params(self) -> dict[str, float | str]:
        return {}

    def __repr__(self) -> str:
        p = ", ".join(f"{k}={v}" for k, v in self.params().items())
        return f"{type(self).__name__}({p})"


class JacobianInverse(Mapping):
    """Seed eq. 4: q̇ = J⁻¹ ẋ; the Moore–Penrose pseudo-inverse J⁺ when N ≠ 6.

    For a square J the inverse is formed from the SVD without truncation, V Σ⁻¹ Uᵀ, with
    σ_i floored at ε·σmax so that an exactly singular J gives a huge but finite matrix
    (σmax ≈ 1/(ε σmax(J))) — analyze() reports it as singular (κ = inf).
    """

    name = "ji"

    def joint_space(self, q: np.ndarray) -> np.ndarray:
        J = self.robot.jacobian(q)
        if J.shape[0] != J.shape[1]:
            return np.linalg.pinv(J)
        U, s, Vt = np.linalg.svd(J)
        s = np.maximum(s, s[0] * np.finfo(float).eps)
        return (Vt.T / s) @ U.T


class JacobianTranspose(Mapping):
    """Seed eq. 5: τ = Jᵀ f."""

    name = "jt"

    def joint_space(self, q: np.ndarray) -> np.ndarray:
        return self.robot.jacobian(q).T


def check_positive(name: str, value: float) -> float:
    v = float(value)
    if not math.isfinite(v) or v <= 0.0:
        raise ModelError(f"{name} must be finite and > 0, got {value!r}")
    return v


class DampedLeastSquares(Mapping):
    """Seed eq. 8: q̇ = (JᵀJ + α² I)⁻¹ Jᵀ ẋ (Wampler 1986, Nakamura & Hanafusa 1986)."""

    name = "dls"

    def __init__(self, robot: RobotModel, alpha: float = 0.1) -> None:
        super().__init__(robot)
        self.alpha = check_positive("alpha", alpha)

    def joint_space(self, q: np.ndarray) -> np.ndarray:
        J = self.robot.jacobian(q)
        A = J.T @ J + self.alpha**2 * np.eye(J.shape[1])
        return np.linalg.solve(A, J.T)

    def params(self) -> dict[str, float | str]:
        return {"alpha": self.alpha}


class SelectivelyDampedLeastSquares(Mapping):
    """Selectively damped least squares (Buss & Kim 2005), one end effector with 6 rows.

    With J = Σ σ_i u_i v_iᵀ, the response to the error component along u_i is
    φ_i = σ_i⁻¹ (u_iᵀ e) v_i, clamped so that max|φ_i| ≤ γ_i, where

        N_i = ‖u_i,pos‖ + ‖u_i,rot‖,   M_i = σ_i⁻¹ Σ_j |v_ji| (‖J_j,pos‖ + ‖J_j,rot‖),
        γ_i = min(1, N_i / M_i) · γ_max,

    and the sum Σ φ_i is clamped to max-abs γ_max.

    ``gamma_max`` (rad, default π/4 as in the paper) bounds the joint change one unit of
    error may command. ``solve(q, e)`` is the full nonlinear algorithm; ``joint_space(q)``
    is its linear map for a unit-magnitude error along each u_i,
    M = Σ_i min(σ_i⁻¹, γ_i / ‖v_i‖_∞) v_i u_iᵀ (the final clamp is omitted), so it can be
    analysed like the other mappings.
    """

    name = "sdls"

    def __init__(self, robot: RobotModel, gamma_max: float = math.pi / 4) -> None:
        super().__init__(robot)
        self.gamma_max = check_positive("gamma_max", gamma_max)

    def _svd(self, q: np.ndarray):
        J = self.robot.jacobian(q)
        U, s, Vt = np.linalg.svd(J, full_matrices=False)
        rho = np.linalg.norm(J[:3], axis=0) + np.linalg.norm(J[3:], axis=0)  # ρ_j per column
        keep = s > s[0] * 1e-12 if s[0] > 0 else np.zeros_like(s, dtype=bool)
        N = np.linalg.norm(U[:3], axis=0) + np.linalg.norm(U[3:], axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            M = np.where(keep, (np.abs(Vt) @ rho) / np.where(keep, s, 1.0), np.inf)
            gam = np.minimum(1.0, N / M) * self.gamma_max
        return U, s, Vt, gam, keep

    def joint_space(self, q: np.ndarray) -> np.ndarray:
        U, s, Vt, gam, keep = self._svd(q)
        vmax = np.max(np.abs(Vt), axis=1)
        with np.errstate(divide="ignore"):
            gain = np.where(keep, np.minimum(1.0 / np.where(keep, s, 1.0), gam / vmax), 0.0)
        return (Vt.T * gain) @ U.T

    def solve(self, q: np.ndarray, error: np.ndarray) -> np.ndarray:
        """Buss & Kim's Δθ for a Cartesian error e (6,), with both clamps."""
        U, s, Vt, gam, keep = self._svd(q)
        dq = np.zeros(Vt.shape[1])
        for i in np.flatnonzero(keep):
            phi = (U[:, i] @ error) / s[i] * Vt[i]
            dq += _clamp_max_abs(phi, gam[i])
        return _clamp_max_abs(dq, self.gamma_max)

    def params(self) -> dict[str, float | str]:
        return {"gamma_max": self.gamma_max}


def _clamp_max_abs(w: np.ndarray, d: float) -> np.ndarray:
    """Buss & Kim's ClampMaxAbs: scale w so that max|w_j| ≤ d."""
    m = float(np.max(np.abs(w))) if w.size else 0.0
    return w if m <= d else w * (d / m)


class ForwardDynamics(Mapping):
    """Seed eq. 10: q̈ = H⁻¹(q) Jᵀ f on the γ-conditioned virtual model (eq. 13–14)."""

    name = "fd"

    def __init__(self, robot: RobotModel, gamma: float = 1e3,
                 algorithm: Algorithm = "cholesky") -> None:
        super().__init__(robot)
        if algorithm not in ("cholesky", "aba", "qr"):
            raise ModelError(f"unknown algorithm {algorithm!r}; expected 'cholesky', 'aba' or 'qr'")
        check_gamma(gamma, algorithm)
        self.virtual = VirtualModel(robot, gamma)
        self.algorithm: Algorithm = algorithm

    @property
    def gamma(self) -> float:
        return self.virtual.gamma

    def joint_space(self, q: np.ndarray) -> np.ndarray:
        return self.virtual.joint_space(q, self.algorithm)

    def params(self) -> dict[str, float | str]:
        return {"gamma": self.gamma, "algorithm": self.algorithm}


def make_mapping(name: str, robot: RobotModel, *, gamma: float = 1e3, alpha: float = 0.1,
                 gamma_max: float = math.pi / 4, algorithm: Algorithm = "cholesky") -> Mapping:
    """Build a mapping by short name: ji, jt, dls, sdls or fd."""
    if name == "ji":
        return JacobianInverse(robot)
    if name == "jt":
        return JacobianTranspose(robot)
    if name == "dls":
        return DampedLeastSquares(robot, alpha)
    if name == "sdls":
        return SelectivelyDampedLeastSquares(robot, gamma_max)
    if name == "fd":
        return ForwardDynamics(robot, gamma, algorithm)
    raise ModelError(f"unknown mapping {name!r}; expected one of {', '.join(MAPPING_NAMES)}")


@dataclass(frozen=True)
class Analysis:
    """SVD summary of a mapping matrix (seed eq. 1, M = U Σ Vᵀ)."""

    singular_values: np.ndarray
    sigma_min: float
    sigma_max: float
    condition: float  # κ = σmax/σmin, inf when numerically singular
    manipulability: float  # Π σ_i = √det(M Mᵀ) for a wide M (Yoshikawa for M = J)

    @property
    def singular(self) -> bool:
        return math.isinf(self.condition)

    def as_dict(self) -> dict[str, object]:
        """JSON-safe: κ = inf becomes None with ``singular: true``."""
        return {
            "singular_values": self.singular_values.tolist(),
            "sigma_min": self.sigma_min,
            "sigma_max": self.sigma_max,
            "condition": None if self.singular else self.condition,
            "singular": self.singular,
            "manipulability": self.manipulability,
        }


def analyze(matrix: np.ndarray) -> Analysis:
    """Singular values (descending), σmin, σmax, κ and manipulability of `matrix`.

    κ is infinite when σmin ≤ σmax · max(m, n) · ε (numpy's rank tolerance).
    """
    M = np.asarray(matrix, dtype=float)
    if M.ndim != 2 or not np.all(np.isfinite(M)):
        raise ModelError("analyze needs a finite 2-D matrix")
    s = np.linalg.svd(M, compute_uv=False)
    smax, smin = float(s[0]), float(s[-1])
    tol = smax * max(M.shape) * np.finfo(float).eps
    kappa = math.inf if smin <= tol else smax / smin
    return Analysis(s, smin, smax, kappa, float(np.prod(s)))
