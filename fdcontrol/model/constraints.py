"""Joint limits of the virtual model as constraints, not clamps (seeds 001 and 002).

A joint at a limit whose load pushes it outward is locked: the remaining joints move as the
constrained mechanism would. With S₁ the free and T₂ the locked coordinate columns
(Featherstone & Fijany, seed 001):

* eq. 7:  q̈ = S₁ (S₁ᵀ H S₁)⁻¹ S₁ᵀ b        (the free block of H, locked q̈ = 0)
* eq. 8:  q̈ = (H⁻¹ − H⁻¹T₂ (T₂ᵀH⁻¹T₂)⁻¹ T₂ᵀH⁻¹) b   (from H⁻¹, e.g. by ABA)

and the constraint forces on the locked joints are λ = T₂ᵀ(H q̈ − b). The locked dynamics
are solved by the FD algorithm the mapping selects (``locked_*`` below), each in its own
exact form: Cholesky of the free block of H (eq. 7), the square-root form with the locked
columns of [J; γ^(-1/2) A] dropped, and ABA on the mechanism with the locked joints fixed
(the limit of infinite joint inertia, built exactly as a reduced model).

The active set is decided once per step (``JointLimitConstraints.decide``) and the state is
projected onto the constraint manifold before and after the step (the perturbation approach
of Keerthi et al., seed 002): q_j = limit, q̇_j = 0 on locked joints.

Plain clamping (the reference C++ controller) instead integrates the unconstrained dynamics
and then clamps q and zeroes q̇ of the offending joint: the other joints keep the motion
computed for a mechanism that could still move that joint, which distorts the Cartesian
response.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pinocchio as pin
import scipy.linalg

from fdcontrol.model.linalg import cho_solve_upper, cholesky_block, clip_into
from fdcontrol.model.spatial import cross, first_max


def locked_acceleration(H: np.ndarray, b: np.ndarray, locked: np.ndarray) -> np.ndarray:
    """Seed 001 eq. 7 by Cholesky of the free block: q̈_F = H_FF⁻¹ b_F, q̈_locked = 0.

    One compiled call (:func:`_locked_kernel`) where numba is installed, H and b are finite float64 arrays of
    matching shapes, ``locked`` a boolean vector and the free block positive definite; else, and on anything
    else, scipy's factorization (:func:`locked_acceleration_lapack`), which agrees to rounding
    (tests/test_constraints.py) and raises as it does on bad input."""
    if _locked is not None and type(H) is np.ndarray and type(b) is np.ndarray and type(locked) is np.ndarray \
            and H.dtype == b.dtype == _F64 and locked.dtype == np.bool_ and H.ndim == 2 \
            and H.shape[0] == H.shape[1] == b.shape[0] == locked.shape[0] and b.ndim == 1 == locked.ndim:
        qdd = np.empty(b.shape[0])
        if _locked(H, b, locked, qdd):
            return qdd
    return locked_acceleration_lapack(H, b, locked)


def locked_acceleration_lapack(H: np.ndarray, b: np.ndarray, locked: np.ndarray) -> np.ndarray:
    """:func:`locked_acceleration` by scipy's (LAPACK's) Cholesky factorization and solve."""
    idx = np.flatnonzero(~locked)  # the free joints
    qdd = np.zeros_like(b)
    if idx.size:  # H_FF by take (the same entries as H[np.ix_(free, free)], a fifth of its cost)
        qdd[idx] = cho_solve_upper(H.take(idx, 0).take(idx, 1), b.take(idx))  # scipy's cho_factor + cho_solve
    return qdd


_F64 = np.dtype(np.float64)


def _next_trial(locked: np.ndarray, j_rel: int, p_rel: float, j_add: int, p_add: float) -> np.ndarray | None:
    """The active set's next trial (JointLimitConstraints.decide): release the locked joint pulled hardest onto
    its limit, else lock the free joint accelerating outward hardest; None when neither exists."""
    if p_rel > 0:
        locked = locked.copy()
        locked[j_rel] = False
    elif p_add > 0:
        locked = locked.copy()
        locked[j_add] = True
    else:
        return None
    return locked


def _locked_kernel(H: np.ndarray, b: np.ndarray, locked: np.ndarray,
                   qdd: np.ndarray) -> bool:  # pragma: no mutate block
    """Eq. 7 into ``qdd``: the free block H_FF = L Lᵀ (Cholesky), q̈_F by forward and back substitution, zero
    on the locked joints. False (qdd undefined) when H_FF is not positive definite or a value is not finite."""
    n = b.shape[0]
    free = np.empty(n, np.int64)
    m = 0
    for j in range(n):
        if not locked[j]:
            free[m] = j
            m += 1
    L = np.zeros((m, m))
    if not cholesky_block(H, free, m, L):  # H_FF = L Lᵀ from the upper triangle, as LAPACK's upper factorization
        return False
    y = np.empty(m)
    for i in range(m):
        s = b[free[i]]
        for k in range(i):
            s -= L[i, k] * y[k]
        y[i] = s / L[i, i]
    for i in range(m - 1, -1, -1):
        s = y[i]
        for k in range(i + 1, m):
            s -= L[k, i] * y[k]
        y[i] = s / L[i, i]
    for j in range(n):
        qdd[j] = 0.0
    for i in range(m):
        if not math.isfinite(y[i]):
            return False
        qdd[free[i]] = y[i]
    return True


try:  # compiled at import (cached on disk), never in the loop thread; without numba scipy's form
    import numba
    from numba import types as _t

    _locked: Any = numba.njit(_t.boolean(_t.Array(_t.float64, 2, "A"), _t.Array(_t.float64, 1, "A"),
                                         _t.Array(_t.boolean, 1, "A"), _t.Array(_t.float64, 1, "C")),
                              cache=True, boundscheck=True)(_locked_kernel)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    _locked = None


def locked_acceleration_eq8(Hinv: np.ndarray, b: np.ndarray, locked: np.ndarray) -> np.ndarray:
    """Seed 001 eq. 8/9: q̈ = (H⁻¹ − H⁻¹T₂(T₂ᵀH⁻¹T₂)⁻¹T₂ᵀH⁻¹) b."""
    if not locked.any():
        return Hinv @ b
    HT = Hinv[:, locked]
    return Hinv @ b - HT @ np.linalg.solve(HT[locked], HT.T @ b)


def constraint_forces(Hinv: np.ndarray, b: np.ndarray, locked: np.ndarray) -> np.ndarray:
    """λ on the locked joints from H⁻¹: H q̈ = b + T₂ λ with T₂ᵀ q̈ = 0."""
    HT = Hinv[:, locked]
    return -np.linalg.solve(HT[locked], HT.T @ b)


def locked_qr(J: np.ndarray, A: np.ndarray, gamma: float, wrench: np.ndarray, tau: np.ndarray,
              locked: np.ndarray) -> np.ndarray:
    """Square-root form with the locked columns dropped: K_F = [J_F; γ^(-1/2) A_F], K_FᵀK_F = H_FF.

    q̈_F = R⁻¹Qᵀ[f; 0] + R⁻¹R⁻ᵀ τ_F (semi-normal equations for joint loads) — H is never formed —
    then one step of iterative refinement, x += R⁻¹R⁻ᵀ (J_Fᵀf + τ_F − K_Fᵀ K_F x) with the residual
    in extended precision (np.longdouble). Dropping columns can leave K_F nearly rank deficient
    (an exactly singular arm with a locked joint), where the least-squares error grows like
    ε·κ(K_F)²; the refinement brings it back to the 1e-6 contract of GAMMA_MAX["qr"] (measured:
    8e-5 → 3e-10 at γ = 1e12, q = 0, wrist 3 locked). Where np.longdouble is plain float64
    (e.g. Windows, Apple silicon) the refinement helps less.
    """
    free = ~locked
    qdd = np.zeros(J.shape[1])
    if free.any():
        K = np.vstack((J[:, free], A[:, free] / np.sqrt(gamma)))
        Q, R = np.linalg.qr(K)
        x = scipy.linalg.solve_triangular(R, Q[:6].T @ wrench)
        rhs = J[:, free].T.astype(np.longdouble) @ wrench.astype(np.longdouble)
        if np.any(tau[free]):
            x += scipy.linalg.solve_triangular(R, scipy.linalg.solve_triangular(R, tau[free], trans="T"))
            rhs += tau[free].astype(np.longdouble)
        Kl = K.astype(np.longdouble)
        res = (rhs - Kl.T @ (Kl @ x.astype(np.longdouble))).astype(float)
        qdd[free] = x + scipy.linalg.solve_triangular(R, scipy.linalg.solve_triangular(R, res, trans="T"))
    return qdd


class LockedABA:
    """ABA on the mechanism with the locked joints fixed at their limits (infinite joint inertia).

    The reduced model (pinocchio's buildReducedModel merges each locked joint's body into its
    parent) is exact and is cached per locked set and limit side, since a locked joint sits
    exactly on its limit after projection.
    """

    def __init__(self, model: pin.Model, tip: str, R_base: np.ndarray) -> None:
        self.model, self.tip, self.R_base = model, tip, R_base
        self._cache: dict[bytes, tuple[pin.Model, pin.Data, int, int]] = {}

    def _reduced(self, q: np.ndarray, locked: np.ndarray) -> tuple[pin.Model, pin.Data, int, int]:
        key = locked.tobytes() + q[locked].tobytes()
        hit = self._cache.get(key)
        if hit is None:
            ids = [int(j) + 1 for j in np.flatnonzero(locked)]  # one 1-dof joint per q entry
            rm = pin.buildReducedModel(self.model, ids, q)
            fid = rm.getFrameId(self.tip)
            hit = (rm, rm.createData(), fid, rm.frames[fid].parentJoint)
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def __call__(self, q: np.ndarray, wrench: np.ndarray, tau: np.ndarray, locked: np.ndarray) -> np.ndarray:
        qdd = np.zeros_like(q)
        free = ~locked
        if not free.any():
            return qdd
        rm, rd, fid, pj = self._reduced(q, locked)
        qf = q[free]
        pin.forwardKinematics(rm, rd, qf)
        p = pin.updateFramePlacement(rm, rd, fid).translation
        F, T = self.R_base @ wrench[:3], self.R_base @ wrench[3:]  # base → world orientation
        fext = [pin.Force.Zero() for _ in range(rm.njoints)]
        fext[pj] = rd.oMi[pj].actInv(pin.Force(F, T + cross(p, F)))  # moment about the world origin
        qdd[free] = pin.aba(rm, rd, qf, np.zeros(rm.nv), tau[free], fext)
        return qdd


class LockedDynamics:
    """x = H_FF⁻¹(J_Fᵀ f + τ_F), x_locked = 0 (seed 001 eq. 7) on a ``VirtualModel`` by `algorithm`.

    ``cholesky``: Cholesky of the free block of H (CRBA); ``qr``: ``locked_qr``; ``aba``:
    ``LockedABA``. Each meets the accuracy of its unconstrained form (GAMMA_MAX, tests).
    """

    def __init__(self, virtual, algorithm: str) -> None:  # virtual: fdcontrol.model.virtual.VirtualModel
        self.virtual, self.algorithm = virtual, algorithm
        data = virtual.model.createData()
        pin.framesForwardKinematics(virtual.model, data, pin.neutral(virtual.model))
        R_base = data.oMf[virtual.robot.base_id].rotation.copy()
        self._aba = LockedABA(virtual.model, virtual.robot.tip, R_base) if algorithm == "aba" else None

    def __call__(self, q: np.ndarray, wrench: np.ndarray, tau: np.ndarray, locked: np.ndarray) -> np.ndarray:
        vm = self.virtual
        if self.algorithm == "qr":
            return locked_qr(vm.robot.jacobian(q), vm.link_jacobians(q), vm.gamma, wrench, tau, locked)
        if self._aba is not None:
            return self._aba(q, wrench, tau, locked)
        H, b = vm.equation(q, wrench, None, tau)
        return locked_acceleration(H, b, locked)


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
        if np.any(self.lower > self.upper):
            raise ValueError("virtual joint limits: lower > upper")
        self.set_active(np.zeros(len(self.lower), dtype=bool))
        # plain floats: for N ≈ 6–7 joints a loop of comparisons is several times cheaper than
        # numpy's comparisons and reductions, and this runs twice per virtual sub-step
        self._inner = list(zip((self.lower + self.tol).tolist(), (self.upper - self.tol).tolist(), strict=True))
        #: at_limit's bounds, once: rows lower + tol and upper − tol of one array (the solver's compiled calls take
        #: both as one argument), ``_lo_tol`` and ``_up_tol`` views of its rows
        self._tol_bounds = np.array([self.lower + self.tol, self.upper - self.tol])
        self._lo_tol, self._up_tol = self._tol_bounds[0], self._tol_bounds[1]

    def set_active(self, locked: np.ndarray) -> None:
        """The locked set of the current step; ``engaged`` says whether any joint is in it."""
        self.active = locked
        self.engaged = bool(locked.any())

    def release(self) -> None:
        """No joint locked (the step starts strictly inside the limits)."""
        if self.engaged:
            self.set_active(np.zeros(len(self.lower), dtype=bool))

    def at_limit(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return q >= self.upper - self.tol, q <= self.lower + self.tol

    def inside(self, q: np.ndarray) -> bool:
        """Every joint strictly away from its limits (the common case, checked first and cheaply)."""
        for x, (lo, up) in zip(q.tolist(), self._inner, strict=True):
            if not lo < x < up:  # also False for NaN
                return False
        return True

    def decide(self, q: np.ndarray, qd: np.ndarray, solve: Callable[[np.ndarray], np.ndarray],
               H: np.ndarray, b: np.ndarray, decay: float = 0.0) -> np.ndarray:
        """The locked set for this step, given ``solve(locked) -> x`` with q̈ = x − c q̇.

        Start with every joint at a limit that is not moving back inside; then, one joint at
        a time, release the locked joint whose constraint force λ = (H x − b)_j would have to
        pull it onto the limit (at an upper limit only λ ≤ 0 is possible, at a lower one λ ≥ 0),
        or re-add a free joint at a limit whose q̈ points outward. Stops when neither exists
        (bounded by 2N + 1 solves).
        """
        if _start is not None and type(q) is np.ndarray and type(qd) is np.ndarray and q.dtype == qd.dtype == _F64 \
                and q.shape == qd.shape == self.lower.shape and type(H) is np.ndarray and type(b) is np.ndarray \
                and H.dtype == b.dtype == _F64 and H.shape == (q.shape[0], q.shape[0]) and b.shape == q.shape:
            return self._decide_compiled(q, qd, solve, H, b, float(decay))
        up, lo = self.at_limit(q)
        locked = (up & (qd >= 0)) | (lo & (qd <= 0))
        if not (up | lo).any():
            self.set_active(locked)
            return locked
        # per joint in plain floats (N ≈ 6–7: a few µs instead of a dozen numpy calls per trial), the same
        # operations as the array form: λ = (H x − b) where locked (each row's dot product summed in order:
        # _residual, as the compiled verdict sums it), the pull onto a limit, the outward q̈
        ups, los, qds = up.tolist(), lo.tolist(), qd.tolist()
        push_up = [u and v >= 0 for u, v in zip(ups, qds, strict=True)]
        push_lo = [w and v <= 0 for w, v in zip(los, qds, strict=True)]
        rows, bs = H.tolist(), b.tolist()
        for _ in range(2 * len(q) + 1):
            x = solve(locked)
            xs = x.tolist()
            lk = locked.tolist()
            pull, out = [], []
            for k, row, bk, xk, vk, u, w, pu, pl in zip(lk, rows, bs, xs, qds, ups, los, push_up, push_lo,
                                                        strict=True):
                lam = _residual(row, xs, bk) if k else 0.0
                pull.append((lam if u else 0.0) - (lam if w else 0.0))  # > 0: would pull onto the limit
                acc = 0.0 if k else xk - decay * vk
                out.append((acc if pu else 0.0) - (acc if pl else 0.0))  # > 0: outward
            nxt = _next_trial(locked, *first_max(pull), *first_max(out))
            if nxt is None:
                break
            locked = nxt
        self.set_active(locked)
        return locked

    def _decide_compiled(self, q: np.ndarray, qd: np.ndarray, solve: Callable[[np.ndarray], np.ndarray],
                         H: np.ndarray, b: np.ndarray, decay: float) -> np.ndarray:
        """:meth:`decide` with its per-joint rules compiled (:func:`_start_kernel`, :func:`_verdict_kernel`: the
        same comparisons and float operations, argmax as numpy's, λ = H x − b summed as :func:`_residual` sums it);
        ``solve`` as there."""
        n = q.shape[0]
        up, lo, locked = np.empty(n, np.bool_), np.empty(n, np.bool_), np.empty(n, np.bool_)
        if not _start(q, qd, self._lo_tol, self._up_tol, up, lo, locked):
            self.set_active(locked)
            return locked
        for _ in range(2 * n + 1):
            x = solve(locked)
            nxt = _next_trial(locked, *_verdict(H, x, b, locked, qd, up, lo, decay))
            if nxt is None:
                break
            locked = nxt
        self.set_active(locked)
        return locked

    def project(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Seed 002: back onto the constraint manifold — q_j = limit, no outward q̇_j at a limit."""
        if not self.engaged and self.inside(q):
            return q, qd
        if _project is not None and type(q) is np.ndarray and type(qd) is np.ndarray and q.dtype == qd.dtype == _F64 \
                and q.shape == qd.shape == self.lower.shape == self.active.shape:
            q_out, qd_out = np.empty(q.shape[0]), np.empty(q.shape[0])
            changed = _project(q, qd, self.lower, self.upper, self._lo_tol, self._up_tol, self.active, q_out, qd_out)
            return q_out, (qd_out if changed else qd)
        q = np.clip(q, self.lower, self.upper)
        up, lo = self.at_limit(q)
        out = (up & (qd > 0)) | (lo & (qd < 0)) | self.active
        if out.any():
            qd = qd.copy()
            qd[out] = 0.0
        return q, qd


def _start_kernel(q: np.ndarray, qd: np.ndarray, lo_tol: np.ndarray, up_tol: np.ndarray, up: np.ndarray,
                  lo: np.ndarray, locked: np.ndarray) -> bool:  # pragma: no mutate block
    """decide's start: which joints are at a limit (up, lo: at_limit) and locked (at a limit, not moving back
    inside); whether any joint is at a limit."""
    anyone = False
    for j in range(q.shape[0]):
        u, w = q[j] >= up_tol[j], q[j] <= lo_tol[j]
        up[j], lo[j] = u, w
        locked[j] = (u and qd[j] >= 0) or (w and qd[j] <= 0)
        anyone = anyone or u or w
    return anyone


def _residual(row: list[float], x: list[float], b: float) -> float:
    """λ_j = (H x − b)_j of one row of H: the row's dot product with x summed in order from 0.0, then − b_j
    (decide's plain-float form; :func:`_verdict_kernel` sums it the same way: the same bits)."""
    s = 0.0
    for h, v in zip(row, x, strict=True):
        s += h * v
    return s - b


def _verdict_kernel(H: np.ndarray, x: np.ndarray, b: np.ndarray, locked: np.ndarray, qd: np.ndarray,
                    up: np.ndarray, lo: np.ndarray, decay: float
                    ) -> tuple[int, float, int, float]:  # pragma: no mutate block
    """One trial of decide: λ = H x − b where locked (each row's dot product summed in order from 0.0, then − b_j:
    :func:`_residual`), the pull onto a limit and the outward q̈ per joint, each's first largest entry (np.argmax:
    the first NaN before any number)."""
    j_rel, p_rel, j_add, p_add = 0, 0.0, 0, 0.0
    n = x.shape[0]
    for j in range(n):
        k, u, w, v = locked[j], up[j], lo[j], qd[j]
        lam = 0.0
        if k:
            s = 0.0
            for i in range(n):
                s += H[j, i] * x[i]
            lam = s - b[j]
        pull = (lam if u else 0.0) - (lam if w else 0.0)  # > 0: would pull onto the limit
        acc = 0.0 if k else x[j] - decay * v
        out = (acc if (u and v >= 0) else 0.0) - (acc if (w and v <= 0) else 0.0)  # > 0: outward
        if j == 0 or pull > p_rel or (pull != pull and p_rel == p_rel):
            j_rel, p_rel = j, pull
        if j == 0 or out > p_add or (out != out and p_add == p_add):
            j_add, p_add = j, out
    return j_rel, p_rel, j_add, p_add


def _project_kernel(q: np.ndarray, qd: np.ndarray, lower: np.ndarray, upper: np.ndarray, lo_tol: np.ndarray,
                    up_tol: np.ndarray, active: np.ndarray, q_out: np.ndarray,
                    qd_out: np.ndarray) -> bool:  # pragma: no mutate block
    """JointLimitConstraints.project into q_out, qd_out: q clipped to the limits (NaN stays NaN, as np.clip),
    q̇ zeroed where the clipped q is at a limit and q̇ points out, or the joint is locked; whether any q̇ was."""
    changed = False
    clip_into(q, lower, upper, q_out)
    for j in range(q.shape[0]):
        x = q_out[j]
        v = qd[j]
        if (x >= up_tol[j] and v > 0) or (x <= lo_tol[j] and v < 0) or active[j]:
            qd_out[j] = 0.0
            changed = True
        else:
            qd_out[j] = v
    return changed


try:  # compiled at import (cached on disk), never in the loop thread; without numba the float loops above
    _B = _t.Array(_t.boolean, 1, "A")
    _FV = _t.Array(_t.float64, 1, "A")
    _start: Any = numba.njit(_t.boolean(_FV, _FV, _FV, _FV, _B, _B, _B), cache=True,
                             boundscheck=True)(_start_kernel)
    _verdict: Any = numba.njit(_t.Tuple((_t.int64, _t.float64, _t.int64, _t.float64))(_t.Array(_t.float64, 2, "A"),
                                                                                     _FV, _FV, _B, _FV, _B, _B,
                                                                                     _t.float64),
                               cache=True, boundscheck=True)(_verdict_kernel)
    _project: Any = numba.njit(_t.boolean(_FV, _FV, _FV, _FV, _FV, _FV, _B, _FV, _FV), cache=True,
                               boundscheck=True)(_project_kernel)
except NameError:  # pragma: no cover - numba missing (_t undefined): the float loops and numpy
    _start = _verdict = _project = None


def braking_inset(max_velocity: np.ndarray, max_acceleration: np.ndarray, braking_margin: float = 0.5
                  ) -> np.ndarray:
    """Inset m_j (rad) of the virtual limits from the safety limits so the virtual ones act first.

    The safety envelope allows |q̇_j| ≤ √(2 κ a_j d_j) at distance d_j from a limit (κ the braking
    margin). A joint stopped by the virtual model at q_max − m_j decelerates at most at a_j from
    at most v_j; it never meets the envelope when v_j² − 2 a_j s ≤ 2 κ a_j (m_j − s) for every
    s ≥ 0 travelled, i.e. m_j ≥ v_j² / (2 κ a_j).
    """
    v, a = np.asarray(max_velocity, dtype=float), np.asarray(max_acceleration, dtype=float)
    return v**2 / (2.0 * braking_margin * a)


def inset_limits(lower: np.ndarray, upper: np.ndarray, inset: np.ndarray | float, max_fraction: float = 0.25
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(lower + m, upper − m) with m capped at ``max_fraction`` of each joint's range."""
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    m = np.minimum(np.broadcast_to(np.asarray(inset, dtype=float), lower.shape), max_fraction * (upper - lower))
    return lower + m, upper - m


def clamp(q: np.ndarray, qd: np.ndarray, lower: np.ndarray, upper: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:
    """The reference controller's position clamping, for comparison: clip q, zero q̇ there."""
    hit = (q > upper) | (q < lower)
    if hit.any():
        q = np.clip(q, lower, upper)
        qd = qd.copy()
        qd[hit] = 0.0
    return q, qd
