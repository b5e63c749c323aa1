"""The stages of one control cycle: read, sense, law and task, map, limits, send, publish.

A cycle is a list of :class:`Stage` objects, run in order by :meth:`ControlLoop._cycle
<fdcontrol.loop.cycle.ControlLoop>`; each is one object with one method, ``run(loop, c)``, and a
``name`` (the per-stage cost table of ``benchmarks/bench_cycle.py``). The stages pass this cycle's
values to each other in one :class:`Frame` (reused every cycle: no allocation for it), among them
the cycle's period ``c.dt`` (s) — every stage that integrates or limits reads it from there, never
a constant of its own.

:func:`compose` builds the list from the loop's parts: a part that is not configured (task space
parts, posture, link loads, the links' distances without volumes for them or self-collision, an action
input, the sensor watchdog without a law that reads the sensor…) is not in the list, so it costs nothing.
The loop composes again at a cycle boundary whenever its parts change (``reconfigure``, a new action, a
task-space hand-over). ``order`` places a stage: the loop's ``stages`` argument adds further stages (e.g. a
limit of your own at ``LIMITS - 10``, before the safety limits that always act last, or a joint load at
``LOADS``).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from fdcontrol.control.law import ControlInput
from fdcontrol.control.posture import at_gamma0, nullspace_transpose
from fdcontrol.control.sensing import carry_bias
from fdcontrol.loop.paced import robot_step
from fdcontrol.model.linalg import compiled_entry
from fdcontrol.model.spatial import finite

if TYPE_CHECKING:
    from fdcontrol.loop.cycle import ControlLoop
    from fdcontrol.model.collision import Clearance

#: the phases of a cycle in their order, and the ``order`` each begins at
PHASES: tuple[tuple[str, int], ...] = (("read", 0), ("sense", 100), ("law", 200), ("map", 300),
                                       ("limits", 400), ("send", 500), ("publish", 600))
READ, SENSE, LAW, MAP, LIMITS, SEND, PUBLISH = (o for _, o in PHASES)
#: joint loads on the virtual model (posture, link loads, volumes) run from here, before the solver
LOADS = MAP + 10
SOLVE = MAP + 50
#: the safety limits (acceleration limit and hard box last); further limit stages go before them
SAFETY = LIMITS + 50


def phase_of(order: float) -> str:
    """The phase a stage at ``order`` belongs to."""
    name = PHASES[0][0]
    for n, o in PHASES:
        if order >= o:
            name = n
    return name


class Frame:
    """This cycle's values, passed from stage to stage (one object per loop, overwritten every cycle).

    Units as in :class:`~fdcontrol.loop.state.LoopState`; ``dt`` the cycle's period (s), ``now`` the
    loop's clock (s), ``tau`` the joint load on the virtual model (N·m, None: none)."""

    __slots__ = ("J", "braking", "cmd", "conf", "dt", "f_applied", "f_meas", "fc", "goals", "holding", "js", "now",
                 "nt", "pose", "q", "q_ref", "qd_des", "qd_ref", "resting", "target", "tau", "tw", "twist", "v_cmd",
                 "watchdog", "x_in")

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, None)
        self.braking = self.holding = self.resting = False
        self.watchdog = "idle"


class Stage:
    """One stage of the cycle: ``run(loop, c)`` reads and writes this cycle's :class:`Frame` ``c``.

    ``name`` names it in the cost table; ``order`` places it (see :data:`PHASES`)."""

    name: str = "stage"
    order: float = LAW

    def run(self, loop: ControlLoop, c: Frame) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<stage {self.name} ({phase_of(self.order)}, {self.order:g})>"


# ---------------------------------------------------------------------- read
class Read(Stage):
    """The driver's joint state, then the io's requests (``io.poll``), the clock, the Configuration."""

    name, order = "read", READ

    def run(self, loop: ControlLoop, c: Frame) -> None:
        driver = loop.driver
        js = driver.read()  # first, so that inputs that arrive meanwhile still count in this cycle
        if driver.owns_clock:  # on a robot's clock: the robot's time since its last state
            c.dt = robot_step(loop, js.t)
        io = loop.io
        if io is not None:
            io.poll(loop)
        now = c.now
        if now is None:
            now = c.now = time.monotonic()
        conf = loop.config
        if conf.virtual is not loop.solver.virtual:  # a new solver brought another virtual model
            conf = loop.config = loop._configuration()
        q, qd = js.q, js.qd
        conf.update(q)
        c.js, c.conf, c.q, c.pose, c.J = js, conf, conf.q, conf.pose, conf.jacobian
        c.twist = conf.twist(qd)
        if loop.cycle and loop.fault is None:  # does the arm do what the loop asked the cycle before?
            why = loop.following.check(qd, loop.qd_ref, now, q, loop.commanded_position)
            if why is not None:
                loop.fault, loop.fault_at = why, now


