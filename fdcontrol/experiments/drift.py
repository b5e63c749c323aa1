"""Sideways drift of hand guiding at random poses, and where it comes from.

A hand pushes the tool with ``PUSH`` N along base +x for ``GUIDE_S`` s (force mode,
f_target = 0, gain 1, FD at γ = 1e3 unless stated); the drift is the tip's (the tool flange's)
lateral displacement over its displacement along the push,

    drift = ‖d − (d·x̂) x̂‖ / (d·x̂),   d = p_tip(t = GUIDE_S) − p_tip(0).

Poses are drawn with a seeded generator inside the joint ranges (``MARGIN`` of each range
away from the limits) and accepted when σ_min(J) ≥ ``SIGMA_MIN`` at the start *and* along the
push as the ideal arm makes it, and no position limit engages on the way — "away from
singularities and limits" for the whole second, not only at its start.

Each :class:`Variant` switches one suspected source on or off:

* ``servo``: ``mujoco`` (the MuJoCo arm: PI velocity servo of ``bandwidth`` Hz, motor
  armature, the tool's inertia seen by the flange sensor) or ``ideal`` (q⁺ = q + dt q̇_ref
  exactly, the sensor reads exactly the hand's wrench);
* ``limits``: ``all`` (the default safety limits), ``no_cartesian`` (without the Cartesian
  speed limit) or ``none`` (every limit out of reach);
* ``integration``: the virtual model starts each cycle at the ``measured`` q or at the
  integrated ``reference`` (fdcontrol.loop.reference);
* ``coriolis``: the virtual model's C(q, q̇)q̇ term on or off;
* ``push_at``: where along the tool axis the hand pushes (m from the flange; 0 = at the
  sensor, so the push has no torque about it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import mujoco
import numpy as np

from fdcontrol.control.law import ControlLaw, ForceTerm
from fdcontrol.control.sensing import WrenchFilter, physical_reading
from fdcontrol.drivers.base import JointState, RobotDriver
from fdcontrol.drivers.mujoco import MujocoRobot, Tool
from fdcontrol.experiments.arms import ARMS, Arm, load_arm
from fdcontrol.experiments.common import Context, table, write_results
from fdcontrol.limits.safety import BASIC_LIMITS, SafetyLimits
from fdcontrol.loop import ControlLoop, build_loop
from fdcontrol.loop.reference import ReferenceIntegration
from fdcontrol.loop.solvers import DEFAULT_DECAY, make_solver
from fdcontrol.mappings import make_mapping
from fdcontrol.model.robot import RobotModel

DT = 0.002
TOOL = Tool(mass=0.8, com=(0.01, -0.005, 0.06), length=0.12, radius=0.02)
PUSH, GUIDE_S, GAMMA = 10.0, 1.0, 1e3
MARGIN, SIGMA_MIN = 0.15, 0.05
SEED = 20260


@dataclass(frozen=True)
class Variant:
    """One experiment condition (see the module doc)."""

    servo: str = "mujoco"
    bandwidth: float = 20.0
    limits: str = "all"
    integration: str = "measured"
    coriolis: bool = True
    push_at: float = 0.0
    mapping: str = "fd"
    wrench_cutoff: float = 0.0  # Hz, the sensor model's low-pass (0: off)
    gamma: float = GAMMA
    schedule: str = "fixed"  # the FD mapping's gamma_schedule ("conditioning": the default's, from γ up)
    gamma_straight: float = 1e6  # γ away from singularities under the schedule
    substeps: int = 1
    push: float = PUSH
    tool_mass: float = TOOL.mass  # kg (MuJoCo arm; the sensor model is configured with it)
    inertia_comp: bool = False  # the sensor model subtracts the tool's inertial wrench
    accel_cutoff: float = 0.0  # Hz, low-pass on the tool's estimated acceleration (0: off)
    sensor: str = "mujoco"  # MuJoCo's flange sensor; "exact": the hand alone; "averaged": over the period

    def label(self) -> str:
        base = Variant()
        diff = {k: v for k, v in asdict(self).items() if v != getattr(base, k)}
        return ", ".join(f"{k}={v}" for k, v in diff.items()) or "baseline"


class IdealArm(RobotDriver):
    """A velocity interface that executes q̇_ref exactly (q⁺ = q + dt q̇_ref) with a sensor that
    reads exactly the hand's wrench (a massless tool): the controller alone."""

    simulated = True
    interface = "velocity"

    def __init__(self, robot: RobotModel, q0: np.ndarray, dt: float = DT) -> None:
        self.robot, self.dt = robot, dt
        self.q, self.qd, self.t = np.array(q0, dtype=float), np.zeros(robot.dof), 0.0
        self.push, self.push_point = np.zeros(6), np.zeros(3)

    def set_push(self, w: np.ndarray) -> None:
        self.push = np.asarray(w, dtype=float)

    def read(self) -> JointState:
        return JointState(self.q.copy(), self.qd.copy(), self.t)

    def read_wrench(self) -> np.ndarray:
        R = self.robot.pose(self.q)[:3, :3]
        F = R.T @ self.push[:3]
        hand = np.concatenate((F, R.T @ self.push[3:] + np.cross(self.push_point, F)))  # on the tool, sensor frame
        return physical_reading(-hand, 0.0, np.zeros(3), R)

    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None:
        self.qd = np.zeros(self.robot.dof) if qd_ref is None else np.asarray(qd_ref, dtype=float).copy()
        self.q = self.q + self.dt * self.qd
        self.t += self.dt

    def close(self) -> None:
        pass


