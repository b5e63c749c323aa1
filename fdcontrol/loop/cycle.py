"""ControlLoop: one fixed-rate cycle of read → sense → law and task → map → limits → send → publish.

Inputs are latest-wins slots (an immutable object swapped by reference — no queue, no
lock on the hot path). Each cycle publishes an immutable :class:`LoopState`.

A cycle (period dt = 1/rate — a loop paced by a robot's clock takes each cycle's dt from the robot:
its time since the last state, 2 ms after a missed 1 ms cycle, fdcontrol.loop.paced — handed to every
stage as ``c.dt``) first applies the changes queued by
:meth:`ControlLoop.reconfigure` (a cycle boundary: no cycle sees half of a change), then runs its
stages in order (:mod:`fdcontrol.loop.stages`, composed from the configured parts — a part that is
not configured is not in the list):

1. read the driver (q, q̇), then the io's requests (``io.poll``: hold, stop; an io without an ``inputs``
   hook also its streamed inputs here); update the cycle's one
   :class:`~fdcontrol.model.configuration.Configuration` (pose, J and, for the FD solver, the
   Cholesky factor of H of its virtual model) — the control law, the solver, the null-space
   loads, the limits and the telemetry all read it; read the wrench sensor and filter it (``WrenchFilter``);
   then the streamed inputs (``io.inputs``: the newest wrench, also one that arrived meanwhile),
2. f_c = control law (mode) + the streamed wrench (+ the twist-tracking term for a streamed
   twist); a streamed input counts as zero and the loop holds when it is older than
   ``command_timeout`` (watchdog),
3. (q_ref, q̇) = solver.step(q, q̇_state, f_c, dt, τ) in ``substeps`` virtual sub-steps, with
   τ the null-space posture and link loads (fdcontrol.control.posture, fdcontrol.control.link_loads),
4. q̇_ref = safety limits(q̇); q_ref = q + dt q̇_ref; q̇_state = q̇_ref (anti-windup),
5. send; a non-finite value anywhere holds the robot and records a fault — it never
   reaches the driver.

Activation is jump-free: q̇_state starts at zero and the first reference is the measured q.

Braking: hold, watchdog, stop, a fault and the end of every live input (fdcontrol.loop.liveness)
all command q̇ = 0 *through the limits*, bounded by the braking profile fixed when the stop began
(fdcontrol.limits.braking: never softer than the limits the loop was built with), so the reference
decelerates at a·dt per cycle whatever was changed at run time; ``stop()`` brakes to standstill
first and only then ends the thread. Every stop ends the goals (target, actions, move). When a cycle raises (driver or
bug), the loop records the fault, holds, and sends one braking step itself (if the driver
still takes commands); nothing in that path can end the loop thread.
"""

from __future__ import annotations

import contextlib
import copy
import math
import operator
import os
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from fdcontrol.control import inputs
from fdcontrol.control.inputs import InputError, check_wrench
from fdcontrol.control.law import ControlLaw, WrenchFilter
from fdcontrol.control.link_loads import LinkLoads
from fdcontrol.control.posture import PostureTask
from fdcontrol.control.task import TaskSpace
from fdcontrol.control.twist import TwistError, check_twist
from fdcontrol.drivers.base import RobotDriver
from fdcontrol.limits.braking import BrakingProfile
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.action import Action, ActionInput
from fdcontrol.loop.liveness import LOAD_QUIET, Following, Liveness
from fdcontrol.loop.paced import run_paced
from fdcontrol.loop.solvers import Solver
from fdcontrol.loop.stages import Frame, Stage, compose
from fdcontrol.loop.state import NAMES, LoopState  # declared once, with units: fdcontrol/loop/state.py
from fdcontrol.model.configuration import Configuration
from fdcontrol.model.reach import reach
from fdcontrol.model.robot import RobotModel
from fdcontrol.model.spatial import finite, rotate6

STATS_WINDOW = 5000
#: what :meth:`ControlLoop.reconfigure` may change at run time (loop attribute names)
RECONFIGURABLE = frozenset({"law", "solver", "limits", "filter", "posture", "link_loads", "command_timeout",
                            "telemetry_decimation", "max_force", "max_torque", "max_tracking_error", "spin",
                            "sensor_timeout", "rest", "rezero", "task"})
PARAMS = inputs.PARAMS  # the loop's parameters, declared below the loop (fdcontrol.control.inputs)


@dataclass
class Command:
    """Latest streamed input: a wrench (or twist) in the base frame, its sequence number, arrival time.

    ``t`` is on the loop's clock: given by the caller (the service stamps with ``time.monotonic()``,
    the clock of the threaded loop), or None until the loop's next cycle stamps it with that
    cycle's ``now`` (its receipt) — so a loop stepped on simulated time never compares a
    simulated ``now`` with a wall-clock stamp.
    """

    wrench: np.ndarray
    seq: int
    t: float | None


