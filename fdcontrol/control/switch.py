"""Parameter switches of reactions: a rule's ``switch`` action may set parameters in the loop.

A reaction fires in the middle of a motion, so it may only change what the loop can change in
place, in that cycle, without rebuilding a part and without a step reaching the arm:

* the law's gains ``stiffness``, ``damping``, ``force_gain``, ``twist_gain`` — ramped from their
  values at the firing to the new ones over the rule's ``ramp_time`` with the smooth step of
  :mod:`fdcontrol.control.gains` (zero slope at both ends),
* the input guards ``command_timeout``, ``sensor_timeout``, ``max_force``, ``max_torque`` (policy
  ``tighten``: never beyond their startup values) and ``telemetry_decimation``,
* the sensor filter's ``deadband_force``, ``deadband_torque``, ``filter_cutoff``,
* the posture task's ``posture_stiffness``, ``posture_damping``,
* the move limits ``move_max_*``, ``approach_speed``, ``move_pause_error`` (for the next move;
  a running move keeps the limits it was planned with).

Everything else is refused when the rule is armed: parameters of another policy (``holding``,
``stopped``, ``startup``: they need standstill or a restart) and the live parameters that rebuild
a part (the solver's, the safety limits', the workspace's — a new workspace could put the arm
inside a margin, which moves it by itself).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from fdcontrol.control.gains import GainRamp

if TYPE_CHECKING:
    from fdcontrol.control.host import LoopHost
    from fdcontrol.control.task import TaskSpace
    from fdcontrol.params import Param

#: the law's vectors, ramped
RAMPED = ("stiffness", "damping", "force_gain", "twist_gain")
_LOOP = ("command_timeout", "sensor_timeout", "max_force", "max_torque", "telemetry_decimation")
_FILTER = {"deadband_force": "deadband_force", "deadband_torque": "deadband_torque", "filter_cutoff": "cutoff"}
_POSTURE = {"posture_stiffness": "stiffness", "posture_damping": "damping"}
_MOVES = ("move_max_linear_speed", "move_max_linear_acceleration", "move_max_linear_jerk",
          "move_max_angular_speed", "move_max_angular_acceleration", "move_max_angular_jerk",
          "move_max_joint_jerk", "approach_speed", "move_pause_error")
#: the parameters a reaction may switch (see the module doc)
SWITCHABLE: frozenset[str] = frozenset((*RAMPED, *_LOOP, *_FILTER, *_POSTURE, *_MOVES))


def switchable_params() -> dict[str, Param]:
    """name → declaration of every parameter a reaction may switch, from the parts that declare them
    (all in the control layer: the law, the sensor model, the posture task, the moves, the input guards)."""
    from fdcontrol.control import inputs, law, posture, sensing, trajectory

    table = {p.name: p for group in (law.PARAMS, sensing.PARAMS, posture.PARAMS, trajectory.PARAMS, inputs.PARAMS)
             for p in group}
    return {n: table[n] for n in SWITCHABLE}


class SwitchError(ValueError):
    """A parameter switch that a reaction may not make."""


def check_switch(changes: dict[str, Any], params: dict[str, Any], startup: dict[str, Any],
                 max_stiffness: np.ndarray | None = None, max_damping: np.ndarray | None = None,
                 what: str = "rule") -> dict[str, Any]:
    """The checked values of ``changes`` (name → value) against the declarations ``params``
    (name → :class:`fdcontrol.params.Param`): policy ``live`` or ``tighten`` (not beyond the
    ``startup`` value), :meth:`Param.check`, switchable in the loop, stiffness and damping within
    the bounds of live gain changes. Raises :class:`SwitchError` (a ValueError) with the reason."""
    out: dict[str, Any] = {}
    for name, value in changes.items():
        p = params.get(name)
        if p is None:
            raise SwitchError(f"{what}: unknown parameter {name!r}")
        if p.policy not in ("live", "tighten"):
            raise SwitchError(f"{what}: {name} has policy '{p.policy}' and cannot be switched by a reaction "
                              "(only 'live' and 'tighten' parameters change mid-motion)")
        if name not in SWITCHABLE:
            raise SwitchError(f"{what}: {name} rebuilds a part of the loop and cannot be switched by a reaction; "
                              f"change it with PATCH /config. Switchable: {', '.join(sorted(SWITCHABLE))}")
        try:
            v = p.check(value)
        except ValueError as exc:
            raise SwitchError(f"{what}: {exc}") from exc
        if p.policy == "tighten":
            bound = startup.get(name)
            if isinstance(bound, int | float) and v > bound:
                raise SwitchError(f"{what}: {name} may be tightened at run time, never loosened beyond its "
                                  f"startup value ({bound:g})")
        upper = {"stiffness": max_stiffness, "damping": max_damping}.get(name)
        if upper is not None:
            a = np.asarray(v, dtype=float)
            bad = [i for i in range(len(a)) if a[i] > upper[i]]
            if bad:
                raise SwitchError(f"{what}: {name} axis {bad[0]} = {a[bad[0]]:g} is outside [0, "
                                  f"{upper[bad[0]]:g}] (the bounds set at startup)")
        out[name] = v
    return out


class VectorRamp:
    """Attributes ramped from their values now to new ones with the smooth step; each target is
    (a function returning the object — the loop's law may be swapped meanwhile —, its attribute, the new value)."""

    def __init__(self, targets: list[tuple[Callable[[], Any], str, Any]], duration: float) -> None:
        self._r = [(obj, attr, np.array(getattr(obj(), attr), dtype=float), np.asarray(v, dtype=float))
                   for obj, attr, v in targets]
        self.duration, self.t = float(duration), 0.0

    @property
    def done(self) -> bool:
        return self.t >= self.duration

    def remaining(self) -> list[tuple[Callable[[], Any], str, Any]]:
        """The targets (object, attribute, final value), for a ramp that takes over from this one."""
        return [(obj, attr, v1) for obj, attr, _, v1 in self._r]

    def step(self, dt: float) -> None:
        self.t = min(self.t + dt, self.duration)
        tau = 1.0 if self.duration == 0 else self.t / self.duration
        s = tau * tau * (3.0 - 2.0 * tau)
        for obj, attr, v0, v1 in self._r:
            setattr(obj(), attr, v0 + s * (v1 - v0))


def apply_switch(loop: LoopHost, task: TaskSpace, changes: dict[str, Any], ramp_time: float) -> None:
    """Make the (checked) ``changes`` in the loop thread, now (the gains start their ramp now)."""
    law = loop.law
    if "stiffness" in changes or "damping" in changes:
        m = law.motion
        k1 = np.asarray(changes.get("stiffness", m.stiffness), dtype=float)
        d1 = np.asarray(changes.get("damping", m.damping), dtype=float)
        task.ramp = GainRamp(m.stiffness.copy(), m.damping.copy(), k1, d1, ramp_time)
    parts: dict[str, Callable[[], Any]] = {"force_gain": lambda: loop.law.force, "twist_gain": lambda: loop.law.twist}
    others = [(part, "gain", changes[n]) for n, part in parts.items() if n in changes]
    if others:
        task.vector_ramp = VectorRamp(others, ramp_time)
    for n in _LOOP:
        if n in changes:
            setattr(loop, n, int(changes[n]) if n == "telemetry_decimation" else float(changes[n]))
    for n, attr in _FILTER.items():
        if n in changes:
            setattr(loop.filter, attr, float(changes[n]))
    if loop.posture is not None:
        for n, attr in _POSTURE.items():
            if n in changes:
                setattr(loop.posture, attr, np.full(loop.robot.dof, float(changes[n])))
    if any(n in changes for n in _MOVES):
        task.switch_move_limits(changes)


def describe_switch(mode: str | None, changes: dict[str, Any] | None, ramp_time: float) -> str:
    parts = [f"mode {mode}"] if mode else []
    for n, v in (changes or {}).items():
        parts.append(f"{n}={_show(v)}" + (f" over {ramp_time:g} s" if n in RAMPED else ""))
    return ", ".join(parts)


def _show(v: Any) -> str:
    if isinstance(v, list | tuple | np.ndarray):
        return "[" + ", ".join(f"{float(x):g}" for x in v) + "]"
    return f"{v:g}" if isinstance(v, float) and math.isfinite(v) else str(v)