class GammaSchedule(Stage):
    """The FD mapping's γ scheduled at this cycle's q (fdcontrol.mappings.fd) before a joint load reads the
    virtual model's H — the loads and their null-space projector see the γ the solver then uses (without
    joint loads the solver schedules γ itself and this stage is not in the cycle)."""

    name, order = "gamma_schedule", READ + 10

    def run(self, loop: ControlLoop, c: Frame) -> None:
        loop.solver.mapping.schedule(c.q, c.conf)


# ---------------------------------------------------------------------- sense
class Sensor(Stage):
    """The force sensor: zeroing at standstill on request, the reading, the sensor model (filter)."""

    name, order = "sensor", SENSE

    def run(self, loop: ControlLoop, c: Frame) -> None:
        zero = loop._zero_request and not loop.qd_ref.any()  # the bias only at standstill
        if zero:
            loop.driver.zero_sensor()  # a sensor that zeroes itself (UR's zeroFtSensor), in the loop thread
        raw = loop.driver.read_wrench()
        if raw is None:
            c.f_meas = loop._zero6
            return
        now = c.now
        loop._sensor_at = now
        R = c.pose[:3, :3]
        if loop._carry_bias is not None:  # a new sensor model reads what the old one read at this pose
            carry_bias(loop._carry_bias, loop.filter, raw, R)
            loop._carry_bias = None
        if zero:
            if loop.liveness.loaded_reason(now):  # a hand came meanwhile: no bias under a load
                loop._zero_request = False
            else:
                loop.filter.zero(raw, R)
                loop._zero_request = False
        # the twist: the tool's inertia (compensated in f_meas if configured; on a law that reads the sensor,
        # always out of the reading that tells a hand: fdcontrol.loop.liveness)
        sensing = loop.law.uses_sensor
        c.f_meas = f_meas = loop.filter.apply(raw, R, c.dt, c.twist, contact=sensing)
        loop.liveness.sensed(f_meas, now, loop.filter.contact if sensing else None)


class Inputs(Stage):
    """The streamed wrench and twist (the io's newest, taken here: ``io.inputs``) and their watchdog (older than
    ``command_timeout``: tripped)."""

    name, order = "inputs", SENSE + 10

    def run(self, loop: ControlLoop, c: Frame) -> None:
        io = loop.io
        if io is not None:
            take = getattr(io, "inputs", None)  # the io's streamed inputs, as late as they can be taken
            if take is not None:
                take(loop)
        now = c.now
        # each stamped with now (its receipt by the loop) when it came without a time; in place, so a newer
        # command set meanwhile by another thread is never replaced by this one. A stamp that is not a number,
        # or later than now (another clock's), counts as a receipt now too: no stamp keeps a command fresh
        # beyond the watchdog
        cmd, tw = loop._command, loop._twist
        if cmd is not None and (cmd.t is None or not cmd.t <= now):
            cmd.t = now
        if tw is not None and (tw.t is None or not tw.t <= now):
            tw.t = now
        c.cmd, c.tw = cmd, tw
        watchdog, f_applied, v_cmd = "idle", loop._zero6, None
        timeout = loop.command_timeout
        if cmd is not None:
            if now - cmd.t > timeout:
                watchdog = "tripped"
            else:
                watchdog, f_applied = "ok", cmd.wrench
        if tw is not None:
            if now - tw.t > timeout:
                watchdog = "tripped"
            else:
                watchdog, v_cmd = ("tripped" if watchdog == "tripped" else "ok"), tw.wrench
        c.watchdog, c.f_applied, c.v_cmd, c.target = watchdog, f_applied, v_cmd, loop._target
        c.goals = loop._goals_ended  # a rule's switch may end the goals in this cycle (the law then has none)


