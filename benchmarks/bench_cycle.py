"""Cost of one FD control cycle relative to the lean FD core, and of each stage, in one run, one process.

    PYTHONPATH=. python benchmarks/bench_cycle.py [--cycles 4000] [--rounds 8] [--robots ur10 panda] [--budget S]
                                                  [--json PATH]

Per robot, per call (µs: p50, p99, max), interleaved in rounds so that machine load hits all alike:

* ``core``  — the lean FD core: CRBA (WORLD convention, fills the joint Jacobians), the frame
  Jacobian, pinocchio's Cholesky, q̈ = H⁻¹Jᵀf − c q̇ and one semi-implicit Euler step;
* ``loop``  — ``ControlLoop.step`` of the loop :func:`fdcontrol.loop.build_loop` builds from the default
  parameters (FD with the γ schedule, the default six limits, nothing else configured) on the kinematic
  ``SimulatedRobot`` (its read + send are in the cycle), a wrench held from the start pose (the arm moves for
  about 2000 cycles, then rests stretched at a singular pose: the rounds measure both, the motion first);
  ``loop_singular`` — the same loop held at that singular pose from the start (the γ schedule at its band's
  start: J's SVD, or the certificate from the last one while J stays near it); ``loop_holding`` — the same
  loop held (``hold()``: the braking profile's clamp every cycle, what the arm runs while it idles), once it
  has braked to rest; ``loop_swaying`` below is the arm near its start pose;
  ``set_wrench`` — what a fresh streamed wrench adds per cycle; ``four_limits`` — the same cycle with the
  basic four limits only (the added cost of the default path limits: ``loop`` minus it);
* ``stage:<name>`` — each stage of that cycle, timed inside the cycle (a clock read around each stage's
  ``run``; the cycle with the clocks is timed separately, so ``loop`` is not slowed by them);
* ``with:<part>`` — the full cycle with one more part configured (posture, link loads, workspace
  volumes, reactions, a move, a policy's action, a gain ramp, a law that reads the sensor, the jerk
  limit): its added cost is its p50 minus ``loop``'s;
* parts alone: ``config`` — the Configuration update, ``solver`` — the FD step given it, ``publish`` —
  building the LoopState, ``sim_driver`` — the simulator's read + send, ``limits`` — ``SafetyLimits.apply``
  of the default six, ``limits_four`` — of the basic four, ``limits_np`` — those four written with numpy
  calls; ``shm_today`` / ``shm_derived`` /
  ``dict_derived`` — publishing a state into shared memory (the worker's writer, the derived layout) and
  the JSON/MessagePack dict;
* link geometry (``fdcontrol.model.collision``; 10 keep-out volumes — boxes, spheres, planes, far from the
  arm — for every moving link's capsule, plus self-collision): ``links`` — the distances, witness points
  and rows of every pair (one compiled call), ``links_loads`` — the repulsive loads from them,
  ``links_limit`` — the velocity damper reading them, and ``loop_swaying_links`` — the loop with all of it
  configured under a small swaying wrench (the arm moves every cycle, near HOME), beside
  ``loop_swaying_volumes``, the same loop with the same volumes for the tool only (their difference: the
  links' added cost in the cycle, printed with its goal) and ``loop_swaying``, the loop without volumes;
  ``links:<stage>`` — the stages of that cycle the links run in or add to: ``link_distances`` (computed once
  per cycle), ``volumes_load`` (the repulsive loads), ``link_fault`` (the fault check), ``limits`` (with the
  damper), ``collision_limit`` (the damper's call inside the limits stage); ``links_sum:links`` /
  ``links_sum:tip_only`` — per cycle, the sum of link_distances, volumes_load, link_fault and the damper's
  call with the links, and of volumes_load in the tool-only loop: their p50 difference is the links' added
  cost (goal ≤ 30 µs; printed). Nothing configured costs nothing: the loop has no link stage then.

Every item's ratio to ``core`` is printed for p50 and p99 (goal: loop p50 ≤ 4× core p50). Not a test:
numbers depend on the machine and its load (the 1-min load average is printed).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np
import pinocchio as pin
from benchjson import write_json

from fdcontrol import RobotModel
from fdcontrol.control.gains import GainRamp
from fdcontrol.control.reactions import Rule
from fdcontrol.control.trajectory import Move
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.drivers.simulated import SimulatedSensor
from fdcontrol.limits.safety import BASIC_LIMITS, BRAKING_MARGIN, DEFAULT_LIMITS, SafetyLimits
from fdcontrol.loop import ControlLoop, ForwardDynamicsSolver, build_loop
from fdcontrol.model.robot import HOME

DT = 0.002
WRENCH = np.array([5.0, -3.0, 2.0, 0.1, 0.0, 0.2])
GOAL_RATIO = 4.0
LINKS_GOAL_US = 30.0  # the link geometry's added cost per cycle, p50 (7 links × 10 volumes + self-collision)
#: the stages of the links' loop shown in the table (``links:<stage>``): the links' own, and those they add to
LINK_STAGES = ("link_distances", "volumes_load", "link_fault", "limits")
#: what the links add per cycle: their two stages, the damper's call inside the limits stage (``collision_limit``)
#: and the stage of the repulsive loads (the tool-only loop runs it too, for the tool's volumes)
LINK_WORK = ("link_distances", "volumes_load", "link_fault", "collision_limit")


class LeanCore:
    """CRBA + frame Jacobian + Cholesky + Euler on the virtual model: the floor of a cycle."""

    def __init__(self, solver: ForwardDynamicsSolver) -> None:
        vm = solver.virtual
        self.m, self.d, self.tip, self.c = vm.model, vm.model.createData(), vm.tip_id, solver.decay

    def __call__(self, q: np.ndarray, qd: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m, d = self.m, self.d
        pin.crba(m, d, q, pin.Convention.WORLD)
        J = pin.getFrameJacobian(m, d, self.tip, pin.LOCAL_WORLD_ALIGNED)
        pin.cholesky.decompose(m, d)
        a = pin.cholesky.solve(m, d, J.T.dot(f)) - self.c * qd  # ndarray.dot: the cheapest Jᵀf call
        qd1 = qd + DT * a
        return q + DT * qd1, qd1


def numpy_limits(lim: SafetyLimits):
    """The same four limits written with numpy calls (for the plain-float comparison)."""
    def apply(q, qd, prev, J, dt):
        tw = J @ qd
        s = min(1.0, lim.max_linear_speed / max(np.linalg.norm(tw[:3]), 1e-300),
                lim.max_angular_speed / max(np.linalg.norm(tw[3:]), 1e-300))
        out = qd * s
        du, dl = lim.upper - q, q - lim.lower
        a = lim.max_acceleration
        hi = np.minimum(np.sqrt(2 * BRAKING_MARGIN * a * np.maximum(du, 0)), np.maximum(du, 0) / dt)
        lo = -np.minimum(np.sqrt(2 * BRAKING_MARGIN * a * np.maximum(dl, 0)), np.maximum(dl, 0) / dt)
        out = np.clip(out, lo, hi)
        r = np.max(np.abs(out) / lim.max_velocity)
        if r > 1:
            out = out / r
        step = a * dt
        r = np.max(np.abs(out - prev) / step)
        if r > 1:
            out = prev + (out - prev) / r
        out = np.clip(np.clip(out, lo, hi), prev - step, prev + step)
        hard_hi = np.minimum(lim.max_velocity, np.maximum(du, 0) / dt)
        hard_lo = np.maximum(-lim.max_velocity, -np.maximum(dl, 0) / dt)
        return np.clip(out, hard_lo, hard_hi)
    return apply


def make_loop(robot: RobotModel, sensor: bool = False, **params) -> ControlLoop:
    """The one assembly's loop (default parameters unless given) on the kinematic simulator."""
    sim = SimulatedRobot(robot, dt=DT, q0=np.array(HOME[robot.name]), sensor=SimulatedSensor() if sensor else None)
    return build_loop(driver=sim, robot=robot, rate=1 / DT, **params)


