"""Physics cost per control cycle (MuJoCo sub-steps inside send) next to the controller's.

    python benchmarks/bench_physics.py [--cycles 2000] [--robots ur10 panda] [--timestep 0.0005]

The loop is stepped synchronously (loop.step) at 500 Hz in force mode with a hand pushing the
tool; "physics" is the time inside driver.send (all sub-steps + sensors), "controller" the
rest of the cycle (kinematics, sensor model, law, FD solver, limits). Prints p50/p99 in µs.
Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fdcontrol import RobotModel
from fdcontrol.experiments import physics as P


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=2000)
    ap.add_argument("--robots", nargs="+", default=["ur10", "panda"])
    ap.add_argument("--modes", nargs="+", default=["velocity", "position"])
    args = ap.parse_args()
    n = max(10, min(args.cycles, 100_000))
    print(f"{'robot':6} {'servo':8} {'substeps':>8} | physics µs p50/p99 | controller µs p50/p99 | physics share")
    for name in args.robots:
        robot = RobotModel.load(name)
        for mode in args.modes:
            rig = P.rig(robot, "fd", mode, law=P.force_law())
            rig.drv.set_push(np.array([2.0, 0, 0, 0, 0, 0]))
            send, phys = rig.drv.send, []

            def timed(q_ref, qd_ref, send=send, phys=phys):
                t = time.perf_counter()
                send(q_ref, qd_ref)
                phys.append(time.perf_counter() - t)

            rig.drv.send = timed  # type: ignore[method-assign]
            total = []
            for i in range(n):
                t = time.perf_counter()
                rig.loop.step(now=i * P.DT)
                total.append(time.perf_counter() - t)
            ph, ctl = np.array(phys[-n:]) * 1e6, (np.array(total) - np.array(phys[-n:])) * 1e6
            print(f"{name:6} {mode:8} {rig.drv.nsub:8d} | {np.percentile(ph, 50):7.1f} {np.percentile(ph, 99):7.1f}"
                  f"    | {np.percentile(ctl, 50):7.1f} {np.percentile(ctl, 99):7.1f}       | "
                  f"{np.median(ph) / np.median(ph + ctl):.0%}")


if __name__ == "__main__":
    main()
