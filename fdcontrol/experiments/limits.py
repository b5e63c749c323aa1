"""Joint limits as constraints vs plain clamping, on the UR10 pushed into a shoulder limit.

Two set-ups, the same constant force (3 N along +x, 3 N along +z, base frame) driving the
shoulder-lift joint into a limit 0.05 rad from its start, reversed after 1 s:

* ``virtual``: the FD solver (γ = 1e3, c = 10 1/s, Coriolis kept, semi-implicit Euler at
  500 Hz) integrates the virtual model alone (q fed back), with constraints (locked-joint
  dynamics + projection) or clamping.
* ``loop``: the full control loop (``ControlLoop``: control law, solver, safety limits) on the
  simulated arm (first-order velocity lag τ = 10 ms), as the service runs it. The virtual
  limit is inset from the robot's (safety) limit by the braking distance
  (``fdcontrol.model.constraints.braking_inset``), so it acts before the safety envelope would;
  ``envelope only`` is the solver without virtual limits, where the safety envelope brakes
  the joint — the situation before the inset.

Metric: how well the tip follows the force while the joint sits on its limit — the angle
between tip velocity and force, and the tip displacement across the force direction.
"""

from __future__ import annotations

import copy
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from fdcontrol.drivers.simulated import SimulatedRobot
from fdcontrol.experiments.common import Context, save, table, write_results
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import ForwardDynamicsSolver
from fdcontrol.mappings import ForwardDynamics
from fdcontrol.model.constraints import braking_inset
from fdcontrol.model.robot import RobotModel

Q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
JOINT, MARGIN, DT = 1, 0.05, 0.002
FORCE = np.array([3.0, 0.0, 3.0, 0, 0, 0])


def limited_robot(robot: RobotModel, inset: float = 0.0) -> tuple[RobotModel, int]:
    """A copy whose joint limit lies MARGIN + inset from Q0, on the side the force pushes it (+1 upper, −1 lower)."""
    r = copy.copy(robot)
    r.model = robot.model.copy()
    r.data = r.model.createData()
    side = 1 if ForwardDynamics(robot, 1e3).joint_space(Q0)[JOINT] @ FORCE > 0 else -1
    if side > 0:
        r.model.upperPositionLimit[JOINT] = Q0[JOINT] + MARGIN + inset
    else:
        r.model.lowerPositionLimit[JOINT] = Q0[JOINT] - MARGIN - inset
    return r, side


def loop_inset(robot: RobotModel) -> np.ndarray:
    """The inset the service uses (runtime.build_solver) for default safety limits."""
    lim = SafetyLimits.from_robot(robot)
    return braking_inset(lim.max_velocity, lim.max_acceleration)


def simulate(robot: RobotModel, method: str, seconds: float = 1.5, reverse_at: float = 1.0) -> dict:
    """The virtual model alone, q fed back."""
    solver = ForwardDynamicsSolver(ForwardDynamics(robot, 1e3), joint_limits=method)  # type: ignore[arg-type]
    q, qd = Q0.copy(), np.zeros(6)
    n = round(seconds / DT)
    Q, P, active = np.empty((n, 6)), np.empty((n, 3)), np.zeros(n, dtype=bool)
    lim = solver.constraints
    for i in range(n):
        f = FORCE if i * DT < reverse_at else -FORCE
        q, qd = solver.step(q, qd, f, DT)
        Q[i], P[i] = q, robot.pose(q)[:3, 3]
        active[i] = q[JOINT] >= lim.upper[JOINT] - 1e-9 or q[JOINT] <= lim.lower[JOINT] + 1e-9
    return {"q": Q, "tip": P, "at_limit": active}


