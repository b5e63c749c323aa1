"""NetFT: a force–torque sensor that streams over ATI's Raw Data Transfer (RDT) protocol on UDP.

ATI's Net F/T and Axia sensors, and Schunk's FTN (Net F/T) sensors, speak RDT (ATI, "Net F/T
Installation and Operation Manual", section "UDP Interface Using RDT"): the client sends an
8-byte request to UDP port 49152 of the sensor — big-endian ``uint16 header = 0x1234``,
``uint16 command``, ``uint32 sample count`` (0: endless) — and, for command 2 (start
high-speed real-time streaming), the sensor answers with one 36-byte record per sample, to the
address the request came from: big-endian ``uint32 rdt_sequence, uint32 ft_sequence,
uint32 status, int32 Fx, Fy, Fz, Tx, Ty, Tz``. Forces and torques are in counts: divide by the
sensor's counts per force and counts per torque (its configuration page, ``cfgcpf`` and
``cfgcpt``; 1 000 000 per N and per N·m by default with N and N·m as units). Command 0 stops
the stream.

The reading is the load on the sensor's tool side in the sensor frame — the wrench the tool
exerts on the sensor: fdcontrol's ``sensor_sign: tool_on_robot`` (docs/physics.md). This class
passes it through in N and N·m, as :class:`fdcontrol.drivers.base.RobotDriver` expects of
``read_wrench``; the sensor's pose on the flange, the tool's weight and the bias are the
wrench filter's business.

Latest wins: :meth:`read` drains the socket without blocking (at most ``MAX_DRAIN`` records per
call, so a flood of datagrams cannot stall the loop) and keeps the newest record; with no
record for ``timeout`` s it returns None, so the loop's sensor watchdog holds a law that reads
the sensor. A record of the wrong size, with a non-zero status word or an older sequence number
is ignored — except within a second of a start request a step back of ``REORDER_WINDOW`` or more:
that is the sensor's new stream (it counts each stream from 1, and a record of the old stream may
still arrive after the request). ``status`` is the status word of the
newest record (0: healthy; a healthy record clears it) and :meth:`problem` says it in words for
the operator (the loop state's ``sensor_status``, ``/health``). While the stream is stale the
start request is repeated once per second (a restarted
sensor forgets its client).
"""

from __future__ import annotations

import contextlib
import math
import socket
import struct
import threading
import time

import numpy as np

RDT_PORT = 49152
RDT_HEADER = 0x1234
CMD_STOP, CMD_START_REALTIME = 0x0000, 0x0002
RESTART_INTERVAL = 1.0  # s between start requests while the stream is stale
MAX_DRAIN = 256  # records read per call at most: a flood on the socket cannot keep the loop in read()
#: a record less than this many behind the newest is one overtaken on the network (ignored); a bigger step back
#: within RESTART_INTERVAL of a start request is the new stream (the sensor counts each stream from 1), later it
#: is a late record (ignored)
REORDER_WINDOW = 64
REQUEST = struct.Struct(">HHI")
RECORD = struct.Struct(">III6i")


def request(command: int, samples: int = 0) -> bytes:
    """An RDT request datagram."""
    return REQUEST.pack(RDT_HEADER, command, samples)


def record(rdt_sequence: int, ft_sequence: int, status: int, counts: np.ndarray | list[int]) -> bytes:
    """An RDT record datagram (what the sensor sends; for peers and tests)."""
    return RECORD.pack(rdt_sequence, ft_sequence, status, *(int(c) for c in counts))


def _address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep:
        return address, RDT_PORT
    if not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"port must be within 1–65535, got {port!r}")
    return host, int(port)


class NetFT:
    """An RDT client: starts the sensor's stream at construction, reads the newest sample."""

    def __init__(self, address: str, counts_per_force: float = 1e6, counts_per_torque: float = 1e6,
                 timeout: float = 0.05) -> None:
        for name, v in (("counts_per_force", counts_per_force), ("counts_per_torque", counts_per_torque)):
            if isinstance(v, bool) or not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"sensor {name} must be a positive number, got {v!r}")
        if isinstance(timeout, bool) or not (isinstance(timeout, int | float) and math.isfinite(timeout)
                                             and 0 < timeout <= 10):
            raise ValueError("sensor timeout must be within (0, 10] s")
        try:
            self.peer = _address(str(address))
            self.peer = (socket.gethostbyname(self.peer[0]), self.peer[1])
        except (OSError, ValueError) as exc:
            raise ValueError(f"sensor address {address!r}: {exc}") from None
        self.scale = np.r_[np.full(3, 1.0 / counts_per_force), np.full(3, 1.0 / counts_per_torque)]
        self.timeout = float(timeout)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.wrench: np.ndarray | None = None
        self.received_at = -math.inf  # time.monotonic() of the newest sample
        self.rdt_sequence: int | None = None
        self._asked = -math.inf
        self._lock = threading.Lock()  # read() from the loop and from the API thread (has the driver a sensor?)
        self.status = 0  # the status word of the newest record (0: healthy)
        self.start()

    def start(self) -> None:
        """Ask the sensor to stream (again: a restarted sensor forgets its client)."""
        self._asked = time.monotonic()
        self.rdt_sequence = None  # a new stream counts from 1 again (RDT: the record's place in its stream)
        with contextlib.suppress(OSError):
            self.sock.sendto(request(CMD_START_REALTIME), self.peer)

    def read(self) -> np.ndarray | None:
        """The newest reading [F; τ] (N, N·m, sensor frame, tool on sensor), or None when stale."""
        with self._lock:
            return self._read()

    def _read(self) -> np.ndarray | None:
        restarting = time.monotonic() - self._asked <= RESTART_INTERVAL  # a new stream may come: it counts from 1
        for _ in range(MAX_DRAIN):  # the socket's newest records (more wait for the next call)
            try:
                data, peer = self.sock.recvfrom(512)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:  # e.g. ICMP port unreachable from a sensor that is gone
                break
            if peer != self.peer or len(data) != RECORD.size:
                continue
            seq, _, status, *counts = RECORD.unpack(data)
            if self.rdt_sequence is not None:
                back = (self.rdt_sequence - seq) % 2**32
                if 0 < back < 2**31 and (back < REORDER_WINDOW or not restarting):
                    continue  # older than the newest: reordered, or late (no new stream was asked for)
            self.status = status  # the newest record's: an error shows, a healthy record clears it
            if status != 0:
                continue
            self.rdt_sequence = seq
            self.wrench = np.asarray(counts, dtype=float) * self.scale
            self.received_at = time.monotonic()
        now = time.monotonic()
        if self.wrench is None or now - self.received_at > self.timeout:
            if now - self._asked > RESTART_INTERVAL:
                self.start()  # stale: ask again, at most once per RESTART_INTERVAL
            return None
        return self.wrench

    def problem(self) -> str | None:
        """The sensor's own error report in words, or None while its newest record is healthy."""
        if self.status == 0:
            return None
        return (f"the force–torque sensor at {self.peer[0]}:{self.peer[1]} reports status word "
                f"0x{self.status:08X} (an error: its readings are not used; the bits are listed in the "
                "sensor's manual)")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendto(request(CMD_STOP), self.peer)
        self.sock.close()


__all__ = ["RDT_PORT", "NetFT", "record", "request"]
