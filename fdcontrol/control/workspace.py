"""Workspace: a box the tool centre point (and chosen link origins) stays in, and keep-out volumes.

Every volume is described by the signed distance d(p) of a point p to its boundary (m, base
frame; positive on the allowed side) and the unit normal n(p) = ∇d pointing to the allowed
side. Inside the volume's margin m each (point, volume) pair acts on the virtual model as a
repulsive spring–damper — the external loads of Scherzinger et al., "Virtual Forward Dynamics
Models for Cartesian Robot Control", section 5.1 (the same law as
:mod:`fdcontrol.control.link_loads`):

    F = [k (m − d) − b min(n·ṗ, 0)] n   if d < m,   else 0,

with ṗ the point's velocity on the virtual model. The load only acts along n, so the response
stays compliant and decoupled along the boundary: a tip pushed into a wall stops in its margin
and still slides freely along it. At the tool centre point F enters the control signal as the
wrench [F; 0]; at a link origin it enters as the joint torque J_pᵀ F (the FD virtual model only).

Volumes:

* :class:`WorkspaceBox` — an axis-aligned box the points stay *inside* (six half-spaces, one
  load per face: in a corner both faces push),
* :class:`Sphere` and :class:`Plane` of :mod:`fdcontrol.control.link_loads` (the outside of a
  ball; the side a plane's normal points to),
* :class:`KeepOutBox` — an axis-aligned box the points stay *outside* of.

The hard stop at the boundary itself is the limit :class:`fdcontrol.limits.workspace.WorkspaceStop`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fdcontrol.control.link_loads import LinkLoad, LinkLoads, Plane, Sphere, _point
from fdcontrol.model.collision import BOX, PLANE, SPHERE, Clearance, Obstacle
from fdcontrol.model.robot import RobotModel
from fdcontrol.params import Param, declare

#: the workspace's parameters, declared once (fdcontrol.params); a change that would put the arm inside a
#: margin is refused by the service (no configuration change moves the arm)
PARAMS = declare(
    "workspace",
    Param("workspace_box", "spec", None, "box the tip (and workspace_links) stays inside: min, max, margin, "
          "stiffness, damping (null: none)", "m", nullable=True),
    Param("workspace_links", "spec", [], "link frames whose origins obey the workspace too", max_items=16),
    Param("keep_out", "spec", [], "keep-out volumes: a sphere, a box or the far side of a plane, each with a "
          "margin, stiffness and damping", "m", max_items=256),
    Param("workspace_stop_deceleration", "float", 5.0, "braking of the hard stop at the workspace boundary",
          "m/s²", policy="tighten", gt=0, le=100),
    Param("collision_links", "choice", "keep_out", "which volumes every link with collision geometry obeys (a "
          "repulsive load and a velocity damper): keep_out (the keep-out volumes; the workspace box holds the tip "
          "and workspace_links), all (the workspace box too: size it around the whole arm), off",
          choices=("keep_out", "all", "off")),
    Param("self_collision", "bool", False, "keep the arm's links apart: a repulsive load and a velocity damper "
          "between link pairs that are not adjacent (needs collision geometry)"),
    Param("self_collision_margin", "float", 0.04, "distance between two links inside which their repulsive "
          "load acts", "m", ge=0, le=0.5),
    Param("collision_distance", "float", 0.01, "hard margin: the velocity damper never lets a link come "
          "nearer a volume or another link; the loop holds with a fault if half of it is crossed anyway", "m",
          policy="tighten", gt=0, le=0.2),
)
#: the repulsive load between two links of the arm (self-collision), N/m and N·s/m
SELF_STIFFNESS, SELF_DAMPING = 2000.0, 90.0

TIP = "tip"  # the name of the tool centre point among the workspace's points
_ZERO3 = np.zeros(3)


@dataclass
class KeepOutBox:
    """An axis-aligned box [lo, hi] (m, base frame) whose outside is allowed.

    d(p) = ‖max(lo − p, p − hi, 0)‖ outside; inside, −(distance to the nearest face). n = ∇d.
    """

    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self) -> None:
        self.lo, self.hi = _point(self.lo, "box min"), _point(self.hi, "box max")
        if np.any(self.lo >= self.hi):
            raise ValueError(f"box min must be < max on every axis (a positive size), got min {self.lo.tolist()} "
                             f"and max {self.hi.tolist()}")

    def distance(self, p: np.ndarray) -> tuple[float, np.ndarray]:
        out = np.maximum(np.maximum(self.lo - p, p - self.hi), 0.0)
        n = float(np.linalg.norm(out))
        if n > 0:
            return n, np.sign(p - (self.lo + self.hi) / 2) * out / n
        # inside: the nearest face
        below, above = p - self.lo, self.hi - p
        i_lo, i_hi = int(np.argmin(below)), int(np.argmin(above))
        u = np.zeros(3)
        if below[i_lo] <= above[i_hi]:
            u[i_lo] = -1.0
            return -float(below[i_lo]), u
        u[i_hi] = 1.0
        return -float(above[i_hi]), u


@dataclass
class WorkspaceBox:
    """An axis-aligned box [lo, hi] (m, base frame) the points stay inside: its six faces as
    half-spaces with inward normals; d(p) = min over faces."""

    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self) -> None:
        self.lo, self.hi = _point(self.lo, "workspace box min"), _point(self.hi, "workspace box max")
        if np.any(self.lo >= self.hi):
            raise ValueError(f"workspace box min must be < max on every axis, got min {self.lo.tolist()} "
                             f"and max {self.hi.tolist()}")
        eye = np.eye(3)
        self.faces = [Plane(self.lo.copy(), eye[i]) for i in range(3)] + \
                     [Plane(self.hi.copy(), -eye[i]) for i in range(3)]

    def distance(self, p: np.ndarray) -> tuple[float, np.ndarray]:
        best = (math.inf, np.zeros(3))
        for f in self.faces:
            d, n = f.distance(p)
            if d < best[0]:
                best = (d, n)
        return best


Volume = WorkspaceBox | KeepOutBox | Sphere | Plane


class Parts:
    """Many boundary pieces (planes, spheres, keep-out boxes) evaluated at once with numpy:
    :meth:`distances` gives d and n of every piece, in the order given (the same values as
    each piece's own ``distance``; tests/test_workspace.py compares them)."""

    def __init__(self, parts: Sequence[Plane | Sphere | KeepOutBox]) -> None:
        self.n = len(parts)
        kinds = [type(p) for p in parts]
        bad = [k.__name__ for k in kinds if k not in (Plane, Sphere, KeepOutBox)]
        if bad:
            raise ValueError(f"unsupported workspace piece {bad[0]}")
        self._pl = np.array([i for i, k in enumerate(kinds) if k is Plane], dtype=int)
        self._sp = np.array([i for i, k in enumerate(kinds) if k is Sphere], dtype=int)
        self._bx = np.array([i for i, k in enumerate(kinds) if k is KeepOutBox], dtype=int)
        self._P = np.array([parts[i].point for i in self._pl]).reshape(-1, 3)  # type: ignore[union-attr]
        self._N = np.array([parts[i].normal for i in self._pl]).reshape(-1, 3)  # type: ignore[union-attr]
        self._C = np.array([parts[i].center for i in self._sp]).reshape(-1, 3)  # type: ignore[union-attr]
        self._R = np.array([parts[i].radius for i in self._sp], dtype=float)  # type: ignore[union-attr]
        self._lo = np.array([parts[i].lo for i in self._bx]).reshape(-1, 3)  # type: ignore[union-attr]
        self._hi = np.array([parts[i].hi for i in self._bx]).reshape(-1, 3)  # type: ignore[union-attr]
        self._d, self._nrm = np.empty(self.n), np.empty((self.n, 3))
        # the compiled form's one table, a row per piece in order: kind, then point and normal (a plane),
        # centre and radius (a sphere), min and max (a keep-out box)
        G = np.zeros((self.n, 7))
        for i, part in enumerate(parts):
            if isinstance(part, Plane):
                G[i] = (_PLANE, *part.point, *part.normal)
            elif isinstance(part, Sphere):
                G[i] = (_SPHERE, *part.center, part.radius, 0.0, 0.0)
            else:
                G[i] = (_BOX, *part.lo, *part.hi)
        self._G = G

    def distances(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(d, n): signed distances (m, positive on the allowed side) and allowed-side normals (the arrays are
        reused by the next call). One compiled call where numba is installed and p is 3 floats; the numpy
        form otherwise (the same values to rounding, tests/test_workspace.py)."""
        if _distances is not None and type(p) is np.ndarray and p.dtype == _F64 and p.shape == (3,):
            _distances(p, self._G, self._d, self._nrm)
            return self._d, self._nrm
        return self.distances_numpy(p)

    def distances_numpy(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`distances` by numpy's vectorised operations, one kind of piece at a time."""
        d, nrm = self._d, self._nrm
        if len(self._pl):
            d[self._pl] = np.einsum("ij,ij->i", p - self._P, self._N)
            nrm[self._pl] = self._N
        if len(self._sp):
            r = p - self._C
            nr = np.sqrt(np.einsum("ij,ij->i", r, r))
            d[self._sp] = nr - self._R
            safe = np.where(nr > 0, nr, 1.0)
            u = r / safe[:, None]
            u[nr == 0] = (0.0, 0.0, 1.0)
            nrm[self._sp] = u
        if len(self._bx):
            lo, hi = self._lo, self._hi
            below, above = p - lo, hi - p
            out = np.maximum(np.maximum(-below, -above), 0.0)
            no = np.sqrt(np.einsum("ij,ij->i", out, out))
            outside = no > 0
            u = np.sign(p - (lo + hi) / 2) * out / np.where(outside, no, 1.0)[:, None]
            # inside: the nearest face, as KeepOutBox.distance picks it
            i_lo, i_hi = np.argmin(below, axis=1), np.argmin(above, axis=1)
            k = np.arange(len(lo))
            m_lo, m_hi = below[k, i_lo], above[k, i_hi]
            use_lo = m_lo <= m_hi
            ui = np.zeros_like(u)
            ui[k[use_lo], i_lo[use_lo]] = -1.0
            ui[k[~use_lo], i_hi[~use_lo]] = 1.0
            d[self._bx] = np.where(outside, no, -np.where(use_lo, m_lo, m_hi))
            nrm[self._bx] = np.where(outside[:, None], u, ui)
        return d, nrm


_F64 = np.dtype(np.float64)
_PLANE, _SPHERE, _BOX = 0.0, 1.0, 2.0  # the kinds of Parts' table


def _distances_kernel(p: np.ndarray, G: np.ndarray, d: np.ndarray, nrm: np.ndarray) -> None:  # pragma: no mutate block
    """Parts.distances of the point p over the table G, into d and nrm: each piece's own ``distance``
    (Plane, Sphere, KeepOutBox), written out per coordinate."""
    p0, p1, p2 = p[0], p[1], p[2]
    for i in range(G.shape[0]):
        kind = G[i, 0]
        if kind == _PLANE:
            n0, n1, n2 = G[i, 4], G[i, 5], G[i, 6]
            d[i] = (p0 - G[i, 1]) * n0 + (p1 - G[i, 2]) * n1 + (p2 - G[i, 3]) * n2
            nrm[i, 0], nrm[i, 1], nrm[i, 2] = n0, n1, n2
        elif kind == _SPHERE:
            r0, r1, r2 = p0 - G[i, 1], p1 - G[i, 2], p2 - G[i, 3]
            nr = math.sqrt(r0 * r0 + r1 * r1 + r2 * r2)
            d[i] = nr - G[i, 4]
            if nr > 0:
                nrm[i, 0], nrm[i, 1], nrm[i, 2] = r0 / nr, r1 / nr, r2 / nr
            else:  # at the centre: push up
                nrm[i, 0], nrm[i, 1], nrm[i, 2] = 0.0, 0.0, 1.0
        else:  # a keep-out box: outside, the distance to the box; inside, to its nearest face
            no2 = 0.0
            i_lo, i_hi, m_lo, m_hi = 0, 0, math.inf, math.inf
            for k in range(3):
                lo, hi, x = G[i, 1 + k], G[i, 4 + k], p[k]
                below, above = x - lo, hi - x
                o = max(max(-below, -above), 0.0)
                no2 += o * o
                if below < m_lo or k == 0:
                    i_lo, m_lo = k, below
                if above < m_hi or k == 0:
                    i_hi, m_hi = k, above
            no = math.sqrt(no2)
            if no > 0:
                d[i] = no
                for k in range(3):
                    lo, hi, x = G[i, 1 + k], G[i, 4 + k], p[k]
                    o = max(max(lo - x, x - hi), 0.0)
                    c = x - (lo + hi) / 2
                    sg = 1.0 if c > 0 else (-1.0 if c < 0 else 0.0)
                    nrm[i, k] = sg * o / no
            else:
                nrm[i, 0], nrm[i, 1], nrm[i, 2] = 0.0, 0.0, 0.0
                if m_lo <= m_hi:
                    d[i] = -m_lo
                    nrm[i, i_lo] = -1.0
                else:
                    d[i] = -m_hi
                    nrm[i, i_hi] = 1.0


def _tip_force_kernel(d: np.ndarray, nrm: np.ndarray, v: np.ndarray, margin: np.ndarray, k: np.ndarray,
                      b: np.ndarray, F: np.ndarray) -> int:  # pragma: no mutate block
    """Workspace.tip_wrench's force into F (3): Σ over the pieces inside their margin of
    max(k (m − d) − b min(n·v, 0), 0) n; returns the index of the smallest d (the first NaN, as np.argmin)."""
    F[0], F[1], F[2] = 0.0, 0.0, 0.0
    best, i_min = math.inf, 0
    for i in range(d.shape[0]):
        di = d[i]
        if math.isnan(di):
            if not math.isnan(best):
                best, i_min = di, i
        elif di < best or i == 0:
            best, i_min = di, i
        if di < margin[i]:
            n0, n1, n2 = nrm[i, 0], nrm[i, 1], nrm[i, 2]
            nv = n0 * v[0] + n1 * v[1] + n2 * v[2]
            mag = k[i] * (margin[i] - di) - b[i] * (nv if nv < 0.0 or math.isnan(nv) else 0.0)
            if not mag <= 0.0:  # a NaN magnitude is carried into F, as numpy's maximum(mag, 0) @ n carries it
                F[0] += mag * n0
                F[1] += mag * n1
                F[2] += mag * n2
    return i_min


try:  # compiled at import (cached on disk), never in the loop thread; without numba the numpy forms
    import numba
    from numba import types as _t

    _V3, _M3 = _t.Array(_t.float64, 1, "A"), _t.Array(_t.float64, 2, "A")
    _distances: Any = numba.njit(_t.none(_V3, _M3, _V3, _M3), cache=True, boundscheck=True)(_distances_kernel)
    _tip_force: Any = numba.njit(_t.int64(_V3, _M3, _V3, _V3, _V3, _V3, _V3), cache=True,
                                 boundscheck=True)(_tip_force_kernel)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    _distances = _tip_force = None


@dataclass
class Zone:
    """One named volume with its margin (m), stiffness k (N/m) and damping b (N·s/m)."""

    name: str
    volume: Volume
    margin: float = 0.05
    stiffness: float = 2000.0
    damping: float = 90.0

    def __post_init__(self) -> None:
        for attr in ("margin", "stiffness", "damping"):
            v = float(getattr(self, attr))
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"volume {self.name!r}: {attr} must be finite and >= 0")

    def parts(self) -> list[Plane | Sphere | KeepOutBox]:
        """The pieces that each carry one load (a workspace box: its six faces)."""
        return list(self.volume.faces) if isinstance(self.volume, WorkspaceBox) else [self.volume]  # type: ignore[list-item]

    def distance(self, p: np.ndarray) -> tuple[float, np.ndarray]:
        return self.volume.distance(p)


@dataclass
class Workspace:
    """The zones acting on the tool centre point and on the origins of ``links`` (frame names)."""

    robot: RobotModel
    zones: list[Zone] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    clearance: Clearance | None = None  # the links' capsules against the zones (and each other)

    def __post_init__(self) -> None:
        names = [z.name for z in self.zones]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"volume names must be unique, repeated: {', '.join(dup)}")
        # one (part, zone) pair per load: the tip's loads are evaluated here, the links' by LinkLoads
        self._pairs = [(part, z) for z in self.zones for part in z.parts()]
        self._parts = Parts([part for part, _ in self._pairs])
        self._margin = np.array([z.margin for _, z in self._pairs], dtype=float)
        self._k = np.array([z.stiffness for _, z in self._pairs], dtype=float)
        self._b = np.array([z.damping for _, z in self._pairs], dtype=float)
        loads = [LinkLoad(link, part, z.margin, z.stiffness, z.damping)  # type: ignore[arg-type]
                 for link in self.links for part, z in self._pairs]
        self.link_loads = LinkLoads(self.robot, loads, "physical") if loads else None
        self.tip_force = np.zeros(3)
        self.distance = math.nan  # min over zones of the tip's distance to a boundary (m)
        self.nearest: str | None = None
        cl = self.clearance
        if cl is not None and cl.empty:
            self.clearance = cl = None
        if cl is not None:  # per pair: stiffness and damping of its volume (self pairs: SELF_*)
            gains = {z.name: (z.stiffness, z.damping) for z in self.zones}
            kb = [gains.get(v, (SELF_STIFFNESS, SELF_DAMPING)) if i < cl.n_volume_pairs
                  else (SELF_STIFFNESS, SELF_DAMPING) for i, (_, v) in enumerate(cl.names)]
            self._ck = np.array([k for k, _ in kb], dtype=float)
            self._cb = np.array([b for _, b in kb], dtype=float)
            self._cmax = float(cl.margins.max())
        self.link_force = np.zeros(0 if cl is None else len(cl.d))
        self._loaded = False  # the repulsive force on each pair at the last evaluation (N)

    @property
    def empty(self) -> bool:
        return not self.zones and self.clearance is None

    def tip_wrench(self, p: np.ndarray, v: np.ndarray) -> np.ndarray:
        """[F; 0] (N, base frame) on the tip at p moving at v (m/s); updates ``distance``."""
        if not self._pairs:
            self.tip_force, self.distance, self.nearest = np.zeros(3), math.nan, None
            return np.zeros(6)
        d, n = self._parts.distances(p)
        if _tip_force is not None and type(v) is np.ndarray and v.dtype == _F64 and v.shape == (3,):
            F = np.empty(3)
            i = _tip_force(d, n, v, self._margin, self._k, self._b, F)
            self.tip_force, self.distance, self.nearest = F, float(d[i]), self._pairs[i][1].name
            return np.concatenate((F, _ZERO3))
        inside = d < self._margin
        F = np.zeros(3)
        if inside.any():
            nv = n[inside] @ v
            mag = self._k[inside] * (self._margin[inside] - d[inside]) - self._b[inside] * np.minimum(nv, 0.0)
            F = np.maximum(mag, 0.0) @ n[inside]
        i = int(np.argmin(d))
        self.tip_force, self.distance, self.nearest = F, float(d[i]), self._pairs[i][1].name
        return np.concatenate((F, np.zeros(3)))

    def joint_torque(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray | None:
        """Σ J_pᵀ F over the link loads (N·m), or None without links.

        The links' capsules (``clearance``): at each pair's witness point on the link a force
        F = [k (m − d) − b min(ḋ, 0)] n inside the margin m (ḋ = g q̇, g = nᵀ(J₁ − J₂) the pair's row),
        whose joint torque is F g ᵀ — for two links of the arm an equal and opposite force on the other."""
        tau = None if self.link_loads is None else self.link_loads.joint_forces(q, qd)
        cl = self.clearance
        if cl is None:
            return tau
        cl.compute(q)
        if cl.d[cl.nearest] >= self._cmax:  # no pair inside its margin (the common case: no load)
            if self._loaded:
                self.link_force[:] = 0.0
                self._loaded = False
            return tau
        inside = cl.d < cl.margins
        self.link_force[:] = 0.0
        self._loaded = True
        if inside.any():
            g = cl.rows[inside]
            mag = self._ck[inside] * (cl.margins[inside] - cl.d[inside]) - self._cb[inside] * np.minimum(g @ qd, 0.0)
            mag = np.maximum(mag, 0.0)
            self.link_force[inside] = mag
            t = mag @ g
            tau = t if tau is None else tau + t
        return tau

    def link_clearance(self) -> tuple[float, str | None, str | None]:
        """(distance, link, volume or link) of the nearest pair at the last evaluation (nan, None, None
        without link geometry)."""
        return (math.nan, None, None) if self.clearance is None else self.clearance.smallest()

    def violations(self, points: dict[str, np.ndarray]) -> list[str]:
        """Reasons why any of ``points`` (name → position) lies inside a zone's margin (or beyond)."""
        out = []
        for name, p in points.items():
            for z in self.zones:
                d, _ = z.distance(p)
                if d < z.margin:
                    where = "outside" if d < 0 else "within the margin of"
                    out.append(f"{name} at {np.round(p, 4).tolist()} is {where} {z.name!r} "
                               f"(distance {d * 1e3:.1f} mm, margin {z.margin * 1e3:.1f} mm)")
        return out

    def link_violations(self, q: np.ndarray) -> list[str]:
        """Reasons why a link's collision shape lies inside a volume's margin (or beyond) at q, or two links
        within the self-collision margin: such a workspace would move the arm by itself."""
        cl = self.clearance
        if cl is None:
            return []
        cl.compute(np.asarray(q, dtype=float))
        out = []
        for i in np.argsort(cl.d):
            if cl.d[i] >= cl.margins[i]:
                break
            link, other = cl.names[i]
            what = "inside" if cl.d[i] < 0 else "within the margin of"
            kind = "link" if i >= cl.n_volume_pairs else "volume"
            out.append(f"link {link} is {what} {kind} {other!r} (distance {cl.d[i] * 1e3:.1f} mm, margin "
                       f"{cl.margins[i] * 1e3:.1f} mm)")
        return out

    def points(self, q: np.ndarray) -> dict[str, np.ndarray]:
        """The tip and the link origins at q (base frame)."""
        out = {TIP: self.robot.pose(q)[:3, 3].copy()}
        if self.link_loads is not None:
            for link, (p, _) in zip(self.links, self.link_loads.points(q)[::max(1, len(self._pairs))], strict=False):
                out[link] = p.copy()
        return out


def _volume(i: int, it: dict[str, Any]) -> tuple[str, Volume]:
    kinds = [k for k in ("sphere", "box", "plane") if it.get(k) is not None]
    if len(kinds) != 1:
        raise ValueError(f"keep_out[{i}] needs exactly one of 'sphere', 'box' or 'plane'")
    k, spec = kinds[0], dict(it[kinds[0]])
    if k == "sphere":
        vol: Volume = Sphere(spec["center"], float(spec["radius"]))
        if float(spec["radius"]) <= 0:
            raise ValueError(f"keep_out[{i}]: sphere radius must be > 0")
    elif k == "box":
        vol = KeepOutBox(spec["min"], spec["max"])
    else:
        vol = Plane(spec["point"], spec["normal"])
    return str(it.get("name") or f"{k}{i}"), vol


def obstacles(zones: Sequence[Zone], box: bool = True) -> list[Obstacle]:
    """The zones' pieces as obstacles of :class:`fdcontrol.model.collision.Clearance` (a workspace box: its
    six faces, each a plane whose allowed side is the box's inside; left out with ``box`` false)."""
    out = []
    for z in zones:
        if isinstance(z.volume, WorkspaceBox) and not box:
            continue
        for part in z.parts():
            if isinstance(part, Plane):
                out.append(Obstacle(z.name, PLANE, part.point, part.normal, 0.0, z.margin))
            elif isinstance(part, Sphere):
                out.append(Obstacle(z.name, SPHERE, part.center, np.zeros(3), float(part.radius), z.margin))
            else:
                out.append(Obstacle(z.name, BOX, part.lo, part.hi, 0.0, z.margin))
    return out


def clearance_for(robot: RobotModel, zones: Sequence[Zone], collision_links: str = "keep_out",
                  self_collision: bool = False, self_margin: float = 0.04, hard_margin: float = 0.01
                  ) -> Clearance | None:
    """The links' distance computer for ``zones`` (``collision_links``: "keep_out" the keep-out volumes,
    "all" the workspace box too, "off" none) and self-collision, or None when there is nothing to compute:
    no collision geometry, or neither volumes for the links nor self-collision. ``hard_margin`` (m): the
    velocity damper's d_min (setting ``collision_distance``)."""
    if collision_links not in ("keep_out", "all", "off"):
        raise ValueError(f"collision_links must be 'keep_out', 'all' or 'off', got {collision_links!r}")
    geo = robot.geometry
    obs = [] if collision_links == "off" else obstacles(zones, box=collision_links == "all")
    if geo is None or not (obs or self_collision):
        return None
    cl = Clearance(robot, geo, obs, self_collision, self_margin, hard_margin)
    return None if cl.empty else cl


def workspace_from_config(robot: RobotModel, box: dict[str, Any] | None, keep_out: Sequence[dict[str, Any]],
                          links: Sequence[str] = (), collision_links: str = "off", self_collision: bool = False,
                          self_margin: float = 0.04, hard_margin: float = 0.01) -> Workspace:
    """Build from plain data (settings / API): ``box`` {min, max, margin, stiffness, damping} or None;
    ``keep_out`` items {name, sphere {center, radius} | box {min, max} | plane {point, normal}, margin,
    stiffness, damping}; ``links`` frame names whose origins obey the volumes too; ``collision_links``:
    which volumes every link's collision capsules obey ("keep_out", "all": the box too, "off"; the robot's
    geometry), ``self_collision``: keep the links apart, ``self_margin`` (m) the margin between two links,
    ``hard_margin`` (m) the velocity damper's d_min (half of it crossed while moving in: the loop holds)."""
    zones = []
    gains = ("margin", "stiffness", "damping")
    if box is not None:
        try:
            zones.append(Zone("workspace", WorkspaceBox(box["min"], box["max"]),
                              **{k: float(box[k]) for k in gains if box.get(k) is not None}))
        except ValueError as exc:
            raise ValueError(f"workspace_box: {exc}") from exc
    for i, it in enumerate(keep_out):
        try:
            name, vol = _volume(i, it)
            zones.append(Zone(name, vol, **{k: float(it[k]) for k in gains if it.get(k) is not None}))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"keep_out[{i}]: {exc}") from exc
    return Workspace(robot, zones, list(links), clearance_for(robot, zones, collision_links, self_collision,
                                                              self_margin, hard_margin))


