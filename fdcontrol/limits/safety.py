"""Safety limits on the joint references, applied every cycle after the solver.

:class:`SafetyLimits` composes a set of the registered limits (:data:`fdcontrol.limits.LIMITS`,
by default the four below) in ascending ``order``, for a desired joint velocity q̇_d (rad/s)
at the measured q:

1. Cartesian speed (:class:`~fdcontrol.limits.CartesianSpeed`): q̇ scaled by s ≤ 1 so that
   ‖v_tip‖ ≤ ``max_linear_speed`` and ‖ω_tip‖ ≤ ``max_angular_speed`` (direction kept).
2. Position (:class:`~fdcontrol.limits.PositionEnvelope`): the braking envelope
   q̇_j ≤ min(√(2·0.5·a_j d_j), d_j/dt) with d_j the distance to the upper limit (mirrored
   below), so a joint can always stop in time. A joint that starts beyond a limit is driven
   back towards it at up to ``recovery_speed``·v_max — never snapped to the limit, and the
   return speed is reached by ramping at the acceleration limit (no velocity step).
3. Velocity (:class:`~fdcontrol.limits.JointVelocity`): q̇ scaled uniformly so
   |q̇_j| ≤ ``max_velocity_j`` (direction kept).
4. Acceleration (:class:`~fdcontrol.limits.JointAcceleration`): Δq̇ = q̇ − q̇_prev scaled
   uniformly so |Δq̇_j| ≤ a_j dt; then each joint is put back inside its braking envelope as
   far as ±a_j dt around q̇_prev allows, because the uniform scaling, dominated by another
   joint, may under-brake a joint that approaches a limit.
5. The hard box, per joint, last: |q̇_j| ≤ v_max,j and −max(d_l,j, 0)/dt ≤ q̇_j ≤ max(d_u,j, 0)/dt
   (d_u = upper − q, d_l = q − lower): inside, q + q̇ dt ∈ [lower, upper]; beyond a limit, no
   motion further out. The references never exceed position or velocity limits.

Position (or velocity) wins over acceleration exactly where both cannot hold in this cycle:
the hard box moves q̇_j by more than a_j dt from q̇_prev,j only when

* q̇_prev,j − a_j dt > max(d_u, 0)/dt (or q̇_prev,j + a_j dt < −max(d_l, 0)/dt): even braking
  at a_j for one cycle, the joint would pass the limit (or, beyond it, keep moving out).
  The envelope (margin 0.5 on the braking distance) prevents this while the measured q
  follows the reference; it happens when the measured state runs ahead of the reference — a
  robot lagging its velocity reference keeps moving while the reference brakes (property
  test: first-order lag τ = 10 ms) — or when a joint is pushed across a limit while moving out;
* |q̇_prev,j| > v_max,j + a_j dt, i.e. ``max_velocity`` was lowered at run time.

A joint that starts beyond a limit with q̇_prev = 0 (activation) never steps by more than
a_j dt. tests/test_limits.py checks these statements with property tests.

Which limits may be left out: position and velocity make the hard box (the references never
leave the position or velocity limits), and the acceleration limit is what ramps a joint into
its braking envelope and back from beyond a limit — so these three are ``required`` (each
class says why) and every set without one is rejected. The Cartesian speed limit, and any
limit a plugin registers, may be selected or not (settings ``limits``). A limit not of the
four runs at its class's ``order`` (default 35: before the acceleration limit).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fdcontrol.limits import (
    BRAKING_MARGIN,
    LIMITS,
    CartesianSpeed,
    Cycle,
    JointAcceleration,
    JointJerk,
    JointVelocity,
    Limit,
    LimitSettings,
    PathAcceleration,
    PathSpeed,
    PositionEnvelope,
    WorkspaceStop,
    run,
)
from fdcontrol.limits.base import per_joint
from fdcontrol.model.robot import RobotModel
from fdcontrol.params import Param, declare


def _compiled_kernels() -> tuple[Callable[..., Any], ...] | None:
    """limits.compiled's (head, tail, jerk, box, limits, chain, pack, limits_own_svd, limits_jerk, views) (compiled on
    first import), or None where numba is missing."""
    try:
        from fdcontrol.limits import compiled as k
    except ImportError:
        return None
    return k.head, k.tail, k.jerk, k.box, k.limits, k.chain, k.pack, k.limits_own_svd, k.limits_jerk, k.views


#: the limit classes the compiled twin computes (fdcontrol.limits.compiled): the required three and
#: any of the optional three, each of exactly its class
_COMPILED = {"cartesian": CartesianSpeed, "position": PositionEnvelope, "velocity": JointVelocity,
             "acceleration": JointAcceleration, "path_speed": PathSpeed, "path_acceleration": PathAcceleration}


def _vector(a: Any, n: int) -> bool:
    """`a` a float64 ndarray of n entries (what the compiled jerk limit takes; else the class's loop runs)."""
    return type(a) is np.ndarray and a.dtype == np.float64 and a.shape == (n,)


# limits.compiled's flags, its jerk limit's bit, B's header (the module itself is loaded only with numba)
FLAG_CARTESIAN, FLAG_PATH_ACCELERATION, FLAG_BOX, FLAG_JERK_BOX = 1, 2, 4, 16
HIT_CARTESIAN, HIT_POSITION, HIT_VELOCITY, HIT_PATH_SPEED, HIT_PATH_ACCELERATION, HIT_ACCELERATION, FINITE = (
    1, 2, 4, 8, 16, 32, 64)
HIT_JERK = 128
B_RECOVERY, B_RESERVE, B_HISTORY = 11, 15, 16
#: the result bits of limits.compiled.limits as the seven flags, in the bits' order
_BITS = tuple(tuple(bool(b & (1 << k)) for k in range(7)) for b in range(128))
_NO_JDOT = np.zeros(6)
_NO_CHAIN = np.zeros((0, 15))  # no path speed limit: the compiled twin's one call computes no J̇q̇
_NO_SVD = (np.zeros((0, 0)), np.zeros(0), np.zeros((0, 0)))  # no SVD of J given (tail takes its own)

__all__ = ["BASIC_LIMITS", "BRAKING_MARGIN", "DEFAULT_LIMITS", "LimitParams", "SafetyLimits", "check_limit_names"]

#: the four basic limits
BASIC_LIMITS: tuple[str, ...] = ("cartesian", "position", "velocity", "acceleration")
#: the limits composed unless configured otherwise, in their order: the basic four and the two that keep a
#: pushed tool on its line while they act (docs/limits.md, "Straight paths at the limits")
DEFAULT_LIMITS: tuple[str, ...] = (*BASIC_LIMITS, "path_acceleration", "path_speed")

#: the limits' parameters, declared once (fdcontrol.params): bounds that may only be tightened at run time
PARAMS = declare(
    "limits",
    Param("velocity_scale", "float", 0.5, "joint velocity limit as a fraction of the robot description's",
          policy="tighten", gt=0, le=1),
    Param("max_joint_acceleration", "float", 4.0, "joint acceleration limit", "rad/s²", policy="tighten",
          gt=0, le=50, brakes=True),
    Param("max_joint_jerk", "float", 5000.0, "joint jerk limit of the limit 'jerk', lowered per joint to the "
          "robot's published values", "rad/s³", policy="tighten", gt=0, le=1e6, brakes=True),
    Param("max_linear_speed", "float", 0.5, "tip speed limit", "m/s", policy="tighten", gt=0, le=3),
    Param("max_angular_speed", "float", 1.5, "tip angular speed limit", "rad/s", policy="tighten", gt=0, le=10),
    Param("limits", "names", list(DEFAULT_LIMITS), "the safety limits composed after the solver, in their "
          "fixed order; position, velocity and acceleration are required; at run time limits may be added, "
          "not removed", policy="tighten", choices=lambda: LIMITS.names(), brakes=True),
)


@dataclass(frozen=True)
class LimitParams:
    """The parameters every limit builds itself from (:class:`~fdcontrol.limits.base.LimitSettings`)
    when used without the service's settings; defaults as the service's."""

    velocity_scale: float = 0.5  # fraction of the robot description's velocity limits
    max_joint_acceleration: float | np.ndarray = 4.0  # rad/s², one for all joints or per joint
    max_linear_speed: float = 0.5  # m/s at the tip
    max_angular_speed: float = 1.5  # rad/s at the tip
    recovery_speed: float = 0.1  # fraction of the velocity limit used to move back inside a position limit
    limits: tuple[str, ...] = DEFAULT_LIMITS
    max_joint_jerk: float | np.ndarray = 5000.0  # rad/s³, read by the jerk limit (when composed)


def check_limit_names(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` in composition order; ValueError naming the problem for an unregistered name
    (listing the registered ones), a repeated one, or a ``required`` limit left out (with why)."""
    names = list(names)
    classes = {n: LIMITS.get(n) for n in names}  # UnknownName lists the registered limits
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"limit {', '.join(map(repr, repeated))} given more than once")
    for n in LIMITS:
        reason = LIMITS.get(n).required
        if reason and n not in classes:
            raise ValueError(f"the {n!r} limit may not be left out: {reason}")
    return tuple(sorted(names, key=lambda n: classes[n].order))


class SafetyLimits:
    """A set of limits composed in their order, then the hard box — by default Cartesian speed,
    position envelope, joint velocity and acceleration.

    Fields (arrays of length N, SI units): ``lower``/``upper`` (rad), ``max_velocity``
    (rad/s), ``max_acceleration`` (rad/s²); scalars ``max_linear_speed`` (m/s),
    ``max_angular_speed`` (rad/s; both ∞ without the Cartesian limit), ``recovery_speed``
    (fraction of ``max_velocity``). ``names`` lists the composed limits in order, ``limits``
    holds them; ``active`` names the limits that shaped the last reference.
    """

    position: PositionEnvelope
    velocity: JointVelocity
    acceleration: JointAcceleration
    cartesian: CartesianSpeed | None
    #: the reference the last :meth:`apply` returned when the compiled twin found it finite (the sum of its entries
    #: in :func:`fdcontrol.model.spatial.finite`'s order), else None: the loop skips its own test for that array
    checked: np.ndarray | None = None

    def __init__(self, lower: np.ndarray, upper: np.ndarray, max_velocity: np.ndarray,
                 max_acceleration: np.ndarray, max_linear_speed: float = 0.5, max_angular_speed: float = 1.5,
                 recovery_speed: float = 0.1, active: dict[str, bool] | None = None) -> None:
        n = len(lower)
        vmax, acc = per_joint(max_velocity, n, "max_velocity"), per_joint(max_acceleration, n, "max_acceleration")
        self._compose((CartesianSpeed(float(max_linear_speed), float(max_angular_speed)),
                       PositionEnvelope(np.asarray(lower, dtype=float), np.asarray(upper, dtype=float),
                                        acc, vmax, float(recovery_speed)),
                       JointVelocity(vmax), JointAcceleration(acc)), active)

    @classmethod
    def compose(cls, limits: Iterable[Limit], active: dict[str, bool] | None = None) -> SafetyLimits:
        """These limit instances, in their order; they must include every required one."""
        out = cls.__new__(cls)
        out._compose(limits, active)
        return out

    @classmethod
    def from_settings(cls, robot: RobotModel, params: LimitSettings) -> SafetyLimits:
        """The limits named by ``params.limits`` (default :data:`DEFAULT_LIMITS`), each built by its
        class's ``from_settings(robot, params)``; validated."""
        names = check_limit_names(getattr(params, "limits", DEFAULT_LIMITS))
        return cls.compose(LIMITS.get(n).from_settings(robot, params) for n in names)

    @classmethod
    def from_robot(cls, robot: RobotModel, velocity_scale: float = 0.5,
                   max_acceleration: float | np.ndarray = 4.0, limits: Sequence[str] = DEFAULT_LIMITS,
                   **kw: float) -> SafetyLimits:
        """Defaults: the URDF's position limits, half its velocity limits, 4 rad/s², the four limits."""
        return cls.from_settings(robot, LimitParams(velocity_scale, max_acceleration, limits=tuple(limits), **kw))

    def _compose(self, limits: Iterable[Limit], active: dict[str, bool] | None) -> None:
        by_name: dict[str, Limit] = {}
        for lim in limits:
            if lim.name in by_name:
                raise ValueError(f"limit {lim.name!r} given more than once")
            by_name[lim.name] = lim
        self.names = check_limit_names(by_name)
        self.limits: tuple[Limit, ...] = tuple(by_name[n] for n in self.names)
        self.position = by_name["position"]  # type: ignore[assignment]  # required, so present
        self.velocity = by_name["velocity"]  # type: ignore[assignment]
        self.acceleration = by_name["acceleration"]  # type: ignore[assignment]
        self.cartesian = by_name.get("cartesian")  # type: ignore[assignment]
        # one array each for the velocity and acceleration limits the position envelope also reads
        if np.array_equal(self.position.max_velocity, self.velocity.max_velocity):
            self.position.max_velocity = self.velocity.max_velocity
        if np.array_equal(self.position.max_acceleration, self.acceleration.max_acceleration):
            self.position.max_acceleration = self.acceleration.max_acceleration
        self.active: dict[str, bool] = {} if active is None else active
        #: [the entry of ``_acted`` the compiled call last wrote into ``active``, that dict] (None: a caller's dict,
        #: written every call): while both are the same, ``active`` holds that entry already and the call does not
        #: write it again (~0.15 µs). Only the limits' own dict, which nothing else writes: the general path, which
        #: writes the same names, forgets the entry; a shallow copy shares both (one dict, one entry)
        self._shown: list[Any] | None = [None, None] if active is None else None
        self.path_speed: PathSpeed | None = by_name.get("path_speed")  # type: ignore[assignment]
        self.path_acceleration: PathAcceleration | None = by_name.get("path_acceleration")  # type: ignore[assignment]
        # the compiled twin: every limit up to the acceleration limit one of its classes; those after it (the
        # jerk limit: compiled too; the workspace stop, collision avoidance, ...) run on its result, then the box
        k = self.limits.index(self.acceleration)
        self._after = self.limits[k + 1:]
        #: the jerk limit when it comes right after the acceleration limit: the compiled twin's call runs it too
        self._jerk: JointJerk | None = self._after[0] if self._after and type(self._after[0]) is JointJerk else None
        twin = all(type(lim) is _COMPILED.get(lim.name) for lim in self.limits[:k + 1])
        self._compiled = _compiled_kernels() if twin else None
        #: the path speed limit's robot as a chain for the compiled J̇q̇ (limits.compiled.chain): no rows without
        #: the limit, None where the robot is no such chain (its jacobian_rate then runs between head and tail)
        self._chain: np.ndarray | None = _NO_CHAIN
        self._chain_of: Any = None  # the robot _chain was made from
        #: the compiled call of most cycles (None: apply's general path), set by _pack; a parameter set on a packed
        #: limit makes _stale true (Limit.__setattr__): the next apply packs it before it computes
        self._fast: Callable[..., int] | None = None
        self._stale = False
        self._S: np.ndarray | None = None  # the jerk limit's history in B (the jerk limit in the compiled call)
        if self._compiled is not None:
            if self.path_speed is not None:
                self._chain_of = self.path_speed.robot
                self._chain = self._compiled[5](self._chain_of)
            self._watch()
            self._pack()

    def _watch(self) -> None:
        """The limits whose parameters B packs tell this composition when one is set (Limit.__setattr__)."""
        k = self.limits.index(self.acceleration)
        for lim in (*self.limits[:k + 1], *(() if self._jerk is None else (self._jerk,))):
            lim.watch(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A copy (copy, deepcopy, pickle): its limits watched by it too, their parameters packed into its own B
        (a shallow copy shares the limits: each of the two packs them again when the other did)."""
        self.__dict__.update(state)
        self.__dict__.setdefault("_shown", None)  # (a state pickled before there was one: active written every call)
        if self._compiled is not None:
            self._watch()
            self._pack()

    def _sources(self) -> tuple[Any, ...]:
        """The parameter vectors the compiled twin reads, in compiled.py's ``idx`` order, then the jerk limit's
        (j_max, a_max) when it runs in the compiled call."""
        p, ps, pa, jk = self.position, self.path_speed, self.path_acceleration, self._jerk
        a = self.acceleration.max_acceleration
        out = (p.lower, p.upper, p.max_acceleration, p.max_velocity, self.velocity.max_velocity, a,
               a if pa is None else pa.max_acceleration, a if ps is None else ps.max_acceleration)
        return out if jk is None else (*out, jk.max_jerk, jk.max_acceleration)

    def _scalars(self) -> tuple[float, ...]:
        """The scalar parameters the compiled call reads from B: recovery, margin, v, ω, reserve."""
        c, p, ps = self.cartesian, self.position, self.path_speed
        return (p.recovery, p.margin, math.inf if c is None else c.max_linear_speed,
                math.inf if c is None else c.max_angular_speed, 1.0 if ps is None else ps.reserve)

    def _pack(self) -> None:
        """Each distinct parameter vector once as a row of ``_P``, and the limits' own attributes made views
        of those rows: a change in place (``lim.max_velocity[2] = 0.01``) reaches the compiled twin at once;
        an attribute given a new value marks the limits stale (:meth:`Limit.__setattr__
        <fdcontrol.limits.base.Limit.__setattr__>`), and the next :meth:`apply` packs them again (:meth:`_refresh`).
        B (limits.compiled.pack) also holds the scalar parameters, the work space ``_work`` and, with the jerk limit
        in the call, its history (its ``_state`` is then a view of B's rows)."""
        kernels = self._compiled
        n = len(self.position.lower)
        jk = self._jerk
        src = self._sources()
        in_call = jk is not None and _vector(src[8], n) and _vector(src[9], n)  # else the jerk limit's own loop
        if not in_call:
            src = src[:8]
        rows: list[np.ndarray] = []
        idx = []
        for arr in src:
            for k, r in enumerate(rows):
                if r is arr:
                    idx.append(k)
                    break
            else:
                idx.append(len(rows))
                rows.append(arr)
        if any(np.shape(r) != (n,) for r in rows):
            raise ValueError(f"every per-joint limit must have {n} entries")
        after = self._after
        flags = (FLAG_CARTESIAN if self.cartesian is not None else 0) | (FLAG_BOX if not after else 0) \
            | (FLAG_PATH_ACCELERATION if self.path_acceleration is not None else 0) \
            | (FLAG_JERK_BOX if in_call and len(after) == 1 else 0)
        # the configuration in one array for the compiled call (limits.compiled.pack): P's rows are views of it
        B = kernels[6](np.array(rows, dtype=float).reshape(len(rows), n), idx[:8],  # type: ignore[index]
                       _NO_CHAIN if self._chain is None else self._chain, flags, self._scalars(), 8 + 2 * n,
                       (idx[8], idx[9]) if in_call else None)
        P, W, S = kernels[9](B, n)  # type: ignore[index]
        one = [P[k] for k in range(len(rows))]  # one view per row: a vector shared before stays shared
        views = [one[k] for k in idx]
        p, ps, pa = self.position, self.path_speed, self.path_acceleration
        p.lower, p.upper, p.max_acceleration, p.max_velocity = views[0], views[1], views[2], views[3]
        self.velocity.max_velocity, self.acceleration.max_acceleration = views[4], views[5]
        if pa is not None:
            pa.max_acceleration = views[6]
        if ps is not None:
            ps.max_acceleration = views[7]
        if in_call:
            jk.max_jerk, jk.max_acceleration = views[8], views[9]  # type: ignore[union-attr]
        self._P, self._idx, self._B, self._work, self._S = P, np.array(idx[:8], dtype=np.int64), B, W, S
        self._n = n
        self._views = self._sources()
        if S is not None:
            self._adopt(jk)  # type: ignore[arg-type]
        # the call of most cycles: one compiled call, the limits after it (past the jerk limit) on its result
        self._fast = None if self._chain is None else kernels[8] if in_call else kernels[7]  # type: ignore[index]
        self._rest = after[1:] if in_call else after
        names = [(HIT_CARTESIAN, "cartesian"), (HIT_POSITION, "position"), (HIT_VELOCITY, "velocity"),
                 (HIT_ACCELERATION, "acceleration")]
        names = [x for x in names if x[1] in self.names]
        names += [(bit, name) for bit, name, lim in ((HIT_PATH_SPEED, "path_speed", ps),
                                                     (HIT_PATH_ACCELERATION, "path_acceleration", pa)) if lim]
        if in_call:
            names.append((HIT_JERK, jk.name))  # type: ignore[union-attr]
        #: what apply records in ``active`` for each result of the fast call
        self._acted = tuple({name: bool(bits & bit) for bit, name in names} for bits in range(256))
        self._stale = False  # (the views given above marked the limits stale)

    def _adopt(self, jk: JointJerk) -> None:
        """The jerk limit's history into B's rows S: the history it holds (a (3, N) array: the compiled call goes on
        from it), or none (None: fresh, or after ``reset``: it starts afresh). Its ``_state`` is made S once a
        compiled call wrote a cycle there (never before: the class's own loop would read S as a history)."""
        S, n = self._S, len(self.position.lower)
        st = jk._state
        history = type(st) is np.ndarray and st.shape == (3, n)
        if history and st is not S:
            S[:] = st  # type: ignore[index]
        self._B[0, B_HISTORY] = 1.0 if history else 0.0

    def _refresh(self) -> None:
        """A packed limit's parameter was set since the last cycle: a new vector packed again (with its chain when
        the path speed limit was given another robot), the scalars written into B."""
        if self._compiled is None:  # (no compiled twin, or it was taken away: the classes read their attributes)
            return
        # stale until packed: a parameter that cannot be packed (a wrong length, a non-number) raises every
        # cycle, as the classes' loops do, never only once before the old parameters go on silently
        ps = self.path_speed
        if ps is not None and ps.robot is not self._chain_of:  # the path speed limit given another robot
            self._chain_of = ps.robot
            self._chain = self._compiled[5](ps.robot)  # type: ignore[index]
            self._pack()  # its chain into B
            return
        if any(a is not b for a, b in zip(self._sources(), self._views, strict=True)):
            self._pack()  # a parameter vector was replaced (not changed in place)
        else:
            self._B[0, B_RECOVERY:B_RESERVE + 1] = self._scalars()
        self._stale = False

    def validate(self) -> None:
        for lim in self.limits:
            lim.validate()

    def apply(self, q: np.ndarray, qd: np.ndarray, qd_prev: np.ndarray, J: np.ndarray,
              dt: float, period: float | None = None,
              svd: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None, conf: Any = None) -> np.ndarray:
        """Return the limited joint velocity reference (see the module doc for the order). ``dt`` is
        the time since the previous reference, ``period`` the loop's nominal period (default ``dt``):
        a robot-paced loop passes the robot's time, a multiple of the period after a missed cycle.
        ``svd``: (U, σ, Vᵀ), the thin SVD of this very J when the caller has it (the loop's Configuration,
        when the γ schedule took it this cycle): the compiled path speed limit then reuses it where it needs
        J⁺ by an SVD (κ(J) > 1e4) instead of taking its own — the same pseudo-inverse within rounding.
        ``conf``: the caller's :class:`~fdcontrol.model.configuration.Configuration` at this very ``q`` (the loop's):
        the workspace stop reads the tip's position from it instead of computing it again."""
        self.checked = None
        if self._stale:
            self._refresh()
        fast = self._fast
        # most cycles: one compiled call with the configuration, scalars, work space (and the jerk limit's history)
        # in B — without the path speed limit nothing reads the SVD, so a given one changes nothing
        if (fast is not None and self._compiled is not None and J is not None and len(q) == self._n
                and (svd is None or self.path_speed is None)):
            out = np.empty(self._n)
            dt = float(dt)
            S = self._S
            if S is not None:
                jk = self._jerk
                adopted = jk._state is not S  # type: ignore[union-attr]  # (fresh, reset, or the class's loop ran)
                if adopted:
                    self._adopt(jk)  # type: ignore[arg-type]
                bits = fast(q, qd, qd_prev, J, dt, dt if period is None else float(period), self._B, out)
                if bits < 0:  # round(dt/period) no exact integer: the general path (nothing computed yet)
                    round(dt / period)  # type: ignore[operator]  # raising as JointJerk.apply's (dt/period = inf)
                    return self._apply(q, qd, qd_prev, J, dt, period, svd, conf)
                if adopted:
                    jk._state = S  # type: ignore[union-attr]  # the history it made, in place from now on
            else:
                bits = fast(q, qd, qd_prev, J, dt, self._B, out)
            acted, shown = self._acted[bits], self._shown
            if shown is None or shown[0] is not acted or shown[1] is not self.active:
                self.active.update(acted)
                if shown is not None:
                    shown[0], shown[1] = acted, self.active
            rest = self._rest
            if rest:
                kernels = self._compiled
                return self._after_acceleration(rest, kernels[2], kernels[3], q, out, qd_prev, J, dt, period, conf)
            if bits & FINITE:  # the reference as returned: the loop's test of it can be skipped
                self.checked = out
            return out
        return self._apply(q, qd, qd_prev, J, dt, period, svd, conf)

    def _forget_shown(self) -> None:
        """``active`` written by another path than the compiled call: its next call writes its entry again."""
        shown = self._shown
        if shown is not None:
            shown[0] = None

    def _apply(self, q: np.ndarray, qd: np.ndarray, qd_prev: np.ndarray, J: np.ndarray, dt: float,
               period: float | None, svd: tuple[np.ndarray, np.ndarray, np.ndarray] | None, conf: Any) -> np.ndarray:
        """:meth:`apply` where its one compiled call does not apply: the classes' loops (numba missing), J's SVD
        handed over to the path speed limit, a robot that is no chain, the errors."""
        kernels = self._compiled
        self.checked = None
        self._forget_shown()
        if kernels is None:
            return run(self.limits, q, qd, qd_prev, J, dt, self.active, period)
        p, ps, pa = self.position, self.path_speed, self.path_acceleration
        if J is None:
            raise ValueError("the limits need the Jacobian J")
        n = len(q)
        if n != len(p.lower):  # shorter vectors than q raise IndexError in the compiled loops
            raise ValueError(f"q has {n} entries, the limits {len(p.lower)}")
        c, act, after = self.cartesian, self.active, self._after
        dt = float(dt)
        if self._chain is not None:  # one call: J̇q̇ for the path speed limit computed inside (limits.compiled.limits)
            out = np.empty(n)
            if svd is None:
                bits = kernels[7](q, qd, qd_prev, J, dt, self._B, out)
            else:
                bits = kernels[4](q, qd, qd_prev, J, dt, svd[0], svd[1], svd[2], self._B, out)
            hit_c, hit_p, hit_v, hit_ps, hit_pa, hit_a, fin = _BITS[bits & (HIT_JERK - 1)]
            if fin and not after:  # the reference as returned: the loop's test of it can be skipped
                self.checked = out
        else:
            head, tail, W = kernels[0], kernels[1], self._work
            # the path speed limit's robot is no chain (so the limit is there): its J̇q̇ between head and tail
            U, sv, Vt = _NO_SVD if svd is None else svd
            v_lin, v_ang = (math.inf, math.inf) if c is None else (c.max_linear_speed, c.max_angular_speed)
            hit_c, hit_p, hit_v = head(q, qd, J, dt, self._P, self._idx, W, p.recovery, p.margin, v_lin, v_ang,
                                       c is not None)
            jdot = _NO_JDOT
            moving = W[0].tolist()
            if any(moving) and math.isfinite(sum(moving)):  # J̇(q, q̇)q̇ at the q̇ the limits before it left
                jdot = ps.robot.jacobian_rate(q, W[0])  # type: ignore[union-attr]
            out, hit_ps, hit_pa, hit_a = tail(qd_prev, J, jdot, dt, U, sv, Vt, self._P, self._idx, W,
                                              ps.reserve,  # type: ignore[union-attr]
                                              True, pa is not None, not after)
        if c is not None:
            act["cartesian"] = hit_c
        act["position"], act["velocity"], act["acceleration"] = hit_p, hit_v, hit_a
        if ps is not None:
            act["path_speed"] = hit_ps
        if pa is not None:
            act["path_acceleration"] = hit_pa
        if after:
            return self._after_acceleration(after, kernels[2], kernels[3], q, out, qd_prev, J, dt, period, conf)
        return out

    def _after_acceleration(self, after: tuple[Limit, ...], jerk: Callable[..., bool], box: Callable[..., None],
                            q: np.ndarray, out: np.ndarray, qd_prev: np.ndarray, J: np.ndarray, dt: float,
                            period: float | None, conf: Any = None) -> np.ndarray:
        """The limits after the acceleration limit on the compiled twin's ``out``, in order, then the hard box
        (base.run's steps): the jerk limit by its compiled twin, the workspace stop on the array, any other by its
        own ``apply`` on a Cycle that holds the twin's boxes."""
        act, W = self.active, self._work  # (the limits after the acceleration limit: names the entry does not hold)
        h_period = dt if period is None else float(period)
        last = len(after) - 1
        c: Cycle | None = None
        lst: list[float] | None = None  # `out` as the list the classes change in place, while one of them runs
        n = len(out)
        for i, lim in enumerate(after):
            if type(lim) is JointJerk and _vector(lim.max_jerk, n) and _vector(lim.max_acceleration, n):
                if lst is not None:
                    out, lst = np.array(lst), None
                if c is not None:  # the boxes as the limits before left them
                    W[3], W[4] = c.hard_lo, c.hard_hi
                k = round(dt / h_period) if dt > 1.5 * h_period else 1  # as JointJerk.apply
                if lim is self._jerk and self._S is not None:  # its history in B's rows (the fast call's)
                    if lim._state is not self._S:
                        self._adopt(lim)
                    st, history = self._S, bool(self._B[0, B_HISTORY])
                    self._B[0, B_HISTORY] = 1.0
                    lim._state = st  # (written below)
                else:
                    st = lim._state
                    history = st is not None and st.shape == (3, n)
                    if not history:
                        st = lim._state = np.empty((3, n))
                act[lim.name] = jerk(out, qd_prev, dt, k, dt / k, lim.max_jerk, lim.max_acceleration, st,
                                     history, W, i == last)
                if i == last:
                    return out
                continue
            if type(lim) is WorkspaceStop:  # on the array itself, the same operations as its apply
                if lst is not None:
                    out, lst = np.array(lst), None
                act[lim.name] = lim.scale_velocity(q, J, out, dt, conf)
                continue
            if c is None:
                c = Cycle(q, qd_prev, J, dt, period)
                c.lo, c.hi, c.hard_lo, c.hard_hi = (W[r].tolist() for r in range(1, 5))
            if lst is None:
                lst = out.tolist()
            act[lim.name] = lim.apply(c, lst)
        if lst is not None:
            out = np.array(lst)
        if c is not None:  # the boxes as the limits before left them
            W[3], W[4] = c.hard_lo, c.hard_hi
        box(out, W)  # the hard box, last (base.run)
        return out

    # the fields, one source of truth in the composed limits -----------------------------
    @property
    def lower(self) -> np.ndarray:
        return self.position.lower

    @lower.setter
    def lower(self, v: np.ndarray) -> None:
        self.position.lower = np.asarray(v, dtype=float)

    @property
    def upper(self) -> np.ndarray:
        return self.position.upper

    @upper.setter
    def upper(self, v: np.ndarray) -> None:
        self.position.upper = np.asarray(v, dtype=float)

    @property
    def max_velocity(self) -> np.ndarray:
        return self.velocity.max_velocity

    @max_velocity.setter
    def max_velocity(self, v: np.ndarray) -> None:
        self.velocity.max_velocity = self.position.max_velocity = per_joint(v, len(self.lower), "max_velocity")

    @property
    def max_acceleration(self) -> np.ndarray:
        return self.acceleration.max_acceleration

    @max_acceleration.setter
    def max_acceleration(self, v: np.ndarray) -> None:
        arr = per_joint(v, len(self.lower), "max_acceleration")
        self.acceleration.max_acceleration = self.position.max_acceleration = arr

    def _cartesian(self) -> CartesianSpeed:
        if self.cartesian is None:
            raise ValueError("the Cartesian speed limit is not composed (settings limits)")
        return self.cartesian

    @property
    def max_linear_speed(self) -> float:
        return math.inf if self.cartesian is None else self.cartesian.max_linear_speed

    @max_linear_speed.setter
    def max_linear_speed(self, v: float) -> None:
        self._cartesian().max_linear_speed = float(v)

    @property
    def max_angular_speed(self) -> float:
        return math.inf if self.cartesian is None else self.cartesian.max_angular_speed

    @max_angular_speed.setter
    def max_angular_speed(self, v: float) -> None:
        self._cartesian().max_angular_speed = float(v)

    @property
    def recovery_speed(self) -> float:
        return self.position.recovery

    @recovery_speed.setter
    def recovery_speed(self, v: float) -> None:
        self.position.recovery = float(v)