KEEP_OUT = [  # 10 volumes around the arm, out of its reach at HOME (m, base frame)
    *({"name": f"box{i}", "box": {"min": [2.0 + i, -0.2, 0.0], "max": [2.3 + i, 0.2, 0.5]}} for i in range(4)),
    *({"name": f"ball{i}", "sphere": {"center": [-2.0 - i, 0.5, 0.3], "radius": 0.2}} for i in range(3)),
    *({"name": f"wall{i}", "plane": {"point": [0.0, 0.0, -0.5 - i], "normal": [0, 0, 1]}} for i in range(3)),
]


def link_parts(robot: RobotModel):
    """The workspace (repulsive loads) and the damper for KEEP_OUT and self-collision, sharing one Clearance
    as the assembled loop does."""
    loop = links_loop(robot)
    (lim,) = [x for x in loop.limits.limits if x.name == "collision"]
    return loop.task.workspace, lim


def links_loop(robot: RobotModel, links: bool = True) -> ControlLoop:
    """The default loop with KEEP_OUT: for every link (loads, damper, fault check) and self-collision, or
    (``links`` false) for the tool only — the reference the links' added cost is measured against."""
    if links:
        return make_loop(robot, keep_out=KEEP_OUT, self_collision=True)
    return make_loop(robot, keep_out=KEEP_OUT, collision_links="off")


