"""RobotModel: one kinematic chain base → tip of a URDF, on top of pinocchio.

Conventions (all SI): a pose is the 4×4 homogeneous transform of the tip frame in the base
frame; a Jacobian is 6×N with rows [v; ω] — the linear velocity of the tip frame's origin
and the angular velocity, both expressed in the base frame (pinocchio's LOCAL_WORLD_ALIGNED
when the base is the world).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pinocchio as pin

from fdcontrol.model.spatial import finite
from fdcontrol.params import Param, declare

if TYPE_CHECKING:
    from fdcontrol.model.collision import LinkGeometry

_log = logging.getLogger("fdcontrol")

_PACKAGE = Path(__file__).resolve().parent.parent  # fdcontrol/
URDF_DIR = _PACKAGE / "urdf"  # installed wheel: fdcontrol/urdf
if not URDF_DIR.is_dir():  # source checkout / editable install: the repository's urdf/
    URDF_DIR = _PACKAGE.parent / "urdf"

#: shipped robots: name → (file, base frame, tip frame)
SHIPPED: dict[str, tuple[str, str, str]] = {
    "ur10": ("ur10.urdf", "base_link", "tool0"),
    "panda": ("panda.urdf", "panda_link0", "panda_link8"),
    "fr3": ("fr3.urdf", "fr3_link0", "fr3_link8"),
    "planar2": ("planar2.urdf", "base", "tip"),
}

#: the robot model's parameters, declared once (fdcontrol.params)
PARAMS = declare(
    "robot",
    Param("robot", "str", "ur10", f"a shipped robot ({', '.join(SHIPPED)}), a .urdf path or an MJCF (.xml) path",
          policy="stopped"),
    Param("base", "str", None, "base frame of the chain (default: the shipped robot's)", policy="startup",
          nullable=True),
    Param("tip", "str", None, "tip frame of the chain (default: the shipped robot's)", policy="startup",
          nullable=True),
)


#: a well-conditioned start pose per shipped robot (rad), used by the simulators and examples
HOME: dict[str, list[float]] = {
    "ur10": [0.3, -1.2, 1.6, -1.9, -1.4, 0.2],
    "panda": [0.0, -0.4, 0.0, -2.0, 0.0, 1.6, 0.8],
    "fr3": [0.0, -0.4, 0.0, -2.0, 0.0, 1.6, 0.8],
    "planar2": [0.5, 1.0],
}


class ModelError(ValueError):
    """A robot description, frame name or joint vector that cannot be used."""


def unknown_robot(name: str) -> str:
    """The one message for a robot name that is neither shipped nor a description file."""
    return (f"unknown robot {name!r}: the shipped robots are {', '.join(SHIPPED)}; or give a robot description "
            "file: a .urdf path (with base and tip frame names) or an MJCF .xml path")


@dataclass(frozen=True)
class Limits:
    """Joint limits of the chain, arrays of length N (rad, rad/s)."""

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray


def _frame_id(model: pin.Model, name: str) -> int:
    if not model.existFrame(name):
        names = ", ".join(f.name for f in model.frames if f.name != "universe")
        raise ModelError(f"unknown frame {name!r}; available frames: {names}")
    return model.getFrameId(name)


def _supports(model: pin.Model, frame: int) -> list[int]:
    """Joint ids from the root to the parent joint of `frame` (universe 0 excluded)."""
    return [j for j in model.supports[model.frames[frame].parentJoint] if j != 0]


def _continuous_as_revolute(path: Path) -> tuple[str, list[str]]:
    """The URDF's text with every ``continuous`` joint declared ``revolute``, and those joints' names.

    pinocchio models a continuous joint as an unbounded revolute one with q = (cos θ, sin θ)
    (nq = 2, nv = 1); fdcontrol keeps q an angle everywhere (q̇ = dq/dt, q + dt q̇, the limits), so
    the joint is loaded as a revolute joint whose position limits are then set to ±∞: the same
    kinematics and dynamics, no position limit. Its ``<limit>`` (velocity, effort) is kept."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise ModelError(f"cannot parse URDF {path}: {exc}") from exc
    names: list[str] = []
    for j in root.iter("joint"):
        if j.get("type") == "continuous":
            j.set("type", "revolute")
            names.append(str(j.get("name")))
            lim = j.find("limit")
            if lim is None:
                lim = ET.SubElement(j, "limit", {"effort": "0", "velocity": "0"})
            lim.set("lower", "0")
            lim.set("upper", "0")  # replaced by ±∞ once parsed
    return ET.tostring(root, encoding="unicode"), names


