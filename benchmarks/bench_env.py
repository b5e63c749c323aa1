"""Observation age and action delay of the learning interface (ServiceEnv) at policy rates, in one run.

Starts the real service (uvicorn on a free loopback port, MuJoCo arm, loop at ``--loop-rate``), then
for each policy rate runs ``--steps`` ServiceEnv steps of a small back-and-forth delta and prints
p50 / p99 / max of

* observation age: from the loop cycle that produced the observation to ``step()`` returning it,
* action delay: from ``step()`` being called to the first loop cycle whose motion law used the action.

Usage: ``PYTHONPATH=. python benchmarks/bench_env.py --steps 400 --rates 20 50``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fdcontrol.env.service import ServiceEnv
from tests.service import Service


def run(url: str, rate: float, steps: int) -> dict[str, object]:
    env = ServiceEnv(url, rate=rate)
    try:
        env.reset()
        env.timing.__init__()  # count the policy steps only, not the reset
        t0 = time.monotonic()
        for i in range(steps):
            env.step(np.array([0.002 if (i // 20) % 2 == 0 else -0.002, 0, 0, 0, 0, 0]))
            if time.monotonic() - t0 > 4 * steps / rate + 10:  # bounded in time as well as in count
                break
        out = env.timing_summary()
        out["achieved_rate_hz"] = env.timing.action_delay.summary()["n"] / (time.monotonic() - t0)
        return out
    finally:
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--rates", type=float, nargs="+", default=[20.0, 50.0])
    ap.add_argument("--loop-rate", type=float, default=500.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    svc = Service("--rate", str(args.loop_rate))
    try:
        results = {f"{r:g}": run(svc.url, r, args.steps) for r in args.rates}
    finally:
        svc.stop()
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(f"loop {args.loop_rate:g} Hz, {args.steps} steps per policy rate, load average "
          f"{os.getloadavg()[0]:.2f}")
    print("| policy rate | steps | observation age p50 / p99 / max (ms) | action delay p50 / p99 / max (ms) "
          "| missed | late |")
    print("|---|---|---|---|---|---|")
    for r, res in results.items():
        a, d = res["observation_age"], res["action_delay"]  # type: ignore[index]
        print(f"| {r} Hz | {d['n']} | {a['p50'] * 1e3:.2f} / {a['p99'] * 1e3:.2f} / {a['max'] * 1e3:.2f} "
              f"| {d['p50'] * 1e3:.2f} / {d['p99'] * 1e3:.2f} / {d['max'] * 1e3:.2f} "
              f"| {res['missed_actions']} | {res['late_steps']} |")


if __name__ == "__main__":
    main()