def simulate_loop(robot: RobotModel, method: str, seconds: float = 1.5, reverse_at: float = 1.0,
                  coriolis: bool = True, inset: np.ndarray | None = None, driver: Any = None) -> dict:
    """The whole loop on the simulated arm; `method` "constraints", "clamp" or "none" (envelope only).

    Records per cycle what an independent check of the constrained dynamics needs: measured q,
    the carried q̇ before the step, the control signal, the references and the active limits.
    """
    inset = loop_inset(robot) if inset is None else inset
    solver = ForwardDynamicsSolver(ForwardDynamics(robot, 1e3), coriolis=coriolis,
                                   joint_limits=method, limit_inset=inset)  # type: ignore[arg-type]
    driver = SimulatedRobot(robot, dt=DT, q0=Q0) if driver is None else driver
    loop = ControlLoop(robot, driver, solver, rate=1 / DT)
    n = round(seconds / DT)
    rec: dict[str, list] = {k: [] for k in ("q", "qd_state", "wrench", "q_ref", "qd_ref", "tip", "locked",
                                            "safety_active")}
    for i in range(n):
        t = i * DT
        loop.set_wrench(FORCE if t < reverse_at else -FORCE, t=t)
        qd_state = loop.qd_state.copy()
        s = loop.step(now=t)
        act = dict(s.limits_active)
        rec["q"].append(s.q)
        rec["qd_state"].append(qd_state)
        rec["wrench"].append(s.wrench)
        rec["q_ref"].append(s.q_ref)
        rec["qd_ref"].append(s.qd_ref)
        rec["tip"].append(s.tip_pose[:3, 3])
        rec["locked"].append(solver.constraints.active.copy())
        rec["safety_active"].append({k: v for k, v in act.items() if k != "virtual_joint_limit"})
    out = {k: np.array(v) if k != "safety_active" else v for k, v in rec.items()}
    c = solver.constraints
    out["virtual_lower"], out["virtual_upper"] = c.lower, c.upper
    out["at_limit"] = out["locked"][:, JOINT] if method == "constraints" else (
        (out["q"][:, JOINT] >= c.upper[JOINT] - 1e-3) | (out["q"][:, JOINT] <= c.lower[JOINT] + 1e-3))
    return out


def metrics(r: dict, t: np.ndarray, reverse_at: float) -> dict:
    on = r["at_limit"] & (t < reverse_at)
    v = np.gradient(r["tip"], DT, axis=0)
    u = FORCE[:3] / np.linalg.norm(FORCE[:3])
    speed = np.linalg.norm(v, axis=1)
    cos = (v @ u) / np.maximum(speed, 1e-12)
    first = int(np.argmax(on)) if on.any() else len(t)
    last = int(np.argmax(t >= reverse_at)) - 1
    d = r["tip"][last] - r["tip"][first]
    along = float(d @ u)
    across = float(np.linalg.norm(d - along * u))
    hit = int(np.argmax(r["at_limit"])) if r["at_limit"].any() else None
    left = None if hit is None or r["at_limit"][hit:].all() else float(t[hit + int(np.argmin(r["at_limit"][hit:]))])
    return {"cycles_at_limit": int(on.sum()), "mean_cos_tip_velocity_force": float(np.mean(cos[on])) if on.any()
            else None, "along_force_m": along, "across_force_m": across,
            "across_over_along": across / max(abs(along), 1e-12),
            "reached_limit_s": None if hit is None else float(t[hit]), "left_limit_s": left}


def envelope_metrics(r: dict, t: np.ndarray, reverse_at: float, near: np.ndarray) -> dict:
    """metrics() with "at the limit" = the joint within the safety envelope's braking zone."""
    return metrics({**r, "at_limit": near}, t, reverse_at)


def physics_runs(robot: RobotModel, t: np.ndarray) -> dict:
    """The loop on a registered "mujoco" driver (physics), when one is installed; else {}."""
    from fdcontrol.drivers.registry import DRIVERS, build_driver

    if "mujoco" not in DRIVERS:
        return {}
    out = {}
    for m in ("constraints", "clamp"):
        try:
            drv = build_driver("mujoco", robot, DT, {"q0": Q0.tolist()})
        except Exception as exc:  # an optional part: report why it did not run, never fail the study
            return {"mujoco": {"skipped": f"{type(exc).__name__}: {exc}"}}
        try:
            out[f"{m} (MuJoCo)"] = metrics(simulate_loop(robot, m, driver=drv), t, 1.0)
        finally:
            drv.close()
    return out


