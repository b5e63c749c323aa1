"""Cost per control cycle of the task space: workspace volumes (repulsive loads on the tip and the
hard stop limit, also with link origins) and reaction rules, for 1, 10 and 100 volumes or rules, in µs
(p50 / p99 / max); and, once per move rather than per cycle, the check of a move's planned path.

Each call is timed alone with time.perf_counter_ns on the UR10 at random configurations; the
whole loop cycle without a task space (``ControlLoop.step`` on the kinematic simulator) is timed in
the same run for the ratio. Run: ``.venv/bin/python benchmarks/bench_task.py [--calls N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from benchjson import write_json

from fdcontrol import make_mapping
from fdcontrol.control.path_check import path_violations
from fdcontrol.control.reactions import Reactions, Rule, Signals
from fdcontrol.control.trajectory import Move, MoveLimits
from fdcontrol.control.workspace import workspace_from_config
from fdcontrol.drivers.simulated import SimulatedRobot
from fdcontrol.limits.base import Cycle
from fdcontrol.limits.workspace import WorkspaceStop
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME, RobotModel

COUNTS = (1, 10, 100)


def volumes(n: int, rng: np.random.Generator) -> list[dict]:
    """n keep-out volumes far from the arm (spheres, boxes and planes in turn): every one evaluated."""
    out = []
    for i in range(n):
        c = rng.uniform(-3, 3, 3) + [10, 0, 0]
        kind = ("sphere", "box", "plane")[i % 3]
        spec = {"sphere": {"center": c.tolist(), "radius": 0.1}, "box": {"min": c.tolist(), "max": (c + 0.2).tolist()},
                "plane": {"point": [0, 0, -5.0 - i], "normal": [0, 0, 1]}}[kind]
        out.append({"name": f"v{i}", kind: spec})
    return out


def timed(fn, calls: int) -> np.ndarray:
    t = np.empty(calls)
    for i in range(calls):
        t0 = time.perf_counter_ns()
        fn(i)
        t[i] = time.perf_counter_ns() - t0
    return t / 1e3  # µs


def stats(t: np.ndarray) -> dict[str, float]:
    return {"p50_us": float(np.percentile(t, 50)), "p99_us": float(np.percentile(t, 99)), "max_us": float(t.max())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000, help="timed calls per item (bounded to 100000)")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON to PATH")
    args = ap.parse_args()
    calls = min(max(args.calls, 10), 100_000)
    rng = np.random.default_rng(0)
    robot = RobotModel.load("ur10")
    qs = [np.asarray(HOME["ur10"]) + rng.uniform(-0.3, 0.3, robot.dof) for _ in range(64)]
    kin = [robot.kinematics(q) for q in qs]
    qd = rng.uniform(-0.5, 0.5, robot.dof)
    report: dict = {"calls": calls, "items": {}}

    loop = ControlLoop(robot, SimulatedRobot(robot, dt=0.002), make_solver(make_mapping("fd", robot)))
    report["items"]["loop cycle (reference)"] = stats(timed(lambda i: loop.step(), calls))
    for n in COUNTS:
        ws = workspace_from_config(robot, {"min": [-5, -5, -5], "max": [5, 5, 5]}, volumes(n - 1, rng))
        report["items"][f"workspace loads, {n} volumes"] = stats(timed(
            lambda i, ws=ws: ws.tip_wrench(kin[i % 64][0][:3, 3], kin[i % 64][1][:3] @ qd), calls))
        stop = WorkspaceStop(robot, [p for z in ws.zones for p in z.parts()])
        report["items"][f"workspace stop limit, {n} volumes"] = stats(timed(
            lambda i, stop=stop: stop.apply(Cycle(qs[i % 64], qd, kin[i % 64][1], 0.002), qd.tolist()), calls))
        rules = Reactions([Rule(f"r{k}", ("fz", "force", "tool_fx", "tip_speed")[k % 4], ">", 1e9, "hold")
                           for k in range(n)])
        sigs = [Signals(T, J @ qd, rng.normal(0, 5, 6)) for T, J in kin]
        report["items"][f"reaction rules, {n} rules"] = stats(timed(
            lambda i, rules=rules, sigs=sigs: rules.evaluate(sigs[i % 64], i), calls))
    ws = workspace_from_config(robot, {"min": [-5, -5, -5], "max": [5, 5, 5]}, volumes(9, rng))
    for links in (["forearm_link"], ["upper_arm_link", "forearm_link", "wrist_1_link"]):
        stop = WorkspaceStop(robot, [p for z in ws.zones for p in z.parts()], links=links)
        report["items"][f"workspace stop, 10 volumes, +{len(links)} links"] = stats(timed(
            lambda i, stop=stop: stop.apply(Cycle(qs[i % 64], qd, kin[i % 64][1], 0.002), qd.tolist()), calls))
    # once per move (at planning time, not per cycle): the path check of a 25 cm move, 10 volumes
    T0 = robot.pose(np.asarray(HOME["ur10"]))
    goal = T0.copy()
    goal[:3, 3] += [0.25, 0.0, 0.0]
    moves = min(calls, 50)
    report["items"]["path check per move, 10 volumes"] = stats(timed(
        lambda i: path_violations(Move(robot, T0, 0.002, MoveLimits(), goal_pose=goal), ws), moves))
    ref = report["items"]["loop cycle (reference)"]["p50_us"]
    print(f"UR10, {calls} calls each (µs)")
    print(f"{'item':>40} {'p50':>8} {'p99':>8} {'max':>8} {'p50/cycle':>10}")
    for k, v in report["items"].items():
        print(f"{k:>40} {v['p50_us']:8.1f} {v['p99_us']:8.1f} {v['max_us']:8.1f} {v['p50_us'] / ref:10.2f}")
    write_json(args.json, "task", report)


if __name__ == "__main__":
    main()
