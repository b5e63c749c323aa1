"""Published states to the API's senders: the loop process writes one byte on a pipe per
publish; one asyncio event loop of the API process watches that pipe (:class:`StateFeed`),
reads the state once from shared memory and wakes every WebSocket sender waiting for it
(:class:`_Fanout`), so a state goes out when the loop publishes it, not on a sender's own
schedule (fdcontrol.server.worker.LoopWorker.snapshots)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from fdcontrol.loop.state import LoopState
from fdcontrol.server.channel import Channel, TornRead
from fdcontrol.server.shm_layout import LAYOUT

#: the watchers' states leave this fraction of the loop's period after the control clients' (StateFeed.later_delay)
WATCHERS_AFTER = 0.5
_CYCLE = LAYOUT.slots["cycle"].start
_REACTIONS = LAYOUT.slots["reaction_count"].start


class Snapshot:
    """One published state as read from shared memory: its packed slots (a private copy), decoded only as far as
    a reader asks. ``cycle`` and ``reaction_count`` are read at once (the feed's blocks, the streams' events);
    :meth:`wire` gives the wire dict straight from the slots (the WebSocket senders' encoding, no LoopState
    built); :attr:`state` the LoopState, decoded once on first use."""

    __slots__ = ("_state", "cycle", "reaction_count", "row")

    def __init__(self, row: np.ndarray) -> None:
        self.row = row
        self.cycle = int(row.item(_CYCLE))
        self.reaction_count = int(row.item(_REACTIONS))
        self._state: LoopState | None = None

    @property
    def state(self) -> LoopState:
        if self._state is None:
            self._state = LAYOUT.unpack(self.row)[0]
        return self._state

    def wire(self) -> dict[str, Any]:
        """The state's wire dict (fdcontrol.loop.state.to_dict), a new one per call."""
        return LAYOUT.wire(self.row)


class _Fanout:
    """The feed's side in one asyncio event loop: the newest state, and the senders waiting for it.

    Waiters are grouped by decimation d and phase p; a publish wakes a group when its cycle k
    enters a new block, (k − p) // d, the smallest decimations first, ``WAKE_CHUNK`` senders per
    event-loop pass: between chunks the event loop reads its sockets, so an incoming wrench is not
    held up behind sends to many watchers. Phases spread watchers of one decimation over the cycles
    of a block (see :meth:`LoopWorker.snapshots`).

    Waiters that wait ``later`` (the read-only watchers) are woken ``later_delay`` s after the
    others (the control clients): a control client's state reaches its socket, and its reader the
    CPU, before the watchers' sends and the watchers' own processes compete for one.
    """

    WAKE_CHUNK = 2

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.subscribers = 0
        self.current: Snapshot | None = None  # what the senders of this loop read (one encoding per state)
        self._posted: Snapshot | None = None
        self._pending = False
        self.later_delay = 0.0  # s between waking the first waiters of a publish and the `later` ones
        # (later, decimation, phase) → [block last woken, [futures]], kept sorted: the first waiters before the
        # later ones, each smallest decimation first
        self._groups: dict[tuple[bool, int, int], list[Any]] = {}
        # waiters with a timeout: future → (deadline on loop.time(), group key); one timer for all of them
        # (at the earliest deadline), not one per wait — a sender waits once per state it sends
        self._deadlines: dict[asyncio.Future[bool], tuple[float, tuple[bool, int, int]]] = {}
        self._expiry: asyncio.TimerHandle | None = None

    def _group(self, key: tuple[bool, int, int]) -> list[Any]:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = [None, []]
            self._groups = dict(sorted(self._groups.items()))
        return group

    def wait(self, decimation: int, phase: int = 0, timeout: float | None = None,
             later: bool = False) -> asyncio.Future[bool]:
        """Done when a state of a new block (cycle − ``phase``) // ``decimation`` has been published (result
        False), or after ``timeout`` s without one (result True; None: no timeout); ``later``: woken
        ``later_delay`` s after the publish (a watcher). Call :meth:`forget` when done with it."""
        fut: asyncio.Future[bool] = self.loop.create_future()
        key = (later, decimation, phase)
        self._group(key)[1].append(fut)
        if timeout is not None:
            deadline = self.loop.time() + timeout
            self._deadlines[fut] = (deadline, key)
            if self._expiry is None or deadline < self._expiry.when():
                self._expire_at(deadline)
        return fut

    def forget(self, decimation: int, fut: asyncio.Future[bool], phase: int = 0, later: bool = False) -> None:
        """A waiter that stopped waiting (woken, timed out, client gone): no list grows while stopped."""
        self._deadlines.pop(fut, None)
        if not fut.done() or fut.cancelled():
            with contextlib.suppress(KeyError, ValueError):
                self._groups[later, decimation, phase][1].remove(fut)

    def _expire_at(self, when: float) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry = self.loop.call_at(when, self._expire)

    def _expire(self) -> None:
        """The timer of the earliest deadline: every waiter past its deadline is done (True), then the timer
        goes to the earliest deadline left (waiters woken meanwhile have left through forget)."""
        self._expiry = None
        now, left = self.loop.time(), math.inf
        for fut, (deadline, key) in list(self._deadlines.items()):
            if fut.done():  # cancelled: its forget removes it
                continue
            if deadline <= now:
                del self._deadlines[fut]
                with contextlib.suppress(KeyError, ValueError):
                    self._groups[key][1].remove(fut)
                fut.set_result(True)
            elif deadline < left:
                left = deadline
        if left < math.inf:
            self._expire_at(left)

    def deliver(self, s: Snapshot) -> None:
        """In this fanout's event loop: the newest state, its senders woken now."""
        self._posted = s
        self._fire()

    def post(self, s: Snapshot) -> None:
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
        ready: list[asyncio.Future[bool]] = []
        later: list[asyncio.Future[bool]] = []
        delay = self.later_delay
        for (deferred, d, p), group in self._groups.items():
            block = (s.cycle - p) // d
            if block != group[0] and group[1]:
                group[0] = block
                if deferred and delay > 0:
                    later += group[1]
                else:
                    ready += group[1]
                group[1] = []
        self._wake(ready)
        if later:  # they read `current` when woken: the newest state then (drop-latest, as ever)
            self.loop.call_later(delay, self._wake, later)

    def _wake(self, futures: list[asyncio.Future[bool]]) -> None:
        for f in futures[: self.WAKE_CHUNK]:
            if not f.done():  # a sender that timed out (heartbeat) or left
                f.set_result(False)
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

    def __init__(self, channel: Channel, pipe: Connection, later_delay: float = 0.0) -> None:
        self.channel, self.pipe = channel, pipe
        self._later_delay = later_delay
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
            s = Snapshot(self.channel.read_packed(tries=3))  # decoded as far as the senders need
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

    @property
    def later_delay(self) -> float:
        """s from a publish to waking the senders that wait ``later`` (the watchers; :class:`_Fanout`)."""
        return self._later_delay

    @later_delay.setter
    def later_delay(self, delay: float) -> None:
        with self._lock:
            self._later_delay = delay
            for f in self._fanouts.values():
                f.later_delay = delay

    def join(self) -> _Fanout:
        """Subscribe from the running event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            f = self._fanouts.get(loop)
            if f is None:
                f = self._fanouts[loop] = _Fanout(loop)
                f.later_delay = self._later_delay
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

