"""Plays the ros2_control side over DDS (run as a separate process): publishes joint_states
(shuffled order, one extra joint) and a wrench, integrates the commanded velocities
(or takes the commanded positions). Prints `q <json>` lines on stdout every 0.1 s.

    python -m tests.ros2_peer DOMAIN INTERFACE Q0_JSON WRENCH_JSON [SECONDS]
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

from tests.dds import pin_loopback

pin_loopback()  # before cyclonedds makes a participant

from cyclonedds.core import Policy  # noqa: E402
from cyclonedds.domain import DomainParticipant  # noqa: E402
from cyclonedds.pub import DataWriter  # noqa: E402
from cyclonedds.qos import Qos  # noqa: E402
from cyclonedds.sub import DataReader  # noqa: E402
from cyclonedds.topic import Topic  # noqa: E402

from fdcontrol.drivers import ros2_msgs as m  # noqa: E402
from fdcontrol.drivers.ros2 import UR_JOINTS  # noqa: E402

ORDER = [4, 2, 0, 5, 1, 3]  # the order joint_states lists the joints in (not the model's)


def main() -> None:
    domain, interface = int(sys.argv[1]), sys.argv[2]
    q = json.loads(sys.argv[3])
    wrench = json.loads(sys.argv[4])
    seconds = float(sys.argv[5]) if len(sys.argv) > 5 else 60.0
    with contextlib.suppress(OSError):  # a robot is a machine of its own: its stand-in must not be starved
        os.nice(-10)  # by the test machine's load for a whole joint_states timeout (where permitted)
    dp = DomainParticipant(domain)
    qos = Qos(Policy.Reliability.Reliable(max_blocking_time=0), Policy.History.KeepLast(10))
    js_w = DataWriter(dp, Topic(dp, "rt/joint_states", m.JointState), qos=qos)
    ft_w = DataWriter(dp, Topic(dp, "rt/force_torque_sensor_broadcaster/wrench", m.WrenchStamped), qos=qos)
    cmd_r = DataReader(dp, Topic(dp, f"rt/forward_{interface}_controller/commands", m.Float64MultiArray), qos=qos)
    dt, v = 0.004, [0.0] * 6
    t_end, next_print = time.monotonic() + seconds, 0.0
    while time.monotonic() < t_end:
        for s in cmd_r.take(N=64):
            if isinstance(s, m.Float64MultiArray) and len(s.data) == 6:
                if interface == "velocity":
                    v = list(s.data)
                else:
                    q = list(s.data)
        if interface == "velocity":
            q = [qi + dt * vi for qi, vi in zip(q, v, strict=True)]
        now = time.time()
        names = [UR_JOINTS[i] for i in ORDER] + ["gripper_finger_joint"]
        js = m.JointState(m.Header(m.Time.from_seconds(now), "base_link"), names,
                          [q[i] for i in ORDER] + [0.01], [v[i] for i in ORDER] + [0.0], [])
        js_w.write(js)
        ft_w.write(m.WrenchStamped(m.Header(m.Time.from_seconds(now), "tool0"),
                                   m.Wrench(m.Vector3(*wrench[:3]), m.Vector3(*wrench[3:]))))
        if time.monotonic() > next_print:
            print("q " + json.dumps(q), flush=True)
            next_print = time.monotonic() + 0.1
        time.sleep(dt)


if __name__ == "__main__":
    main()
