"""Reactions (guarded moves): rules evaluated on the loop's signals every cycle.

A rule reads ``when <signal> <op> <value> [for N cycles] then <action>``. It is evaluated in the
control loop, in the cycle's own data (after the sensor is read and filtered, before the solver),
so it fires in the cycle where its condition has held for ``cycles`` consecutive cycles, and
its action shapes that same cycle's reference:

* ``hold`` — the loop brakes to standstill within the acceleration limits and holds (released
  by the API's hold off); an active move ends,
* ``stop`` — the active move ends and the arm stays compliant where it is (target = the pose
  now),
* ``retract`` — a move of ``distance`` m against the measured force (or back along the tool's
  z axis when there is no force) — needs :mod:`fdcontrol.control.trajectory`,
* ``switch`` — the control law's mode becomes ``mode`` and/or the parameters ``params`` take new
  values (the law's gains ramped over ``ramp_time``; which parameters may be switched and how:
  :mod:`fdcontrol.control.switch`).

A rule fires once and disarms itself (``once``, the default) or re-arms when its condition
clears. Signals (SI units): the filtered measured wrench in the base frame ``fx … tz`` and in the
tool frame ``tool_fx … tool_tz``, its norms ``force`` and ``torque``, the tip speed
``tip_speed`` (m/s) and ``tip_angular_speed`` (rad/s), the move's tracking error
``tracking_error`` (m), and ``workspace_distance`` (m, tip to the nearest workspace boundary).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fdcontrol.control.switch import SWITCHABLE, check_switch, describe_switch, switchable_params

_AXES = ("fx", "fy", "fz", "tx", "ty", "tz")


def _signals() -> dict[str, Callable[[Any], float]]:
    out: dict[str, Callable[[Any], float]] = {}
    for i, a in enumerate(_AXES):
        out[a] = lambda s, i=i: float(s.f_measured[i])
        out["tool_" + a] = lambda s, i=i: float(s.f_tool()[i])
    out["force"] = lambda s: float(np.linalg.norm(s.f_measured[:3]))
    out["torque"] = lambda s: float(np.linalg.norm(s.f_measured[3:]))
    out["tip_speed"] = lambda s: float(np.linalg.norm(s.twist[:3]))
    out["tip_angular_speed"] = lambda s: float(np.linalg.norm(s.twist[3:]))
    out["tracking_error"] = lambda s: s.tracking_error
    out["workspace_distance"] = lambda s: s.workspace_distance
    return out


#: signal name → reader of a :class:`Signals`
SIGNALS: dict[str, Callable[[Any], float]] = _signals()
OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
    "abs>": lambda x, v: abs(x) > v, "abs<": lambda x, v: abs(x) < v}
ACTIONS = ("hold", "stop", "retract", "switch")


@dataclass
class Signals:
    """One cycle's values the rules read (base frame)."""

    pose: np.ndarray
    twist: np.ndarray
    f_measured: np.ndarray
    tracking_error: float = math.nan
    workspace_distance: float = math.nan

    def f_tool(self) -> np.ndarray:
        """The wrench in the tool frame (computed once per cycle, on first use)."""
        ft = self.__dict__.get("_f_tool")
        if ft is None:
            R = self.pose[:3, :3]
            ft = self.__dict__["_f_tool"] = np.concatenate((R.T @ self.f_measured[:3], R.T @ self.f_measured[3:]))
        return ft