def _unbound(model: pin.Model, names: list[str]) -> None:
    """Position limits ±∞ for the named joints (those of them in `model`)."""
    lo, hi = model.lowerPositionLimit.copy(), model.upperPositionLimit.copy()
    for n in names:
        if model.existJointName(n):
            i = model.joints[model.getJointId(n)].idx_q
            lo[i], hi[i] = -np.inf, np.inf
    model.lowerPositionLimit, model.upperPositionLimit = lo, hi


_SUPPORTED = "revolute, continuous and prismatic joints"


def _check_joints(model: pin.Model, base: str, tip: str) -> None:
    """One line naming the first chain joint fdcontrol cannot drive, and what to do."""
    for j in range(1, model.njoints):
        jm = model.joints[j]
        kind = jm.shortname()
        ok = jm.nq == jm.nv == 1 and kind.startswith(("JointModelR", "JointModelP")) and "UB" not in kind
        if ok:
            continue
        what = {"JointModelFreeFlyer": "a floating base (free joint)", "JointModelPlanar": "a planar joint",
                "JointModelSpherical": "a spherical (ball) joint",
                "JointModelSphericalZYX": "a spherical (ball) joint"}.get(kind, f"a {kind[len('JointModel'):]} joint")
        raise ModelError(f"joint {model.names[j]!r} on the chain {base!r} → {tip!r} is {what} "
                         f"(nq = {jm.nq}, nv = {jm.nv}); fdcontrol drives {_SUPPORTED}: fix the arm to its base "
                         "or pick base and tip frames so that the chain between them has only such joints")


def _reduce(full: pin.Model, base: str, tip: str) -> pin.Model:
    """`full` with every joint off the chain base → tip locked at its neutral value."""
    base_id, tip_id = _frame_id(full, base), _frame_id(full, tip)
    base_chain, tip_chain = _supports(full, base_id), _supports(full, tip_id)
    if base_chain != tip_chain[: len(base_chain)]:
        raise ModelError(f"frame {base!r} is not an ancestor of {tip!r} (no path from the base down to the tip): "
                         "pick base and tip frames on one chain, the base nearer the root")
    chain = tip_chain[len(base_chain):]
    if not chain:
        raise ModelError(f"no moving joint between {base!r} and {tip!r}: pick a tip frame on a moving link "
                         "below the base")
    lock = [j for j in range(1, full.njoints) if j not in chain]
    return pin.buildReducedModel(full, lock, pin.neutral(full)) if lock else full


def _mujoco_world(full: pin.Model, path: Path) -> pin.SE3:
    """MuJoCo's world frame in the model's coordinates: pinocchio's MJCF reader puts the first
    body at its origin, dropping that body's placement in the worldbody (read here from MuJoCo)."""
    try:
        import mujoco
    except ImportError as exc:  # pragma: no cover - mujoco is a dependency of the default robot
        raise ModelError("base='world' of an MJCF needs the mujoco package") from exc
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    root = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, 1) if m.nbody > 1 else None
    if not root or not full.existFrame(root):
        return pin.SE3.Identity()
    data = full.createData()
    pin.framesForwardKinematics(full, data, pin.neutral(full))
    in_mujoco = pin.SE3(d.xmat[1].reshape(3, 3).copy(), d.xpos[1].copy())
    return data.oMf[full.getFrameId(root)] * in_mujoco.inverse()


#: rad/s: the joint velocity limit of an MJCF arm loaded by name (MJCF declares none); the loop's
#: limit is ``velocity_scale`` (0.5) of it
MJCF_VELOCITY_LIMIT = 1.0


