"""A Franka driver for the tests that makes the robot abort a motion as a real Franka does on a
reflex — franky-sim has none. After ``abort_after`` commands of a motion, the robot "aborts" it:
the velocity command is replaced by a stop that ends the motion on the simulator's side (a real
Franka's reflex brakes the arm), ``writeOnce`` raises libfranka's ``ControlException`` with the
robot's text, and the robot's state reports the error flag (``last_motion_errors``) by
libfranka's name. Everything after that — the driver's error path, the loop's fault, /state,
/health, /metrics, recovery — is the real code.

    fdcontrol serve --robot fr3 --driver tests.franka_inject:AbortingFranka --rate 1000
"""

from __future__ import annotations

import socket
import time
from types import SimpleNamespace
from typing import Any

from fdcontrol.drivers.franka import CLOCK_PERIOD, FrankaDriver

INJECTED = "joint_velocity_violation"


class _Aborting:
    """The active control of a motion the robot aborts on the next command."""

    def __init__(self, control: Any, lib: Any) -> None:
        self.control, self.lib = control, lib

    def readOnce(self) -> Any:
        return self.control.readOnce()

    def writeOnce(self, cmd: Any) -> None:
        stop = self.lib.JointVelocities([0.0] * 7)
        stop.motion_finished = True
        self.control.writeOnce(stop)
        raise self.lib.ControlException(f'libfranka: Move command aborted: motion aborted by reflex! ["{INJECTED}"]')


class AbortingFranka(FrankaDriver):
    def __init__(self, robot: Any, dt: float = CLOCK_PERIOD, *, abort_after: int = 300, **options: Any) -> None:
        self.abort_after, self._commands, self._aborting = int(abort_after), 0, False
        super().__init__(robot, dt, **options)

    def send(self, q_ref: Any, qd_ref: Any) -> None:
        if self._control is not None and not self._aborting:
            self._commands += 1
            if self._commands >= self.abort_after:
                self._aborting = True
                self._control = _Aborting(self._control, self.lib)
        super().send(q_ref, qd_ref)

    def _last_motion_errors(self, state: Any) -> Any:
        if self._aborting:
            self._aborting, self._commands = False, 0  # the next motion runs normally
            return SimpleNamespace(**{INJECTED: True, "joint_reflex": False})
        return super()._last_motion_errors(state)


class LateFranka(FrankaDriver):
    """A driver that answers the robot late every ``late_every``-th command (a loaded machine): the
    robot's clock goes on, so the command answers a later state — a missed robot cycle, on purpose."""

    def __init__(self, robot: Any, dt: float = CLOCK_PERIOD, *, late_every: int = 40, late_by: float = 0.0025,
                 **options: Any) -> None:
        self.late_every, self.late_by, self._n = int(late_every), float(late_by), 0
        super().__init__(robot, dt, **options)

    def send(self, q_ref: Any, qd_ref: Any) -> None:
        if self._control is not None:
            self._n += 1
            if self._n % self.late_every == 0:
                time.sleep(self.late_by)
        super().send(q_ref, qd_ref)


class StandInLibrary:
    """A stand-in for ``pylibfranka`` that answers at once: no network, no simulator on the CPU. Its
    robot is kinematic (it integrates each commanded velocity, or takes each commanded position, over
    its 1 ms tick; ``writeOnce`` only takes the command, as libfranka's sends it, and the robot applies
    it when the next state is read); every read returns the next state at once, 1 ms of robot time
    later — so a loop paced by it runs as fast as its own cycle allows, and what a cycle costs (from a
    state's arrival to the command sent) is the loop's own work.

        FrankaDriver(robot, robot_ip="standin", library=StandInLibrary(robot))
    """

    class ControlException(RuntimeError):
        pass

    RealtimeConfig = SimpleNamespace(kEnforce="enforce", kIgnore="ignore")
    ControllerMode = SimpleNamespace(JointImpedance="joint", CartesianImpedance="cartesian")

    class JointVelocities:
        def __init__(self, dq: list[float]) -> None:
            self.dq, self.motion_finished = dq, False

    class JointPositions:
        def __init__(self, q: list[float]) -> None:
            self.q, self.motion_finished = q, False

    def __init__(self, model: Any) -> None:
        self.model = model

    def Robot(self, ip: str, realtime: Any) -> _StandInRobot:
        return _StandInRobot(self.model)


class _Duration:
    def __init__(self, s: float) -> None:
        self.s = s

    def to_sec(self) -> float:
        return self.s


