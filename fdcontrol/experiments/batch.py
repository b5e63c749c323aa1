"""Batched mapping matrices for many configurations at once (the experiments' workhorse).

Per configuration, pinocchio gives J (6×N) and the virtual model's H at γ = 1; then
H_l = H(γ=1) − JᵀJ and, for any γ, H(γ) = JᵀJ + H_l/γ (the identity tested to 1e-10 in
tests/test_virtual.py), so sweeps over γ and α are batched numpy linear algebra.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from fdcontrol.model.robot import RobotModel
from fdcontrol.model.virtual import GAMMA, GAMMA_STRAIGHT, VirtualModel, scheduled_gamma


@dataclass
class Batch:
    q: np.ndarray  # (B, N)
    J: np.ndarray  # (B, 6, N)
    JtJ: np.ndarray  # (B, N, N)
    Hl: np.ndarray  # (B, N, N): Σ_links J_bᵀ diag(I, I) J_b at unit link mass

    def __len__(self) -> int:
        return len(self.q)


def evaluate(robot: RobotModel, Q: np.ndarray, progress: bool = False, desc: str = "kinematics") -> Batch:
    vm = VirtualModel(robot, 1.0)
    B, N = Q.shape
    J = np.empty((B, 6, N))
    H = np.empty((B, N, N))
    for i in tqdm(range(B), desc=desc, disable=not progress, leave=False):
        J[i] = vm._crba_and_jacobian(Q[i])
        H[i] = vm.data.M
    H = np.triu(H) + np.transpose(np.triu(H, 1), (0, 2, 1))
    JtJ = np.transpose(J, (0, 2, 1)) @ J
    return Batch(Q, J, JtJ, H - JtJ)


def joint_space(b: Batch, name: str, param: float | None = None) -> np.ndarray:
    """Type (a) matrices, (B, N, 6): ji, jt, dls (param α), fd (param γ)."""
    Jt = np.transpose(b.J, (0, 2, 1))
    if name == "jt":
        return Jt.copy()
    if name == "ji":
        if b.J.shape[1] != b.J.shape[2]:
            return np.linalg.pinv(b.J)
        U, s, Vt = np.linalg.svd(b.J)
        s = np.maximum(s, s[:, :1] * np.finfo(float).eps)
        return np.transpose(Vt, (0, 2, 1)) / s[:, None, :] @ np.transpose(U, (0, 2, 1))
    eye = np.eye(b.J.shape[2])
    if name == "dls":
        return np.linalg.solve(b.JtJ + float(param) ** 2 * eye, Jt)  # type: ignore[arg-type]
    if name == "fd":
        return np.linalg.solve(b.JtJ + b.Hl / float(param), Jt)  # type: ignore[arg-type]
    if name == "fd_scheduled":  # the default FD: γ scheduled on J's conditioning, from `param` (γ₀) up
        g = gamma_schedule(b, GAMMA.default if param is None else float(param))
        return np.linalg.solve(b.JtJ + b.Hl / g[:, None, None], Jt)
    raise ValueError(f"unknown mapping {name!r}")


def gamma_schedule(b: Batch, gamma: float = GAMMA.default, gamma_straight: float = GAMMA_STRAIGHT.default
                   ) -> np.ndarray:
    """The scheduled γ (fdcontrol.model.virtual.scheduled_gamma) at every configuration, (B,)."""
    _, s, Vt = np.linalg.svd(b.J, full_matrices=False)
    V = np.transpose(Vt, (0, 2, 1))
    h = np.einsum("bik,bij,bjk->bk", V, b.Hl, V)
    return scheduled_gamma(s, h, gamma, gamma_straight)


def cartesian(b: Batch, M: np.ndarray) -> np.ndarray:
    """Type (b): J M, (B, 6, 6)."""
    return b.J @ M


def sigmas(M: np.ndarray) -> np.ndarray:
    """Singular values, descending, (B, k)."""
    return np.linalg.svd(M, compute_uv=False)


def uniform_q(robot: RobotModel, n: int, rng: np.random.Generator) -> np.ndarray:
    """q_i ~ U[−π, π] (seed 004 section 4.1), clipped into tighter joint limits if any."""
    lim = robot.limits
    return rng.uniform(np.maximum(lim.lower, -np.pi), np.minimum(lim.upper, np.pi), size=(n, robot.dof))
