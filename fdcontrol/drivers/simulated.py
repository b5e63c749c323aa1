"""SimulatedRobot: a velocity-actuated arm for laptops, tests and the default service.

Each ``send`` advances the simulation by one control period ``dt``: the joint velocity
follows the velocity reference through a first-order lag with time constant ``tau``,

    q̇⁺ = q̇_ref + (q̇ − q̇_ref) e^(−dt/τ),   q⁺ = q + dt q̇⁺,

saturated at the URDF's velocity limits and stopped at its position limits. An optional
force-torque sensor at the tip sees a virtual environment of spring planes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fdcontrol.control.sensing import check_sign, physical_reading
from fdcontrol.drivers.base import JointState, RobotDriver
from fdcontrol.model.linalg import compiled_entry
from fdcontrol.model.robot import HOME, RobotModel

_new, _set = object.__new__, object.__setattr__
_ndarray, _F64 = np.ndarray, np.dtype(np.float64)


def _f64_vectors(*arrays: Any) -> bool:
    """Whether each is a float64 ndarray of one dimension (the compiled step's entry takes them as they are)."""
    return all(type(a) is _ndarray and a.dtype is _F64 and a.ndim == 1 for a in arrays)


@dataclass
class SpringPlane:
    """A wall: the half-space (p − point)·normal > 0 is solid with ``stiffness`` (N/m).

    The tip entering it by d = (p − point)·n pushes on the wall with F = k d n (robot on
    environment, the sign convention of ``fdcontrol.control.law``).
    """

    point: np.ndarray
    normal: np.ndarray
    stiffness: float = 1000.0

    def __post_init__(self) -> None:
        self.point = np.asarray(self.point, dtype=float)
        n = np.asarray(self.normal, dtype=float)
        self.normal = n / np.linalg.norm(n)

    def force(self, p: np.ndarray) -> np.ndarray:
        d = float((p - self.point) @ self.normal)
        return self.stiffness * d * self.normal if d > 0 else np.zeros(3)


@dataclass
class SimulatedSensor:
    """A flange sensor with a tool, read as a physical sensor (see :mod:`fdcontrol.control.sensing`).

    The sensor frame is the tip frame. The spring planes push on the tool at the tip origin;
    the reading is r = s (f − W) + bias + noise, with f = Σ plane forces (tool on environment),
    W the tool's weight about the sensor origin and s the ``sign`` convention — the same
    reading the MuJoCo driver's sensor produces.
    """

    planes: list[SpringPlane] = field(default_factory=list)
    tool_mass: float = 0.0
    tool_com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    bias: np.ndarray = field(default_factory=lambda: np.zeros(6))
    noise: float = 0.0
    seed: int = 0
    sign: str = "robot_on_tool"

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)
        check_sign(self.sign)

    def reading(self, pose: np.ndarray) -> np.ndarray:
        R, p = pose[:3, :3], pose[:3, 3]
        F = sum((pl.force(p) for pl in self.planes), np.zeros(3))
        contact = np.concatenate((R.T @ F, np.zeros(3)))
        w = physical_reading(contact, self.tool_mass, self.tool_com, R, self.sign) + self.bias
        if self.noise > 0:
            w = w + self._rng.normal(scale=self.noise, size=6)
        return w


