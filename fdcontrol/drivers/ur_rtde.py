"""UrRtdeDriver: a Universal Robots arm through the ``ur_rtde`` library (no ROS).

NOT RUN ON HARDWARE: this driver was tested only against a recording fake of ur_rtde's
``RTDEControlInterface`` and ``RTDEReceiveInterface`` (tests/test_ur_rtde.py), never
against a robot or URSim.

* velocity interface: ``speedJ(q̇_ref, acceleration, dt)`` once per cycle (rad/s, rad/s²);
* position interface: ``servoJ(q_ref, 0, 0, dt, lookahead_time, gain)`` (rad, s);
* the robot-side watchdog is armed (``setWatchdog(watchdog_frequency)``) and kicked every
  cycle, so the arm stops by itself if fdcontrol stops sending;
* ``speedStop``/``servoStop`` once when the loop stops, faults, or holds at standstill;
* run the loop at 500 Hz (e-Series) or 125 Hz (CB3) — ``rate`` in the settings.

Wrench: ``getActualTCPForce`` is [F; τ] at the TCP in the controller's base frame (N, N·m).
:meth:`read_wrench` returns the raw sensor contract of :class:`RobotDriver` — a reading in
the tip frame — so it rotates it with the model's forward kinematics (:func:`base_to_tip`).
``wrench_sign = -1`` (default) reads UR's value as the wrench the
environment exerts on the tool and turns it into fdcontrol's convention (the tool on the
environment, :mod:`fdcontrol.control.law`). The model's tip must be the controller's TCP
(tool0 with a zero TCP offset for the shipped ur10 model, whose base_link is the controller's
base frame; ``base_yaw = π`` for ur_description URDFs whose base_link is turned by π).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from fdcontrol.drivers.base import JointState, RobotDriver
from fdcontrol.drivers.udp import StaleStateError
from fdcontrol.extras import missing
from fdcontrol.model.robot import RobotModel

SAFETY_MODES = {1: "NORMAL", 2: "REDUCED", 3: "PROTECTIVE_STOP", 4: "RECOVERY", 5: "SAFEGUARD_STOP",
                6: "SYSTEM_EMERGENCY_STOP", 7: "ROBOT_EMERGENCY_STOP", 8: "VIOLATION", 9: "FAULT",
                10: "VALIDATE_JOINT_ID", 11: "UNDEFINED_SAFETY_MODE", 12: "AUTOMATIC_MODE_SAFEGUARD_STOP",
                13: "SYSTEM_THREE_POSITION_ENABLING_STOP"}
OK_SAFETY = (1, 2)


class UrSafetyError(RuntimeError):
    """The controller left normal/reduced safety mode (protective stop, e-stop, …)."""


def base_to_tip(w_base: np.ndarray, R_tip: np.ndarray, base_yaw: float = 0.0) -> np.ndarray:
    """A wrench at the tip origin from UR's base frame into the tip frame: Rᵀ·Rz(yaw)·[F; τ].

    R_tip is the tip orientation in the model's base; Rz(yaw) turns UR's base into the model's.
    Only a rotation: UR reports the torque about the TCP already.
    """
    c, s = math.cos(base_yaw), math.sin(base_yaw)
    Rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    M = R_tip.T @ Rz
    return np.concatenate((M @ w_base[:3], M @ w_base[3:]))


def _default_control(host: str, frequency: float):
    try:
        import rtde_control
    except ImportError as exc:
        raise missing("ur", "the UR driver", exc) from exc

    return rtde_control.RTDEControlInterface(host, frequency)


def _default_receive(host: str, frequency: float):
    try:
        import rtde_receive
    except ImportError as exc:
        raise missing("ur", "the UR driver", exc) from exc

    return rtde_receive.RTDEReceiveInterface(host, frequency)


class UrRtdeDriver(RobotDriver):
    simulated = False

    def __init__(self, robot: RobotModel, dt: float = 0.002, *, host: str, interface: str = "velocity",
                 acceleration: float = 5.0, lookahead_time: float = 0.1, gain: float = 300.0,
                 watchdog_frequency: float = 10.0, stop_acceleration: float = 10.0, wrench_sign: float = -1.0,
                 base_yaw: float = 0.0, timeout: float = 0.1,
                 control_factory: Callable[[str, float], Any] | None = None,
                 receive_factory: Callable[[str, float], Any] | None = None) -> None:
        if interface not in ("velocity", "position"):
            raise ValueError(f"interface must be 'velocity' or 'position', got {interface!r}")
        if not 0.03 <= lookahead_time <= 0.2 or not 100 <= gain <= 2000:
            raise ValueError("servoJ needs lookahead_time in [0.03, 0.2] s and gain in [100, 2000]")
        for f in (control_factory, receive_factory):
            if f is not None and not callable(f):
                raise TypeError("control_factory/receive_factory must be callables (Python API only)")
        self.robot, self.dof, self.dt, self.interface = robot, robot.dof, float(dt), interface
        self.acceleration, self.lookahead_time, self.gain = float(acceleration), float(lookahead_time), float(gain)
        self.watchdog_frequency, self.stop_acceleration = float(watchdog_frequency), float(stop_acceleration)
        self.wrench_sign, self.base_yaw, self.timeout = float(wrench_sign), float(base_yaw), float(timeout)
        frequency = 1.0 / self.dt
        self.receive = (receive_factory or _default_receive)(host, frequency)
        self.control = (control_factory or _default_control)(host, frequency)
        self.control.setWatchdog(self.watchdog_frequency)
        self.status: dict[str, Any] = {}
        # published in the loop state (LoopState.speed_scaling / safety_mode), refreshed by every read
        self.speed_scaling: float = math.nan  # fraction 0–1
        self.safety_mode: str | None = None  # SAFETY_MODES name
        self._stopped = True  # nothing commanded yet
        self._t_robot, self._t_changed = math.nan, time.monotonic()
        self._q = np.zeros(self.dof)

    @classmethod
    def from_options(cls, robot: RobotModel, dt: float, options: dict[str, Any]) -> UrRtdeDriver:
        opts = dict(options)
        if "control_factory" in opts or "receive_factory" in opts:
            raise ValueError("interface factories are a Python API, not a setting")
        return cls(robot, dt, **opts)

    # ------------------------------------------------------------------ in
    def read(self) -> JointState:
        r = self.receive
        t = float(r.getTimestamp())
        now = time.monotonic()
        if t != self._t_robot:
            self._t_robot, self._t_changed = t, now
        elif now - self._t_changed > self.timeout:
            raise StaleStateError(f"no new RTDE state for {now - self._t_changed:.3f} s (timeout {self.timeout} s)")
        mode = int(r.getSafetyMode())
        self.speed_scaling, self.safety_mode = float(r.getSpeedScaling()), SAFETY_MODES.get(mode, "UNKNOWN")
        self.status = {"speed_scaling": self.speed_scaling, "safety_mode": mode, "safety_mode_name": self.safety_mode}
        if mode not in OK_SAFETY:
            raise UrSafetyError(f"UR safety mode {mode} ({SAFETY_MODES.get(mode, 'UNKNOWN')})")
        q, qd = np.array(r.getActualQ(), dtype=float), np.array(r.getActualQd(), dtype=float)
        if q.shape != (self.dof,) or qd.shape != (self.dof,) or not np.all(np.isfinite(np.r_[q, qd])):
            raise StaleStateError("RTDE joint state is not 2 × 6 finite numbers")
        self._q = q
        return JointState(q, qd, t)

    def read_wrench(self) -> np.ndarray | None:
        """UR's TCP wrench (base frame) as a tip-frame reading in fdcontrol's sign convention."""
        w = np.array(self.receive.getActualTCPForce(), dtype=float)
        if w.shape != (6,) or not np.all(np.isfinite(w)):
            return None
        R = self.robot.pose(self._q)[:3, :3]
        return self.wrench_sign * base_to_tip(w, R, self.base_yaw)

    def zero_sensor(self) -> None:
        """Zero UR's TCP force measurement on the controller (``zeroFtSensor``)."""
        self.control.zeroFtSensor()

    # ------------------------------------------------------------------ out
    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None:
        c = self.control
        # while stopped the robot's watchdog may have ended the control script: bring it back
        if self._stopped and qd_ref is not None and np.any(qd_ref) and not c.isProgramRunning():
            c.reuploadScript()
            c.setWatchdog(self.watchdog_frequency)
        at_rest = qd_ref is None or not np.any(qd_ref)
        if self._stopped and at_rest:  # stopped and staying so: only keep the watchdog fed
            c.kickWatchdog()
            return
        if self.interface == "velocity":
            qd = [0.0] * self.dof if qd_ref is None else [float(v) for v in qd_ref]
            c.speedJ(qd, self.acceleration, self.dt)
        else:
            q = self._q if q_ref is None else q_ref
            c.servoJ([float(v) for v in q], 0.0, 0.0, self.dt, self.lookahead_time, self.gain)
        c.kickWatchdog()
        self._stopped = False

    def stop_motion(self) -> None:
        """``speedStop``/``servoStop``: leave the streaming mode, decelerating (rad/s²)."""
        if self._stopped:
            return
        if self.interface == "velocity":
            self.control.speedStop(self.stop_acceleration)
        else:
            self.control.servoStop(self.stop_acceleration)
        self._stopped = True

    def exchange(self, loop: Any, state: Any) -> None:
        """After each cycle (loop hook): stop the streaming mode on stop, fault, or a hold at rest."""
        at_rest = not np.any(state.qd_ref)
        if not state.running or state.fault is not None or (state.holding and at_rest):
            self.stop_motion()

    def close(self) -> None:
        self.stop_motion()
        for iface in (self.control, self.receive):
            try:
                iface.disconnect()
            except Exception:
                pass
