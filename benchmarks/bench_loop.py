"""Period error and compute time of the threaded control loop on the simulated UR10.

    python benchmarks/bench_loop.py [--seconds 5] [--rates 500 1000] [--realtime]

Prints p50/p99/max of |period error| and of the cycle compute time. Not a test: numbers
depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fdcontrol import RobotModel, make_mapping
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.loop import ControlLoop
from fdcontrol.solvers import make_solver


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rates", type=float, nargs="+", default=[500.0, 1000.0])
    ap.add_argument("--mapping", default="fd")
    ap.add_argument("--realtime", action="store_true", help="try SCHED_FIFO for the loop thread")
    ap.add_argument("--spin", type=float, default=0.0, help="busy-wait before each deadline (s)")
    args = ap.parse_args()
    robot = RobotModel.load("ur10")
    q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
    print(f"{'rate':>6} {'cycles':>7} {'overruns':>8} | period error µs p50/p99/max | compute µs p50/p99/max")
    for rate in args.rates:
        sim = SimulatedRobot(robot, dt=1 / rate, q0=q0)
        loop = ControlLoop(robot, sim, make_solver(make_mapping(args.mapping, robot)), rate=rate,
                           realtime=args.realtime, spin=args.spin)
        loop.start()
        t_end = time.monotonic() + args.seconds
        k = 0
        while time.monotonic() < t_end:  # a live wrench stream at ~100 Hz
            loop.set_wrench([5 * np.sin(k * 0.05), 5 * np.cos(k * 0.05), 0, 0, 0, 0])
            k += 1
            time.sleep(0.01)
        loop.stop()
        s = loop.stats.summary()
        print(f"{rate:6.0f} {s['cycles']:7d} {s['overruns']:8d} | "
              f"{s['period_error_p50_us']:7.1f} {s['period_error_p99_us']:7.1f} "
              f"{s['period_error_max_us']:8.1f} | {s['compute_p50_us']:6.1f} "
              f"{s['compute_p99_us']:6.1f} {s['compute_max_us']:7.1f}")


if __name__ == "__main__":
    main()