#: the start box of a simulated arm: half-width (x, y), room below and above its start tip (m)
START_BOX = (0.25, 0.15, 0.2)
START_MARGIN = 0.05  # m: the box's default margin


def start_box(robot: RobotModel, q0: np.ndarray, size: tuple[float, float, float] = START_BOX,
              shrink: float = 0.8, steps: int = 6) -> dict[str, Any] | None:
    """A workspace box around the tip at ``q0`` that keeps the tool within comfortable reach.

    The box spans ± ``size[0]`` in x and y around the start tip, ``size[1]`` below it and ``size[2]``
    above (base frame). It is shrunk by ``shrink`` per step (at most ``steps``) until the tip reaches
    each of its 8 corners from ``q0`` (damped least squares on the position, within the joint limits)
    with the position Jacobian's smallest singular value at least half of its value at ``q0``: every
    point of the box is reached without stretching the arm towards a singularity. The margin is the
    default 5 cm, inside which the box's repulsive load acts; the start tip lies outside it.
    None when no such box is found (an arm that cannot move its tip in all three directions, or a
    start pose at the edge of its reach).
    """
    q0 = robot.check_q(q0)
    c = robot.pose(q0)[:3, 3]
    floor = 0.5 * _position_sigma(robot, q0)
    half, below, above = size
    scale = 1.0
    for _ in range(steps):
        if scale * min(size) <= 2 * START_MARGIN:  # the start tip would be in (or near) the margin
            break
        lo = c + scale * np.array([-half, -half, -below])
        hi = c + scale * np.array([half, half, above])
        corners = np.stack(np.meshgrid(*zip(lo, hi, strict=True), indexing="ij"), -1).reshape(-1, 3)
        if floor > 0 and all(_reaches(robot, q0, p, floor) for p in corners):
            return {"min": [float(v) for v in lo], "max": [float(v) for v in hi], "margin": START_MARGIN,
                    "stiffness": 2000.0, "damping": 90.0}
        scale *= shrink
    return None


def _position_sigma(robot: RobotModel, q: np.ndarray) -> float:
    return float(np.linalg.svd(robot.jacobian(q)[:3], compute_uv=False).min())


def _reaches(robot: RobotModel, q0: np.ndarray, p: np.ndarray, floor: float, iterations: int = 200) -> bool:
    """Damped least squares from ``q0`` to the tip position ``p``: reached within 1 mm at a
    position Jacobian whose smallest singular value is at least ``floor``."""
    q, lo, hi = q0.copy(), robot.limits.lower, robot.limits.upper
    for _ in range(iterations):
        e = p - robot.pose(q)[:3, 3]
        if np.linalg.norm(e) < 1e-3:
            return _position_sigma(robot, q) >= floor
        J = robot.jacobian(q)[:3]
        q = np.clip(q + J.T @ np.linalg.solve(J @ J.T + 1e-4 * np.eye(3), e), lo, hi)
    return False
