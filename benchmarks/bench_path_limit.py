"""Cost of the path_acceleration limit: SafetyLimits.apply with the default four limits (compiled
kernel where numba is installed) and with path_acceleration added (the composed Python path).

    python benchmarks/bench_path_limit.py [--calls 20000] [--robots ur10 panda]

Inputs are random joint velocities whose change exceeds the acceleration limit (the limit acts
in every call). Prints p50/p99 in µs and the ratio, measured in one run, interleaved.
Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fdcontrol import RobotModel
from fdcontrol.limits.safety import DEFAULT_LIMITS, SafetyLimits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--robots", nargs="+", default=["ur10", "panda"])
    args = ap.parse_args()
    n = max(100, min(args.calls, 1_000_000))
    print(f"{'robot':6} | default four µs p50/p99 | + path_acceleration µs p50/p99 | ratio p50")
    for name in args.robots:
        robot = RobotModel.load(name)
        rng = np.random.default_rng(0)
        sets = {"default": SafetyLimits.from_robot(robot),
                "path": SafetyLimits.from_robot(robot, limits=(*DEFAULT_LIMITS, "path_acceleration"))}
        q = 0.5 * (robot.limits.lower + robot.limits.upper)
        J = robot.jacobian(q)
        times: dict[str, list[float]] = {k: [] for k in sets}
        for _ in range(n):
            prev = rng.normal(size=robot.dof) * 0.2
            qd = prev * 1.5
            for k, lim in sets.items():
                t = time.perf_counter()
                lim.apply(q, qd, prev, J, 0.002)
                times[k].append(time.perf_counter() - t)
        d, p = (np.array(times[k]) * 1e6 for k in ("default", "path"))
        print(f"{name:6} | {np.percentile(d, 50):8.1f} {np.percentile(d, 99):8.1f}        | "
              f"{np.percentile(p, 50):8.1f} {np.percentile(p, 99):8.1f}               | "
              f"{np.median(p) / np.median(d):.1f}×")


if __name__ == "__main__":
    main()
