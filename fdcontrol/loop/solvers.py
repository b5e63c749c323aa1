"""Mapping-driven solvers: one control cycle from a Cartesian control signal to joint references.

Every solver has ``step(q_measured, qd_state, wrench, dt, tau=None, config=None) -> (q_ref, qd_ref)``;
q̇ is the virtual velocity carried across cycles (the caller feeds back the limited q̇_ref),
``tau`` an optional extra joint torque in the virtual model (N·m; acceleration solvers only) and
``config`` an optional :class:`~fdcontrol.model.configuration.Configuration` already updated at
q_measured: where the solver evaluates the model at exactly that q it reads J and H⁻¹ from it
instead of running CRBA again (the loop updates one per cycle; without it the solver computes
its own, to the same result within rounding).
The solver family of a mapping is its ``solver`` attribute, the name of a solver registered in
``SOLVERS`` (a registry like the mappings' and the laws'; a plugin may add one). Every solver is a
:class:`Solver`: the loop reads its optional parts (``virtual``, ``constraints``,
``last_converged``) as typed attributes with defaults, never by probing.

* ``ForwardDynamicsSolver`` — seed eq. 10 with damping:  q̈ = H⁻¹ (Jᵀ f + τ − D q̇ − C q̇) − c q̇,
  integrated by any integrator in ``substeps`` virtual sub-steps. The Coriolis and
  centrifugal terms C(q, q̇)q̇ are kept by default: eq. 10 drops them for a system at rest,
  but the loop carries q̇ across cycles, and without them a joint velocity set up in one
  configuration keeps being applied as the arm moves — the tip curves away from the
  pushed direction ("drift on unforced axes"). Measured on the simulated UR10 pushed along
  +x for 0.5 s: lateral/forward 5.5 % without C, 0.6 % with it.
* ``TransposeSolver`` — Wolovich & Elliott (seed eq. 6):  q̈ = Jᵀ f + τ − D q̇ − c q̇.
* ``VelocitySolver`` — velocity-resolved J⁻¹ / DLS / SDLS:  q̇ = M(q) f / c (f read as a
  twist: the same steady-state admittance 1/c as the acceleration solvers).

Damping: ``decay`` c (1/s) is mass-proportional (Rayleigh) damping, D_eff = D + c·H, so a
constant wrench settles at q̇ = H⁻¹Jᵀf / c — FD's decoupled map, ẋ ≈ f/(c·m_e). It replaces
the FZI controller's hidden per-cycle 0.9 velocity decay with a rate-independent parameter.
``joint_damping`` D (N·m·s/rad, default 0) is plain joint-space viscous damping.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Literal

import numpy as np
import pinocchio as pin

from fdcontrol.loop.integrators import Integrator, SemiImplicitEuler
from fdcontrol.mappings import ForwardDynamics, Mapping
from fdcontrol.model.configuration import Configuration
from fdcontrol.model.constraints import (
    JointLimitConstraints,
    LockedDynamics,
    _locked,
    clamp,
    inset_limits,
    locked_acceleration,
    locked_acceleration_lapack,
)
from fdcontrol.model.linalg import _symmetric, clip_into, compiled_entry
from fdcontrol.model.virtual import REGULAR_SIGMA, VirtualModel
from fdcontrol.params import Param, declare
from fdcontrol.registry import Registry

_F64 = np.dtype(np.float64)
_REGULAR2 = REGULAR_SIGMA * REGULAR_SIGMA  # sigma_min_above(J, REGULAR_SIGMA)'s shift s²
DEFAULT_DECAY = 10.0  # 1/s: time constant 0.1 s; 10 N on the 1 kg tip → 1 m/s steady state
JointLimitMode = Literal["constraints", "clamp", "none"]

#: the solvers' parameters, declared once (fdcontrol.params)
PARAMS = declare(
    "solver",
    Param("decay", "float", DEFAULT_DECAY, "velocity decay c: damping D = c·H, so a constant wrench settles at "
          "q̇ = H⁻¹Jᵀf/c", "1/s", policy="holding", gt=0, le=1000),
    Param("substeps", "int", 1, "virtual integration sub-steps per cycle", ge=1, le=64),
    Param("coriolis", "bool", True, "keep C(q, q̇)q̇ of the virtual model in the solver"),
    Param("joint_limits", "choice", "constraints", "the virtual model at a joint limit: locked-joint dynamics "
          "(constraints), clamping, or none", policy="holding", choices=("constraints", "clamp", "none")),
)


class Solver(ABC):
    """One control cycle of a mapping: ``step`` from (q, q̇, f_c) to (q_ref, q̇_ref).

    Optional parts, with their defaults (a solver overrides what it has):

    * ``virtual`` — the FD virtual model; the loop builds its per-cycle Configuration on it
      (H, H⁻¹ and the null-space loads need it),
    * ``constraints`` — the virtual joint limits (published as ``virtual_joint_limit``),
    * ``last_converged`` — every virtual sub-step of the last step met its integrator's tolerance,
    * ``checked`` — the q̇ the last step returned when the step itself found it finite (the sum of its entries
      finite: :func:`fdcontrol.model.spatial.finite`'s test), else None: the loop's solver stage then skips that test;
      ``checked_wrench`` — the wrench that step was given when that q̇ being finite shows the wrench finite too (a
      NaN or an infinity in f makes every entry of Jᵀf, and so of that q̇, not finite), else None: the solver stage
      then skips its test of the wrench as well.

    ``build`` makes a solver from the loop's common options (:func:`make_solver`); each solver
    takes the options it uses.
    """

    mapping: Mapping
    virtual: VirtualModel | None = None
    constraints: JointLimitConstraints | None = None
    last_converged: bool = True
    checked: np.ndarray | None = None
    checked_wrench: np.ndarray | None = None

    @abstractmethod
    def step(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, dt: float,
             tau: np.ndarray | None = None, config: Configuration | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        """``config``: the cycle's Configuration, updated at this very ``q`` (or None)."""

    @classmethod
    def build(cls, mapping: Mapping, integrator: Integrator | None = None, **options: Any) -> Solver:
        """The solver for `mapping` from :func:`make_solver`'s options (those this solver takes)."""
        raise NotImplementedError(f"{cls.__name__} does not say how to build it (Solver.build)")


SOLVERS: Registry[Solver] = Registry("solver")


def _check_damping(decay: float, joint_damping: float | np.ndarray, dof: int) -> tuple[float, np.ndarray]:
    if not math.isfinite(decay) or decay < 0:
        raise ValueError(f"decay must be finite and >= 0, got {decay!r}")
    D = np.broadcast_to(np.asarray(joint_damping, dtype=float), (dof,)).copy()
    if not np.all(np.isfinite(D)) or np.any(D < 0):
        raise ValueError("joint_damping must be finite and >= 0")
    return float(decay), D


class _AccelerationSolver(Solver):
    """Shared integration for solvers that produce q̈. ``last_converged``: every sub-step met
    the integrator's error tolerance (always True for fixed-step integrators)."""

    def __init__(self, mapping: Mapping, integrator: Integrator | None, decay: float,
                 joint_damping: float | np.ndarray, substeps: int) -> None:
        self.mapping = mapping
        self.integrator = integrator or SemiImplicitEuler()
        self.decay, self.joint_damping = _check_damping(decay, joint_damping, mapping.robot.dof)
        if substeps < 1:
            raise ValueError("substeps must be >= 1")
        self.substeps = int(substeps)
        self.last_converged = True
        self._config: Configuration | None = None  # the caller's, valid at its q during one step

    def _at(self, q: np.ndarray) -> Configuration | None:
        """The caller's configuration when `q` is the very array it was updated at, else None."""
        c = self._config
        return c if c is not None and q is c.q else None

    def accel(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, tau: np.ndarray | None = None
              ) -> np.ndarray:
        raise NotImplementedError

    def before_substep(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, tau: np.ndarray | None
                       ) -> tuple[np.ndarray, np.ndarray]:
        """Hook before each virtual sub-step (FD: decide the active set, project onto it)."""
        return q, qd

    def after_substep(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hook after each virtual sub-step (FD: joint-limit projection or clamping)."""
        return q, qd

    def step(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, dt: float,
             tau: np.ndarray | None = None, config: Configuration | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        def a(qq: np.ndarray, vv: np.ndarray) -> np.ndarray:
            return self.accel(qq, vv, wrench, tau)

        h = dt / self.substeps
        converged = True
        self._config = config if config is not None and config.q is q else None
        try:
            for _ in range(self.substeps):
                q, qd = self.before_substep(q, qd, wrench, tau)
                q, qd = self.after_substep(*self.integrator.step(a, q, qd, h))
                converged &= self.integrator.last_converged
        finally:
            self._config = None
        self.last_converged = converged
        return q, qd


@SOLVERS.register("forward_dynamics")
class ForwardDynamicsSolver(_AccelerationSolver):
    """Seed eq. 10 with damping: q̈ = H⁻¹(Jᵀf + τ − D q̇ − C q̇) − c q̇ on the mapping's virtual model.

    Joint limits (``joint_limits``): "constraints" — locked-joint dynamics by the mapping's FD
    algorithm with the active set decided once per sub-step (``fdcontrol.model.constraints``);
    "clamp" — the reference controller's clamping; "none". ``limit_inset`` (rad, per joint or
    scalar) moves the virtual limits inside the robot's, so that in the loop they act before
    the safety envelope does (``fdcontrol.model.constraints.braking_inset``).
    """

    def __init__(self, mapping: ForwardDynamics, integrator: Integrator | None = None,
                 decay: float = DEFAULT_DECAY, joint_damping: float | np.ndarray = 0.0,
                 substeps: int = 1, coriolis: bool = True, joint_limits: JointLimitMode = "constraints",
                 limit_inset: float | np.ndarray = 0.0) -> None:
        super().__init__(mapping, integrator, decay, joint_damping, substeps)
        if joint_limits not in ("constraints", "clamp", "none"):
            raise ValueError(f"joint_limits must be 'constraints', 'clamp' or 'none', got {joint_limits!r}")
        self.virtual = vm = mapping.virtual  # one virtual model per solver: the mapping's
        self.algorithm = mapping.algorithm
        self.coriolis, self.joint_limits = coriolis, joint_limits
        lim = mapping.robot.limits
        self.constraints = JointLimitConstraints(*inset_limits(lim.lower, lim.upper, limit_inset))
        self._locked: np.ndarray | None = None  # the active set of the current sub-step
        #: (q, q̇ bytes, τ, γ, load) of before_substep's joint_load: accel reuses it at that very q, the same
        #: q̇ bits, τ and γ (one Coriolis pass per sub-step, not two)
        self._load: tuple[np.ndarray, bytes, np.ndarray | None, float, np.ndarray] | None = None
        #: (q, γ, H, J) of the sub-step's equation (before_substep, Cholesky): accel reuses it at that q
        self._equation: tuple[np.ndarray, float, np.ndarray, np.ndarray] | None = None
        self._zero = np.zeros(vm.dof)
        self._damped = bool(np.any(self.joint_damping))
        self.locked_solve = LockedDynamics(vm, self.algorithm)  # (q, f, τ, locked) → x, by the algorithm
        # a shared Configuration holds the Cholesky H⁻¹ of a gravity-free model: usable as is
        # when that is what the mapping's algorithm computes (ABA and QR keep their own path)
        self._fast = self.algorithm == "cholesky" and not vm.gravity
        #: the mapping's schedule and gamma_at are ForwardDynamics' own: step may enter schedule_irregular
        self._irregular = type(mapping).schedule is ForwardDynamics.schedule \
            and type(mapping).gamma_at is ForwardDynamics.gamma_at
        #: (data, U, D, its subtree sizes): views of the Cholesky factor in a Configuration's pinocchio data
        self._factor: tuple[pin.Data, np.ndarray, np.ndarray, np.ndarray] | None = None
        #: (constraints, bounds, work, qc, qz) of _euler_limit_compiled (_limit_arrays)
        self._limit_work: tuple[JointLimitConstraints, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    @classmethod
    def build(cls, mapping: Mapping, integrator: Integrator | None = None, *, decay: float = DEFAULT_DECAY,
              joint_damping: float | np.ndarray = 0.0, substeps: int = 1, coriolis: bool = True,
              joint_limits: JointLimitMode = "constraints", limit_inset: float | np.ndarray = 0.0,
              **_: Any) -> ForwardDynamicsSolver:
        if not isinstance(mapping, ForwardDynamics):
            raise ValueError(f"the forward-dynamics solver needs an FD mapping, got {mapping!r}")
        return cls(mapping, integrator, decay, joint_damping, substeps, coriolis, joint_limits, limit_inset)

    def step(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, dt: float,
             tau: np.ndarray | None = None, config: Configuration | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        # γ scheduled at this q (the mapping's gamma_schedule): the virtual model and, when γ moved,
        # the cycle's Cholesky factor follow; q̇ is carried as is (the mapping's `schedule`)
        c, m = self.constraints, self.mapping
        if (self._fast and config is not None and config.q is q and self.substeps == 1
                and type(self.integrator) is SemiImplicitEuler and self.joint_limits == "constraints"):
            if _pre is not None and _fd_in is not None and type(qd) is np.ndarray and qd.dtype == _F64 \
                    and qd.ndim == 1 and config.virtual is m.virtual \
                    and type(q) is np.ndarray and q.dtype is _F64 and q.ndim == 1 \
                    and config.jacobian.dtype is _F64 and config.jacobian.ndim == 2:
                # the schedule's test of J (σ_min(J) > σ_reg: sigma_min_above's Cholesky test on the Configuration's
                # J, as gamma_at runs it), c.inside(q) and whether q̇ has a non-zero entry in one compiled call
                # — neither where the schedule ran on this very update of the Configuration already (the loop's
                # gamma_schedule stage, before joint loads: its J is that update's own array; the schedule would
                # return at once); called without numba's dispatch (_pre_call): every argument's type is certain here
                J = config.jacobian
                scheduled = m.scheduled and m.scheduled_jacobian is not J  # type: ignore[attr-defined]
                code = _pre_call(J, _REGULAR2, bool(scheduled), q, qd, c._tol_bounds)
                if scheduled and not (code & 1 and m.schedule_past()):  # type: ignore[attr-defined]
                    # (γ is gamma_straight there and stays: nothing to schedule; else the schedule, told the test's
                    # answer — where J is not past every band by its path for that answer when the mapping's
                    # schedule is ForwardDynamics' own: schedule_irregular, the same γ and state)
                    if code & 1 or not self._irregular:
                        m.schedule(q, config, bool(code & 1))  # type: ignore[attr-defined]
                    else:
                        m.schedule_irregular(q, config)  # type: ignore[attr-defined]
                if code & 2:
                    return self._euler_inside(config, q, qd, wrench, dt, tau, bool(code & 4))
            else:
                m.schedule(q, config)  # type: ignore[attr-defined]
                if c.inside(q):
                    return self._euler_inside(config, q, qd, wrench, dt, tau)
            if _euler is not None and type(self.locked_solve) is LockedDynamics and type(qd) is np.ndarray \
                    and qd.dtype == _F64 == q.dtype and qd.ndim == 1:
                return self._euler_limit(q, qd, wrench, dt, tau, config)
        else:
            m.schedule(q, config)  # type: ignore[attr-defined]
        return super().step(q, qd, wrench, dt, tau, config)

    def _euler_limit(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, dt: float,
                     tau: np.ndarray | None, conf: Configuration | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The loop's case of :meth:`step` at a virtual limit — one semi-implicit Euler step of eq. 10 from a q at
        or past a limit, Cholesky, no gravity — as the general path runs it (before_substep, accel, the Euler step,
        after_substep) without its hooks' repeated work: γ is scheduled at q already (step), H and J are the
        cycle's Configuration's when the clip leaves q's bits as they were (:meth:`_limit_equation`), the Coriolis
        load is taken once when zeroing the locked q̇ leaves its bits as they were, the free dynamics reuse the
        step's H, and with a joint locked − c q̇, the Euler step and the projection are one compiled call (the same
        float operations in the same order: the same bits, tests/test_loop_configuration.py,
        tests/test_solver_limit_path.py)."""
        c = self.constraints
        self._equation, self._load, self.last_converged, self.checked = None, None, True, None
        self.checked_wrench = None
        if _limit is not None and qd.shape == q.shape:
            done = self._euler_limit_compiled(q, qd, wrench, dt, tau, conf)
            if done is not None:
                return done
        # the Python form (without numba; and where eq. 7's compiled solve declines: LAPACK's)
        q = _clip(q, c.lower, c.upper)  # np.clip's values (a NaN stays NaN, a bound's zero sign as np.clip)
        t = self.joint_load(q, qd, tau)
        M, jtf, data = self._limit_equation(q, np.asarray(wrench, dtype=float), conf)
        H = np.empty(M.shape)  # symmetric_upper(M) for pinocchio's square float64 M: its compiled call
        _symmetric(M, H)
        b = jtf + t  # the equation's b = Jᵀf + τ − D q̇ − C q̇ (equation_and_jacobian's)
        n = qd.shape[0]
        last: list[Any] = [None, None]  # the last trial's (active set, x)

        def solve(lk: np.ndarray) -> np.ndarray:
            last[0], last[1] = lk, _solve_locked(H, b, lk)
            return last[1]

        # decide's compiled form (its type checks hold here: q, q̇ float64 vectors, H and b float64 of the model's
        # size) on q̇ of q's length; it sets the active set (``engaged``: any joint locked)
        locked = c._decide_compiled(q, qd, solve, H, b, self.decay) if qd.shape == q.shape \
            else c.decide(q, qd, solve, H, b, self.decay)
        self._locked = locked
        if not c.engaged:
            return self._limit_free(q, qd, b, dt, data, conf)
        qz = np.empty(n)
        if _zero_locked(qd, locked, qz):  # np.where(locked, 0.0, qd); a locked q̇ not +0.0: the load at qz
            x = _solve_locked(H, jtf + self.joint_load(q, qz, tau), locked)
        elif last[0] is locked or (last[0] is not None and bool((last[0] == locked).all())):
            x = last[1]  # decide's last trial solved this very equation: b = Jᵀf + t, the same active set
        else:
            x = _solve_locked(H, b, locked)
        # the Euler step and c.project (engaged: a joint is locked) in one call, which also runs the solver stage's
        # test of q̇ (``checked``)
        q1, qd1 = np.empty(n), np.empty(n)
        fin = _euler_project(q, qz, x, self.decay, float(dt), c.lower, c.upper, c._lo_tol, c._up_tol, locked, q1, qd1)
        self.checked = qd1 if fin else None
        return q1, qd1

    def _euler_limit_compiled(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, dt: float,
                              tau: np.ndarray | None, conf: Configuration | None
                              ) -> tuple[np.ndarray, np.ndarray] | None:
        """_euler_limit's form below in two compiled calls around pinocchio's: the clip with the q test
        (_clip_sum_kernel), the load (RNEA), CRBA and Jᵀf (:meth:`_limit_equation`), then H, b, decide, the locked
        q̇ zeroed, eq. 7, the Euler step and the projection in one call (_limit_kernel; where a locked q̇ was not
        +0.0, the load at the zeroed q̇ and _limit_zeroed_kernel) — the form's calls in its order, the same bits
        (tests/test_solver_limit_path.py). None where eq. 7's compiled solve declined (the caller runs the form)."""
        c, vm = self.constraints, self.virtual
        bounds, work, qc, qz = self._limit_arrays(c)
        fin = _clip_sum(q, bounds, qc)  # np.clip's values into qc; whether the sum of its entries is finite
        parts = self._load_parts(qc, qd, tau)
        if parts is None:
            return None
        a, s, sub = parts
        if not fin:  # a NaN or an infinity in the clipped q: check_q's error (a finite q whose sum overflows:
            vm.robot.check_q(qc)  # check_q decides, as for equation_and_jacobian)
        M, jtf, data = self._limit_equation(qc, np.asarray(wrench, dtype=float), conf, True)
        n = q.shape[0]
        locked, q1, qd1 = np.empty(n, np.bool_), np.empty(n), np.empty(n)
        code = _limit(M, jtf, a, s, sub, qc, qd, self.decay, float(dt), bounds, work, locked, q1, qd1)
        if code == 4:  # a locked q̇ not +0.0: the load at the zeroed q̇
            parts = self._load_parts(qc, qz, tau)
            if parts is None:
                return None
            a, s, sub = parts
            code = _limit_zeroed(work, jtf, a, s, sub, locked, qc, self.decay, float(dt), bounds, q1, qd1)
        if code & 1:  # a joint locked: decide's set_active, and the solver stage's test of q̇ (``checked``)
            c.active, c.engaged, self._locked = locked, True, locked
            self.checked = qd1 if code & 2 else None
            return q1, qd1
        if code == 0:  # no joint locked (none at a limit, or every one moving inward): decide's set_active
            c.set_active(locked)
            self._locked = locked
            return self._limit_free(qc, qd, jtf + (a - s if sub else a), dt, data, conf)
        return None

    def _load_parts(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None
                    ) -> tuple[np.ndarray, np.ndarray, bool] | None:
        """(a, s, sub): :meth:`joint_load` as a − s (``sub``) or a — its τ and C(q, q̇)q̇ apart where it would
        subtract them (a float64 τ, no joint damping, q̇ not zero): the kernels form τ − C q̇ themselves. None where
        the load is not a float64 vector of q's length (the Python form takes it as it is)."""
        if tau is not None and self.coriolis and not self._damped and type(tau) is np.ndarray \
                and tau.dtype == _F64 and tau.shape == q.shape and any(qd.tolist()):
            vm = self.virtual
            return tau, pin.rnea(vm.model, vm.data, q, qd, self._zero), True
        t = self.joint_load(q, qd, tau)
        if type(t) is not np.ndarray or t.dtype != _F64 or t.shape != q.shape:
            return None
        return t, t, False

    def _limit_arrays(self, c: JointLimitConstraints) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(bounds, work, qc, qz) of :meth:`_euler_limit_compiled`: the limits' rows (lower, upper, lower + tol,
        upper − tol) and its work rows (H, x, the zeroed q̇, the clipped q: read within its call only, never
        handed out), qz and qc views of the last two; made once per constraints object."""
        arr = self._limit_work
        if arr is None or arr[0] is not c:
            n = c.lower.shape[0]
            bounds = np.array([c.lower, c.upper, c._lo_tol, c._up_tol])
            work = np.zeros((n + 3, n))
            arr = self._limit_work = (c, bounds, work, work[n + 2], work[n + 1])
        return arr[1], arr[2], arr[3], arr[4]

    def _limit_free(self, q: np.ndarray, qd: np.ndarray, b: np.ndarray, dt: float, data: pin.Data,
                    conf: Configuration | None) -> tuple[np.ndarray, np.ndarray]:
        """_euler_limit where no joint is locked (at a limit, moving inward): the free dynamics at the clipped q, as
        accel runs them (vm.acceleration: CRBA at this q, rhs = τ + Jᵀf, Cholesky, solve) by the factor of the H
        just formed (`data`'s CRBA at this q and γ; t + Jᵀf and Jᵀf + t are the same bits), then c.project."""
        m = self.virtual.model
        if data is not (conf.data if conf is not None else None):
            pin.cholesky.decompose(m, data)
        qd1 = qd + dt * (pin.cholesky.solve(m, data, b) - self.decay * qd)
        return self.constraints.project(q + dt * qd1, qd1)

    def _limit_equation(self, q: np.ndarray, f: np.ndarray, conf: Configuration | None, checked: bool = False
                        ) -> tuple[np.ndarray, np.ndarray, pin.Data]:
        """CRBA's M (its upper triangle: H = symmetric_upper(M)) and Jᵀf of ``virtual.equation_and_jacobian(q, f,
        None, t)`` (no gravity, no Coriolis term: its b is Jᵀf + t, the same operations) and the pinocchio data
        whose CRBA gave M. At the cycle's Configuration's
        very q bits and γ, on a base that is the world (both forms take pinocchio's J as it is), H and J are the
        Configuration's (one on this very virtual model): its CRBA ran on the same model with the same q and γ (the
        same bits; tests/test_solver_limit_path.py) — no second CRBA. Else CRBA here, on the virtual model's data;
        a q that is not finite raises as check_q does (``checked``: the caller tested it)."""
        vm = self.virtual
        if not checked and not math.isfinite(q.dot(q)):  # a NaN or an infinity in q: check_q's error (a finite
            q = vm.robot.check_q(q)  # q whose q·q overflows: check_q decides, as it does for equation_and_jacobian)
        if conf is not None and conf.virtual is vm and conf.gamma == vm.gamma and conf._Rt is None \
                and vm.robot._world_is_base and conf.q.tobytes() == q.tobytes():
            data = conf.data
            J = conf.jacobian
        else:
            data = vm.data
            J = vm._crba_and_jacobian(q)
        return data.M, J.T @ f, data

    def _euler_inside(self, conf: Configuration, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, dt: float,
                      tau: np.ndarray | None, moving: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The loop's common case of :meth:`step` — one semi-implicit Euler step of eq. 10 from a q
        strictly inside the virtual limits, by the cycle's Cholesky factor — without the general
        path's hooks (no active set to decide; the projection only where the step leaves the limits).
        The same numbers as the general path (tests/test_loop_configuration.py)."""
        c = self.constraints
        if c.engaged:
            c.release()
        self._locked, self.last_converged = None, True
        # (`moving` given: step's compiled tests ran on this q̇, a float64 vector, and _fd_in is there)
        if moving is None and (_fd_in is None or type(qd) is not np.ndarray or qd.dtype != _F64 or qd.ndim != 1):
            qd1 = qd + dt * self._free_accel(conf, qd, wrench, self.joint_load(q, qd, tau))
            return c.project(q + dt * qd1, qd1)
        # rhs = Jᵀf + t, H⁻¹ rhs by the cycle's factor (pinocchio's LDLᵀ solve, its operations in its order), − c q̇,
        # the Euler step and the projection's test for a q̇ strictly inside the limits (project's own test, on the
        # same bounds) in one compiled call: the same float operations in the same order as _free_accel and
        # SemiImplicitEuler, the same bits (tests/test_loop_configuration.py, tests/test_solver_fused.py)
        jtf = conf.jacobian.T.dot(wrench)
        sub = False
        # the kernel without numba's dispatch (_fd_in_call) where every argument's type is certain: q, q̇ and J float64
        # arrays of their dimensions (`moving` given: step checked them), Jᵀf one float64 vector, the load pinocchio's
        # (or the zero vector) — else by the dispatcher, which checks them
        sure = moving is not None and jtf.dtype is _F64 and jtf.ndim == 1
        if tau is None and not self._damped:  # t = −C(q, q̇)q̇ alone: Jᵀf + (−C q̇) is Jᵀf − C q̇ (IEEE: the same bits)
            if self.coriolis and (any(qd.tolist()) if moving is None else moving):
                vm = self.virtual
                load, sub = pin.rnea(vm.model, vm.data, q, qd, self._zero), True
            else:
                load = self._zero  # as joint_load's zero load (a −0.0 of Jᵀf becomes +0.0)
        else:
            load = self.joint_load(q, qd, tau)
            sure = False
        fac = self._factor
        d = conf.data
        if fac is None or fac[0] is not d:  # views of the factor pinocchio keeps in the Configuration's data
            fac = self._factor = (d, d.U, d.D, np.array(d.nvSubtree_fromRow, dtype=np.int64))
        n = q.shape[0]
        q1, qd1 = np.empty(n), np.empty(n)
        code = (_fd_in_call if sure else _fd_in)(fac[1], fac[2], fac[3], jtf, load, sub, q, qd, self.decay, float(dt),
                                                 c._tol_bounds, q1, qd1)
        if code & 1 and not c.engaged:
            # q̇ finite (the sum of its entries, in order): then so is every entry of f — a NaN or an infinity in f
            # makes every entry of Jᵀf not finite (NaN·0 = ∞·0 = NaN), and the kernel's every operation on an entry
            # that is not finite (±, ×, ÷ by D, the Euler step) keeps it so: the solver stage need not test f again
            if code & 2:
                self.checked, self.checked_wrench = qd1, wrench
            else:
                self.checked = self.checked_wrench = None
            return q1, qd1
        return c.project(q1, qd1)

    def _free_accel(self, conf: Configuration, qd: np.ndarray, wrench: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Eq. 10 with damping, no joint locked: H⁻¹(Jᵀf + t) − c q̇ by the cycle's Cholesky factor."""
        return conf.solve(conf.jacobian.T.dot(wrench) + t) - self.decay * qd

    def joint_load(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray:
        """τ − D q̇ − C(q, q̇) q̇ (N·m): every joint-space load on the virtual model."""
        t = tau
        if self._damped:
            t = -self.joint_damping * qd if t is None else t - self.joint_damping * qd
        if self.coriolis and any(np.asarray(qd).tolist()):  # floats: ~5× cheaper than ndarray.any()
            vm = self.virtual
            c = pin.rnea(vm.model, vm.data, q, qd, self._zero)
            t = -c if t is None else t - c
        return self._zero if t is None else t

    def _joint_load_at(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray:
        """:meth:`joint_load`, or before_substep's when it was taken at this very q with the same q̇ bits, τ and γ
        (a deterministic function of those: the same result)."""
        ld = self._load
        if ld is not None and ld[0] is q and ld[2] is tau and ld[3] == self.virtual.gamma \
                and type(qd) is np.ndarray and qd.dtype == _F64 and qd.tobytes() == ld[1]:
            return ld[4]
        return self.joint_load(q, qd, tau)

    def accel(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, tau: np.ndarray | None = None
              ) -> np.ndarray:
        t = self._joint_load_at(q, qd, tau)
        locked = self._locked
        if locked is None or not locked.any():
            conf = self._at(q) if self._fast else None
            if conf is not None:  # the cycle's factor (Cholesky, no gravity)
                return self._free_accel(conf, qd, wrench, t)
            return self.virtual.acceleration(q, wrench, None, t, self.algorithm) - self.decay * qd
        eq = self._equation
        if eq is not None and eq[0] is q and eq[1] == self.virtual.gamma:
            # H and J of this very q and γ (before_substep's): the equation LockedDynamics forms, without CRBA
            x = locked_acceleration(eq[2], eq[3].T @ np.asarray(wrench, dtype=float) + t, locked)
        else:
            x = self.locked_solve(q, wrench, t, locked)
        return x - self.decay * np.where(locked, 0.0, qd)

    def before_substep(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, tau: np.ndarray | None
                       ) -> tuple[np.ndarray, np.ndarray]:
        """Schedule γ at this sub-step's q, project onto the limits, decide the active set, zero locked q̇."""
        self.mapping.schedule(q, self._at(q))  # type: ignore[attr-defined]
        self._locked, self._equation, self._load = None, None, None
        if self.joint_limits != "constraints":
            return q, qd
        c = self.constraints
        if c.inside(q):
            c.release()
            return q, qd
        q = np.clip(q, c.lower, c.upper)
        t = self.joint_load(q, qd, tau)
        vm = self.virtual
        if type(qd) is np.ndarray and qd.dtype == _F64:
            self._load = (q, qd.tobytes(), tau, vm.gamma, t)
        H, b, J = vm.equation_and_jacobian(q, wrench, None, t)
        if type(self.locked_solve) is LockedDynamics and self.algorithm == "cholesky":  # its own path, on the (H, b)
            # just computed at this q and γ (no CRBA per trial of the active set, nor for the step's q̈)
            self._equation = None if vm.gravity else (q, vm.gamma, H, J)

            def solve(lk: np.ndarray) -> np.ndarray:
                return locked_acceleration(H, b, lk)
        else:
            def solve(lk: np.ndarray) -> np.ndarray:
                return self.locked_solve(q, wrench, t, lk)
        locked = c.decide(q, qd, solve, H, b, self.decay)
        self._locked = locked
        if locked.any():
            qd = np.where(locked, 0.0, qd)
        return q, qd

    def after_substep(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Project onto the limits (seed 002), or clamp like the reference controller."""
        c = self.constraints
        if self.joint_limits == "constraints":
            return c.project(q, qd)
        if self.joint_limits == "clamp":
            return clamp(q, qd, c.lower, c.upper)
        return q, qd


@SOLVERS.register("transpose")
class TransposeSolver(_AccelerationSolver):
    """Wolovich & Elliott (seed eq. 6, K = I): q̈ = Jᵀ f + τ − D q̇ − c q̇ (unit joint inertia)."""

    @classmethod
    def build(cls, mapping: Mapping, integrator: Integrator | None = None, *, decay: float = DEFAULT_DECAY,
              joint_damping: float | np.ndarray = 0.0, substeps: int = 1, **_: Any) -> TransposeSolver:
        return cls(mapping, integrator, decay, joint_damping, substeps)

    def accel(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, tau: np.ndarray | None = None
              ) -> np.ndarray:
        conf = self._at(q)
        J = conf.jacobian if conf is not None else self.mapping.robot.jacobian(q)
        a = J.T @ wrench - (self.joint_damping + self.decay) * qd
        return a if tau is None else a + tau


@SOLVERS.register("velocity")
class VelocitySolver(Solver):
    """Velocity-resolved: q̇ = M(q) f / c and q⁺ = q + dt q̇, for J⁻¹, DLS and SDLS.

    SDLS runs Buss & Kim's full nonlinear step on the Cartesian displacement the admittance
    asks for over its time constant 1/c, e = ẋ/c with ẋ = f/c, and returns q̇ = Δθ·c: its
    clamps bound the joint change over 1/c (|q̇_j| ≤ γ_max·c), the same at every loop rate
    (the algorithm is positively homogeneous, so this is its per-second form).
    """

    def __init__(self, mapping: Mapping, decay: float = DEFAULT_DECAY) -> None:
        self.mapping = mapping
        if not math.isfinite(decay) or decay <= 0:
            raise ValueError("decay (the twist scale 1/c) must be finite and > 0")
        self.decay = float(decay)
        self.last_converged = True

    @classmethod
    def build(cls, mapping: Mapping, integrator: Integrator | None = None, *, decay: float = DEFAULT_DECAY,
              **_: Any) -> VelocitySolver:
        return cls(mapping, decay)

    def step(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, dt: float,
             tau: np.ndarray | None = None, config: Configuration | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        if tau is not None:
            raise ValueError("a joint torque needs an acceleration-resolved mapping (fd, jt)")
        twist = wrench / self.decay
        conf = config if config is not None and config.q is q else None
        m = self.mapping
        if m.solves_displacement:  # SDLS: the nonlinear step on the displacement over 1/c
            v = (m.solve_at(conf, twist / self.decay) if conf is not None else m.solve(q, twist / self.decay)) \
                * self.decay
        else:  # M from the cycle's J (no second kinematics pass)
            v = (m.joint_space_at(conf) if conf is not None else m.joint_space(q)) @ twist
        return q + dt * v, v


def make_solver(mapping: Mapping, integrator: Integrator | None = None, *,
                decay: float = DEFAULT_DECAY, joint_damping: float | np.ndarray = 0.0,
                substeps: int = 1, coriolis: bool = True, joint_limits: JointLimitMode = "constraints",
                limit_inset: float | np.ndarray = 0.0) -> Solver:
    """The solver that drives `mapping` the way the seed paper compares them: the one registered in
    ``SOLVERS`` under the mapping's ``solver`` name, built from these options (those it takes)."""
    kind = mapping.solver
    if kind not in SOLVERS:
        raise ValueError(f"no solver for mapping {mapping!r} (solver family {kind!r}; "
                         f"expected one of {', '.join(SOLVERS.names())})")
    return SOLVERS.get(kind).build(mapping, integrator, decay=decay, joint_damping=joint_damping,
                                   substeps=substeps, coriolis=coriolis, joint_limits=joint_limits,
                                   limit_inset=limit_inset)


def _solve_locked(H: np.ndarray, b: np.ndarray, locked: np.ndarray) -> np.ndarray:
    """:func:`~fdcontrol.model.constraints.locked_acceleration` for what the FD step at a limit hands it (H and b
    float64 of the model's size, the active set a boolean vector): its compiled call without its checks."""
    x = np.empty(b.shape[0])
    if _locked(H, b, locked, x):
        return x
    return locked_acceleration_lapack(H, b, locked)


def _euler_step(q: np.ndarray, qd: np.ndarray, x: np.ndarray, decay: float, dt: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """q̈ = x − c q̇, q̇⁺ = q̇ + dt q̈, q⁺ = q + dt q̇⁺ per joint (ForwardDynamicsSolver._euler_inside)."""
    n = q.shape[0]
    q1, qd1 = np.empty(n), np.empty(n)
    for i in range(n):
        v = qd[i] + dt * (x[i] - decay * qd[i])
        qd1[i] = v
        q1[i] = q[i] + dt * v
    return q1, qd1


def _step_test_kernel(J: np.ndarray, s2: float, test: bool, q: np.ndarray, qd: np.ndarray,
                      bounds: np.ndarray) -> int:  # pragma: no mutate block
    """ForwardDynamicsSolver.step's tests in one call, as bits: 1 — σ_min(J) > √s2 (sigma_min_above's Cholesky test;
    always set when not ``test``), 2 — every joint of q strictly between ``bounds[0]`` and ``bounds[1]``
    (JointLimitConstraints.inside on its bounds ``_tol_bounds``; not for NaN), 4 — a q̇ entry that is not zero
    (``any(qd.tolist())``: NaN counts)."""
    code = 1 if not test or _shifted_cholesky(J, s2) else 0
    inside = True
    lo, up = bounds[0], bounds[1]
    for i in range(q.shape[0]):
        x = q[i]
        if not (lo[i] < x and x < up[i]):
            inside = False
            break
    if inside:
        code |= 2
    for i in range(qd.shape[0]):
        if qd[i] != 0.0:
            code |= 4
            break
    return code


def _fd_inside_kernel(U: np.ndarray, D: np.ndarray, nvt: np.ndarray, jtf: np.ndarray, load: np.ndarray, sub: bool,
                      q: np.ndarray, qd: np.ndarray, decay: float, dt: float, bounds: np.ndarray,
                      q_out: np.ndarray, qd_out: np.ndarray) -> int:  # pragma: no mutate block
    """ForwardDynamicsSolver._euler_inside's numbers: rhs = Jᵀf − load (``sub``) or Jᵀf + load, x = H⁻¹ rhs as
    ``pinocchio.cholesky.solve`` computes it from the factor H = U D Uᵀ in a pinocchio data (``U``, ``D``,
    ``nvSubtree_fromRow``: x ← U⁻¹x by rows from the last, each row's dot product summed in order; x ← x · D⁻¹
    elementwise, D⁻¹ = 1/D as pinocchio forms it; x ← U⁻ᵀx by columns from the first), then :func:`_euler_step`
    into q_out, qd_out — the same float operations in the same order, so the same bits.
    Returns bits: 1 — every joint of q_out strictly between ``bounds[0]`` and ``bounds[1]``
    (JointLimitConstraints.inside on its bounds ``_tol_bounds``; not for NaN), 2 — the sum of qd_out's entries in
    order finite (fdcontrol.model.spatial.finite's test: a NaN or ±∞ entry, or an overflow, fails it). (Few arguments:
    each costs ~0.1 µs of numba's dispatch.)"""
    n = q.shape[0]
    lo, up = bounds[0], bounds[1]
    x = np.empty(n)
    for i in range(n):
        x[i] = jtf[i] - load[i] if sub else jtf[i] + load[i]
    for k in range(n - 2, -1, -1):  # Uiv
        m = nvt[k] - 1
        s = 0.0
        if m > 0:
            s = U[k, k + 1] * x[k + 1]
            for j in range(k + 2, k + 1 + m):
                s += U[k, j] * x[j]
        x[k] -= s
    for k in range(n):
        x[k] *= 1.0 / D[k]
    for k in range(n - 1):  # Utiv
        v = x[k]
        for j in range(k + 1, k + nvt[k]):
            x[j] -= U[k, j] * v
    inside = True
    total = 0.0
    for i in range(n):
        v = qd[i] + dt * (x[i] - decay * qd[i])
        qd_out[i] = v
        total += v
        y = q[i] + dt * v
        q_out[i] = y
        if not (lo[i] < y and y < up[i]):
            inside = False
    return (1 if inside else 0) | (2 if math.isfinite(total) else 0)


def _euler_project_kernel(q: np.ndarray, qd: np.ndarray, x: np.ndarray, decay: float, dt: float, lower: np.ndarray,
                          upper: np.ndarray, lo_tol: np.ndarray, up_tol: np.ndarray, active: np.ndarray,
                          q_out: np.ndarray, qd_out: np.ndarray) -> bool:  # pragma: no mutate block
    """:func:`_euler_step`, then JointLimitConstraints.project of its (q⁺, q̇⁺) into q_out, qd_out (its compiled
    form, ``_project_kernel``: q⁺ clipped to the limits, q̇⁺ zeroed where the clipped q⁺ is at a limit and q̇⁺
    points out, or the joint is locked) — the same float operations and comparisons in the same order. Returns
    whether the sum of qd_out's entries in order is finite (fdcontrol.model.spatial.finite's test)."""
    total = 0.0
    for i in range(q.shape[0]):
        v = qd[i] + dt * (x[i] - decay * qd[i])
        y = q[i] + dt * v
        if y < lower[i]:
            y = lower[i]
        if y > upper[i]:
            y = upper[i]
        q_out[i] = y
        if (y >= up_tol[i] and v > 0) or (y <= lo_tol[i] and v < 0) or active[i]:
            qd_out[i] = 0.0
        else:
            qd_out[i] = v
        total += qd_out[i]
    return math.isfinite(total)


def _clip_kernel(q: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:  # pragma: no mutate block
    """np.clip(q, lower, upper) for lower ≤ upper: a value equal to a bound kept as it is (its zero's sign), a NaN
    kept (ForwardDynamicsSolver._euler_limit)."""
    out = np.empty(q.shape[0])
    clip_into(q, lower, upper, out)
    return out


def _zero_locked_kernel(qd: np.ndarray, locked: np.ndarray, out: np.ndarray) -> bool:  # pragma: no mutate block
    """out = np.where(locked, 0.0, qd); whether that changed a bit of q̇ (a locked entry not +0.0: −0.0, NaN or
    any other value)."""
    changed = False
    for j in range(qd.shape[0]):
        if locked[j]:
            v = qd[j]
            if v != 0.0 or math.copysign(1.0, v) < 0.0:
                changed = True
            out[j] = 0.0
        else:
            out[j] = qd[j]
    return changed


def _clip_sum_kernel(q: np.ndarray, bounds: np.ndarray, out: np.ndarray) -> bool:  # pragma: no mutate block
    """np.clip(q, lower, upper) into ``out`` (bounds' rows 0 and 1, lower ≤ upper: a value equal to a bound kept as
    it is, a NaN kept, as _clip_kernel); whether the sum of out's entries in order is finite (a NaN or an infinity
    in the clipped q fails it, as does an overflow)."""
    clip_into(q, bounds[0], bounds[1], out)
    total = 0.0
    for j in range(out.shape[0]):
        total += out[j]
    return math.isfinite(total)


def _limit_kernel(M: np.ndarray, jtf: np.ndarray, a: np.ndarray, s: np.ndarray, sub: bool, q: np.ndarray,
                  qd: np.ndarray, decay: float, dt: float, bounds: np.ndarray, work: np.ndarray, locked: np.ndarray,
                  q_out: np.ndarray, qd_out: np.ndarray) -> int:  # pragma: no mutate block
    """ForwardDynamicsSolver._euler_limit's numbers from CRBA's ``M`` at the clipped q, Jᵀf and the joint load
    t = a − s (``sub``: τ − C q̇ as joint_load subtracts it) or a, in one call: H = symmetric_upper(M) into work's
    first rows, b = Jᵀf + t, the active set as JointLimitConstraints.decide decides it (_start_kernel, then per trial
    eq. 7 by _locked_kernel into work's row n and _verdict_kernel: its trials, its order) into ``locked``, q̇ with the
    locked entries zeroed into work's row n + 1 (_zero_locked_kernel), and where that left q̇'s bits as they were the
    last trial's x (or a solve on the final set) through _euler_project_kernel into q_out, qd_out — the calls of the
    Python form, in its order: the same bits. ``bounds``: the rows lower, upper, lower + tol, upper − tol. Returns
    0: no joint locked (the caller runs the free dynamics); 1 | 2·finite: the step is in q_out, qd_out (finite: the
    sum of qd_out's entries); 4: a locked q̇ was not +0.0 (the caller takes the load at the zeroed q̇ and runs
    :func:`_limit_zeroed_kernel`); 8: eq. 7's compiled solve declined (not positive definite or not finite: the
    caller runs the Python form, whose solve falls back to LAPACK's)."""
    n = q.shape[0]
    H, x, qz = work[:n], work[n], work[n + 1]
    lower, upper, lo_tol, up_tol = bounds[0], bounds[1], bounds[2], bounds[3]
    _symmetric(M, H)
    b = np.empty(n)
    for i in range(n):
        b[i] = jtf[i] + (a[i] - s[i] if sub else a[i])
    up, lo = np.empty(n, np.bool_), np.empty(n, np.bool_)
    if not _start(q, qd, lo_tol, up_tol, up, lo, locked):
        return 0
    solved = False
    for _ in range(2 * n + 1):
        if not _locked(H, b, locked, x):
            return 8
        j_rel, p_rel, j_add, p_add = _verdict(H, x, b, locked, qd, up, lo, decay)
        if p_rel > 0:
            locked[j_rel] = False
        elif p_add > 0:
            locked[j_add] = True
        else:
            solved = True
            break
    engaged = False
    for j in range(n):
        if locked[j]:
            engaged = True
    if not engaged:
        return 0
    if _zero_locked(qd, locked, qz):
        return 4
    if not solved and not _locked(H, b, locked, x):
        return 8
    return 1 | (2 if _euler_project(q, qz, x, decay, dt, lower, upper, lo_tol, up_tol, locked, q_out, qd_out) else 0)


def _limit_zeroed_kernel(work: np.ndarray, jtf: np.ndarray, a: np.ndarray, s: np.ndarray, sub: bool,
                         locked: np.ndarray, q: np.ndarray, decay: float, dt: float, bounds: np.ndarray,
                         q_out: np.ndarray, qd_out: np.ndarray) -> int:  # pragma: no mutate block
    """_limit_kernel's step where zeroing the locked q̇ changed it (work's rows as it left them: H, x, the zeroed
    q̇): eq. 7 on b = Jᵀf + t (t = a − s or a: the load at the zeroed q̇) by _locked_kernel, then
    _euler_project_kernel — the same bits as the Python form. Returns 1 | 2·finite, or 8 where the compiled solve
    declined (as _limit_kernel)."""
    n = q.shape[0]
    H, x, qz = work[:n], work[n], work[n + 1]
    b = np.empty(n)
    for i in range(n):
        b[i] = jtf[i] + (a[i] - s[i] if sub else a[i])
    if not _locked(H, b, locked, x):
        return 8
    return 1 | (2 if _euler_project(q, qz, x, decay, dt, bounds[0], bounds[1], bounds[2], bounds[3], locked, q_out,
                                    qd_out) else 0)


try:  # compiled at import (cached on disk), never in the loop thread; without numba the numpy form
    import numba
    from numba import types as _t

    _V = _t.Array(_t.float64, 1, "A")
    _euler: Any = numba.njit(_t.UniTuple(_t.Array(_t.float64, 1, "C"), 2)(_V, _V, _V, _t.float64, _t.float64),
                             cache=True)(_euler_step)
    _clip: Any = numba.njit(_t.Array(_t.float64, 1, "C")(_V, _V, _V), cache=True, boundscheck=True)(_clip_kernel)
    _zero_locked: Any = numba.njit(_t.boolean(_V, _t.Array(_t.boolean, 1, "A"), _V), cache=True,
                                   boundscheck=True)(_zero_locked_kernel)
    _euler_project: Any = numba.njit(_t.boolean(_V, _V, _V, _t.float64, _t.float64, _V, _V, _V, _V,
                                             _t.Array(_t.boolean, 1, "A"), _V, _V), cache=True,
                                     boundscheck=True)(_euler_project_kernel)
    from fdcontrol.model.conditioning import _shifted_cholesky

    _M = _t.Array(_t.float64, 2, "A")
    _pre: Any = numba.njit(_t.int64(_M, _t.float64, _t.boolean, _V, _V, _M), cache=True,
                           boundscheck=True)(_step_test_kernel)
    _fd_in: Any = numba.njit(_t.int64(_M, _V, _t.Array(_t.int64, 1, "A"), _V, _V, _t.boolean, _V, _V, _t.float64,
                                        _t.float64, _M, _V, _V), cache=True, boundscheck=True)(_fd_inside_kernel)
    from fdcontrol.model.constraints import _start, _verdict

    _BV, _W = _t.Array(_t.boolean, 1, "C"), _t.Array(_t.float64, 2, "C")
    _clip_sum: Any = numba.njit(_t.boolean(_V, _W, _V), cache=True, boundscheck=True)(_clip_sum_kernel)
    _limit: Any = numba.njit(_t.int64(_M, _V, _V, _V, _t.boolean, _V, _V, _t.float64, _t.float64, _W, _W, _BV, _V,
                                      _V), cache=True, boundscheck=True)(_limit_kernel)
    _limit_zeroed: Any = numba.njit(_t.int64(_W, _V, _V, _V, _t.boolean, _BV, _V, _t.float64, _t.float64, _W, _V,
                                             _V), cache=True, boundscheck=True)(_limit_zeroed_kernel)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    _euler = _clip = _zero_locked = _euler_project = _pre = _fd_in = _clip_sum = _limit = _limit_zeroed = None


#: _pre and _fd_in without numba's dispatch (:func:`fdcontrol.model.linalg.compiled_entry`), where
#: ForwardDynamicsSolver.step has checked the types
_pre_call, _fd_in_call = compiled_entry(_pre), compiled_entry(_fd_in)