class Stats:
    """Ring buffers of cycle compute time and period error (s); no allocation per cycle."""

    def __init__(self, n: int = STATS_WINDOW) -> None:
        self.compute = np.zeros(n)
        self.period_error = np.zeros(n)
        self.n, self.count, self.overruns = n, 0, 0
        self.integrator_nonconverged = 0  # cycles whose adaptive integrator ran out of sub-steps
        self.clock = None  # a driver that owns the clock: its clock_stats() (robot success rate, missed cycles)

    def record(self, compute: float, period_error: float, period: float) -> None:
        i = self.count % self.n
        self.compute[i], self.period_error[i] = compute, period_error
        self.count += 1
        if compute > period or period_error > period:
            self.overruns += 1

    def summary(self) -> dict[str, float | int]:
        k = min(self.count, self.n)
        c, e = self.compute[:k].copy(), np.abs(self.period_error[:k].copy())
        def pct(a: np.ndarray, p: float) -> float:
            return float(np.percentile(a, p)) if k else 0.0
        return {"cycles": self.count, "overruns": self.overruns, "window": k,
                "compute_p50_us": pct(c, 50) * 1e6, "compute_p99_us": pct(c, 99) * 1e6,
                "compute_max_us": float(c.max() * 1e6) if k else 0.0,
                "period_error_p50_us": pct(e, 50) * 1e6, "period_error_p99_us": pct(e, 99) * 1e6,
                "period_error_max_us": float(e.max() * 1e6) if k else 0.0,
                "integrator_nonconverged": self.integrator_nonconverged,
                **(self.clock() if self.clock is not None else {})}


class SensorLoaded(InputError):
    """Zeroing the sensor refused: it reads a load, or read one within the last ``LOAD_QUIET`` s."""


class LoopIO(Protocol):
    """Optional hooks: ``poll`` at each cycle's start (requests, inputs), ``publish`` after it (state); an io
    with an ``inputs(loop)`` method has it called right before the cycle's inputs stage (the streamed inputs
    taken as late as the cycle allows: fdcontrol.loop.stages.Inputs)."""

    def poll(self, loop: ControlLoop) -> None: ...

    def publish(self, loop: ControlLoop, state: LoopState) -> None: ...


def _part(name: str) -> Any:
    """A part of the loop whose assignment composes the cycle's stages again (at the next cycle boundary)."""
    key = "_part_" + name

    def put(self: ControlLoop, value: Any) -> None:
        self.__dict__[key] = value
        self._wake = True

    # read by every cycle's stages (~9 reads a cycle): a getter in C (attrgetter reads the instance's attribute
    # of that name) costs a third of a Python function's call
    return property(operator.attrgetter(key), put,
                    doc=f"the loop's {name}; assigning it recomposes the stages at the next cycle")