class ExactSensorArm(MujocoRobot):
    """The MuJoCo arm (servo, tool, physics) whose sensor reads the hand's wrench and the tool's
    weight only — what the flange sensor would read if the tool had no inertia."""

    def read_wrench(self) -> np.ndarray:
        q = self.read().q
        R = self.robot.pose(q)[:3, :3]
        F = R.T @ self.push[:3]
        hand = np.concatenate((F, R.T @ self.push[3:] + np.cross(self.push_point, F)))
        return physical_reading(-hand, self.tool.mass, np.array(self.tool.com), R, self.sensor_sign)


class ConsistentSensorArm(MujocoRobot):
    """The MuJoCo arm whose sensor is computed with the acceleration the last physics sub-step
    actually integrated, (q̇⁺ − q̇)/h. MuJoCo's implicit integrator (used for the stiff velocity
    servo) leaves the explicit acceleration in ``qacc``, from which its force–torque sensors are
    computed; with the servo's stiff damping the two differ by up to 3× right after a new reference."""

    def _advance(self) -> None:
        if self._due is None:
            return
        (prev, q_ref), self._due, d = self._due, None, self._data
        self._apply_push()
        h = self.model.opt.timestep
        for k in range(self.nsub):
            if self.interface == "position":
                d.ctrl[0::2] = prev + (k + 1) / self.nsub * (q_ref - prev)
            v0 = d.qvel.copy()
            mujoco.mj_step(self.model, d)
        d.qacc[:] = (d.qvel - v0) / h
        mujoco.mj_rnePostConstraint(self.model, d)
        mujoco.mj_sensorAcc(self.model, d)
        self.t += self.dt


def limits_for(robot: RobotModel, which: str) -> SafetyLimits:
    if which == "all":  # the four basic limits (the default before path_acceleration and path_speed joined)
        return SafetyLimits.from_robot(robot, limits=BASIC_LIMITS)
    if which == "default":  # the default limits (as a user gets them)
        return SafetyLimits.from_robot(robot)
    if which == "no_cartesian":
        return SafetyLimits.from_robot(robot, limits=("position", "velocity", "acceleration"))
    if which == "path":  # the default limits and the path-keeping acceleration limit before theirs
        return SafetyLimits.from_robot(robot, limits=(*BASIC_LIMITS, "path_acceleration"))
    if which == "path_speed":  # … and the speed cap that keeps the path within the acceleration limits
        return SafetyLimits.from_robot(robot, limits=(*BASIC_LIMITS, "path_acceleration", "path_speed"))
    lim = robot.limits
    if which == "no_acceleration":  # the acceleration limit out of reach, the others as by default
        return SafetyLimits(lim.lower, lim.upper, 0.5 * lim.velocity, np.full(robot.dof, 1e7))
    if which == "none":
        return SafetyLimits(lim.lower, lim.upper, np.full(robot.dof, 1e3), np.full(robot.dof, 1e7),
                            max_linear_speed=1e3, max_angular_speed=1e3)
    raise ValueError(f"limits must be 'all', 'no_cartesian' or 'none', got {which!r}")


