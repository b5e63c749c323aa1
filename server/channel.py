"""The shared memory between the API process and the loop process: what goes where, and how
each side reads and writes it without locks across processes.

Exchange, latest wins, no queue:

* wrench in — a seqlock-protected slot written by the API process (version, wrench, frame,
  seq, arrival time); the loop polls it at each cycle start (:class:`ShmIO`);
* twist in — a second slot of the same layout (version, twist, frame, seq, arrival time);
* hold and stop requests — two counters the API bumps; the loop takes a hold or a stop at its
  next cycle start, ahead of any queue (a stop then ends the loop thread at rest by itself);
* state out — a seqlock-protected slot rewritten by the loop every cycle, and one byte on a
  pipe per publish (``ShmIO.notify``; read by fdcontrol.server.feed.StateFeed);
* heartbeat — a thread of the loop process writes time.monotonic() (system-wide clock) to its
  own 8-byte slot every few ms (:func:`beat`), so the API tells a dead or stuck process from
  a quiet one (fdcontrol.server.loop_health).

Seqlock: the writer makes the version odd, writes, makes it even; a reader copies and
retries while the version was odd or changed. One writer per slot: the wrench slot's writers
in the API process (threadpool handlers, WebSocket handlers) take one lock.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from array import array
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from fdcontrol.loop import ControlLoop
from fdcontrol.loop.state import LoopState
from fdcontrol.server.shm_layout import LAYOUT, OUT_SIZE

# input slot (float64): version, wrench[6], frame (0 base, 1 tool), seq, t
IN_SIZE = 10
# state slot (float64): version, then the packed state (server/shm_layout.py: LAYOUT, OUT_SIZE)
# block: wrench slot, twist slot (same layout), heartbeat, state slot
TWIST_OFFSET = 8 * IN_SIZE
HEARTBEAT_OFFSET = TWIST_OFFSET + 8 * IN_SIZE
STATE_OFFSET = HEARTBEAT_OFFSET + 8
# hold requests (float64 counter, API → loop): a hold is one store the loop sees at its next cycle start,
# ahead of any queue (no pipe, no command thread), so a flood of stream frames cannot delay it
HOLD_OFFSET = STATE_OFFSET + 8 * (1 + OUT_SIZE)
STOP_OFFSET = HOLD_OFFSET + 8  # stop requests (float64 counter, API → loop), like holds
SHM_BYTES = STOP_OFFSET + 8
HEARTBEAT_PERIOD = 0.01  # s
_RUNNING_AT = (LAYOUT.slots["running"].start, LAYOUT.slots["last_cycle_at"].start)  # read_running's slots
_REACTIONS_AT = (LAYOUT.slots["reaction_count"].start,)
_TEXTS = (min(sl.start for _, sl in LAYOUT._texts), max(sl.stop for _, sl in LAYOUT._texts))  # the texts' slots
SEQ_MAX = 2**53  # the slot holds float64: integers beyond this would not round-trip



def _slot_write(slot: memoryview, vec: np.ndarray | list[float], frame: str, seq: int, t: float) -> None:
    """Seqlock write through the slot's float64 memoryview: the record is built before the version turns odd,
    published when it turns even. The bytes numpy's element and slice assignments wrote, without a numpy call:
    the API writes one per streamed wrench, each on its own wake-up (its code and data mostly out of cache)."""
    rec = array("d", vec.tolist() if isinstance(vec, np.ndarray) else vec)
    rec.append(1.0 if frame == "tool" else 0.0)
    rec.append(float(seq))
    rec.append(t)
    v = slot[0]
    slot[0] = v + 1.0
    slot[1:] = rec
    slot[0] = v + 2.0


def _slot_read(slot: np.ndarray) -> tuple[int, np.ndarray, str, int, float] | None:
    """(version, vector, frame, seq, t) of a consistent copy, or None when the writer kept it busy.

    The version is read before the copy and again after it (each as a Python float: ``item``), the record's
    scalars from one ``tolist`` of the copy — the values numpy's scalars give (tests/test_channel_read.py), with
    plain float arithmetic: the loop reads a slot only in a cycle that takes a new input, where numpy's scalar
    code is cold."""
    item = slot.item
    for _ in range(100):
        v1 = item(0)
        data = slot.copy()
        if v1 % 2 == 0 and item(0) == v1:
            rec = data.tolist()
            return (int(v1), data[1:7], "tool" if rec[7] else "base", int(rec[8]), rec[9])
    return None

class TornRead(RuntimeError):
    """The state slot stayed mid-write (its writer died or stalled inside a write)."""


class Channel:
    """The shared-memory block: wrench slot, twist slot, heartbeat, state slot, hold and stop counters."""

    def __init__(self, name: str | None = None) -> None:
        self.shm = shared_memory.SharedMemory(name=name, create=name is None, size=SHM_BYTES)
        buf = self.shm.buf
        self.inp = np.ndarray((IN_SIZE,), dtype=np.float64, buffer=buf, offset=0)
        self.twist = np.ndarray((IN_SIZE,), dtype=np.float64, buffer=buf, offset=TWIST_OFFSET)
        self.heartbeat = np.ndarray((1,), dtype=np.float64, buffer=buf, offset=HEARTBEAT_OFFSET)
        self.out = np.ndarray((1 + OUT_SIZE,), dtype=np.float64, buffer=buf, offset=STATE_OFFSET)
        self.hold = np.ndarray((1,), dtype=np.float64, buffer=buf, offset=HOLD_OFFSET)
        self.stop = np.ndarray((1,), dtype=np.float64, buffer=buf, offset=STOP_OFFSET)
        self._tmp = LAYOUT.empty()  # the packed state, built before the seqlock write (and copied by the ring)
        self._packer = LAYOUT.packer(self._tmp)  # the only writer of _tmp
        self._extra = {"last_cycle_at": 0.0}  # write_state's extra slot, rewritten by each write
        # the seqlock write's copies: the whole row, or all but the texts (most of the row's cache lines) while
        # the slot holds the texts the packer wrote last (_texts_in_slot: its token for them when they were copied)
        self._slot_row = self.out[1:]
        self._slot_parts = [(self._slot_row[a:b], self._tmp[a:b]) for a, b in ((0, _TEXTS[0]), (_TEXTS[1], OUT_SIZE))]
        self._texts_in_slot: object = None
        # the same slots as memoryviews (float64 'd'): the version read and stored as a Python float, the copies a
        # memmove each — the bytes numpy's scalar and slice assignments write, without their machinery (~0.2 µs a
        # write); dropped by close() with the numpy views
        self._version = memoryview(self.out[:1])
        self._row_copy = (memoryview(self._slot_row), memoryview(self._tmp))
        self._part_copies = [(memoryview(dst), memoryview(src)) for dst, src in self._slot_parts]
        self._inp_view, self._twist_view = memoryview(self.inp), memoryview(self.twist)  # the API's input writes
        # the API's reads of a few slots (heartbeat_at, _read_slots): a memoryview's item is a float at once
        self._heartbeat_view, self._out_view = memoryview(self.heartbeat), memoryview(self.out)
        self._stop_view, self._hold_view = memoryview(self.stop), memoryview(self.hold)  # the loop's reads (ShmIO.poll)
        if name is None:
            self.inp[:] = 0
            self.twist[:] = 0
            self.out[:] = 0
            self.heartbeat[:] = 0
            self.hold[:] = 0
            self.stop[:] = 0

    @property
    def name(self) -> str:
        return self.shm.name

    # ------------------------------------------------------------------ input slots
    # The wrench and twist slots share one layout, float64: version, vector[6], frame (1 = tool),
    # seq, t. One writer at a time (the caller's lock: LoopWorker._wrench_lock / _twist_lock).
    def write_wrench(self, w: np.ndarray | list[float], frame: str, seq: int, t: float) -> None:
        _slot_write(self._inp_view, w, frame, seq, t)

    def read_wrench(self) -> tuple[int, np.ndarray, str, int, float] | None:
        return _slot_read(self.inp)

    def write_twist(self, v: np.ndarray | list[float], frame: str, seq: int, t: float) -> None:
        _slot_write(self._twist_view, v, frame, seq, t)

    def read_twist(self) -> tuple[int, np.ndarray, str, int, float] | None:
        return _slot_read(self.twist)

    # ------------------------------------------------------------------ state slot
    def write_state(self, s: LoopState, last_cycle_at: float) -> None:
        """Pack ``s`` (fdcontrol.loop.state.SharedLayout), then one seqlock write of the packed vector: the texts
        (a fault, the robot's mode: ~2.6 kB of the row's 3.7) only when the packer wrote them since they were
        last copied into the slot — the slot ends byte for byte as the packed vector either way. This Channel
        is the slot's one writer (a new one copies the whole row first)."""
        packer, extra = self._packer, self._extra
        extra["last_cycle_at"] = last_cycle_at  # (the packer's extra slots, one dict kept: no keywords' dict a write)
        packer.pack_extra(s, extra)
        texts = packer.texts_written
        version = self._version
        v = version[0]
        version[0] = v + 1.0
        if texts is self._texts_in_slot:  # (never None after a pack that succeeded)
            for dst, src in self._part_copies:
                dst[:] = src
        else:
            dst, src = self._row_copy
            dst[:] = src
            self._texts_in_slot = texts
        version[0] = v + 2.0

    def _copy_state(self, tries: int = 1000) -> np.ndarray:
        """A consistent copy of the packed state (seqlock read), yielding the CPU between tries. The version read
        as a Python float through the memoryview (the copy is numpy's one call): the feed reads every publish."""
        version, row = self._out_view, self._slot_row
        for _ in range(tries):
            v1 = version[0]
            o = row.copy()
            if v1 % 2 == 0 and version[0] == v1:
                return o
            time.sleep(0)
        raise TornRead("the state slot stayed mid-write: the loop process is dead or stuck")

    def read_packed(self, tries: int = 1000) -> np.ndarray:
        """A consistent copy of the packed state (LAYOUT), undecoded: its reader decodes what it needs
        (fdcontrol.server.feed.Snapshot). TornRead when the slot stayed mid-write for ``tries`` reads."""
        return self._copy_state(tries)

    def read_state(self, tries: int = 1000) -> tuple[LoopState, float]:
        """The newest state and its last_cycle_at (s, time.monotonic()), from a consistent copy."""
        state, extra = LAYOUT.unpack(self._copy_state(tries))
        return state, extra["last_cycle_at"]

    def heartbeat_at(self) -> float:
        """The loop process's last heartbeat (time.monotonic(); 0.0 before the first)."""
        return self._heartbeat_view[0]

    def _read_slots(self, at: tuple[int, ...], tries: int = 1000) -> list[float]:
        """The packed state's slots ``at`` (indices into LAYOUT), all of one consistent version (seqlock read),
        without copying the rest: a few of its ~400 slots, so a few of the cache lines the loop process rewrites
        every cycle cross to this CPU, not all of them (two such reads per streamed wrench). Read through a
        memoryview: each slot a Python float at once, no numpy call."""
        out = self._out_view
        for _ in range(tries):
            v1 = out[0]
            vals = [out[1 + i] for i in at]
            if v1 % 2 == 0 and out[0] == v1:
                return vals
            time.sleep(0)
        raise TornRead("the state slot stayed mid-write: the loop process is dead or stuck")

    def read_running(self) -> tuple[bool, float]:
        """(running, last_cycle_at) of the newest state, without decoding the rest (liveness checks)."""
        running, last = self._read_slots(_RUNNING_AT)
        return bool(running), last

    def read_reaction_count(self) -> int:
        """The newest state's reaction_count, without decoding the rest (a rule's switch may have changed
        the configuration in the loop process)."""
        return int(self._read_slots(_REACTIONS_AT)[0])

    def close(self, unlink: bool = False) -> None:
        # drop our numpy views first, or SharedMemory.close() refuses (exported buffers)
        del self.inp, self.out, self.twist, self.heartbeat, self.hold, self.stop
        del self._version, self._row_copy, self._part_copies  # (no write into the block after close)
        del self._inp_view, self._twist_view, self._heartbeat_view, self._out_view, self._stop_view, self._hold_view
        with contextlib.suppress(Exception):
            self.shm.close()
        if unlink:
            with contextlib.suppress(Exception):
                self.shm.unlink()


