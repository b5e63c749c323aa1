"""A Franka FR3 on loopback for the tests: franky-sim (MuJoCo physics, the libfranka network
protocol), run as its own process (pylibfranka's connect holds the GIL: the simulator must not
share a process with the client), recording every command it receives.

    python tests/franka_sim_peer.py --hostname 127.0.0.1 --record /tmp/cmds.bin

Prints ``READY <hostname>`` on stdout once it serves. With ``--record`` each UDP command the
simulator receives is appended to the file as one row of float64 (``RECORD_COLUMNS``): the
simulator's time, the command's message id, motion_finished, then the commanded joint
velocities dq_c (7), joint positions q_c (7), and the flange position measured by the
simulator at that moment (O_T_EE · F_T_EE⁻¹, 3, m) — the flange is read on the simulator's side —,
the impedance controller the simulator runs (0 joint, 1 Cartesian, 2 none), the robot's desired
joint positions q_d (7, rad), the measured joint positions q (7, rad) and velocities dq (7, rad/s) at
that moment, and the simulator's tick (the id of the state it sends next).

Only 127.0.0.0/8: the simulator's UDP socket is bound to the hostname, not to 0.0.0.0. Without a
client the simulator only takes connections (every 2 ms): its physics and its 1 kHz states run
while a client is connected.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import signal
import socket
import sys
import threading
import time

import numpy as np

RECORD_COLUMNS = ("t", "message_id", "finished", *(f"dq_c{i}" for i in range(7)),
                  *(f"q_c{i}" for i in range(7)), "flange_x", "flange_y", "flange_z",
                  "impedance", *(f"q_d{i}" for i in range(7)), *(f"q{i}" for i in range(7)),
                  *(f"dq{i}" for i in range(7)), "tick")
#: ``impedance``: the simulator's impedance controller when the command arrived: 0 joint, 1 Cartesian,
#: 2 none (no motion); ``q_d``: the robot's desired joint positions at that moment (rad); ``q``, ``dq``: the
#: measured joint state then; ``tick``: the id of the state the simulator sends next
COLUMN = {name: i for i, name in enumerate(RECORD_COLUMNS)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hostname", required=True)
    ap.add_argument("--record", default=None)
    ap.add_argument("--q0", default=None, help="initial joint positions, comma-separated (rad)")
    args = ap.parse_args()
    if not ipaddress.ip_address(args.hostname).is_loopback:
        sys.exit("franka_sim_peer: loopback addresses only")
    raise_priority()

    from franky_sim import SimulationServer
    from franky_sim import franka_robot_server as frs
    from franky_sim import franka_server as fs
    from franky_sim.mujoco_simulator import MujocoSimulator

    host = args.hostname

    def setup_udp(self, network_udp_port: int) -> None:  # the upstream binds 0.0.0.0
        self._FrankaServer__client_udp_port = network_udp_port
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((host, 0))
        s.setblocking(False)
        self._FrankaServer__udp_socket = s
        self._FrankaServer__udp_receiver = fs.NonBlockingReceiver(s)
        self._FrankaServer__message_id = 0

    fs.FrankaServer._setup_udp_connection = setup_udp

    rows: list[np.ndarray] = []
    lock = threading.Lock()
    original = frs.FrankaRobotServer._handle_udp_command

    def handle(self, data: bytes) -> None:
        cmd = frs.UDPCommand.from_bytes(data)
        st = self.robot.state
        T = np.array(st.O_T_EE).reshape(4, 4, order="F")
        F = np.array(st.F_T_EE).reshape(4, 4, order="F")
        flange = (T @ np.linalg.inv(F))[:3, 3]
        row = np.r_[time.monotonic(), cmd.message_id, float(cmd.motion_generation_finished),
                    cmd.dq_c, cmd.q_c, flange, float(self._FrankaRobotServer__impedance_control_mode), st.q_d,
                    st.q, st.dq, float(self._FrankaServer__message_id)]
        with lock:
            rows.append(row)
        original(self, data)

    frs.FrankaRobotServer._handle_udp_command = handle

    out = open(args.record, "wb") if args.record else None

    def flush() -> None:
        with lock:
            batch, rows[:] = list(rows), []
        if out is not None and batch:
            out.write(np.asarray(batch, dtype=np.float64).tobytes())
            out.flush()

    sim = MujocoSimulator()
    sim.init()
    robot = sim.add_robot() if args.q0 is None else sim.add_robot(
        initial_q=tuple(float(v) for v in args.q0.split(",")))
    server = SimulationServer(sim, hostname_candidates=[host])
    server.init()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"READY {robot.hostname}", flush=True)
    last, parent = time.monotonic(), os.getppid()
    try:
        while not stop.is_set() and os.getppid() == parent:  # never outlive the test that started it
            if not any(rs.udp_connected for rs in server.robot_servers):
                # no client: take connections, but no physics at 1 kHz (at raised priority it would starve
                # the service starting beside it on a small machine); the simulated time starts with a client
                for rs in server.robot_servers:
                    rs.process_commands()
                time.sleep(0.002)
                continue
            server.run_once(True)
            now = time.monotonic()
            if now - last > 0.05:
                flush()
                last = now
    finally:
        flush()
        if out is not None:
            out.close()
        server.cleanup()


def raise_priority() -> None:
    """A real robot is a machine of its own: its stand-in runs at a raised priority (nice −10 where
    permitted) so that the test machine's load does not silence it for a whole state timeout."""
    with contextlib.suppress(OSError):
        os.nice(-10)


def read_record(path: str) -> np.ndarray:
    """The recorded commands as an (n, len(RECORD_COLUMNS)) array."""
    raw = open(path, "rb").read()
    n = len(raw) // (8 * len(RECORD_COLUMNS))
    return np.frombuffer(raw[: n * 8 * len(RECORD_COLUMNS)], dtype=np.float64).reshape(n, len(RECORD_COLUMNS))



if __name__ == "__main__":
    main()