def build(arm: Arm, q0: np.ndarray, v: Variant, law: ControlLaw | None = None,
          decay: float = DEFAULT_DECAY, **driver: object) -> ControlLoop:
    """The loop on the arm of variant `v`, at q0, ready to step."""
    robot = arm.robot
    if v.servo == "ideal":
        drv: IdealArm | MujocoRobot = IdealArm(robot, q0)
        filt = WrenchFilter(cutoff=v.wrench_cutoff)
    elif v.servo == "mujoco":
        tool = replace(TOOL, mass=v.tool_mass)
        cls = {"exact": ExactSensorArm, "consistent": ConsistentSensorArm}.get(v.sensor, MujocoRobot)
        if v.sensor == "averaged":
            driver = {**driver, "sensor_average": True}
        drv = cls(robot, dt=DT, q0=q0, tool=tool, bandwidth=v.bandwidth, urdf=arm.urdf,
                          **driver)  # type: ignore[arg-type]
        filt = WrenchFilter(tool_mass=tool.mass, tool_com=np.array(tool.com), cutoff=v.wrench_cutoff,
                            tool_inertia=np.array(tool.inertia), inertia_compensation=v.inertia_comp,
                            accel_cutoff=v.accel_cutoff)
    else:
        raise ValueError(f"servo must be 'mujoco' or 'ideal', got {v.servo!r}")
    drv.push_point = np.array([0.0, 0.0, v.push_at])
    kw = {"gamma": v.gamma, "gamma_schedule": v.schedule, "gamma_straight": v.gamma_straight} \
        if v.mapping == "fd" and v.schedule != "default" else {}  # "default": the mapping as a user gets it
    mapping = make_mapping(v.mapping, robot, **kw)
    solver = make_solver(mapping, decay=decay, **({"coriolis": v.coriolis, "substeps": v.substeps}
                                                  if v.mapping == "fd" else {}))
    if v.integration == "reference":
        solver = ReferenceIntegration(solver)  # type: ignore[assignment]
    elif v.integration != "measured":
        raise ValueError(f"integration must be 'measured' or 'reference', got {v.integration!r}")
    law = law or ControlLaw(mode="force", force=ForceTerm(gain=np.ones(6), target=np.zeros(6)))
    return build_loop({"rate": 1 / DT}, driver=drv, robot=robot,  # type: ignore[arg-type]  # this variant's parts
                      parts={"solver": solver, "law": law, "limits": limits_for(robot, v.limits), "filter": filt,
                             "posture": None, "task": None})


def guide(arm: Arm, q0: np.ndarray, v: Variant = Variant(), seconds: float = GUIDE_S,
          direction: np.ndarray | tuple[float, float, float] = (1.0, 0.0, 0.0), every_cycle: bool = False) -> dict:
    """Drift of the tip under a ``v.push`` N push along the base-frame unit vector `direction` (+x
    unless given) for `seconds` (see the module doc); ``sigma_min`` from the loop's telemetry, or
    from every cycle's J with `every_cycle`."""
    loop = build(arm, q0, v)
    robot = arm.robot
    u = np.asarray(direction, dtype=float)
    u = u / np.linalg.norm(u)
    p0 = robot.pose(q0)[:3, 3]
    loop.driver.set_push(np.concatenate((v.push * u, np.zeros(3))))  # type: ignore[attr-defined]
    smin, limited, virtual, gammas = np.inf, 0, 0, []
    mapping = loop.solver.mapping
    n = round(seconds / DT)
    for i in range(n):
        s = loop.step(now=i * DT)
        if every_cycle:  # σ_min(J) of every cycle (the telemetry's is decimated)
            smin = min(smin, float(np.linalg.svd(robot.jacobian(s.q), compute_uv=False)[-1]))
        elif np.isfinite(s.sigma_min_j):
            smin = min(smin, s.sigma_min_j)
        limited += bool(s.limits_active.get("position", False))
        virtual += bool(s.limits_active.get("virtual_joint_limit", False))
        gammas.append(getattr(mapping, "gamma", np.nan))
    q1 = loop.driver.read().q
    d = robot.pose(q1)[:3, 3] - p0
    along = float(d @ u)
    lateral = float(np.linalg.norm(d - along * u))
    return {"along_m": along, "lateral_m": lateral, "drift": lateral / max(abs(along), 1e-12),
            "sigma_min": float(smin), "fault": loop.fault, "position_limited_cycles": limited,
            "virtual_limited_cycles": virtual, "gamma_min": float(np.min(gammas)), "gamma_max": float(np.max(gammas))}


