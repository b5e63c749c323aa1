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
from typing import Any

import numpy as np

from fdcontrol.model.linalg import cho_solve_upper, cholesky_block, eigh, matmul_into, mirror_upper
from fdcontrol.model.robot import RobotModel
from fdcontrol.params import Param, declare

RCOND = 1e-9  # relative eigenvalue cut-off of J H⁻¹ Jᵀ (singular directions join the null space)


def nullspace_transpose(H: np.ndarray, J: np.ndarray) -> np.ndarray:
    """N̄ᵀ = I − Jᵀ J̄ᵀ with J̄ = H⁻¹ Jᵀ Λ, Λ = (J H⁻¹ Jᵀ)⁻¹ (Khatib's dynamically consistent
    projector; Λ by a truncated eigen-inverse, see module doc). N×N.

    One compiled call (:func:`_projector`: Cholesky of H, cyclic Jacobi eigen-decomposition of J H⁻¹ Jᵀ) where
    numba is installed and H, J are finite float64 matrices of matching shapes with H positive definite;
    otherwise, and on anything else, numpy's and LAPACK's :func:`nullspace_transpose_lapack`, which agrees to
    rounding (tests/test_posture.py) and raises as the wrappers do on bad input."""
    if _projector is not None and type(H) is np.ndarray and type(J) is np.ndarray and H.dtype == _F64 \
            and J.dtype == _F64 and H.ndim == 2 and J.ndim == 2 and H.shape[0] == H.shape[1] == J.shape[1] \
            and J.shape[0] > 0:
        Nt = np.empty(H.shape)
        if _projector(H, J, RCOND, Nt):
            return Nt
    return nullspace_transpose_lapack(H, J)


def nullspace_transpose_lapack(H: np.ndarray, J: np.ndarray) -> np.ndarray:
    """:func:`nullspace_transpose` by numpy's and LAPACK's routines (Cholesky solve, ``eigh``)."""
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
_F64 = np.dtype(np.float64)
JACOBI_SWEEPS = 30  # cyclic Jacobi sweeps at most (a 6×6 converges in 5–8)
#: Λ = (J H⁻¹ Jᵀ)⁻¹ by its Cholesky factor while κ(J H⁻¹ Jᵀ) ≤ this is certain (error ~κ·1e-16, nothing cut by
#: RCOND), else by the Jacobi eigen-decomposition (the virtual model's J H⁻¹ Jᵀ is near I away from singularities)
CHOLESKY_KAPPA = 1e4


def _projector_kernel(H: np.ndarray, J: np.ndarray, rcond: float, Nt: np.ndarray) -> bool:  # pragma: no mutate block
    """N̄ᵀ into ``Nt`` (N×N) from H (N×N, symmetric positive definite) and J (m×N, m ≤ N); False (Nt undefined)
    when H is not positive definite or a value is not finite (the caller then takes the LAPACK path).

    X = H⁻¹Jᵀ by the Cholesky factor H = L Lᵀ; A = ½(J X + (J X)ᵀ); Λ = A⁻¹ by A's Cholesky factor where
    κ(A) ≤ CHOLESKY_KAPPA is certain (:func:`_cholesky_inverse_kernel`), else A = V diag(w) Vᵀ by cyclic Jacobi
    rotations (Golub & Van Loan, "Matrix Computations", 4th ed., §8.5: until every off-diagonal entry is
    negligible next to its diagonal pair) and Λ = Σ_{w_i > rcond·max(w_max, 0)} v_i v_iᵀ / w_i
    (:func:`_jacobi_inverse_kernel`); J̄ = X Λ; N̄ᵀ = I − Jᵀ J̄ᵀ."""
    m, n = J.shape
    L = np.zeros((n, n))
    if not cholesky_block(H, np.arange(n), n, L):  # H = L Lᵀ from the upper triangle, as cho_solve_upper reads it
        return False
    X = np.empty((n, m))
    for c in range(m):  # L Lᵀ x = J[c]ᵀ
        for i in range(n):
            s = J[c, i]
            for k in range(i):
                s -= L[i, k] * X[k, c]
            X[i, c] = s / L[i, i]
        for i in range(n - 1, -1, -1):
            s = X[i, c]
            for k in range(i + 1, n):
                s -= L[k, i] * X[k, c]
            X[i, c] = s / L[i, i]
    A = np.empty((m, m))
    matmul_into(J, X, A)
    for i in range(m):  # symmetric
        for j in range(i):
            s = 0.5 * (A[i, j] + A[j, i])
            A[i, j] = A[j, i] = s
        if not math.isfinite(A[i, i]):
            return False
    Lam = np.zeros((m, m))
    if not _cholesky_inverse(A, Lam):  # not certainly well conditioned: the truncated eigen-inverse
        if not _jacobi_inverse(A, rcond, Lam):
            return False  # the caller takes the LAPACK path
    Jb = np.empty((n, m))  # J̄ = X Λ
    matmul_into(X, Lam, Jb)
    for i in range(n):  # N̄ᵀ = I − Jᵀ J̄ᵀ: (i, j) = δ_ij − Σ_k J[k, i] J̄[j, k]
        for j in range(n):
            s = 0.0
            for k in range(m):
                s += J[k, i] * Jb[j, k]
            Nt[i, j] = (1.0 if i == j else 0.0) - s
    return True


