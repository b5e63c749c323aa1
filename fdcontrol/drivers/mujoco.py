"""MujocoRobot: the controller's own robot description simulated by MuJoCo, with a tool, a
flange force–torque sensor, contact objects and a simulated hand.

The arm is compiled from the same URDF the controller loads (so the kinematics agree to
machine precision) and completed with ``mujoco.MjSpec``:

* a joint servo per joint, in one of two modes like real arms:

  - ``velocity`` (UR speedj): an ``intvelocity`` actuator (its activation integrates the
    velocity reference, force k_p (∫q̇_ref − q)) plus a ``velocity`` actuator (k_v (q̇_ref − q̇)),
    i.e. a PI velocity servo,
  - ``position`` (UR servoj, KUKA RSI): a ``position`` actuator k_p (q_ref − q) plus the
    velocity actuator fed with the reference's finite difference (q_ref,k − q_ref,k−1)/dt,

  with k_p = I_j ω², k_v = 2 I_j ω (ω = 2π ``bandwidth``, I_j the joint's diagonal inertia at
  q0), gravity compensation through the actuators (``gravcomp`` on the bodies, tool included
  as a configured payload, ``actgravcomp`` on the joints) and the URDF's joint torque limits
  (``actfrcrange``), and a motor ``armature`` (reflected rotor inertia, kg·m²);
* a tool body below the tip (flange) frame: ``tool`` = {"mass": kg, "com": [m] in the tip
  frame, "length": m, "radius": m}, a cylinder along the tip z axis ending in a sphere;
* a 6-axis force–torque sensor at the flange (MuJoCo ``force`` / ``torque`` sensors on a site
  at the tip origin), read in the convention ``sensor_sign`` of :mod:`fdcontrol.control.sensing`, with
  an offset ``sensor_bias`` [6] and white noise ``sensor_noise`` (σ in N and N·m) — at the end of each period,
  or with ``sensor_average`` its mean over the period's physics sub-steps;
* ``objects`` = [{"name", "kind": "box", "position": [m], "quaternion": [x, y, z, w],
  "size": [full lengths, m], "stiffness", "damping"}] (see EnvObject) in the robot's base frame;
  contact is tool ↔ objects only, unless ``link_contacts``: then the arm's collision shapes (the
  URDF's ``<collision>`` elements, capsules as pinocchio reads them) touch the objects and each other
  (link pairs the robot's geometry does not check — adjacent, or listed in its SRDF — excluded);
  without it the links' shapes are there but touch nothing;
* ``set_push(w)``: a wrench [F; τ] (N, N·m) in the base frame acting on the tool at the tip
  origin — the simulated hand.

``send`` advances the physics by one control period in fixed sub-steps of ``timestep``
(deterministic; the service paces it in real time); the steps run when the period's end is
first observed (``read``, the sensor, the next ``send``), so the loop's cycle ends before them — or, in a
loop thread that keeps its own clock (the service's), while it waits for the next cycle, half a period before it
(``between_cycles``): the next cycle's read then finds the period done, a published state is not held up by the
physics of the period before, nor the API process that the publish woke by the physics after it.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fdcontrol.control.sensing import check_sign
from fdcontrol.drivers.base import JointState, RobotDriver
from fdcontrol.extras import missing
from fdcontrol.model.robot import HOME, SHIPPED, URDF_DIR, ModelError, RobotModel

try:
    import mujoco
except ImportError as exc:
    raise missing("mujoco", "the MuJoCo driver", exc) from exc

Interface = Literal["velocity", "position"]
TABLE_GAP = 0.05  # m between the tool's end and the default table


@dataclass(frozen=True)
class Tool:
    """The tool below the flange: mass (kg), centre of mass in the tip frame (m), geometry (m)."""

    mass: float = 0.5
    com: tuple[float, float, float] = (0.0, 0.0, 0.05)
    length: float = 0.1
    radius: float = 0.02

    def __post_init__(self) -> None:
        if not (0 < self.mass <= 50 and 0.005 <= self.length <= 2 and 0.002 <= self.radius <= 0.2):
            raise ModelError("tool: mass in (0, 50] kg, length in [0.005, 2] m, radius in [0.002, 0.2] m")
        if len(self.com) != 3 or not all(math.isfinite(c) for c in self.com):
            raise ModelError("tool com must be 3 finite numbers (m, tip frame)")

    @property
    def inertia(self) -> list[float]:
        """Rotational inertia about the centre of mass, tip axes, [Ixx, Iyy, Izz, Ixy, Ixz, Iyz]
        (kg·m²): a solid cylinder along the tip's z axis."""
        i = self.mass * (3 * self.radius ** 2 + self.length ** 2) / 12
        return [i, i, self.mass * self.radius ** 2 / 2, 0.0, 0.0, 0.0]


