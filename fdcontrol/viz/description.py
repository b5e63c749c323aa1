"""The robot description for viewers: the URDF's tree, its link shapes, and the transforms of every joint.

Read from the URDF text itself (not from pinocchio's model), so a viewer gets the frames exactly as
named and placed in the file, and the transforms below are a second, independent forward kinematics
of the tree (tests compare it with pinocchio's to 1e-9).

Link shapes: each link's ``<visual>`` geometry, else its ``<collision>`` geometry (box, cylinder,
sphere, and ``capsule`` as a cylinder with two spheres). A link of the chain with neither gets
generated shapes: a cylinder from its origin to each child joint's origin and a sphere at that
joint, of a radius scaled to the arm's size; :attr:`Description.urdf` is the file with those
shapes added as ``<visual>`` elements, so Foxglove's URDF layer draws the same arm the dashboard does.

Conventions: SI units; a pose is a 4×4 homogeneous transform; URDF ``rpy`` is R = Rz(yaw) Ry(pitch)
Rx(roll) (the URDF specification, "joint" and "link" elements).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MOVING = ("revolute", "continuous", "prismatic")
GENERATED_COLOR = (0.62, 0.66, 0.72, 1.0)  # rgba of generated link shapes


def rpy_matrix(rpy: np.ndarray) -> np.ndarray:
    """R = Rz(yaw) Ry(pitch) Rx(roll) (URDF's fixed-axis roll, pitch, yaw)."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def matrix_rpy(R: np.ndarray) -> tuple[float, float, float]:
    """The inverse of :func:`rpy_matrix` (pitch in [−π/2, π/2])."""
    sp = -float(R[2, 0])
    p = math.asin(max(-1.0, min(1.0, sp)))
    if abs(sp) < 1 - 1e-12:
        return math.atan2(R[2, 1], R[2, 2]), p, math.atan2(R[1, 0], R[0, 0])
    return 0.0, p, math.atan2(-R[0, 1], R[1, 1])  # gimbal lock: roll folded into yaw


def axis_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation by ``angle`` about the unit ``axis`` (Rodrigues' formula)."""
    k = axis / np.linalg.norm(axis)
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * (K @ K)


def _vec(text: str | None, default: tuple[float, ...]) -> np.ndarray:
    return np.array([float(v) for v in text.split()], dtype=float) if text else np.array(default, dtype=float)


def _origin(el: ET.Element | None) -> np.ndarray:
    T = np.eye(4)
    if el is not None:
        T[:3, :3] = rpy_matrix(_vec(el.get("rpy"), (0.0, 0.0, 0.0)))
        T[:3, 3] = _vec(el.get("xyz"), (0.0, 0.0, 0.0))
    return T


@dataclass(frozen=True)
class Joint:
    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray  # child frame at q = 0 in the parent link's frame
    axis: np.ndarray

    def __post_init__(self) -> None:
        k = self.axis / np.linalg.norm(self.axis)
        K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
        object.__setattr__(self, "_unit", k)
        object.__setattr__(self, "_K", (K, K @ K))

    def transform(self, q: float = 0.0) -> np.ndarray:
        """The child link's frame in the parent's at joint value ``q`` (rad or m): origin · motion(q),
        the motion a rotation about the axis (Rodrigues' formula) or a translation along it."""
        if self.type not in MOVING or q == 0.0:
            return self.origin.copy()
        T = self.origin.copy()
        if self.type == "prismatic":
            T[:3, 3] += self.origin[:3, :3] @ (self._unit * q)  # type: ignore[attr-defined]
        else:
            K, K2 = self._K  # type: ignore[attr-defined]
            T[:3, :3] = self.origin[:3, :3] @ (np.eye(3) + math.sin(q) * K + (1.0 - math.cos(q)) * K2)
        return T


@dataclass(frozen=True)
class Shape:
    """One link shape, in the link's frame: ``kind`` box (size xyz), cylinder and capsule (radius,
    length along the shape's z), sphere (radius)."""

    link: str
    kind: str
    origin: np.ndarray
    size: tuple[float, ...]
    rgba: tuple[float, float, float, float] = GENERATED_COLOR
    generated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"link": self.link, "kind": self.kind, "origin": self.origin.tolist(), "size": list(self.size),
                "rgba": list(self.rgba), "generated": self.generated}


def _geometry(link: str, el: ET.Element, colors: dict[str, tuple[float, ...]]) -> Shape | None:
    geo = el.find("geometry")
    if geo is None or len(geo) == 0:
        return None
    g = geo[0]
    rgba: tuple[float, ...] = GENERATED_COLOR
    mat = el.find("material")
    if mat is not None:
        c = mat.find("color")
        if c is not None and c.get("rgba"):
            rgba = tuple(_vec(c.get("rgba"), GENERATED_COLOR).tolist())
        elif mat.get("name") in colors:
            rgba = colors[mat.get("name", "")]
    T = _origin(el.find("origin"))
    if g.tag == "box":
        size = tuple(_vec(g.get("size"), (0.1, 0.1, 0.1)).tolist())
    elif g.tag in ("cylinder", "capsule"):
        size = (float(g.get("radius", 0.05)), float(g.get("length", 0.1)))
    elif g.tag == "sphere":
        size = (float(g.get("radius", 0.05)),)
    else:  # mesh: drawn by viewers that can load it (Foxglove); no shape of its own here
        return None
    rgba4 = (*rgba, 1.0, 1.0, 1.0, 1.0)[:4]
    return Shape(link, g.tag, T, size, (rgba4[0], rgba4[1], rgba4[2], rgba4[3]))


def _segment_origin(p: np.ndarray) -> np.ndarray:
    """A shape frame at the middle of the segment 0 → p, its z along the segment."""
    T = np.eye(4)
    T[:3, 3] = p / 2
    z = p / np.linalg.norm(p)
    x = np.cross([0.0, 1.0, 0.0], z) if abs(z[1]) < 0.9 else np.cross([1.0, 0.0, 0.0], z)
    x /= np.linalg.norm(x)
    T[:3, :3] = np.column_stack((x, np.cross(z, x), z))
    return T


@dataclass
class Description:
    """A URDF's tree: links, joints, shapes, and :attr:`urdf` with generated shapes added."""

    source: str
    base: str
    tip: str
    name: str = "robot"
    root: str = ""
    links: list[str] = field(default_factory=list)
    joints: list[Joint] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)
    urdf: str = ""
    radius: float = 0.05  # of the generated shapes (m)

    @classmethod
    def from_urdf(cls, text: str, base: str, tip: str, name: str | None = None) -> Description:
        tree = ET.fromstring(text)
        d = cls(text, base, tip, name or tree.get("name", "robot"))
        colors = {}
        for m in tree.findall("material"):
            c = m.find("color")
            if c is not None and m.get("name"):
                colors[m.get("name", "")] = tuple(_vec(c.get("rgba"), GENERATED_COLOR).tolist())
        link_el = {el.get("name", ""): el for el in tree.findall("link")}
        d.links = list(link_el)
        for j in tree.findall("joint"):
            parent, child = j.find("parent"), j.find("child")
            if parent is None or child is None:
                continue
            ax = j.find("axis")
            d.joints.append(Joint(j.get("name", ""), j.get("type", "fixed"), parent.get("link", ""),
                                  child.get("link", ""), _origin(j.find("origin")),
                                  _vec(ax.get("xyz") if ax is not None else None, (1.0, 0.0, 0.0))))
        children = {j.child for j in d.joints}
        roots = [n for n in d.links if n not in children]
        d.root = roots[0] if roots else (d.links[0] if d.links else base)
        d._order()
        reach = sum(float(np.linalg.norm(j.origin[:3, 3])) for j in d.joints)
        d.radius = float(np.clip(0.03 * reach, 0.01, 0.06))
        chain = set(d.chain(tip))
        for link, el in link_el.items():
            # visuals; collision shapes for a link without visuals
            vis = [s for v in el.findall("visual") for s in [_geometry(link, v, colors)] if s is not None]
            shapes = vis or [s for v in el.findall("collision") for s in [_geometry(link, v, colors)]
                             if s is not None]
            if not shapes and link in chain:
                shapes = d._generated(link)
                for s in shapes:
                    v = ET.SubElement(el, "visual")
                    ET.SubElement(v, "origin", xyz=" ".join(f"{x:.17g}" for x in s.origin[:3, 3]),
                                  rpy=" ".join(f"{x:.17g}" for x in matrix_rpy(s.origin[:3, :3])))
                    g = ET.SubElement(ET.SubElement(v, "geometry"), s.kind)
                    if s.kind == "cylinder":
                        g.set("radius", f"{s.size[0]:.17g}")
                        g.set("length", f"{s.size[1]:.17g}")
                    else:
                        g.set("radius", f"{s.size[0]:.17g}")
                    mat = ET.SubElement(v, "material", name="fdcontrol_link")
                    ET.SubElement(mat, "color", rgba=" ".join(f"{x:g}" for x in s.rgba))
            d.shapes.extend(shapes)
        d.urdf = ET.tostring(tree, encoding="unicode")
        return d

    @classmethod
    def from_robot(cls, robot: Any) -> Description:
        """The description of a :class:`~fdcontrol.model.robot.RobotModel` loaded from a URDF file."""
        source = getattr(robot, "source", None)
        if source is None or Path(source).suffix.lower() != ".urdf":
            raise ValueError("a robot description needs a robot loaded from a URDF file")
        return cls.from_urdf(Path(source).read_text(), robot.base, robot.tip, robot.name)

    def _order(self) -> None:
        """Joints in tree order (each parent's pose is known before its children's)."""
        by_parent: dict[str, list[Joint]] = {}
        for j in self.joints:
            by_parent.setdefault(j.parent, []).append(j)
        out, todo = [], [self.root]
        while todo:
            link = todo.pop(0)
            for j in by_parent.get(link, []):
                out.append(j)
                todo.append(j.child)
        self.joints = out

    def chain(self, link: str) -> list[str]:
        """The links from the root to ``link`` (inclusive)."""
        parent = {j.child: j.parent for j in self.joints}
        out = [link]
        while out[-1] in parent:
            out.append(parent[out[-1]])
        return out[::-1]

    def _generated(self, link: str) -> list[Shape]:
        r = self.radius
        shapes = [Shape(link, "sphere", np.eye(4), (r,), generated=True)]
        for j in self.joints:
            if j.parent != link:
                continue
            p = j.origin[:3, 3]
            if np.linalg.norm(p) > 1e-6:
                shapes.append(Shape(link, "cylinder", _segment_origin(p), (0.8 * r, float(np.linalg.norm(p))),
                                    generated=True))
        return shapes

    def transforms(self, q: dict[str, float]) -> list[tuple[Joint, np.ndarray]]:
        """Every joint's child frame in its parent's, at joint values ``q`` (name → value; missing: 0)."""
        return [(j, j.transform(float(q.get(j.name, 0.0)))) for j in self.joints]

    def link_poses(self, q: dict[str, float]) -> dict[str, np.ndarray]:
        """Every link's pose in the root frame."""
        poses = {self.root: np.eye(4)}
        for j, T in self.transforms(q):
            poses[j.child] = poses[j.parent] @ T
        return poses

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "root": self.root, "base": self.base, "tip": self.tip, "links": self.links,
                "joints": [{"name": j.name, "type": j.type, "parent": j.parent, "child": j.child,
                            "origin": j.origin.tolist(), "axis": j.axis.tolist()} for j in self.joints],
                "shapes": [s.to_dict() for s in self.shapes], "urdf": self.urdf}


__all__ = ["Description", "Joint", "Shape", "axis_rotation", "matrix_rpy", "rpy_matrix"]
