"""Joint limits of the virtual model as constraints, not clamps (issue 7; seeds 001 and 002).

A joint at a limit whose load pushes it outward is locked: the remaining joints move as the
constrained mechanism would. With S₁ the free and T₂ the locked coordinate columns
(Featherstone & Fijany, seed 001):

* eq. 7:  q̈ = S₁ (S₁ᵀ H S₁)⁻¹ S₁ᵀ b        (the free block of H, locked q̈ = 0)
* eq. 8:  q̈ = (H⁻¹ − H⁻¹T₂ (T₂ᵀH⁻¹T₂)⁻¹ T₂ᵀH⁻¹) b   (from H⁻¹, e.g. by ABA)

with the constraint forces λ = −(T₂ᵀH⁻¹T₂)⁻¹ T₂ᵀH⁻¹ b on the locked joints. A joint is
released when λ would have to pull it onto the limit (the load points back inside).
After each integration step the state is projected back onto the active constraints
(the perturbation approach of Keerthi et al., seed 002): q_j = limit, q̇_j = 0.

Plain clamping (the reference C++ controller) instead integrates the unconstrained
dynamics and then clamps q and zeroes q̇ of the offending joint: the other joints keep the
motion computed for a mechanism that could still move that joint, which distorts the
Cartesian response.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def locked_acceleration(H: np.ndarray, b: np.ndarray, locked: np.ndarray) -> np.ndarray:
    """Seed 001 eq. 7: q̈_free = H_FF⁻¹ b_F, q̈_locked = 0."""
    free = ~locked
    qdd = np.zeros_like(b)
    if free.any():
        qdd[free] = np.linalg.solve(H[np.ix_(free, free)], b[free])
    return qdd


def locked_acceleration_eq8(Hinv: np.ndarray, b: np.ndarray, locked: np.ndarray) -> np.ndarray:
    """Seed 001 eq. 8/9: q̈ = (H⁻¹ − H⁻¹T₂(T₂ᵀH⁻¹T₂)⁻¹T₂ᵀH⁻¹) b."""
    if not locked.any():
        return Hinv @ b
    HT = Hinv[:, locked]
    return Hinv @ b - HT @ np.linalg.solve(HT[locked], HT.T @ b)


def constraint_forces(Hinv: np.ndarray, b: np.ndarray, locked: np.ndarray) -> np.ndarray:
    """λ on the locked joints: H q̈ = b + T₂ λ with T₂ᵀ q̈ = 0."""
    HT = Hinv[:, locked]
    return -np.linalg.solve(HT[locked], HT.T @ b)


@dataclass
class JointLimitConstraints:
    """Active-set joint limits for the virtual model. ``tol`` (rad) counts as "at the limit"."""

    lower: np.ndarray
    upper: np.ndarray
    tol: float = 1e-9
    active: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def __post_init__(self) -> None:
        self.lower = np.asarray(self.lower, dtype=float)
        self.upper = np.asarray(self.upper, dtype=float)
        self.active = np.zeros(len(self.lower), dtype=bool)

    def at_limit(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return q >= self.upper - self.tol, q <= self.lower + self.tol

    def solve(self, H: np.ndarray, b: np.ndarray, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """q̈ with the joints that the load pushes into their limits locked (active set).

        Start with every joint that sits at a limit and is not moving back inside locked;
        release any whose constraint force would have to pull it onto the limit; repeat.
        """
        up, lo = self.at_limit(q)
        locked = (up & (qd >= 0)) | (lo & (qd <= 0))
        if locked.any():
            Hinv = np.linalg.inv(H)
            for _ in range(len(q)):
                if not locked.any():
                    break
                lam = np.zeros_like(b)
                lam[locked] = constraint_forces(Hinv, b, locked)
                # at an upper limit the constraint may only push down (λ ≤ 0), at a lower one up
                release = locked & ((up & (lam > 0)) | (lo & (lam < 0)))
                if not release.any():
                    break
                locked &= ~release
        self.active = locked
        return locked_acceleration(H, b, locked)

    def project(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Seed 002: back onto the constraint manifold — q_j = limit, q̇_j = 0 where violated."""
        over, under = q > self.upper, q < self.lower
        hit = over | under | self.active
        if hit.any():
            q = np.clip(q, self.lower, self.upper)
            qd = qd.copy()
            qd[hit & ((over | (q >= self.upper - self.tol)) & (qd > 0)
                      | (under | (q <= self.lower + self.tol)) & (qd < 0))] = 0.0
            self.active = self.active | over | under
        return q, qd


def clamp(q: np.ndarray, qd: np.ndarray, lower: np.ndarray, upper: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:
    """The reference controller's position clamping, for comparison: clip q, zero q̇ there."""
    hit = (q > upper) | (q < lower)
    if hit.any():
        q = np.clip(q, lower, upper)
        qd = qd.copy()
        qd[hit] = 0.0
    return q, qd
