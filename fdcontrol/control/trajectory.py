"""Moves: time-optimal, jerk-limited online trajectories (Ruckig) tracked compliantly by the motion law.

A move runs Ruckig's online trajectory generator (Berscheid & Kröger, "Jerk-limited Real-time
Trajectory Generation with Arbitrary Target States", RSS 2021; PyPI ``ruckig``) once per control
cycle at the loop's rate. Its reference pose and twist feed the motion term of the control law
(spatial PD, Scherzinger et al., "Virtual Forward Dynamics Models for Cartesian Robot Control",
Fig. 2) plus the twist feed-forward (:mod:`fdcontrol.control.twist`), so the arm stays compliant
while it moves: pushed, it yields with the motion stiffness.

Cartesian goals: 4 degrees of freedom — the tip position (3, straight line) and the angle θ of
the rotation R_goal R_startᵀ = exp(θ u) about its fixed axis u, R(t) = exp(θ(t) u) R_start. The
per-axis limits are the linear limits times |Δp_i|/‖Δp‖, with phase synchronisation, so
‖v‖ ≤ v_max, ‖a‖ ≤ a_max and ‖j‖ ≤ j_max along the line. Joint goals: N degrees of freedom in
joint space (joint limits), the reference pose is FK(q_ref), its twist J(q_ref) q̇_ref.

Yield and resume: when the tip is ``pause_error`` (m) away from the reference (someone holds
or pushes the arm), the generator brakes its reference to rest (Ruckig's velocity interface,
target velocity 0, still jerk-limited) and waits; once the tip is back within ``resume_error``
it continues to the goal from where the reference stopped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pinocchio as pin

from fdcontrol.model.robot import RobotModel
from fdcontrol.params import Param, declare

#: the moves' parameters, declared once (fdcontrol.params); a change applies to the next move
PARAMS = declare(
    "moves",
    Param("move_max_linear_speed", "float", 0.25, "Cartesian move speed limit", "m/s", gt=0, le=3),
    Param("move_max_linear_acceleration", "float", 1.0, "Cartesian move acceleration limit", "m/s²", gt=0, le=50),
    Param("move_max_linear_jerk", "float", 5.0, "Cartesian move jerk limit", "m/s³", gt=0, le=1000),
    Param("move_max_angular_speed", "float", 0.5, "move rotation speed limit", "rad/s", gt=0, le=10),
    Param("move_max_angular_acceleration", "float", 2.0, "move rotation acceleration limit", "rad/s²", gt=0,
          le=100),
    Param("move_max_angular_jerk", "float", 10.0, "move rotation jerk limit", "rad/s³", gt=0, le=5000),
    Param("move_max_joint_jerk", "float", 20.0, "joint move jerk limit", "rad/s³", gt=0, le=5000),
    Param("approach_speed", "float", 0.04, "linear speed cap of a guarded move (a move with an 'until' rule)",
          "m/s", gt=0, le=1),
    Param("move_pause_error", "float", 0.02, "a move pauses while the tip is this far from its reference", "m",
          gt=0, le=0.5),
)

try:  # optional extra "task"
    import ruckig
except ImportError:  # pragma: no cover - reported when a move is requested
    ruckig = None  # type: ignore[assignment]

Status = Literal["moving", "paused", "done", "cancelled"]
STATUS: tuple[str, ...] = ("idle", "moving", "paused", "done", "cancelled")


class MoveError(ValueError):
    """A move that cannot be made (reason in the message)."""


@dataclass(frozen=True)
class MoveLimits:
    """Limits of a move: linear (m/s, m/s², m/s³), angular (rad/s, rad/s², rad/s³), joint (per joint)."""

    linear: tuple[float, float, float] = (0.25, 1.0, 5.0)
    angular: tuple[float, float, float] = (0.5, 2.0, 10.0)
    joint_velocity: np.ndarray | None = None  # rad/s
    joint_acceleration: np.ndarray | None = None  # rad/s²
    joint_jerk: np.ndarray | None = None  # rad/s³

    def scaled(self, speed: float, acceleration: float) -> MoveLimits:
        """Speed and acceleration scaling in (0, 1]; the jerk scales with the acceleration."""
        for name, s in (("speed", speed), ("acceleration", acceleration)):
            if not (math.isfinite(s) and 0 < s <= 1):
                raise MoveError(f"{name} scaling must be in (0, 1], got {s}")
        lin = (self.linear[0] * speed, self.linear[1] * acceleration, self.linear[2] * acceleration)
        ang = (self.angular[0] * speed, self.angular[1] * acceleration, self.angular[2] * acceleration)
        jv = None if self.joint_velocity is None else self.joint_velocity * speed
        ja = None if self.joint_acceleration is None else self.joint_acceleration * acceleration
        jj = None if self.joint_jerk is None else self.joint_jerk * acceleration
        return MoveLimits(lin, ang, jv, ja, jj)


def _need_ruckig() -> None:
    if ruckig is None:
        raise MoveError("moves need the optional dependency ruckig: pip install 'fdcontrol[task]'")


class Move:
    """One move from the current reference to a goal; :meth:`step` once per cycle."""

    def __init__(self, robot: RobotModel, start_pose: np.ndarray, dt: float, limits: MoveLimits,
                 goal_pose: np.ndarray | None = None, goal_q: np.ndarray | None = None,
                 start_q: np.ndarray | None = None, pause_error: float = 0.02, resume_error: float = 0.005,
                 tolerance: tuple[float, float] = (1e-3, 1e-2)) -> None:
        _need_ruckig()
        self.robot, self.dt, self.limits = robot, float(dt), limits
        self.pause_error, self.resume_error, self.tolerance = pause_error, resume_error, tolerance
        self.status: Status = "moving"
        self.start = np.asarray(start_pose, dtype=float).copy()
        self.joint = goal_q is not None
        if self.joint:
            if start_q is None or limits.joint_velocity is None or limits.joint_acceleration is None \
                    or limits.joint_jerk is None:
                raise MoveError("a joint move needs the start q and the joint limits")
            self.goal_q = robot.check_q(goal_q, "goal q")
            self.goal = robot.pose(self.goal_q)
            self._data = robot.model.createData()
            x0, xg = np.asarray(start_q, dtype=float), self.goal_q
            vmax, amax, jmax = limits.joint_velocity, limits.joint_acceleration, limits.joint_jerk
        else:
            if goal_pose is None:
                raise MoveError("a move needs a goal pose or a goal q")
            self.goal = np.asarray(goal_pose, dtype=float).copy()
            dR = self.goal[:3, :3] @ self.start[:3, :3].T
            w = pin.log3(dR)
            theta = float(np.linalg.norm(w))
            self.axis = w / theta if theta > 1e-12 else np.array([0.0, 0.0, 1.0])
            x0 = np.concatenate((self.start[:3, 3], [0.0]))
            xg = np.concatenate((self.goal[:3, 3], [theta]))
            dp = xg[:3] - x0[:3]
            n = float(np.linalg.norm(dp))
            u = np.abs(dp) / n if n > 1e-12 else np.ones(3)
            u = np.maximum(u, 1e-6)
            (v, a, j), (wv, wa, wj) = limits.linear, limits.angular
            vmax, amax, jmax = np.append(v * u, wv), np.append(a * u, wa), np.append(j * u, wj)
        self.n = len(x0)
        self.otg = ruckig.Ruckig(self.n, self.dt)
        self.inp = ruckig.InputParameter(self.n)
        self.out = ruckig.OutputParameter(self.n)
        self.inp.current_position = x0.tolist()
        self.inp.current_velocity = [0.0] * self.n
        self.inp.current_acceleration = [0.0] * self.n
        self.inp.target_position = xg.tolist()
        self.inp.target_velocity = [0.0] * self.n
        self.inp.max_velocity, self.inp.max_acceleration, self.inp.max_jerk = \
            vmax.tolist(), amax.tolist(), jmax.tolist()
        self.inp.synchronization = ruckig.Synchronization.Phase
        self._xg = xg
        self._total = float(np.linalg.norm(xg - x0))
        self.x, self.xd = x0.copy(), np.zeros(self.n)
        self.elapsed = 0.0
        self.duration = math.nan
        self.progress = 0.0
        self.pose, self.twist = self.start.copy(), np.zeros(6)
        self._reference(self.x, self.xd)

    # ------------------------------------------------------------------ per cycle
    def _reference(self, x: np.ndarray, xd: np.ndarray) -> None:
        if self.joint:
            m, d, r = self.robot.model, self._data, self.robot
            pin.computeJointJacobians(m, d, x)
            pin.updateFramePlacements(m, d)
            self.pose = r._oMb.actInv(d.oMf[r.tip_id]).homogeneous
            J = r._to_base(pin.getFrameJacobian(m, d, r.tip_id, pin.LOCAL_WORLD_ALIGNED))
            self.twist = J @ xd
            return
        T = np.eye(4)
        T[:3, 3] = x[:3]
        T[:3, :3] = pin.exp3(x[3] * self.axis) @ self.start[:3, :3]
        self.pose = T
        self.twist = np.concatenate((xd[:3], xd[3] * self.axis))

    def error(self, pose: np.ndarray) -> tuple[float, float]:
        """(position m, rotation rad) of ``pose`` from the current reference."""
        return (float(np.linalg.norm(self.pose[:3, 3] - pose[:3, 3])),
                float(np.linalg.norm(pin.log3(self.pose[:3, :3] @ pose[:3, :3].T))))

    def goal_error(self, pose: np.ndarray) -> tuple[float, float]:
        return (float(np.linalg.norm(self.goal[:3, 3] - pose[:3, 3])),
                float(np.linalg.norm(pin.log3(self.goal[:3, :3] @ pose[:3, :3].T))))

    def step(self, pose: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Advance one cycle given the measured tip ``pose``; the reference (pose 4×4, twist [v; ω])."""
        if self.status in ("done", "cancelled"):
            return self.pose, np.zeros(6)
        e, _ = self.error(pose)
        if self.status == "moving" and e > self.pause_error:
            self.status = "paused"
            self.inp.control_interface = ruckig.ControlInterface.Velocity
            self.inp.target_velocity = [0.0] * self.n
            self.inp.target_acceleration = [0.0] * self.n
        elif self.status == "paused" and e < self.resume_error and not np.any(self.xd):
            self.status = "moving"
            self.inp.control_interface = ruckig.ControlInterface.Position
            self.inp.target_position = self._xg.tolist()
            self.inp.target_velocity = [0.0] * self.n
        result = self.otg.update(self.inp, self.out)
        if result not in (ruckig.Result.Working, ruckig.Result.Finished):
            self.status = "cancelled"
            return self.pose, np.zeros(6)
        if self.out.new_calculation and self.status == "moving":
            self.duration = self.elapsed + float(self.out.trajectory.duration)
        self.out.pass_to_input(self.inp)
        self.elapsed += self.dt
        self.x, self.xd = np.array(self.out.new_position), np.array(self.out.new_velocity)
        if self.status == "paused" and result == ruckig.Result.Finished:
            self.xd[:] = 0.0  # at rest: waits for the tip to come back
        self._reference(self.x, self.xd)
        if self.status == "moving" and result == ruckig.Result.Finished:
            self.xd[:] = 0.0
            self.twist = np.zeros(6)
            ep, er = self.goal_error(pose)
            if ep <= self.tolerance[0] and er <= self.tolerance[1]:
                self.status = "done"
        total = self._total
        self.progress = 1.0 if self.status == "done" or total <= 0 else \
            float(min(1.0, max(0.0, 1.0 - np.linalg.norm(self._xg - self.x) / total)))
        return self.pose, self.twist

    def cancel(self) -> None:
        """End the move (also a finished one: the arm no longer holds its goal)."""
        self.status = "cancelled"

    @property
    def active(self) -> bool:
        return self.status in ("moving", "paused")