@dataclass
class Rule:
    """``when signal op value for cycles then action`` (see the module doc)."""

    name: str
    signal: str
    op: str
    value: float
    action: str = "hold"
    cycles: int = 1
    distance: float = 0.0  # m, retract
    mode: str | None = None  # switch
    params: dict[str, Any] | None = None  # switch: parameter name → value (fdcontrol.control.switch)
    ramp_time: float = 0.5  # s, switch: the ramp of the law's gains
    once: bool = True
    armed: bool = True
    fired: int = 0
    _count: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        if self.signal not in SIGNALS:
            raise ValueError(f"rule {self.name!r}: unknown signal {self.signal!r}; "
                             f"known signals: {', '.join(SIGNALS)}")
        if self.op not in OPS:
            raise ValueError(f"rule {self.name!r}: unknown operator {self.op!r}; use one of {', '.join(OPS)}")
        if not math.isfinite(float(self.value)):
            raise ValueError(f"rule {self.name!r}: value must be finite")
        if self.action not in ACTIONS:
            raise ValueError(f"rule {self.name!r}: unknown action {self.action!r}; use one of {', '.join(ACTIONS)}")
        if not (1 <= int(self.cycles) <= 100_000):
            raise ValueError(f"rule {self.name!r}: cycles must be in [1, 100000]")
        if self.action == "retract" and not (0 < float(self.distance) <= 0.5):
            raise ValueError(f"rule {self.name!r}: retract distance must be in (0, 0.5] m")
        if self.action == "switch" and not (self.mode or self.params):
            raise ValueError(f"rule {self.name!r}: switch needs a mode and/or params")
        if self.mode is not None:  # checked now: the law refuses an unknown mode in the loop thread, at the firing
            from fdcontrol.control.laws import LAWS

            if self.mode not in LAWS.names():
                raise ValueError(f"rule {self.name!r}: unknown mode {self.mode!r}; one of {', '.join(LAWS.names())}")
        if self.params:
            bad = sorted(set(self.params) - SWITCHABLE)
            if bad:
                raise ValueError(f"rule {self.name!r}: {', '.join(bad)} cannot be switched by a reaction; "
                                 f"switchable: {', '.join(sorted(SWITCHABLE))}")
            # each value within its declaration (the service checks the startup bounds too)
            self.params = check_switch(dict(self.params), switchable_params(), {}, what=f"rule {self.name!r}")
        if isinstance(self.ramp_time, bool) or not (0 <= float(self.ramp_time) <= 60):
            raise ValueError(f"rule {self.name!r}: ramp_time must be in [0, 60] s")
        # plain numbers from here on: the loop thread formats and ramps with them when the rule fires
        self.value, self.cycles, self.ramp_time = float(self.value), int(self.cycles), float(self.ramp_time)

    def check(self, s: Signals) -> bool:
        """Count this cycle; True when the rule fires now."""
        if not self.armed:
            return False
        x = SIGNALS[self.signal](s)
        if x == x and OPS[self.op](x, self.value):  # NaN never satisfies a rule
            self._count += 1
        else:
            self._count = 0
        if self._count < self.cycles:
            return False
        self._count = 0
        self.fired += 1
        if self.once:
            self.armed = False
        return True

    def describe(self, s: Signals) -> str:
        what = f" {describe_switch(self.mode, self.params, self.ramp_time)}" if self.action == "switch" else ""
        return (f"rule {self.name!r}: {self.signal} = {SIGNALS[self.signal](s):.4g} {self.op} {self.value:g}"
                f"{f' for {self.cycles} cycles' if self.cycles > 1 else ''} → {self.action}{what}")


@dataclass
class Event:
    """One firing: the loop cycle, the rule, and what it saw."""

    cycle: int
    rule: str
    action: str
    text: str


@dataclass
class Reactions:
    """The rules of one loop, evaluated in order; the fired ones' actions run in the loop."""

    rules: list[Rule] = field(default_factory=list)
    count: int = 0  # firings since the loop was built
    last: Event | None = None

    def __post_init__(self) -> None:
        names = [r.name for r in self.rules]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"rule names must be unique, repeated: {', '.join(dup)}")

    def evaluate(self, s: Signals, cycle: int) -> list[Rule]:
        """The rules that fire in this cycle (each counted and remembered as the last event)."""
        fired = []
        for r in self.rules:
            if r.check(s):
                fired.append(r)
                self.count += 1
                self.last = Event(cycle, r.name, r.action, f"cycle {cycle}: {r.describe(s)}")
        return fired

    @property
    def armed(self) -> bool:
        return any(r.armed for r in self.rules)


def rules_from_config(items: list[dict[str, Any]]) -> list[Rule]:
    """Rules from plain data (settings / API), each {name, signal, op, value, action, cycles,
    distance, mode, params, ramp_time, once, armed}."""
    out = []
    for i, it in enumerate(items):
        it = {k: v for k, v in dict(it).items() if v is not None}
        it.setdefault("name", f"rule{i}")
        try:
            out.append(Rule(**it))
        except TypeError as exc:
            raise ValueError(f"rules[{i}]: {exc}") from exc
    return out