def _cholesky_inverse_kernel(A: np.ndarray, Lam: np.ndarray) -> bool:  # pragma: no mutate block
    """Λ = A⁻¹ into ``Lam`` (zeros on entry) by the Cholesky factor A = L Lᵀ, Λ = L⁻ᵀ L⁻¹, where κ(A) ≤
    CHOLESKY_KAPPA is certain — κ(A) ≤ tr(A)·tr(A⁻¹), tr(A⁻¹) = ‖L⁻¹‖²_F — so that no eigenvalue would be cut
    (RCOND) and the two inverses agree to rounding; False (Lam unchanged) otherwise."""
    m = A.shape[0]
    L = np.zeros((m, m))
    for j in range(m):
        s = A[j, j]
        for c in range(j):
            s -= L[j, c] * L[j, c]
        if not s > 0.0:
            return False
        L[j, j] = math.sqrt(s)
        for i in range(j + 1, m):
            s = A[i, j]
            for c in range(j):
                s -= L[i, c] * L[j, c]
            L[i, j] = s / L[j, j]
    Li = np.zeros((m, m))  # L⁻¹, lower triangular: column by column, forward substitution
    tr_a, tr_inv = 0.0, 0.0
    for col in range(m):
        tr_a += A[col, col]
        for i in range(col, m):
            s = 1.0 if i == col else 0.0
            for c in range(col, i):
                s -= L[i, c] * Li[c, col]
            Li[i, col] = s / L[i, i]
            tr_inv += Li[i, col] * Li[i, col]
    if not tr_a * tr_inv <= CHOLESKY_KAPPA:
        return False
    for i in range(m):  # Λ = L⁻ᵀ L⁻¹: (i, j) = Σ_{k ≥ max(i, j)} L⁻¹[k, i] L⁻¹[k, j]
        for j in range(i + 1):
            s = 0.0
            for k in range(i, m):
                s += Li[k, i] * Li[k, j]
            Lam[i, j] = Lam[j, i] = s
    return True


