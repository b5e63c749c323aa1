"""The supervision policy of docs/security.md, step by step on a fake loop process and a fake clock.

The policy (server/supervisor.py): a dead loop process is replaced at once; a stuck one (alive,
silent) after ``kill_after`` = 2 s; the new one gets the parameters in force before and, when the
loop had been running, starts holding; a stopped loop stays stopped; at most ``max_restarts`` per
``restart_window`` s, after which the supervisor gives up for good. The end-to-end checks on the
real service (a killed loop process, real PATCHes) are in tests/test_security.py.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from fdcontrol.server.settings import Settings
from fdcontrol.server.supervisor import Supervisor
from fdcontrol.server.worker import WorkerError


class FakeProc:
    def __init__(self) -> None:
        self.alive = True
        self.killed = False

    def is_alive(self) -> bool:
        return self.alive

    def kill(self) -> None:
        self.killed = True
        self.alive = False

    def join(self, timeout: float | None = None) -> None:
        pass


class FakeWorker:
    """What the supervisor uses of a LoopWorker: problem(), proc, state(), params, call(), close()."""

    def __init__(self, settings: Any = None, params: dict[str, Any] | None = None, fail: set[str] = frozenset()):
        self.settings = settings
        self.proc = FakeProc()
        self.running = False
        self.holding = False
        self.stuck = False
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.closed = False
        self.took_over: tuple[Any, int] | None = None
        self.fail = fail
        self.params = params if params is not None else (
            {"max_force": settings.max_force, "gamma": settings.gamma} if settings is not None else {})

    def problem(self) -> str | None:
        if not self.proc.alive:
            return "the loop process has exited (exit code -9)"
        return "the control loop is stalled" if self.stuck else None

    def state(self) -> tuple[Any, float]:
        if not self.proc.alive:
            raise WorkerError("dead", "the loop process is not running")
        return SimpleNamespace(running=self.running, holding=self.holding), 0.0

    def call(self, cmd: str, *args: Any) -> Any:
        if cmd in self.fail:
            raise WorkerError("dead", f"{cmd} failed")
        self.calls.append((cmd, args))
        if cmd == "hold":
            assert not self.running, "hold is set before the restarted loop starts (its first cycle holds)"
            self.holding = bool(args[0])
        elif cmd == "start":
            self.running = True
        return None

    def take_over_recording(self, old: FakeWorker) -> None:
        assert not old.closed, "the old process's recording is taken over before it is closed"
        self.took_over = (old, len(self.calls))  # whose recording, and after how many calls

    def close(self) -> None:
        self.closed = True


DT = 1 / 64  # s between looks (exact in binary: the 2 s bound is checked to the step)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Rig:
    """A supervisor over one fake loop process; `spawned` lists the replacements, in order."""

    def __init__(self, **settings: Any) -> None:
        self.settings = Settings(**settings)
        self.clock = Clock()
        self.current = FakeWorker(self.settings)
        self.spawned: list[FakeWorker] = []
        self.spawn_fails = 0
        self.sup = Supervisor(self.settings, lambda: self.current, self._install, spawn=self._spawn,
                              clock=self.clock)

    def _install(self, w: FakeWorker) -> None:
        self.current = w

    def _spawn(self, settings: Any) -> FakeWorker:
        if self.spawn_fails:
            self.spawn_fails -= 1
            raise WorkerError("startup", "the loop process did not start")
        w = FakeWorker(settings)
        self.spawned.append(w)
        return w

    def poll(self, dt: float = DT) -> None:
        self.clock.t += dt
        self.sup.poll()

    def kill(self) -> FakeWorker:
        old = self.current
        old.proc.alive = False
        return old


def test_a_healthy_loop_is_left_alone():
    rig = Rig()
    rig.current.running = True
    for _ in range(500):
        rig.poll()
    assert rig.spawned == [] and rig.sup.restarts == 0 and not rig.current.proc.killed


def test_a_dead_loop_process_is_replaced_at_the_next_look():
    rig = Rig()
    old = rig.kill()
    rig.poll()
    assert len(rig.spawned) == 1 and rig.current is rig.spawned[0]
    assert rig.sup.restarts == 1 and old.closed and not rig.current.closed
    assert rig.current.calls == [] and not rig.current.running  # never seen running: not started


def test_a_running_loop_restarts_holding_and_a_stopped_one_stays_stopped():
    rig = Rig()
    rig.current.running = True
    rig.poll()  # seen running
    rig.kill()
    rig.poll()
    new = rig.current
    assert new.calls == [("hold", (True,)), ("start", ())]
    assert new.running and new.holding
    # it was stopped (by the operator) before it died: the new one is not started, and not told anything
    new.running = False
    rig.poll()
    rig.kill()
    rig.poll()
    assert rig.sup.restarts == 2 and rig.current is not new
    assert rig.current.calls == [] and not rig.current.running


def test_a_loop_stopped_just_before_it_died_comes_back_stopped():
    """A stop the loop acknowledged after the supervisor's last look (which saw it running) wins: the
    process dies before the next look, and the new one is not started."""
    rig = Rig()
    rig.current.running = True
    rig.poll()  # the last look: running
    rig.current.running, rig.current.stop_acknowledged = False, True  # POST /control/stop, acknowledged
    rig.kill()
    rig.poll()
    assert rig.spawned and not rig.current.running and ("start", ()) not in rig.current.calls


def test_a_stuck_loop_process_is_killed_after_two_seconds_not_before():
    rig = Rig()
    rig.current.running = True
    rig.poll()
    stuck = rig.current
    stuck.stuck = True
    rig.poll()  # first seen stuck: t0
    t0 = rig.clock.t
    for _ in range(round(2.0 / DT) - 1):
        rig.poll()
        assert not stuck.proc.killed and rig.spawned == [], rig.clock.t - t0
    assert rig.clock.t - t0 == 2.0 - DT
    rig.poll()  # 2.0 s after it was first seen stuck
    assert stuck.proc.killed and stuck.closed and rig.sup.restarts == 1
    assert rig.current.calls == [("hold", (True,)), ("start", ())]  # it was running: restarted holding


def test_a_loop_that_recovers_in_time_is_not_killed_and_its_clock_starts_again():
    rig = Rig()
    w = rig.current
    w.stuck = True
    for _ in range(120):  # 1.875 s stuck
        rig.poll()
    w.stuck = False
    rig.poll()  # recovered
    w.stuck = True
    for _ in range(120):  # another 1.875 s: 2 s have not passed since it got stuck again
        rig.poll()
    assert not w.proc.killed and rig.spawned == []
    for _ in range(10):
        rig.poll()
    assert w.proc.killed and rig.sup.restarts == 1


@pytest.mark.parametrize(("max_restarts", "window"), [(5, 300.0), (2, 10.0), (0, 300.0)])
def test_the_restart_budget_then_giving_up_for_good(max_restarts, window):
    rig = Rig(max_restarts=max_restarts, restart_window=window)
    for i in range(max_restarts):
        rig.kill()
        rig.poll(1.0)
        assert rig.sup.restarts == i + 1 and not rig.sup.gave_up
    dead = rig.kill()
    rig.poll(1.0)
    assert rig.sup.restarts == max_restarts and rig.sup.gave_up and rig.current is dead
    # given up: the dead process stays (/health 503) even after the window has passed
    for _ in range(3):
        rig.poll(window)
    assert rig.sup.restarts == max_restarts and rig.current is dead and len(rig.spawned) == max_restarts


def test_restarts_older_than_the_window_leave_the_budget():
    rig = Rig(max_restarts=2, restart_window=10.0)
    rig.kill()
    rig.poll(1.0)  # t = 1
    rig.kill()
    rig.poll(8.0)  # t = 9: two in the window
    rig.poll(2.5)  # t = 11.5: the first one has left the window
    rig.kill()
    rig.poll(0.1)
    assert rig.sup.restarts == 3 and not rig.sup.gave_up
    rig.kill()
    rig.poll(0.1)  # three within 10 s would be one too many
    assert rig.sup.restarts == 3 and rig.sup.gave_up


def test_the_restarted_loop_gets_the_parameters_in_force():
    rig = Rig()
    start = rig.settings
    rig.current.params = {**rig.current.params, "max_force": start.max_force / 4, "gamma": 777.0}
    rig.kill()
    rig.poll()
    got = rig.current.settings
    assert got.max_force == start.max_force / 4 and got.gamma == 777.0
    assert got.max_restarts == start.max_restarts  # the process options are the service's own
    rig.kill()
    rig.poll()  # and again from the second one: what it had
    assert rig.current.settings.max_force == start.max_force / 4


def test_the_restarted_loop_gets_structured_parameters_as_models_and_no_box_stays_none():
    """The loop's parameters come back as plain data (JSON): the restarted process's settings hold them
    as their models again (serialized to it without pydantic's warnings), and a workspace box removed
    before the restart stays removed (it is not the simulated arm's start box again)."""
    import json
    import warnings

    from fdcontrol.server.settings import KeepOutSpec, WorkspaceBoxSpec

    rig = Rig()
    box = {"min": [-1.0, -1.0, 0.1], "max": [1.0, 1.0, 1.0], "margin": 0.05, "stiffness": 2000.0, "damping": 90.0}
    ball = {"name": "ball", "sphere": {"center": [0.5, 0.0, 0.3], "radius": 0.1}, "box": None, "plane": None,
            "margin": 0.05, "stiffness": 2000.0, "damping": 90.0}
    rig.current.params = {**rig.current.params, "workspace_box": box, "keep_out": [ball]}
    rig.kill()
    rig.poll()
    got = rig.current.settings
    assert isinstance(got.workspace_box, WorkspaceBoxSpec) and got.workspace_box.model_dump() == box
    assert isinstance(got.keep_out[0], KeepOutSpec) and got.keep_out[0].model_dump() == ball
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Pydantic serializer warnings: Expected `WorkspaceBoxSpec`"
        sent = json.loads(got.model_dump_json())
    assert sent["workspace_box"] == box and sent["keep_out"] == [ball]
    rig.current.params = {**rig.current.params, "workspace_box": None}
    rig.kill()
    rig.poll()
    assert rig.current.settings.workspace_box is None


def test_a_failed_restart_leaves_the_dead_one_and_is_tried_again():
    rig = Rig(max_restarts=3)
    dead = rig.kill()
    rig.spawn_fails = 1
    rig.poll()
    assert rig.current is dead and not dead.closed and rig.sup.restarts == 0
    rig.poll()
    assert rig.current is not dead and dead.closed and rig.sup.restarts == 1


def test_a_restarted_loop_that_cannot_start_is_installed_anyway():
    """It is the one /health reports on: its problem is seen at the next look."""
    rig = Rig()
    rig.current.running = True
    rig.poll()
    rig.kill()

    def spawn(settings):
        w = FakeWorker(settings, fail={"start"})
        rig.spawned.append(w)
        return w

    rig.sup.spawn = spawn
    rig.poll()
    assert rig.current is rig.spawned[0] and rig.sup.restarts == 1 and not rig.current.running
    assert rig.current.calls == [("hold", (True,))]


def test_the_supervisor_thread_polls_until_stopped():
    rig = Rig()
    rig.sup.period = 0.001
    rig.sup.clock = time.monotonic
    rig.kill()
    rig.sup.start()
    try:
        deadline = time.monotonic() + 10  # ends a hung test only (the thread polls every 1 ms)
        while rig.sup.restarts == 0:
            assert time.monotonic() < deadline
            time.sleep(0.001)
    finally:
        rig.sup.stop()
    assert not rig.sup._thread.is_alive() and rig.sup.restarts == 1


def test_what_the_supervisor_says_on_stderr(capsys):
    """An operator reads why the loop process was replaced, and when the supervisor gave up."""
    rig = Rig(max_restarts=2, restart_window=100.0)
    rig.kill()
    rig.poll()
    err = capsys.readouterr().err
    assert "the loop process has exited (exit code -9); restarting it into hold" in err
    rig.kill()
    rig.spawn_fails = 1
    rig.poll()
    assert "loop process restart failed: " in capsys.readouterr().err
    rig.poll()  # the failed try used the budget's second restart
    assert "restarted 2 times in 100 s; giving up" in capsys.readouterr().err
    rig.poll()
    assert capsys.readouterr().err == ""  # said once


def test_a_start_that_fails_is_reported(capsys):
    rig = Rig()
    rig.current.running = True
    rig.poll()
    rig.kill()
    rig.sup.spawn = lambda settings: FakeWorker(settings, fail={"start"})
    rig.poll()
    assert "restarted loop did not start: " in capsys.readouterr().err


def test_a_loop_stuck_again_after_a_restart_is_killed_again_after_two_seconds():
    rig = Rig()
    rig.current.stuck = True
    for _ in range(round(2.0 / DT) + 1):
        rig.poll()
    assert rig.sup.restarts == 1
    again = rig.current
    again.stuck = True
    for _ in range(round(2.0 / DT)):
        rig.poll()
        assert not again.proc.killed
    rig.poll()
    assert again.proc.killed and rig.sup.restarts == 2


def test_a_restart_exactly_one_window_ago_still_counts():
    rig = Rig(max_restarts=1, restart_window=4.0)
    rig.kill()
    rig.poll(DT)
    rig.kill()
    rig.poll(4.0)  # exactly restart_window after the first: still within it
    assert rig.sup.restarts == 1 and rig.sup.gave_up


def test_a_loop_whose_state_cannot_be_read_counts_as_not_running():
    """Healthy by its heartbeat but its state unreadable: not known to run, so not restarted into motion."""
    rig = Rig()
    w = rig.current
    w.running = True

    def unreadable():
        raise WorkerError("dead", "torn state")

    w.state = unreadable
    rig.poll()
    rig.kill()
    rig.poll()
    assert rig.sup.restarts == 1 and rig.current.calls == [] and not rig.current.running


def test_the_supervisor_thread_is_a_named_daemon():
    """Named for thread dumps; a daemon, so a hung supervisor never keeps the service process alive."""
    sup = Rig().sup
    assert sup._thread.name == "fdcontrol-supervisor" and sup._thread.daemon is True
    assert sup.period == 0.02 and sup.kill_after == 2.0  # docs/security.md: stuck → replaced after 2 s


def test_only_a_crash_spends_the_restart_budget_a_killed_stall_does_not():
    """The give-up needs actual crashes: stuck processes the supervisor killed (more of them than the
    budget allows crashes) are each replaced into hold, and the full budget of crashes is still left."""
    rig = Rig(max_restarts=2, restart_window=300.0)
    rig.current.running = True
    rig.poll()
    for i in range(5):  # five stalls in the window, each killed after 2 s
        stuck = rig.current
        stuck.stuck = True
        for _ in range(round(2.0 / DT) + 1):
            rig.poll()
        assert stuck.proc.killed and rig.current is not stuck, i
        assert rig.current.calls == [("hold", (True,)), ("start", ())]  # replaced into hold
        assert rig.sup.kills == i + 1 and not rig.sup.gave_up
    for i in range(2):  # the two crashes the budget allows
        rig.kill()
        rig.poll()
        assert not rig.sup.gave_up and rig.sup.restarts == 6 + i
    dead = rig.kill()  # the third crash within the window: given up
    rig.poll()
    assert rig.sup.gave_up and rig.current is dead and rig.sup.kills == 5


def test_the_restarted_loop_gets_structured_parameters_as_their_types():
    """The parameters in force come back from the loop process as JSON-like values: the restarted loop's
    settings hold a workspace box, keep-out volumes and link loads as the API's models again (not dicts,
    which pydantic warns about on every serialization and which a reader of attributes cannot use)."""
    import warnings

    from fdcontrol.server.settings import KeepOutSpec, WorkspaceBoxSpec

    rig = Rig()
    box = {"min": [-1.0, -1.0, 0.0], "max": [1.0, 1.0, 1.5]}
    rig.current.params = {**rig.current.params, "workspace_box": box,
                          "keep_out": [{"name": "post", "sphere": {"center": [0.5, 0.0, 0.3], "radius": 0.1}}]}
    rig.kill()
    rig.poll()
    got = rig.current.settings
    assert isinstance(got.workspace_box, WorkspaceBoxSpec) and list(got.workspace_box.min) == box["min"]
    assert isinstance(got.keep_out[0], KeepOutSpec) and got.keep_out[0].name == "post"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got.model_dump_json()  # no "serialized value may not be as expected"


def test_the_restarted_loop_takes_over_the_recording_before_it_starts():
    """A recording running on the replaced process goes on from the new one (server/recording_link.py), handed
    over before the new loop's first cycle and before the old process is closed."""
    rig = Rig()
    rig.current.running = True
    rig.poll()
    old = rig.kill()
    rig.poll()
    new = rig.current
    assert new is not old and new.took_over == (old, 0)  # before hold and start
    assert [c for c, _ in new.calls] == ["hold", "start"] and old.closed