#: the settings as a user gets them, on the ideal arm (the controller alone)
DEFAULTS = Variant(servo="ideal", limits="default", schedule="default")
#: the six push directions of the defaults' check: ±x, ±y, ±z of the base
DIRECTIONS: tuple[tuple[float, float, float], ...] = (
    (1.0, 0.0, 0.0), (-1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, -1.0, 0.0), (0.0, 0.0, 1.0), (0.0, 0.0, -1.0))
LIMIT_CLEARANCE = 0.2  # rad: the defaults' check draws its poses this far inside every position limit


def regular_pushes(arm: Arm, n_poses: int = 20, v: Variant = DEFAULTS, seconds: float = GUIDE_S,
                   seed: int = SEED) -> list[dict]:
    """The defaults' check: `n_poses` seeded poses at least ``LIMIT_CLEARANCE`` inside the joint
    limits (within ±π) and with the tip above z = 0.1 m, each pushed along ±x, ±y, ±z; every push is
    returned with ``regular`` — σ_min(J) ≥ ``SIGMA_MIN`` at every cycle of the push and no position
    limit (nor the virtual model's) engaged — and its pose, direction and drift."""
    robot, rng = arm.robot, np.random.default_rng(seed)
    lo = np.maximum(robot.limits.lower, -np.pi) + LIMIT_CLEARANCE
    hi = np.minimum(robot.limits.upper, np.pi) - LIMIT_CLEARANCE
    out: list[dict] = []
    poses = 0
    while poses < n_poses:
        q = lo + rng.random(robot.dof) * (hi - lo)
        if robot.pose(q)[2, 3] < 0.1 or np.linalg.svd(robot.jacobian(q), compute_uv=False)[-1] < SIGMA_MIN:
            continue
        poses += 1
        for u in DIRECTIONS:
            r = guide(arm, q, v, seconds, u, every_cycle=True)
            r.update(pose=q.tolist(), direction=list(u), regular=bool(
                r["sigma_min"] >= SIGMA_MIN and not r["position_limited_cycles"] and not r["virtual_limited_cycles"]))
            out.append(r)
    return out


def random_poses(arm: Arm, n: int, seed: int = SEED, max_tries: int = 2000) -> list[np.ndarray]:
    """`n` seeded poses away from singularities and limits for the whole push (module doc)."""
    robot, rng = arm.robot, np.random.default_rng(seed)
    lo, hi = np.maximum(robot.limits.lower, -np.pi), np.minimum(robot.limits.upper, np.pi)
    span = hi - lo
    out: list[np.ndarray] = []
    for _ in range(max_tries):
        if len(out) == n:
            break
        q = lo + MARGIN * span + rng.random(robot.dof) * (1 - 2 * MARGIN) * span
        if robot.pose(q)[2, 3] < 0.1 or np.linalg.svd(robot.jacobian(q), compute_uv=False)[-1] < SIGMA_MIN:
            continue
        r = guide(arm, q, Variant(servo="ideal", limits="all"))
        if r["fault"] or r["sigma_min"] < SIGMA_MIN or r["position_limited_cycles"] or r["along_m"] < 0.05:
            continue
        out.append(q)
    if len(out) < n:
        raise RuntimeError(f"{arm.name}: only {len(out)} of {n} poses away from singularities and limits")
    return out


#: the sources separated, one switch at a time: first the controller alone (ideal arm), then on
#: the MuJoCo arm; γ = 1e6 takes the virtual model's own coupling out (see docs/physics.md)
SOURCES: tuple[Variant, ...] = (
    Variant(servo="ideal", limits="none", push=1.0),
    Variant(servo="ideal", limits="none", push=1.0, gamma=1e6),
    Variant(servo="ideal", limits="none", push=1.0, gamma=1e6, coriolis=False),
    Variant(servo="ideal", gamma=1e6),
    Variant(servo="ideal", gamma=1e6, limits="no_cartesian"),
    Variant(servo="ideal", gamma=1e6, limits="no_acceleration"),
    Variant(servo="ideal", gamma=1e6, limits="path"),
    Variant(),
    Variant(limits="path"),
    Variant(limits="path", integration="reference"),
    Variant(limits="path", gamma=1e6),
    Variant(limits="path", gamma=1e6, integration="reference"),
    Variant(limits="path", gamma=1e6, bandwidth=100.0),
    Variant(limits="path", gamma=1e6, tool_mass=0.05),
    Variant(limits="path", gamma=1e6, push_at=TOOL.length),
    Variant(limits="path", gamma=1e6, push=3.0),
)