def _jacobi_inverse_kernel(A: np.ndarray, rcond: float, Lam: np.ndarray) -> bool:  # pragma: no mutate block
    """Λ = Σ_{w_i > rcond·max(w_max, 0)} v_i v_iᵀ / w_i into ``Lam`` (zeros on entry), A = V diag(w) Vᵀ by cyclic
    Jacobi rotations (A is overwritten); False when the sweeps run out first."""
    m = A.shape[0]
    V = np.zeros((m, m))
    for i in range(m):
        V[i, i] = 1.0
    converged = False
    for sweep in range(JACOBI_SWEEPS + 1):
        off = 0.0
        for p in range(m):
            for q in range(p + 1, m):
                off += A[p, q] * A[p, q]
        if off == 0.0:
            converged = True
            break
        if sweep == JACOBI_SWEEPS:
            break  # the sweeps ran out: not diagonal yet
        for p in range(m):
            for q in range(p + 1, m):
                apq = A[p, q]
                if apq == 0.0:
                    continue
                app, aqq = A[p, p], A[q, q]
                if abs(apq) <= 1e-300 + 2.2e-16 * 1e-3 * math.sqrt(abs(app * aqq)):
                    A[p, q] = A[q, p] = 0.0  # negligible: below the rounding of its diagonal pair
                    continue
                theta = (aqq - app) / (2.0 * apq)
                t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                if theta < 0.0:
                    t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for k in range(m):  # A ← A G (columns p, q)
                    akp, akq = A[k, p], A[k, q]
                    A[k, p] = c * akp - s * akq
                    A[k, q] = s * akp + c * akq
                for k in range(m):  # A ← Gᵀ A (rows p, q)
                    apk, aqk = A[p, k], A[q, k]
                    A[p, k] = c * apk - s * aqk
                    A[q, k] = s * apk + c * aqk
                A[p, q] = A[q, p] = 0.0
                for k in range(m):  # V ← V G
                    vkp, vkq = V[k, p], V[k, q]
                    V[k, p] = c * vkp - s * vkq
                    V[k, q] = s * vkp + c * vkq
    if not converged:
        return False
    top = 0.0
    for i in range(m):
        if A[i, i] > top:
            top = A[i, i]
    top *= rcond
    for k in range(m):
        w = A[k, k]
        if w > top:
            for i in range(m):
                x = V[i, k] / w
                for j in range(m):
                    Lam[i, j] += x * V[j, k]
    return True


def _torque_kernel(Nt: np.ndarray, H: np.ndarray, K: np.ndarray, qp: np.ndarray, q: np.ndarray, D: np.ndarray,
                   qd: np.ndarray) -> np.ndarray:  # pragma: no mutate block
    """τ_p = N̄ᵀ (H a_p), a_p = K (q_p − q) − D q̇ (PostureTask.torque), written out per joint."""
    n = q.shape[0]
    a = np.empty(n)
    for j in range(n):
        a[j] = K[j] * (qp[j] - q[j]) - D[j] * qd[j]
    h = np.empty(n)
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += H[i, j] * a[j]
        h[i] = s
    tau = np.empty(n)
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += Nt[i, j] * h[j]
        tau[i] = s
    return tau


def _load_kernel(H: np.ndarray, J: np.ndarray, rcond: float, K: np.ndarray, qp: np.ndarray, q: np.ndarray,
                 D: np.ndarray, qd: np.ndarray, upper: bool, Nt: np.ndarray,
                 tau: np.ndarray) -> bool:  # pragma: no mutate block
    """:func:`_projector_kernel` into ``Nt``, then :func:`_torque_kernel` into ``tau`` (PostureTask.load): one call,
    the same operations; False (Nt, tau undefined) where the projector's kernel gives up or the shapes do not
    match (H N×N, J m×N with m ≥ 1, the vectors N, Nt N×N, tau N). ``upper``: H's strict lower triangle is not
    read (CRBA's ``data.M``, whose upper triangle H is): H a_p from the upper one, the same values and sums as the
    torque kernel's on the mirrored H (the projector reads the upper triangle only either way)."""
    n = H.shape[0]
    if H.shape[1] != n or J.shape[1] != n or J.shape[0] < 1 or Nt.shape[0] != n or Nt.shape[1] != n:
        return False
    if K.shape[0] != n or qp.shape[0] != n or q.shape[0] != n or D.shape[0] != n or qd.shape[0] != n \
            or tau.shape[0] != n:
        return False
    if not _projector(H, J, rcond, Nt):
        return False
    if not upper:
        t = _torque(Nt, H, K, qp, q, D, qd)
        for i in range(t.shape[0]):
            tau[i] = t[i]
        return True
    a = np.empty(n)
    for j in range(n):
        a[j] = K[j] * (qp[j] - q[j]) - D[j] * qd[j]
    h = np.empty(n)
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += (H[i, j] if j >= i else H[j, i]) * a[j]
        h[i] = s
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += Nt[i, j] * h[j]
        tau[i] = s
    return True