class ControlLoop:
    """The control loop: one cycle is a list of stages (fdcontrol.loop.stages) built from its parts.

    Build it with :func:`fdcontrol.loop.build_loop` from the declared parameters (the service does), or
    from parts. ``stages``: further :class:`~fdcontrol.loop.stages.Stage` objects for every cycle."""

    law = _part("law")
    solver = _part("solver")
    posture = _part("posture")
    link_loads = _part("link_loads")
    task = _part("task")
    action = _part("action")

    def __init__(self, robot: RobotModel, driver: RobotDriver, solver: Solver,
                 law: ControlLaw | None = None, limits: SafetyLimits | None = None,
                 wrench_filter: WrenchFilter | None = None, rate: float = 500.0,
                 command_timeout: float = 0.1, max_force: float = 500.0,
                 max_torque: float = 50.0, realtime: bool = False, spin: float = 0.0,
                 telemetry_decimation: int = 10, posture: PostureTask | None = None,
                 link_loads: LinkLoads | None = None, sensor_timeout: float = 0.05,
                 task: TaskSpace | None = None, stages: tuple[Stage, ...] | list[Stage] = ()) -> None:
        if not isinstance(driver, RobotDriver):
            raise TypeError(f"{type(driver).__name__} is not a subclass of fdcontrol.drivers.RobotDriver")
        if not isinstance(solver, Solver):
            raise TypeError(f"{type(solver).__name__} is not a subclass of fdcontrol.loop.solvers.Solver")
        if driver.owns_clock and driver.clock_period:  # the robot's clock sets the period
            rate = 1.0 / float(driver.clock_period)
        if not (math.isfinite(rate) and 1.0 <= rate <= 5000.0):
            raise ValueError("rate must be within [1, 5000] Hz")
        _check_params({"command_timeout": command_timeout, "telemetry_decimation": telemetry_decimation,
                       "sensor_timeout": sensor_timeout, "max_force": max_force, "max_torque": max_torque})
        self.robot, self.driver, self.solver = robot, driver, solver
        self.law = law or ControlLaw()
        self.limits = limits or SafetyLimits.from_robot(robot)
        self.filter = wrench_filter or WrenchFilter()
        self.rate, self.period = float(rate), 1.0 / rate
        self.command_timeout = float(command_timeout)
        self.sensor_timeout = float(sensor_timeout)
        self._sensor_at = -math.inf  # the loop's time of the newest sensor reading
        self.max_force, self.max_torque = float(max_force), float(max_torque)
        self.realtime = realtime
        self.spin = float(spin)
        self.telemetry_decimation = int(telemetry_decimation)  # σmin(J), κ(H) every n-th cycle (~30 µs)
        self.max_tracking_error = 0.05  # rad, position interfaces only (see _position_reference)
        self._q_ref: np.ndarray | None = None  # the last position reference (position interfaces)
        self.stats = Stats()
        self._jacobi = _jacobi_kernels()  # the telemetry's compiled σmin(J), κ(H), or None (numba missing)
        self._jacobi_work: dict[tuple[int, ...], np.ndarray] = {}  # their scratch by shape (filled by each call)
        self.stats.clock = driver.clock_stats if driver.owns_clock else None
        self._late = 0.0  # the threaded loop's period error for the cycle step() is running
        self._command: Command | None = None
        self._twist: Command | None = None
        self.posture, self.link_loads = posture, link_loads  # null-space loads (fdcontrol.control.posture)
        self.task = task  # workspace, reactions, moves, gain ramps (fdcontrol.control.task)
        self._target: np.ndarray | None = None
        self.action: ActionInput | None = None  # a policy's goals, interpolated (fdcontrol.loop.action)
        self._hold_request = False
        self._stop_request = False
        self._stops_ended = 0  # stops ended (the stopped state published): by the loop thread or by stop()
        self._zero_request = False
        self._thread: threading.Thread | None = None
        self._running = threading.Event()
        self.io: LoopIO | None = None
        self.exchange = driver.exchange if driver.has_exchange else None  # the driver's own inputs/outputs
        self.fault: str | None = None
        self.fault_at = math.nan  # the loop's time.monotonic() when the current fault was recorded
        self.last_cycle_at = 0.0  # time.monotonic() of the last cycle, 0 before the first
        self._pending: dict[str, object] = {}  # reconfigure() → the loop thread, at a cycle boundary
        self._pending_done: list[threading.Event] = []
        self._pending_lock = threading.Lock()
        self.config = self._configuration()
        self._zero6 = np.zeros(6)
        # stops brake at least as hard as the limits this loop was built with (fdcontrol.limits.braking)
        self.braking = BrakingProfile(self.limits.max_acceleration)
        self.liveness = Liveness()
        self.following = Following()
        self._carry_bias: WrenchFilter | None = None  # the sensor model before a change: its bias carried over
        self._zero_dof = np.zeros(robot.dof)
        for st in stages:
            if not isinstance(st, Stage):
                raise TypeError(f"{type(st).__name__} is not a subclass of fdcontrol.loop.stages.Stage")
        self.extra_stages: tuple[Stage, ...] = tuple(stages)  # added to the composed stages (fdcontrol.loop.stages)
        self._frame = Frame()
        self._wake = False  # the parts changed: compose the stages again at the next cycle boundary
        self.stages: list[Stage] = self._compose()
        self._reset_state()
        js = driver.read()
        self.state = self._publish(js.t, js.q, js.qd, js.q, np.zeros(robot.dof),
                                   robot.pose(js.q), np.zeros(6), np.zeros(6), "idle", 0.0)

    # ------------------------------------------------------------------ inputs
    def set_wrench(self, wrench: np.ndarray | list[float], frame: str = "base",
                   seq: int | None = None, t: float | None = None) -> None:
        """Latest-wins streamed wrench [F; τ]; ``frame`` "tool" is rotated into the base.

        `t` is the arrival time the watchdog measures from, on the loop's clock (``time.monotonic()``
        for the threaded loop, the ``now`` given to :meth:`step` in a simulation); by default the
        next cycle stamps the command with its own ``now`` (receipt by the loop).
        """
        w = check_wrench(wrench, self.max_force, self.max_torque, frame)
        if frame == "tool":
            w = rotate6(self.state.tip_pose[:3, :3], w)
        last = self._command.seq if self._command else 0
        self._command = Command(w, last + 1 if seq is None else int(seq), t)
        self._twist = _fresh(self._twist, t, self.command_timeout)

    def set_twist(self, twist: np.ndarray | list[float], frame: str = "base",
                  seq: int | None = None, t: float | None = None) -> None:
        """Latest-wins commanded tip twist [v; ω] (m/s, rad/s) for the velocity-tracking term
        (fdcontrol.control.twist); same watchdog as wrenches. A stale wrench stream is dropped."""
        try:
            v = check_twist(twist, frame)
        except TwistError as exc:
            raise InputError(str(exc)) from exc
        if frame == "tool":
            v = rotate6(self.state.tip_pose[:3, :3], v)
        last = self._twist.seq if self._twist else 0
        self._twist = Command(v, last + 1 if seq is None else int(seq), t)
        self._command = _fresh(self._command, t, self.command_timeout)

    def set_target(self, pose: np.ndarray | None) -> None:
        """Target pose (4×4, tip in base) for motion / compliance; None clears it.

        A new target also drops the last streamed wrench: after a stream went quiet (watchdog
        tripped, holding) a target sent on purpose moves the arm again.
        """
        if pose is None:
            self._target = None
            self.action = None
            self._wake = True
            return
        T = self._checked_goal(pose, "target")
        self._target = T
        self.action = None  # a target set directly replaces a policy's interpolated goals
        if self.task is not None and self.task.move is not None:  # an explicit target ends a move
            self.task.move.cancel()
        self._command = None  # a fresh target is fresh input: a stale wrench no longer holds the arm
        self._twist = None
        self._wake = True  # (the action stage leaves the cycle)

    def set_action(self, pose: np.ndarray, step: float, seq: int, t: float | None = None) -> None:
        """A policy's goal pose (4×4, tip in base), reached over ``step`` s by the target interpolator
        (fdcontrol.control.interpolator); like a target, it drops a stale wrench or twist."""
        T = self._checked_goal(pose, "action pose")
        if not (math.isfinite(step) and 0 < step <= 10):
            raise InputError("action step must be in (0, 10] s")
        now = time.monotonic() if t is None else t
        if self.action is None:  # starts at rest at the current target (or the tip)
            start = self._target if self._target is not None else self.state.tip_pose
            self.action = ActionInput(start, now)
        self.action.put(Action(T.copy(), float(step), int(seq), now))
        self._wake = True  # (the action stage joins the cycle)
        self._target = T.copy()
        self._command = None
        self._twist = None

    def _checked_goal(self, pose: np.ndarray, what: str) -> np.ndarray:
        """A finite homogeneous pose within the arm's reach (and the workspace, when one is set), else InputError."""
        T = _checked_pose(pose, what)
        d, r = float(np.linalg.norm(T[:3, 3])), reach(self.robot)
        if d > r:
            raise InputError(f"{what} position is {d:.3g} m from the base, beyond the arm's reach ({r:.3f} m)")
        ws = self.task.workspace if self.task is not None else None
        if ws is not None:
            bad = ws.violations({what: T[:3, 3]})
            if bad:
                raise InputError("out of the workspace: " + "; ".join(bad[:3]))
        return T

    def hold(self, on: bool = True) -> None:
        """Decelerate to standstill within the acceleration limit and stay there."""
        self._hold_request = on
        if not on:  # an explicit release also drops a stale wrench (the watchdog re-arms on the next)
            self.fault, self.fault_at = None, math.nan
            self._command = None
            self._twist = None
            self.end_goals()  # a release starts from rest: a goal set before the hold does not resume
            self.following.reset()

    def end_goals(self) -> None:
        """Drop the target, a policy's actions and a move: after a stop, only a new request moves the arm."""
        self._target = None
        self.action = None
        self._goals_ended += 1
        task = self.task
        if task is not None and task.move is not None:
            task.move.cancel()

    def switch_mode(self, mode: str) -> None:
        """A new control law mode (a reaction's switch, in the loop thread): like every change of what the law
        means it applies at standstill — at once when the arm is at rest, else the loop brakes first — and
        resumes from rest without the goals of the old mode."""
        if mode == self.law.mode:
            return
        law = copy.copy(self.law)
        law.mode = mode
        self.reconfigure(law=law, rest=True)

    def zero_sensor(self) -> None:
        """Request sensor bias zeroing: on the next cycle at standstill (every reference velocity zero) —
        a bias taken under a moving arm would hold its inertial forces.

        Refused (:class:`SensorLoaded`) while the sensor reads a load or read one within the last
        ``LOAD_QUIET`` s (fdcontrol.loop.liveness): a bias taken under a hand would make the hand's
        force a push of its own once the hand lets go. Checked again when the bias is taken."""
        why = self.liveness.loaded_reason(self.last_cycle_at if self.cycle else math.nan)
        if why:
            raise SensorLoaded(f"the sensor is not zeroed while {why}: let go of the tool, wait "
                               f"{LOAD_QUIET:g} s, then zero it")
        self._zero_request = True

    # ------------------------------------------------------------------ run-time changes
    def reconfigure(self, *, reactions: int | None = None, **changes: object) -> threading.Event:
        """Change parts and parameters (names in ``RECONFIGURABLE``) as one unit.

        While the loop thread runs, the changes are queued and the thread applies all of them
        together before its next cycle; otherwise they apply now. The returned event is set
        once they are applied; its ``queued_cycle`` and ``applied_cycle`` are the loop's cycle
        counts at both moments (applied at the next cycle boundary: they differ by at most 1).
        Build new parts (law, solver, limits…) outside, pass them here:
        the loop only swaps references.

        ``rest=True`` marks a change of what the sensor or the law means (the ``holding`` policy,
        fdcontrol.params): the loop brakes to standstill within its limits first, applies the
        changes there and resumes from rest, with fresh inputs (the stream's next command re-arms
        the watchdog); with ``rezero=True`` too (the sensor model changed: tool, sign, sensor pose)
        it takes the sensor bias again at the held pose.

        ``reactions``: the task space's firing count the changes were built at. A rule that fires
        between their build and the swap acts on the parts in the loop (a switch sets the law's mode
        or gains there), which the new parts, built before it, would silently undo: when the count
        has moved on at the swap the changes are refused whole — nothing is applied, and the event's
        ``refused`` is the firing that came between (fdcontrol.control.reactions.Event), its
        ``applied_cycle`` the cycle of the refusal.
        """
        unknown = set(changes) - RECONFIGURABLE
        if unknown:
            raise ValueError(f"cannot reconfigure {', '.join(sorted(unknown))}; "
                             f"expected any of {', '.join(sorted(RECONFIGURABLE))}")
        _check_params(changes)
        if "solver" in changes:  # built here, not in the loop thread (pinocchio data, a first pass)
            solver = changes["solver"]
            if not isinstance(solver, Solver):
                raise TypeError(f"{type(solver).__name__} is not a subclass of fdcontrol.loop.solvers.Solver")
            changes = {**changes, "config": Configuration(self.robot, virtual=solver.virtual)}
        done = threading.Event()
        done.refused = None  # type: ignore[attr-defined]
        with self._pending_lock:
            done.queued_cycle = self.cycle  # type: ignore[attr-defined]
            if reactions is None:
                self._pending.update(changes)
            else:  # kept apart: only this batch is refused (a rule's own switch queued beside it is not)
                self._pending.setdefault("guarded", []).append((int(reactions), changes, done))  # type: ignore[attr-defined]
                if changes.get("rest"):
                    self._pending["rest_wait"] = True  # the cycles brake for it before the swap
            self._pending_done.append(done)
            thread = self._thread
            deferred = self.running and thread is not None and thread.is_alive() \
                and thread is not threading.current_thread()
        if not deferred and not (changes.get("rest") and np.any(self.qd_ref)):
            self._apply_pending()  # (a change of meaning under a moving arm waits for the cycles' braking)
        return done

    def _apply_pending(self) -> None:
        with self._pending_lock:
            changes, done = self._pending, self._pending_done
            self._pending, self._pending_done = {}, []
        changes.pop("rest_wait", None)
        rest, rezero = changes.pop("rest", False), changes.pop("rezero", False)
        task = self.task
        for seen, batch, event in changes.pop("guarded", ()):  # type: ignore[attr-defined]
            if task is not None and task.reactions.count != seen:  # a rule fired since the batch was built
                event.refused = task.reactions.last
                event.applied_cycle = self.cycle
                event.set()
                done.remove(event)
                continue
            batch = dict(batch)
            rest, rezero = rest or batch.pop("rest", False), rezero or batch.pop("rezero", False)
            changes.update(batch)
        if rezero and "filter" in changes and self._carry_bias is None:
            # the sensor model changed: its bias is carried over, not re-taken (from the last model that read
            # the sensor: several changes before the next reading carry from the first one's)
            self._carry_bias = self.filter
        for name, value in changes.items():
            setattr(self, name, _SCALARS[name](value) if name in _SCALARS else value)  # type: ignore[operator]
        if rest:  # what the sensor or the law means changed (at standstill): resume from rest, fresh inputs
            self.qd_state = np.zeros(self.robot.dof)
            self._command = self._twist = None
            self.end_goals()  # the old mode's target or move is not a request for the new one
        self.stages = self._compose()  # the parts changed: so may the stages
        for e in done:
            e.applied_cycle = self.cycle  # type: ignore[attr-defined]
            e.set()

    def _compose(self) -> list[Stage]:
        """The stages of the next cycles from the parts now (fdcontrol.loop.stages.compose)."""
        self._wake = False  # first: a change made while composing wakes the next cycle again
        task = self.task
        if task is not None:
            task.notify = self._notify
        self.law.notify = self._notify  # a new mode may read the sensor (its watchdog joins the cycle)
        return compose(self, self.extra_stages)

    def _notify(self) -> None:
        """A part started or stopped being used (from any thread): compose at the next cycle boundary."""
        self._wake = True

    def _record_fault(self, message: str, now: float) -> None:
        """The fault and, when it began, its time on the loop's clock."""
        self.fault = message
        self.fault_at = now if math.isnan(self.fault_at) else self.fault_at

    def _configuration(self) -> Configuration:
        """One Configuration per loop, on the FD solver's virtual model when there is one."""
        return Configuration(self.robot, virtual=self.solver.virtual)

    # ------------------------------------------------------------------ cycle
    def _reset_state(self) -> None:
        self.qd_state = np.zeros(self.robot.dof)
        self.qd_ref = np.zeros(self.robot.dof)
        self.cycle = 0
        self._held = False
        self._goals_ended = 0
        self.robot_t: float | None = None  # a robot-paced loop: the robot's time of the last state (paced.py)

    def step(self, now: float | None = None) -> LoopState:
        """One control cycle (public so tests and simulations can run the loop synchronously).

        ``now`` (s) is the loop's clock for this cycle (default ``time.monotonic()``): a simulation
        passes its own time. Commands set without a time are stamped with the ``now`` of the
        first cycle that sees them. Every call is counted in :attr:`stats` (compute time; the
        period error only when the loop's own thread schedules the cycles).
        """
        start = time.perf_counter()
        try:
            return self._cycle(now)
        finally:
            self.stats.record(time.perf_counter() - start, self._late, self.period)
            self._late = 0.0

    def _cycle(self, now: float | None) -> LoopState:
        """One cycle: its stages in order (fdcontrol.loop.stages), each given this cycle's Frame."""
        c = self._frame
        c.braking = False
        if self._pending:  # a cycle boundary: everything reconfigure() queued, at once
            if (self._pending.get("rest") or self._pending.get("rest_wait")) and self.qd_ref.any():
                c.braking = True  # a change of meaning waits for standstill: this cycle brakes
            else:
                self._apply_pending()
        if self._wake:
            self.stages = self._compose()
        c.dt = self.period  # the cycle's period (s): every stage reads it from the frame
        c.now, c.tau, c.nt = now, None, None
        for stage in self.stages:
            stage.run(self, c)
        return self.state

    def _telemetry(self, conf: Configuration) -> tuple[float, float]:
        """σmin(J) and κ(H), each every ``telemetry_decimation``-th cycle, half a period apart (two
        decompositions never load the same cycle); both on the first cycle. By Jacobi rotations, compiled
        (fdcontrol.model.jacobi: ~4 µs each in the cycle where LAPACK's took 13–19 µs), else — numba missing, a
        value not finite — by the Configuration's LAPACK calls; the two agree to rounding."""
        n, k = self.telemetry_decimation, self.cycle - 1
        r = k % n
        if k and r and r != n // 2:  # most cycles: neither, the last state's values
            state = self.state
            return state.sigma_min_j, state.kappa_h
        first = k == 0
        s = self._sigma_min(conf) if first or r == 0 else self.state.sigma_min_j
        kh = self._kappa_h(conf) if first or r == n // 2 else self.state.kappa_h
        return s, kh

    def _sigma_min(self, conf: Configuration) -> float:
        kernels = self._jacobi
        if kernels is not None:
            J = conf.jacobian
            s = kernels[0](J, self._scratch((min(J.shape), max(J.shape))))
            if s == s:  # NaN: not finite or not converged, LAPACK answers (or raises) as ever
                return s
        return conf.sigma_min

    def _kappa_h(self, conf: Configuration) -> float:
        kernels = self._jacobi
        if kernels is not None and conf.virtual is not None:
            H = conf.inertia
            kh = kernels[1](H, self._scratch(H.shape))
            if kh == kh:
                return kh
        return conf.kappa_h

    def _scratch(self, shape: tuple[int, ...]) -> np.ndarray:
        """The Jacobi kernels' work space of that shape, kept: they write it in full before reading it."""
        w = self._jacobi_work.get(shape)
        if w is None:
            w = self._jacobi_work[shape] = np.empty(shape)
        return w

    def commanded_position(self) -> np.ndarray | None:
        """Where the robot's controller drives the joints now (rad): the driver's
        :meth:`~fdcontrol.drivers.base.RobotDriver.commanded_position`, else on a position interface the
        reference sent the cycle before; None on a velocity interface (the following check's catching up)."""
        q_c = self.driver.commanded_position()
        if q_c is None and self.driver.interface == "position":
            return self._q_ref
        return q_c

    def _position_reference(self, q: np.ndarray, qd_ref: np.ndarray, dt: float,
                            holding: bool) -> tuple[np.ndarray, bool]:
        """q_ref sent with q̇_ref. Velocity interfaces: q + dt q̇_ref. Position interfaces
        (``driver.interface == "position"``) integrate the previous reference,
        q_ref,k = q_ref,k−1 + dt q̇_ref (from q itself a servoed arm would sag under load);
        the tracking error is bounded: q_ref = q + clip(q_ref − q, ±``max_tracking_error``) (rad),
        so an arm held back (contact, torque limit) is pushed with at most k_p·e_max per joint
        and resumes from where it is, without a jump, when released."""
        if self.driver.interface != "position":
            return q + dt * qd_ref, holding
        prev = self._q_ref
        q_ref = q.copy() if self.cycle == 0 or prev is None else prev + dt * qd_ref
        e = self.max_tracking_error
        q_ref = q + np.clip(q_ref - q, -e, e)
        self._q_ref = q_ref
        return q_ref, holding

    def _publish(self, t, q, qd, q_ref, qd_ref, pose, fc, f_meas, watchdog, sigma,
                 holding: bool = False, seq: int = 0, kappa_h: float = math.nan,
                 twist: np.ndarray | None = None, now: float = math.nan) -> LoopState:
        parts = self.__dict__  # the parts' own slots (_part): one lookup each instead of a property call
        solver, driver, fw = parts["_part_solver"], self.driver, self.following
        active = dict(self.limits.active)
        c = solver.constraints
        active["virtual_joint_limit"] = c is not None and c.engaged
        c_vm = solver.virtual
        # the state's dict: a copy of the declared defaults (one copy of a table that holds every field, in
        # declaration order) with this cycle's values written over it — a display of 39 entries is built in
        # three parts and merged, twice the cost; tests/test_state.py checks that this is every field
        d = _STATE_DEFAULTS.copy()
        d["t"] = t
        d["cycle"] = self.cycle
        d["q"] = q
        d["qd"] = qd
        d["q_ref"] = q_ref
        d["qd_ref"] = qd_ref
        d["tip_pose"] = pose
        d["wrench"] = fc
        d["f_measured"] = f_meas
        d["mode"] = parts["_part_law"].mode
        d["running"] = self._running.is_set()
        d["holding"] = holding
        d["watchdog"] = watchdog
        d["seq_ack"] = seq
        d["fault"] = self.fault
        d["sigma_min_j"] = sigma
        d["limits_active"] = active
        d["kappa_h"] = kappa_h
        posture = parts["_part_posture"]
        if posture is not None:
            d["posture_distance"] = posture.distance(q)
        ll = parts["_part_link_loads"]
        if ll is not None and ll.loads:
            d["link_clearance"] = ll.clearance()
        d["speed_scaling"] = driver.speed_scaling
        d["safety_mode"] = driver.safety_mode
        d["tip_twist"] = self._zero6 if twist is None else twist
        d["stamp"] = now
        action = parts["_part_action"]
        if action is not None:
            d["action_seq"] = action.seq
            d["action_used_at"] = action.used_at
        task = parts["_part_task"]
        if task is not None:
            (d["workspace_distance"], d["move_status"], d["move_progress"], d["reaction_count"],
             d["reaction_event"]) = task.telemetry()
        d["fault_at"] = self.fault_at
        if task is not None:
            d["link_distance"], d["link_pair"] = task.link_telemetry()
        if c_vm is not None:
            d["gamma"] = c_vm.gamma
        d["following"] = fw.ok
        d["follow_joint"] = fw.joint
        d["follow_error"] = fw.error
        d["sensor_status"] = driver.sensor_status
        s = _new_state(LoopState)  # state_of(d), inlined: the frozen instance whose dict d becomes
        _set_dict(s, "__dict__", d)
        return s

    # ------------------------------------------------------------------ thread
    @property
    def running(self) -> bool:
        return self._running.is_set()

    def start(self) -> None:
        """Start the fixed-rate thread; activation never moves the robot."""
        if self.running:
            return
        old = self._thread
        if old is not None and old is not threading.current_thread():
            old.join(1.0)  # a thread that stopped itself may still be publishing its stopped state
        self._reset_state()
        self.fault, self.fault_at = None, math.nan
        self._stop_request = False
        self._running.set()
        self._thread = threading.Thread(target=self._run, name="fdcontrol-loop", daemon=True)
        self._thread.start()

    def braking_time(self) -> float:
        """Time (s) to bring the current reference to zero with the braking profile (never softer than the
        limits the loop was built with, whatever was changed since: fdcontrol.limits.braking)."""
        return self.braking.time(self.qd_ref, self.limits.max_acceleration)

    def request_stop(self) -> None:
        """Stop without waiting (any thread): the loop thread brakes to standstill with the braking profile
        fixed at the stop's first cycle, ends itself and publishes the stopped state (the service's stop
        through shared memory, fdcontrol.server.channel); a no-op while the loop is stopped."""
        if self.running:
            self._stop_request = True

    def stop(self, timeout: float = 2.0) -> None:
        """Brake to standstill within the acceleration limit, then end the thread."""
        thread = self._thread
        ended = self._stops_ended
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            self._stop_request = True  # the thread brakes through the limits and ends at rest
            thread.join(timeout + self.braking_time() + 10 * self.period)
        self._running.clear()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            self._thread = None
        if self._stops_ended == ended:  # not ended by the loop thread itself (it ran _stopped at rest)
            self._stopped()

    def _stopped(self) -> None:
        """The loop has ended: a zero reference at the measured pose, the stopped state published (by the
        thread that stopped it, or by the loop thread itself after :meth:`request_stop`)."""
        self._stop_request = False
        if self._pending:  # queued for a thread that has ended
            self._apply_pending()
        self.qd_ref = np.zeros(self.robot.dof)
        try:
            js = self.driver.read()
            self.driver.send(js.q, self.qd_ref)
            self.state = replace(self.state, running=False, q=js.q, qd=js.qd, q_ref=js.q,
                                 qd_ref=self.qd_ref)
        except Exception as exc:  # a dead driver: still stop, and say why
            self.state = replace(self.state, running=False, qd_ref=self.qd_ref,
                                 fault=self.fault or f"{type(exc).__name__}: {exc}")
        if self.io is not None:
            self.io.publish(self, self.state)
        if self.exchange is not None:
            with contextlib.suppress(Exception):
                self.exchange(self, self.state)
        self._stops_ended += 1

    def _on_exception(self, exc: Exception) -> None:
        _hold_after(self, exc)

    def _run(self) -> None:
        if self.realtime:
            _try_realtime()
        if self.driver.owns_clock:  # the driver's read() is the tick (fdcontrol/loop/paced.py)
            run_paced(self, _report)
        else:
            self._run_fixed()
        if self._stop_request and not self._running.is_set():  # braked to standstill for a stop: the loop
            try:  # thread ends it itself, so a stop needs nobody to wait on it (request_stop)
                self._stopped()
            except Exception as exc:
                _report(f"ending the stop failed: {type(exc).__name__}: {exc}")

    def _run_fixed(self) -> None:
        period, clock = self.period, time.perf_counter
        # the driver's work between cycles (a simulator's physics), after the cycle and before the next one: not in
        # the cycle's compute time, but in this thread's, so a late next cycle still shows in the period error
        idle = self.driver.between_cycles if self.driver.has_between_cycles else None
        idle_took = math.inf  # s: the recent runs of `idle`, averaged with the weight IDLE_WEIGHT (its lead, below)
        next_t = clock()
        while self._running.is_set():
            start = clock()
            err = start - next_t
            self._late = err
            try:
                self.step()
            except Exception as exc:  # a failing driver or a bug holds the robot, loudly
                try:
                    self._on_exception(exc)
                except Exception as inner:  # the fault path itself failed: keep cycling, say so
                    _report(f"fault handling failed: {type(inner).__name__}: {inner}")
            if self._stop_request and not self.qd_ref.any():  # braked to standstill: stop
                self._running.clear()
                break
            if idle is not None:
                # not right after the publish: this thread is real-time, and the process the publish woke (the
                # service's API, which hands the state on) may be waiting for this CPU; physics run now would hold
                # the state's hand-over up by their whole run. Later in the wait, leaving the next cycle half a period,
                # or 3× their recent mean run if more (at once when the cycle left less than that, and the first time)
                wait = next_t + period - max(0.5 * period, 3.0 * idle_took) - clock()
                if wait > 0:
                    time.sleep(wait)
                began = clock()
                try:
                    idle()
                except Exception as exc:  # as a failing step: hold, say why
                    try:
                        self._on_exception(exc)
                    except Exception as inner:
                        _report(f"fault handling failed: {type(inner).__name__}: {inner}")
                took = clock() - began
                idle_took = took if idle_took == math.inf else idle_took + IDLE_WEIGHT * (took - idle_took)
            end = clock()
            next_t += period
            if end > next_t + period:  # more than one period late: re-anchor, count it
                next_t = end
            remaining = next_t - clock() - self.spin
            if remaining > 0:
                time.sleep(remaining)
            while clock() < next_t:  # busy-wait the last `spin` seconds: on time, CPU warm
                pass


