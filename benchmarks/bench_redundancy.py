"""Cost of the null-space posture task and link loads per control cycle (Panda, synchronous).

    python benchmarks/bench_redundancy.py [--cycles 3000]

Prints the median and p99 of ControlLoop.step() with nothing, the posture task, posture +
one projected link load, and a streamed twist. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fdcontrol import RobotModel, make_mapping
from fdcontrol.control.link_loads import LinkLoad, LinkLoads, Plane
from fdcontrol.control.posture import PostureTask
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME

DT = 0.002


def run(robot: RobotModel, cycles: int, posture=None, link_loads=None, twist=None) -> np.ndarray:
    sim = SimulatedRobot(robot, dt=DT, q0=np.array(HOME[robot.name]))
    loop = ControlLoop(robot, sim, make_solver(make_mapping("fd", robot)), rate=1 / DT,
                       posture=posture, link_loads=link_loads)
    out = np.zeros(cycles)
    for i in range(cycles):
        if twist is not None:
            loop.set_twist(twist, t=i * DT)
        t0 = time.perf_counter()
        loop.step(now=i * DT)
        out[i] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=3000)
    args = ap.parse_args()
    robot = RobotModel.load("panda")
    wall = LinkLoads(robot, [LinkLoad("panda_link4", Plane([0, 0.05, 0], [0, -1, 0]), margin=0.1)])
    cases = {
        "plain FD": {},
        "posture": {"posture": PostureTask(robot)},
        "posture + link load": {"posture": PostureTask(robot), "link_loads": wall},
        "twist": {"twist": [0.05, 0, 0, 0, 0, 0]},
    }
    for name, kw in cases.items():
        t = run(robot, args.cycles, **kw) * 1e6
        print(f"{name:22s} step p50 {np.percentile(t, 50):7.1f} µs   p99 {np.percentile(t, 99):7.1f} µs")


if __name__ == "__main__":
    main()
