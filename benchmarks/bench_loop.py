"""Period error and compute time of the threaded control loop (simulated arm), idle and busy.

    python benchmarks/bench_loop.py [--seconds 30] [--rate 1000] [--realtime] [--spin 0.0002]
                                    [--robot ur10] [--mapping fd] [--hogs 1] [--json PATH]

Two windows in one run, one after the other with a fresh loop each: ``idle`` (only this
process and whatever else the machine runs) and ``busy`` (plus ``--hogs`` CPU hog processes,
each a Python busy loop). The loop streams a wrench at ~100 Hz from the main thread, like a
client would. ``--realtime`` asks for SCHED_FIFO for the loop thread (needs CAP_SYS_NICE; the
line says whether it was granted); ``--spin`` busy-waits the last seconds before each deadline.

Per window: cycles, overruns (% of cycles whose compute or period error exceeded the period),
|period error| p50/p99/max and compute p50/p99/max (µs), over every cycle of the window.
Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
from benchjson import write_json

from fdcontrol import RobotModel, make_mapping
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.loop.cycle import ControlLoop, Stats
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME

HOG = "while True: pass"


def window(robot: RobotModel, args: argparse.Namespace) -> tuple[dict, bool]:
    """Run one loop for ``args.seconds``; its stats over every cycle and whether SCHED_FIFO held."""
    rate = args.rate
    sim = SimulatedRobot(robot, dt=1 / rate, q0=np.array(HOME[robot.name]))
    loop = ControlLoop(robot, sim, make_solver(make_mapping(args.mapping, robot)), rate=rate,
                       realtime=args.realtime, spin=args.spin)
    loop.stats = Stats(int(args.seconds * rate * 1.2) + 1000)
    loop.start()
    time.sleep(0.2)
    fifo = _is_fifo(loop)
    t_end = time.monotonic() + args.seconds
    k = 0
    while time.monotonic() < t_end:  # a live wrench stream at ~100 Hz
        loop.set_wrench([5 * np.sin(k * 0.05), 5 * np.cos(k * 0.05), 0, 0, 0, 0])
        k += 1
        time.sleep(0.01)
    loop.stop()
    return loop.stats.summary(), fifo


def _is_fifo(loop: ControlLoop) -> bool:
    tid = getattr(loop._thread, "native_id", None)
    try:
        return tid is not None and os.sched_getscheduler(tid) == os.SCHED_FIFO
    except (AttributeError, OSError):
        return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0, help="length of each window (s)")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--robot", default="ur10")
    ap.add_argument("--mapping", default="fd")
    ap.add_argument("--realtime", action="store_true", help="SCHED_FIFO for the loop thread")
    ap.add_argument("--spin", type=float, default=0.0, help="busy-wait before each deadline (s)")
    ap.add_argument("--hogs", type=int, default=1, help="CPU hog processes in the busy window")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON to PATH")
    args = ap.parse_args()
    robot = RobotModel.load(args.robot)
    print(f"{args.robot} {args.mapping} at {args.rate:.0f} Hz, {args.seconds:.0f} s per window, "
          f"realtime={args.realtime} spin={args.spin * 1e6:.0f} µs, {os.cpu_count()} CPUs, hogs={args.hogs}")
    print(f"{'window':>6} {'fifo':>5} {'cycles':>7} {'overrun%':>8} | period error µs p50/p99/max"
          f" | compute µs p50/p99/max")
    report: dict = {"robot": args.robot, "mapping": args.mapping, "rate_hz": args.rate, "seconds": args.seconds,
                    "realtime": args.realtime, "spin_s": args.spin, "hogs": args.hogs, "windows": {}}
    for name in ("idle", "busy"):
        hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs if name == "busy" else 0)]
        try:
            s, fifo = window(robot, args)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        pct = 100.0 * s["overruns"] / max(s["cycles"], 1)
        print(f"{name:>6} {fifo!s:>5} {s['cycles']:7d} {pct:8.3f} | "
              f"{s['period_error_p50_us']:7.1f} {s['period_error_p99_us']:7.1f} {s['period_error_max_us']:8.1f} | "
              f"{s['compute_p50_us']:6.1f} {s['compute_p99_us']:6.1f} {s['compute_max_us']:7.1f}", flush=True)
        report["windows"][name] = {"fifo": fifo, "overrun_pct": pct, **s}
    write_json(args.json, "loop", report)


if __name__ == "__main__":
    main()