#: the weight of the newest run in the loop thread's mean of the driver's work between cycles (ControlLoop._run_fixed:
#: how long before the next cycle it starts that work): a lasting change counts within ~20 cycles, one slow run little
IDLE_WEIGHT = 0.05

#: the task-space fields of the state without a TaskSpace (fdcontrol.control.task.TaskSpace.telemetry)
_NO_TASK = (math.nan, "idle", math.nan, 0, None)
_NO_LINKS = (math.nan, None)  # link_distance, link_pair
#: _publish's start: every field of the state, in declaration order, at its value without the part that sets it
#: (posture, link loads, an action, a task space: _NO_TASK, _NO_LINKS; γ without an FD virtual model); the
#: fields every cycle writes hold None here
_STATE_DEFAULTS: dict[str, Any] = dict.fromkeys(NAMES)
_STATE_DEFAULTS.update(posture_distance=math.nan, link_clearance=math.nan, action_seq=0, action_used_at=math.nan,
                       gamma=math.nan, **dict(zip(("workspace_distance", "move_status", "move_progress",
                                                    "reaction_count", "reaction_event"), _NO_TASK, strict=True)),
                       **dict(zip(("link_distance", "link_pair"), _NO_LINKS, strict=True)))
_new_state, _set_dict = object.__new__, object.__setattr__
#: the scalar parameters among RECONFIGURABLE, with the type they are stored as
_SCALARS = {"telemetry_decimation": int, "command_timeout": float, "max_force": float, "max_torque": float,
            "max_tracking_error": float, "spin": float, "sensor_timeout": float}