class SensorWatchdog(Stage):
    """A law that reads the force sensor holds the arm when the newest reading is older than
    ``sensor_timeout`` (only in the cycle while the law reads the sensor)."""

    name, order = "sensor_watchdog", SENSE + 20

    def run(self, loop: ControlLoop, c: Frame) -> None:
        if loop.law.uses_sensor and math.isfinite(loop._sensor_at) and c.now - loop._sensor_at > loop.sensor_timeout:
            c.watchdog = "sensor_stale"  # hand guiding on a sensor stream gone quiet: hold until readings return


class LinkDistances(Stage):
    """The links' distances to the volumes and to each other (fdcontrol.model.collision), once per cycle at
    the measured q: the repulsive loads, the velocity damper, the fault check and the state read them.
    In the cycle only with link geometry and volumes for the links or self-collision."""

    name, order = "link_distances", SENSE + 30

    def __init__(self, clearance: Clearance) -> None:
        self.clearance = clearance

    def run(self, loop: ControlLoop, c: Frame) -> None:
        self.clearance.compute(c.q)


# ---------------------------------------------------------------------- law and task
class ActionTarget(Stage):
    """A policy's goals, interpolated (fdcontrol.loop.action): this cycle's target."""

    name, order = "action", LAW

    def run(self, loop: ControlLoop, c: Frame) -> None:
        act = loop.action
        if act is not None:
            c.target = act.target(c.now)


class TaskGains(Stage):
    """The task space's gain ramps (POST /control/gains, a reaction's switch, a configuration change)."""

    name, order = "gain_ramps", LAW + 10

    def run(self, loop: ControlLoop, c: Frame) -> None:
        loop.task.step_gains(loop, c.dt)
        if loop.task.ramp is None and loop.task.vector_ramp is None:
            loop._wake = True  # done: out of the next cycle


class TaskVolumes(Stage):
    """The workspace volumes' tip load (added to the control signal after the law)."""

    name, order = "volumes", LAW + 20

    def run(self, loop: ControlLoop, c: Frame) -> None:
        loop.task.step_volumes(loop, c.conf)


class TaskReactions(Stage):
    """Reaction rules on this cycle's signals; a move a rule starts (retract) steps in this cycle too."""

    name, order = "reactions", LAW + 30

    def __init__(self, with_move: bool) -> None:
        self.with_move = with_move  # the move stage follows in this cycle's list

    def run(self, loop: ControlLoop, c: Frame) -> None:
        task = loop.task
        task.react(loop, c.conf, c.js.qd, c.f_meas, c.dt)
        if task.fired:
            loop._wake = True  # the rules' actions may start or end parts (a move, a ramp, a sensor law)
            if not self.with_move and task.move is not None:
                c.target, c.v_cmd = task.step_move(loop, c.conf, c.target, c.v_cmd)


class TaskMove(Stage):
    """The move's reference (POST /control/move): the target and twist the law tracks."""

    name, order = "move", LAW + 40

    def run(self, loop: ControlLoop, c: Frame) -> None:
        c.target, c.v_cmd = loop.task.step_move(loop, c.conf, c.target, c.v_cmd)
        if loop.task.move.status == "cancelled":
            loop._wake = True


class Law(Stage):
    """Hold or not (requests, watchdogs, a fault, braking for a change), then f_c = law(inputs)."""

    name, order = "law", LAW + 50

    def run(self, loop: ControlLoop, c: Frame) -> None:
        if loop._goals_ended != c.goals:  # a rule's switch ended the goals: none in this cycle either
            c.target = None
        watchdog = c.watchdog
        c.holding = holding = loop._hold_request or loop._stop_request or watchdog in ("tripped", "sensor_stale") \
            or loop.fault is not None or c.braking
        # no motion without a live input: a stream within its watchdog (Liveness.live's first rule, asked here
        # without the call), a goal a request set, a hand on the sensor
        c.resting = not holding and watchdog != "ok" and not loop.liveness.live(loop, watchdog, c.f_meas, c.target,
                                                                                 c.now)
        c.x_in = x = ControlInput(c.pose, c.twist, c.f_meas, c.f_applied, c.target, c.v_cmd)
        c.fc = loop.law(x)


class TaskWrench(Stage):
    """The task space's wrench: the volumes' tip load, the move's tracking term on a law without one."""

    name, order = "task_wrench", LAW + 60

    def run(self, loop: ControlLoop, c: Frame) -> None:
        c.fc = c.fc + loop.task.wrench(loop.law, c.x_in)