class ShmIO:
    """The loop's hooks in the worker: take the newest wrench, publish each state."""

    def __init__(self, channel: Channel) -> None:
        self.ch = channel
        self.version = 0
        self.twist_version = 0
        self.holds_seen = float(channel.hold[0])  # hold requests counted so far (LoopWorker.request_hold)
        self.stops_seen = float(channel.stop[0])  # stop requests counted so far (LoopWorker.request_stop)
        self.ring: Any = None  # fdcontrol.server.record_ring.StateRing: every state, for the API's recorder
        self.metrics: Any = None  # fdcontrol.server.metrics.LoopMetrics: edge counters
        # the state slot's one-writer rule: the loop thread publishes every cycle, the command
        # thread after stop() and reconfiguration; uncontended, the lock costs ~0.1 µs
        self._publish_lock = threading.Lock()
        self._ring_cycle = -1
        self.notify: int | None = None  # write end of the publish pipe (non-blocking), see StateFeed

    def forget_stops(self) -> None:
        """Stop requests made while the loop was stopped are not for the next run (called as it starts)."""
        self.stops_seen = float(self.ch.stop[0])

    def poll(self, loop: ControlLoop) -> None:
        """At the cycle's start: the stop and hold requests."""
        # (the counters through the Channel's memoryviews: each a Python float at once, float()'s value of the
        # element, no numpy scalar a cycle)
        ch = self.ch
        stops = ch._stop_view[0]
        if stops != self.stops_seen:  # a stop request: this cycle brakes, the loop thread ends at rest
            self.stops_seen = stops
            loop.request_stop()
        holds = ch._hold_view[0]
        if holds != self.holds_seen:  # a hold request: before this cycle's inputs
            self.holds_seen = holds
            loop.hold(True)

    def inputs(self, loop: ControlLoop) -> None:
        """Right before the cycle's inputs stage reads them (after the robot's state, the kinematics and the
        sensor): the newest wrench and twist. Read this late, a wrench that arrives while the cycle computes
        those still counts in it, and the state that acknowledges it leaves that much sooner after it is taken."""
        ch = self.ch
        # a slot whose version is the one taken last has nothing new: its seqlock read only when it changed
        # (the versions read as Python floats through the Channel's memoryviews, as the counters in poll)
        if ch._inp_view[0] != self.version:
            slot = ch.read_wrench()
            if slot is not None and slot[0] != self.version:
                self.version = slot[0]
                _, w, frame, seq, t = slot
                try:  # validated by the API already (try: no context manager's calls in the cycle that takes it)
                    loop.set_wrench(w, frame, seq, t)
                except ValueError:
                    pass
        if ch._twist_view[0] != self.twist_version:
            tw = ch.read_twist()
            if tw is not None and tw[0] != self.twist_version:
                self.twist_version = tw[0]
                _, v, frame, seq, t = tw
                try:
                    loop.set_twist(v, frame, seq, t)
                except ValueError:
                    pass

    def publish(self, loop: ControlLoop, state: LoopState) -> None:
        with self._publish_lock:
            self.ch.write_state(state, loop.last_cycle_at)
            # a row copy, only while recording; a re-publish of the same cycle (after a command or
            # reconfiguration) is not a new state
            if self.ring is not None and state.cycle != self._ring_cycle:
                self._ring_cycle = state.cycle
                self.ring.push(self.ch._tmp, loop)
        if self.notify is not None:
            # one byte per publish wakes the API's StateFeed; a full pipe means it has bytes to read
            # already, a closed one that the API process is gone: neither may stall the loop
            try:
                os.write(self.notify, b"\0")
            except OSError:
                pass
        if self.metrics is not None:
            self.metrics.observe(state)


def beat(channel: Channel, stop: threading.Event, realtime: bool = False) -> None:
    if realtime:  # as timely as the loop thread (SCHED_FIFO, below its priority) where permitted: on a
        # loaded machine a normal thread's heartbeat goes stale while the loop cycles on time
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(5))  # type: ignore[attr-defined]
    while not stop.wait(HEARTBEAT_PERIOD):
        channel.heartbeat[0] = time.monotonic()