def sway(loop: ControlLoop, now: float) -> None:
    """A small streamed wrench swaying at 0.5 Hz: the arm moves every cycle but stays near HOME."""
    loop.set_wrench(0.3 * WRENCH * math.cos(math.pi * now), t=now)


def hold_wrench(loop: ControlLoop) -> None:
    """One wrench that never goes stale (arrival time far ahead): the cycle without input cost."""
    loop.set_wrench(WRENCH, t=1e12)


def settled(loop: ControlLoop, most: int = 8000) -> ControlLoop:
    """The held loop stepped until the arm rests at its stretched singular pose: 200 cycles in a row with γ at its
    lowest (the γ schedule's band start), at most `most` cycles."""
    run, fd = 0, loop.solver.mapping
    for _ in range(most):
        loop.step(now=0.0)
        run = run + 1 if fd.gamma == fd.gamma0 else 0
        if run >= 200:
            break
    return loop


def configured(robot: RobotModel) -> dict[str, ControlLoop]:
    """The default loop with one more part configured, by the part's name (each keeps its stage busy)."""
    frame = {"ur10": "wrist_3_link", "panda": "panda_link7"}.get(robot.name, robot.model.frames[-1].name)
    far_plane = {"plane": {"point": [0.0, 0.0, -5.0], "normal": [0.0, 0.0, 1.0]}, "margin": 0.05}
    out = {
        "posture": make_loop(robot, posture="on"),
        "link_loads": make_loop(robot, link_loads=[{"link": frame, **far_plane}]),
        "volumes": make_loop(robot, workspace_box={"min": [-3.0, -3.0, -3.0], "max": [3.0, 3.0, 3.0]}),
        "reactions": make_loop(robot),
        "move": make_loop(robot),
        "action": make_loop(robot, mode="compliance"),
        "gain_ramps": make_loop(robot),
        "sensor_law": make_loop(robot, sensor=True, mode="force"),
        "jerk": make_loop(robot, limits=[*DEFAULT_LIMITS, "jerk"]),
    }
    for loop in out.values():
        hold_wrench(loop)
        loop.step(now=0.0)
    out["reactions"].task.request(None, [Rule("never", "force", ">", 1e6)])  # armed, never fires
    s = out["move"].state
    goal = s.tip_pose.copy()
    goal[:3, 3] += [0.0, 0.0, -0.3]
    mv = out["move"]
    mv.task.request(Move(robot, s.tip_pose, mv.period, mv.task.move_limits.scaled(0.01, 0.01), goal_pose=goal))
    act = out["action"]
    act.set_action(act.state.tip_pose, 10.0, 1, t=0.0)  # a goal reached over 10 s (the cycles run at now = 0)
    law = out["gain_ramps"].law.motion
    out["gain_ramps"].task.ramp = GainRamp(law.stiffness, law.damping, 2 * law.stiffness, law.damping, 60.0)
    for loop in out.values():
        loop.step(now=0.0)
    return out


