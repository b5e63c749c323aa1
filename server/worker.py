"""The control loop in its own process, exchanging with the API through shared memory.

Why: in one process, the API's Python code (JSON encoding for 20 WebSocket clients, batch
analysis) holds the GIL and delays the loop (measured: overruns 0.1 % → 2.5 % of cycles
with 21 WebSocket clients). Here the loop process runs nothing but the loop thread and a
command thread that waits on a pipe.

Exchange, latest wins, no queue:

* wrench in — a seqlock-protected slot in shared memory written by the API process
  (version, wrench, frame, seq, arrival time); the loop polls it at each cycle start;
* twist in — a second slot of the same layout (version, twist, frame, seq, arrival time);
* state out — a seqlock-protected slot rewritten by the loop every cycle, and one byte on a
  pipe per publish: the API process's asyncio event loop watches that pipe (:class:`StateFeed`),
  reads the state once and wakes every WebSocket sender (:meth:`LoopWorker.states`), so a
  state goes out when the loop publishes it, not on a sender's own schedule;
* everything rare (config, start/stop/hold, targets, statistics) — request/reply on a pipe.

Seqlock: the writer makes the version odd, writes, makes it even; a reader copies and
retries while the version was odd or changed. One writer per slot: the wrench slot's writers
in the API process (threadpool handlers, WebSocket handlers) take one lock.

Heartbeat: a thread of the loop process writes time.monotonic() (system-wide clock) to its
own 8-byte slot every few ms, so the API tells a dead or stuck process from a quiet one.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator
from multiprocessing import shared_memory
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
from pydantic import ValidationError

from fdcontrol.control.twist import TwistError, check_twist
from fdcontrol.loop import ControlLoop, InputError, check_wrench
from fdcontrol.loop.cycle import SensorLoaded
from fdcontrol.loop.state import LoopState
from fdcontrol.server.shm_layout import FAULT_BYTES, LAYOUT, MAX_DOF, OUT_SIZE  # noqa: F401  (re-exported)
from fdcontrol.server.sim_ops import sim_call
from fdcontrol.server.taskspace import task_call

RECORDED = ("start", "stop", "hold", "zero_sensor", "target", "task")  # accepted commands that go into a recording

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
SHM_BYTES = HOLD_OFFSET + 8
HEARTBEAT_PERIOD = 0.01  # s
SEQ_MAX = 2**53  # the slot holds float64: integers beyond this would not round-trip



def _slot_write(slot: np.ndarray, vec: np.ndarray, frame: str, seq: int, t: float) -> None:
    """Seqlock write: the record is built before the version turns odd, published when it turns even."""
    rec = np.empty(IN_SIZE - 1)
    rec[0:6] = vec
    rec[6] = 1.0 if frame == "tool" else 0.0
    rec[7] = float(seq)
    rec[8] = t
    v = slot[0]
    slot[0] = v + 1
    slot[1:] = rec
    slot[0] = v + 2


def _slot_read(slot: np.ndarray) -> tuple[int, np.ndarray, str, int, float] | None:
    """(version, vector, frame, seq, t) of a consistent copy, or None when the writer kept it busy."""
    for _ in range(100):
        v1 = slot[0]
        data = slot.copy()
        if v1 % 2 == 0 and slot[0] == v1:
            return (int(v1), data[1:7], "tool" if data[7] else "base", int(data[8]), float(data[9]))
    return None

class TornRead(RuntimeError):
    """The state slot stayed mid-write (its writer died or stalled inside a write)."""


class Channel:
    """The shared-memory block: wrench slot, twist slot, heartbeat, state slot."""

    def __init__(self, name: str | None = None) -> None:
        self.shm = shared_memory.SharedMemory(name=name, create=name is None, size=SHM_BYTES)
        buf = self.shm.buf
        self.inp = np.ndarray((IN_SIZE,), dtype=np.float64, buffer=buf, offset=0)
        self.twist = np.ndarray((IN_SIZE,), dtype=np.float64, buffer=buf, offset=TWIST_OFFSET)
        self.heartbeat = np.ndarray((1,), dtype=np.float64, buffer=buf, offset=HEARTBEAT_OFFSET)
        self.out = np.ndarray((1 + OUT_SIZE,), dtype=np.float64, buffer=buf, offset=STATE_OFFSET)
        self.hold = np.ndarray((1,), dtype=np.float64, buffer=buf, offset=HOLD_OFFSET)
        self._tmp = LAYOUT.empty()  # the packed state, built before the seqlock write (and copied by the ring)
        if name is None:
            self.inp[:] = 0
            self.twist[:] = 0
            self.out[:] = 0
            self.heartbeat[:] = 0
            self.hold[:] = 0

    @property
    def name(self) -> str:
        return self.shm.name

    # ------------------------------------------------------------------ input slots
    # The wrench and twist slots share one layout, float64: version, vector[6], frame (1 = tool),
    # seq, t. One writer at a time (the caller's lock: LoopWorker._wrench_lock / _twist_lock).
    def write_wrench(self, w: np.ndarray, frame: str, seq: int, t: float) -> None:
        _slot_write(self.inp, w, frame, seq, t)

    def read_wrench(self) -> tuple[int, np.ndarray, str, int, float] | None:
        return _slot_read(self.inp)

    def write_twist(self, v: np.ndarray, frame: str, seq: int, t: float) -> None:
        _slot_write(self.twist, v, frame, seq, t)

    def read_twist(self) -> tuple[int, np.ndarray, str, int, float] | None:
        return _slot_read(self.twist)

    # ------------------------------------------------------------------ state slot
    def write_state(self, s: LoopState, last_cycle_at: float) -> None:
        """Pack ``s`` (fdcontrol.loop.state.SharedLayout), then one seqlock write of the packed vector."""
        LAYOUT.pack(s, self._tmp, last_cycle_at=last_cycle_at)
        v = self.out[0]
        self.out[0] = v + 1
        self.out[1:] = self._tmp
        self.out[0] = v + 2

    def _copy_state(self, tries: int = 1000) -> np.ndarray:
        """A consistent copy of the packed state (seqlock read), yielding the CPU between tries."""
        for _ in range(tries):
            v1 = self.out[0]
            o = self.out[1:].copy()
            if v1 % 2 == 0 and self.out[0] == v1:
                return o
            time.sleep(0)
        raise TornRead("the state slot stayed mid-write: the loop process is dead or stuck")

    def read_state(self, tries: int = 1000) -> tuple[LoopState, float]:
        """The newest state and its last_cycle_at (s, time.monotonic()), from a consistent copy."""
        state, extra = LAYOUT.unpack(self._copy_state(tries))
        return state, extra["last_cycle_at"]

    def read_running(self) -> tuple[bool, float]:
        """(running, last_cycle_at) of the newest state, without decoding the rest (liveness checks)."""
        o = self._copy_state()
        return bool(o[LAYOUT.slots["running"].start]), float(o[LAYOUT.slots["last_cycle_at"].start])

    def read_reaction_count(self) -> int:
        """The newest state's reaction_count, without decoding the rest (a rule's switch may have changed
        the configuration in the loop process)."""
        return int(self._copy_state()[LAYOUT.slots["reaction_count"].start])

    def close(self, unlink: bool = False) -> None:
        # drop our numpy views first, or SharedMemory.close() refuses (exported buffers)
        del self.inp, self.out, self.twist, self.heartbeat, self.hold
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
        self.ring: Any = None  # fdcontrol.server.record_ring.StateRing: every state, for the API's recorder
        self.metrics: Any = None  # fdcontrol.server.metrics.LoopMetrics: edge counters
        # the state slot's one-writer rule: the loop thread publishes every cycle, the command
        # thread after stop() and reconfiguration; uncontended, the lock costs ~0.1 µs
        self._publish_lock = threading.Lock()
        self._ring_cycle = -1
        self.notify: int | None = None  # write end of the publish pipe (non-blocking), see StateFeed

    def poll(self, loop: ControlLoop) -> None:
        holds = float(self.ch.hold[0])
        if holds != self.holds_seen:  # a hold request: before this cycle's inputs
            self.holds_seen = holds
            loop.hold(True)
        slot = self.ch.read_wrench()
        if slot is not None and slot[0] != self.version:
            self.version = slot[0]
            _, w, frame, seq, t = slot
            with contextlib.suppress(ValueError):  # validated by the API already
                loop.set_wrench(w, frame, seq, t)
        tw = self.ch.read_twist()
        if tw is not None and tw[0] != self.twist_version:
            self.twist_version = tw[0]
            _, v, frame, seq, t = tw
            with contextlib.suppress(ValueError):
                loop.set_twist(v, frame, seq, t)

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
            with contextlib.suppress(OSError):
                os.write(self.notify, b"\0")
        if self.metrics is not None:
            self.metrics.observe(state)


def _beat(channel: Channel, stop: threading.Event, realtime: bool = False) -> None:
    if realtime:  # as timely as the loop thread (SCHED_FIFO, below its priority) where permitted: on a
        # loaded machine a normal thread's heartbeat goes stale while the loop cycles on time
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(5))  # type: ignore[attr-defined]
    while not stop.wait(HEARTBEAT_PERIOD):
        channel.heartbeat[0] = time.monotonic()


# ---------------------------------------------------------------------- worker process
def _scheduler(loop: ControlLoop) -> str | None:
    """The loop thread's scheduling policy (SCHED_FIFO when real-time was granted); None while stopped."""
    thread = getattr(loop, "_thread", None)
    if thread is None or not thread.is_alive() or thread.native_id is None:
        return None
    try:
        policy = os.sched_getscheduler(thread.native_id)
    except (AttributeError, OSError):  # not Linux, or the thread just ended
        return None
    names = {getattr(os, n, None): n for n in ("SCHED_OTHER", "SCHED_FIFO", "SCHED_RR", "SCHED_BATCH", "SCHED_IDLE")}
    return names.get(policy, str(policy))


