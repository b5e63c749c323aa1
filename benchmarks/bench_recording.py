"""What recording costs the loop, and what it writes.

    python benchmarks/bench_recording.py [--pairs 3] [--seconds 10.5]

1. The loop thread's share: ``StateRing.push`` per cycle, active and inactive.
2. The real service (loopback), paired windows recording off / on: overrun rate, p99 |period
   error| (/stats, whose window is 5000 cycles = 10 s at 500 Hz, hence 10.5 s windows), states
   written and dropped, bytes per second. Not a test: numbers depend on the machine's load.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fdcontrol.loop.cycle import Stats
from fdcontrol.server.record_ring import StateRing
from fdcontrol.server.shm_layout import OUT_SIZE
from tests.service import Service


def ring_cost(n: int = 20000) -> None:
    r = StateRing("bench" + uuid.uuid4().hex[:8], create=True)
    st = Stats()
    for _ in range(10):
        st.record(1e-4, 1e-5, 2e-3)
    loop, v = SimpleNamespace(stats=st, last_cycle_at=time.monotonic()), np.random.rand(OUT_SIZE)
    for active in (True, False):
        r.set_active(active)
        t0 = time.perf_counter()
        for _ in range(n):
            r.push(v, loop)
        cost = (time.perf_counter() - t0) / n * 1e6
        print(f"StateRing.push ({'recording' if active else 'idle'}): {cost:.2f} µs/cycle")
    r.close(unlink=True)


def window(http: httpx.Client, seconds: float) -> tuple[float, float]:
    s0 = http.get("/stats").json()
    time.sleep(seconds)
    s1 = http.get("/stats").json()
    return (s1["overruns"] - s0["overruns"]) / max(1, s1["cycles"] - s0["cycles"]), s1["period_error_p99_us"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.5)
    args = ap.parse_args()
    ring_cost()
    with tempfile.TemporaryDirectory() as d:
        svc = Service("--record-dir", d)
        try:
            http = httpx.Client(base_url=svc.url, timeout=30)
            http.post("/control/start")
            for i in range(args.pairs):
                off = window(http, args.seconds)
                http.post("/recording/start", json={"name": f"bench-{i}.mcap"})
                on = window(http, args.seconds)
                st = http.post("/recording/stop").json()
                print(f"pair {i}: overruns off {off[0]:.4f} / on {on[0]:.4f}; p99 |period error| off {off[1]:.0f} µs"
                      f" / on {on[1]:.0f} µs; {st['states']} states, {st['dropped']} dropped, "
                      f"{st['bytes'] / st['duration_s'] / 1024:.0f} KiB/s")
        finally:
            svc.stop()


if __name__ == "__main__":
    main()