def publish_calls(loop: ControlLoop) -> dict:
    """Publishing a state: the worker's shared-memory writer vs the derived layout."""
    from fdcontrol.loop import state as st

    calls = {}
    try:
        from fdcontrol.server.channel import Channel
    except ImportError:  # the service is not installed: skip the worker's writer
        Channel = None
    layout = st.SharedLayout(extra=("last_cycle_at",))
    buf, shm = layout.empty(), layout.empty()
    s = st.LoopState(**{f.name: getattr(loop.state, f.name) for f in st.FIELDS})

    def pack() -> None:
        layout.pack(s, buf, last_cycle_at=1.0)
        shm[1:] = buf[1:]  # the seqlock's copy into shared memory

    calls["shm_derived"] = pack
    calls["dict_derived"] = lambda: st.to_dict(s)
    if Channel is not None:
        ch = Channel()
        import atexit

        atexit.register(ch.close, unlink=True)
        calls["shm_today"] = lambda: ch.write_state(loop.state, 1.0)
    return calls


class TimedCall:
    """A callable with a clock around it (the damper's ``apply`` inside the limits stage)."""

    def __init__(self, fn, out: list[int]) -> None:
        self.fn, self.out = fn, out

    def __call__(self, *args):
        t = time.perf_counter_ns()
        r = self.fn(*args)
        self.out.append(time.perf_counter_ns() - t)
        return r


class Timed:
    """A stage with a clock around its ``run`` (for the in-cycle table); same name and order."""

    def __init__(self, stage, out: list[int]) -> None:
        self.stage, self.out, self.name, self.order = stage, out, stage.name, stage.order

    def run(self, loop, c) -> None:
        t = time.perf_counter_ns()
        self.stage.run(loop, c)
        self.out.append(time.perf_counter_ns() - t)


def timed(fn, n: int) -> list[float]:
    clock, out = time.perf_counter_ns, []
    for _ in range(n):
        t0 = clock()
        fn()
        out.append(clock() - t0)
    return out


