"""The robot-paced loop at a Franka's 1 kHz, with /ws/state readers: compute time per cycle,
missed cycles, the robot's success rate.

Starts franky-sim (a simulator of the libfranka network protocol, MuJoCo physics) in its own
process on a loopback address, then ``fdcontrol serve --robot fr3 --driver franka`` (real
uvicorn on 127.0.0.1), starts the loop, connects ``--watchers`` /ws/state readers (a child
process) and streams a slowly turning wrench for ``--seconds`` of wall time. Prints the
loop's compute time per cycle (p50/p99/max, from the state's arrival to the command's
departure), the robot-side cycles (states the simulator sent), the cycles that passed without
a command, and the success rate the robot reports. Bounded in time; loopback only. Not a test:
numbers depend on the machine and its load — franky-sim itself is a Python process whose
MuJoCo step has to fit in 1 ms, so on a small machine the robot's clock runs slower than
real time (the ratio is printed).

    PYTHONPATH=. python benchmarks/bench_franka.py [--seconds 60] [--watchers 50] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import httpx
from benchjson import write_json

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_ws_latency import stop_watchers, watchers  # noqa: E402

from tests.service import Service  # noqa: E402
from tests.test_franka import FrankaSim  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--watchers", type=int, default=50)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    seconds, n = min(max(args.seconds, 1.0), 600.0), min(max(args.watchers, 0), 500)
    host = f"127.23.{random.randint(1, 254)}.{random.randint(1, 254)}"
    sim = FrankaSim(host)
    opts = {"robot_ip": host, "realtime": "ignore", "state_timeout": 1.0}
    svc = Service("--robot", "fr3", "--driver", "franka",
                  env={"FDCONTROL_DRIVER_OPTIONS": json.dumps(opts), "FDCONTROL_COMMAND_TIMEOUT": "1.0"})
    try:
        assert httpx.post(svc.url + "/control/start", timeout=10).status_code == 200
        p = watchers(svc.url, n, 10) if n else None
        note = ""
        try:
            s0 = httpx.get(svc.url + "/stats", timeout=10).json()
            t_robot0 = httpx.get(svc.url + "/state", timeout=10).json()["t"]
            start = time.monotonic()
            for _ in range(int(seconds / 0.02) + 1):  # bounded in count and time
                el = time.monotonic() - start
                if el >= seconds:
                    break
                w = [2.0 * math.cos(0.5 * el), 2.0 * math.sin(0.5 * el), 0, 0, 0, 0]  # N, turning
                httpx.put(svc.url + "/control/wrench", json={"wrench": w}, timeout=5)
                time.sleep(0.02)
            wall = time.monotonic() - start
            s1 = httpx.get(svc.url + "/stats", timeout=10).json()
            st = httpx.get(svc.url + "/state", timeout=10).json()
        finally:
            if p is not None:
                note = stop_watchers(p)
        httpx.post(svc.url + "/control/stop", timeout=10)
    finally:
        svc.stop()
        sim.stop()
    robot_s = st["t"] - t_robot0
    cycles = s1["cycles"] - s0["cycles"]
    res = {"seconds": wall, "watchers": n, "robot_seconds": robot_s, "robot_clock_ratio": robot_s / wall,
           "cycles": cycles, "compute_p50_us": s1["compute_p50_us"], "compute_p99_us": s1["compute_p99_us"],
           "compute_max_us": s1["compute_max_us"], "overruns": s1["overruns"],
           "missed_cycles": s1["robot_missed_cycles"] - (s0["robot_missed_cycles"] or 0),
           "success_rate": s1["robot_success_rate"], "fault": st["fault"], "stats_window": s1["window"]}
    print(f"robot-paced 1 kHz, {n} /ws/state watchers, {wall:.1f} s wall = {robot_s:.1f} s of robot time "
          f"(robot clock / wall {res['robot_clock_ratio']:.2f}); {cycles} cycles")
    print(f"compute per cycle (last {s1['window']} cycles): p50 {res['compute_p50_us']:.0f} µs, "
          f"p99 {res['compute_p99_us']:.0f} µs, max {res['compute_max_us']:.0f} µs; compute > 1 ms: {res['overruns']}")
    print(f"missed cycles {res['missed_cycles']} of {cycles + res['missed_cycles']}; robot success rate "
          f"{res['success_rate']}; fault {res['fault']}{note}")
    write_json(args.json, "franka", res)


if __name__ == "__main__":
    main()
