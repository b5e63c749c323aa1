"""FrankaDriver: a Franka Research 3 or Panda through libfranka's Python bindings (``pylibfranka``).

Tested against franky-sim (a simulator of the libfranka network protocol with MuJoCo physics,
tests/test_franka.py), never on hardware.

The robot owns the clock: it sends a state every 1 ms and expects one command back before the
next. This driver declares ``owns_clock`` (and ``clock_period`` = 1 ms): the control loop then
does not sleep, its :meth:`read` is the tick — it waits for the robot's next state and the loop
answers with :meth:`send` in the same cycle.

* velocity interface (default): ``start_joint_velocity_control(controller_mode)``, one
  ``writeOnce(JointVelocities(q̇_ref))`` per state; position interface (``interface:
  position``): ``start_joint_position_control``, ``JointPositions(q_c)`` with q_c the robot's
  desired position q_d at the motion's start plus dt·Σ q̇_ref — the loop's limited velocity
  reference integrated, so the positions respect the same velocity, acceleration and jerk
  limits (the loop's own q_ref, bounded to ``max_tracking_error`` around the measured q, would
  jump when that bound engages; on a Franka the collision thresholds bound the tracking error);
* ``controller_mode``: ``joint`` (joint impedance) or ``cartesian`` (Cartesian impedance);
* the motion is started by the first command that moves and ended with ``motion_finished``
  once the reference is at rest on stop, hold (also a watchdog trip) or a fault; it restarts
  with the next reference that moves;
* at connect: the collision thresholds and the load (mass, centre of mass in the flange frame,
  inertia) are set on the robot, and the model's forward kinematics at the measured q is
  compared with the robot's own flange pose (``O_T_EE · F_T_EE⁻¹``): more than
  ``pose_tolerance`` (1 mm, 0.01 rad) apart refuses to start — a wrong model is a wrong Jacobian;
* errors: a motion the robot aborts raises with libfranka's error names; the robot mode
  (``Idle``, ``Move``, ``Reflex``, …) is published as the loop state's ``safety_mode``;
  :meth:`recover` runs libfranka's automatic error recovery; :meth:`reconnect` connects anew;
* a lost connection: no state for ``state_timeout`` (s, default 50 ms: within one command
  timeout) raises at once — the wait for a state happens in ``select`` on libfranka's UDP socket,
  which also releases the GIL (libfranka's own blocking receive holds it, with a 1 s timeout:
  without this deadline a dead robot would stall the loop for 1 s); the connection is torn down on
  the next read, after the loop has recorded the fault and held. When the last state arrived and
  when the loss was declared are recorded on the loop's clock (``clock_stats``);
* wrench (``wrench_source: estimate``): the robot's external wrench estimate ``O_F_ext_hat_K``
  (the wrench the environment exerts on the stiffness frame K, base frame) turned into
  :class:`RobotDriver`'s sensor contract (see :func:`estimate_to_sensor`); or
  (``wrench_source: sensor``, ``sensor: {address, counts_per_force, counts_per_torque, timeout}``)
  an external force–torque sensor on the flange that speaks ATI's RDT protocol over UDP
  (:class:`fdcontrol.drivers.netft.NetFT`: ATI and Schunk Net F/T), its reading passed through.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import select
import socket
import stat
import threading
import time
from typing import Any

import numpy as np

from fdcontrol.drivers.base import JointState, RobotDriver
from fdcontrol.model.published import published_limits
from fdcontrol.model.robot import RobotModel

try:  # the command's twin compiled (fdcontrol.drivers.franka_compiled); without numba the Python below
    from fdcontrol.drivers.franka_compiled import next_command as _next_command
except ImportError:
    _next_command = None

#: libfranka's example defaults (examples_common.cpp ``setDefaultBehavior``)
DEFAULT_TORQUE_THRESHOLDS = (20.0, 20.0, 18.0, 18.0, 16.0, 14.0, 12.0)  # N·m
DEFAULT_FORCE_THRESHOLDS = (20.0, 20.0, 20.0, 25.0, 25.0, 25.0)  # N, N·m
CLOCK_PERIOD = 1e-3  # s: the robot's state rate is 1 kHz
COMMAND_PORT = 1337  # the robot's TCP command port (libfranka's research interface)
LOST = "robot connection lost"  # how every lost-connection fault begins
MAX_POSITION_STEP = 0.1  # s: the longest robot-time step a position command integrates (a lost robot faults sooner)
_MAX_TICKS = round(MAX_POSITION_STEP / CLOCK_PERIOD)  # the same, in robot ticks
_ZEROS7, _EMPTY = np.zeros(7), np.zeros(0)  # (read only)
_F64 = np.dtype(np.float64)
_new, _set = object.__new__, object.__setattr__


class FrankaError(RuntimeError):
    """The robot aborted the motion or refused a command (libfranka's error names in the text)."""


class FrankaConnectionLost(FrankaError):
    """No robot state within ``state_timeout``."""


class ModelMismatch(FrankaError):
    """The model's flange pose disagrees with the robot's own."""


def column_major(T: Any) -> np.ndarray:
    """A libfranka pose (16 numbers, column-major) as a 4×4 matrix."""
    return np.asarray(T, dtype=float).reshape(4, 4, order="F")


def robot_flange(state: Any) -> np.ndarray:
    """The flange pose in the base frame from a robot state: O_T_EE · F_T_EE⁻¹."""
    return column_major(state.O_T_EE) @ np.linalg.inv(column_major(state.F_T_EE))


def pose_difference(A: np.ndarray, B: np.ndarray) -> tuple[float, float]:
    """(translation distance in m, rotation angle in rad) between two poses."""
    dR = A[:3, :3].T @ B[:3, :3]
    angle = math.acos(max(-1.0, min(1.0, (float(np.trace(dR)) - 1.0) / 2.0)))
    return float(np.linalg.norm(A[:3, 3] - B[:3, 3])), angle


def estimate_to_sensor(O_F_ext_hat_K: Any, O_T_EE: np.ndarray, EE_T_K: np.ndarray,
                       flange: np.ndarray) -> np.ndarray:
    """The robot's external-wrench estimate as the raw reading of a sensor at the flange.

    ``O_F_ext_hat_K`` is [F; τ] the environment exerts on the robot, at the origin of the
    stiffness frame K, in the base frame O. The reading :class:`RobotDriver` expects is in the
    sensor (here: flange) frame, torque about the flange origin, in the ``robot_on_tool``
    convention — at rest, the robot holds the tool against the environment's push, so it is the
    negative: w = −[Rᵀ F; Rᵀ (τ + (p_K − p_F) × F)] with R, p_F the flange's orientation and
    origin and p_K the origin of K, all in O.
    """
    w = np.asarray(O_F_ext_hat_K, dtype=float)
    F, tau = w[:3], w[3:]
    p_K = (O_T_EE @ EE_T_K)[:3, 3]
    R, p_F = flange[:3, :3], flange[:3, 3]
    tau_F = tau + np.cross(p_K - p_F, F)
    return -np.concatenate((R.T @ F, R.T @ tau_F))


def error_names(errors: Any) -> tuple[str, ...]:
    """The flags set in a libfranka ``Errors`` (``last_motion_errors``, ``current_errors``), by
    libfranka's names (``joint_velocity_violation``, ``cartesian_reflex``, …)."""
    if errors is None:
        return ()
    return tuple(n for n in dir(errors) if not n.startswith("_") and getattr(errors, n, False) is True)


def _sockets(kind: int) -> set[int]:
    """This process's file descriptors that are sockets of `kind` (``socket.SOCK_DGRAM``, ``SOCK_STREAM``)."""
    out = set()
    for name in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else ():
        fd = int(name)
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if s.type == kind:
                out.add(fd)
        finally:
            s.close()
    return out


def _udp_fds() -> set[int]:
    """This process's file descriptors that are UDP sockets."""
    return _sockets(socket.SOCK_DGRAM)


#: libfranka objects of connections given up on a lost robot, kept alive for the process's lifetime:
#: their destructors (libfranka's motion cancel, stop) wait for the robot's answer — forever on a robot
#: that went silent — while holding the GIL, which would freeze the process (its heartbeat included)
_ABANDONED: list[Any] = []


def _abandon(*objs: Any) -> None:
    """Keep `objs` alive for good, never run their destructors (see :data:`_ABANDONED`)."""
    for o in objs:
        if o is not None:
            _ABANDONED.append(o)
            with contextlib.suppress(Exception):  # not even at the interpreter's exit
                ctypes.pythonapi.Py_IncRef(ctypes.py_object(o))


def _library() -> Any:
    try:
        import pylibfranka
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("the franka driver needs pylibfranka: pip install 'fdcontrol[franka]'") from exc
    return pylibfranka


def _vector(value: Any, n: int, name: str) -> list[float]:
    arr = np.asarray(value, dtype=float).reshape(-1)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be {n} finite numbers")
    return arr.tolist()


class FrankaDriver(RobotDriver):
    """A Franka arm through pylibfranka; the robot's 1 kHz state is the loop's clock."""

    simulated = False
    owns_clock = True  # capability: read() blocks for the robot's next state; the loop does not sleep
    can_recover = True  # capability: recover() and reconnect()
    clock_period = CLOCK_PERIOD  # capability: the loop's period is the robot's

    def __init__(self, robot: RobotModel, dt: float = CLOCK_PERIOD, *, robot_ip: str,
                 controller_mode: str = "joint", realtime: str = "enforce", interface: str = "velocity",
                 lower_torque_thresholds: Any = DEFAULT_TORQUE_THRESHOLDS,
                 upper_torque_thresholds: Any = DEFAULT_TORQUE_THRESHOLDS,
                 lower_force_thresholds: Any = DEFAULT_FORCE_THRESHOLDS,
                 upper_force_thresholds: Any = DEFAULT_FORCE_THRESHOLDS,
                 load_mass: float = 0.0, load_com: Any = (0.0, 0.0, 0.0), load_inertia: Any = (0.0,) * 9,
                 wrench_source: str = "none", sensor: dict[str, Any] | None = None,
                 state_timeout: float = 0.05, rate_limit: bool = True,
                 pose_tolerance: Any = (1e-3, 1e-2), library: Any = None) -> None:
        if robot.dof != 7:
            raise ValueError(f"the franka driver needs a 7-joint model (fr3 or panda), {robot.name} has {robot.dof}")
        if controller_mode not in ("joint", "cartesian"):
            raise ValueError(f"controller_mode must be 'joint' or 'cartesian', got {controller_mode!r}")
        if realtime not in ("enforce", "ignore"):
            raise ValueError(f"realtime must be 'enforce' or 'ignore', got {realtime!r}")
        if interface not in ("velocity", "position"):
            raise ValueError(f"interface must be 'velocity' or 'position', got {interface!r}")
        if wrench_source not in ("none", "estimate", "sensor"):
            raise ValueError(f"wrench_source must be 'none', 'estimate' or 'sensor', got {wrench_source!r}")
        if (wrench_source == "sensor") != (sensor is not None):
            raise ValueError("wrench_source 'sensor' needs driver_options.sensor (its address), and only it")
        if not (math.isfinite(state_timeout) and 0.002 <= state_timeout <= 1.0):
            raise ValueError("state_timeout must be within [0.002, 1] s")
        if abs(float(dt) - CLOCK_PERIOD) > 1e-9:
            raise ValueError(f"a Franka's clock is 1 kHz: run the loop at rate 1000 Hz (got {1 / dt:g} Hz)")
        self.thresholds = tuple(_vector(v, n, name) for v, n, name in (
            (lower_torque_thresholds, 7, "lower_torque_thresholds"),
            (upper_torque_thresholds, 7, "upper_torque_thresholds"),
            (lower_force_thresholds, 6, "lower_force_thresholds"),
            (upper_force_thresholds, 6, "upper_force_thresholds")))
        if not (math.isfinite(load_mass) and 0.0 <= load_mass <= 20.0):
            raise ValueError("load_mass must be within [0, 20] kg")
        self.load = (float(load_mass), _vector(load_com, 3, "load_com"), _vector(load_inertia, 9, "load_inertia"))
        tol = _vector(pose_tolerance, 2, "pose_tolerance")
        self.robot, self.dof, self.dt, self.interface = robot, 7, CLOCK_PERIOD, interface
        self.controller_mode, self.realtime, self.wrench_source = controller_mode, realtime, wrench_source
        self.state_timeout, self.pose_tolerance = float(state_timeout), (tol[0], tol[1])
        self.robot_ip, self.rate_limit = str(robot_ip), bool(rate_limit)
        pub = published_limits(robot.name) or published_limits("fr3")
        # the last check (_guard): the robot's published acceleration (rad/s²), its jerk limit times one
        # tick (rad/s²) and the model's velocity limits (rad/s), per joint
        self._dynamic_limits = (list(map(float, pub.acceleration)),  # type: ignore[union-attr]
                                [float(j) * CLOCK_PERIOD for j in pub.jerk],  # type: ignore[union-attr]
                                [float(x) for x in robot.limits.velocity])
        self._limits_rows = np.array(self._dynamic_limits, dtype=float)  # the same, for the compiled command
        self.lib = library or _library()
        self.sensor = None
        if sensor is not None:  # an external force–torque sensor on the flange (ATI/Schunk Net F/T, RDT over UDP)
            from fdcontrol.drivers.netft import NetFT

            known = ("address", "counts_per_force", "counts_per_torque", "timeout")
            if not isinstance(sensor, dict) or "address" not in sensor or set(sensor) - set(known):
                unknown = sorted(map(str, set(sensor) - set(known))) if isinstance(sensor, dict) else []
                raise ValueError("driver_options.sensor must be {address: 'host[:port]', counts_per_force, "
                                 "counts_per_torque, timeout}"
                                 + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
            self.sensor = NetFT(**sensor)
        # published in the loop state: the robot mode (LoopState.safety_mode), and the clock statistics
        self.safety_mode: str | None = None
        self.speed_scaling = math.nan
        self.success_rate = math.nan  # control_command_success_rate of the last state (0–1)
        self.missed_cycles = 0  # robot states that passed without a command from us (robot time gaps)
        self.error: str | None = None  # the robot's error after an aborted motion, until recover()
        # libfranka's error names of the current error (until recover()/reconnect()), and how often each
        # occurred since the driver started; a lost connection is "connection_lost", an abort without a
        # flag the exception's name (ControlException, NetworkException, …)
        self.error_names: tuple[str, ...] = ()
        self.error_counts: dict[str, int] = {}
        self._lost = False  # no state came in time: torn down at the next read, after the loop held
        self._lock = threading.RLock()  # connect/recover/reconnect against the loop thread
        self._robot: Any = None
        self._control: Any = None
        self._fd: int | None = None
        self._tcp_fd: int | None = None
        self._state: Any = None
        self._t_last: float | None = None
        self._t_read: float | None = None  # the robot's time of the last state read (clock_step)
        self.read_at: float | None = None
        self.clock_step: float | None = None
        # the loop's clock (time.monotonic()): when the last robot state arrived, and when the driver
        # declared the connection lost (no state within state_timeout: the loop holds in that cycle)
        self.last_state_at = math.nan
        self.lost_at = math.nan
        # the signal the robot executes: its velocities at the last two ticks (rad/s; the last one commanded)
        self._sent: tuple[list[float], list[float]] = ([0.0] * 7, [0.0] * 7)
        self._q_c: list[float] | None = None  # position interface: the last joint positions commanded
        self._t_cmd: float | None = None  # … and the robot's time of the state they answered
        try:
            self._connect()
        except Exception:
            if self.sensor is not None:
                self.sensor.close()
            raise

    @classmethod
    def from_options(cls, robot: RobotModel, dt: float, options: dict[str, Any]) -> FrankaDriver:
        opts = dict(options)
        if "library" in opts:
            raise ValueError("library is a Python API, not a setting")
        if "robot_ip" not in opts:
            raise ValueError("the franka driver needs driver_options.robot_ip (the robot's FCI address)")
        return cls(robot, dt, **opts)

    # ------------------------------------------------------------------ connection
    def _probe(self) -> None:
        """Raise :class:`FrankaConnectionLost` unless the robot's command port accepts a TCP connection
        within ``state_timeout`` (at least 0.2 s) — tried here, without the GIL, because libfranka's own
        connect waits up to 1 s holding it."""
        try:
            with socket.create_connection((self.robot_ip, COMMAND_PORT), timeout=max(self.state_timeout, 0.2)):
                pass
        except OSError as exc:
            raise FrankaConnectionLost(f"{LOST}: the robot at {self.robot_ip} does not answer ({exc})") from None

    def _connect(self) -> None:
        lib = self.lib
        rt = lib.RealtimeConfig.kEnforce if self.realtime == "enforce" else lib.RealtimeConfig.kIgnore
        before, before_tcp = _udp_fds(), _sockets(socket.SOCK_STREAM)
        try:
            r = lib.Robot(self.robot_ip, rt)
        except Exception as exc:
            raise FrankaError(f"cannot connect to the Franka at {self.robot_ip}: {exc}") from None
        new = sorted(_udp_fds() - before)
        self._fd = os.dup(new[-1]) if new else None  # libfranka's state socket, to wait on without the GIL
        tcp = sorted(_sockets(socket.SOCK_STREAM) - before_tcp)
        self._tcp_fd = os.dup(tcp[-1]) if tcp else None  # its command connection, to end it on a loss
        try:
            r.set_collision_behavior(*self.thresholds)
            m, com, inertia = self.load
            r.set_load(m, com, inertia)
            state = r.read_once()
            self._check_model(state)
        except Exception:
            with contextlib.suppress(Exception):
                del r
            self._close_fd()
            raise
        self._robot, self._control, self._state, self._t_last = r, None, state, None
        self._t_read, self.clock_step = None, None  # a new connection: the robot's time starts anew
        self.last_state_at = time.monotonic()
        self._update(state)

    def _check_model(self, state: Any) -> None:
        q = np.asarray(state.q, dtype=float)
        d, a = pose_difference(self.robot.pose(q), robot_flange(state))
        if d > self.pose_tolerance[0] or a > self.pose_tolerance[1]:
            raise ModelMismatch(
                f"robot model {self.robot.name!r} does not match the robot: its flange is {d * 1e3:.1f} mm and "
                f"{a:.3f} rad from the robot's own at the measured q (tolerance {self.pose_tolerance[0] * 1e3:g} mm, "
                f"{self.pose_tolerance[1]:g} rad); refusing to start")

    def reconnect(self) -> None:
        """Drop the connection and connect anew (explicit: never done by the driver itself). A robot
        that does not accept the connection within ``state_timeout`` raises
        :class:`FrankaConnectionLost` at once (the loop stays in its fault and hold)."""
        self._probe()  # outside the lock: the loop thread goes on cycling (holding) meanwhile
        with self._lock:
            self._drop()
            self.error, self.error_names = None, ()
            self.last_state_at = self.lost_at = math.nan
            self._connect()

    def recover(self) -> None:
        """libfranka's automatic error recovery (after a reflex); clears :attr:`error`."""
        with self._lock:
            self._drop_if_lost()
            if self._robot is None:
                raise FrankaError("not connected to the robot: reconnect first")
            if not self._answering():  # libfranka's recovery would wait for a silent robot, holding the GIL
                raise FrankaConnectionLost(f"{LOST}: no robot state for {self.state_timeout * 1e3:.0f} ms; "
                                           "reconnect first")
            self._finish_quietly()
            try:
                self._robot.automatic_error_recovery()
            except Exception as exc:
                raise FrankaError(f"automatic error recovery failed: {exc}") from None
            self.error, self.error_names = None, ()

    def _drop(self) -> None:
        """End the connection. A live one is stopped; a lost one (no state within ``state_timeout``)
        is abandoned without a word to libfranka, whose stop and destructors would wait for the
        silent robot holding the GIL: its command connection is shut down (the robot, if it is still
        there, sees its client gone) and its objects are kept (:func:`_abandon`)."""
        c, r = self._control, self._robot
        self._control = self._robot = None
        lost, self._lost = self._lost, False
        if lost or not self._answering():
            if self._tcp_fd is not None:
                with contextlib.suppress(OSError):
                    socket.socket(fileno=os.dup(self._tcp_fd)).shutdown(socket.SHUT_RDWR)
            _abandon(c, r)
        elif r is not None:
            del c
            with contextlib.suppress(Exception):
                r.stop()
            del r
        self._close_fd()

    def _answering(self) -> bool:
        """A state came within ``state_timeout`` (or one is waiting now)."""
        if self._fd is None:
            return True
        if time.monotonic() - self.last_state_at <= self.state_timeout:
            return True
        return bool(select.select([self._fd], [], [], 0)[0])

    def _close_fd(self) -> None:
        for name in ("_fd", "_tcp_fd"):
            fd = getattr(self, name)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, None)

    # ------------------------------------------------------------------ in
    def _wait(self) -> None:
        """Wait for the robot's next state without the GIL; raise when none comes in time."""
        if self._fd is None:
            return
        ready, _, _ = select.select([self._fd], [], [], self.state_timeout)
        if not ready:
            self.lost_at = now = time.monotonic()
            self.safety_mode = "disconnected"
            self._record_errors(("connection_lost",))
            self.error = f"{LOST}: no robot state for {self.state_timeout * 1e3:.0f} ms" + (
                f" (the last one arrived {(now - self.last_state_at) * 1e3:.0f} ms before this fault)"
                if math.isfinite(self.last_state_at) else "")
            # raise at once: the loop records the fault and holds now; the teardown (libfranka's stop on a
            # dead connection, ~0.15 s on a loaded machine) waits for the next read
            self._lost = True
            raise FrankaConnectionLost(self.error)

    def _drop_if_lost(self) -> None:
        if self._lost:
            self._drop()

    def read(self) -> JointState:
        with self._lock:
            if self._lost:
                self._drop()
            if self._robot is None:
                raise FrankaConnectionLost(self.error or f"{LOST}: not connected; POST /control/reconnect")
            if self._fd is not None:
                self._wait()
            control = self._control
            try:
                if control is not None:
                    state, _ = control.readOnce()
                else:
                    state = self._robot.read_once()
            except Exception as exc:
                self._aborted(exc)
                raise FrankaError(self.error) from None
            self.read_at = time.perf_counter()  # the tick: when the robot's state arrived
            self.last_state_at = time.monotonic()
            t = float(state.time.to_sec())
            prev = self._t_read  # None: the first state of this connection, one period
            self.clock_step = t - prev if prev is not None and t > prev else CLOCK_PERIOD
            self._t_read = t
            if control is not None:
                if self._t_last is not None:
                    ticks = (t - self._t_last) / CLOCK_PERIOD
                    if not ticks < 1.5:  # round(ticks) ≥ 2: states passed without a command (else none: no round call)
                        self.missed_cycles += round(ticks) - 1
                self._t_last = t
            else:
                self._t_last = None
            self._state = state
            self._update(state)
            # JointState(q, qd, t) without the frozen dataclass's __init__ (a field at a time through
            # object.__setattr__): its dict given whole, as the simulated driver builds it
            js = _new(JointState)
            _set(js, "__dict__", {"q": np.asarray(state.q, dtype=float), "qd": np.asarray(state.dq, dtype=float),
                                  "t": t})
            return js

    def _update(self, state: Any) -> None:
        mode = state.robot_mode
        name = getattr(mode, "name", None)  # the text of a mode without a name only then (str is slow)
        self.safety_mode = str(mode) if name is None else name
        self.success_rate = float(state.control_command_success_rate)

    def _aborted(self, exc: Exception) -> None:
        """The robot ended the motion (reflex, limit violation): remember why, in libfranka's words."""
        self._control = None
        names: tuple[str, ...] = ()
        with contextlib.suppress(Exception):
            # the robot's report, if it still sends states (libfranka's read_once would block 1 s holding the GIL)
            if self._fd is not None and not select.select([self._fd], [], [], self.state_timeout)[0]:
                raise FrankaConnectionLost("no state after the abort")
            s = self._robot.read_once()
            self._update(s)
            names = error_names(self._last_motion_errors(s))
        self._record_errors(names or (type(exc).__name__,))
        self.error = f"{type(exc).__name__}: {exc}" + (f" (last motion errors: {', '.join(names)})" if names else "")

    def _last_motion_errors(self, state: Any) -> Any:
        """The robot's report of why the last motion ended (libfranka's ``Errors``)."""
        return state.last_motion_errors

    def _record_errors(self, names: tuple[str, ...]) -> None:
        self.error_names = names
        for n in names:
            self.error_counts[n] = self.error_counts.get(n, 0) + 1

    def robot_errors(self) -> dict[str, Any]:
        """libfranka's error names: the current error's (until recovered) and counts since the start."""
        return {"active": list(self.error_names), "counts": dict(self.error_counts)}

    def commanded_position(self) -> np.ndarray | None:
        """The robot's desired joint positions q_d of the newest state: where its joint impedance
        controller drives the joints — the last position commanded (or the robot's own fill of a missed
        one), and after a motion the position it holds. An arm lags behind them while it moves (FR3 and
        franky-sim alike) and catches up once the reference slows."""
        s = self._state
        return None if s is None else np.asarray(s.q_d, dtype=float)

    def read_wrench(self) -> np.ndarray | None:
        if self.sensor is not None:
            w = self.sensor.read()
            self.sensor_status = self.sensor.problem()  # its status word, published in the loop state
            return w
        if self.wrench_source != "estimate" or self._state is None:
            return None
        s = self._state
        q = np.asarray(s.q, dtype=float)
        return estimate_to_sensor(s.O_F_ext_hat_K, column_major(s.O_T_EE), column_major(s.EE_T_K), self.robot.pose(q))

    # ------------------------------------------------------------------ out
    def _start(self) -> None:
        self._sent = ([0.0] * 7, [0.0] * 7)  # a motion starts at rest: velocity and acceleration zero
        self._q_c = self._t_cmd = None
        lib = self.lib
        mode = lib.ControllerMode.JointImpedance if self.controller_mode == "joint" \
            else lib.ControllerMode.CartesianImpedance
        start = self._robot.start_joint_velocity_control if self.interface == "velocity" \
            else self._robot.start_joint_position_control
        self._control = start(mode)
        self._t_last = None
        # the motion runs from the state libfranka read while starting it: read the next one (this cycle
        # answers late once), so that the first command, and the robot's time the loop and this driver
        # count the next steps from, are the motion's; the position interface starts at rest at the
        # robot's desired position q_d as the robot sees it once the motion runs
        self._wait()
        state, _ = self._control.readOnce()
        self._state, self.last_state_at = state, time.monotonic()
        self._t_read = float(state.time.to_sec())  # the loop's next step counts from this state
        if self.interface == "position":
            self._q_c = [float(x) for x in state.q_d]

    def _ticks(self) -> int:
        """Robot cycles since the state the previous command answered (1: none missed), from the
        robot's own time stamps; at most ``MAX_POSITION_STEP`` of them."""
        t = float(self._state.time.to_sec()) if self._state is not None else None
        n = 1
        if t is not None and self._t_cmd is not None and t > self._t_cmd:
            ticks = (t - self._t_cmd) / CLOCK_PERIOD
            if ticks >= 1.5:  # round(ticks) ≥ 2 (else one tick, the usual cycle: no round, max and min calls)
                n = min(round(ticks), _MAX_TICKS)
        self._t_cmd = t
        return n

    def _command(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None, finished: bool = False) -> Any:
        """The command for the robot's current state, continuing the signal the robot executes.

        Over each state that passed without a command (a missed cycle) the robot filled one itself,
        the last command extrapolated with constant acceleration (libfranka's ``rate_limiting.h``:
        "When a packet is lost, FCI assumes a constant acceleration model"). The command goes on
        from there: the velocity sent is one tick from the filled velocity (and, with
        ``rate_limit``, that tick's acceleration and jerk are kept within the robot's published
        limits, :meth:`_guard`); in the position interface the positions are the robot's desired
        position q_d at the motion's start plus the filled and the commanded velocities integrated
        tick by tick — the same signal, so after a miss the positions go on with the robot's clock
        (as libfranka's own position generators do) without a dip and a jump back."""
        # (an ndarray's own shape: np.shape's answer; the two tests written out, not a loop over them)
        if qd_ref is not None and (qd_ref.shape if type(qd_ref) is np.ndarray else np.shape(qd_ref)) != (7,):
            raise ValueError(f"qd_ref must have the FR3's 7 joints, got shape {np.shape(qd_ref)}")
        if q_ref is not None and (q_ref.shape if type(q_ref) is np.ndarray else np.shape(q_ref)) != (7,):
            raise ValueError(f"q_ref must have the FR3's 7 joints, got shape {np.shape(q_ref)}")
        n = self._ticks()
        position = self.interface == "position"
        if _next_command is not None:  # the same, compiled: one call
            return self._command_compiled(n, position, q_ref, qd_ref, finished)
        h, (p2, v) = CLOCK_PERIOD, self._sent
        q = self._q_c
        if q is None and position:
            q = [float(x) for x in (self._state.q_d if q_ref is None else q_ref)]
        a = None
        if n > 1:  # the ticks the robot filled, with the last tick's acceleration
            a = [(x - y) / h for x, y in zip(v, p2, strict=True)]
            for _ in range(n - 1):
                v = [x + y * h for x, y in zip(v, a, strict=True)]
                if q is not None:
                    q = [x + y * h for x, y in zip(q, v, strict=True)]
        des = [0.0] * 7 if qd_ref is None else np.asarray(qd_ref, dtype=float).tolist()
        out = self._guard(des, v, a, p2) if self.rate_limit else des
        self._sent = (v, out)
        if position:
            self._q_c = q = [x + y * h for x, y in zip(q, out, strict=True)]  # type: ignore[arg-type]
            cmd = self.lib.JointPositions(q)
        else:
            cmd = self.lib.JointVelocities(out)
        cmd.motion_finished = finished
        return cmd

    def _command_compiled(self, n: int, position: bool, q_ref: np.ndarray | None, qd_ref: np.ndarray | None,
                          finished: bool) -> Any:
        """:meth:`_command` through :func:`fdcontrol.drivers.franka_compiled.next_command` (the same bits)."""
        # the loop's own float64 vector as it is (numpy's conversion call costs more than the kernel's own work per
        # joint); anything else as a contiguous float64 copy
        des = _ZEROS7 if qd_ref is None else qd_ref if type(qd_ref) is np.ndarray and qd_ref.dtype is _F64 \
            else np.ascontiguousarray(qd_ref, dtype=float)
        q = self._q_c
        if position:  # the positions commanded, advanced in place (a copy of its own: the state's q_d, q_ref)
            q = np.array(self._state.q_d if q_ref is None else q_ref, dtype=float) if q is None \
                else np.array(q, dtype=float)
        new = np.empty((2, 7))
        sent = self._sent  # the last command's rows (an array after the first compiled command; lists before)
        if type(sent) is not np.ndarray or sent.dtype is not _F64:
            sent = np.asarray(sent, dtype=float)
        _next_command(des, sent, n, q if position else _EMPTY, self.rate_limit, self._limits_rows, new)
        self._sent = new  # rows: the velocity the robot filled up to, the velocity commanded
        if position:
            self._q_c = q
            cmd = self.lib.JointPositions(q.tolist())
        else:
            cmd = self.lib.JointVelocities(new[1].tolist())
        cmd.motion_finished = finished
        return cmd

    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None:
        with self._lock:
            if self._robot is None or self.error is not None:
                return  # the robot stopped itself; nothing to command until recover()/reconnect()
            if self._control is None:
                if qd_ref is None or not np.asarray(qd_ref).any():
                    return  # at rest and no motion: the robot holds its position by itself
                # a motion starts from rest (the robot's desired velocity is zero): the limits ramp
                # the first reference from zero, so it is sent as it is
                self._start()
            try:
                self._control.writeOnce(self._command(
                    q_ref, qd_ref if qd_ref is None or type(qd_ref) is np.ndarray else np.asarray(qd_ref)))
            except Exception as exc:
                self._aborted(exc)
                raise FrankaError(self.error) from None

    def _guard(self, qd: list[float], v: list[float], a_prev: list[float] | None,
               p2: list[float] | None = None) -> list[float]:
        """The last check before the robot, as libfranka's rate limiting: the tick from the velocity
        v the robot is at (after filling any missed states) to the one sent keeps the robot's
        published acceleration and jerk limits (|a| ≤ a_max, then |a − a_prev| ≤ j_max h, with a_prev
        the acceleration the robot's fill held — None: the last tick's, (v − p2)/h with p2 the
        velocity of the tick before, computed here) and the model's velocity limits. A no-op for the
        loop's references (its jerk limit continues the same fill); it catches a command that
        bypassed them, such as a zero velocity sent to a moving robot when the loop thread did not
        end in time. Seven floats: plain Python is faster than numpy here."""
        A, J, V = self._dynamic_limits
        h = CLOCK_PERIOD
        given = a_prev is not None
        out = []
        for x, vj, ap, amax, jh, vmax in zip(qd, v, a_prev if given else p2, A, J, V, strict=True):  # type: ignore[arg-type]
            if not given:
                ap = (vj - ap) / h
            if x != x:  # NaN: hold the velocity the robot is at
                x = vj
            a_raw = (x - vj) / h
            a = amax if a_raw > amax else (-amax if a_raw < -amax else a_raw)
            a = ap + jh if a > ap + jh else (ap - jh if a < ap - jh else a)
            y = x if a == a_raw else vj + a * h  # untouched where within the limits
            out.append(vmax if y > vmax else (-vmax if y < -vmax else y))
        return out

    def finish_motion(self) -> None:
        """End the active motion with ``motion_finished`` (the reference must be at rest)."""
        with self._lock:
            self._finish_quietly()

    def _finish_quietly(self) -> None:
        c = self._control
        if c is None or self._lost:  # nothing to brake or finish on a lost connection
            self._control = None
            return
        with contextlib.suppress(Exception):
            self._brake(c)
        self._control = None
        with contextlib.suppress(Exception):
            c.writeOnce(self._command(None if self._state is None else np.asarray(self._state.q_d, dtype=float),
                                      np.zeros(7), finished=True))
        self._q_c = self._t_cmd = None

    def _brake(self, c: Any) -> None:
        """A safety net: if the last velocity sent is not zero (the loop was cut short, e.g. its
        thread did not end in time), brake it to zero within the robot's acceleration and jerk
        limits, one command per robot state (bounded: 5 s of robot time), before motion_finished."""
        from fdcontrol.limits.jerk import JointJerk

        pub = published_limits(self.robot.name) or published_limits("fr3")
        J = np.array(pub.jerk)  # type: ignore[union-attr]

        def at_rest() -> bool:  # zero velocity, and an acceleration that may drop to zero in one step
            p2, p1 = np.asarray(self._sent[0]), np.asarray(self._sent[1])
            return not np.any(p1) and bool(np.all(np.abs(p1 - p2) <= J * CLOCK_PERIOD ** 2))

        if at_rest():
            return
        lim = JointJerk(J, np.array(pub.acceleration))  # type: ignore[union-attr]
        prev = np.asarray(self._sent[1])
        lim.limit(np.zeros(7), prev, np.asarray(self._sent[0]), None, CLOCK_PERIOD)  # its a_prev
        for _ in range(5000):
            if at_rest():
                return
            self._wait()
            state, _ = c.readOnce()
            self._state, self.last_state_at = state, time.monotonic()
            self._t_read = float(state.time.to_sec())
            prev = lim.limit(np.zeros(7), np.zeros(7), prev, None, CLOCK_PERIOD)
            c.writeOnce(self._command(None, prev))

    def exchange(self, loop: Any, state: Any) -> None:
        """After each cycle (loop hook): finish the motion on stop, fault, or a hold at rest."""
        # (the flags first: a running cycle without a fault or a hold asks nothing more)
        if (not state.running or state.fault is not None or state.holding) and not np.asarray(state.qd_ref).any():
            self.finish_motion()

    def clock_stats(self) -> dict[str, float | int]:
        """The robot's view of the loop: success rate of the last state, cycles missed in total;
        and, on the loop's clock (time.monotonic(), s), when the last state arrived and when the
        connection was declared lost (NaN: not lost since the last connect)."""
        return {"robot_success_rate": self.success_rate, "robot_missed_cycles": self.missed_cycles,
                "robot_last_state_at": self.last_state_at, "robot_lost_at": self.lost_at}

    def close(self) -> None:
        with self._lock:
            self._finish_quietly()
            self._drop()
        if self.sensor is not None:
            self.sensor.close()