@dataclass(frozen=True)
class EnvObject:
    """A box in the robot's base frame. ``stiffness`` and ``damping`` are MuJoCo's direct
    contact parameters solref = (−stiffness, −damping): the contact's reference acceleration
    a_ref = −damping·v − stiffness·penetration (1/s², 1/s), so the force per metre scales with
    the arm's effective mass at the contact (100, 20 give a compliant surface, ~2–5 mm at 10 N
    on the shipped arms; 5000, 50 a hard one)."""

    name: str
    position: tuple[float, float, float]
    size: tuple[float, float, float]  # full lengths (m)
    quaternion: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)  # x, y, z, w
    kind: str = "box"
    stiffness: float = 100.0
    damping: float = 20.0

    def __post_init__(self) -> None:
        if self.kind != "box":
            raise ModelError(f"object {self.name!r}: only kind 'box' is supported")
        vals = [*self.position, *self.size, *self.quaternion, self.stiffness, self.damping]
        if len(self.position) != 3 or len(self.size) != 3 or len(self.quaternion) != 4:
            raise ModelError(f"object {self.name!r}: position 3, size 3, quaternion 4 numbers")
        if not all(math.isfinite(float(v)) for v in vals) or min(self.size) <= 0:
            raise ModelError(f"object {self.name!r}: finite values and positive sizes required")
        if not (0 < self.stiffness <= 1e7 and 0 <= self.damping <= 1e5):
            raise ModelError(f"object {self.name!r}: stiffness in (0, 1e7], damping in [0, 1e5]")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "position": list(self.position),
                "quaternion": list(self.quaternion), "size": list(self.size)}


def table(height: float = 0.0, center: tuple[float, float] = (0.6, 0.0), **kw: Any) -> EnvObject:
    """A 1.2 m × 1.2 m × 0.1 m table whose top is at z = height (base frame)."""
    return EnvObject("table", (center[0], center[1], height - 0.05), (1.2, 1.2, 0.1), **kw)


def _urdf_of(robot: RobotModel, path: str | None) -> str:
    if path is not None:
        return path
    if getattr(robot, "source", None) is not None and str(robot.source).lower().endswith((".urdf", ".xml", ".mjcf")):
        return str(robot.source)  # the description the model was loaded from: URDF or MJCF
    if robot.name in SHIPPED:
        return str(URDF_DIR / SHIPPED[robot.name][0])
    raise ModelError("MujocoRobot needs the robot's URDF: pass urdf=<path>")