def _jacobi_kernels() -> tuple[Any, Any] | None:
    """fdcontrol.model.jacobi's (sigma_min, condition_spd), compiled when first imported (here, as the loop is
    built: never in the loop thread), or None where numba is missing."""
    try:
        from fdcontrol.model.jacobi import condition_spd, sigma_min
    except ImportError:
        return None
    return sigma_min, condition_spd


def _check_params(changes: dict[str, object]) -> None:
    """The loop's declared parameters among `changes`, checked by their declarations (ParamError names them)."""
    inputs.check_params(changes)


def _checked_pose(pose: np.ndarray, what: str) -> np.ndarray:
    """A copy of `pose` as a finite 4×4 homogeneous transform with an orthonormal rotation, else InputError."""
    T = np.array(pose, dtype=float)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise InputError(f"{what} must be a finite 4×4 homogeneous transform")
    R = T[:3, :3]
    if not np.allclose(R @ R.T, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0:
        raise InputError(f"{what} rotation is not orthonormal")
    return T


def _fresh(c: Command | None, now: float | None, timeout: float) -> Command | None:
    """`c` unless it went stale (older than `timeout` at `now`): switching from one input
    stream to the other must not trip the watchdog on the one that was abandoned. Unstamped
    times (not yet seen by a cycle) count as fresh; stamps of two clocks are not compared."""
    if c is None or now is None or c.t is None:
        return c
    return c if now - c.t <= timeout else None


def brake_step(qd_ref: np.ndarray, amax: np.ndarray | float, dt: float) -> np.ndarray:
    """One braking step toward zero: |Δq̇| ≤ a·dt per joint (a in rad/s², dt in s)."""
    step = np.asarray(amax, dtype=float) * dt
    return qd_ref - np.clip(qd_ref, -step, step)


def _hold_after(loop: ControlLoop, exc: Exception) -> None:
    """Record the fault, hold, send one braking step if the driver still listens, publish.

    Never raises: a failing driver or a failing publish must not end the loop thread (the
    API notices a silent loop by its stale cycle time).
    """
    if loop.fault is None:  # when the fault began (a failing driver raises again every cycle)
        loop.fault_at = time.monotonic()
    loop.fault = f"{type(exc).__name__}: {exc}"[:400]
    loop._hold_request = True
    loop._held = True
    with contextlib.suppress(Exception):
        loop.end_goals()  # the input that made the cycle raise is gone: the next cycle holds without it
    loop.last_cycle_at = time.monotonic()  # the loop cycles (holding): not a stalled loop
    try:
        loop.braking.begin(loop.limits.max_acceleration)
        qd = loop.braking.bound(np.asarray(loop.qd_ref, dtype=float), loop.period)
        if not finite(qd):
            qd = np.zeros(loop.robot.dof)
    except Exception:
        qd = np.zeros(loop.robot.dof)
    with contextlib.suppress(Exception):
        loop.driver.send(loop.state.q_ref + loop.period * qd, qd)
    loop.qd_ref, loop.qd_state = qd, qd.copy()
    try:
        loop.state = replace(loop.state, fault=loop.fault, fault_at=loop.fault_at, holding=True, qd_ref=qd,
                             safety_mode=loop.driver.safety_mode)
        if loop.io is not None:
            loop.io.publish(loop, loop.state)
    except Exception as inner:
        _report(f"{loop.fault}; publishing the fault failed: {type(inner).__name__}: {inner}")
    if loop.exchange is not None:
        with contextlib.suppress(Exception):
            loop.exchange(loop, loop.state)


def _report(message: str) -> None:
    with contextlib.suppress(Exception):
        print(f"fdcontrol loop: {message}", file=sys.stderr, flush=True)


def _try_realtime() -> None:
    """SCHED_FIFO for the calling thread where permitted (Linux, CAP_SYS_NICE)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # type: ignore[attr-defined]
    except (AttributeError, PermissionError, OSError):
        pass