def _mjcf_unlimited(path: Path) -> list[str]:
    """The hinge and slide joints MuJoCo compiles without a range (``limited="false"``, or no range)."""
    try:
        import mujoco
    except ImportError:  # pragma: no cover - mujoco is a dependency of the default robot
        return []
    try:
        m = mujoco.MjModel.from_xml_path(str(path))
    except Exception:  # pinocchio's reader reports the file's errors
        return []
    kinds = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(m.njnt)
            if int(m.jnt_type[j]) in kinds and not m.jnt_limited[j]]


def is_mjcf(robot: str | Path) -> bool:
    """A path to an MJCF (MuJoCo XML) file: ``.xml`` or ``.mjcf``."""
    return str(robot).lower().endswith((".xml", ".mjcf"))


def _mjcf_has_velocity_limits(path: str | Path) -> bool:
    """Whether pinocchio reads finite joint velocity limits from the MJCF (it reads none today)."""
    try:
        v = pin.buildModelFromMJCF(str(path)).velocityLimit
    except Exception:  # the real load reports the error
        return True
    return bool(len(v) and np.all(np.isfinite(v)) and np.all(v > 0) and np.all(v < 1e10))


def mjcf_tip(path: str | Path) -> str:
    """The tip body of an MJCF arm: its one body without children below a moving joint (ModelError
    naming the candidates when there are several)."""
    try:
        import mujoco
    except ImportError as exc:  # pragma: no cover - mujoco is a dependency
        raise ModelError("an MJCF robot needs the mujoco package") from exc
    if not Path(path).is_file():
        raise ModelError(f"MJCF file not found: {path}")
    try:
        m = mujoco.MjModel.from_xml_path(str(path))
    except Exception as exc:
        raise ModelError(f"cannot parse MJCF {path}: {exc}") from exc
    parents = set(m.body_parentid[1:].tolist())

    def below_a_joint(b: int) -> bool:
        while b > 0:
            if m.body_dofnum[b] > 0:
                return True
            b = int(m.body_parentid[b])
        return False

    moving = [b for b in range(1, m.nbody) if b not in parents and below_a_joint(b)]
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) for b in moving]
    if len(names) != 1:
        raise ModelError(f"{path}: the tip body is ambiguous ({', '.join(map(str, names)) or 'no moving body'}); "
                         "pass --tip (the tool flange's body)")
    return str(names[0])


