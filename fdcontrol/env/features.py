"""Flat, named observations and actions: the feature names of the LeRobot robot plugin and datasets.

LeRobot describes a robot by flat dictionaries of named floats (``observation_features``,
``action_features``); a dataset stores them as ``observation.state`` and ``action`` vectors with
these names. The names follow LeRobot's conventions (``<joint>.pos`` / ``<joint>.vel`` as its own
arms, ``delta_x`` … as its gamepad and keyboard teleoperators, ``ee.x`` … for the end effector):

* observation: ``joint_1.pos`` … ``joint_n.pos`` (rad), ``joint_1.vel`` … (rad/s); the tip pose
  ``ee.x, ee.y, ee.z`` (m) and ``ee.qx, ee.qy, ee.qz, ee.qw`` (unit quaternion, w ≥ 0); the tip
  twist ``twist.vx … twist.wz`` (m/s, rad/s); the measured wrench ``wrench.fx … wrench.tz`` (N,
  N·m) — all in the base frame; ``mode`` (the index of the control law in :data:`MODES`),
  ``held`` (1 while the arm brakes to or holds standstill) and ``fault`` (1 after a fault);
* action, one of the kinds of :data:`ACTION_KINDS` (the gymnasium environment's action types,
  :mod:`fdcontrol.env.spaces`, and a streamed wrench): ``delta_pose`` → ``delta_x, delta_y,
  delta_z, delta_rx, delta_ry, delta_rz``; ``pose`` → ``ee.x … ee.qw``; ``twist`` → ``twist.vx …
  twist.wz``; ``wrench`` → ``wrench.fx … wrench.tz``; ``joint_delta`` → ``joint_1.delta`` ….

This module needs neither LeRobot nor gymnasium: the plugin, the dataset exporter and a user's
own code share the names from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pinocchio as pin

from fdcontrol.control.laws import LAWS

#: the control laws in the order of their index in the ``mode`` feature (the shared-memory encoding)
MODES: tuple[str, ...] = tuple(LAWS.names())
#: action kinds: the environment's action types and a streamed wrench
ACTION_KINDS: tuple[str, ...] = ("delta_pose", "pose", "twist", "wrench", "joint_delta")

POSE = ("ee.x", "ee.y", "ee.z", "ee.qx", "ee.qy", "ee.qz", "ee.qw")
TWIST = ("twist.vx", "twist.vy", "twist.vz", "twist.wx", "twist.wy", "twist.wz")
WRENCH = ("wrench.fx", "wrench.fy", "wrench.fz", "wrench.tx", "wrench.ty", "wrench.tz")
DELTA = ("delta_x", "delta_y", "delta_z", "delta_rx", "delta_ry", "delta_rz")
STATUS = ("mode", "held", "fault")


def joint_names(dof: int, suffix: str) -> tuple[str, ...]:
    return tuple(f"joint_{i + 1}.{suffix}" for i in range(dof))


def observation_names(dof: int) -> tuple[str, ...]:
    """The observation's feature names, in the order of the dataset's ``observation.state``."""
    return (*joint_names(dof, "pos"), *joint_names(dof, "vel"), *POSE, *TWIST, *WRENCH, *STATUS)


def action_names(kind: str, dof: int) -> tuple[str, ...]:
    """The action's feature names for one action kind, in the order of the action vector."""
    names = {"delta_pose": DELTA, "pose": POSE, "twist": TWIST, "wrench": WRENCH}
    if kind == "joint_delta":
        return joint_names(dof, "delta")
    if kind not in names:
        raise ValueError(f"unknown action kind {kind!r}; expected one of {', '.join(ACTION_KINDS)}")
    return names[kind]


def pose7(T: np.ndarray) -> np.ndarray:
    """[x, y, z, q_x, q_y, q_z, q_w] (w ≥ 0) of a 4×4 pose."""
    T = np.asarray(T, dtype=float)
    q = pin.Quaternion(T[:3, :3]).coeffs()  # x, y, z, w
    return np.concatenate((T[:3, 3], -q if q[3] < 0 else q))


def observation_vector(state: Mapping[str, Any]) -> np.ndarray:
    """The observation of a loop state in its wire encoding (``GET /state``, a recorded state), as one
    float64 vector in the order of :func:`observation_names`."""
    mode = state["mode"]
    return np.concatenate((
        np.asarray(state["q"], float), np.asarray(state["qd"], float), pose7(state["tip_pose"]),
        np.asarray(state["tip_twist"], float), np.asarray(state["f_measured"], float),
        [float(MODES.index(mode)) if mode in MODES else float("nan"), float(bool(state["holding"])),
         float(state.get("fault") is not None)]))


def observation(state: Mapping[str, Any]) -> dict[str, float]:
    """The observation of a loop state as LeRobot's flat dict of named floats."""
    v = observation_vector(state)
    return dict(zip(observation_names(len(state["q"])), (float(x) for x in v), strict=True))
