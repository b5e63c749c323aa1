"""Per-call cost of q̈ = M(q) f for each mapping (seed 004 section 4.5, f = 1).

    python benchmarks/bench_mappings.py [--calls 20000] [--robot ur10]

Same measurement as `fdcontrol experiments timing` (fdcontrol/experiments/timing.py),
printed without the plot. Not a test.
"""

from __future__ import annotations

import argparse

import numpy as np

from fdcontrol import RobotModel
from fdcontrol.experiments.batch import uniform_q
from fdcontrol.experiments.timing import measure


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--robot", default="ur10")
    args = ap.parse_args()
    robot = RobotModel.load(args.robot)
    times = {k: v * 1e6 for k, v in measure(robot, uniform_q(robot, args.calls, np.random.default_rng(0))).items()}
    ref = np.median(times["DLS"])
    print(f"{args.robot}, {args.calls} calls each (µs):")
    for name, t in times.items():
        print(f"  {name:20s} median {np.median(t):6.1f}  p90 {np.percentile(t, 90):6.1f}  "
              f"/DLS {np.median(t) / ref:4.2f}")


if __name__ == "__main__":
    main()
