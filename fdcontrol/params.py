"""Parameters declared once, next to the part that uses them.

Each part (a mapping, a law's terms, a limit, the sensor model, the loop…) declares its
parameters as :class:`Param` records: name, kind, default, bounds, unit, a one-line
description and a run-time policy. Everything that lists or checks parameters derives from
these records — the library's own keyword checks (:func:`check_kwargs`), the service's
settings model, its API schemas and parameter listing (``GET /params``), the CLI flags of
``fdcontrol serve``, the dashboard's form and the configuration stored in a recording — in the
manner of ros2_controllers' generate_parameter_library.

Run-time policies (when a value may change while the service runs), from loosest to strictest:

``live``
    any time; applied at the next cycle boundary.
``tighten``
    any time, but only toward safer values than the startup value (a bound: smaller or equal;
    a set of safety limits: a superset).
``holding``
    applied only at standstill. These change what the sensor reading or the control law *means*,
    so they never change under a moving arm: a change while the arm moves first brakes it to
    standstill within the limits, then applies (after a change of the sensor model it takes the
    sensor bias again at the held pose) and resumes from rest (a hold requested before stays).
``stopped``
    only while the loop is stopped (the robot model, the loop rate).
``startup``
    only at startup (driver, driver options, frames, network and access settings): a restart is needed.

This module imports nothing beyond the standard library: the library checks plain values, the
service builds its pydantic models from the same records.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Policy = Literal["live", "tighten", "holding", "stopped", "startup"]
POLICIES: tuple[Policy, ...] = ("live", "tighten", "holding", "stopped", "startup")
Kind = Literal["float", "int", "bool", "str", "choice", "vector", "names", "spec"]

#: what each policy allows, as said to a user whose change it refuses
POLICY_TEXT: dict[str, str] = {
    "live": "may change at any time",
    "tighten": "may be tightened at run time, never loosened beyond its startup value",
    "holding": "changes only at standstill: while the arm moves, it is braked to standstill first, then the "
               "change applies and the loop resumes from rest",
    "stopped": "may change only while the loop is stopped (POST /control/stop first)",
    "startup": "is set at startup only (settings file, environment or command line; restart the service)",
}


class ParamError(ValueError):
    """A parameter value or name the declarations refuse; the message names the parameter."""


@dataclass(frozen=True)
class Param:
    """One parameter: everything any listing or check needs to know about it.

    ``kind``: ``float``/``int``/``bool``/``str``; ``choice`` (one of ``choices``); ``vector``
    (``size`` floats, each within the bounds; ``size`` 0: any length up to ``max_items``);
    ``names`` (a list of ``choices``); ``spec`` (a structured value the owner validates).
    ``choices`` may be a callable (a registry's names, read when needed: plugins included).
    ``arg`` is the keyword of the owner's constructor when it differs from ``name``.
    ``nullable``: None is a valid value (meaning: derived, see the description).
    """

    name: str
    kind: Kind
    default: Any
    description: str
    unit: str = ""
    policy: Policy = "live"
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    size: int = 0
    max_items: int = 64
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    arg: str | None = None
    nullable: bool = False
    owner: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)  # kind-specific (e.g. the API type of a spec)
    #: a ``tighten`` bound whose tightening lengthens the braking distance (a lower acceleration or jerk
    #: limit, a limit added): refused while the arm moves, applied at standstill (fdcontrol.limits.braking)
    brakes: bool = False

    @property
    def keyword(self) -> str:
        return self.arg or self.name

    def options(self) -> tuple[str, ...]:
        c = self.choices
        return tuple(c() if callable(c) else c)

    def bounds_text(self) -> str:
        lo = f"> {self.gt:g}" if self.gt is not None else f"≥ {self.ge:g}" if self.ge is not None else ""
        hi = f"≤ {self.le:g}" if self.le is not None else ""
        return " and ".join(x for x in (lo, hi) if x)

    def _number(self, v: Any, integer: bool) -> float:
        what = "an integer" if integer else "a finite number"
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ParamError(f"{self.name} must be {what}, got {_show(v)}")
        if integer and not (isinstance(v, int) or float(v).is_integer()):
            raise ParamError(f"{self.name} must be {what}, got {_show(v)}")
        x = float(v)
        if not math.isfinite(x):
            raise ParamError(f"{self.name} must be {what}, got {_show(v)}")
        if (self.gt is not None and not x > self.gt) or (self.ge is not None and not x >= self.ge) \
                or (self.le is not None and not x <= self.le):
            raise ParamError(f"{self.name} must be {self.bounds_text()}{' ' + self.unit if self.unit else ''}, "
                             f"got {x:g}")
        return x

    def check(self, value: Any) -> Any:
        """The value in its canonical plain form (float, int, list…), or ParamError naming the parameter."""
        if value is None:
            if self.nullable:
                return None
            raise ParamError(f"{self.name} must not be null")
        k = self.kind
        if k == "float":
            return self._number(value, False)
        if k == "int":
            return int(self._number(value, True))
        if k == "bool":
            if not isinstance(value, bool):
                raise ParamError(f"{self.name} must be true or false, got {_show(value)}")
            return value
        if k == "str":
            if not isinstance(value, str) or not 0 < len(value) <= 1000:
                raise ParamError(f"{self.name} must be a non-empty string, got {_show(value)}")
            return value
        if k == "choice":
            opts = self.options()
            if value not in opts:
                raise ParamError(f"{self.name} must be one of {', '.join(map(str, opts))}, got {_show(value)}")
            return value
        if k == "vector":
            if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
                raise ParamError(f"{self.name} must be a list of numbers, got {_show(value)}")
            items = list(value)
            if (self.size and len(items) != self.size) or len(items) > self.max_items:
                n = self.size or f"at most {self.max_items}"
                raise ParamError(f"{self.name} must have {n} entries, got {len(items)}")
            return [self._number(x, False) for x in items]
        if k == "names":
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise ParamError(f"{self.name} must be a list of names, got {_show(value)}")
            items, opts = list(value), self.options()
            bad = [x for x in items if x not in opts]
            if bad or len(items) > self.max_items:
                raise ParamError(f"{self.name}: unknown {', '.join(map(_show, bad))}; expected any of "
                                 f"{', '.join(opts)}")
            return items
        return value  # spec: validated by its owner

    def describe(self) -> dict[str, Any]:
        """The listing of ``GET /params``: every field, choices read now (plugins included)."""
        d: dict[str, Any] = {"name": self.name, "kind": self.kind, "default": self.default, "unit": self.unit,
                             "description": self.description, "policy": self.policy, "owner": self.owner}
        for b in ("ge", "gt", "le"):
            if getattr(self, b) is not None:
                d[b] = getattr(self, b)
        if self.size:
            d["size"] = self.size
        if self.kind in ("choice", "names"):
            d["choices"] = list(self.options())
        if self.nullable:
            d["nullable"] = True
        return d


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


def declare(owner: str, *params: Param) -> tuple[Param, ...]:
    """A part's declarations, stamped with its name (shown in listings and errors)."""
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"{owner} declares a parameter twice")
    return tuple(Param(**{**p.__dict__, "owner": owner}) for p in params)