def _worker_main(settings_json: str, shm_name: str, conn: Connection, notify: Connection) -> None:
    from fdcontrol.server.metrics import LoopMetrics
    from fdcontrol.server.record_ring import StateRing
    from fdcontrol.server.runtime import ConflictError, PolicyError, Runtime
    from fdcontrol.server.settings import Settings

    settings = Settings.model_validate_json(settings_json)
    sys.setswitchinterval(settings.switch_interval)
    channel = Channel(shm_name)
    try:
        runtime = Runtime(settings)
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        channel.close()
        return
    beating = threading.Event()
    threading.Thread(target=_beat, args=(channel, beating, settings.realtime), name="fdcontrol-heartbeat",
                     daemon=True).start()
    io = ShmIO(channel)
    os.set_blocking(notify.fileno(), False)
    io.notify = notify.fileno()
    io.ring, io.metrics = StateRing(shm_name + "r"), LoopMetrics()
    io.metrics.start_folding(lambda: runtime.loop.stats)

    def attach() -> None:
        runtime.loop.io = io
        io.publish(runtime.loop, runtime.loop.state)

    attach()
    conn.send(("ok", runtime.params.model_dump()))
    handlers = {
        "start": lambda: runtime.loop.start(),
        "stop": lambda: runtime.loop.stop(),
        "hold": lambda on: runtime.loop.hold(on),
        "zero_sensor": lambda: runtime.loop.zero_sensor(),
        "target": lambda pose: runtime.loop.set_target(pose),
        "action": lambda pose, step, seq, t: runtime.loop.set_action(pose, step, seq, t),  # routers/learning.py
        "stats": lambda: {**runtime.loop.stats.summary(), "scheduler": _scheduler(runtime.loop)},
        "has_sensor": lambda: runtime.loop.driver.read_wrench() is not None,
        "sim": lambda op, *a: sim_call(runtime.loop.driver, op, *a),  # server/sim_ops.py
        "metrics": lambda: io.metrics.snapshot(runtime.loop.stats, runtime.loop.driver),
        "modules": lambda: sorted(sys.modules),  # what the loop process imported (tests/test_layering.py)
        "task": lambda op, *a: task_call(runtime, op, *a),  # server/taskspace.py
        "driver_call": lambda name: _driver_call(runtime.loop, name),  # recover / reconnect (robot errors)
        "params": lambda: runtime.params.model_dump(),  # with what reactions switched (server/runtime.py)
    }
    while True:
        try:
            cmd, args = conn.recv()
        except (EOFError, OSError):
            break
        if cmd == "close":
            break
        try:
            if cmd == "update":
                params = runtime.update(args[0])
                attach()
                result: Any = params.model_dump()
            else:
                result = handlers[cmd](*args)
            conn.send(("ok", result))
        except (ConflictError, SensorLoaded) as exc:  # SensorLoaded: zeroing under a load (409)
            conn.send(("conflict", str(exc)))
        except PolicyError as exc:
            conn.send(("invalid", str(exc)))
        except ValidationError as exc:
            conn.send(("invalid", [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]))
        except ValueError as exc:  # a refused request: its reason is the reply (TypeError, KeyError… are bugs: printed)
            conn.send(("invalid", f"{type(exc).__name__}: {exc}"))
        except Exception as exc:  # unexpected: report, print where, keep serving
            conn.send(("invalid", f"{type(exc).__name__}: {exc}"))
            traceback.print_exc()
    beating.set()
    runtime.close()
    io.ring.close()
    channel.close()


