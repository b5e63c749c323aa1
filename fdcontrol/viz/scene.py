"""The 3-D scene of the loop as Foxglove messages: one builder for the live viewer and the recordings.

:class:`Scene` turns a published :class:`~fdcontrol.loop.state.LoopState` into messages of Foxglove's
well-known schemas (JSON encoding; the schemas are Foxglove's own JSON schemas, ``foxglove_schemas.json``
from the ``@foxglove/schemas`` package, MIT licence), so the Foxglove app draws them with no plugin:

* ``/robot_description`` — the URDF with link shapes (``std_msgs/msg/String``-like ``{"data": …}``),
* ``/tf`` — ``foxglove.FrameTransforms``: every URDF joint, parent link → child link, at the state's q,
* ``/joint_states`` — ``foxglove.JointStates``: the q and q̇ those transforms were computed from,
* ``/fdcontrol/wrench`` — ``foxglove.SceneUpdate``: the measured (blue) and commanded (orange) force as
  arrows at the tip, 1 cm per N,
* ``/fdcontrol/target`` — ``foxglove.PoseInFrame``: the tip's target (the last PUT /control/target), else
  the commanded pose (forward kinematics of q_ref),
* ``/fdcontrol/volumes`` — ``foxglove.SceneUpdate``: the workspace box (edges) and the keep-out volumes
  (sphere, box, plane), coloured by the tip's signed distance: red inside or at the boundary, orange
  inside the margin, green beyond twice the margin,
* ``/fdcontrol/telemetry`` — plot-able numbers: the Jacobian's singular values, κ(H), the safety state.

Frames are named as in the URDF; scene entities are in the chain's base frame. Units SI; timestamps
UNIX time in ns (``{"sec", "nsec"}``).
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from fdcontrol.model import spatial
from fdcontrol.viz.description import Description

DESCRIPTION_TOPIC, TF_TOPIC, JOINTS_TOPIC = "/robot_description", "/tf", "/joint_states"
WRENCH_TOPIC, TARGET_TOPIC = "/fdcontrol/wrench", "/fdcontrol/target"
VOLUMES_TOPIC, TELEMETRY_TOPIC = "/fdcontrol/volumes", "/fdcontrol/telemetry"
ARROW_SCALE = 0.01  # m of arrow per N
ARROW_MAX = 1.0  # m: the longest arrow drawn
MEASURED_RGBA = (0.25, 0.55, 1.0, 1.0)
COMMANDED_RGBA = (1.0, 0.55, 0.1, 1.0)
PLANE_SIZE = 2.0  # m: the side of the square drawn for a keep-out plane


@functools.cache
def foxglove_schemas() -> dict[str, dict[str, Any]]:
    """Foxglove's JSON schemas of the messages used here, by schema name."""
    return json.loads((Path(__file__).with_name("foxglove_schemas.json")).read_text())


DESCRIPTION_SCHEMA: dict[str, Any] = {
    "title": "std_msgs/msg/String", "type": "object",
    "description": "The robot description (URDF XML), link shapes included",
    "properties": {"data": {"type": "string"}}, "required": ["data"]}

TELEMETRY_SCHEMA: dict[str, Any] = {
    "title": "fdcontrol.Telemetry", "type": "object",
    "description": "Numbers to plot: the Jacobian's singular values and the safety state",
    "properties": {
        "timestamp": {"type": "object", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}},
        "cycle": {"type": "integer"},
        "singular_values": {"type": "array", "items": {"type": ["number", "null"]},
                            "description": "of the tip Jacobian J(q), largest first (m/rad, rad/rad)"},
        "sigma_min": {"type": ["number", "null"], "description": "σmin(J) the loop reports"},
        "kappa_h": {"type": ["number", "null"], "description": "κ(H) of the FD virtual model"},
        "running": {"type": "boolean"}, "holding": {"type": "boolean"},
        "hold": {"type": "integer", "description": "1 while holding, else 0 (for plots)"},
        "watchdog": {"type": "string"}, "fault": {"type": ["string", "null"]},
        "mode": {"type": "string"},
        "safety_mode": {"type": ["string", "null"]},
        "limits_active": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "limits_active_count": {"type": "integer"},
        "workspace_distance": {"type": ["number", "null"], "description": "m"},
        "link_clearance": {"type": ["number", "null"], "description": "m"},
        "force_measured": {"type": ["number", "null"], "description": "‖F_measured‖ (N)"},
        "force_commanded": {"type": ["number", "null"], "description": "‖F_c‖ (N)"},
    }}


