"""A force–torque sensor on loopback that speaks ATI's RDT protocol (UDP port 49152), written from
the protocol's description in ATI's Net F/T manual ("UDP Interface Using RDT") — independently of
fdcontrol.drivers.netft: it parses requests and packs records with its own struct formats.

Streams one record per ``period`` to the address of the last start request (command 2) while
``streaming``, the RDT sequence counting from 1 for each start (the manual: the record's position
within its output stream); command 0 stops. Records every request it receives (``requests``).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time


class RdtPeer:
    def __init__(self, host: str, period: float = 1e-3) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 49152))
        self.sock.settimeout(0.001)
        self.period = period
        self.counts = [0] * 6  # Fx Fy Fz Tx Ty Tz in counts
        self.status = 0
        self.requests: list[tuple[int, int, int]] = []  # (header, command, sample count)
        self.client: tuple[str, int] | None = None
        self.sent = 0
        self.paused = False  # True: a sensor that went quiet (cable pulled); set it with pause()
        self._sending = threading.Lock()  # held while a streamed record is sent: pause() waits for it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seq, deadline = 0, time.monotonic() + 120.0  # bounded: never outlives a test by much
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                data, addr = self.sock.recvfrom(64)
                if len(data) == 8:
                    header, command, count = struct.unpack("!HHI", data)
                    self.requests.append((header, command, count))
                    if header == 0x1234 and command == 2:  # a new stream: its records count from 1
                        self.client, seq = addr, 0
                    elif header == 0x1234 and command == 0:
                        self.client = None
            except (TimeoutError, ConnectionRefusedError):  # (refused: a client gone, ICMP port unreachable)
                pass
            with self._sending:
                if self.client is not None and not self.paused:
                    seq += 1
                    with contextlib.suppress(ConnectionRefusedError):
                        self.send_raw(struct.pack("!3L6l", seq, seq, self.status, *self.counts))
            time.sleep(self.period)

    def pause(self) -> None:
        """Go quiet: when this returns, no streamed record is sent any more (one being sent has
        been sent: on loopback it is then in the client's socket buffer)."""
        with self._sending:
            self.paused = True

    def send_raw(self, data: bytes) -> None:
        if self.client is not None:
            self.sock.sendto(data, self.client)
            self.sent += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()
