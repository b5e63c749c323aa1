"""The tiny base of a joint-velocity limit and the per-cycle pipeline that composes limits.

A limit shapes a desired joint velocity q̇ (rad/s, a list of floats, changed in place) at the
measured q. Limits run in a fixed order; each may narrow two per-joint boxes held by the
:class:`Cycle`:

* the *envelope* [lo, hi] — where a joint should be (the braking curve of the position limit);
  the acceleration limit keeps each joint inside it as far as a·dt allows;
* the *hard box* [hard_lo, hard_hi] — what the reference may never leave (position and
  velocity limits). :func:`run` clamps to it last, so it wins over everything before it.

Why plain float lists and no numpy: for N ≈ 6–7 joints a Python loop over floats is several
times faster than a chain of small numpy calls (benchmarks/bench_cycle.py prints both).
"""

from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

if TYPE_CHECKING:
    from fdcontrol.model.robot import RobotModel

INF = float("inf")


class Cycle:
    """The inputs of one cycle as float lists, and the boxes the limits narrow.

    ``dt`` (s) is the time since the previous reference; ``period`` (s, default ``dt``) the loop's
    nominal period. A loop paced by a robot's clock passes the robot's time since its last state as
    ``dt``: after a missed robot cycle dt is a multiple of the period (the robot filled the missing
    commands itself, see :class:`~fdcontrol.limits.jerk.JointJerk`).
    """

    __slots__ = ("J", "dt", "hard_hi", "hard_lo", "hi", "lo", "n", "period", "prev", "q")

    def __init__(self, q: np.ndarray, qd_prev: np.ndarray, J: np.ndarray | None, dt: float,
                 period: float | None = None) -> None:
        self.q: list[float] = q.tolist()
        self.prev: list[float] = qd_prev.tolist()
        self.J = J
        self.dt = float(dt)
        self.period = self.dt if period is None else float(period)
        self.n = n = len(self.q)
        self.lo, self.hi = [-INF] * n, [INF] * n
        self.hard_lo, self.hard_hi = [-INF] * n, [INF] * n


class LimitSettings(Protocol):
    """What a limit reads to build itself: the service's settings (server/settings.py
    ``ControlParams``) or :class:`fdcontrol.limits.safety.LimitParams` — the library never imports the service."""

    velocity_scale: float  # fraction of the robot description's velocity limits
    max_joint_acceleration: float  # rad/s²
    max_linear_speed: float  # m/s at the tip
    max_angular_speed: float  # rad/s at the tip


class Limit(ABC):
    """One limit on the joint-velocity reference; registered by name in :data:`LIMITS`.

    ``order`` places it in the composition (:class:`fdcontrol.limits.safety.SafetyLimits`), ascending:
    cartesian 10, position 20, velocity 30, acceleration 40; the hard box is always last. The
    default 35 runs a new limit after the uniform scalings and before the acceleration limit,
    which then ramps into whatever it asked for. ``required``, when not empty, says why the
    limit may never be left out (the settings reject a set without it with that reason).
    """

    name: ClassVar[str]
    order: ClassVar[float] = 35.0
    required: ClassVar[str] = ""
    #: the compositions that packed this limit's parameters for their compiled call (SafetyLimits.watch)
    _watchers: ClassVar[weakref.WeakSet | None] = None

    def __setattr__(self, name: str, value: object) -> None:
        """Set the attribute; a public one (a parameter) marks every composition that packed this limit's parameters
        stale, so each packs them again before its next cycle (the change is never missed)."""
        object.__setattr__(self, name, value)
        watchers = self._watchers
        if watchers and name[0] != "_":
            for owner in list(watchers):
                owner._stale = True

    def __getstate__(self) -> object:
        """The attributes without the compositions watching this limit (a copy is watched by none of them)."""
        state = object.__getstate__(self)
        if isinstance(state, dict) and "_watchers" in state:
            state = {k: v for k, v in state.items() if k != "_watchers"}
        return state

    def watch(self, owner: object) -> None:
        """``owner`` (a :class:`~fdcontrol.limits.safety.SafetyLimits`, weakly held) is told of each parameter set
        from now on: its ``_stale`` made true."""
        if self._watchers is None:
            object.__setattr__(self, "_watchers", weakref.WeakSet())
        self._watchers.add(owner)  # type: ignore[union-attr]

    @classmethod
    def from_settings(cls, robot: RobotModel, params: LimitSettings) -> Limit:
        """This limit for ``robot`` with the parameters in ``params``; validated. A limit without
        parameters needs no override."""
        out = cls()
        out.validate()
        return out

    @abstractmethod
    def validate(self) -> None:
        """Raise ValueError on parameters the limit cannot work with."""

    @abstractmethod
    def apply(self, c: Cycle, qd: list[float]) -> bool:
        """Shape ``qd`` in place (and narrow ``c``'s boxes); return whether the limit acted."""

    def limit(self, q: np.ndarray, qd: np.ndarray, qd_prev: np.ndarray, J: np.ndarray | None,
              dt: float) -> np.ndarray:
        """This limit alone, followed by its own hard box: the limited q̇ as an array."""
        return run((self,), q, qd, qd_prev, J, dt)


def run(limits: Sequence[Limit], q: np.ndarray, qd: np.ndarray, qd_prev: np.ndarray,
        J: np.ndarray | None, dt: float, active: dict[str, bool] | None = None,
        period: float | None = None) -> np.ndarray:
    """Apply ``limits`` in order, then the hard box; record which acted in ``active``. ``period``:
    the loop's nominal period when ``dt`` may be longer (a robot-paced loop after a missed cycle)."""
    c = Cycle(q, qd_prev, J, dt, period)
    out = qd.tolist()
    for lim in limits:
        hit = lim.apply(c, out)
        if active is not None:
            active[lim.name] = hit
    lo, hi = c.hard_lo, c.hard_hi
    for j in range(c.n):
        x = out[j]
        if x > hi[j]:
            out[j] = hi[j]
        elif x < lo[j]:
            out[j] = lo[j]
    return np.array(out)


def per_joint(value: float | np.ndarray | Sequence[float], n: int, name: str) -> np.ndarray:
    """``value`` broadcast to a float64 vector of length n (a copy)."""
    arr = np.asarray(value, dtype=float)
    try:
        return np.broadcast_to(arr, (n,)).copy()
    except ValueError:
        raise ValueError(f"{name} must be a scalar or have {n} entries, got shape {arr.shape}") from None


def check_positive(arr: np.ndarray, name: str) -> None:
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0 for every joint")
