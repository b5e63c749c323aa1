"""Twist input for teleoperation: a Cartesian velocity-tracking term of the control law.

A commanded tip twist v_c = [v; ω] (m/s, rad/s; base frame, or tool frame rotated into the
base on arrival) becomes the control signal

    f = B v_c + K_v ⊙ (v_c − ẋ),       ẋ = J q̇ (measured tip twist),

with K_v (N·s/m for the linear, N·m·s/rad for the angular axes, per axis of the law's
frame) the tracking gain and B the admittance's own damping: the FD solver decays the
virtual velocity at rate c (1/s, ``decay``) on a tip of mass m_e = 1 kg and rotational
inertia ip_e = 1 kg·m², so on the decoupled virtual model (seed 004 eq. 12, J H⁻¹ Jᵀ ≈ I)
a wrench f holds the tip at ẋ = f/(c m_e); B = c·diag(m_e, m_e, m_e, ip_e, ip_e, ip_e) is the
feed-forward that holds it at v_c. K_v corrects what the feed-forward misses (the coupling
left at finite γ, Coriolis terms, the robot's lag, joint limits): at steady state the
error is (v_c − ẋ) = (f_residual)/(c m_e + K_v).

Limits: the safety limits (Cartesian speed, joint velocity and acceleration, position
envelope) act after the solver as for wrenches, so a twist above ``max_linear_speed`` is
scaled down; a stream that stops trips the loop's watchdog like a wrench stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fdcontrol.model.spatial import check_vec6, rotate6

#: accepted input range: larger commands are refused (the safety limits clip far below these)
MAX_LINEAR = 5.0  # m/s
MAX_ANGULAR = 10.0  # rad/s


class TwistError(ValueError):
    """A twist that cannot be accepted."""


def check_twist(twist: np.ndarray | list[float], frame: str = "base") -> np.ndarray:
    """A finite 6-vector [v; ω] within |v| ≤ MAX_LINEAR m/s and |ω| ≤ MAX_ANGULAR rad/s."""
    return check_vec6(twist, "twist", ("vx, vy, vz, wx, wy, wz", "|v|", "m/s", "|ω|", "rad/s"),
                      MAX_LINEAR, MAX_ANGULAR, frame, TwistError)


def admittance_damping(decay: float, m_e: float = 1.0, ip_e: float = 1.0) -> np.ndarray:
    """B = c·[m_e, m_e, m_e, ip_e, ip_e, ip_e] (N·s/m, N·m·s/rad): the wrench per unit tip
    twist that the virtual model's velocity decay absorbs at steady state."""
    return float(decay) * np.array([m_e] * 3 + [ip_e] * 3)


@dataclass
class TwistTerm:
    """f = B v_c + K_v ⊙ (v_c − ẋ); gains along the axes of the law's frame (see module doc)."""

    gain: np.ndarray = field(default_factory=lambda: np.array([50.0] * 3 + [5.0] * 3))
    feedforward: np.ndarray = field(default_factory=lambda: admittance_damping(10.0))

    def __call__(self, command: np.ndarray, twist: np.ndarray, R: np.ndarray) -> np.ndarray:
        e = rotate6(R.T, command - twist)  # per-axis gains along the frame's axes
        return self.feedforward * command + rotate6(R, self.gain * e)  # B is isotropic per part