#: the virtual model's coupling against physics at each γ: the controller alone (ideal arm), the
#: MuJoCo arm as delivered and with path_acceleration, its sensor replaced by an exact one (the
#: tool's inertia unseen), the tool's inertia compensated from the joint state, a sensor averaged
#: over the loop period, one sampled at the period's end with the integrated acceleration; 10 N, 3 N
GAMMAS: tuple[float, ...] = (1e3, 1e4, 1e6)
GAMMA_STUDY: tuple[Variant, ...] = tuple(
    replace(v, gamma=g) for g in GAMMAS for v in (
        Variant(servo="ideal", limits="none", push=1.0),
        Variant(),
        Variant(limits="path"),
        Variant(limits="path", sensor="exact"),
        Variant(limits="path", inertia_comp=True),
        Variant(limits="path", push=3.0),
        Variant(limits="path", push=3.0, sensor="exact"),
        Variant(limits="path", push=3.0, inertia_comp=True),
        Variant(limits="path", sensor="averaged"),
        Variant(limits="path", push=3.0, sensor="averaged"),
        Variant(limits="path", push=3.0, sensor="consistent"),
        Variant(limits="path_speed"),
        Variant(limits="path_speed", push=3.0, sensor="averaged"),
    ))

#: every mapping on the MuJoCo arm with the default limits (DLS and J⁻¹ also with the sensor
#: low-pass that makes them settle on contact, fdcontrol.experiments.contact)
MAPPINGS: tuple[Variant, ...] = (
    Variant(), Variant(gamma=1e6), Variant(limits="path", gamma=1e6),
    Variant(mapping="dls"), Variant(mapping="dls", wrench_cutoff=5.0),
    Variant(mapping="jt"), Variant(mapping="ji"), Variant(mapping="ji", wrench_cutoff=5.0),
    # each at its best: the path-keeping limits (path_acceleration, path_speed) for every mapping
    Variant(limits="path_speed", gamma=1e4),
    Variant(mapping="dls", wrench_cutoff=5.0, limits="path_speed"),
    Variant(mapping="ji", wrench_cutoff=5.0, limits="path_speed"),
)


def percentiles(x: list[float]) -> dict[str, float]:
    a = 100 * np.asarray(x)
    return {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)), "max": float(a.max())}


def sweep(arms: tuple[str, ...] = ARMS, n_poses: int = 20, variants: tuple[Variant, ...] = SOURCES,
          seed: int = SEED, progress: bool = False) -> dict:
    """Drift percentiles (%) per arm and variant over `n_poses` seeded poses."""
    res: dict = {}
    for name in arms:
        arm = load_arm(name)
        poses = random_poses(arm, n_poses, seed)
        for v in variants:
            runs = [guide(arm, q, v) for q in poses]
            res[f"{name}/{v.label()}"] = {"variant": asdict(v), **percentiles([r["drift"] for r in runs]),
                                          "along_m_p50": float(np.median([r["along_m"] for r in runs])),
                                          "faults": sum(bool(r["fault"]) for r in runs),
                                          "drift": [r["drift"] for r in runs]}
            if progress:
                r = res[f"{name}/{v.label()}"]
                print(f"{name:6} {v.label():45} p50 {r['p50']:6.3f}  p90 {r['p90']:6.3f}  max {r['max']:6.3f} %"
                      f"  along {r['along_m_p50']:.3f} m  faults {r['faults']}", flush=True)
    return res




#: the candidates for the default, on the ideal arm with the default limits: the fixed γ of the paper's
#: experiments, the two fixed values that make the model straight, and the schedule (the default)
CANDIDATES: tuple[tuple[str, Variant], ...] = (
    ("fixed γ = 1e3", Variant(servo="ideal", limits="default", gamma=1e3)),
    ("fixed γ = 1e4", Variant(servo="ideal", limits="default", gamma=1e4)),
    ("fixed γ = 1e6", Variant(servo="ideal", limits="default", gamma=1e6)),
    ("γ scheduled on J's conditioning (default)", DEFAULTS),
)
#: the MuJoCo arm (servo, tool, flange sensor) with every setting at its default
MUJOCO_DEFAULTS = Variant(limits="default", schedule="default")


