"""What Foxglove live costs: building one tick's messages, and the loop's timing with a viewer attached.

    python benchmarks/bench_foxglove.py [--pairs 2] [--seconds 10.5]

1. The publisher's work per tick (in the API process, never the loop's): ``Scene.messages`` and JSON
   encoding, for the UR10 with two keep-out volumes.
2. The real service (loopback) with ``--foxglove``: paired windows, no viewer / a viewer subscribed to
   every channel and reading: overrun rate and p99 |period error| (/stats, 5000-cycle window = 10 s at
   500 Hz, hence 10.5 s windows), messages received per second. Not a test: numbers depend on the load.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fdcontrol.loop.state import LoopState
from fdcontrol.model.robot import HOME
from fdcontrol.server.settings import Settings
from fdcontrol.viz.scene import Scene, schemas
from tests.service import Service, free_port
from tests.test_foxglove import FoxgloveClient, foxglove_client

VOLUMES = [{"name": "ball", "sphere": {"center": [1.5, -1.2, 1.4], "radius": 0.15}},
           {"name": "crate", "box": {"min": [-1.9, 1.2, 0.1], "max": [-1.5, 1.5, 0.6]}}]


def tick_cost(n: int = 300) -> None:
    p = Settings(keep_out=VOLUMES).model_dump()
    scene = Scene(p)
    q = np.array(HOME["ur10"])
    s = LoopState(t=0.0, cycle=0, q=q, qd=0 * q, q_ref=q, qd_ref=0 * q, tip_pose=scene.robot.pose(q),
                  wrench=np.ones(6), f_measured=np.ones(6), mode=p["mode"], running=True, holding=False,
                  watchdog="ok", seq_ack=0, fault=None, sigma_min_j=0.1)
    for volumes in (False, True):
        t0 = time.perf_counter()
        for _ in range(n):
            for m in scene.messages(s, 1, volumes=volumes).values():
                json.dumps(m)
        print(f"one tick's messages{' with the volumes' if volumes else ''}: "
              f"{(time.perf_counter() - t0) / n * 1e3:.2f} ms (build + JSON)")


def window(http: httpx.Client, seconds: float) -> tuple[float, float]:
    s0 = http.get("/stats").json()
    time.sleep(seconds)
    s1 = http.get("/stats").json()
    return (s1["overruns"] - s0["overruns"]) / max(1, s1["cycles"] - s0["cycles"]), s1["period_error_p99_us"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=10.5)
    args = ap.parse_args()
    tick_cost()
    port = free_port()
    svc = Service("--foxglove", str(port), startup_timeout=300)
    try:
        http = httpx.Client(base_url=svc.url, timeout=30)
        for i in range(args.pairs):
            idle = window(http, args.seconds)
            got, stop = [0], threading.Event()

            def read(got: list[int] = got, stop: threading.Event = stop) -> None:
                with foxglove_client(port) as ws:
                    c = FoxgloveClient(ws)
                    c.subscribe(list(schemas()))
                    while not stop.is_set():
                        try:
                            if c.read(1.0) is not None:
                                got[0] += 1
                        except TimeoutError:
                            pass

            th = threading.Thread(target=read, daemon=True)
            th.start()
            t0 = time.monotonic()
            busy = window(http, args.seconds)
            rate = got[0] / (time.monotonic() - t0)
            stop.set()
            th.join(5)
            print(f"pair {i}: no viewer: overruns {100 * idle[0]:.2f} %, p99 |period error| {idle[1]:.0f} µs; "
                  f"a viewer on every channel ({rate:.0f} messages/s): overruns {100 * busy[0]:.2f} %, "
                  f"p99 {busy[1]:.0f} µs")
    finally:
        svc.stop()


if __name__ == "__main__":
    main()
