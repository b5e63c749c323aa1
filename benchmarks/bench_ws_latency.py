"""Wrench-in → reference-out latency over WebSocket on loopback.

Starts the service (simulated UR10) on a free port, streams wrenches with sequence numbers
on /ws/control at decimation 1 and measures the time until a state acknowledging each
sequence number arrives. Prints p50/p99/max. Not a test.

    python benchmarks/bench_ws_latency.py [--samples 500] [--rate 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fdcontrol.client import Client
from tests.service import Service


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--rate", type=float, default=500.0)
    args = ap.parse_args()
    svc = Service("--rate", str(args.rate))
    try:
        with Client(svc.url) as c, c.control_stream(decimation=1) as s:
            c.start()
            lat = []
            for i in range(args.samples):
                t0 = time.perf_counter()
                seq = s.send_wrench([2.0 * np.sin(i / 20), 0, 0, 0, 0, 0])
                while True:
                    m = s.recv(timeout=1.0)
                    if m.get("seq_ack", 0) >= seq:
                        lat.append(time.perf_counter() - t0)
                        break
                time.sleep(0.005)
            st = c.stats()
    finally:
        svc.stop()
    us = np.array(lat) * 1e6
    print(f"rate {args.rate:.0f} Hz, {len(us)} samples: wrench→reference latency "
          f"p50 {np.percentile(us, 50):.0f} µs, p99 {np.percentile(us, 99):.0f} µs, max {us.max():.0f} µs")
    print(f"loop during the run: period error p50/p99/max {st['period_error_p50_us']:.0f}/"
          f"{st['period_error_p99_us']:.0f}/{st['period_error_max_us']:.0f} µs, overruns {st['overruns']}"
          f" of {st['cycles']}")


if __name__ == "__main__":
    main()