class MujocoRobot(RobotDriver):
    """A MuJoCo arm behind the RobotDriver protocol (see the module doc)."""

    simulated = True

    def __init__(self, robot: RobotModel, dt: float = 0.002, mode: Interface = "velocity",
                 q0: np.ndarray | list[float] | None = None, timestep: float = 0.0005,
                 bandwidth: float = 20.0, armature: float = 0.05, tool: Tool | None = None,
                 objects: list[EnvObject] | None = None, sensor_sign: str = "robot_on_tool",
                 sensor_bias: list[float] | np.ndarray | None = None, sensor_noise: float = 0.0,
                 seed: int = 0, urdf: str | None = None, sensor_average: bool = False,
                 link_contacts: bool = False) -> None:
        if mode not in ("velocity", "position"):
            raise ModelError(f"mode must be 'velocity' or 'position', got {mode!r}")
        if not (dt > 0 and 0 < timestep <= dt):
            raise ModelError("need dt > 0 and 0 < timestep ≤ dt")
        self.robot, self.dof, self.dt = robot, robot.dof, float(dt)
        self.interface: Interface = mode
        self.nsub = max(1, round(dt / timestep))
        self.sensor_sign, self._s = sensor_sign, check_sign(sensor_sign)
        self.sensor_bias = np.zeros(6) if sensor_bias is None else np.asarray(sensor_bias, dtype=float)
        if self.sensor_bias.shape != (6,) or not np.all(np.isfinite(self.sensor_bias)):
            raise ModelError("sensor_bias must be 6 finite numbers (N, N·m)")
        if not (0 <= sensor_noise <= 100):
            raise ModelError("sensor_noise must be in [0, 100] (N, N·m standard deviation)")
        self.sensor_noise, self._rng = float(sensor_noise), np.random.default_rng(seed)
        if not isinstance(sensor_average, bool):
            raise ModelError("sensor_average must be true or false")
        self.sensor_average = sensor_average
        if not isinstance(link_contacts, bool):
            raise ModelError("link_contacts must be true or false")
        self.link_contacts = link_contacts
        self.tool = tool or Tool()
        self.objects = list(objects or [])
        names = [o.name for o in self.objects]
        if len(set(names)) != len(names):
            raise ModelError("object names must be unique")
        self._lock = threading.Lock()
        self.model = self._build(_urdf_of(robot, urdf), timestep, armature)
        self._data = mujoco.MjData(self.model)
        q0 = robot.check_q(HOME.get(robot.name, np.zeros(self.dof)) if q0 is None else q0)
        self._set_gains(q0, bandwidth)
        self.reset(q0)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_options(cls, robot: RobotModel, dt: float, options: dict[str, Any]) -> MujocoRobot:
        """From settings: ``mode``, ``q0``, ``timestep``, ``bandwidth``, ``armature``,
        ``sensor_sign``, ``tool`` {mass, com, length, radius}, ``objects`` [{…}] and ``table``
        {height, center, stiffness, damping} (base frame). By default a table lies under the
        tool, its top ``TABLE_GAP`` below the tool's end at q0; ``table: null`` for none."""
        opts = dict(options)
        tool = Tool(**{k: tuple(v) if isinstance(v, list) else v for k, v in (opts.pop("tool", None) or {}).items()})
        objs = [EnvObject(**{k: tuple(v) if isinstance(v, list) else v for k, v in o.items()})
                for o in opts.pop("objects", None) or []]
        tbl = opts.pop("table", "auto")
        if tbl == "auto":
            end = cls(robot, dt=dt, tool=tool, objects=[], **opts).tool_end()
            tbl = {"height": float(end[2]) - tool.radius - TABLE_GAP, "center": (float(end[0]), float(end[1]))}
        if tbl is not None:
            if not isinstance(tbl, dict):
                raise ModelError("table must be a mapping {height, center, stiffness, damping} or null")
            objs.append(table(**{k: tuple(v) if isinstance(v, list) else v for k, v in tbl.items()}))
        return cls(robot, dt=dt, tool=tool, objects=objs, **opts)

    def _build(self, urdf: str, timestep: float, armature: float) -> mujoco.MjModel:
        try:
            spec = mujoco.MjSpec.from_file(urdf)
        except Exception as exc:
            raise ModelError(f"MuJoCo cannot compile {urdf}: {exc}") from exc
        spec.compiler.fusestatic = False
        spec.compiler.discardvisual = True
        spec.option.timestep = timestep
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        base, tip = spec.body(self.robot.base), spec.body(self.robot.tip)
        if base is None or tip is None:
            raise ModelError(f"base {self.robot.base!r} and tip {self.robot.tip!r} must be bodies (URDF links)")
        joints = [spec.joint(n) for n in self.robot.joint_names]
        if any(j is None for j in joints) or len(spec.joints) != self.dof:
            raise ModelError("the description's moving joints must be exactly the controller's chain")
        # an MJCF arm brings its own actuators: their force limits become the joints' (the servo below
        # replaces them, as a robot controller replaces the motor drivers' own loops)
        effort = self.robot.model.effortLimit.copy()
        for a in list(spec.actuators):
            if a.trntype == mujoco.mjtTrn.mjTRN_JOINT and a.target in self.robot.joint_names and (
                    a.forcelimited == mujoco.mjtLimited.mjLIMITED_TRUE or
                    (a.forcelimited == mujoco.mjtLimited.mjLIMITED_AUTO and np.any(a.forcerange))):
                i = self.robot.joint_names.index(a.target)
                effort[i] = min(effort[i], float(np.max(np.abs(a.forcerange)) * abs(a.gear[0])))
            spec.delete(a)
        for b in spec.bodies[1:]:
            b.gravcomp = 1.0
        for j, e in zip(joints, effort, strict=True):
            j.armature, j.frictionloss = armature, 0.0
            j.damping = np.zeros(3)
            j.actgravcomp = True
            if math.isfinite(e) and e > 0:
                j.actfrclimited = mujoco.mjtLimited.mjLIMITED_TRUE
                j.actfrcrange = [-e, e]
        self._link_geoms(spec)
        self._add_tool(spec, tip)
        for o in self.objects:
            x, y, z, w = o.quaternion
            g = base.add_geom(name=o.name, type=mujoco.mjtGeom.mjGEOM_BOX, pos=list(o.position),
                              quat=[w, x, y, z], size=[s / 2 for s in o.size])
            g.contype, g.conaffinity = 0, 1
            g.solref = [-o.stiffness, -o.damping]
            g.solimp = [0.99, 0.99, 0.001, 0.5, 2.0]
        lim = self.robot.limits  # radians whatever the file's angle unit; ±∞ for a joint without a range
        for name, lo, hi in zip(self.robot.joint_names, lim.lower, lim.upper, strict=True):
            bounded = bool(math.isfinite(lo) and math.isfinite(hi))
            iv = spec.add_actuator(name=f"{name}_{'intvel' if self.interface == 'velocity' else 'pos'}",
                                   target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
            iv.gaintype, iv.biastype = mujoco.mjtGain.mjGAIN_FIXED, mujoco.mjtBias.mjBIAS_AFFINE
            if self.interface == "velocity":  # activation = ∫ q̇_ref, limited to the joint range
                iv.dyntype = mujoco.mjtDyn.mjDYN_INTEGRATOR
                iv.actlimited = mujoco.mjtLimited.mjLIMITED_TRUE if bounded else mujoco.mjtLimited.mjLIMITED_FALSE
                if bounded:
                    iv.actrange = [lo, hi]
            else:
                iv.dyntype = mujoco.mjtDyn.mjDYN_NONE
                iv.actlimited = mujoco.mjtLimited.mjLIMITED_FALSE
            for a, kind in ((iv, "int"), (spec.add_actuator(name=f"{name}_vel", target=name,
                                                           trntype=mujoco.mjtTrn.mjTRN_JOINT), "vel")):
                a.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
                a.forcelimited = mujoco.mjtLimited.mjLIMITED_FALSE
                a.gear = [1, 0, 0, 0, 0, 0]
                if kind == "vel":
                    a.dyntype = mujoco.mjtDyn.mjDYN_NONE
                    a.gaintype, a.biastype = mujoco.mjtGain.mjGAIN_FIXED, mujoco.mjtBias.mjBIAS_AFFINE
                    a.actlimited = mujoco.mjtLimited.mjLIMITED_FALSE
        try:
            return spec.compile()
        except Exception as exc:
            raise ModelError(f"MuJoCo model does not compile: {exc}") from exc

    def _link_geoms(self, spec: mujoco.MjSpec) -> None:
        """The URDF's collision shapes: cylinders that pinocchio reads as capsules become capsules;
        they touch the objects and each other only with ``link_contacts`` (see the module doc)."""
        geo = self.robot.geometry
        caps = {} if geo is None else {(c.link, round(c.radius, 9)) for c in geo.capsules}
        bodies = set()
        for g in spec.geoms:
            body = g.parent.name
            if g.type == mujoco.mjtGeom.mjGEOM_CYLINDER and (body, round(float(g.size[0]), 9)) in caps:
                g.type = mujoco.mjtGeom.mjGEOM_CAPSULE
            if self.link_contacts:  # links: type 1|2 (objects' affinity 1, links' 2), affinity 2
                g.contype, g.conaffinity = 3, 2
                bodies.add(body)
            else:
                g.contype, g.conaffinity = 0, 0
        if self.link_contacts and geo is not None:
            checked = {frozenset((geo.capsules[i].link, geo.capsules[j].link)) for i, j in geo.self_pairs}
            names = sorted(bodies)
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    if frozenset((a, b)) not in checked:
                        spec.add_exclude(bodyname1=a, bodyname2=b)

    def _add_tool(self, spec: mujoco.MjSpec, tip: mujoco.MjsBody) -> None:
        t = self.tool
        body = tip.add_body(name="fd_tool", pos=[0, 0, 0])
        body.explicitinertial = True
        body.mass, body.ipos = t.mass, list(t.com)
        body.inertia = t.inertia[:3]  # a solid cylinder about its centre
        body.gravcomp = 1.0  # the configured payload, as on a real controller
        for g in (body.add_geom(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[t.radius, t.length / 2, 0],
                                pos=[0, 0, t.length / 2]),
                  body.add_geom(name="fd_tool_end", type=mujoco.mjtGeom.mjGEOM_SPHERE,
                                size=[t.radius, 0, 0], pos=[0, 0, t.length])):
            g.contype, g.conaffinity = 1, 0
            g.mass = 0.0  # inertia is explicit
            g.friction = [0.0, 0.005, 0.0001]  # nearly frictionless contact
        body.add_site(name="fd_ft", pos=[0, 0, 0])
        spec.add_sensor(name="fd_force", type=mujoco.mjtSensor.mjSENS_FORCE,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname="fd_ft")
        spec.add_sensor(name="fd_torque", type=mujoco.mjtSensor.mjSENS_TORQUE,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname="fd_ft")

    def _set_gains(self, q0: np.ndarray, bandwidth: float) -> None:
        """k_p = I ω², k_v = 2 I ω from the diagonal joint inertia at q0 (see the module doc)."""
        if not (0 < bandwidth <= 200):
            raise ModelError("bandwidth must be in (0, 200] Hz")
        d, m = self._data, self.model
        d.qpos[:] = q0
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        w = 2 * math.pi * bandwidth
        for j in range(self.dof):
            kp, kv = M[j, j] * w * w, 2 * M[j, j] * w
            first = m.actuator_gainprm[2 * j]
            first[:] = 0
            m.actuator_biasprm[2 * j][:] = 0
            vel = m.actuator_gainprm[2 * j + 1]
            vel[:] = 0
            m.actuator_biasprm[2 * j + 1][:] = 0
            first[0] = kp
            m.actuator_biasprm[2 * j][1] = -kp
            vel[0] = kv
            m.actuator_biasprm[2 * j + 1][2] = -kv
        self._base_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, self.robot.base)
        self._tip_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, self.robot.tip)
        self._tool_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "fd_tool")

    def reset(self, q0: np.ndarray) -> None:
        """Joints at q0 at rest, servo references at q0, no push."""
        with self._lock:
            d = self._data
            mujoco.mj_resetData(self.model, d)
            d.qpos[:] = q0
            d.act[:] = q0 if self.interface == "velocity" else 0.0
            d.ctrl[:] = 0.0
            if self.interface == "position":
                d.ctrl[0::2] = q0
            self._q_ref_prev = np.array(q0, dtype=float)
            self._push = np.zeros(6)
            self.push_point = np.zeros(3)  # where the hand acts: offset from the tip origin, tip frame (m)
            self._due: tuple[np.ndarray | None, np.ndarray | None] | None = None
            self.t, self.sent = 0.0, 0
            mujoco.mj_forward(self.model, d)

    @property
    def data(self) -> mujoco.MjData:
        """MuJoCo's data at the end of the last period sent (its physics run first)."""
        with self._lock:
            self._advance()
            return self._data

    # ------------------------------------------------------------------ RobotDriver
    def read(self) -> JointState:
        with self._lock:
            self._advance()
            return JointState(self._data.qpos.copy(), self._data.qvel.copy(), self.t)

    def read_wrench(self) -> np.ndarray:
        """[F; τ] at the flange, sensor (= tip) frame, in the ``sensor_sign`` convention, plus
        ``sensor_bias`` and Gaussian ``sensor_noise`` (σ, seeded: deterministic)."""
        with self._lock:
            self._advance()
            raw = self._data.sensordata[:6].copy()
        # MuJoCo's force/torque sensors report the parent-on-child wrench: robot_on_tool
        w = self._s * raw + self.sensor_bias
        if self.sensor_noise > 0:
            w = w + self._rng.normal(scale=self.sensor_noise, size=6)
        return w

    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None:
        """Velocity mode: q̇_ref (None = stop). Position mode: q_ref (None = previous
        reference advanced by dt·q̇_ref, or held without q̇_ref). Then one period of physics.

        The period's physics runs when its result is first observed (any reader, the next
        ``send``) — the same sequence of states, but the control loop publishes its cycle before
        the simulated arm moves, as it would beside a real arm that moves on its own."""
        with self._lock:
            self._advance()
            d = self._data
            prev = q_ref
            if self.interface == "velocity":
                v = np.zeros(self.dof) if qd_ref is None else np.asarray(qd_ref, dtype=float)
                d.ctrl[0::2], d.ctrl[1::2] = v, v
            else:
                if q_ref is None:
                    q_ref = self._q_ref_prev + (0.0 if qd_ref is None else self.dt * np.asarray(qd_ref))
                q_ref = np.asarray(q_ref, dtype=float)
                prev, self._q_ref_prev = self._q_ref_prev, q_ref.copy()
                # the servo's velocity feed-forward: the reference's slope, within the URDF limits
                v = self.robot.limits.velocity
                d.ctrl[1::2] = np.clip((q_ref - prev) / self.dt, -v, v)
            self._due = (prev, q_ref)
            self.sent += 1

    def between_cycles(self) -> None:
        """The period's physics now, while the loop waits for its next cycle, instead of in the next cycle's
        read: the same sequence of states (a push acts from the period after it was set, either way), and the cycle that
        publishes the state no longer carries the physics before it."""
        with self._lock:
            self._advance()

    def _advance(self) -> None:
        """The physics of the period sent last, if it has not run yet (caller holds the lock)."""
        if self._due is None:
            return
        (prev, q_ref), self._due, d = self._due, None, self._data
        self._apply_push()
        mean = np.zeros(6) if self.sensor_average else None
        for k in range(self.nsub):
            if self.interface == "position":  # the servo interpolates linearly within the period
                d.ctrl[0::2] = prev + (k + 1) / self.nsub * (q_ref - prev)
            if mean is None:
                mujoco.mj_step(self.model, d)
                continue
            v0 = d.qvel.copy()
            mujoco.mj_step(self.model, d)
            # the acceleration the implicit integrator applied (qacc holds the explicit one)
            d.qacc[:] = (d.qvel - v0) / self.model.opt.timestep
            mujoco.mj_rnePostConstraint(self.model, d)
            mujoco.mj_sensorAcc(self.model, d)
            mean += d.sensordata[:6]
        if mean is None:
            mujoco.mj_rnePostConstraint(self.model, d)  # sensors and cfrc at the final state
            mujoco.mj_sensorAcc(self.model, d)
        else:  # the period's mean, as a sensor sampling faster than the loop and averaging
            d.sensordata[:6] = mean / self.nsub
        self.t += self.dt

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ simulation extras
    def _base_pose(self) -> tuple[np.ndarray, np.ndarray]:
        d = self._data
        return d.xmat[self._base_id].reshape(3, 3).copy(), d.xpos[self._base_id].copy()

    def set_push(self, wrench: np.ndarray | list[float]) -> None:
        """The simulated hand: [F; τ] in the base frame at the tip origin (N, N·m)."""
        w = np.asarray(wrench, dtype=float)
        if w.shape != (6,) or not np.all(np.isfinite(w)):
            raise ValueError("push must be 6 finite numbers [fx, fy, fz, tx, ty, tz] (N, N·m)")
        if np.linalg.norm(w[:3]) > 500 or np.linalg.norm(w[3:]) > 50:
            raise ValueError("push out of range: |F| ≤ 500 N, |τ| ≤ 50 N·m")
        with self._lock:
            self._advance()  # a new push acts from the next period on
            self._push = w.copy()

    @property
    def push(self) -> np.ndarray:
        return self._push.copy()

    def _apply_push(self) -> None:
        """xfrc_applied acts at the tool's centre of mass: τ_com = τ + (p − p_com) × F, with p the
        tip origin moved by ``push_point`` (tip frame; zero: the hand pushes at the sensor)."""
        d = self._data
        Rb, _ = self._base_pose()
        F, tau = Rb @ self._push[:3], Rb @ self._push[3:]
        at = d.xpos[self._tip_id] + d.xmat[self._tip_id].reshape(3, 3) @ self.push_point
        lever = at - d.xipos[self._tool_id]
        d.xfrc_applied[self._tool_id, :3] = F
        d.xfrc_applied[self._tool_id, 3:] = tau + np.cross(lever, F)

    def environment(self) -> dict[str, Any]:
        """Objects (base frame, full sizes) and the current push, for GET /environment."""
        return {"objects": [o.as_dict() for o in self.objects], "push": self._push.tolist()}

    def tool_end(self) -> np.ndarray:
        """The tool's end point (centre of the end sphere) in the base frame (m)."""
        with self._lock:
            self._advance()
            Rb, pb = self._base_pose()
            d = self._data
            end = d.xpos[self._tool_id] + d.xmat[self._tool_id].reshape(3, 3) @ [0, 0, self.tool.length]
            return Rb.T @ (end - pb)

    def contact_force(self) -> np.ndarray:
        """Total force the objects exert on the tool, base frame (N) — ground truth for tests."""
        with self._lock:
            self._advance()
            m, d = self.model, self._data
            total, f6 = np.zeros(3), np.zeros(6)
            tool_geoms = {i for i in range(m.ngeom) if m.geom_bodyid[i] == self._tool_id}
            for i in range(d.ncon):
                c = d.contact[i]
                mujoco.mj_contactForce(m, d, i, f6)
                # the contact frame's normal points from geom1 to geom2; f6 acts on geom2
                F = c.frame.reshape(3, 3).T @ f6[:3]
                total += F if c.geom2 in tool_geoms else -F
            Rb, _ = self._base_pose()
            return Rb.T @ total