# ---------------------------------------------------------------------- map: joint loads, solver
class Posture(Stage):
    """The null-space posture task's joint load (fdcontrol.control.posture), FD only."""

    name, order = "posture", LOADS

    def run(self, loop: ControlLoop, c: Frame) -> None:
        if c.holding or c.resting:
            return
        conf = c.conf
        if conf.virtual is not None:  # H as CRBA left it (its upper triangle): no mirrored copy of it for the load
            c.nt, t = loop.posture.load(conf.data.M, conf.jacobian, c.q, loop.qd_state, True)
        else:
            c.nt, t = loop.posture.load(conf.inertia, conf.jacobian, c.q, loop.qd_state)
        c.tau = t if c.tau is None else c.tau + t


def _null_space_at_gamma0(loop: ControlLoop, c: Frame, t: np.ndarray) -> np.ndarray:
    """A link load `t` (N·m) whose null-space part acts on the virtual model as it does at the mapping's
    regularizing γ₀ whatever the scheduled γ: τ' = τ − (1 − γ₀/γ) N̄ᵀ τ (fdcontrol.control.posture.at_gamma0)."""
    ratio = loop.solver.mapping.gamma0 / loop.solver.virtual.gamma
    if ratio == 1.0 or not t.any():
        return t
    if c.nt is None:
        c.nt = nullspace_transpose(c.conf.inertia, c.conf.jacobian)
    return at_gamma0(t, c.nt, ratio)


class LinkLoadStage(Stage):
    """Link loads' joint load (fdcontrol.control.link_loads), FD only."""

    name, order = "link_loads", LOADS + 10

    def run(self, loop: ControlLoop, c: Frame) -> None:
        ll = loop.link_loads
        if c.holding or c.resting:
            if ll.loads:  # their clearance for the state (telemetry) while no load acts
                ll.joint_forces(c.q, np.zeros(loop.robot.dof))
            return
        if ll.mode == "projected" and c.nt is None:
            c.nt = nullspace_transpose(c.conf.inertia, c.conf.jacobian)
        t = _null_space_at_gamma0(loop, c, ll.torque(c.q, loop.qd_state, c.nt))
        c.tau = t if c.tau is None else c.tau + t


class VolumesLoad(Stage):
    """The workspace volumes' joint load (the links kept inside), FD only."""

    name, order = "volumes_load", LOADS + 20

    def run(self, loop: ControlLoop, c: Frame) -> None:
        if c.holding or c.resting:
            return
        t = loop.task.joint_torque(c.q, loop.qd_state)
        if t is not None:
            t = _null_space_at_gamma0(loop, c, t)
            c.tau = t if c.tau is None else c.tau + t


class Solve(Stage):
    """The mapping: (q, q̇) of the virtual model under f_c and the joint loads; a non-finite result holds."""

    name, order = "solver", SOLVE

    def __init__(self, schedule: Any = None) -> None:
        #: the FD mapping's γ schedule (None: a fixed γ or another mapping): at rest the published γ is
        #: still the schedule's value at the arm's q, not the one of the last cycle that moved
        self.schedule = schedule

    def run(self, loop: ControlLoop, c: Frame) -> None:
        if c.holding and not loop._held:  # a stop begins: goals end, only a new request moves the arm again
            loop.end_goals()
        loop._held = c.holding
        if c.holding or c.resting:
            c.qd_des = np.zeros(loop.robot.dof)
            if self.schedule is not None:
                self.schedule(c.q, c.conf)
            return
        solver = loop.solver
        _, qd_des = solver.step(c.q, loop.qd_state, c.fc, c.dt, c.tau, config=c.conf)
        if not solver.last_converged:
            loop.stats.integrator_nonconverged += 1
        # (checked: the step tested q̇ — and with it f_c where checked_wrench is f_c: a NaN or ∞ in f_c reaches q̇)
        if not (qd_des is solver.checked and c.fc is solver.checked_wrench) \
                and not ((qd_des is solver.checked or finite(qd_des)) and finite(c.fc)):
            loop._record_fault(f"non-finite value in the model at cycle {loop.cycle}; holding", c.now)
            c.holding, qd_des = True, loop._zero_dof
        c.qd_des = qd_des


