"""Push the simulated arm around with a sinusoidal wrench and print what happens.

    make serve &            # or: fdcontrol serve
    python examples/push_sinusoid.py [--url http://127.0.0.1:8000] [--seconds 4]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from fdcontrol.client import Client


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--amplitude", type=float, default=10.0, help="N")
    ap.add_argument("--period", type=float, default=2.0, help="s")
    args = ap.parse_args()
    with Client(args.url) as c:
        c.patch_config(mode="admittance")
        c.start()
        p0 = np.array(c.state()["tip_pose"])[:3, 3]
        print(f"tip starts at {np.round(p0, 4)} m; pushing ±{args.amplitude} N along x, y")
        with c.control_stream(decimation=25) as s:  # 20 Hz of state at 500 Hz
            t0 = time.monotonic()
            last_print = 0.0
            while (t := time.monotonic() - t0) < args.seconds:
                w = args.amplitude * math.sin(2 * math.pi * t / args.period)
                v = args.amplitude * math.cos(2 * math.pi * t / args.period)
                s.send_wrench([w, v, 0, 0, 0, 0])
                try:
                    m = s.recv(timeout=0.01)
                except TimeoutError:
                    continue
                if t - last_print > 0.25:
                    last_print = t
                    p = np.array(m["tip_pose"])[:3, 3] - p0
                    speed = max(abs(x) for x in m["qd_ref"])
                    print(f"t={t:4.2f}s  f=({w:6.2f},{v:6.2f}) N  tip Δ=({p[0]:+.3f},{p[1]:+.3f},{p[2]:+.3f}) m"
                          f"  max|q̇_ref|={speed:.3f} rad/s  σmin(J)={m['sigma_min_j']:.3f}  {m['watchdog']}")
        time.sleep(0.3)
        st = c.state()
        print(f"stream stopped → watchdog {st['watchdog']}, max|q̇_ref| = {max(map(abs, st['qd_ref'])):.4f}")
        stats = c.stats()
        print(f"loop: {stats['cycles']} cycles, period error p50/p99/max = {stats['period_error_p50_us']:.0f}/"
              f"{stats['period_error_p99_us']:.0f}/{stats['period_error_max_us']:.0f} µs, "
              f"overruns {stats['overruns']}")


if __name__ == "__main__":
    main()