class _State(SimpleNamespace):
    """A robot state; its flange pose ``O_T_EE`` (column-major, as libfranka's) computed when first read — a
    robot sends it ready, and a cycle that does not read it (no wrench estimate) leaves no kinematics of the
    stand-in's own in the caches."""

    def __init__(self, model: Any, at: Any, **fields: Any) -> None:
        super().__init__(**fields)
        self._model, self._at = model, at  # the joint positions (array) the pose is of

    @property
    def O_T_EE(self) -> list[float]:  # libfranka's name
        if "_pose" not in self.__dict__:
            self._pose = self._model.pose(self._at).reshape(-1, order="F").tolist()
        return self._pose


class _StandInRobot:
    def __init__(self, model: Any) -> None:
        import numpy as np

        from fdcontrol.model.robot import HOME

        self.model, self.np = model, np
        self.q = np.array(HOME.get(model.name, np.zeros(model.dof)), dtype=float)
        self.dq = np.zeros(model.dof)
        self.q_d = self.q.copy()
        self.t, self.mode = 0.0, "Idle"
        self.eye = np.eye(4).reshape(-1).tolist()
        self.commands = 0
        self.pending: tuple[str, Any, bool] | None = None  # the command taken, applied at the next tick (apply)
        self.success_rate = 1.0  # control_command_success_rate the robot reports (a test sets it)
        # called with the robot at each tick, before its state is handed over (the robot's side of the cycle:
        # a benchmark streams its inputs on the robot's clock here); None: nothing
        self.on_tick: Any = None
        # libfranka's state socket, as the driver finds it (a UDP socket the connection opened) and waits on it
        # in select without the GIL: here one on loopback with a datagram that stays unread — a state is always
        # there, and the loop thread releases the GIL while it "waits", as it does on a robot
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.sendto(b"\0", self.udp.getsockname())

    def __del__(self) -> None:
        self.udp.close()

    def set_collision_behavior(self, *thresholds: Any) -> None:
        pass

    def set_load(self, mass: float, com: Any, inertia: Any) -> None:
        pass

    def automatic_error_recovery(self) -> None:
        pass

    def stop(self) -> None:
        self.apply()
        self.mode = "Idle"

    def read_once(self) -> SimpleNamespace:
        self.apply()
        self.t += CLOCK_PERIOD
        if self.on_tick is not None:
            self.on_tick(self)
        return self._state()

    def apply(self) -> None:
        """The command taken last (writeOnce) over the robot's 1 ms tick: the commanded velocity integrated, or the
        commanded position taken."""
        if self.pending is None:
            return
        interface, value, finished = self.pending
        self.pending = None
        np = self.np
        if interface == "velocity":
            self.dq = np.asarray(value, dtype=float)
            self.q = self.q + CLOCK_PERIOD * self.dq
        else:
            q = np.asarray(value, dtype=float)
            self.dq, self.q = (q - self.q) / CLOCK_PERIOD, q
        self.q_d = self.q.copy()
        if finished:
            self.mode = "Idle"

    def _state(self) -> _State:
        return _State(self.model, self.q, q=self.q.tolist(), dq=self.dq.tolist(), q_d=self.q_d.tolist(),
                      time=_Duration(self.t), F_T_EE=self.eye, EE_T_K=self.eye,
                      robot_mode=SimpleNamespace(name=self.mode), control_command_success_rate=self.success_rate,
                      O_F_ext_hat_K=[0.0] * 6, last_motion_errors=SimpleNamespace())

    def start_joint_velocity_control(self, mode: Any) -> _StandInControl:
        self.apply()
        self.mode = "Move"
        return _StandInControl(self, "velocity")

    def start_joint_position_control(self, mode: Any) -> _StandInControl:
        self.apply()
        self.mode = "Move"
        return _StandInControl(self, "position")


class _StandInControl:
    def __init__(self, robot: _StandInRobot, interface: str) -> None:
        self.robot, self.interface = robot, interface

    def readOnce(self) -> tuple[SimpleNamespace, _Duration]:
        r = self.robot
        r.apply()
        r.t += CLOCK_PERIOD
        if r.on_tick is not None:
            r.on_tick(r)
        return r._state(), _Duration(CLOCK_PERIOD)

    def writeOnce(self, cmd: Any) -> None:
        """Take the command, as libfranka's writeOnce sends it: the robot moves on its own clock, applied at the
        next read (or close) — its kinematics is no part of the cycle that sent the command."""
        r = self.robot
        r.commands += 1
        r.pending = (self.interface, cmd.dq if self.interface == "velocity" else cmd.q, cmd.motion_finished)


class StandInFranka(FrankaDriver):
    """The franka driver on :class:`StandInLibrary` (no network, no simulator): every state at once.

        fdcontrol serve --robot fr3 --driver tests.franka_inject:StandInFranka --rate 1000
    """

    def __init__(self, robot: Any, dt: float = CLOCK_PERIOD, **options: Any) -> None:
        options.setdefault("robot_ip", "standin")
        super().__init__(robot, dt, library=StandInLibrary(robot), **options)
