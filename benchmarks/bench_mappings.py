"""Per-call cost of q̈ = M(q) f for each mapping (seed 004 section 4.5, f = 1).

    python benchmarks/bench_mappings.py [--calls 20000] [--robot ur10]

Each call includes the Jacobian (and H for FD) at a fresh random q, as a control cycle
would. Prints median / p90 in µs and the ratio to DLS. Not a test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fdcontrol import RobotModel, make_mapping


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--robot", default="ur10")
    args = ap.parse_args()
    robot = RobotModel.load(args.robot)
    rng = np.random.default_rng(0)
    qs = [robot.random_q(rng) for _ in range(args.calls)]
    f = np.ones(6)
    fd_c, fd_a = make_mapping("fd", robot), make_mapping("fd", robot, algorithm="aba")
    sdls = make_mapping("sdls", robot)
    calls = {
        "jt": lambda q, m=make_mapping("jt", robot): m.joint_space(q) @ f,
        "ji": lambda q, m=make_mapping("ji", robot): m.joint_space(q) @ f,
        "dls": lambda q, m=make_mapping("dls", robot): m.joint_space(q) @ f,
        "sdls": lambda q: sdls.solve(q, f),
        "fd (crba+cholesky)": lambda q: fd_c.virtual.acceleration(q, f),
        "fd (aba)": lambda q: fd_a.virtual.acceleration(q, f, algorithm="aba"),
    }
    times = {}
    for name, fn in calls.items():
        t = np.empty(args.calls)
        for i, q in enumerate(qs):
            t0 = time.perf_counter()
            fn(q)
            t[i] = time.perf_counter() - t0
        times[name] = t * 1e6
    ref = np.median(times["dls"])
    print(f"{args.robot}, {args.calls} calls each (µs):")
    for name, t in times.items():
        print(f"  {name:20s} median {np.median(t):6.1f}  p90 {np.percentile(t, 90):6.1f}  "
              f"/DLS {np.median(t) / ref:4.2f}")


if __name__ == "__main__":
    main()
