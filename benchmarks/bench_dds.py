"""joint_states-in → command-out latency over DDS on loopback (ROS 2 bridge).

This process plays the ros2_control side (Cyclone DDS pinned to loopback, tests/dds.py);
`fdcontrol serve --driver ros2` runs in its own process with the position interface and no
input, so each command echoes the measured joint positions (q_ref = q + dt·0). Joint 6 of
every joint_states message carries a sequence number (1 µrad steps); the latency of a
sample is the time from publishing it to receiving the first command that echoes it,
including the wait for the next loop cycle (up to one period). Prints p50/p99/max. Not a test.

    python benchmarks/bench_dds.py [--samples 1000] [--rate 500] [--publish 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.dds import dds_domain, loopback_env, pin_loopback

pin_loopback()  # before cyclonedds creates a participant in this process

from cyclonedds.core import Policy  # noqa: E402
from cyclonedds.domain import DomainParticipant  # noqa: E402
from cyclonedds.pub import DataWriter  # noqa: E402
from cyclonedds.qos import Qos  # noqa: E402
from cyclonedds.sub import DataReader  # noqa: E402
from cyclonedds.topic import Topic  # noqa: E402

from fdcontrol.drivers import ros2_msgs as m  # noqa: E402
from fdcontrol.drivers.ros2 import UR_JOINTS  # noqa: E402
from fdcontrol.model.robot import HOME  # noqa: E402
from tests.service import Service  # noqa: E402

STEP = 1e-6  # rad per sequence number on joint 6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--publish", type=float, default=200.0, help="joint_states rate (Hz)")
    args = ap.parse_args()
    domain = dds_domain()
    dp = DomainParticipant(domain)
    qos = Qos(Policy.Reliability.Reliable(max_blocking_time=0), Policy.History.KeepLast(10))
    js_w = DataWriter(dp, Topic(dp, "rt/joint_states", m.JointState), qos=qos)
    cmd_r = DataReader(dp, Topic(dp, "rt/forward_position_controller/commands", m.Float64MultiArray), qos=qos)
    q0 = np.array(HOME["ur10"])
    sent: dict[int, float] = {}
    seq = 0

    def publish() -> None:
        nonlocal seq
        seq += 1
        q = q0.copy()
        q[5] += seq * STEP
        sent[seq] = time.perf_counter()
        js_w.write(m.JointState(m.Header(m.Time.from_seconds(time.time()), "base_link"), list(UR_JOINTS),
                                q.tolist(), [0.0] * 6, []))

    opts = {"domain_id": domain, "interface": "position", "connect_timeout": 20, "timeout": 0.5}
    env = {**loopback_env(), "FDCONTROL_DRIVER_OPTIONS": json.dumps(opts), "FDCONTROL_MODE": "admittance"}
    import threading
    stop = threading.Event()

    def feeder() -> None:  # keeps the service's first read satisfied while it starts
        while not stop.is_set():
            publish()
            time.sleep(1.0 / args.publish)

    t = threading.Thread(target=feeder, daemon=True)
    t.start()
    svc = Service("--driver", "ros2", "--robot", "ur10", "--rate", str(args.rate), env=env)
    latencies: list[float] = []
    try:
        assert httpx.post(svc.url + "/control/start", timeout=5).status_code == 200
        time.sleep(0.5)
        seen = 0
        deadline = time.monotonic() + args.samples / args.publish * 3 + 30
        while len(latencies) < args.samples and time.monotonic() < deadline:
            for s in cmd_r.take(N=64):
                if isinstance(s, m.Float64MultiArray) and len(s.data) == 6:
                    k = round((s.data[5] - q0[5]) / STEP)
                    if k > seen and k in sent:
                        latencies.append(time.perf_counter() - sent[k])
                        seen = k
            time.sleep(0.0002)
    finally:
        stop.set()
        t.join(2)
        svc.stop()
    a = np.array(latencies) * 1e3
    print(f"DDS loopback joint_states → command latency, loop {args.rate:.0f} Hz, joint_states {args.publish:.0f} Hz,"
          f" n={len(a)}: p50 {np.percentile(a, 50):.2f} ms, p99 {np.percentile(a, 99):.2f} ms, max {a.max():.2f} ms")


if __name__ == "__main__":
    main()
