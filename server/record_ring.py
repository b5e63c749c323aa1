"""A shared-memory ring of every published loop state, for recording outside the loop's process.

Why not a writer thread in the loop process: any Python thread there holds the GIL for up to
the switch interval whenever the loop thread wakes, so the loop starts late (measured with
JSON encoding + MCAP writing in a thread of the loop process: p99 period error 65 µs →
350–450 µs, same machine, paired windows). Here the loop thread only copies the packed state
vector it already built for the state slot (``Channel._tmp``, ~120 float64) into the next
ring row and bumps the head — about 2 µs, and only while a recording runs.

Layout (float64): header [active, head], then ``SLOTS`` rows of [packed state (shm_layout.LAYOUT),
t_mono, own_index, timing_index, compute, period_error]; the Stats indices let the writer
attach to each state the cycle timing the loop records just after publishing it
(:class:`fdcontrol.recording.Published`).

One writer (the loop thread), one reader (the recorder's writer thread in the API process).
The reader takes rows below the head, then re-reads the head: rows the writer may have
overwritten meanwhile are counted as lost, never decoded.
"""

from __future__ import annotations

import contextlib
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from fdcontrol.loop.state import LoopState
from fdcontrol.recording import Published
from fdcontrol.server.shm_layout import LAYOUT, OUT_SIZE

SLOTS = 8192  # 16 s at 500 Hz: the reader polls every 20 ms
EXTRA = 5  # t_mono, own_index, timing_index, compute, period_error
WIDTH = OUT_SIZE + EXTRA


class StateRing:
    def __init__(self, name: str, create: bool = False) -> None:
        size = 8 * (2 + SLOTS * WIDTH)
        self.shm = shared_memory.SharedMemory(name=name, create=create, size=size)
        self.hdr = np.ndarray((2,), dtype=np.float64, buffer=self.shm.buf, offset=0)
        self.rows = np.ndarray((SLOTS, WIDTH), dtype=np.float64, buffer=self.shm.buf, offset=16)
        if create:
            self.hdr[:] = 0
        self.tail = 0
        self._prev = np.full(OUT_SIZE, np.nan)

    # ------------------------------------------------------------------ loop thread
    def push(self, packed: np.ndarray, loop: Any) -> None:
        """Copy one packed state (and where its timing is) into the ring, if recording."""
        if not self.hdr[0]:
            return
        h = int(self.hdr[1])
        row = self.rows[h % SLOTS]
        row[:OUT_SIZE] = packed
        st = loop.stats
        c = st.count
        j = (c - 1) % st.n
        row[OUT_SIZE:] = (loop.last_cycle_at, c, c - 1, st.compute[j], st.period_error[j])
        self.hdr[1] = h + 1  # after the row: the reader never takes a row before it is written

    # ------------------------------------------------------------------ reader (API process)
    def set_active(self, on: bool) -> None:
        if on:
            self.tail = int(self.hdr[1])
            self._prev[:] = np.nan
        self.hdr[0] = 1.0 if on else 0.0

    def read(self) -> tuple[list[Published], int]:
        """New states since the last read, decoded, and how many were lost to overwriting."""
        head = int(self.hdr[1])
        lost = max(0, head - self.tail - SLOTS)
        start = max(self.tail, head - SLOTS)
        rows = self.rows[np.arange(start, head) % SLOTS].copy()
        head2 = int(self.hdr[1])
        overwritten = max(0, head2 - SLOTS - start + 1)  # rows the writer (re)used while we copied
        rows = rows[min(overwritten, len(rows)):]
        lost += min(overwritten, head - start)
        self.tail = head
        out = []
        for r in rows:
            if np.array_equal(r[:OUT_SIZE], self._prev):  # the same state published again
                continue
            self._prev[:] = r[:OUT_SIZE]
            t, own, timing, comp, err = r[OUT_SIZE:]
            out.append(Published(decode(r), float(t), int(own), int(timing), comp, err))
        return out, lost

    def close(self, unlink: bool = False) -> None:
        del self.hdr, self.rows
        with contextlib.suppress(Exception):
            self.shm.close()
        if unlink:
            with contextlib.suppress(Exception):
                self.shm.unlink()


def decode(o: np.ndarray) -> LoopState:
    """A LoopState from a packed state vector (layout: fdcontrol.server.shm_layout.LAYOUT; the fault text is in it)."""
    return LAYOUT.unpack(o[:OUT_SIZE])[0]