class LinkFault(Stage):
    """A margin crossed anyway: a link nearer a volume (or another link) than half the hard margin
    (``collision_distance``) that this cycle's motion brings nearer still — a volume moved onto the arm —
    holds the arm with a fault naming the link and the volume (:meth:`Clearance.crossed
    <fdcontrol.model.collision.Clearance.crossed>`); moving away stays possible."""

    name, order = "link_fault", SOLVE + 10

    def __init__(self, clearance: Clearance) -> None:
        self.clearance = clearance

    def run(self, loop: ControlLoop, c: Frame) -> None:
        if c.holding or c.resting:
            return
        why = self.clearance.crossed(c.qd_des)
        if why is not None:
            loop._record_fault(why, c.now)
            c.holding, c.qd_des = True, np.zeros(loop.robot.dof)


# ---------------------------------------------------------------------- limits
class Limits(Stage):
    """The safety limits (fdcontrol.limits.safety); the first reference is the measured state
    (activation), and a non-finite reference holds — it never reaches the driver."""

    name, order = "limits", SAFETY

    def run(self, loop: ControlLoop, c: Frame) -> None:
        # the SVD of J if the γ schedule took it this cycle (the path speed limit then takes none of its own)
        conf = c.conf  # (its tip position for the workspace stop)
        qd_ref = loop.limits.apply(c.q, c.qd_des, loop.qd_ref, c.J, c.dt, loop.period, conf.known_svd(), conf)
        if c.holding or c.resting:  # braking: never softer than the profile fixed when the stop began
            loop.braking.begin(loop.limits.max_acceleration)
            qd_ref = loop.braking.clamp(qd_ref, loop.qd_ref, c.dt)
        elif loop.braking.deceleration is not None:  # a stop under way ends
            loop.braking.end()
        if loop.cycle == 0:  # activation: the first reference is the measured state
            qd_ref = np.zeros(loop.robot.dof)
        if not (qd_ref is loop.limits.checked or finite(qd_ref)):  # never send a NaN (checked: the limits tested it)
            loop._record_fault("non-finite reference; holding", c.now)
            c.holding, qd_ref = True, np.zeros(loop.robot.dof)
        c.qd_ref = qd_ref


# ---------------------------------------------------------------------- send
class SendVelocity(Stage):
    """q_ref = q + dt q̇_ref and q̇_ref to the driver (velocity interfaces)."""

    name, order = "send", SEND

    def run(self, loop: ControlLoop, c: Frame) -> None:
        qd_ref, q, dt = c.qd_ref, c.q, c.dt
        # q_ref = q + dt q̇_ref and q̇_state = a copy of q̇_ref (anti-windup): one compiled call into two new
        # arrays (both are kept: q_ref in the published state), numpy's where it does not apply
        try:
            n = len(qd_ref)
            q_ref, qd_state = _empty(n), _empty(n)
            if qd_ref is loop.limits.checked and _advance is not None and q.dtype is _F64 and q.ndim == 1:
                # float64 vectors for certain (the limits' own new array, a float64 q): without numba's dispatch
                done = _advance_call(q, dt, qd_ref, q_ref, qd_state)
            else:
                done = _advance is not None and _advance(q, dt, qd_ref, q_ref, qd_state)
        except (TypeError, AttributeError):  # not float64 vectors
            done = False
        if not done:
            q_ref, qd_state = q + dt * qd_ref, qd_ref.copy()
        c.q_ref = q_ref
        loop.driver.send(q_ref, qd_ref)
        loop.qd_ref, loop.qd_state = qd_ref, qd_state  # (_sent, written out: the velocity path's copy is above)
        loop.cycle += 1
        loop.last_cycle_at = c.now


class SendPosition(Stage):
    """Position interfaces: q_ref integrates the previous reference, the tracking error bounded
    (see :meth:`ControlLoop._position_reference`)."""

    name, order = "send", SEND

    def run(self, loop: ControlLoop, c: Frame) -> None:
        c.q_ref, c.holding = loop._position_reference(c.q, c.qd_ref, c.dt, c.holding)
        loop.driver.send(c.q_ref, c.qd_ref)
        _sent(loop, c)


def _sent(loop: ControlLoop, c: Frame) -> None:
    loop.qd_ref = c.qd_ref
    loop.qd_state = c.qd_ref.copy()
    loop.cycle += 1
    loop.last_cycle_at = c.now