def run(ctx: Context) -> dict:
    ur10 = ctx.robot if ctx.robot.name == "ur10" else RobotModel.load("ur10")
    robot, side = limited_robot(ur10)
    runs = {m: simulate(robot, m) for m in ("constraints", "clamp")}
    t = np.arange(len(runs["clamp"]["q"])) * DT
    res = {m: metrics(r, t, 1.0) for m, r in runs.items()}
    inset = float(loop_inset(ur10)[JOINT])
    lrobot, _ = limited_robot(ur10, inset)
    loops = {m: simulate_loop(lrobot, m) for m in ("constraints", "clamp", "none")}
    lres = {m: metrics(r, t, 1.0) for m, r in loops.items() if m != "none"}
    # envelope only: "at the limit" while the envelope holds the joint at the safety limit
    ln = loops["none"]
    slim = (lrobot.limits.upper if side > 0 else lrobot.limits.lower)[JOINT]
    lres["envelope only"] = envelope_metrics(ln, t, 1.0, (ln["q"][:, JOINT] - slim) * side >= -1e-3)
    envelope_cycles = {m: int(sum(a.get("position", False) for a in r["safety_active"])) for m, r in loops.items()}
    physics = physics_runs(lrobot, t)
    if physics:
        lres.update(physics)
    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    for m, r in runs.items():
        ax[0, 0].plot(t, r["q"][:, JOINT], label=m)
        ax[0, 1].plot(r["tip"][:, 0], r["tip"][:, 2], label=m)
    for m, r in loops.items():
        ax[1, 0].plot(t, r["q_ref"][:, JOINT], label=m)
        ax[1, 1].plot(r["tip"][:, 0], r["tip"][:, 2], label=m)
    limit = robot.limits.upper[JOINT] if side > 0 else robot.limits.lower[JOINT]
    ax[0, 0].axhline(limit, color="k", ls="--", lw=0.8)
    vlim = loops["constraints"]["virtual_upper" if side > 0 else "virtual_lower"][JOINT]
    llim = lrobot.limits.upper[JOINT] if side > 0 else lrobot.limits.lower[JOINT]
    ax[1, 0].axhline(vlim, color="k", ls="--", lw=0.8)
    ax[1, 0].axhline(llim, color="r", ls=":", lw=0.8)
    ax[0, 0].set_title("virtual model: shoulder-lift q₂ (limit dashed)")
    ax[0, 1].set_title("virtual model: tip path x–z (force along +x+z)")
    ax[1, 0].set_title("loop: q₂ reference (virtual limit dashed, safety limit dotted)")
    ax[1, 1].set_title("loop on the simulated arm: tip path x–z")
    for a in ax.flat:
        a.legend()
    folder = ctx.folder("limits")
    save(fig, folder / "limits_constraints_vs_clamp.png")
    hdr = ["method", "mean cos(tip velocity, force)", "along force (m)", "across force (m)", "reached the limit (s)",
           "left it (s)"]

    def rows(rr: dict) -> list:
        return [[m, r["mean_cos_tip_velocity_force"], r["along_force_m"], r["across_force_m"], r["reached_limit_s"],
                 r["left_limit_s"]] for m, r in rr.items() if "skipped" not in r]

    data = {"virtual": res, "loop": lres, "loop_inset_rad": inset, "loop_envelope_active_cycles": envelope_cycles,
            "t": t, "q_joint": {m: r["q"][:, JOINT] for m, r in runs.items()},
            "loop_q_ref_joint": {m: r["q_ref"][:, JOINT] for m, r in loops.items()}}
    write_results(folder, data, f"""# Joint limits: constraints vs clamping — UR10

Shoulder-lift {"upper" if side > 0 else "lower"} limit {MARGIN} rad from the start q = {Q0.tolist()}; force
{FORCE[:3].tolist()} N for 1 s, then reversed. While the joint sits on its limit:

Virtual model alone (FD γ = 1e3, c = 10 1/s):

{table(hdr, rows(res))}
Full loop on the simulated arm (safety limits at their defaults; virtual limit inset {inset:.3f} rad
from the safety limit; "envelope only": no virtual limits, the safety envelope brakes the joint
and holds it at the safety limit, where it is measured):

{table(hdr, rows(lres))}
Cycles in which the safety position envelope acted: {envelope_cycles}. On the MuJoCo arm:
{"not run (no 'mujoco' driver registered)" if not physics else physics.get("mujoco", {}).get(
    "skipped", "rows marked (MuJoCo)")}.

Constraints (Featherstone & Fijany eq. 7 with the active set, the projection of Keerthi et al.) let the other
joints respond as the locked mechanism would; clamping leaves them the motion computed for a
mechanism that could still move the shoulder, so the tip drifts across the force.
""")
    return {"virtual": res, "loop": lres}