class RobotModel:
    """The chain base → tip of a URDF with every joint off that chain locked at zero."""

    def __init__(self, model: pin.Model, base: str, tip: str, name: str = "robot") -> None:
        self.name = name
        self.source: Path | None = None  # the description file, when loaded from one
        self.continuous: list[str] = []  # joints declared continuous: revolute without position limits
        self.geometry: LinkGeometry | None = None  # the links' collision capsules (fdcontrol.model.collision)
        self.model = model
        self.data = model.createData()
        self.base, self.tip = base, tip
        self.base_id = _frame_id(model, base)
        self.tip_id = _frame_id(model, tip)
        _check_joints(model, base, tip)
        pin.framesForwardKinematics(model, self.data, pin.neutral(model))
        # the base is not on the chain, so its world placement is constant
        self._oMb = self.data.oMf[self.base_id].copy()
        self._R_base = self._oMb.rotation.copy()
        self._base_offset = bool(np.any(self._oMb.translation != 0))
        self._world_is_base = bool(np.allclose(self._R_base, np.eye(3), atol=0.0))
        self._zero_v = np.zeros(model.nv)

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_urdf(cls, path: str | Path, base: str, tip: str, name: str | None = None) -> RobotModel:
        """Load `path` and keep the joints between frames `base` and `tip` (others locked at 0)."""
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"URDF file not found: {path}")
        text, continuous = _continuous_as_revolute(path)
        try:
            full = pin.buildModelFromXML(text)
        except Exception as exc:  # pinocchio raises RuntimeError/ValueError on bad XML
            raise ModelError(f"cannot parse URDF {path}: {exc}") from exc
        _unbound(full, continuous)
        reduced = _reduce(full, base, tip)
        _unbound(reduced, continuous)
        robot = cls(reduced, base, tip, name or path.stem)
        robot.continuous = [n for n in continuous if reduced.existJointName(n)]
        robot.source = path
        from fdcontrol.model.collision import load_geometry

        robot.geometry = load_geometry(robot.model, path)
        if robot.geometry is None:
            _log.info("%s has no <collision> geometry: keep-out volumes and the workspace act on the tool "
                      "centre point (and workspace_links origins) only", path.name)
        return robot

    @classmethod
    def from_mjcf(cls, path: str | Path, base: str, tip: str, name: str | None = None,
                  velocity_limits: float | list[float] | np.ndarray | None = None) -> RobotModel:
        """Load an MJCF file (pinocchio's reader) and keep the chain base → tip; ``base`` may be
        ``"world"``, MuJoCo's name of the worldbody.

        MJCF has no joint velocity limits: ``velocity_limits`` (rad/s, one value or one per
        chain joint) supplies them; without it a model lacking finite limits is a ModelError.
        """
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"MJCF file not found: {path}")
        try:
            full = pin.buildModelFromMJCF(str(path))
        except Exception as exc:
            raise ModelError(f"cannot parse MJCF {path}: {exc}") from exc
        if base == "world" and not full.existFrame("world"):  # MuJoCo's worldbody
            full.addFrame(pin.Frame("world", 0, 0, _mujoco_world(full, path), pin.FrameType.FIXED_JOINT))
        unlimited = _mjcf_unlimited(path)  # MuJoCo's limited="false" (pinocchio reads the range regardless)
        _unbound(full, unlimited)
        reduced = _reduce(full, base, tip)
        _unbound(reduced, unlimited)
        robot = cls(reduced, base, tip, name or path.stem)
        robot.continuous = [n for n in unlimited if reduced.existJointName(n)]
        robot.source = path
        robot._set_velocity_limits(velocity_limits, path)
        return robot

    def _set_velocity_limits(self, v: float | list[float] | np.ndarray | None, source: Path) -> None:
        if v is not None:
            try:
                vel = np.broadcast_to(np.asarray(v, dtype=float), (self.dof,)).copy()
            except ValueError as exc:
                raise ModelError(f"velocity_limits must be one value or {self.dof} values (rad/s)") from exc
            if not (np.all(np.isfinite(vel)) and np.all(vel > 0)):
                raise ModelError("velocity_limits must be finite and > 0 (rad/s)")
            self.model.velocityLimit = vel
        vel = self.model.velocityLimit
        if not (np.all(np.isfinite(vel)) and np.all(vel > 0) and np.all(vel < 1e10)):
            raise ModelError(f"{source} has no finite joint velocity limits (MJCF has none): "
                             "pass velocity_limits=[rad/s per joint]")

    @classmethod
    def load(cls, name: str) -> RobotModel:
        """A shipped robot: one of :data:`SHIPPED` (``ur10``, ``panda``, ``planar2``)."""
        if name not in SHIPPED:
            raise ModelError(unknown_robot(name))
        file, base, tip = SHIPPED[name]
        return cls.from_urdf(URDF_DIR / file, base, tip, name)

    @classmethod
    def resolve(cls, robot: str, base: str | None = None, tip: str | None = None) -> RobotModel:
        """A shipped robot by name, or a URDF path (then `base` and `tip` are required)."""
        if robot in SHIPPED and base is None and tip is None:
            return cls.load(robot)
        if robot in SHIPPED:
            file, b, t = SHIPPED[robot]
            return cls.from_urdf(URDF_DIR / file, base or b, tip or t, robot)
        if is_mjcf(robot):
            return cls.from_mjcf(robot, base or "world", tip or mjcf_tip(robot), velocity_limits=(
                None if _mjcf_has_velocity_limits(robot) else MJCF_VELOCITY_LIMIT))
        if not robot.endswith(".urdf") and not Path(robot).exists():
            raise ModelError(unknown_robot(robot))
        if base is None or tip is None:
            raise ModelError("a URDF path needs --base and --tip frame names")
        return cls.from_urdf(robot, base, tip)

    # ---------------------------------------------------------------- properties
    @property
    def dof(self) -> int:
        return self.model.nv

    @property
    def joint_names(self) -> list[str]:
        return [self.model.names[j] for j in range(1, self.model.njoints)]

    @property
    def limits(self) -> Limits:
        return Limits(
            self.model.lowerPositionLimit.copy(),
            self.model.upperPositionLimit.copy(),
            self.model.velocityLimit.copy(),
        )

    def check_q(self, q: np.ndarray | list[float], name: str = "q") -> np.ndarray:
        """Return q as a float64 vector of length dof, or raise ModelError naming the problem."""
        arr = np.asarray(q, dtype=float)
        if arr.shape != (self.dof,):
            raise ModelError(f"{name} must have {self.dof} entries for {self.name} "
                             f"(joints {', '.join(self.joint_names)}), got shape {arr.shape}")
        if not finite(arr):
            raise ModelError(f"{name} contains NaN or Inf: {arr.tolist()}")
        return arr

    # ---------------------------------------------------------------- kinematics
    def pose(self, q: np.ndarray) -> np.ndarray:
        """Forward kinematics x = g(q) (seed eq. 2): 4×4 transform of tip in base."""
        q = self.check_q(q)
        pin.forwardKinematics(self.model, self.data, q)
        return self._tip_in_base()

    def _tip_in_base(self) -> np.ndarray:
        oMt = pin.updateFramePlacement(self.model, self.data, self.tip_id)
        if self._world_is_base and not self._base_offset:
            return oMt.homogeneous
        return self._oMb.actInv(oMt).homogeneous

    def kinematics(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """pose(q) and jacobian(q) from one forward-kinematics pass (the control loop's need)."""
        q = self.check_q(q)
        pin.computeJointJacobians(self.model, self.data, q)
        T = self._tip_in_base()
        J = pin.getFrameJacobian(self.model, self.data, self.tip_id, pin.LOCAL_WORLD_ALIGNED)
        return T, self._to_base(J)

    def jacobian(self, q: np.ndarray) -> np.ndarray:
        """Manipulator Jacobian J(q) (seed eq. 3, ẋ = J q̇): 6×N, rows [v; ω] in the base frame."""
        q = self.check_q(q)
        J = pin.computeFrameJacobian(self.model, self.data, q, self.tip_id,
                                     pin.LOCAL_WORLD_ALIGNED)
        return self._to_base(J)

    def jacobian_rate(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """J̇(q, q̇) q̇ (6-vector [v̇; ω̇] in the base frame): the tip's acceleration at q̈ = 0, i.e. the
        derivative of J along q̇ applied to q̇ — ẍ = J q̈ + J̇ q̇ (seed eq. 3 differentiated). The
        classical (not spatial) acceleration of the tip origin, from one second-order forward
        kinematics pass. `q` and `qd` are not checked (the caller's hot path)."""
        pin.forwardKinematics(self.model, self.data, q, qd, self._zero_v)
        a = pin.getFrameClassicalAcceleration(self.model, self.data, self.tip_id, pin.LOCAL_WORLD_ALIGNED).vector
        if self._world_is_base:
            return a
        Rt = self._R_base.T
        return np.concatenate((Rt @ a[:3], Rt @ a[3:]))

    def _to_base(self, J: np.ndarray) -> np.ndarray:
        """Re-express a world-aligned 6×N Jacobian in the base frame (the base is fixed)."""
        if self._world_is_base:
            return J
        Rt = self._R_base.T
        return np.vstack((Rt @ J[:3], Rt @ J[3:]))

    def joint_origins(self, q: np.ndarray) -> np.ndarray:
        """Positions of the chain's joint frame origins and then the tip, in the base frame ((N+1)×3)."""
        q = self.check_q(q)
        pin.forwardKinematics(self.model, self.data, q)
        tip = self._tip_in_base()[:3, 3]
        pts = [self._oMb.actInv(self.data.oMi[j]).translation for j in range(1, self.model.njoints)]
        return np.vstack([*pts, tip])

    def manipulability(self, q: np.ndarray) -> float:
        """Yoshikawa manipulability w = √det(J Jᵀ) (product of J's singular values)."""
        return float(np.prod(np.linalg.svd(self.jacobian(q), compute_uv=False)))

    def random_q(self, rng: np.random.Generator, low: float = -np.pi, high: float = np.pi) -> np.ndarray:
        """A configuration with q_i ~ U[max(low, lower_i), min(high, upper_i)]."""
        lim = self.limits
        return rng.uniform(np.maximum(lim.lower, low), np.minimum(lim.upper, high))