# ---------------------------------------------------------------------- publish
class Publish(Stage):
    """The cycle's LoopState (telemetry decimated), then the loop's and the driver's outputs."""

    name, order = "publish", PUBLISH

    def run(self, loop: ControlLoop, c: Frame) -> None:
        n, k = loop.telemetry_decimation, loop.cycle - 1
        r = k % n
        if k and r and r != n // 2:  # most cycles: neither decomposition, the last state's values (_telemetry's
            prev = loop.state  # first test, here without its call)
            s, kh = prev.sigma_min_j, prev.kappa_h
        else:
            s, kh = loop._telemetry(c.conf)
        cmd, tw = c.cmd, c.tw
        last = tw if cmd is None or (tw is not None and tw.t > cmd.t) else cmd
        js = c.js
        loop.state = state = loop._publish(js.t, c.q, js.qd, c.q_ref, c.qd_ref, c.pose, c.fc, c.f_meas, c.watchdog,
                                           s, c.holding, last.seq if last is not None else 0, kh, c.twist, c.now)
        io = loop.io
        if io is not None:
            io.publish(loop, state)
        if loop.exchange is not None:
            loop.exchange(loop, state)


# ---------------------------------------------------------------------- composition
def compose(loop: ControlLoop, extra: tuple[Stage, ...] = ()) -> list[Stage]:
    """The stages of the loop's next cycles, from its parts now (a part not configured: no stage)."""
    fd = loop.solver.virtual is not None  # joint loads act on the FD virtual model only
    stages: list[Stage] = [Read(), Sensor(), Inputs()]
    if loop.law.uses_sensor:
        stages.append(SensorWatchdog())
    if loop.action is not None:
        stages.append(ActionTarget())
    task = loop.task
    parts: tuple[str, ...] = ()
    if task is not None:
        task.take_pending()
        parts = task.parts()
        ws = task.workspace
        if ws is not None and ws.clearance is not None:  # link geometry with volumes or self-collision
            stages += [LinkDistances(ws.clearance), LinkFault(ws.clearance)]
        if "gains" in parts:
            stages.append(TaskGains())
        if "volumes" in parts:
            stages.append(TaskVolumes())
        if "reactions" in parts:
            stages.append(TaskReactions("move" in parts))
        if "move" in parts:
            stages.append(TaskMove())
    stages.append(Law())
    joint_loads = loop.posture is not None or loop.link_loads is not None or "volumes" in parts
    if fd and joint_loads and getattr(getattr(loop.solver, "mapping", None), "scheduled", False):
        stages.append(GammaSchedule())  # the joint loads read H before the solver would schedule γ
    if "volumes" in parts or "move" in parts or "reactions" in parts:
        stages.append(TaskWrench())
    if fd and loop.posture is not None:
        stages.append(Posture())
    if fd and loop.link_loads is not None:
        stages.append(LinkLoadStage())
    if fd and "volumes" in parts:
        stages.append(VolumesLoad())
    mapping = getattr(loop.solver, "mapping", None)
    stages.append(Solve(mapping.schedule if fd and getattr(mapping, "scheduled", False) else None))
    stages.append(Limits())
    stages.append(SendPosition() if loop.driver.interface == "position" else SendVelocity())
    stages.append(Publish())
    stages += extra
    stages.sort(key=lambda s: s.order)  # stable: equal orders keep the order above
    return stages


def _advance_py(q: np.ndarray, dt: float, qd_ref: np.ndarray, q_ref: np.ndarray,
                qd_state: np.ndarray) -> bool:  # pragma: no mutate block
    """q_ref = q + dt q̇_ref and qd_state = q̇_ref, written into the last two (float64 vectors of one length; false,
    nothing written, where the lengths differ): numpy's ``q + dt * qd_ref`` and ``qd_ref.copy()``, element by
    element — the same float operations, so the same bits (tests/test_stages.py), compiled."""
    n = q.shape[0]
    if qd_ref.shape[0] != n or q_ref.shape[0] != n or qd_state.shape[0] != n:
        return False
    for i in range(n):
        q_ref[i] = q[i] + dt * qd_ref[i]
        qd_state[i] = qd_ref[i]
    return True


_empty = np.empty

try:  # compiled at import (cached on disk), never in the loop thread; without numba numpy's two calls
    import numba
    from numba import types as _t

    _VEC = _t.Array(_t.float64, 1, "A")
    _advance: Any = numba.njit(_t.boolean(_VEC, _t.float64, _VEC, _VEC, _VEC), cache=True)(_advance_py)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    _advance = None
_F64 = np.dtype(np.float64)
#: _advance without numba's dispatch (fdcontrol.model.linalg.compiled_entry), where its arguments are float64
#: vectors for certain
_advance_call = compiled_entry(_advance)