def singular_path_peak(v: Variant, robot_name: str = "ur10", n: int = 601) -> float:
    """FD's largest gain σmax(H⁻¹Jᵀ) along the paper's singular path (fdcontrol.experiments.singular_path)."""
    from fdcontrol.experiments.batch import evaluate, joint_space, sigmas
    from fdcontrol.experiments.singular_path import path

    robot = load_arm(robot_name).robot
    _, Q = path(n, robot.dof)
    b = evaluate(robot, Q)
    return float(sigmas(joint_space(b, "fd_scheduled" if v.schedule == "default" else "fd", v.gamma))[:, 0].max())


def regular_summary(pushes: list[dict]) -> dict:
    """Drift percentiles (%) over the regular pushes of :func:`regular_pushes`, their count, the faults
    and the worst push's pose and direction."""
    reg = [r for r in pushes if r["regular"]]
    if not reg:  # (a quick run's single pose may have none)
        return {"p50": np.nan, "p90": np.nan, "max": np.nan, "regular": 0, "pushes": len(pushes),
                "faults": sum(bool(r["fault"]) for r in pushes), "worst_pose": [], "worst_direction": [],
                "worst_sigma_min": np.nan}
    worst = max(reg, key=lambda r: r["drift"])
    return {**percentiles([r["drift"] for r in reg]), "regular": len(reg), "pushes": len(pushes),
            "faults": sum(bool(r["fault"]) for r in pushes), "worst_pose": worst["pose"],
            "worst_direction": worst["direction"], "worst_sigma_min": worst["sigma_min"]}


def candidate_study(arms: tuple[str, ...], n_poses: int = 20, seconds: float = GUIDE_S, seed: int = SEED,
                    progress: bool = False) -> dict:
    """Each candidate of :data:`CANDIDATES`: drift over the regular pushes of :func:`regular_pushes`
    per arm, and the peak gain on the UR10 singular path."""
    res: dict = {}
    for label, v in CANDIDATES:
        res[label] = {"singular_path_peak_gain": singular_path_peak(v)}
        for name in arms:
            res[label][name] = r = regular_summary(regular_pushes(load_arm(name), n_poses, v, seconds, seed))
            if progress:
                print(f"{name:6} {label:45} p50 {r['p50']:6.3f}  max {r['max']:6.3f} %  "
                      f"regular {r['regular']}/{r['pushes']}", flush=True)
    return res


#: the MuJoCo arms of the defaults' check with their sensor (the shipped ones)
MUJOCO_CHECK_ARMS: tuple[str, ...] = ("ur10", "panda", "fr3")


def mujoco_check(arms: tuple[str, ...] = MUJOCO_CHECK_ARMS, n_poses: int = 20, seconds: float = GUIDE_S,
                 seed: int = SEED, progress: bool = False) -> dict:
    """The defaults' check on the MuJoCo arm (servo, tool, flange sensor; :data:`MUJOCO_DEFAULTS`): the
    regular pushes of :func:`regular_pushes` per arm, summarised with the worst pose."""
    res: dict = {}
    for name in arms:
        res[name] = r = regular_summary(regular_pushes(load_arm(name), n_poses, MUJOCO_DEFAULTS, seconds, seed))
        if progress:
            print(f"{name:6} MuJoCo, defaults  p50 {r['p50']:6.3f}  max {r['max']:6.3f} %  regular "
                  f"{r['regular']}/{r['pushes']}  worst pose {np.round(r['worst_pose'], 4).tolist()} along "
                  f"{r['worst_direction']}", flush=True)
    return res


def rows(res: dict) -> list[list[object]]:
    out = []
    for key, r in res.items():
        name, label = key.split("/", 1)
        out.append([name, label, f"{r['p50']:.3f}", f"{r['p90']:.3f}", f"{r['max']:.3f}",
                    f"{r['along_m_p50']:.3f}", r["faults"]])
    return out


HEADER = ["arm", "condition (changes from the baseline)", "drift p50 %", "p90 %", "max %", "travel p50 (m)", "faults"]


def mapping_drift(ctx: Context) -> tuple[dict, str]:
    """Drift percentiles of every mapping (:data:`MAPPINGS`) — for ``fdcontrol experiments physics``."""
    arms = ARMS if not ctx.quick else ("ur10",)
    res = sweep(arms, ctx.n(20, 1), MAPPINGS, SEED + ctx.seed, progress=ctx.progress)
    return res, table(HEADER, rows(res))


