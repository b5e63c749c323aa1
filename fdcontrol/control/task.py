"""The task space of one control loop: workspace volumes, reactions, moves and gain ramps.

The loop calls :meth:`TaskSpace.before` once per cycle after reading and filtering the sensor
(rules see this cycle's signals, and their actions shape this cycle's reference), then adds
:meth:`TaskSpace.wrench` to the control signal and :meth:`TaskSpace.joint_torque` to the FD
solver's joint load. Everything here runs in the loop thread; the API changes it through
the loop's ``reconfigure`` or its command methods, never mid-cycle. The loop is seen through
:class:`~fdcontrol.control.host.LoopHost` (the control layer never imports the loop).
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from fdcontrol.control.gains import GainRamp
from fdcontrol.control.reactions import Event, Reactions, Rule, Signals
from fdcontrol.control.switch import VectorRamp, apply_switch
from fdcontrol.control.trajectory import Move, MoveLimits, tracking_wrench
from fdcontrol.control.workspace import Workspace

if TYPE_CHECKING:
    from fdcontrol.control.host import LoopHost
    from fdcontrol.model.configuration import Configuration

_ZERO6 = np.zeros(6)


class TaskSpace:
    """Workspace (or None), reactions, the active move and the active gain ramp.

    The loop runs only the parts in use (:meth:`parts`): a part nobody configured costs nothing.
    A change handed over from another thread (:meth:`request`, a new ``ramp`` or ``vector_ramp``)
    calls ``notify`` (set by the loop), so the loop puts the part into its next cycle.
    """

    def __init__(self, workspace: Workspace | None = None, rules: list[Rule] | None = None,
                 move_limits: MoveLimits | None = None) -> None:
        self.notify: Any = None  # the loop's wake-up: a part of the task space starts (or stops) being used
        self.workspace = workspace if workspace is not None and not workspace.empty else None
        self.reactions = Reactions(list(rules or []))
        self.move_limits = move_limits or MoveLimits()
        self.move: Move | None = None
        self.ramp = None
        self.vector_ramp = None  # force/twist gains switched by a reaction
        self._f_ws = _ZERO6
        self.fired: list[Rule] = []
        self.pause_error = 0.02  # m, for moves built by the service
        self._pending: tuple[Move | None, list[Rule] | None] | None = None
        self._switched: dict[str, Any] = {}  # parameters (and mode) reactions changed, not yet taken
        self._switched_lock = threading.Lock()

    @property
    def ramp(self) -> GainRamp | None:
        """The stiffness/damping ramp under way (POST /control/gains, a reaction, a configuration change)."""
        return self._ramp

    @ramp.setter
    def ramp(self, r: GainRamp | None) -> None:
        self._ramp = r
        if r is not None:
            self._wake()

    @property
    def vector_ramp(self) -> VectorRamp | None:
        """The force/twist gain ramp under way."""
        return self._vector_ramp

    @vector_ramp.setter
    def vector_ramp(self, r: VectorRamp | None) -> None:
        self._vector_ramp = r
        if r is not None:
            self._wake()

    def _wake(self) -> None:
        n = self.notify
        if n is not None:
            n()

    def request(self, move: Move | None, rules: list[Rule] | None = None) -> None:
        """Hand over a new move and/or rule list from another thread: the loop takes both at
        the start of its next cycle (one reference swap, never half of it)."""
        self._pending = (move, rules)
        self._wake()

    def parts(self) -> tuple[str, ...]:
        """The parts in use now, in their order in a cycle: ``gains`` (a ramp under way), ``volumes``
        (a workspace), ``reactions`` (armed rules), ``move`` (a move not cancelled); ``pending`` when
        a hand-over waits. Only these run in the loop's cycles."""
        mv = self.move
        return tuple(n for n, on in (("pending", self._pending is not None),
                                     ("gains", self._ramp is not None or self._vector_ramp is not None),
                                     ("volumes", self.workspace is not None),
                                     ("reactions", bool(self.reactions.rules)),
                                     ("move", mv is not None and mv.status != "cancelled")) if on)

    # ------------------------------------------------------------------ per cycle
    def take_pending(self) -> None:
        """A move and/or rule list handed over by :meth:`request`, taken at a cycle's start."""
        pending, self._pending = self._pending, None
        if pending is not None:
            move, rules = pending
            if rules is not None:
                self.reactions = Reactions(rules, self.reactions.count, self.reactions.last)
            if move is not None:
                if self.move is not None:
                    self.move.cancel()
                self.move = move

    def step_gains(self, loop: LoopHost, dt: float) -> None:
        """The gain ramps' step of this cycle (dt: the cycle's period, s)."""
        ramp = self._ramp  # (POST /control/gains may hand over a new one meanwhile: only this one is cleared)
        if ramp is not None:
            k, d = ramp.step(dt)
            loop.law.motion.stiffness, loop.law.motion.damping = k, d
            if ramp.done and self._ramp is ramp:
                self._ramp = None
        vr = self._vector_ramp
        if vr is not None:
            vr.step(dt)
            if vr.done and self._vector_ramp is vr:
                self._vector_ramp = None

    def step_volumes(self, loop: LoopHost, conf: Configuration) -> None:
        """The workspace's tip load of this cycle (added to the control signal by :meth:`wrench`)."""
        ws = self.workspace
        if ws is not None:
            self._f_ws = ws.tip_wrench(conf.pose[:3, 3], conf.jacobian[:3] @ loop.qd_state)

    def react(self, loop: LoopHost, conf: Configuration, qd: np.ndarray, f_meas: np.ndarray, dt: float) -> None:
        """Evaluate the rules on this cycle's signals and take the actions of those that fire."""
        if not self.reactions.rules:
            self.fired = []
            return
        mv, ws, pose = self.move, self.workspace, conf.pose
        err = mv.error(pose)[0] if mv is not None and mv.active else math.nan
        s = Signals(pose, conf.twist(qd), f_meas, err, ws.distance if ws is not None else math.nan)
        self.fired = self.reactions.evaluate(s, loop.cycle + 1)  # the cycle count its state publishes
        for r in self.fired:
            self._act(loop, r, conf, f_meas, dt)

    def step_move(self, loop: LoopHost, conf: Configuration, target: np.ndarray | None, v_cmd: np.ndarray | None
                  ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The move's reference this cycle: the (target, twist command) the law tracks."""
        mv = self.move
        if mv is None:
            return target, v_cmd
        if loop._hold_request or loop.fault is not None:
            mv.cancel()
        if mv.status == "cancelled":
            return target, v_cmd
        ref, twist = mv.step(conf.pose)
        loop._target = ref  # where the arm rests when the move ends
        return ref, twist if mv.active else v_cmd

    def before(self, loop: LoopHost, conf: Configuration, qd: np.ndarray, f_meas: np.ndarray,
               target: np.ndarray | None, v_cmd: np.ndarray | None, dt: float | None = None
               ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """All parts of one cycle in order: the hand-over, gains, workspace loads, rules (their actions),
        then the move's reference. Returns the (target, twist command) the law tracks this cycle."""
        dt = loop.period if dt is None else dt
        self.take_pending()
        self.step_gains(loop, dt)
        self.step_volumes(loop, conf)
        self.react(loop, conf, qd, f_meas, dt)
        return self.step_move(loop, conf, target, v_cmd)

    def wrench(self, law: Any, x: Any) -> np.ndarray:
        """The workspace's tip load [F; 0], plus the motion term while a move runs on a law without it."""
        f = self._f_ws
        mv = self.move
        if mv is not None and mv.status != "cancelled" and "motion" not in getattr(law, "_terms", ()):
            f = f + tracking_wrench(law, x)
        return f

    def joint_torque(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray | None:
        ws = self.workspace
        return None if ws is None else ws.joint_torque(q, qd)

    # ------------------------------------------------------------------ actions
    def _act(self, loop: LoopHost, r: Rule, conf: Configuration, f_meas: np.ndarray, dt: float) -> None:
        if r.action == "hold":
            loop._hold_request = True
            if self.move is not None:
                self.move.cancel()
        elif r.action == "stop":
            if self.move is not None:
                self.move.cancel()
            loop._target = conf.pose.copy()
        elif r.action == "retract":
            f = f_meas[:3]
            n = float(np.linalg.norm(f))
            u = -f / n if n > 0.5 else -conf.pose[:3, 2]
            goal = conf.pose.copy()
            goal[:3, 3] += r.distance * u
            self.move = Move(loop.robot, conf.pose, loop.period, self.move_limits, goal_pose=goal)
            self._wake()
        elif r.action == "switch":
            if r.mode:  # like every change of what the law means: at standstill, without the old goals
                loop.switch_mode(r.mode)
            if r.params:
                apply_switch(loop, self, r.params, r.ramp_time)
                if self._ramp is not None:  # this cycle already runs on the ramp's first step
                    loop.law.motion.stiffness, loop.law.motion.damping = self._ramp.step(dt)
                if self._vector_ramp is not None:
                    self._vector_ramp.step(dt)
            self._wake()  # a new mode may read the sensor (its watchdog joins the cycle)
            with self._switched_lock:
                self._switched.update({**({"mode": r.mode} if r.mode else {}), **(r.params or {})})

    def take_switched(self) -> dict[str, Any]:
        """The parameters (and mode) reactions changed since the last call (for the configuration's record)."""
        with self._switched_lock:
            out = dict(self._switched)
            self._switched.clear()  # in place: a TaskSpace rebuilt from this one shares the record
        return out

    def switch_move_limits(self, changes: dict[str, Any]) -> None:
        """New limits for the next move (a reaction's switch; the running move keeps its own)."""
        lim = self.move_limits
        lin = tuple(float(changes.get(f"move_max_linear_{k}", v)) for k, v in
                    zip(("speed", "acceleration", "jerk"), lim.linear, strict=True))
        ang = tuple(float(changes.get(f"move_max_angular_{k}", v)) for k, v in
                    zip(("speed", "acceleration", "jerk"), lim.angular, strict=True))
        jj = lim.joint_jerk
        if "move_max_joint_jerk" in changes and jj is not None:
            jj = np.full(len(jj), float(changes["move_max_joint_jerk"]))
        self.move_limits = MoveLimits(lin, ang, lim.joint_velocity, lim.joint_acceleration, jj)  # type: ignore[arg-type]
        if "move_pause_error" in changes:
            self.pause_error = float(changes["move_pause_error"])

    # ------------------------------------------------------------------ telemetry
    def link_telemetry(self) -> tuple[float, str | None]:
        """link_distance, link_pair: the nearest pair of the links' clearances at the last evaluation."""
        ws = self.workspace
        if ws is None or ws.clearance is None:
            return math.nan, None
        d, link, other = ws.link_clearance()
        return d, None if link is None else f"{link} ↔ {other}"

    def telemetry(self) -> tuple[float, str, float, int, str | None]:
        """workspace_distance, move_status, move_progress, reaction_count, reaction_event."""
        ws, mv, rx = self.workspace, self.move, self.reactions
        last: Event | None = rx.last
        return (ws.distance if ws is not None else math.nan,
                mv.status if mv is not None else "idle",
                mv.progress if mv is not None else math.nan,
                rx.count, last.text if last is not None else None)
