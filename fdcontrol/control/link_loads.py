"""Link loads: virtual forces on chosen links of the virtual model (seed 004 §5.1: the
articulated-body algorithm "allows an intuitive integration of external loads to each link of
the robot separately, which might be used to implement collision avoidance").

Each load keeps the origin p of a named frame (e.g. the Panda's elbow, ``panda_link4``) out
of the margin m of an obstacle — a plane (allowed side: (p − p₀)·n > 0) or a sphere — with
a repulsive spring–damper acting only inside the margin:

    d = distance of p to the obstacle surface (m),   n = its outward unit normal,
    F = [k (m − d) − b min(n·ṗ, 0)] n   if d < m,   else 0     (k in N/m, b in N·s/m).

Applied to the virtual model as an external force at p (ABA's fext, pinocchio
``aba(model, data, q, v, τ, fext)``), whose joint-space equivalent is τ_F = J_pᵀ F
(J_p the 3×N linear Jacobian of the point; :meth:`VirtualModel.acceleration_fext` computes
the ABA form and the tests check the two agree). Two modes:

* ``projected`` — τ = N̄ᵀ J_pᵀ F: only the null-space part acts, the tip does not feel it
  (posture only; a non-redundant arm has no null space, so nothing happens);
* ``physical`` — τ = J_pᵀ F: the whole virtual arm is pushed, the tip yields too (for
  safety: a link that must not go further takes the tip along).

The virtual links weigh m_e/γ, so in the null space a force of 1 N on a link moves it about
γ times faster than 1 N on the 1 kg tip; the safety limits (joint velocity, acceleration,
Cartesian speed) bound that motion. Keep k·m small (a few N) — see docs/redundancy.md. Under the
γ schedule the loop scales the loads' null-space part by γ₀/γ, so they act as at the regularizing
γ₀ whatever γ is now (:func:`fdcontrol.control.posture.at_gamma0`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pinocchio as pin

from fdcontrol.model.robot import ModelError, RobotModel
from fdcontrol.params import Param, declare

LinkLoadMode = Literal["projected", "physical"]

#: the link loads' parameters, declared once (fdcontrol.params); the list's items are validated by
#: :func:`link_loads_from_config` (and by the service's schema of one item)
PARAMS = declare(
    "link loads",
    Param("link_loads", "spec", [], "repulsive spring–dampers keeping link origins outside planes or spheres",
          policy="holding", max_items=32),
    Param("link_load_mode", "choice", "projected", "projected: null space only (tip unaffected); physical: the "
          "tip yields too", policy="holding", choices=("projected", "physical")),
)


def _unit(v: np.ndarray | list[float], name: str) -> np.ndarray:
    a = np.asarray(v, dtype=float)
    n = float(np.linalg.norm(a)) if a.shape == (3,) and np.all(np.isfinite(a)) else 0.0
    if n == 0.0:
        raise ValueError(f"{name} must be a finite non-zero 3-vector")
    return a / n


def _point(v: np.ndarray | list[float], name: str) -> np.ndarray:
    a = np.asarray(v, dtype=float)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be a finite 3-vector (m, base frame)")
    return a


@dataclass
class Plane:
    """The plane through ``point`` with unit ``normal`` pointing to the allowed side (base frame)."""

    point: np.ndarray
    normal: np.ndarray

    def __post_init__(self) -> None:
        self.point, self.normal = _point(self.point, "plane point"), _unit(self.normal, "plane normal")

    def distance(self, p: np.ndarray) -> tuple[float, np.ndarray]:
        """Signed distance (m, negative on the forbidden side) and the outward normal."""
        return float((p - self.point) @ self.normal), self.normal


@dataclass
class Sphere:
    """A ball of ``radius`` (m) around ``center`` (base frame); the outside is allowed."""

    center: np.ndarray
    radius: float

    def __post_init__(self) -> None:
        self.center = _point(self.center, "sphere center")
        if not (np.isfinite(self.radius) and self.radius >= 0):
            raise ValueError("sphere radius must be finite and >= 0")

    def distance(self, p: np.ndarray) -> tuple[float, np.ndarray]:
        r = p - self.center
        n = float(np.linalg.norm(r))
        u = r / n if n > 0 else np.array([0.0, 0.0, 1.0])  # at the centre: push up
        return n - self.radius, u


@dataclass
class LinkLoad:
    """A repulsive spring–damper keeping frame ``link``'s origin ``margin`` m outside ``obstacle``."""

    link: str
    obstacle: Plane | Sphere
    margin: float = 0.05  # m
    stiffness: float = 50.0  # N/m
    damping: float = 0.0  # N·s/m, against approach only

    def __post_init__(self) -> None:
        for name in ("margin", "stiffness", "damping"):
            v = float(getattr(self, name))
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"link load {name} must be finite and >= 0")

    def force(self, p: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, float]:
        """F (N, base frame) at p moving at ṗ = v, and the distance d (m)."""
        d, n = self.obstacle.distance(p)
        if d >= self.margin:
            return np.zeros(3), d
        mag = self.stiffness * (self.margin - d) - self.damping * min(float(n @ v), 0.0)
        return max(mag, 0.0) * n, d