class SimulatedRobot(RobotDriver):
    """Velocity-actuated arm following q̇_ref through a first-order lag (see module doc)."""

    simulated = True  # no hardware behind it: the service may start the loop by itself

    def __init__(self, robot: RobotModel, dt: float = 0.002, tau: float = 0.01,
                 q0: np.ndarray | None = None, sensor: SimulatedSensor | None = None) -> None:
        if not (dt > 0 and tau >= 0):
            raise ValueError("dt must be > 0 and tau >= 0")
        self.robot, self.dof, self.dt, self.tau = robot, robot.dof, float(dt), float(tau)
        lim = robot.limits
        self._lower, self._upper, self._vmax = lim.lower, lim.upper, lim.velocity
        self._bounds_f64 = _f64_vectors(self._vmax, self._lower, self._upper)
        # the state, written in place by each send (the arrays are the simulator's own: read() and the q, qd
        # attributes hand out copies)
        self._q = np.zeros(self.dof) if q0 is None else robot.check_q(q0).copy()
        self._qd = np.zeros(self.dof)
        self._shape = self._q.shape
        self.t = 0.0
        self.sensor = sensor
        self._lag = math.exp(-self.dt / self.tau) if self.tau > 0 else 0.0
        self.sent = 0

    @classmethod
    def from_options(cls, robot: RobotModel, dt: float, options: dict[str, Any]) -> SimulatedRobot:
        """Built from settings: ``q0`` (default: the robot's home pose), ``tau`` and ``sensor``
        = {"planes": [{"point": [...], "normal": [...], "stiffness": k}], "tool_mass": m,
        "tool_com": [...], "noise": σ, "sign": "robot_on_tool"} (a wrench sensor is always fitted)."""
        opts = {"q0": HOME.get(robot.name), **options}
        sensor = dict(opts.pop("sensor", None) or {})
        planes = [SpringPlane(**pl) for pl in sensor.pop("planes", [])]
        return cls(robot, dt=dt, sensor=SimulatedSensor(planes=planes, **sensor), **opts)

    # the bounds (rad, rad/s; the robot's limits unless set): properties, so that send knows without a test a cycle
    # whether they are all float64 vectors
    @property
    def lower(self) -> np.ndarray:
        """The joint position lower limits (rad) the simulator stops at."""
        return self._lower

    @lower.setter
    def lower(self, value: np.ndarray) -> None:
        self._lower = value
        self._bounds_f64 = _f64_vectors(self._vmax, self._lower, self._upper)

    @property
    def upper(self) -> np.ndarray:
        """The joint position upper limits (rad) the simulator stops at."""
        return self._upper

    @upper.setter
    def upper(self, value: np.ndarray) -> None:
        self._upper = value
        self._bounds_f64 = _f64_vectors(self._vmax, self._lower, self._upper)

    @property
    def vmax(self) -> np.ndarray:
        """The joint velocity limits (rad/s) the simulator saturates at."""
        return self._vmax

    @vmax.setter
    def vmax(self, value: np.ndarray) -> None:
        self._vmax = value
        self._bounds_f64 = _f64_vectors(self._vmax, self._lower, self._upper)

    @property
    def q(self) -> np.ndarray:
        """The joint positions (rad): a copy, as :meth:`read` gives."""
        return self._q.copy()

    @q.setter
    def q(self, value: np.ndarray) -> None:
        self._q[:] = np.asarray(value, dtype=float).reshape(self._shape)

    @property
    def qd(self) -> np.ndarray:
        """The joint velocities (rad/s): a copy, as :meth:`read` gives."""
        return self._qd.copy()

    @qd.setter
    def qd(self, value: np.ndarray) -> None:
        self._qd[:] = np.asarray(value, dtype=float).reshape(self._shape)

    def read(self) -> JointState:
        # JointState(q, qd, t) without the frozen dataclass's __init__ (a field at a time through
        # object.__setattr__): its dict given whole, as fdcontrol.loop.state.state_of builds the loop's states
        js = _new(JointState)
        _set(js, "__dict__", {"q": self._q.copy(), "qd": self._qd.copy(), "t": self.t})
        return js

    def read_wrench(self) -> np.ndarray | None:
        return None if self.sensor is None else self.sensor.reading(self.robot.pose(self._q))

    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None:
        if qd_ref is None:  # position interface: track q_ref within one period
            qd_ref = (np.asarray(q_ref) - self._q) / self.dt if q_ref is not None else np.zeros(self.dof)
        if _lag_step is not None:  # the loop below, compiled: one call, in place (false: another length)
            try:  # the loop's float64 vector as it is
                if type(qd_ref) is _ndarray and qd_ref.dtype is _F64 and qd_ref.ndim == 1 and self._bounds_f64:
                    # float64 vectors for certain (q, q̇ the simulator's own): without numba's dispatch
                    done = _lag_entry(self._q, self._qd, qd_ref, self._vmax, self._lower, self._upper, self._lag,
                                      self.dt)
                else:
                    done = _lag_step(self._q, self._qd, qd_ref, self._vmax, self._lower, self._upper, self._lag,
                                     self.dt)
            except TypeError:  # another type: as float64
                qd_ref = np.asarray(qd_ref, dtype=float)
                try:
                    done = _lag_step(self._q, self._qd, qd_ref, self._vmax, self._lower, self._upper, self._lag,
                                     self.dt)
                except TypeError:  # not a vector
                    done = False
            if done:
                self.t += self.dt
                self.sent += 1
                return
        # per joint in plain floats: for N ≈ 6–7 a loop is cheaper than ten small numpy calls
        lag, dt = self._lag, self.dt
        q_out, qd_out = [], []
        joints = zip(self._q.tolist(), self._qd.tolist(), np.asarray(qd_ref).tolist(), self._vmax.tolist(),
                     self._lower.tolist(), self._upper.tolist(), strict=True)
        for x, v, r, vmax, lower, upper in joints:
            v = r + (v - r) * lag
            if v > vmax:
                v = vmax
            elif v < -vmax:
                v = -vmax
            y = x + dt * v
            # stop at the limits; a joint that starts beyond one may move back but not further out
            if y > upper and y > x:
                y, v = (upper if upper > x else x), 0.0
            elif y < lower and y < x:
                y, v = (lower if lower < x else x), 0.0
            q_out.append(y)
            qd_out.append(v)
        self._q[:], self._qd[:], self.t = q_out, qd_out, self.t + self.dt
        self.sent += 1

    def close(self) -> None:
        pass