def unknown_names(given: Iterable[str], valid: Iterable[str], what: str) -> ParamError:
    """The one error for misspelled names: what was unknown, the closest match, every valid name."""
    valid = sorted(valid)
    bad = sorted(set(given) - set(valid))
    hints = [f"{b!r} (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(b, valid, 1)) else repr(b)
             for b in bad]
    return ParamError(f"unknown {what} {', '.join(hints)}; valid: {', '.join(valid) or '(none)'}")


def check_kwargs(params: Iterable[Param], kwargs: Mapping[str, Any], what: str) -> dict[str, Any]:
    """Keyword arguments of a part's constructor checked against its declarations: unknown names
    raise (naming the valid ones), values are checked, missing ones get their defaults."""
    by_kw = {p.keyword: p for p in params}
    if set(kwargs) - by_kw.keys():
        raise unknown_names(kwargs, by_kw, f"parameter of {what}:")
    return {k: p.check(kwargs[k]) if k in kwargs else p.default for k, p in by_kw.items()}


def change_errors(params: Mapping[str, Param], changes: Mapping[str, Any], current: Mapping[str, Any],
                  startup: Mapping[str, Any], phase: Literal["stopped", "holding", "moving"],
                  at_rest: bool | None = None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The run-time policy of each changed parameter, checked in one place for the API and the loop.

    ``phase``: the loop is ``stopped``, ``holding`` the arm at standstill, or ``moving`` (running
    otherwise). Returns (conflicts, refusals): conflicts need another phase (HTTP 409), refusals
    are values the policy never allows at run time (HTTP 422). Unchanged values always pass;
    ``holding`` changes pass in every phase: the loop applies them at standstill (see the module doc).
    ``at_rest``: every joint's reference velocity is zero (default: the phase is not ``moving``); a
    ``brakes`` bound is tightened only at rest.
    """
    moving = phase == "moving" if at_rest is None else not at_rest
    conflicts: list[tuple[str, str]] = []
    refusals: list[tuple[str, str]] = []
    for name in sorted(changes):
        p = params.get(name)
        if p is None:
            continue
        new, old = changes[name], current.get(name)
        if new == old:
            continue
        pol = p.policy
        if pol == "startup" or (pol == "stopped" and phase != "stopped"):
            conflicts.append((name, f"policy '{pol}': {name} {POLICY_TEXT[pol]}"))
        elif pol == "tighten" and new is not None:
            bound = startup.get(name)
            if isinstance(bound, list | tuple):  # a set of safety limits: members may be added, not removed
                removed = [str(x) for x in bound if x not in new]
                if removed:
                    refusals.append((name, f"policy 'tighten': {name} may not remove {', '.join(removed)} at run "
                                     f"time (that loosens the safety limits): the service started with "
                                     f"{', '.join(map(str, bound))}"))
            elif isinstance(bound, int | float) and new > bound:
                refusals.append((name, f"policy 'tighten': {name} {POLICY_TEXT['tighten']} ({bound:g})"))
            if p.brakes and moving and _lengthens(new, old):
                conflicts.append((name, f"{name}: tightening it while the arm moves would lengthen the braking "
                                  "distance; hold the arm (POST /control/hold), change it at standstill, then "
                                  "release"))
    return conflicts, refusals


def _lengthens(new: Any, old: Any) -> bool:
    """A lower bound (a smaller acceleration or jerk limit) or a longer set of limits than ``old``."""
    if isinstance(new, list | tuple):
        return isinstance(old, list | tuple) and any(x not in old for x in new)
    return isinstance(new, int | float) and isinstance(old, int | float) and new < old



def error_message(msg: str) -> str:
    """A validation error's message as said to a person: without pydantic's "Value error, " (or
    "Assertion failed, ") in front of the validator's own words."""
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    return msg

__all__ = ["POLICIES", "POLICY_TEXT", "Param", "ParamError", "Policy", "change_errors", "check_kwargs", "declare",
           "error_message",
           "unknown_names"]