def run_experiment(ctx: Context) -> dict:
    arms = ARMS if not ctx.quick else ("ur10",)
    n = ctx.n(20, 1)
    res = sweep(arms, n, SOURCES, SEED + ctx.seed, progress=ctx.progress)
    study = sweep(arms, n, GAMMA_STUDY, SEED + ctx.seed, progress=ctx.progress)
    defaults = sweep(arms, n, (MUJOCO_DEFAULTS,), SEED + ctx.seed, progress=ctx.progress)
    cand_arms = (*arms, "kinova") if not ctx.quick else arms
    cands = candidate_study(cand_arms, n, GUIDE_S, SEED + ctx.seed, progress=ctx.progress)
    check_arms = MUJOCO_CHECK_ARMS if not ctx.quick else ("ur10",)
    mj = mujoco_check(check_arms, n, GUIDE_S, SEED + ctx.seed, progress=ctx.progress)
    out = {**res, **{f"gamma_study/{k}": v for k, v in study.items()},
           **{f"defaults/{k}": v for k, v in defaults.items()}, "candidates": cands, "mujoco_check": mj}
    mj_rows = [[a, f"{r['regular']}/{r['pushes']}", f"{r['p50']:.3f}", f"{r['p90']:.3f}", f"{r['max']:.3f}",
                f"{np.round(r['worst_pose'], 3).tolist()} along {r['worst_direction']}", r["faults"]]
               for a, r in mj.items()]
    cand_rows = [[label, f"{c['singular_path_peak_gain']:.1f}",
                  *(f"{c[a]['p50']:.3f} / {c[a]['max']:.3f} ({c[a]['regular']}/{c[a]['pushes']})" for a in cand_arms)]
                 for label, c in cands.items()]
    write_results(ctx.folder("drift"), out, f"""# Sideways drift of hand guiding: its sources

`fdcontrol experiments drift` — {n} seeded poses per arm (σ_min(J) ≥ {SIGMA_MIN} along the whole
push, joints {MARGIN:.0%} of their range inside the limits), a {PUSH} N push along base +x for
{GUIDE_S} s, force mode, FD, decay {DEFAULT_DECAY} 1/s, 500 Hz. Baseline: γ = {GAMMA:g}, the
MuJoCo arm (PI velocity servo 20 Hz, {TOOL.mass} kg tool on a flange sensor), the default
limits, the virtual model started at the measured q, Coriolis on, the push at the sensor.
Drift = lateral / along-push displacement of the tip.

## Sources

{table(HEADER, rows(res))}

## γ, the servo and the tool's inertia

Each condition at γ = {", ".join(f"{g:g}" for g in GAMMAS)}. `sensor=exact`: the MuJoCo arm whose sensor
reads the hand alone (the tool's inertia unseen; servo, tool and physics unchanged); `sensor=averaged`:
MuJoCo's sensor averaged over the loop period (driver option `sensor_average`); `sensor=consistent`:
read at the period's end like the default, but computed with the acceleration the integrator applied;
`inertia_comp`: the sensor model subtracts the tool's inertial wrench estimated from the joint state
(`tool_inertia_compensation`); `limits=path_speed`: the default limits with `path_acceleration`
and `path_speed`.

{table(HEADER, rows(study))}

## The defaults

The MuJoCo arm with every setting at its default (γ scheduled on J's conditioning, the default limits
with `path_acceleration` and `path_speed`), the same poses and push:

{table(HEADER, rows(defaults))}

The candidates for the default on the ideal arm (the controller alone) with the default limits: {n} seeded
poses at least {LIMIT_CLEARANCE} rad inside the joint limits, each pushed {PUSH} N along ±x, ±y, ±z for {GUIDE_S} s;
drift p50 / max (%) over the regular pushes (σ_min(J) ≥ {SIGMA_MIN} all along, no position limit; their
count in brackets), and FD's peak gain σmax(H⁻¹Jᵀ) on the UR10 singular path (section 4.3):

{table(["candidate", "peak gain, singular path", *cand_arms], cand_rows)}

The same check on the MuJoCo arm with its sensor (servo, {TOOL.mass} kg tool on the flange sensor), every
setting at its default — the hand guiding a user gets on the simulated arm:

{table(["arm", "regular pushes", "drift p50 %", "p90 %", "max %", "worst pose (rad), push direction", "faults"],
       mj_rows)}
""")
    return out


run = run_experiment
