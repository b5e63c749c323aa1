"""UdpBridgeDriver: a separate driver process exchanges joint states and references over UDP.

For arms whose driver lives in another process or container (a ROS node, a vendor SDK
loop). The driver process sends its measured state to ``listen`` and receives references
at the address its state came from. Datagrams are little-endian float64 arrays:

* state in:       [seq, t, q_1..q_N, qd_1..qd_N]             (2 + 2N values)
* references out: [seq, t, q_ref_1..q_ref_N, qd_ref_1..qd_ref_N]

Latest wins: ``read`` drains the socket and keeps the newest datagram. When no state has
arrived for ``timeout`` seconds, ``read`` raises ``StaleStateError``: the control loop
records the fault and holds.

Trust only the robot: with ``peer`` ("host:port", the driver process's own address) only
datagrams from exactly that address and port count, and references go there only; without it
the first sender is pinned (address and port) for the driver's lifetime. Datagrams from anyone
else are ignored (counted in ``ignored``) and never answered. A state whose joints moved further
since the previous one than their velocity limits allow (over the robot's own time stamps plus
two periods) is not used: ``read`` raises ``ImplausibleStateError`` and the loop faults and holds.
"""

from __future__ import annotations

import socket
import time

import numpy as np

from fdcontrol.drivers.base import JointState, RobotDriver
from fdcontrol.model.robot import RobotModel


class StaleStateError(RuntimeError):
    pass


class ImplausibleStateError(RuntimeError):
    """A joint state the robot cannot have reached from the previous one (a jump beyond its velocity limit)."""


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected host:port, got {text!r}")
    return socket.gethostbyname(host.strip("[]")), int(port)


class UdpBridgeDriver(RobotDriver):
    def __init__(self, robot: RobotModel, dt: float = 0.002, listen: str = "127.0.0.1:50100",
                 timeout: float = 0.1, connect_timeout: float = 10.0, peer: str | None = None) -> None:
        self.dof, self.timeout, self.dt = robot.dof, float(timeout), float(dt)
        self.vmax = np.asarray(robot.limits.velocity, dtype=float)
        host, _, port = listen.rpartition(":")
        self.configured_peer = _address(peer) if peer else None
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, int(port)))
        self.address = self.sock.getsockname()
        self.peer: tuple[str, int] | None = self.configured_peer
        self.ignored = 0  # datagrams from anyone but the peer
        self._implausible: str | None = None
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
        """Receive every queued datagram and keep the newest valid state from the peer (latest wins)."""
        n = 2 + 2 * self.dof
        while True:
            try:
                data, peer = self.sock.recvfrom(65536)
            except (BlockingIOError, TimeoutError, InterruptedError):
                return
            if self.peer is not None and peer[:2] != self.peer:
                self.ignored += 1  # not the robot: never used, never answered
                continue
            msg = np.frombuffer(data, dtype="<f8")
            if msg.shape != (n,) or not np.all(np.isfinite(msg)):
                continue  # not ours, or corrupt: ignore
            q, qd, t = msg[2:2 + self.dof].copy(), msg[2 + self.dof:].copy(), float(msg[1])
            if self._state is not None:
                step = np.abs(q - self._state.q)
                allowed = 1.1 * self.vmax * (max(t - self._state.t, 0.0) + 2.0 * self.dt)
                if np.any(step > allowed):
                    j = int(np.argmax(step - allowed))
                    self._implausible = (f"implausible joint state: joint {j + 1} moved {step[j]:.4g} rad in "
                                         f"{t - self._state.t:.4g} s (its velocity limit allows {allowed[j]:.4g})")
                    continue
            self.peer = peer[:2]  # pinned: the first sender when no peer was configured
            self._state = JointState(q, qd, t)
            self._received = time.monotonic()
            if first_only:
                return

    def read(self) -> JointState:
        self._drain()
        if self._implausible is not None:
            why, self._implausible = self._implausible, None
            raise ImplausibleStateError(why)
        if time.monotonic() - self._received > self.timeout:
            raise StaleStateError(f"no joint state for {time.monotonic() - self._received:.3f} s")
        assert self._state is not None
        return self._state

    def read_wrench(self) -> np.ndarray | None:
        return None

    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None:
        if self.peer is None or self._state is None:  # only ever to the robot whose state we use
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