def solve_ik(robot: RobotModel, q0: np.ndarray, goal: np.ndarray, iterations: int = 300,
             tolerance: tuple[float, float] = (1e-4, 1e-3), damping: float = 1e-3) -> np.ndarray | None:
    """A joint configuration within the joint limits whose tip pose is ``goal`` (damped least
    squares from ``q0``, the update clipped to the limits), or None when none is found."""
    q = np.asarray(q0, dtype=float).copy()
    lo, hi = robot.limits.lower, robot.limits.upper
    for _ in range(iterations):
        T, J = robot.kinematics(q)
        e = np.concatenate((goal[:3, 3] - T[:3, 3], pin.log3(goal[:3, :3] @ T[:3, :3].T)))
        if np.linalg.norm(e[:3]) < tolerance[0] and np.linalg.norm(e[3:]) < tolerance[1]:
            return q
        dq = J.T @ np.linalg.solve(J @ J.T + damping * np.eye(6), e)
        n = float(np.linalg.norm(dq))
        if n > 0.5:
            dq *= 0.5 / n
        q = np.clip(q + dq, lo, hi)
    return None


def tracking_wrench(law: object, x: object) -> np.ndarray:
    """The motion term of ``law`` (a :class:`~fdcontrol.control.law.ControlLaw`) on input ``x`` —
    added during a move when the law's mode does not compose it (admittance, force)."""
    R = x.pose[:3, :3] if getattr(law, "frame", "base") == "tool" else np.eye(3)  # type: ignore[attr-defined]
    return law.motion(x, R)  # type: ignore[attr-defined]