def bench(robot: RobotModel, cycles: int, rounds: int, budget: float = math.inf) -> dict[str, np.ndarray]:
    loop = make_loop(robot)
    core = LeanCore(loop.solver)  # type: ignore[arg-type]
    q, qd = np.array(HOME[robot.name]), np.zeros(robot.dof)
    lim = SafetyLimits.from_robot(robot)
    lim_np = numpy_limits(lim)
    J = robot.jacobian(q)
    qd_des, prev = np.full(robot.dof, 0.3), np.zeros(robot.dof)
    hold_wrench(loop)
    drv = SimulatedRobot(robot, dt=DT, q0=q)
    conf, solver = loop.config, loop.solver
    qc = conf.update(q).q
    fc = WRENCH.copy()
    four = make_loop(robot, limits=list(BASIC_LIMITS))
    hold_wrench(four)
    lim4 = SafetyLimits.from_robot(robot, limits=BASIC_LIMITS)
    singular = make_loop(robot)
    hold_wrench(singular)
    settled(singular)
    holding = make_loop(robot)
    hold_wrench(holding)
    for _ in range(300):  # it moves, then holds and brakes to rest
        holding.step(now=0.0)
    holding.hold()
    for _ in range(300):
        holding.step(now=0.0)
    calls = {"core": lambda: core(q, qd, WRENCH), "loop": lambda: loop.step(now=0.0),
             "loop_singular": lambda: singular.step(now=0.0),
             "loop_holding": lambda: holding.step(now=0.0),
             "four_limits": lambda: four.step(now=0.0),
             "set_wrench": lambda: loop.set_wrench(WRENCH, t=1e12),
             "config": lambda: conf.update(q), "solver": lambda: solver.step(qc, qd, fc, DT, config=conf),
             "publish": lambda: loop._publish(0.0, q, qd, q, qd, conf.pose, fc, fc, "ok", 0.1, False, 1, 0.2),
             "sim_driver": lambda: drv.send(drv.read().q, qd),
             "limits": lambda: lim.apply(q, qd_des, prev, J, DT),
             "limits_four": lambda: lim4.apply(q, qd_des, prev, J, DT),
             "limits_np": lambda: lim_np(q, qd_des, prev, J, DT)}
    calls.update(publish_calls(loop))
    ws, lim_links = link_parts(robot)
    qs, flip = [q, q + 1e-6], [0]  # alternating q: a repeated q would reuse the last distances

    def nxt() -> np.ndarray:
        flip[0] ^= 1
        return qs[flip[0]]

    from fdcontrol.limits.base import Cycle

    calls["links"] = lambda: ws.clearance.compute(nxt())
    calls["links_loads"] = lambda: ws.joint_torque(q, qd_des)  # reading the distances at q (computed once)
    calls["links_limit"] = lambda: lim_links.apply(Cycle(q, prev, J, DT), qd_des.tolist())
    loop2, tip_only, with_links = make_loop(robot), links_loop(robot, links=False), links_loop(robot)
    calls["loop_swaying"] = lambda: (sway(loop2, time.perf_counter()), loop2.step(now=time.perf_counter()))
    calls["loop_swaying_volumes"] = lambda: (sway(tip_only, time.perf_counter()),
                                             tip_only.step(now=time.perf_counter()))
    calls["loop_swaying_links"] = lambda: (sway(with_links, time.perf_counter()),
                                           with_links.step(now=time.perf_counter()))
    # the links' stages inside that cycle and the stages they add to, with the tool-only loop's same stages
    # (a clock around each, own loop objects)
    link_stages: dict[str, dict[str, list[int]]] = {}
    for key, on in (("links", True), ("tip_only", False)):
        lp = links_loop(robot, links=on)
        st = link_stages[key] = {s.name: [] for s in lp.stages}
        lp.stages = [Timed(s, st[s.name]) for s in lp.stages]  # type: ignore[misc]
        lp._wake = False  # the timed stages stay (no recomposition: the parts do not change)
        for part in lp.limits.limits:  # the damper inside the limits stage (the stage's other limits: both loops)
            if part.name == "collision":
                st["collision_limit"] = []
                part.apply = TimedCall(part.apply, st["collision_limit"])  # type: ignore[method-assign]
        calls[f"staged_{key}"] = lambda lp=lp: (sway(lp, time.perf_counter()), lp.step(now=time.perf_counter()))
    for part, other in configured(robot).items():
        calls[f"with:{part}"] = lambda other=other: other.step(now=0.0)
    # the same cycle with a clock around each stage (its own loop object: `loop` runs without clocks)
    staged = make_loop(robot)
    hold_wrench(staged)
    per_stage: dict[str, list[int]] = {s.name: [] for s in staged.stages}
    staged.stages = [Timed(s, per_stage[s.name]) for s in staged.stages]  # type: ignore[misc]
    calls["staged_loop"] = lambda: staged.step(now=0.0)
    for fn in calls.values():  # warm up
        timed(fn, 200)
    for v in (*per_stage.values(), *link_stages["links"].values(), *link_stages["tip_only"].values()):
        v.clear()
    samples: dict[str, list[float]] = {k: [] for k in calls}
    per = max(1, cycles // rounds)
    end = time.monotonic() + budget
    for r in range(rounds):  # every item the same number of calls per round; no new round past the budget
        if r and time.monotonic() > end:
            break
        for k, fn in calls.items():
            samples[k] += timed(fn, per)
    del samples["staged_loop"], samples["staged_links"], samples["staged_tip_only"]
    samples.update({f"stage:{k}": v for k, v in per_stage.items()})
    samples.update({f"links:{k}": v for k, v in link_stages["links"].items() if k in (*LINK_STAGES, *LINK_WORK)})
    # per cycle, the links' own work (their stages and the damper) and the repulsive loads' stage, in both loops:
    # their difference is the links' added cost (the limits stage's other limits are the same in both)
    for key, st in link_stages.items():
        parts = [st[k] for k in LINK_WORK if k in st]
        samples[f"links_sum:{key}"] = list(np.sum([p[:min(map(len, parts))] for p in parts], axis=0))
    return {k: np.array(v) / 1e3 for k, v in samples.items()}


def stage_table(p: dict[str, tuple[float, float, float]]) -> dict[str, tuple[float, float, float]]:
    """The per-stage table from the items' (p50, p99, max): the default cycle and each of its stages as
    measured, then each optional part's added cost — its cycle minus the cycle without it (p50, p99 and
    max differences; a difference of two noisy numbers: negative only within the noise)."""
    out = {"core": p["core"], "default cycle": p["loop"]}
    out.update({k: v for k, v in p.items() if k.startswith("stage:")})

    def diff(a: str, b: str) -> tuple[float, float, float]:
        return (p[a][0] - p[b][0], p[a][1] - p[b][1], p[a][2] - p[b][2])

    out["+ path limits (default)"] = diff("loop", "four_limits")
    for k in p:
        if k.startswith("with:"):
            out[f"+ {k[5:]}"] = diff(k, "loop")
    out["+ link geometry"] = diff("links_sum:links", "links_sum:tip_only")  # its stages, links vs tool only
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=4000, help="timed calls per item (bounded)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--robots", nargs="+", default=["ur10", "panda"])
    ap.add_argument("--budget", type=float, default=math.inf,
                    help="seconds of timed rounds per robot: no new round starts past it (at least one runs), so the "
                         "run ends in bounded time on a loaded machine; the calls made are printed")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON to PATH")
    args = ap.parse_args()
    cycles = min(args.cycles, 100_000)
    load = os.getloadavg()[0]
    report: dict = {"cycles": cycles, "rounds": args.rounds, "loadavg": load, "goal_ratio": GOAL_RATIO,
                    "budget_s": args.budget if math.isfinite(args.budget) else None,
                    "robots": {}}
    print("PYTHONPATH=. python benchmarks/bench_cycle.py " + " ".join(sys.argv[1:]))
    print(f"1-min load average {load:.2f}; goal: loop p50 ≤ {GOAL_RATIO:g}× core p50")
    for name in args.robots:
        robot = RobotModel.load(name)
        r = bench(robot, cycles, args.rounds, args.budget)
        p = {k: (np.percentile(v, 50), np.percentile(v, 99), v.max()) for k, v in r.items()}
        base = p["loop"][0]
        made, full = len(r["core"]), max(1, cycles // args.rounds) * args.rounds
        print(f"\n{name} ({robot.dof} joints), {made} calls each"
              + (f" (of {full}: the time budget of {args.budget:g} s ended the rounds)" if made < full else ""))
        print(f"{'item':>24} {'p50 µs':>8} {'p99 µs':>8} {'max µs':>8} {'p50/core':>9} {'p99/core':>9} {'added':>7}")
        for k, (a, b, m) in p.items():
            added = f"{a - base:7.1f}" if k.startswith("with:") else ""
            print(f"{k:>24} {a:8.1f} {b:8.1f} {m:8.1f} {a / p['core'][0]:9.2f} {b / p['core'][1]:9.2f} {added}")
        print(f"loop / core p50: {base / p['core'][0]:.2f}× (goal ≤ {GOAL_RATIO:g}×: "
              f"{'met' if base <= GOAL_RATIO * p['core'][0] else 'not met'})")
        print(f"\nper-stage cost ({name}): the default cycle, its stages, and what each optional part adds "
              "when configured (p50 difference; × core p50)")
        print(f"{'':>24} {'p50 µs':>8} {'p99 µs':>8} {'max µs':>8} {'× core':>7}")
        for k, (a, b, m) in stage_table(p).items():
            print(f"{k:>24} {a:8.1f} {b:8.1f} {m:8.1f} {a / p['core'][0]:7.2f}")
        added = p["links_sum:links"][0] - p["links_sum:tip_only"][0]
        print(f"link geometry ({len(KEEP_OUT)} volumes × every link + self-collision) added to the cycle, p50: "
              f"{added:.1f} µs ({' + '.join(LINK_WORK)}, per cycle, minus the tool-only loop's volumes_load; "
              f"goal ≤ {LINKS_GOAL_US:g} µs: {'met' if added <= LINKS_GOAL_US else 'not met'}); whole cycles: "
              f"loop_swaying_links − loop_swaying_volumes "
              f"{p['loop_swaying_links'][0] - p['loop_swaying_volumes'][0]:.1f} µs (noisier)")
        report["robots"][name] = {"dof": robot.dof, "calls": len(r["core"]), "items": {
            k: {"p50_us": a, "p99_us": b, "max_us": m, "ratio_p50": a / p["core"][0],
                "ratio_p99": b / p["core"][1]} for k, (a, b, m) in p.items()}, "links_added_p50_us": added}
    write_json(args.json, "cycle", report)


if __name__ == "__main__":
    main()
