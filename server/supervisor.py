"""Supervision of the loop process: restart a dead or stuck one — into hold, never into motion.

Policy:

* every ``period`` s the supervisor asks the worker what is wrong (:meth:`LoopWorker.problem`, the
  rules of fdcontrol.server.loop_health: process exited, heartbeat stale, loop cycles stale — each
  within one watchdog period);
* a dead process is replaced at once; a stuck one (alive, silent) gets ``kill_after`` s to
  recover, then is killed and replaced;
* the new process gets the parameters in force before (PATCHes survive); when the loop had
  been running it is started *holding*: the arm stays where it is until an operator releases
  the hold (``POST /control/hold {"hold": false}``). A stopped loop stays stopped;
* at most ``max_restarts`` *crashes* per ``restart_window`` s; beyond that the supervisor gives up
  and ``/health`` keeps answering 503 until the service is restarted. Only a process that exited by
  itself (a crash) counts: a stuck process the supervisor killed is replaced (into hold) without
  spending the budget — a stall is no crash (a loaded machine, a slow driver call), and a bad input
  never gets that far, since a cycle that raises holds with a fault and the loop keeps cycling.

While the loop is down every control route and ``/ws/control`` answer errors (503).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from fdcontrol.server.worker import LoopWorker, WorkerError


class Supervisor:
    def __init__(self, settings: Any, get: Callable[[], LoopWorker], install: Callable[[LoopWorker], None],
                 period: float = 0.02, kill_after: float = 2.0,
                 spawn: Callable[[Any], LoopWorker] = LoopWorker,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings, self.get, self.install = settings, get, install
        self.period, self.kill_after = period, kill_after
        self.spawn, self.clock = spawn, clock  # (tests: a fake worker and a fake clock)
        self.restarts = 0
        self.kills = 0  # stuck loop processes killed (and replaced) by the supervisor
        self.gave_up = False
        self._times: deque[float] = deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fdcontrol-supervisor", daemon=True)
        self._was_running = False
        self._stuck_since: float | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.poll()

    def poll(self) -> None:
        """One look at the loop process: note whether it runs, or kill and replace it."""
        w = self.get()
        problem = w.problem()
        if problem is None:
            self._stuck_since = None
            self._was_running = _running(w)
            return
        crashed = not w.proc.is_alive()
        if not crashed:  # stuck: give it a moment before killing it
            now = self.clock()
            if self._stuck_since is None:
                self._stuck_since = now
            if now - self._stuck_since < self.kill_after:
                return
            w.proc.kill()
            w.proc.join(2)
            self.kills += 1
        self._stuck_since = None
        if crashed and not self._budget():  # only a crash spends the budget (a stall is killed and replaced)
            return
        self._restart(w, problem)

    def _budget(self) -> bool:
        if self.gave_up:  # for good: /health answers 503 until the service is restarted
            return False
        now = self.clock()
        while self._times and now - self._times[0] > self.settings.restart_window:
            self._times.popleft()
        if len(self._times) >= self.settings.max_restarts:
            print(f"fdcontrol: loop process restarted {len(self._times)} times in "
                  f"{self.settings.restart_window:g} s; giving up", file=sys.stderr)
            self.gave_up = True
            return False
        self._times.append(now)
        return True

    def _restart(self, old: LoopWorker, problem: str) -> None:
        print(f"fdcontrol: {problem}; restarting it into hold", file=sys.stderr)
        try:
            new = self.spawn(self.settings.with_params(old.params))
        except (WorkerError, OSError) as exc:
            print(f"fdcontrol: loop process restart failed: {exc}", file=sys.stderr)
            return
        new.take_over_recording(old)  # a running recording goes on in the same file, before the new loop starts
        try:
            # running at the last look, and not stopped since (a stop acknowledged between that look and
            # the crash: a loaded machine may not schedule this thread in between)
            if self._was_running and not getattr(old, "stop_acknowledged", False):
                new.call("hold", True)  # before start: the first cycle already holds
                new.call("start")
        except WorkerError as exc:
            print(f"fdcontrol: restarted loop did not start: {exc}", file=sys.stderr)
        self.install(new)
        self.restarts += 1
        old.close()


def _running(w: LoopWorker) -> bool:
    try:
        return w.state()[0].running
    except WorkerError:
        return False
