"""Configuration: the kinematic and dynamic quantities of the current q, computed once per cycle.

As in pink's and mink's ``Configuration``, one object per loop holds its own pinocchio data and
is updated once per cycle; the control law, the solver, the limits and the telemetry read
from it instead of running forward kinematics again.

* :meth:`Configuration.update` (q) runs one pass: forward kinematics and the joint Jacobians —
  with a :class:`~fdcontrol.model.virtual.VirtualModel`, the composite rigid body algorithm with the
  WORLD convention, which fills the Jacobians in the same pass, then the Cholesky factor of H
  (pinocchio's sparse LDLᵀ); :meth:`Configuration.solve` applies H⁻¹ with that factor.
* Results the cycle needs are stored at once: ``pose`` (4×4, tip in base) and ``jacobian``
  (6×N, rows [v; ω] in the base frame, seed eq. 3).
* The rest is computed when first asked for, then cached until the next update: ``inertia``
  H(q), ``inertia_inverse`` H⁻¹(q), ``singular_values`` of J, ``sigma_min``, ``kappa_h`` = κ(H).

Units: rad, m, s; H in the virtual model's kg·m² (seed 004, eqs. 13–14).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pinocchio as pin

from fdcontrol.model.linalg import eigvalsh, mirror_upper, svd_jacobi, svd_kernel, svdvals
from fdcontrol.model.robot import ModelError, RobotModel
from fdcontrol.model.virtual import VirtualModel

_F64 = np.dtype(np.float64)
# the once-per-cycle pass's pinocchio functions and constants, looked up once (not two attributes a call)
_crba, _decompose, _WORLD = pin.crba, pin.cholesky.decompose, pin.Convention.WORLD
_frame_placement, _frame_jacobian, _LWA = pin.updateFramePlacement, pin.getFrameJacobian, pin.LOCAL_WORLD_ALIGNED


def _q_ok_py(q: np.ndarray, n: int) -> bool:  # pragma: no mutate block
    """q (a float64 vector) has n entries and a finite sum — spatial.finite's test: the entries summed left to
    right from 0.0 as Python's ``sum`` of floats does, so the same verdict — else false (check_q then answers:
    the same array back, or its error)."""
    if q.shape[0] != n:
        return False
    s = 0.0
    for i in range(n):
        s += q[i]
    return math.isfinite(s)


def _q_ok_plain(q: np.ndarray, n: int) -> bool:
    """:func:`_q_ok_py` without numba (any ndarray: false for another dtype or shape)."""
    return q.dtype is _F64 and q.shape == (n,) and math.isfinite(sum(q.tolist()))


try:  # compiled at import (cached on disk), never in the loop thread
    import numba
    from numba import types as _t

    _q_ok: Any = numba.njit(_t.boolean(_t.Array(_t.float64, 1, "A"), _t.int64), cache=True)(_q_ok_py)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    _q_ok = _q_ok_plain


class Configuration:
    """Pose, Jacobian and (with a virtual model) H, H⁻¹ of one joint configuration q."""

    def __init__(self, robot: RobotModel, q: np.ndarray | None = None,
                 virtual: VirtualModel | None = None) -> None:
        if virtual is not None and (virtual.dof != robot.dof or virtual.tip_id != robot.tip_id):
            raise ModelError("the virtual model belongs to another robot")
        self.robot, self.virtual = robot, virtual
        self.model = virtual.model if virtual is not None else robot.model
        self.data = self.model.createData()
        self.tip_id = robot.tip_id
        # the base is not on the chain: its world placement is constant (computed once here)
        ref = robot.model.createData()
        pin.framesForwardKinematics(robot.model, ref, pin.neutral(robot.model))
        self.base_placement: pin.SE3 = ref.oMf[robot.base_id].copy()
        R = self.base_placement.rotation
        self._Rt = None if np.array_equal(R, np.eye(3)) else R.T.copy()
        self._identity_base = self._Rt is None and not np.any(self.base_placement.translation)
        self._lower = np.tril_indices(self.model.nv, -1)
        self._dof = robot.dof
        self.update(pin.neutral(robot.model) if q is None else q)
        svd_kernel()  # J's SVD kernel loaded now (svd), never first in a loop's cycle

    # ---------------------------------------------------------------- the once-per-cycle pass
    def update(self, q: np.ndarray, check: bool = True) -> Configuration:
        """Recompute everything for q (rad); ``check=False`` skips validation of q (hot path)."""
        if check:  # check_q's test (a finite sum: finite entries), one compiled call for a float64 vector
            try:
                ok = type(q) is np.ndarray and _q_ok(q, self._dof)
            except TypeError:  # not a float64 vector: check_q's answer
                ok = False
            if not ok:
                q = self.robot.check_q(q)
        m, d = self.model, self.data
        if self.virtual is not None:
            _crba(m, d, q, _WORLD)  # also fills d.J and d.oMi
            _decompose(m, d)
        else:
            pin.computeJointJacobians(m, d, q)
        oMt = _frame_placement(m, d, self.tip_id)
        self.pose = oMt.homogeneous if self._identity_base else self.base_placement.actInv(oMt).homogeneous
        J = _frame_jacobian(m, d, self.tip_id, _LWA)
        self.jacobian = J if self._Rt is None else self.to_base(J)
        self.q = q
        #: the virtual model's γ that H (``data.M``) and its factor were computed at (nan without a virtual model)
        self.gamma = self.virtual.gamma if self.virtual is not None else math.nan
        self._sv: np.ndarray | None = None
        self._svd: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._kappa: float | None = None
        self._H: np.ndarray | None = None
        self._Hinv: np.ndarray | None = None
        return self

    def refactor(self) -> Configuration:
        """H(q) and its Cholesky factor again after the virtual model's γ changed (its light links' inertia,
        eq. 13): CRBA and the factorization at the same q. The kinematics are γ's no concern — ``pose``,
        ``jacobian`` and J's SVD and singular values stay as :meth:`update` left them (the same bits a new
        update would give: CRBA refills the joint Jacobians from q alone)."""
        if self.virtual is not None:
            m, d = self.model, self.data
            pin.crba(m, d, self.q, pin.Convention.WORLD)
            pin.cholesky.decompose(m, d)
            self.gamma = self.virtual.gamma
            self._kappa = self._H = self._Hinv = None
        return self

    # ---------------------------------------------------------------- frames
    def to_base(self, J_world: np.ndarray) -> np.ndarray:
        """Re-express a world-aligned 6×N Jacobian (or twist block) in the base frame."""
        if self._Rt is None:
            return J_world
        return np.vstack((self._Rt @ J_world[:3], self._Rt @ J_world[3:]))

    @property
    def dof(self) -> int:
        return self.model.nv

    @property
    def rotation(self) -> np.ndarray:
        """Orientation of the tip in the base frame (3×3)."""
        return self.pose[:3, :3]

    @property
    def position(self) -> np.ndarray:
        """Position of the tip origin in the base frame (m)."""
        return self.pose[:3, 3]

    def twist(self, qd: np.ndarray) -> np.ndarray:
        """Tip twist [v; ω] = J q̇ in the base frame (seed eq. 3), m/s and rad/s."""
        return self.jacobian.dot(qd)  # ndarray.dot: half the dispatch cost of @ for small arrays

    # ---------------------------------------------------------------- dynamics (virtual model)
    @property
    def inertia(self) -> np.ndarray:
        """H(q), the virtual joint-space inertia (N×N, symmetric; CRBA fills its upper triangle)."""
        self._need_virtual()
        if self._H is None:
            self._H = mirror_upper(self.data.M, self._lower)
        return self._H

    @property
    def inertia_inverse(self) -> np.ndarray:
        """H⁻¹(q) (N×N) from the stored Cholesky factor."""
        self._need_virtual()
        if self._Hinv is None:
            self._Hinv = pin.cholesky.computeMinv(self.model, self.data)
        return self._Hinv

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """H⁻¹(q) rhs by the stored Cholesky factor (two triangular solves, no inverse formed)."""
        self._need_virtual()
        return pin.cholesky.solve(self.model, self.data, rhs)

    def _need_virtual(self) -> VirtualModel:
        if self.virtual is None:
            raise ModelError("this configuration has no virtual model (pass virtual=...)")
        return self.virtual

    def acceleration(self, wrench: np.ndarray, tau: np.ndarray | None = None,
                     bias: np.ndarray | None = None) -> np.ndarray:
        """Seed eq. 9 solved for q̈ with the stored factor: q̈ = H⁻¹(Jᵀ f + τ − b).

        f = [F; τ] (N, N·m) at the tip origin in the base frame; τ an extra joint load (N·m);
        b = C(q, q̇)q̇ + G(q) from :meth:`bias` (omitted: eq. 10, q̈ = H⁻¹ Jᵀ f).
        """
        rhs = self.jacobian.T.dot(wrench)
        if tau is not None:
            rhs = rhs + tau
        if bias is not None:
            rhs = rhs - bias
        return self.solve(rhs)

    def bias(self, qd: np.ndarray) -> np.ndarray:
        """C(q, q̇)q̇ + G(q) of the virtual model (N·m) by RNEA with q̈ = 0 (seed eq. 9).

        Runs on a separate data so the stored H and J stay valid.
        """
        vm = self._need_virtual()
        return pin.rnea(vm.model, vm.data, self.q, qd, np.zeros(self.dof))

    # ---------------------------------------------------------------- telemetry, lazily
    @property
    def svd(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The thin SVD of J, (U, σ descending, Vᵀ) (fdcontrol.model.linalg.svd_jacobi: by Jacobi rotations,
        compiled, LAPACK's without numba; computed on first use per update, then shared: the γ schedule and the
        path speed limit read the same decomposition)."""
        if self._svd is None:
            self._svd = svd_jacobi(self.jacobian)
        return self._svd

    def known_svd(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """:attr:`svd` if something asked for it since the last update, else None (never computes it)."""
        return self._svd

    @property
    def singular_values(self) -> np.ndarray:
        """Singular values of J, descending (computed on first use per update)."""
        if self._sv is None:
            self._sv = svdvals(self.jacobian)  # np.linalg.svd(J, compute_uv=False), the same bits
        return self._sv

    @property
    def sigma_min(self) -> float:
        """σmin(J): distance to a singularity (m/rad-mixed units of J)."""
        return float(self.singular_values[-1])

    @property
    def manipulability(self) -> float:
        """Yoshikawa w = √det(J Jᵀ), the product of J's singular values."""
        return float(np.prod(self.singular_values))

    @property
    def kappa_h(self) -> float:
        """κ(H) = λmax/λmin of the virtual inertia (nan without a virtual model)."""
        if self.virtual is None:
            return math.nan
        if self._kappa is None:
            ev = eigvalsh(self.inertia)  # np.linalg.eigvalsh, the same bits
            self._kappa = float(ev[-1] / ev[0]) if ev[0] > 0 else math.inf
        return self._kappa