def schemas() -> dict[str, tuple[str, dict[str, Any]]]:
    """topic → (schema name, JSON schema): the channels of the live viewer and of the recordings."""
    fx = foxglove_schemas()
    return {DESCRIPTION_TOPIC: ("std_msgs/msg/String", DESCRIPTION_SCHEMA),
            TF_TOPIC: ("foxglove.FrameTransforms", fx["foxglove.FrameTransforms"]),
            JOINTS_TOPIC: ("foxglove.JointStates", fx["foxglove.JointStates"]),
            WRENCH_TOPIC: ("foxglove.SceneUpdate", fx["foxglove.SceneUpdate"]),
            TARGET_TOPIC: ("foxglove.PoseInFrame", fx["foxglove.PoseInFrame"]),
            VOLUMES_TOPIC: ("foxglove.SceneUpdate", fx["foxglove.SceneUpdate"]),
            TELEMETRY_TOPIC: ("fdcontrol.Telemetry", TELEMETRY_SCHEMA)}


def stamp(ns: int) -> dict[str, int]:
    return {"sec": ns // 1_000_000_000, "nsec": ns % 1_000_000_000}


def quaternion(R: np.ndarray) -> dict[str, float]:
    """{x, y, z, w} of a rotation matrix."""
    return dict(zip("xyzw", spatial.quaternion(R), strict=True))


def _pose(T: np.ndarray) -> dict[str, Any]:
    return {"position": dict(zip("xyz", (float(v) for v in T[:3, 3]), strict=True)),
            "orientation": quaternion(T[:3, :3])}


def _color(rgba: tuple[float, ...]) -> dict[str, float]:
    return dict(zip(("r", "g", "b", "a"), (float(c) for c in rgba), strict=True))


def distance_color(d: float, margin: float, alpha: float = 0.35) -> tuple[float, float, float, float]:
    """Red at or beyond the boundary (d ≤ 0), orange inside the margin, fading to green at 2 × margin."""
    if not math.isfinite(d):
        return (0.6, 0.6, 0.6, alpha)
    if d <= 0:
        return (0.9, 0.1, 0.1, alpha)
    t = min(d / max(2 * margin, 1e-9), 1.0)
    return (1.0 - 0.8 * t, 0.55 + 0.25 * t, 0.1 + 0.1 * t, alpha)


def _entity(ns: int, frame: str, eid: str, **prims: Any) -> dict[str, Any]:
    e: dict[str, Any] = {"timestamp": stamp(ns), "frame_id": frame, "id": eid, "lifetime": {"sec": 0, "nsec": 0},
                         "frame_locked": False, "metadata": []}
    for k in ("arrows", "cubes", "spheres", "cylinders", "lines", "triangles", "texts", "models"):
        e[k] = prims.get(k, [])
    if "metadata" in prims:
        e["metadata"] = [{"key": k, "value": str(v)} for k, v in prims["metadata"].items()]
    return e


def arrow(tip: np.ndarray, force: np.ndarray, rgba: tuple[float, ...]) -> list[dict[str, Any]]:
    """An ArrowPrimitive from ``tip`` along ``force`` (its +x), ARROW_SCALE m per N; none for no force."""
    n = math.sqrt(float(force @ force))
    if not math.isfinite(n) or n < 1e-6:
        return []
    x = force / n
    a = spatial.cross(np.array([0.0, 0.0, 1.0]) if abs(x[2]) < 0.9 else np.array([0.0, 1.0, 0.0]), x)
    y = a / math.sqrt(float(a @ a))
    T = np.eye(4)
    T[:3, 0], T[:3, 1], T[:3, 2] = x, y, spatial.cross(x, y)
    T[:3, 3] = tip
    length = min(ARROW_SCALE * n, ARROW_MAX)
    head = min(0.3 * length, 0.05)
    return [{"pose": _pose(T), "shaft_length": length - head, "shaft_diameter": 0.01, "head_length": head,
             "head_diameter": 0.025, "color": _color(rgba)}]


class Scene:
    """Builds the viewer's messages from loop states: one per process (its own robot model).

    ``params``: the service's control parameters (robot, base, tip, workspace_box, keep_out).
    """

    def __init__(self, params: dict[str, Any]) -> None:
        from fdcontrol.model.robot import RobotModel

        self.robot = RobotModel.resolve(params["robot"], params.get("base"), params.get("tip"))
        self.description = Description.from_robot(self.robot)
        self.base = self.robot.base
        self.update(params)

    def update(self, params: dict[str, Any]) -> None:
        """Take a new configuration (the volumes may have changed)."""
        from fdcontrol.control.workspace import workspace_from_config

        self.params = params
        try:
            self.workspace = workspace_from_config(self.robot, params.get("workspace_box"),
                                                   params.get("keep_out") or [])
            self.specs = ([("workspace", "workspace_box", params["workspace_box"])]
                          if params.get("workspace_box") else []) + \
                [(z.name, "keep_out", spec) for z, spec in zip(self.workspace.zones[bool(params.get("workspace_box")):],
                                                               params.get("keep_out") or [], strict=True)]
        except (ValueError, KeyError, TypeError):
            self.workspace, self.specs = None, []
        # the base frame in the URDF's root frame (scene entities are drawn in the base frame)
        self._root_base = self.description.link_poses({})[self.base] if self.base in self.description.links \
            else np.eye(4)

    # ------------------------------------------------------------------ messages
    def robot_description(self) -> dict[str, Any]:
        return {"data": self.description.urdf}

    def frame_transforms(self, s: Any, ns: int) -> dict[str, Any]:
        q = dict(zip(self.robot.joint_names, (float(v) for v in s.q), strict=False))
        ts = stamp(ns)
        return {"transforms": [
            {"timestamp": ts, "parent_frame_id": j.parent, "child_frame_id": j.child,
             "translation": dict(zip("xyz", (float(v) for v in T[:3, 3]), strict=True)),
             "rotation": quaternion(T[:3, :3])} for j, T in self.description.transforms(q)]}

    def joint_states(self, s: Any, ns: int) -> dict[str, Any]:
        return {"timestamp": stamp(ns), "joints": [
            {"name": n, "position": float(q), "velocity": float(v), "acceleration": 0.0, "effort": 0.0}
            for n, q, v in zip(self.robot.joint_names, s.q, s.qd, strict=False)]}

    def wrench(self, s: Any, ns: int) -> dict[str, Any]:
        tip = np.asarray(s.tip_pose)[:3, 3]
        ents = [_entity(ns, self.base, "wrench/measured", arrows=arrow(tip, np.asarray(s.f_measured)[:3],
                                                                       MEASURED_RGBA)),
                _entity(ns, self.base, "wrench/commanded", arrows=arrow(tip, np.asarray(s.wrench)[:3],
                                                                         COMMANDED_RGBA))]
        return {"deletions": [], "entities": ents}

    def target(self, s: Any, ns: int, target: np.ndarray | None = None) -> dict[str, Any]:
        T = np.asarray(target) if target is not None else self.robot.pose(np.asarray(s.q_ref))
        return {"timestamp": stamp(ns), "frame_id": self.base, "pose": _pose(T)}

    def volumes(self, s: Any, ns: int) -> dict[str, Any]:
        p = np.asarray(s.tip_pose)[:3, 3]
        ents = []
        zones = self.workspace.zones if self.workspace is not None else []
        for z, (name, kind, spec) in zip(zones, self.specs, strict=False):
            d = float(z.distance(p)[0]) if np.all(np.isfinite(p)) else math.nan
            color = _color(distance_color(d, z.margin))
            meta = {"distance_m": f"{d:.4f}", "margin_m": f"{z.margin:g}", "kind": kind}
            if kind == "workspace_box":
                lo, hi = np.asarray(spec["min"], float), np.asarray(spec["max"], float)
                ents.append(_entity(ns, self.base, "workspace", metadata=meta, lines=[_box_edges(lo, hi, color)],
                                    cubes=[{"pose": _pose(_at((lo + hi) / 2)), "size": _xyz(hi - lo),
                                            "color": {**color, "a": 0.05}}]))
            elif spec.get("sphere"):
                c, r = np.asarray(spec["sphere"]["center"], float), float(spec["sphere"]["radius"])
                ents.append(_entity(ns, self.base, f"keep_out/{name}", metadata=meta, spheres=[
                    {"pose": _pose(_at(c)), "size": _xyz(np.full(3, 2 * r)), "color": color}]))
            elif spec.get("box"):
                lo, hi = np.asarray(spec["box"]["min"], float), np.asarray(spec["box"]["max"], float)
                ents.append(_entity(ns, self.base, f"keep_out/{name}", metadata=meta, cubes=[
                    {"pose": _pose(_at((lo + hi) / 2)), "size": _xyz(hi - lo), "color": color}]))
            elif spec.get("plane"):
                pt, n = np.asarray(spec["plane"]["point"], float), np.asarray(spec["plane"]["normal"], float)
                n = n / np.linalg.norm(n)
                T = _at(pt)
                x = np.cross([0.0, 0.0, 1.0], n) if abs(n[2]) < 0.9 else np.cross([1.0, 0.0, 0.0], n)
                x /= np.linalg.norm(x)
                T[:3, :3] = np.column_stack((x, np.cross(n, x), n))  # z along the normal
                T[:3, 3] = pt - n * 0.001  # the square's allowed face on the plane
                ents.append(_entity(ns, self.base, f"keep_out/{name}", metadata=meta, cubes=[
                    {"pose": _pose(T), "size": _xyz(np.array([PLANE_SIZE, PLANE_SIZE, 0.002])), "color": color}]))
        return {"deletions": [{"timestamp": stamp(ns), "type": 1, "id": ""}], "entities": ents}

    def telemetry(self, s: Any, ns: int) -> dict[str, Any]:
        q = np.asarray(s.q, float)
        sv = (np.linalg.svd(self.robot.jacobian(q), compute_uv=False).tolist() if np.all(np.isfinite(q))
              else [])
        lim = dict(s.limits_active or {})
        fm, fc = float(np.linalg.norm(np.asarray(s.f_measured)[:3])), float(np.linalg.norm(np.asarray(s.wrench)[:3]))
        return _finite({"timestamp": stamp(ns), "cycle": int(s.cycle), "singular_values": sv,
                        "sigma_min": float(s.sigma_min_j), "kappa_h": float(s.kappa_h), "running": bool(s.running),
                        "holding": bool(s.holding), "hold": int(bool(s.holding)), "watchdog": s.watchdog,
                        "fault": s.fault, "mode": s.mode, "safety_mode": s.safety_mode, "limits_active": lim,
                        "limits_active_count": sum(bool(v) for v in lim.values()),
                        "workspace_distance": float(s.workspace_distance),
                        "link_clearance": float(s.link_clearance), "force_measured": fm, "force_commanded": fc})

    def messages(self, s: Any, ns: int, target: np.ndarray | None = None,
                 volumes: bool = True) -> dict[str, dict[str, Any]]:
        """The per-tick messages of state ``s`` (``volumes``: the volume entities too)."""
        out = {TF_TOPIC: self.frame_transforms(s, ns), JOINTS_TOPIC: self.joint_states(s, ns),
               WRENCH_TOPIC: self.wrench(s, ns), TARGET_TOPIC: self.target(s, ns, target),
               TELEMETRY_TOPIC: self.telemetry(s, ns)}
        if volumes:
            out[VOLUMES_TOPIC] = self.volumes(s, ns)
        return out


def _at(p: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, 3] = p
    return T


def _xyz(v: np.ndarray) -> dict[str, float]:
    return dict(zip("xyz", (float(x) for x in v), strict=True))


def _box_edges(lo: np.ndarray, hi: np.ndarray, color: dict[str, float]) -> dict[str, Any]:
    c = [np.array([x, y, z]) for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
    pairs = [(i, j) for i in range(8) for j in range(i + 1, 8) if bin(i ^ j).count("1") == 1]
    return {"type": 2, "pose": _pose(np.eye(4)), "thickness": 3.0, "scale_invariant": True,
            "points": [_xyz(c[k]) for pair in pairs for k in pair], "color": {**color, "a": 1.0}, "colors": [],
            "indices": []}


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


__all__ = ["DESCRIPTION_TOPIC", "JOINTS_TOPIC", "TARGET_TOPIC", "TELEMETRY_TOPIC", "TF_TOPIC", "VOLUMES_TOPIC",
           "WRENCH_TOPIC", "Scene", "distance_color", "foxglove_schemas", "schemas"]
