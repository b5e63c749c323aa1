"""UdpBridgeDriver: a separate driver process exchanges joint states and references over UDP.

For arms whose driver lives in another process or container (a ROS node, a vendor SDK
loop). The driver process sends its measured state to ``listen`` and receives references
at the address its state came from. Datagrams are little-endian float64 arrays:

* state in:       [seq, t, q_1..q_N, qd_1..qd_N]             (2 + 2N values)
* references out: [seq, t, q_ref_1..q_ref_N, qd_ref_1..qd_ref_N]

Latest wins: ``read`` drains the socket and keeps the newest datagram. When no state has
arrived for ``timeout`` seconds, ``read`` raises ``StaleStateError``: the control loop
records the fault and holds.
"""

from __future__ import annotations

import socket
import time

import numpy as np

from fdcontrol.drivers.base import JointState, RobotDriver
from fdcontrol.model.robot import RobotModel


class StaleStateError(RuntimeError):
    pass


class UdpBridgeDriver(RobotDriver):
    def __init__(self, robot: RobotModel, dt: float = 0.002, listen: str = "127.0.0.1:50100",
                 timeout: float = 0.1, connect_timeout: float = 10.0) -> None:
        self.dof, self.timeout = robot.dof, float(timeout)
        host, _, port = listen.rpartition(":")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, int(port)))
        self.address = self.sock.getsockname()
        self.peer: tuple[str, int] | None = None
        self._state: JointState | None = None
        self._received = 0.0
        self._seq = 0
        deadline = time.monotonic() + connect_timeout
        self.sock.settimeout(0.05)
        while self._state is None and time.monotonic() < deadline:
            self._drain(first_only=True)
        if self._state is None:
            self.sock.close()
            raise StaleStateError(f"no joint state on udp://{listen} within {connect_timeout} s "
                                  "(driver_options.connect_timeout)")
        self.sock.setblocking(False)
        self._drain()  # anything queued behind the first datagram: the newest wins

    def _drain(self, first_only: bool = False) -> None:
        """Receive every queued datagram and keep the newest valid state (latest wins)."""
        n = 2 + 2 * self.dof
        while True:
            try:
                data, peer = self.sock.recvfrom(65536)
            except (BlockingIOError, TimeoutError, InterruptedError):
                return
            msg = np.frombuffer(data, dtype="<f8")
            if msg.shape != (n,) or not np.all(np.isfinite(msg)):
                continue  # not ours, or corrupt: ignore
            self.peer = peer
            self._state = JointState(msg[2:2 + self.dof].copy(), msg[2 + self.dof:].copy(), float(msg[1]))
            self._received = time.monotonic()
            if first_only:
                return

    def read(self) -> JointState:
        self._drain()
        if time.monotonic() - self._received > self.timeout:
            raise StaleStateError(f"no joint state for {time.monotonic() - self._received:.3f} s")
        assert self._state is not None
        return self._state

    def read_wrench(self) -> np.ndarray | None:
        return None

    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None:
        if self.peer is None:
            return
        self._seq += 1
        q = np.zeros(self.dof) if q_ref is None else q_ref
        qd = np.zeros(self.dof) if qd_ref is None else qd_ref
        msg = np.concatenate(([self._seq, time.monotonic()], q, qd)).astype("<f8")
        try:
            self.sock.sendto(msg.tobytes(), self.peer)
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()
