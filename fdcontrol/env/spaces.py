"""Observation and action spaces of the learning interface, and actions turned into goal poses.

Shared by the environment over a running service (:mod:`fdcontrol.env.service`) and the
in-process one (:mod:`fdcontrol.env.sim`). Units are SI, poses in the robot's base frame,
quaternions [x, y, z, w] with w ≥ 0, rotation vectors in rad (axis × angle).

Action types (each a ``gymnasium.spaces.Box`` of float64, in physical units):

* ``"delta_pose"`` (6): [Δx, Δy, Δz, Δr_x, Δr_y, Δr_z] — a position step (m) and a rotation
  vector (rad) per policy step, in the base frame (``frame="base"``: p ← p + Δp, R ← Exp(Δr) R) or
  the tool frame (``frame="tool"``: p ← p + R Δp, R ← R Exp(Δr)); bounds ``max_delta`` (m, rad);
* ``"pose"`` (7): an absolute goal [x, y, z, q_x, q_y, q_z, q_w] (m; unit quaternion, normalised
  here); the position within ``workspace`` (a box, m);
* ``"twist"`` (6): [v; ω] held over the step, p ← p + v·T, R ← Exp(ω·T) R (base frame); bounds
  ``max_twist`` (m/s, rad/s);
* ``"joint_delta"`` (n): Δq per step (rad), goal = FK(q_goal + Δq); bounds ``max_joint_delta``.

Deltas apply to the previous goal (``origin="goal"``, default: n steps of Δ move the tip n·Δ
however far the compliant arm lags) or to the measured tip (``origin="measured"``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pinocchio as pin

from fdcontrol.extras import missing

try:
    from gymnasium import spaces
except ImportError as exc:
    raise missing("env", "the learning environments", exc) from exc

ActionType = Literal["delta_pose", "pose", "twist", "joint_delta"]
ACTION_TYPES: tuple[str, ...] = ("delta_pose", "pose", "twist", "joint_delta")
OBSERVATION_KEYS: tuple[str, ...] = ("q", "qd", "tip_pose", "tip_twist", "wrench")
#: optional extra observation fields: numeric fields of the loop state (fdcontrol.loop.state)
EXTRA_FIELDS: dict[str, tuple[str, int | str]] = {
    "q_ref": ("q_ref", "dof"), "qd_ref": ("qd_ref", "dof"), "f_c": ("wrench", 6),
    "sigma_min_j": ("sigma_min_j", 1), "holding": ("holding", 1),
}


class ActionError(ValueError):
    """An action that does not fit the action space; nothing was sent."""


def quat(R: np.ndarray) -> np.ndarray:
    """[x, y, z, w] with w ≥ 0 of a rotation matrix."""
    q = pin.Quaternion(np.asarray(R, dtype=float)).coeffs()  # x, y, z, w
    return -q if q[3] < 0 else q


def pose7(T: np.ndarray) -> np.ndarray:
    return np.concatenate((T[:3, 3], quat(T[:3, :3])))


def from_pose7(x: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    q = x[3:7] / np.linalg.norm(x[3:7])
    T = np.eye(4)
    T[:3, 3] = x[:3]
    T[:3, :3] = pin.Quaternion(q[3], q[0], q[1], q[2]).toRotationMatrix()
    return T


@dataclass(frozen=True)
class ActionSpec:
    """How actions are read: type, frame of deltas, their origin, bounds (see the module docstring)."""

    type: ActionType = "delta_pose"
    frame: Literal["base", "tool"] = "base"
    origin: Literal["goal", "measured"] = "goal"
    max_delta: tuple[float, float] = (0.02, 0.1)  # m, rad per step
    max_twist: tuple[float, float] = (0.25, 1.0)  # m/s, rad/s
    max_joint_delta: float = 0.1  # rad per step
    workspace: tuple[tuple[float, float, float], tuple[float, float, float]] = ((-1.5, -1.5, -0.5), (1.5, 1.5, 1.5))

    def __post_init__(self) -> None:
        if self.type not in ACTION_TYPES:
            raise ValueError(f"unknown action type {self.type!r}; expected one of {', '.join(ACTION_TYPES)}")
        if self.frame not in ("base", "tool") or self.origin not in ("goal", "measured"):
            raise ValueError("frame must be 'base' or 'tool', origin 'goal' or 'measured'")
        vals = [*self.max_delta, *self.max_twist, self.max_joint_delta]
        if not all(math.isfinite(v) and v > 0 for v in vals):
            raise ValueError("action bounds must be finite numbers > 0")

    def space(self, dof: int) -> spaces.Box:
        if self.type == "delta_pose":
            b = np.array([self.max_delta[0]] * 3 + [self.max_delta[1]] * 3)
        elif self.type == "twist":
            b = np.array([self.max_twist[0]] * 3 + [self.max_twist[1]] * 3)
        elif self.type == "joint_delta":
            b = np.full(dof, self.max_joint_delta)
        else:
            lo, hi = np.array(self.workspace[0], float), np.array(self.workspace[1], float)
            return spaces.Box(np.concatenate((lo, -np.ones(4))), np.concatenate((hi, np.ones(4))), dtype=np.float64)
        return spaces.Box(-b, b, dtype=np.float64)


def check_action(space: spaces.Box, action: Any, clip: bool = False) -> np.ndarray:
    """The action as a float64 array, or ActionError saying what is wrong (shape, NaN/Inf, bounds).

    ``clip``: a finite action of the right shape outside the bounds is clipped to them (the
    returned array is what is applied) instead of refused; a wrong shape or NaN/Inf is always refused.
    """
    try:
        a = np.asarray(action, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ActionError(f"action must be numbers of shape {space.shape}: {exc}") from None
    if a.shape != space.shape:
        raise ActionError(f"action must have shape {space.shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ActionError(f"action must be finite, got {a.tolist()}")
    if clip:
        return np.clip(a, space.low, space.high)
    out = (a < space.low) | (a > space.high)
    if out.any():
        i = int(np.argmax(out))
        raise ActionError(f"action[{i}] = {a[i]:g} is outside the action space [{space.low[i]:g}, {space.high[i]:g}]")
    return a


def goal_pose(spec: ActionSpec, a: np.ndarray, goal: np.ndarray, measured: np.ndarray, step: float,
              robot: Any = None, q_goal: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """The next goal pose (4×4) for a checked action, and the joint goal for ``joint_delta``."""
    if spec.type == "pose":
        if np.linalg.norm(a[3:7]) < 0.5:
            raise ActionError("pose action: the quaternion (last four) must be a unit quaternion [x, y, z, w]")
        return from_pose7(a), None
    if spec.type == "joint_delta":
        qg = np.asarray(q_goal, dtype=float) + a
        lim = robot.limits
        if np.any(qg < lim.lower) or np.any(qg > lim.upper):
            raise ActionError("joint_delta action: the joint goal would leave the joint limits")
        return robot.pose(qg), qg
    origin = goal if spec.origin == "goal" else measured
    d = a if spec.type == "delta_pose" else a * step
    T = origin.copy()
    R = origin[:3, :3]
    if spec.type == "delta_pose" and spec.frame == "tool":
        T[:3, 3] = origin[:3, 3] + R @ d[:3]
        T[:3, :3] = R @ pin.exp3(d[3:])
    else:
        T[:3, 3] = origin[:3, 3] + d[:3]
        T[:3, :3] = pin.exp3(d[3:]) @ R
    return T, None


def observation_space(dof: int, extra: Sequence[str] = ()) -> spaces.Dict:
    inf = np.inf
    d: dict[str, spaces.Box] = {
        "q": spaces.Box(-inf, inf, (dof,), np.float64),
        "qd": spaces.Box(-inf, inf, (dof,), np.float64),
        "tip_pose": spaces.Box(-inf, inf, (7,), np.float64),
        "tip_twist": spaces.Box(-inf, inf, (6,), np.float64),
        "wrench": spaces.Box(-inf, inf, (6,), np.float64),
    }
    for k in extra:
        if k not in EXTRA_FIELDS:
            raise ValueError(f"unknown observation field {k!r}; choose from {', '.join(EXTRA_FIELDS)}")
        n = EXTRA_FIELDS[k][1]
        d[k] = spaces.Box(-inf, inf, (dof if n == "dof" else int(n),), np.float64)
    return spaces.Dict(d)


def observation(state: dict[str, Any], extra: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """The observation of a state in its wire encoding (fdcontrol.loop.state.to_dict)."""
    T = np.asarray(state["tip_pose"], dtype=float)
    obs = {"q": np.asarray(state["q"], float), "qd": np.asarray(state["qd"], float),
           "tip_pose": pose7(T), "tip_twist": np.asarray(state["tip_twist"], float),
           "wrench": np.asarray(state["f_measured"], float)}
    for k in extra:
        v = state[EXTRA_FIELDS[k][0]]
        obs[k] = np.atleast_1d(np.asarray(np.nan if v is None else v, dtype=float))
    return obs
