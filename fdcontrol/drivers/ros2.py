"""Ros2Driver: talk to a ROS 2 robot driver (ros2_control) over DDS, no ROS installation needed.

Speaks the wire format of rmw_cyclonedds through the ``cyclonedds`` Python package (topic
``rt/<name>``, types ``pkg::msg::dds_::Name_``, see :mod:`fdcontrol.drivers.ros2_msgs`), so a
ROS 2 node using Cyclone DDS on the same domain sees fdcontrol as one more node. The
defaults are ``ur_robot_driver``'s names.

* in:  ``joint_states`` (sensor_msgs/JointState; joints matched by name, any order, extra
  joints ignored), ``wrench`` (geometry_msgs/WrenchStamped in ``sensor_frame``),
  ``target_wrench`` (WrenchStamped in the base or tip frame), ``target_frame`` (PoseStamped
  in the base frame) — the last two as in FZI cartesian_controllers;
* out: ``command`` (std_msgs/Float64MultiArray in ``controller_joints`` order: rad/s for
  the velocity interface, rad for the position interface), ``current_pose`` (PoseStamped,
  tip in base) and ``state_topic`` (std_msgs/String, the loop state as JSON).

Stale input faults the loop into hold: ``read`` raises :class:`StaleStateError` when no
joint state has arrived for ``timeout`` seconds (measured on arrival, fdcontrol's clock).
Sensor sign: a ROS wrench topic carries the sensor's reading of the wrench the environment
exerts on the tool (``wrench_sign = -1``, the default, turns it into fdcontrol's
convention, see :mod:`fdcontrol.control.law`).
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import numpy as np

from fdcontrol.drivers.base import JointState, RobotDriver
from fdcontrol.drivers.udp import StaleStateError
from fdcontrol.model.robot import RobotModel

UR_JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
             "wrist_3_joint"]


class WrenchFrameError(ValueError):
    """A WrenchStamped whose frame_id is not the configured sensor frame."""


def _qos(spec: dict[str, Any] | None, reliable: bool, depth: int):
    from cyclonedds.core import Policy
    from cyclonedds.qos import Qos

    spec = dict(spec or {})
    rel = spec.pop("reliability", "reliable" if reliable else "best_effort")
    depth = int(spec.pop("depth", depth))
    if spec:
        raise ValueError(f"unknown QoS settings {sorted(spec)} (reliability, depth)")
    if rel not in ("reliable", "best_effort"):
        raise ValueError(f"reliability must be 'reliable' or 'best_effort', got {rel!r}")
    r = Policy.Reliability.Reliable(max_blocking_time=0) if rel == "reliable" else Policy.Reliability.BestEffort
    return Qos(r, Policy.History.KeepLast(depth), Policy.Durability.Volatile)


def quat_from_matrix(R: np.ndarray) -> np.ndarray:
    """Unit quaternion [x, y, z, w] of a rotation matrix (Shepperd's method)."""
    tr = float(np.trace(R))
    if tr > 0:
        s = 2.0 * math.sqrt(tr + 1.0)
        q = [(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s]
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        q = [0.0, 0.0, 0.0, (R[k, j] - R[j, k]) / s]
        q[i], q[j], q[k] = 0.25 * s, (R[j, i] + R[i, j]) / s, (R[k, i] + R[i, k]) / s
    return np.array(q)


def matrix_from_quat(x: float, y: float, z: float, w: float) -> np.ndarray:
    n = math.sqrt(x * x + y * y + z * z + w * w)
    if not math.isfinite(n) or n < 1e-9:
        raise ValueError("orientation quaternion is zero or not finite")
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


class Ros2Driver(RobotDriver):
    simulated = False

    def __init__(self, robot: RobotModel, dt: float = 0.002, *, domain_id: int | None = None,
                 joint_states: str = "joint_states", wrench: str = "force_torque_sensor_broadcaster/wrench",
                 command: str | None = None, interface: str = "velocity", joints: list[str] | None = None,
                 controller_joints: list[str] | None = None, sensor_frame: str = "tool0",
                 wrench_sign: float = -1.0, base_frame: str | None = None, tip_frame: str | None = None,
                 target_wrench: str = "target_wrench", target_frame: str = "target_frame",
                 current_pose: str = "current_pose", state_topic: str = "fdcontrol/state",
                 publish_every: int = 10, timeout: float = 0.1, wrench_timeout: float = 0.5,
                 connect_timeout: float = 10.0, sub_qos: dict[str, Any] | None = None,
                 pub_qos: dict[str, Any] | None = None) -> None:
        from cyclonedds.domain import DomainParticipant
        from cyclonedds.pub import DataWriter
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        from fdcontrol.drivers import ros2_msgs as m

        if interface not in ("velocity", "position"):
            raise ValueError(f"interface must be 'velocity' or 'position', got {interface!r}")
        self.dof, self.robot, self.interface = robot.dof, robot, interface
        self.joints = list(joints or robot.joint_names)
        self.controller_joints = list(controller_joints or self.joints)
        if len(self.joints) != self.dof or sorted(self.controller_joints) != sorted(self.joints):
            raise ValueError(f"joints must name the {self.dof} model joints once each; controller_joints "
                             "the same names in the controller's order")
        self._cmd_index = np.array([self.joints.index(n) for n in self.controller_joints])
        self.sensor_frame, self.wrench_sign = sensor_frame, float(wrench_sign)
        self.base_frame, self.tip_frame = base_frame or robot.base, tip_frame or robot.tip
        self.timeout, self.wrench_timeout = float(timeout), float(wrench_timeout)
        self.publish_every = max(1, int(publish_every))
        if domain_id is None:
            domain_id = int(os.environ.get("ROS_DOMAIN_ID", "0"))
        self._m = m
        self.dp = DomainParticipant(int(domain_id))
        rq, wq = _qos(sub_qos, False, 10), _qos(pub_qos, True, 10)

        def reader(name: str, typ: type):
            return DataReader(self.dp, Topic(self.dp, m.topic_name(name), typ), qos=rq) if name else None

        def writer(name: str, typ: type):
            return DataWriter(self.dp, Topic(self.dp, m.topic_name(name), typ), qos=wq) if name else None

        command = command or f"forward_{interface}_controller/commands"
        self._js_reader = reader(joint_states, m.JointState)
        self._wrench_reader = reader(wrench, m.WrenchStamped)
        self._target_wrench_reader = reader(target_wrench, m.WrenchStamped)
        self._target_frame_reader = reader(target_frame, m.PoseStamped)
        self._cmd_writer = writer(command, m.Float64MultiArray)
        self._pose_writer = writer(current_pose, m.PoseStamped)
        self._state_writer = writer(state_topic, m.String)
        self._layout = m.MultiArrayLayout([m.MultiArrayDimension("joints", self.dof, self.dof)], 0)
        self._state: JointState | None = None
        self._wrench: np.ndarray | None = None
        self._received = self._wrench_received = 0.0
        self.rejected: dict[str, str] = {}  # last rejection reason per input topic
        self._last_q: np.ndarray | None = None
        self._exchanges = 0
        deadline = time.monotonic() + float(connect_timeout)
        while self._state is None and time.monotonic() < deadline:
            self._take_joint_states()
            if self._state is None:
                time.sleep(0.01)
        if self._state is None:
            self.close()
            raise StaleStateError(f"no sensor_msgs/JointState for joints {self.joints} on DDS topic "
                                  f"'{m.topic_name(joint_states)}' (domain {domain_id}) within {connect_timeout} s")

    @classmethod
    def from_options(cls, robot: RobotModel, dt: float, options: dict[str, Any]) -> Ros2Driver:
        return cls(robot, dt, **options)

    # ------------------------------------------------------------------ in
    @staticmethod
    def _newest(reader) -> Any:
        from cyclonedds.internal import InvalidSample

        newest = None
        if reader is None:
            return None
        for s in reader.take(N=64):
            if not isinstance(s, InvalidSample):
                newest = s
        return newest

    def _take_joint_states(self) -> None:
        msg = self._newest(self._js_reader)
        if msg is None:
            return
        try:
            index = [msg.name.index(n) for n in self.joints]
        except ValueError:
            self.rejected["joint_states"] = f"joint_states lacks some of {self.joints}"
            return
        pos = np.array(msg.position, dtype=float)
        vel = np.array(msg.velocity, dtype=float) if len(msg.velocity) == len(msg.name) else None
        if len(pos) != len(msg.name):
            self.rejected["joint_states"] = "joint_states position and name differ in length"
            return
        q = pos[index]
        qd = vel[index] if vel is not None else np.zeros(self.dof)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            self.rejected["joint_states"] = "joint_states contains NaN or Inf"
            return
        self._state = JointState(q, qd, msg.header.stamp.seconds())
        self._received = time.monotonic()

    def read(self) -> JointState:
        self._take_joint_states()
        age = time.monotonic() - self._received
        if age > self.timeout:
            raise StaleStateError(f"no joint_states for {age:.3f} s (timeout {self.timeout} s)")
        assert self._state is not None
        return self._state

    def read_wrench(self) -> np.ndarray | None:
        """The sensor reading in ``sensor_frame`` (the tip frame), in fdcontrol's sign convention."""
        if self._wrench_reader is None:
            return None
        msg = self._newest(self._wrench_reader)
        if msg is not None:
            if self.sensor_frame and msg.header.frame_id != self.sensor_frame:
                raise WrenchFrameError(f"wrench frame_id {msg.header.frame_id!r} is not the sensor frame "
                                       f"{self.sensor_frame!r}")
            f, t = msg.wrench.force, msg.wrench.torque
            w = self.wrench_sign * np.array([f.x, f.y, f.z, t.x, t.y, t.z])
            if np.all(np.isfinite(w)):
                self._wrench, self._wrench_received = w, time.monotonic()
        if self._wrench is None:
            return None  # no sensor (yet): the loop measures zero
        age = time.monotonic() - self._wrench_received
        if age > self.wrench_timeout:
            raise StaleStateError(f"no wrench for {age:.3f} s (timeout {self.wrench_timeout} s)")
        return self._wrench

    # ------------------------------------------------------------------ out
    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None:
        if self.interface == "velocity":
            v = np.zeros(self.dof) if qd_ref is None else np.asarray(qd_ref, dtype=float)
        else:  # position: without a reference, hold the last commanded (else measured) position
            if q_ref is not None:
                self._last_q = np.asarray(q_ref, dtype=float)
            elif self._last_q is None and self._state is not None:
                self._last_q = self._state.q
            if self._last_q is None:
                return
            v = self._last_q
        self._cmd_writer.write(self._m.Float64MultiArray(self._layout, v[self._cmd_index].tolist()))

    def exchange(self, loop: Any, state: Any) -> None:
        """Once per cycle (the loop calls it): streamed inputs in, pose and state out."""
        self._take_targets(loop)
        self._exchanges += 1  # counted here, not by state.cycle: a faulted loop repeats a cycle number
        if self._exchanges % self.publish_every == 0 or not state.running:
            self._publish_state(state)

    def _take_targets(self, loop: Any) -> None:
        msg = self._newest(self._target_wrench_reader)
        if msg is not None:
            frame = {self.base_frame: "base", "": "base", self.tip_frame: "tool"}.get(msg.header.frame_id)
            f, t = msg.wrench.force, msg.wrench.torque
            try:
                if frame is None:
                    raise ValueError(f"target_wrench frame_id {msg.header.frame_id!r} is neither "
                                     f"{self.base_frame!r} nor {self.tip_frame!r}")
                loop.set_wrench([f.x, f.y, f.z, t.x, t.y, t.z], frame=frame)
            except ValueError as exc:
                self.rejected["target_wrench"] = str(exc)
        msg = self._newest(self._target_frame_reader)
        if msg is not None:
            p, o = msg.pose.position, msg.pose.orientation
            try:
                if msg.header.frame_id not in ("", self.base_frame):
                    raise ValueError(f"target_frame frame_id {msg.header.frame_id!r} is not {self.base_frame!r}")
                T = np.eye(4)
                T[:3, :3], T[:3, 3] = matrix_from_quat(o.x, o.y, o.z, o.w), [p.x, p.y, p.z]
                loop.set_target(T)
            except ValueError as exc:
                self.rejected["target_frame"] = str(exc)

    def _publish_state(self, state: Any) -> None:
        m = self._m
        stamp = m.Time.from_seconds(time.time())
        if self._pose_writer is not None:
            T = state.tip_pose
            x, y, z, w = quat_from_matrix(T[:3, :3])
            pose = m.Pose(m.Point(*map(float, T[:3, 3])), m.Quaternion(float(x), float(y), float(z), float(w)))
            self._pose_writer.write(m.PoseStamped(m.Header(stamp, self.base_frame), pose))
        if self._state_writer is not None:
            doc = {"cycle": state.cycle, "mode": state.mode, "running": state.running, "holding": state.holding,
                   "watchdog": state.watchdog, "fault": state.fault, "q": state.q.tolist(),
                   "qd_ref": state.qd_ref.tolist(), "wrench": state.wrench.tolist(),
                   "f_measured": state.f_measured.tolist(), "rejected": self.rejected}
            self._state_writer.write(m.String(json.dumps(doc)))

    def close(self) -> None:
        """Stop a velocity-controlled arm (a forward controller keeps its last command), leave the domain."""
        if getattr(self, "dp", None) is None:
            return
        if self.interface == "velocity" and self._cmd_writer is not None:
            self.send(None, None)
        for name in ("_js_reader", "_wrench_reader", "_target_wrench_reader", "_target_frame_reader",
                     "_cmd_writer", "_pose_writer", "_state_writer"):
            entity = getattr(self, name, None)
            if entity is not None:
                entity.__del__()
                setattr(self, name, None)
        self.dp.__del__()
        self.dp = None
