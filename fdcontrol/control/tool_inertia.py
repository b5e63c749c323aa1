"""The tool's inertia seen by the flange sensor, and its compensation.

A sensor between flange and tool reads what the robot exerts on the tool. Gravity
compensation (:mod:`fdcontrol.control.sensing`) removes the tool's weight; while the arm
accelerates, the sensor also reads the wrench that accelerates the tool (Newton–Euler, about the
sensor origin o, in the sensor frame S):

    F_in = m a_c,                 a_c = a_o + α × c + ω × (ω × c),
    τ_in = I_c α + ω × (I_c ω) + c × F_in,

(m mass, c centre of mass in S, I_c the rotational inertia about the centre of mass in S's axes,
a_o the acceleration of the sensor origin without gravity, ω and α the angular velocity and
acceleration). The balance of the tool r + W + E_env→tool = [F_in; τ_in] gives the wrench the
tool exerts on the environment as f_S = s r + W − b − [F_in; τ_in]: the sensor model's reading
with the inertial wrench subtracted.

The tool's motion comes from the loop's joint state: the tip twist V = J(q) q̇ (tip origin, base
frame) differentiated over one cycle, (V_k − V_{k−1}) / dt. The derivative of J q̇ is J q̈ + J̇ q̇,
the classical acceleration of the tip origin, so the velocity-product terms come with it; it is
the mean acceleration over the last cycle (half a cycle late). An optional first-order low-pass
(``tool_accel_cutoff``) smooths a noisy measured q̇ at the price of more lag.
"""

from __future__ import annotations

import math

import numpy as np

from fdcontrol.model.spatial import cross
from fdcontrol.params import Param, declare

#: the compensation's parameters (the sensor model's: a change waits for standstill and re-zeroes)
PARAMS = declare(
    "sensor",
    Param("tool_inertia", "vector", [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
          "the tool's rotational inertia about its centre of mass, in the sensor frame's axes: "
          "[Ixx, Iyy, Izz, Ixy, Ixz, Iyz]", "kg·m²", policy="holding", size=6, ge=-10, le=10),
    Param("tool_inertia_compensation", "bool", False,
          "subtract the wrench that accelerates the tool (tool_mass, tool_com, tool_inertia) from the "
          "sensor reading, its acceleration from the measured joint velocities", policy="holding"),
    Param("tool_accel_cutoff", "float", 0.0, "low-pass cut-off on the tool's estimated acceleration (0: off)",
          "Hz", policy="holding", ge=0, le=1000),
)


def inertia_matrix(v: np.ndarray | list[float]) -> np.ndarray:
    """[Ixx, Iyy, Izz, Ixy, Ixz, Iyz] → the symmetric 3×3 matrix; ValueError when not a physical
    inertia (not symmetric positive semi-definite, or violating the triangle inequality)."""
    a = np.asarray(v, dtype=float)
    if a.shape != (6,) or not np.all(np.isfinite(a)):
        raise ValueError("tool_inertia must be 6 finite numbers [Ixx, Iyy, Izz, Ixy, Ixz, Iyz] (kg·m²)")
    ixx, iyy, izz, ixy, ixz, iyz = a
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    ev = np.linalg.eigvalsh(inertia)
    tol = 1e-9 * max(1.0, float(np.abs(ev).max()))
    if ev[0] < -tol or ev[0] + ev[1] < ev[2] - tol:
        raise ValueError("tool_inertia is not a rigid body's inertia (needs positive principal moments "
                         "that satisfy the triangle inequality)")
    return inertia


def inertial_wrench(mass: float, com: np.ndarray, inertia: np.ndarray, a_o: np.ndarray,
                    omega: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """[F_in; τ_in] about the sensor origin, everything in the sensor frame (module doc)."""
    a_c = a_o + cross(alpha, com) + cross(omega, cross(omega, com))
    F = mass * a_c
    return np.concatenate((F, inertia @ alpha + cross(omega, inertia @ omega) + cross(com, F)))


class ToolMotion:
    """The sensor frame's motion from the tip twist, one cycle at a time (module doc)."""

    def __init__(self, cutoff: float = 0.0) -> None:
        if not (math.isfinite(cutoff) and cutoff >= 0):
            raise ValueError("tool_accel_cutoff must be finite and ≥ 0 (Hz)")
        self.cutoff = float(cutoff)
        self.reset()

    def reset(self) -> None:
        self._prev: np.ndarray | None = None
        self._acc = np.zeros(6)

    @property
    def started(self) -> bool:
        """A twist is kept to differentiate the next one against."""
        return self._prev is not None

    def update(self, twist: np.ndarray, dt: float) -> np.ndarray:
        """The tip's acceleration [a; α] (base frame, tip origin) from this cycle's twist [v; ω]."""
        twist = np.asarray(twist, dtype=float)
        if self._prev is None or not (dt > 0):
            acc = np.zeros(6)
        else:
            acc = (twist - self._prev) / dt
        self._prev = twist.copy()
        if self.cutoff > 0 and dt > 0:
            self._acc = self._acc + (1 - math.exp(-2 * math.pi * self.cutoff * dt)) * (acc - self._acc)
        else:
            self._acc = acc
        return self._acc

    @staticmethod
    def at_sensor(twist: np.ndarray, acc: np.ndarray, R_tip: np.ndarray, R_ts: np.ndarray,
                  p_ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a_o, ω, α) of the sensor origin in the sensor frame, from the tip's twist and
        acceleration (base frame, tip origin) and the sensor's pose (R_TS, p_TS) in the tip frame."""
        omega, alpha = twist[3:], acc[3:]
        r = R_tip @ p_ts
        a_o = acc[:3] + cross(alpha, r) + cross(omega, cross(omega, r))
        R = R_tip @ R_ts  # base ← sensor
        return R.T @ a_o, R.T @ omega, R.T @ alpha
