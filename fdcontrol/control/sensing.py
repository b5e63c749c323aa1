"""The physical force–torque sensor: from a raw reading to ``f_measured``.

A 6-axis sensor mounted between the robot's flange and a tool measures the wrench across its
mounting plane. With the convention ``sign = "robot_on_tool"`` (default) the raw reading r is
the wrench the robot (flange) exerts ON the tool; ``"tool_on_robot"`` is its negative. Both
are [F; τ] in the sensor frame S, torque about the sensor origin (N, N·m).

Statics of the tool (everything about the sensor origin, in S): the robot's wrench, the
tool's weight W and the environment's wrench E_env→tool balance,

    r + W + E_env→tool = 0,    W = [m Rᵀg; c × m Rᵀg]

(m tool mass, c its centre of mass in S, R = base ← S, g = (0, 0, −9.81) m/s² in the base).
The wrench the tool exerts on the environment is −E_env→tool, so

    f_S = s r + W − b,     s = +1 (robot_on_tool), −1 (tool_on_robot),

with b the bias set by zeroing (b = s r + W at the zeroing pose, without contact). ``f_S``
is then moved to the tip origin T (sensor pose in the tip frame: R_TS, p_TS):

    F_T = R_TS F_S,   τ_T = R_TS τ_S + p_TS × F_T,

rotated to the base frame, passed through a deadband and a first-order low-pass. The result
is ``f_measured`` as documented in :mod:`fdcontrol.control.law`: the wrench the tool exerts on
the environment, at the tip origin, base frame. At rest without contact it is zero in any
orientation; a hand pushing the tool with F reads −F.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from fdcontrol.control.tool_inertia import ToolMotion, inertia_matrix, inertial_wrench
from fdcontrol.model.spatial import cross, rotate6
from fdcontrol.params import Param, declare

GRAVITY = np.array([0.0, 0.0, -9.81])
_GZ = float(GRAVITY[2])
SensorSign = Literal["robot_on_tool", "tool_on_robot"]

#: the sensor model's parameters, declared once (fdcontrol.params). What the reading means — its sign,
#: where the sensor sits, the tool's weight — changes only while the arm is held at standstill.
PARAMS = declare(
    "sensor",
    Param("tool_mass", "float", 0.0, "mass of the tool beyond the sensor, compensated (0 on a simulated "
          "arm: the simulated tool's own mass)", "kg", policy="holding", ge=0, le=100),
    Param("tool_com", "vector", [0.0, 0.0, 0.0], "the tool's centre of mass in the sensor frame", "m",
          policy="holding", size=3, ge=-2, le=2),
    Param("deadband_force", "float", 0.0, "forces below this norm read as zero", "N", ge=0, le=100),
    Param("deadband_torque", "float", 0.0, "torques below this norm read as zero", "N·m", ge=0, le=10),
    Param("filter_cutoff", "float", 0.0, "low-pass cut-off on the sensor (0: off)", "Hz", ge=0, le=1000),
    Param("sensor_sign", "choice", "robot_on_tool", "the raw reading's convention: the wrench the robot "
          "exerts on the tool, or the tool on the robot", policy="holding", choices=("robot_on_tool", "tool_on_robot")),
    Param("sensor_position", "vector", [0.0, 0.0, 0.0], "sensor origin in the tip frame", "m",
          policy="holding", size=3, ge=-2, le=2),
    Param("sensor_rpy", "vector", [0.0, 0.0, 0.0], "sensor orientation in the tip frame, roll-pitch-yaw", "rad",
          policy="holding", size=3, ge=-7, le=7),
)
SIGNS: tuple[str, ...] = ("robot_on_tool", "tool_on_robot")


def check_sign(sign: str) -> float:
    """+1 for ``robot_on_tool``, −1 for ``tool_on_robot``; anything else is a ValueError."""
    if sign not in SIGNS:
        raise ValueError(f"sensor sign must be one of {SIGNS}, got {sign!r}")
    return 1.0 if sign == "robot_on_tool" else -1.0


def tool_weight(mass: float, com: np.ndarray, R: np.ndarray) -> np.ndarray:
    """W = [m Rᵀg; c × m Rᵀg]: the tool's weight about the sensor origin, sensor frame (R = base ← S).

    g = (0, 0, −g_z) has one entry: Rᵀg = g_z-scaled last row of R, in plain floats (the products with g's
    zeros add nothing; a zero's sign aside, the same bits as ``R.T @ GRAVITY``)."""
    if type(R) is np.ndarray and R.shape == (3, 3) and type(com) is np.ndarray and com.shape == (3,):
        gz = _GZ
        r0, r1, r2 = R[2].tolist()
        c0, c1, c2 = com.tolist()
        m = float(mass)
        f0, f1, f2 = m * (r0 * gz), m * (r1 * gz), m * (r2 * gz)
        return np.array((f0, f1, f2, c1 * f2 - c2 * f1, c2 * f0 - c0 * f2, c0 * f1 - c1 * f0))
    F = mass * (R.T @ GRAVITY)
    return np.concatenate((F, cross(np.asarray(com, dtype=float), F)))


def move_wrench(w: np.ndarray, R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """A wrench in frame S about S's origin, re-expressed in frame T about T's origin, where S
    sits at (R, p) in T: F_T = R F_S, τ_T = R τ_S + p × F_T."""
    F = R @ w[:3]
    return np.concatenate((F, R @ w[3:] + cross(p, F)))


def physical_reading(contact_on_env: np.ndarray, mass: float, com: np.ndarray, R: np.ndarray,
                     sign: str = "robot_on_tool") -> np.ndarray:
    """The raw reading a sensor produces: r = s (f_S − W), the inverse of the model above.

    ``contact_on_env`` is the wrench the tool exerts on the environment about the sensor origin
    in the sensor frame; used by the simulators so every driver reads the same physics.
    """
    return check_sign(sign) * (np.asarray(contact_on_env, dtype=float) - tool_weight(mass, com, R))


@dataclass
class WrenchFilter:
    """Raw sensor reading → ``f_measured`` (see the module doc for the equations), in order:

    1. sign and tool gravity compensation: f_S = s r + W (``tool_mass`` kg, ``tool_com`` m in S),
    2. bias: subtract ``bias`` (set by :meth:`zero`),
    3. sensor → tip: ``sensor_rotation`` R_TS and ``sensor_position`` p_TS (m), torques moved
       to the tip origin,
    4. deadband on the force / torque norms (below: zero; above: shifted down, continuous),
    5. rotation to the base frame and first-order low-pass y += (1 − e^(−2π f_c dt))(x − y),
       ``cutoff`` in Hz (0 = off).

    With ``inertia_compensation`` step 1 also subtracts the wrench that accelerates the tool
    (``tool_inertia`` [Ixx, Iyy, Izz, Ixy, Ixz, Iyz] about its centre of mass, sensor axes),
    its motion from the tip twist ``apply`` is given (:mod:`fdcontrol.control.tool_inertia`).

    ``apply`` takes the raw reading, the tip rotation R (base ← tip) and optionally the tip
    twist J q̇ [v; ω] (base frame, tip origin) of the same cycle.

    **Contact** (``apply(…, contact=True)``): ``contact`` is then the reading with the tool's
    inertial wrench subtracted whether or not ``inertia_compensation`` is on — the same steps 1–5
    with its own low-pass state — so a decelerating tool's own inertia never reads as a hand
    (fdcontrol.loop.liveness). Without it (or without a tool model, or a twist) ``contact`` is the
    reading itself, and the tool's motion is not estimated (nothing is computed for it).
    """

    tool_mass: float = 0.0
    tool_com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    deadband_force: float = 0.0
    deadband_torque: float = 0.0
    cutoff: float = 0.0
    bias: np.ndarray = field(default_factory=lambda: np.zeros(6))
    sign: SensorSign = "robot_on_tool"
    sensor_rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    sensor_position: np.ndarray = field(default_factory=lambda: np.zeros(3))
    tool_inertia: np.ndarray = field(default_factory=lambda: np.zeros(6))
    inertia_compensation: bool = False
    accel_cutoff: float = 0.0
    _state: np.ndarray | None = None
    _contact_state: np.ndarray | None = None

    def __post_init__(self) -> None:
        self._s = check_sign(self.sign)
        self.tool_com = np.asarray(self.tool_com, dtype=float)
        self.sensor_rotation = np.asarray(self.sensor_rotation, dtype=float)
        self.sensor_position = np.asarray(self.sensor_position, dtype=float)
        R = self.sensor_rotation
        if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0:
            raise ValueError("sensor_rotation must be a 3×3 rotation matrix")
        if self.tool_mass < 0 or not math.isfinite(self.tool_mass):
            raise ValueError("tool_mass must be finite and ≥ 0 (kg)")
        self._inertia = inertia_matrix(self.tool_inertia)
        self._motion = ToolMotion(self.accel_cutoff)
        self._has_inertia = self.tool_mass > 0 or bool(self._inertia.any())  # a tool whose motion loads the sensor
        self.contact = np.zeros(6)  # the last reading without the tool's inertial wrench (class doc)

    def _sensor_rotation_in_base(self, R_tip: np.ndarray) -> np.ndarray:
        return R_tip @ self.sensor_rotation

    def gravity_wrench(self, R_tip: np.ndarray) -> np.ndarray:
        """The tool's weight W about the sensor origin, sensor frame, at tip rotation R_tip."""
        return tool_weight(self.tool_mass, self.tool_com, self._sensor_rotation_in_base(R_tip))

    def zero(self, raw: np.ndarray, R: np.ndarray) -> None:
        """Bias zeroing without contact: b = s r + W, so this reading becomes zero."""
        self.bias = self._s * np.asarray(raw, dtype=float) + self.gravity_wrench(R)
        self._state = self._contact_state = None

    def inertial_wrench(self, R_tip: np.ndarray, twist: np.ndarray, dt: float) -> np.ndarray:
        """The wrench accelerating the tool about the sensor origin, sensor frame, from this
        cycle's tip twist (updates the acceleration estimate: call once per cycle)."""
        acc = self._motion.update(twist, dt)
        a_o, omega, alpha = ToolMotion.at_sensor(np.asarray(twist, dtype=float), acc, R_tip,
                                                 self.sensor_rotation, self.sensor_position)
        return inertial_wrench(self.tool_mass, self.tool_com, self._inertia, a_o, omega, alpha)

    def apply(self, raw: np.ndarray, R: np.ndarray, dt: float, twist: np.ndarray | None = None,
              contact: bool = False) -> np.ndarray:
        w = self._s * np.asarray(raw, dtype=float) + self.gravity_wrench(R) - self.bias
        inertial = None
        if twist is not None and self._has_inertia and (self.inertia_compensation or contact):
            inertial = self.inertial_wrench(R, twist, dt)
        elif self._motion.started:
            self._motion.reset()  # no estimate this cycle: the next one starts afresh, not from an old twist
        if self.inertia_compensation and inertial is not None:
            w = w - inertial
        out = self._steps(w, R)
        if self.cutoff > 0:
            out = self._state = self._low_pass(self._state, out, dt)
        if contact and inertial is not None and not self.inertia_compensation:
            c = self._steps(w - inertial, R)
            if self.cutoff > 0:
                c = self._contact_state = self._low_pass(self._contact_state, c, dt)
            self.contact = c
        else:
            self.contact, self._contact_state = out, None
        return out

    def _steps(self, w: np.ndarray, R: np.ndarray) -> np.ndarray:
        """Steps 3–4 and the rotation to the base frame: one compiled call where numba is installed and the
        arrays are float64 of their shapes, numpy's calls otherwise (the same values to rounding)."""
        Rs, ps = self.sensor_rotation, self.sensor_position
        if _steps is not None and type(w) is np.ndarray and type(R) is np.ndarray and w.shape == (6,) \
                and R.shape == (3, 3) and w.dtype == R.dtype == _F64 and Rs.dtype == ps.dtype == _F64:
            out = np.empty(6)
            _steps(w, Rs, ps, float(self.deadband_force), float(self.deadband_torque), R, out)
            return out
        return self._steps_numpy(w, R)

    def _steps_numpy(self, w: np.ndarray, R: np.ndarray) -> np.ndarray:
        """:meth:`_steps` by numpy's calls."""
        w = move_wrench(w, self.sensor_rotation, self.sensor_position)
        w = np.concatenate((_deadband(w[:3], self.deadband_force),
                            _deadband(w[3:], self.deadband_torque)))
        return rotate6(R, w)

    def _low_pass(self, state: np.ndarray | None, w: np.ndarray, dt: float) -> np.ndarray:
        """Step 5 from ``state`` (None: the first reading passes as it is)."""
        if state is None:
            return w
        return state + (1 - math.exp(-2 * math.pi * self.cutoff * dt)) * (w - state)


def _deadband(v: np.ndarray, d: float) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return np.zeros(3) if n <= d else v * (1 - d / n)


_F64 = np.dtype(np.float64)


def _steps_kernel(w: np.ndarray, Rs: np.ndarray, ps: np.ndarray, d_force: float, d_torque: float, R: np.ndarray,
                  out: np.ndarray) -> None:  # pragma: no mutate block
    """WrenchFilter._steps into ``out``: move_wrench(w, Rs, ps), the deadbands of the force and the torque,
    rotate6(R, ·), written out per coordinate."""
    f0 = Rs[0, 0] * w[0] + Rs[0, 1] * w[1] + Rs[0, 2] * w[2]
    f1 = Rs[1, 0] * w[0] + Rs[1, 1] * w[1] + Rs[1, 2] * w[2]
    f2 = Rs[2, 0] * w[0] + Rs[2, 1] * w[1] + Rs[2, 2] * w[2]
    t0 = Rs[0, 0] * w[3] + Rs[0, 1] * w[4] + Rs[0, 2] * w[5] + (ps[1] * f2 - ps[2] * f1)
    t1 = Rs[1, 0] * w[3] + Rs[1, 1] * w[4] + Rs[1, 2] * w[5] + (ps[2] * f0 - ps[0] * f2)
    t2 = Rs[2, 0] * w[3] + Rs[2, 1] * w[4] + Rs[2, 2] * w[5] + (ps[0] * f1 - ps[1] * f0)
    n = math.sqrt(f0 * f0 + f1 * f1 + f2 * f2)
    if n <= d_force:
        f0 = f1 = f2 = 0.0
    else:
        k = 1 - d_force / n
        f0, f1, f2 = f0 * k, f1 * k, f2 * k
    n = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
    if n <= d_torque:
        t0 = t1 = t2 = 0.0
    else:
        k = 1 - d_torque / n
        t0, t1, t2 = t0 * k, t1 * k, t2 * k
    out[0] = R[0, 0] * f0 + R[0, 1] * f1 + R[0, 2] * f2
    out[1] = R[1, 0] * f0 + R[1, 1] * f1 + R[1, 2] * f2
    out[2] = R[2, 0] * f0 + R[2, 1] * f1 + R[2, 2] * f2
    out[3] = R[0, 0] * t0 + R[0, 1] * t1 + R[0, 2] * t2
    out[4] = R[1, 0] * t0 + R[1, 1] * t1 + R[1, 2] * t2
    out[5] = R[2, 0] * t0 + R[2, 1] * t1 + R[2, 2] * t2


try:  # compiled at import (cached on disk), never in the loop thread; without numba numpy's calls
    import numba
    from numba import types as _t

    _V, _M = _t.Array(_t.float64, 1, "A"), _t.Array(_t.float64, 2, "A")
    _steps: Any = numba.njit(_t.none(_V, _M, _V, _t.float64, _t.float64, _M, _V), cache=True,
                             boundscheck=True)(_steps_kernel)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    _steps = None


def carry_bias(old: WrenchFilter, new: WrenchFilter, raw: np.ndarray, R: np.ndarray) -> None:
    """Give ``new`` (a changed sensor model: tool, sign, sensor pose) the bias that makes it read, for this
    raw reading at tip rotation R, the same sensor-frame wrench f_S = s r + W − b as ``old``:
    b' = s' r + W'(R) − f_S. Not a zeroing: a load on the tool stays a load (a hand pushing while the
    model changes is not taken into the bias), and no load stays no load."""
    raw = np.asarray(raw, dtype=float)
    f_s = old._s * raw + old.gravity_wrench(R) - old.bias
    new.bias = new._s * raw + new.gravity_wrench(R) - f_s
    new._state = new._contact_state = None