@dataclass
class LinkLoads:
    """The set of link loads of one arm and how they act (``projected`` or ``physical``)."""

    robot: RobotModel
    loads: list[LinkLoad] = field(default_factory=list)
    mode: LinkLoadMode = "projected"

    def __post_init__(self) -> None:
        if self.mode not in ("projected", "physical"):
            raise ValueError(f"link load mode must be 'projected' or 'physical', got {self.mode!r}")
        model = self.robot.model
        for ld in self.loads:
            if not model.existFrame(ld.link):
                names = ", ".join(f.name for f in model.frames if f.name != "universe")
                raise ModelError(f"unknown link frame {ld.link!r}; available frames: {names}")
        self._ids = [model.getFrameId(ld.link) for ld in self.loads]
        self._data = model.createData()  # its own: the robot's Data serves the loop's kinematics
        self.distances = np.full(len(self.loads), np.inf)
        self.forces = np.zeros((len(self.loads), 3))

    def points(self, q: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """(p, J_p) per load: frame origin in the base frame and its 3×N linear Jacobian."""
        r, model, data = self.robot, self.robot.model, self._data
        pin.computeJointJacobians(model, data, q)
        out = []
        for fid in self._ids:
            oMf = pin.updateFramePlacement(model, data, fid)
            p = r._oMb.actInv(oMf).translation
            Jw = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)
            out.append((p, r._R_base.T @ Jw[:3]))
        return out

    def joint_forces(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """τ_F = Σ J_pᵀ F (N·m): the loads as joint torques, before any projection."""
        tau = np.zeros(self.robot.dof)
        for i, (ld, (p, Jp)) in enumerate(zip(self.loads, self.points(q), strict=True)):
            F, d = ld.force(p, Jp @ qd)
            self.forces[i], self.distances[i] = F, d
            tau += Jp.T @ F
        return tau

    def torque(self, q: np.ndarray, qd: np.ndarray, Nt: np.ndarray | None = None) -> np.ndarray:
        """The joint load on the virtual model: N̄ᵀ τ_F (projected, needs N̄ᵀ) or τ_F (physical)."""
        tau = self.joint_forces(q, qd)
        if self.mode == "projected":
            if Nt is None:
                raise ValueError("projected link loads need the null-space projector N̄ᵀ")
            return Nt @ tau
        return tau

    def clearance(self) -> float:
        """min over loads of (d − margin) (m) at the last evaluation: < 0 means inside a margin;
        nan before the first evaluation."""
        c = float(np.min(self.distances - np.array([ld.margin for ld in self.loads])))
        return c if np.isfinite(c) else float("nan")

    def spatial_forces(self, q: np.ndarray, qd: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(frame id, p, F) per active load, base frame — for ABA's fext (physical mode)."""
        out = []
        for fid, ld, (p, Jp) in zip(self._ids, self.loads, self.points(q), strict=True):
            F, _ = ld.force(p, Jp @ qd)
            if np.any(F):
                out.append((fid, p, F))
        return out


def link_loads_from_config(robot: RobotModel, items: list[dict], mode: LinkLoadMode = "projected") -> LinkLoads:
    """Build from plain data (settings / API): each item {"link", "plane": {"point", "normal"} |
    "sphere": {"center", "radius"}, "margin", "stiffness", "damping"}."""
    loads = []
    for i, it in enumerate(items):
        it = dict(it)
        try:
            if "plane" in it:
                obstacle: Plane | Sphere = Plane(**it.pop("plane"))
            elif "sphere" in it:
                obstacle = Sphere(**it.pop("sphere"))
            else:
                raise ValueError("needs a 'plane' or a 'sphere'")
            loads.append(LinkLoad(obstacle=obstacle, **it))
        except TypeError as exc:
            raise ValueError(f"link_loads[{i}]: {exc}") from exc
        except ValueError as exc:
            raise ValueError(f"link_loads[{i}]: {exc}") from exc
    return LinkLoads(robot, loads, mode)
