"""Null-space posture task for redundant arms (seed 004 §5.1: "additional interfaces to adjust
behavior in the nullspace").

A joint-space spring–damper toward a preferred posture q_p, applied as a joint load on the
virtual model and projected with the dynamically consistent null-space projector
(Khatib 1987):

    Λ = (J H⁻¹ Jᵀ)⁻¹,   J̄ = H⁻¹ Jᵀ Λ,   N̄ᵀ = I − Jᵀ J̄ᵀ,
    τ_p = N̄ᵀ H a_p,     a_p = K (q_p − q) − D q̇.

Because J H⁻¹ N̄ᵀ = 0, the load adds nothing to the tip acceleration J q̈ of the virtual
model (seed 004 eq. 9 with τ = τ_p); and because H⁻¹ N̄ᵀ H = N̄ = I − J̄ J, the joint
acceleration it causes is exactly the null-space part of a_p:  q̈ = H⁻¹ Jᵀ f + N̄ a_p.

The gains are therefore mass-normalised: K (1/s², the squared natural frequency ω² of the
posture spring per joint) and D (1/s). This keeps the posture's time constant independent of
γ and of the configuration — the virtual links weigh m_e/γ, so a spring in N·m/rad would
act γ times faster when γ grows. On the virtual model the equivalent joint stiffness is
K·H(q) N·m/rad. The solver's velocity decay c adds c to D.

At a Jacobian singularity J H⁻¹ Jᵀ loses rank (on the virtual model it tends to 0 along
the singular direction, like damped least squares, seed 004 eq. 12); its eigenvalues below
``RCOND`` × the largest are treated as zero, so that direction counts as null space too:
the posture may then move the tip along it (to first order the tip cannot move along it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fdcontrol.model.linalg import cho_solve_upper, eigh
from fdcontrol.model.robot import RobotModel
from fdcontrol.params import Param, declare

RCOND = 1e-9  # relative eigenvalue cut-off of J H⁻¹ Jᵀ (singular directions join the null space)


def nullspace_transpose(H: np.ndarray, J: np.ndarray) -> np.ndarray:
    """N̄ᵀ = I − Jᵀ J̄ᵀ with J̄ = H⁻¹ Jᵀ Λ, Λ = (J H⁻¹ Jᵀ)⁻¹ (Khatib's dynamically consistent
    projector; Λ by a truncated eigen-inverse, see module doc). N×N."""
    Hinv_Jt = cho_solve_upper(H, J.T)  # scipy's cho_factor + cho_solve, without their wrappers' cost
    A = J @ Hinv_Jt
    w, V = eigh(0.5 * (A + A.T))
    top = RCOND * max(float(w[-1]), 0.0)
    if w[0] > top:  # every eigenvalue kept (w ascending): V itself, not its copy by a mask of all True
        Lam = (V / w) @ V.T
    else:
        keep = w > top
        Lam = (V[:, keep] / w[keep]) @ V[:, keep].T
    Jbar = Hinv_Jt @ Lam
    n = H.shape[0]
    eye = _EYE.get(n)
    if eye is None:
        eye = _EYE[n] = np.eye(n)
        eye.flags.writeable = False
    return eye - J.T @ Jbar.T


_EYE: dict[int, np.ndarray] = {}  # the N×N identities of nullspace_transpose (read-only)


def at_gamma0(tau: np.ndarray, Nt: np.ndarray, ratio: float) -> np.ndarray:
    """τ' = τ − (1 − γ₀/γ) N̄ᵀ τ: a joint load on the virtual model at γ whose null-space part moves the
    arm as the same load does at γ₀ (``ratio`` = γ₀/γ) — docs/redundancy.md, "Link loads under the γ schedule".

    With H = JᵀJ + H_l/γ the dynamically consistent inverse J̄ (the H-weighted pseudo-inverse: it
    minimises q̇ᵀHq̇ = ‖Jq̇‖² + q̇ᵀH_lq̇/γ at a given Jq̇) and so N̄ = I − J̄J do not depend on γ, and
    H⁻¹N̄ᵀ = γ Z (Zᵀ H_l Z)⁻¹ Zᵀ (Z a basis of J's null space) grows exactly as γ: scaling N̄ᵀτ by γ₀/γ
    gives the null-space acceleration of γ₀, and leaves the tip's part J̄ᵀτ (the equivalent wrench) alone."""
    return tau - (1.0 - ratio) * (Nt @ tau)


def _vec(x: float | np.ndarray | list[float], n: int, name: str) -> np.ndarray:
    v = np.broadcast_to(np.asarray(x, dtype=float), (n,)).copy()
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError(f"{name} must be {n} finite non-negative numbers (or one for all joints)")
    return v

#: the posture task's parameters, declared once (fdcontrol.params)
PARAMS = declare(
    "posture",
    Param("posture", "choice", "auto", "null-space posture task: on, off, or auto (on for redundant arms with "
          "the FD mapping)", policy="holding", choices=("auto", "on", "off")),
    Param("posture_stiffness", "float", 10.0, "K of the posture spring (mass-normalised, = ω²)", "1/s²", ge=0,
          le=1e4),
    Param("posture_damping", "float", 0.0, "D of the posture task, added to the velocity decay", "1/s", ge=0,
          le=1e3),
    Param("posture_preferred", "vector", None, "preferred posture (default: the configuration when the task "
          "is switched on)", "rad",
          policy="holding", nullable=True, ge=-1e3, le=1e3),
)


def mid_range(robot: RobotModel) -> np.ndarray:
    """The middle of each joint's position limits (rad): a preferred posture to ask for explicitly
    (not the default: with symmetric ranges, e.g. a KUKA iiwa, it is q = 0, the stretched,
    singular arm)."""
    lim = robot.limits
    return 0.5 * (lim.lower + lim.upper)


@dataclass
class PostureTask:
    """τ_p = N̄ᵀ H (K (q_p − q) − D q̇): K in 1/s², D in 1/s per joint (see module doc).

    ``preferred`` q_p (rad); None (the default) takes the configuration at activation, the first
    ``q`` the task acts on: switching the task on moves nothing by itself, and q_p is a pose the
    arm was really in, never a singular default.
    """

    robot: RobotModel
    stiffness: np.ndarray | float = 4.0
    damping: np.ndarray | float = 0.0
    preferred: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = self.robot.dof
        self.stiffness = _vec(self.stiffness, n, "posture stiffness")
        self.damping = _vec(self.damping, n, "posture damping")
        if self.preferred is not None:
            self.preferred = self.robot.check_q(self.preferred, "preferred posture")

    def acceleration(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """a_p = K (q_p − q) − D q̇ (rad/s²); the first call fixes a default q_p = q (activation)."""
        if self.preferred is None:
            self.preferred = np.array(q, dtype=float)
        return self.stiffness * (self.preferred - q) - self.damping * qd

    def torque(self, H: np.ndarray, J: np.ndarray, q: np.ndarray, qd: np.ndarray,
               Nt: np.ndarray | None = None) -> np.ndarray:
        """τ_p = N̄ᵀ H a_p (N·m on the virtual model); pass N̄ᵀ when it is already known."""
        Nt = nullspace_transpose(H, J) if Nt is None else Nt
        return Nt @ (H @ self.acceleration(q, qd))

    def distance(self, q: np.ndarray) -> float:
        """‖q − q_p‖ (rad): how far the arm is from the preferred posture (0 before activation)."""
        if self.preferred is None:
            return 0.0
        d = np.asarray(q, dtype=float) - self.preferred
        return math.sqrt(float(d.dot(d)))  # np.linalg.norm's own sum of a vector, without its wrapper


def joint_load(virtual, q: np.ndarray, qd: np.ndarray, posture: PostureTask | None = None,
               link_loads=None, config=None) -> np.ndarray | None:
    """The per-cycle joint load on the virtual model: τ = N̄ᵀ H a_p + (N̄ᵀ) Σ J_pᵀ F.

    `virtual` is the solver's :class:`~fdcontrol.model.virtual.VirtualModel`, `link_loads` a
    :class:`~fdcontrol.control.link_loads.LinkLoads`; N̄ᵀ is formed once and shared. None when there is
    nothing to apply. `config`, a :class:`~fdcontrol.model.configuration.Configuration` of `virtual`
    updated at q, supplies H and J without another CRBA.
    """
    if posture is None and link_loads is None:
        return None
    need_nt = posture is not None or link_loads.mode == "projected"
    if config is not None and config.virtual is virtual and config.q is q:
        H, J = (config.inertia, config.jacobian) if need_nt else (None, None)
    else:
        H = virtual.inertia(q) if need_nt else None
        J = virtual.jacobian(q) if need_nt else None
    Nt = nullspace_transpose(H, J) if need_nt else None
    tau = np.zeros(len(q))
    if posture is not None:
        tau += posture.torque(H, J, q, qd, Nt)
    if link_loads is not None:
        tau += link_loads.torque(q, qd, Nt)
    return tau
