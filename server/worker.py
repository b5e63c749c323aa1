"""The API process's handle of the loop process (:class:`LoopWorker`): start it, send it
commands and inputs, read its states, hand its states to the recorder.

The pieces it talks through, one file each:

* fdcontrol.server.channel — the shared memory (input slots, state slot, heartbeat, holds, stops);
* fdcontrol.server.loop_process — what runs in the loop process (its command handlers);
* fdcontrol.server.feed — published states to the API's WebSocket senders;
* fdcontrol.server.recording_link — the MCAP recorder fed from the loop's state ring;
* fdcontrol.server.loop_health — whether the loop process can be trusted right now;
* fdcontrol.server.supervisor — restarting a dead or stuck loop process.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np

from fdcontrol.control.twist import TwistError, check_twist
from fdcontrol.loop import InputError, check_wrench
from fdcontrol.loop.state import LoopState
from fdcontrol.server.channel import SEQ_MAX, Channel, TornRead
from fdcontrol.server.feed import WATCHERS_AFTER, Snapshot, StateFeed
from fdcontrol.server.loop_health import Exiting, loop_problem, stall_problem
from fdcontrol.server.loop_process import main as _loop_main
from fdcontrol.server.recording_link import RecordingLink

#: how long a start may take (s): the loop process's first start compiles the numba kernels not yet in the
#: cache (over 2 minutes beside other jobs on a 2-core machine; `python -m fdcontrol.kernels` does it ahead)
START_TIMEOUT = 300.0
#: s a configuration change is waited for (LoopWorker.update): it may compile the link geometry's kernels when numba's
#: cache has none (tens of seconds on a loaded machine); one answered later took effect all the same
UPDATE_TIMEOUT = 120.0
#: after this long (s) a start counts as slow: ``LoopWorker``'s ``on_slow_start`` is called once
SLOW_START = 5.0


class WorkerError(RuntimeError):
    def __init__(self, kind: str, detail: Any) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


class LoopWorker:
    """API-side handle of the loop process.

    ``stale_after`` (s): the loop process counts as stuck when its heartbeat — or, while the
    loop runs, its last cycle — is older than this (one watchdog period by default).
    """

    def __init__(self, settings: Any, stale_after: float | None = None, start_timeout: float = START_TIMEOUT,
                 on_slow_start: Callable[[], None] | None = None, target: Callable[..., None] = _loop_main) -> None:
        self.channel = Channel()
        self.recording = RecordingLink(self.channel.name + "r", cycle=lambda: self.state()[0].cycle)
        self.recorder = self.recording.recorder
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self._published, notify = ctx.Pipe(duplex=False)  # one byte per published state
        self.proc = ctx.Process(target=target, name="fdcontrol-loop",
                                args=(settings.model_dump_json(), self.channel.name, child, notify), daemon=True)
        self.feed: StateFeed | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._wrench_lock = threading.Lock()  # the wrench slot's one-writer rule, across handler threads
        self._hold_lock = threading.Lock()  # the hold and stop counters' one writer
        try:
            self.proc.start()
            notify.close()  # the loop process holds the only write end: its exit is EOF for the feed
            self._wait_started(start_timeout, on_slow_start)
            kind, payload, *more = self.conn.recv()
            if kind != "ok":
                raise WorkerError("startup", payload)
            self._exiting = Exiting(self.proc.pid)
        except BaseException:
            self._discard()
            raise
        # the watchers' states half a period after the control clients' (server/feed.py)
        self.feed = StateFeed(self.channel, self._published, later_delay=WATCHERS_AFTER / float(payload["rate"]))
        self.params: dict[str, Any] = payload
        #: the loop process's numba kernels (fdcontrol.kernel_cache.status; None: not told)
        self.kernels: dict[str, Any] | None = more[0] if more else None
        self.max_force, self.max_torque = payload["max_force"], payload["max_torque"]
        self.stale_after = stale_after or max(float(payload["command_timeout"]), 0.05)
        self._seq = 0
        self._calls = 0  # commands sent to the loop process: each reply carries its command's number (call)
        self._late: dict[int, tuple[str, tuple[Any, ...]]] = {}  # commands whose caller stopped waiting, by number
        self._twist_seq = 0
        self._twist_lock = threading.Lock()  # one writer at a time on the twist seqlock
        self.started_at = time.monotonic()
        self.last_target: np.ndarray | None = None  # the last accepted tip target (4×4, base frame)
        # the loop acknowledged a stop after its last start: a restart brings it back stopped even when
        # the process died before the supervisor's next look saw it stopped (server/supervisor.py)
        self.stop_acknowledged = False

    def _wait_started(self, timeout: float, on_slow: Callable[[], None] | None) -> None:
        """Wait for the loop process's first answer for as long as it lives, at most `timeout` s: a first start
        compiles the numba kernels not yet in the cache (fdcontrol.kernels; a minute or more on a loaded machine).
        ``on_slow()`` once after :data:`SLOW_START` s of waiting."""
        t0 = time.monotonic()
        told = on_slow is None
        while not self.conn.poll(0.25):
            if not self.proc.is_alive():
                self.proc.join(1.0)
                raise WorkerError("dead", f"the loop process exited while starting (exit code {self.proc.exitcode})")
            waited = time.monotonic() - t0
            if waited > timeout:
                raise WorkerError("dead", f"the loop process did not start in {timeout:g} s")
            if not told and waited > SLOW_START:
                told = True
                on_slow()  # type: ignore[misc]

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

    def take_over_recording(self, old: LoopWorker) -> None:
        """A recording running on ``old`` (the process this one replaces) goes on from this one."""
        if self.recording.take_over(old.recording):
            self.recorder = self.recording.recorder

    def _discard(self) -> None:
        if hasattr(self, "_exiting"):
            self._exiting.close()
        if self.proc.is_alive():  # it did not end in order: it ignores SIGTERM (server/loop_process.py)
            self.proc.kill()
            self.proc.join(2)
        self._closed = True
        if self.feed is not None:
            self.feed.close()
        else:
            self._published.close()
        self.channel.close(unlink=True)
        self.recording.close()

    def problem(self) -> str | None:
        """Why the loop process cannot be trusted right now, or None when it is healthy (the health
        rules: fdcontrol.server.loop_health)."""
        return loop_problem(self.proc, self._exiting, self.channel, self.stale_after)

    def check(self) -> None:
        """Raise WorkerError("dead") when the loop cannot take commands (no false acknowledgements)."""
        p = self.problem()
        if p is not None:
            raise WorkerError("dead", p)

    def call(self, cmd: str, *args: Any, timeout: float = 30.0) -> Any:
        with self._lock:
            if not self.proc.is_alive():
                raise WorkerError("dead", "the loop process is not running")
            self._calls += 1
            number, end = self._calls, time.monotonic() + timeout
            self.conn.send((cmd, args, number))
            updated: list[tuple[Any, Any]] = []
            while True:  # a reply to an earlier command that timed out (it came late) is not this one's
                if not self.conn.poll(max(0.0, end - time.monotonic())):
                    self._late[number] = (cmd, args)
                    raise WorkerError("timeout", f"the loop process did not answer {cmd!r}")
                kind, payload, answered = self.conn.recv()
                if answered == number:
                    break
                late_cmd, late_args = self._late.pop(answered, ("", ()))
                if late_cmd == "update" and kind == "ok":  # a change that took effect after all: the loop's params
                    updated.append((payload, late_args[0]))
        for params, changes in updated:
            self._updated(params, changes)
        if kind != "ok":
            raise WorkerError(kind, payload)
        if cmd in ("start", "stop"):
            self.stop_acknowledged = cmd == "stop"
        if cmd == "target" and args:  # the tip's target, for the viewers (server/foxglove.py)
            self.last_target = np.asarray(args[0], dtype=float)
        self.recording.command(cmd, *args)
        return payload

    def record_start(self, path: Any) -> dict[str, Any]:
        return self.recording.start(path, self.params)

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """A configuration change in the loop process: it may build parts (a volume's link geometry, whose kernels
        compile from a cold numba cache in tens of seconds), so it is waited for up to ``UPDATE_TIMEOUT``; a change
        answered later still took effect, and its reply updates ``params`` when the next command reads it."""
        return self._updated(self.call("update", changes, timeout=UPDATE_TIMEOUT), changes)

    def _updated(self, params: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
        self.params = params
        self.max_force, self.max_torque = self.params["max_force"], self.params["max_torque"]
        if self.feed is not None:
            self.feed.later_delay = WATCHERS_AFTER / float(self.params["rate"])
        self.recording.config(self.params, changes)
        return self.params

    def _check_not_stuck(self) -> None:
        """Before a streamed input is written: a stuck loop takes none (it would use it when it resumes, after
        the caller was refused). Its own record only (heartbeat, last cycle: no system call); whether the process
        is alive is asked after the write (:meth:`check`, once per input, not twice): an input left in a dead
        process's slot is read by nobody (its successor has a slot of its own)."""
        if stall_problem(self.channel, self.stale_after) is not None:
            self.check()  # the full rules name the problem (a dead process's heartbeat is stale too)

    def set_wrench(self, wrench: Any, frame: str = "base", seq: int | None = None) -> int:
        """Validated here (errors reach the caller at once), handed over latest-wins; its sequence number."""
        self.params  # noqa: B018 — after a reaction fired: its switch may have tightened max_force / max_torque
        w = check_wrench(wrench, self.max_force, self.max_torque, frame)
        if seq is not None and not (isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq <= SEQ_MAX):
            raise InputError(f"seq must be an integer in [0, {SEQ_MAX}]")
        return self._take_wrench(w, frame, seq)

    def set_plain_wrench(self, wrench: list[float], frame: str, seq: int | None) -> int:
        """:meth:`set_wrench` of a wrench in its plain form (fdcontrol.server.routers.ws.plain_wrench: six finite
        Python floats, frame "base" or "tool", seq None or an int in [0, SEQ_MAX]), as a stream sends hundreds per
        second: of check_wrench's checks only the range is left to do — the same comparisons on the same floats
        (its math.hypot), its error when out of range — and the floats go to the slot without a numpy array."""
        self.params  # noqa: B018 — after a reaction fired: its switch may have tightened max_force / max_torque
        if (math.hypot(wrench[0], wrench[1], wrench[2]) > self.max_force
                or math.hypot(wrench[3], wrench[4], wrench[5]) > self.max_torque):
            check_wrench(wrench, self.max_force, self.max_torque, frame)  # raises InputError, saying the range
        return self._take_wrench(wrench, frame, seq)

    def _take_wrench(self, w: np.ndarray | list[float], frame: str, seq: int | None) -> int:
        """A checked wrench into the loop's input slot (the caller checked ``w``, ``frame`` and ``seq``)."""
        self._check_not_stuck()
        with self._wrench_lock:
            self._seq = self._seq + 1 if seq is None else int(seq)
            self.channel.write_wrench(w, frame, self._seq, time.monotonic())
        self.check()  # dead, or died while it was written: no acknowledgement of a wrench nobody reads
        if self.recorder.active:  # (the recording holds the wrench as an array, as check_wrench gives it)
            self.recorder.push_command("wrench", np.asarray(w, dtype=float), frame, self._seq)
        return self._seq

    def request_hold(self) -> None:
        """Hold, through shared memory: the loop takes it at its next cycle start (no pipe round-trip, so
        nothing queued ahead of it); the caller checks the loop is alive first and waits for the state."""
        self.recorder.push_command("hold", True)  # stamped first: its time is never after the loop can see it
        with self._hold_lock:
            self.channel.hold[0] = self.channel.hold[0] + 1.0

    def request_stop(self) -> None:
        """Stop, through shared memory, like :meth:`request_hold`: the loop brakes from its next cycle start and
        its thread ends at rest by itself (no pipe round-trip, no command thread in the way)."""
        self.recorder.push_command("stop")  # stamped first: its time is never after the loop can see it
        with self._hold_lock:
            self.channel.stop[0] = self.channel.stop[0] + 1.0

    def set_twist(self, twist: Any, frame: str = "base", seq: int | None = None) -> None:
        """A commanded tip twist [v; ω] (fdcontrol.control.twist), validated here, handed over latest-wins."""
        try:
            v = check_twist(twist, frame)
        except TwistError as exc:
            raise InputError(str(exc)) from exc
        if seq is not None and not (isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq <= SEQ_MAX):
            raise InputError(f"seq must be an integer in [0, {SEQ_MAX}]")
        self._check_not_stuck()
        with self._twist_lock:
            self._twist_seq = self._twist_seq + 1 if seq is None else int(seq)
            self.channel.write_twist(v, frame, self._twist_seq, time.monotonic())
        self.check()  # dead, or died while it was written

    def state(self) -> tuple[LoopState, float]:
        if self._closed:
            raise WorkerError("dead", "the loop process was closed")
        try:
            return self.channel.read_state()
        except TornRead as exc:
            raise WorkerError("dead", str(exc)) from None

    def snapshot(self) -> Snapshot:
        """The newest state, undecoded (fdcontrol.server.feed.Snapshot)."""
        if self._closed:
            raise WorkerError("dead", "the loop process was closed")
        try:
            return Snapshot(self.channel.read_packed())
        except TornRead as exc:
            raise WorkerError("dead", str(exc)) from None

    async def snapshots(self, decimation: int = 1, heartbeat: float = 0.5, phase: int = 0,
                        later: bool = False) -> AsyncIterator[tuple[Snapshot, bool]]:
        """``(snapshot, fresh)`` as the loop publishes them: the newest state of each new block of
        ``decimation`` cycles (``fresh`` True), or, after ``heartbeat`` s without one, the state
        in shared memory again (``fresh`` False: the loop is stopped, dead or stuck).

        Blocks are (cycle − ``phase``) // ``decimation``: consumers of one decimation with
        different phases are woken on different cycles, so many watchers do not all send on
        the same cycle (a burst that would compete with the control clients' states). ``later``: a
        watcher's, woken half a period after each publish, once the control clients' states are out
        (fdcontrol.server.feed).

        The first item is the current state. Drop-latest: a consumer that takes longer than
        ``decimation`` cycles gets the newest state next, never a queue. Raises WorkerError when
        the state cannot be read; use with ``contextlib.aclosing``. The states undecoded: each is
        decoded as far as its reader asks, once for all readers (the WebSocket senders encode the
        wire dict straight from it); :meth:`states` gives them decoded.
        """
        if self.feed is None:
            raise WorkerError("dead", "the loop process did not start")
        fan = self.feed.join()
        phase %= decimation
        try:
            behind = fan.current  # delivered before the read below, so never newer: never sent after it
            s = self.snapshot()
            mine = (s.cycle - phase) // decimation
            yield s, True
            while True:
                s = fan.current  # type: ignore[assignment]
                if s is not None and s is not behind and (s.cycle - phase) // decimation != mine:
                    mine = (s.cycle - phase) // decimation
                    yield s, True
                    continue
                fut = fan.wait(decimation, phase, heartbeat, later)  # the fanout's one timer, not one per wait
                try:
                    timed_out = await fut
                finally:
                    fan.forget(decimation, fut, phase, later)
                if not timed_out:
                    continue
                s = self.snapshot()
                mine = (s.cycle - phase) // decimation
                yield s, False
        finally:
            self.feed.leave(fan)

    async def states(self, decimation: int = 1, heartbeat: float = 0.5, phase: int = 0,
                     later: bool = False) -> AsyncIterator[tuple[LoopState, bool]]:
        """:meth:`snapshots` as LoopStates: ``(state, fresh)``, the same items at the same times."""
        async with contextlib.aclosing(self.snapshots(decimation, heartbeat, phase, later)) as it:
            async for s, fresh in it:
                yield s.state, fresh

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
        if self._closed:  # closed already (the app's shutdown, then the command's own ending)
            return
        self.recording.finish()
        with contextlib.suppress(Exception):
            with self._lock:
                self.conn.send(("close", ()))
        self.proc.join(5)
        self._discard()