try:  # compiled at import (cached on disk), never in the loop thread; without numba the LAPACK form
    import numba
    from numba import types as _t

    _M, _V = _t.Array(_t.float64, 2, "A"), _t.Array(_t.float64, 1, "A")
    _cholesky_inverse: Any = numba.njit(_t.boolean(_M, _M), cache=True, boundscheck=True)(_cholesky_inverse_kernel)
    _jacobi_inverse: Any = numba.njit(_t.boolean(_M, _t.float64, _M), cache=True,
                                      boundscheck=True)(_jacobi_inverse_kernel)
    _projector: Any = numba.njit(_t.boolean(_M, _M, _t.float64, _t.Array(_t.float64, 2, "C")), cache=True,
                                 boundscheck=True)(_projector_kernel)
    _torque: Any = numba.njit(_t.Array(_t.float64, 1, "C")(_M, _M, _V, _V, _V, _V, _V), cache=True,
                              boundscheck=True)(_torque_kernel)
    _load: Any = numba.njit(_t.boolean(_M, _M, _t.float64, _V, _V, _V, _V, _V, _t.boolean,
                                       _t.Array(_t.float64, 2, "C"), _t.Array(_t.float64, 1, "C")), cache=True,
                            boundscheck=True)(_load_kernel)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    _projector = _torque = _load = None
    _cholesky_inverse, _jacobi_inverse = _cholesky_inverse_kernel, _jacobi_inverse_kernel


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
        n = H.shape[0]
        if (_torque is not None and self.preferred is not None and type(q) is np.ndarray and type(qd) is np.ndarray
                and q.shape == qd.shape == self.preferred.shape == (n,) and Nt.shape == H.shape == (n, n)):
            try:  # one compiled call on float64 arrays of the model's size
                return _torque(Nt, H, self.stiffness, self.preferred, q, self.damping, qd)  # type: ignore[no-any-return]
            except TypeError:  # other dtypes (integers): numpy's form
                pass
        return Nt @ (H @ self.acceleration(q, qd))  # a wrong length raises ValueError here

    def load(self, H: np.ndarray, J: np.ndarray, q: np.ndarray, qd: np.ndarray,
             upper: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(N̄ᵀ, τ_p): ``nullspace_transpose(H, J)`` and ``torque(H, J, q, qd, N̄ᵀ)`` — one compiled call where both
        would take their compiled forms (float64 arrays of the model's size, q_p set), else those two calls;
        the same bits either way (tests/test_posture.py). ``upper``: H is given by its upper triangle (with the
        diagonal) alone, as CRBA leaves it in pinocchio's ``data.M``; its strict lower triangle is not read (the
        two calls take H mirrored, :func:`fdcontrol.model.linalg.mirror_upper`)."""
        qp = self.preferred
        if _load is not None and qp is not None:  # the kernel checks the shapes; numba's dispatch the types
            n = qp.shape[0]
            Nt, tau = np.empty((n, n)), np.empty(n)
            try:
                if _load(H, J, RCOND, self.stiffness, qp, q, self.damping, qd, upper, Nt, tau):
                    return Nt, tau
            except TypeError:  # not float64 arrays of these dimensions: the two calls below
                pass
        if upper:
            H = np.asarray(H)
            H = mirror_upper(H, np.tril_indices(H.shape[0], -1))
        Nt = nullspace_transpose(H, J)
        return Nt, self.torque(H, J, q, qd, Nt)

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