def _joints(q: np.ndarray, qd: np.ndarray, qd_ref: np.ndarray, vmax: np.ndarray, lower: np.ndarray,
            upper: np.ndarray, lag: float, dt: float) -> bool:  # pragma: no mutate block
    """:meth:`SimulatedRobot.send`'s per-joint loop on float64 vectors of one length, q and q̇ advanced in place:
    the same float operations in the same order (tests/test_drivers.py), compiled. In place, not into new
    arrays: a compiled call that returns new arrays costs about twice as much (each one boxed). False, nothing
    written, where a vector's length is not q's."""
    n = q.shape[0]
    if qd.shape[0] != n or qd_ref.shape[0] != n or vmax.shape[0] != n or lower.shape[0] != n \
            or upper.shape[0] != n:
        return False
    for i in range(n):
        x, v, r = q[i], qd[i], qd_ref[i]
        v = r + (v - r) * lag
        if v > vmax[i]:
            v = vmax[i]
        elif v < -vmax[i]:
            v = -vmax[i]
        y = x + dt * v
        if y > upper[i] and y > x:
            y, v = (upper[i] if upper[i] > x else x), 0.0
        elif y < lower[i] and y < x:
            y, v = (lower[i] if lower[i] < x else x), 0.0
        q[i], qd[i] = y, v
    return True


try:  # compiled at import (cached on disk), never in the loop thread; without numba the loop in send
    import numba
    from numba import types as _t

    _V = _t.Array(_t.float64, 1, "A")
    _lag_step = numba.njit(_t.boolean(_V, _V, _V, _V, _V, _V, _t.float64, _t.float64), cache=True)(_joints)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    _lag_step = None
#: _lag_step without numba's dispatch (fdcontrol.model.linalg.compiled_entry: the same machine code, ~0.2 µs less a
#: call), where send knows its arguments are float64 vectors: numba's entry checks an array's item size, not its
#: dtype or dimensions
_lag_entry = compiled_entry(_lag_step)