def _driver_call(loop: ControlLoop, name: str) -> None:
    """An optional driver capability (``recover``, ``reconnect``) by name; 409 without it."""
    from fdcontrol.server.runtime import ConflictError

    if name not in ("recover", "reconnect") or not loop.driver.can_recover:
        raise ConflictError(f"the {type(loop.driver).__name__} driver has no {name}")
    loop.driver.recover() if name == "recover" else loop.driver.reconnect()


class _Fanout:
    """The feed's side in one asyncio event loop: the newest state, and the senders waiting for it.

    Waiters are grouped by decimation d and phase p; a publish wakes a group when its cycle k
    enters a new block, (k − p) // d, the smallest decimations (control clients) first,
    ``WAKE_CHUNK`` senders per event-loop pass: between chunks the event loop reads its sockets,
    so an incoming wrench is not held up behind sends to many watchers. Phases spread watchers
    of one decimation over the cycles of a block (see :meth:`LoopWorker.states`).
    """

    WAKE_CHUNK = 2

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.subscribers = 0
        self.current: LoopState | None = None  # what the senders of this loop read (one encoding per state)
        self._posted: LoopState | None = None
        self._pending = False
        # (decimation, phase) → [block last woken, [futures]], kept sorted: smallest decimation first
        self._groups: dict[tuple[int, int], list[Any]] = {}

    def _group(self, decimation: int, phase: int) -> list[Any]:
        group = self._groups.get((decimation, phase))
        if group is None:
            group = self._groups[decimation, phase] = [None, []]
            self._groups = dict(sorted(self._groups.items()))
        return group

    def wait(self, decimation: int, phase: int = 0) -> asyncio.Future[None]:
        """Done when a state of a new block (cycle − ``phase``) // ``decimation`` has been published."""
        fut = self.loop.create_future()
        self._group(decimation, phase)[1].append(fut)
        return fut

    def forget(self, decimation: int, fut: asyncio.Future[None], phase: int = 0) -> None:
        """A waiter that stopped waiting (heartbeat timeout, client gone): no list grows while stopped."""
        if not fut.done() or fut.cancelled():
            with contextlib.suppress(KeyError, ValueError):
                self._groups[decimation, phase][1].remove(fut)

    def deliver(self, s: LoopState) -> None:
        """In this fanout's event loop: the newest state, its senders woken now."""
        self._posted = s
        self._fire()

    def post(self, s: LoopState) -> None:
        """From another thread: hand over the newest state; at most one wake-up queued (drop-latest)."""
        self._posted = s
        if not self._pending:
            self._pending = True
            with contextlib.suppress(RuntimeError):  # the event loop is closed
                self.loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        self._pending = False  # before reading: a state posted from now on queues another wake-up
        s = self.current = self._posted
        if s is None:
            return
        ready: list[asyncio.Future[None]] = []
        for (d, p), group in self._groups.items():
            block = (s.cycle - p) // d
            if block != group[0] and group[1]:
                group[0] = block
                ready += group[1]
                group[1] = []
        self._wake(ready)

    def _wake(self, futures: list[asyncio.Future[None]]) -> None:
        for f in futures[: self.WAKE_CHUNK]:
            if not f.done():  # a sender that timed out (heartbeat) or left
                f.set_result(None)
        if len(futures) > self.WAKE_CHUNK:
            self.loop.call_soon(self._wake, futures[self.WAKE_CHUNK:])


class StateFeed:
    """The API process's end of the loop's publish pipe: no thread of its own — one asyncio event
    loop watches the pipe (``loop.add_reader``), reads each new state once and fans it out.

    Per publish, in the watching event loop: one ``os.read`` (it drains every byte written
    meanwhile: states that came faster than the event loop are skipped, never queued), one
    state read when anybody listens, its own senders woken at once and one
    ``call_soon_threadsafe`` per other event loop. Why no thread: a feed thread adds a wake-up
    and a GIL hand-off to every state (measured tails of 2–4 ms when the event loop thread held
    the GIL). The watching loop is the first one with subscribers; when its last sender leaves,
    the next loop with subscribers takes over. The loop process never waits for any of it.
    """

    def __init__(self, channel: Channel, pipe: Connection) -> None:
        self.channel, self.pipe = channel, pipe
        self.fd = pipe.fileno()
        os.set_blocking(self.fd, False)  # the read end only: the loop process's write end keeps its own flags
        self._fanouts: dict[asyncio.AbstractEventLoop, _Fanout] = {}
        self._lock = threading.Lock()
        self._watcher: _Fanout | None = None  # the fanout whose event loop watches the pipe
        self.closed = False
        self.ended = False  # EOF: the loop process has exited, no publish will come

    def _on_readable(self) -> None:
        """The watching event loop: a publish (or EOF) on the pipe."""
        try:
            if not os.read(self.fd, 4096):
                self._end()  # EOF: the loop process has exited
                return
        except BlockingIOError:  # another event loop that watched before drained it
            return
        except OSError:
            self._end()
            return
        with self._lock:
            if self.closed:
                return
            fanouts = [f for f in self._fanouts.values() if f.subscribers]
        if not fanouts:
            return
        try:
            # few tries: a slot mid-write holds a newer state, whose own byte wakes us again
            # (a writer preempted mid-write must not stall the event loop)
            s, _ = self.channel.read_state(tries=3)
        except TornRead:
            return
        except Exception:  # the channel was closed under us
            self._end()
            return
        here = asyncio.get_running_loop()
        for f in fanouts:
            if f.loop is here:
                f.deliver(s)
            else:
                f.post(s)

    def _end(self) -> None:
        with self._lock:
            self.ended = True
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            _unwatch(watcher.loop, self.fd)

    def _watch(self, f: _Fanout) -> None:
        """In ``f``'s event loop: watch the pipe if ``f`` is still the one chosen to."""
        with self._lock:
            if self._watcher is f and not (self.closed or self.ended):
                f.loop.add_reader(self.fd, self._on_readable)

    def join(self) -> _Fanout:
        """Subscribe from the running event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            f = self._fanouts.get(loop)
            if f is None:
                f = self._fanouts[loop] = _Fanout(loop)
            f.subscribers += 1
            start = self._watcher is None and not (self.closed or self.ended)
            if start:
                self._watcher = f
        if start:
            self._watch(f)
        return f

    def leave(self, f: _Fanout) -> None:
        with self._lock:
            f.subscribers -= 1
            if f.subscribers:
                return
            self._fanouts.pop(f.loop, None)
            if self._watcher is not f:
                return
            self._watcher = successor = next(iter(self._fanouts.values()), None)
        _unwatch(f.loop, self.fd)
        if successor is not None:
            with contextlib.suppress(RuntimeError):  # that event loop is closed
                successor.loop.call_soon_threadsafe(self._watch, successor)

    def close(self) -> None:
        """Stop watching, then close the pipe: the watching event loop removes its reader
        first (from its own thread), so a reused fd number is never read by this feed."""
        with self._lock:
            self.closed = True
            watcher, self._watcher = self._watcher, None
        if watcher is None or watcher.loop.is_closed() or _in_loop(watcher.loop):
            if watcher is not None and not watcher.loop.is_closed():
                watcher.loop.remove_reader(self.fd)
            self.pipe.close()
            return
        try:
            watcher.loop.call_soon_threadsafe(self._close_in, watcher.loop)
        except RuntimeError:  # closed meanwhile: its selector went with it
            self.pipe.close()

    def _close_in(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.remove_reader(self.fd)
        self.pipe.close()


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _unwatch(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """Remove the pipe's reader from ``loop``, from that loop's own thread."""
    if loop.is_closed():
        return
    if _in_loop(loop):
        loop.remove_reader(fd)
        return
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(loop.remove_reader, fd)


class _Exiting:
    """True once the process's main thread has exited (Linux: state Z/X in /proc/<pid>/stat),
    before waitpid reports it: its other threads may take a while longer to end. The file is
    opened once and re-read at offset 0 (procfs regenerates it), a few µs per check."""

    def __init__(self, pid: int | None) -> None:
        try:
            self.fd: int | None = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        except OSError:
            self.fd = None  # not Linux: waitpid alone

    def __call__(self) -> bool:
        if self.fd is None:
            return False
        try:
            return os.pread(self.fd, 1024, 0).rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
        except (OSError, IndexError):
            return True  # the process is gone

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


class WorkerError(RuntimeError):
    def __init__(self, kind: str, detail: Any) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


class LoopWorker:
    """API-side handle of the loop process.

    ``stale_after`` (s): the loop process counts as stuck when its heartbeat — or, while the
    loop runs, its last cycle — is older than this (one watchdog period by default).
    """

    def __init__(self, settings: Any, stale_after: float | None = None) -> None:
        self.channel = Channel()
        from fdcontrol.recording import Recorder
        from fdcontrol.server.record_ring import StateRing

        self.ring = StateRing(self.channel.name + "r", create=True)  # the loop process attaches by name
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self._published, notify = ctx.Pipe(duplex=False)  # one byte per published state
        self.proc = ctx.Process(target=_worker_main, name="fdcontrol-loop",
                                args=(settings.model_dump_json(), self.channel.name, child, notify), daemon=True)
        self.feed: StateFeed | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._wrench_lock = threading.Lock()  # the wrench slot's one-writer rule, across handler threads
        self._hold_lock = threading.Lock()  # the hold counter's one writer
        try:
            self.proc.start()
            notify.close()  # the loop process holds the only write end: its exit is EOF for the feed
            if not self.conn.poll(60):
                raise WorkerError("dead", "the loop process did not start in 60 s")
            kind, payload = self.conn.recv()
            if kind != "ok":
                raise WorkerError("startup", payload)
            self._exiting = _Exiting(self.proc.pid)
        except BaseException:
            self._discard()
            raise
        self.feed = StateFeed(self.channel, self._published)
        self.params: dict[str, Any] = payload
        self.max_force, self.max_torque = payload["max_force"], payload["max_torque"]
        self.stale_after = stale_after or max(float(payload["command_timeout"]), 0.05)
        self._seq = 0
        self._twist_seq = 0
        self._twist_lock = threading.Lock()  # one writer at a time on the twist seqlock
        # MCAP recording: written here, in the API process, from the ring (see server/record_ring.py)
        self.recorder = Recorder(cycle=lambda: self.state()[0].cycle, on_start=self.ring.set_active,
                                 source=self.ring.read)
        self.started_at = time.monotonic()
        self.last_target: np.ndarray | None = None  # the last accepted tip target (4×4, base frame)

    @property
    def params(self) -> dict[str, Any]:
        """The configuration; fetched again from the loop process after a reaction fired (a rule's
        switch may have changed the law's mode or parameters there: fdcontrol.control.switch)."""
        try:
            rx = self.channel.read_reaction_count()
        except Exception:  # a dead or torn state: the last known configuration
            return self._params
        if rx != self._params_rx:
            try:
                self._params = self.call("params")  # (the recording has the switch in the state's reaction_event)
                self._params_rx = rx
                self.max_force, self.max_torque = self._params["max_force"], self._params["max_torque"]
            except WorkerError:
                pass
        return self._params

    @params.setter
    def params(self, p: dict[str, Any]) -> None:
        self._params = p
        self._params_rx = 0

    def _discard(self) -> None:
        if hasattr(self, "_exiting"):
            self._exiting.close()
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(2)
        self._closed = True
        if self.feed is not None:
            self.feed.close()
        else:
            self._published.close()
        self.channel.close(unlink=True)
        self.ring.close(unlink=True)

    def problem(self) -> str | None:
        """Why the loop process cannot be trusted right now, or None when it is healthy."""
        if not self.proc.is_alive():
            return f"the loop process has exited (exit code {self.proc.exitcode})"
        if self._exiting():
            return "the loop process has exited (it is ending)"
        now = time.monotonic()
        beat = float(self.channel.heartbeat[0])
        if beat and now - beat > self.stale_after:
            return f"the loop process is not responding (heartbeat {now - beat:.3f} s old)"
        try:
            running, last = self.channel.read_running()
        except TornRead as exc:
            return str(exc)
        if running and last and now - last > self.stale_after:
            return f"the control loop is stalled (last cycle {now - last:.3f} s ago)"
        return None

    def check(self) -> None:
        """Raise WorkerError("dead") when the loop cannot take commands (no false acknowledgements)."""
        p = self.problem()
        if p is not None:
            raise WorkerError("dead", p)

    def call(self, cmd: str, *args: Any, timeout: float = 30.0) -> Any:
        with self._lock:
            if not self.proc.is_alive():
                raise WorkerError("dead", "the loop process is not running")
            self.conn.send((cmd, args))
            if not self.conn.poll(timeout):
                raise WorkerError("timeout", f"the loop process did not answer {cmd!r}")
            kind, payload = self.conn.recv()
        if kind != "ok":
            raise WorkerError(kind, payload)
        if cmd == "target" and args:  # the tip's target, for the viewers (server/foxglove.py)
            self.last_target = np.asarray(args[0], dtype=float)
        if cmd in RECORDED:
            self.recorder.push_command(cmd, *args)
        return payload

    def record_start(self, path: Any) -> dict[str, Any]:
        from fdcontrol.recording import robot_info_from_params

        return self.recorder.start(path, self.params, robot_info_from_params(self.params))

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        self.params = self.call("update", changes)
        self.max_force, self.max_torque = self.params["max_force"], self.params["max_torque"]
        if self.recorder.active:
            from fdcontrol.recording import robot_info_from_params

            self.recorder.push_config(self.params, changes, robot_info_from_params(self.params))
        return self.params

    def set_wrench(self, wrench: Any, frame: str = "base", seq: int | None = None) -> int:
        """Validated here (errors reach the caller at once), handed over latest-wins; its sequence number."""
        self.params  # noqa: B018 — after a reaction fired: its switch may have tightened max_force / max_torque
        w = check_wrench(wrench, self.max_force, self.max_torque, frame)
        if seq is not None and not (isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq <= SEQ_MAX):
            raise InputError(f"seq must be an integer in [0, {SEQ_MAX}]")
        self.check()
        with self._wrench_lock:
            self._seq = self._seq + 1 if seq is None else int(seq)
            self.channel.write_wrench(w, frame, self._seq, time.monotonic())
        self.check()  # died while it was written: no acknowledgement of a wrench nobody reads
        self.recorder.push_command("wrench", w, frame, self._seq)
        return self._seq

    def request_hold(self) -> None:
        """Hold, through shared memory: the loop takes it at its next cycle start (no pipe round-trip, so
        nothing queued ahead of it); the caller checks the loop is alive first and waits for the state."""
        self.recorder.push_command("hold", True)  # stamped first: its time is never after the loop can see it
        with self._hold_lock:
            self.channel.hold[0] = self.channel.hold[0] + 1.0

    def set_twist(self, twist: Any, frame: str = "base", seq: int | None = None) -> None:
        """A commanded tip twist [v; ω] (fdcontrol.control.twist), validated here, handed over latest-wins."""
        try:
            v = check_twist(twist, frame)
        except TwistError as exc:
            raise InputError(str(exc)) from exc
        if seq is not None and not (isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq <= SEQ_MAX):
            raise InputError(f"seq must be an integer in [0, {SEQ_MAX}]")
        self.check()
        with self._twist_lock:
            self._twist_seq = self._twist_seq + 1 if seq is None else int(seq)
            self.channel.write_twist(v, frame, self._twist_seq, time.monotonic())
        self.check()

    def state(self) -> tuple[LoopState, float]:
        if self._closed:
            raise WorkerError("dead", "the loop process was closed")
        try:
            return self.channel.read_state()
        except TornRead as exc:
            raise WorkerError("dead", str(exc)) from None

    async def states(self, decimation: int = 1, heartbeat: float = 0.5,
                     phase: int = 0) -> AsyncIterator[tuple[LoopState, bool]]:
        """``(state, fresh)`` as the loop publishes them: the newest state of each new block of
        ``decimation`` cycles (``fresh`` True), or, after ``heartbeat`` s without one, the state
        in shared memory again (``fresh`` False: the loop is stopped, dead or stuck).

        Blocks are (cycle − ``phase``) // ``decimation``: consumers of one decimation with
        different phases are woken on different cycles, so many watchers do not all send on
        the same cycle (a burst that would compete with the control clients' states).

        The first item is the current state. Drop-latest: a consumer that takes longer than
        ``decimation`` cycles gets the newest state next, never a queue. Raises WorkerError when
        the state cannot be read; use with ``contextlib.aclosing``.
        """
        if self.feed is None:
            raise WorkerError("dead", "the loop process did not start")
        fan = self.feed.join()
        phase %= decimation
        try:
            behind = fan.current  # delivered before the read below, so never newer: never sent after it
            s = self.state()[0]
            mine = (s.cycle - phase) // decimation
            yield s, True
            while True:
                s = fan.current
                if s is not None and s is not behind and (s.cycle - phase) // decimation != mine:
                    mine = (s.cycle - phase) // decimation
                    yield s, True
                    continue
                fut = fan.wait(decimation, phase)
                try:
                    async with asyncio.timeout(heartbeat):
                        await fut
                    continue
                except TimeoutError:
                    pass
                finally:
                    fan.forget(decimation, fut, phase)
                s = self.state()[0]
                mine = (s.cycle - phase) // decimation
                yield s, False
        finally:
            self.feed.leave(fan)

    def wait_state(self, done: Any, timeout: float = 1.0) -> LoopState:
        """The newest state once ``done(state)`` holds, or after ``timeout`` s (bounded)."""
        end = time.monotonic() + timeout
        s = self.state()[0]
        while not done(s) and time.monotonic() < end:
            time.sleep(0.002)
            s = self.state()[0]
        return s

    @property
    def alive(self) -> bool:
        return self.proc.is_alive()

    def close(self) -> None:
        if self.recorder.active:  # a clean shutdown finishes the file (summary and index)
            with contextlib.suppress(Exception):
                self.recorder.stop()
        with contextlib.suppress(Exception):
            with self._lock:
                self.conn.send(("close", ()))
        self.proc.join(5)
        self._discard()
