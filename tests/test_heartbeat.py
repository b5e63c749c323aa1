"""The loop process's heartbeat is as timely as its loop: where the loop thread runs SCHED_FIFO, the
heartbeat thread does too (below it), so a loaded machine does not make the API refuse commands
for a "not responding" loop process while the loop itself cycles on time. The API process's event loop, which
takes every wrench and sends every state, runs real-time below them, its startup objects frozen out of the
garbage collector."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from .service import Service


def _loop_pid(s: Service) -> int:
    for pid in s.children():
        if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
    raise AssertionError("no loop process found")


def _fifo_priorities(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if os.sched_getscheduler(int(task.name)) == os.SCHED_FIFO:
                out.append(os.sched_getparam(int(task.name)).sched_priority)
        except OSError:  # the thread ended meanwhile
            continue
    return sorted(out)


def test_the_heartbeat_runs_real_time_beside_the_loop():
    s = Service()
    try:
        assert httpx.post(s.url + "/control/start", timeout=10).status_code == 200
        if httpx.get(s.url + "/stats", timeout=10).json().get("scheduler") != "SCHED_FIFO":
            pytest.skip("SCHED_FIFO is not permitted here (no CAP_SYS_NICE): the loop runs as a normal thread")
        prios = _fifo_priorities(_loop_pid(s))
        assert 10 in prios, prios  # the loop thread
        assert 5 in prios, f"the heartbeat thread is not SCHED_FIFO: {prios}"
    finally:
        s.stop()


def _nice_permitted() -> bool:
    """Whether a process here may lower its niceness (CAP_SYS_NICE or RLIMIT_NICE), probed in a child."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", "import os; os.setpriority(os.PRIO_PROCESS, 0, os.getpriority("
                        "os.PRIO_PROCESS, 0) - 1)"], capture_output=True, timeout=60)
    return r.returncode == 0


def _nice_of_threads(pid: int) -> set[int]:
    """The niceness of every thread of a process (/proc/<pid>/task/<tid>/stat, field 19)."""
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        out.add(int(stat.rsplit(")", 1)[1].split()[16]))
    return out


def test_the_api_process_runs_at_api_nice():
    """The API process's event loop hands over every wrench and state: with ``api_nice`` it (every thread,
    and the loop process it starts) runs at that niceness; with null, at the one it was started with."""
    if not _nice_permitted():
        pytest.skip("lowering the niceness is not permitted here (no CAP_SYS_NICE)")
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    want = max(mine - 3, -20)
    for setting, expect in ((str(want), want), ("null", mine)):
        s = Service(env={"FDCONTROL_API_NICE": setting})
        try:
            assert _nice_of_threads(s.proc.pid) == {expect}, setting
            assert expect in _nice_of_threads(_loop_pid(s)), setting  # its non-real-time threads
        finally:
            s.stop()


def test_api_nice_never_lowers_the_priority_the_service_was_started_with():
    import subprocess
    import sys

    code = ("import os; from fdcontrol.server.main import raise_priority; n = os.getpriority(os.PRIO_PROCESS, 0); "
            "print(raise_priority(None), raise_priority(n), raise_priority(n + 1), "
            "os.getpriority(os.PRIO_PROCESS, 0) - n)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parent.parent)
    assert r.stdout.split() == ["False", "False", "False", "0"], r.stderr[-2000:]


def _policy(tid: int) -> tuple[int, int]:
    return os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority


def test_the_api_event_loop_runs_real_time_below_the_loop():
    """The API process's event loop takes every wrench and sends every state: with ``api_realtime`` (off by
    default) its thread runs SCHED_FIFO at the lowest real-time priority, below the loop process's heartbeat and loop
    threads; the supervisor, started before it, keeps the normal policy (the loop process it restarts too);
    by default no thread of the API process is real-time."""
    from fdcontrol.server.app import API_FIFO_PRIORITY

    s = Service(env={"FDCONTROL_API_REALTIME": "true"})
    try:
        assert httpx.post(s.url + "/control/start", timeout=10).status_code == 200
        if httpx.get(s.url + "/stats", timeout=10).json().get("scheduler") != "SCHED_FIFO":
            pytest.skip("SCHED_FIFO is not permitted here (no CAP_SYS_NICE): the event loop runs as a normal thread")
        assert _policy(s.proc.pid) == (os.SCHED_FIFO, API_FIFO_PRIORITY)  # uvicorn's event loop: the main thread
        assert API_FIFO_PRIORITY < min(_fifo_priorities(_loop_pid(s)))  # below the heartbeat (5) and the loop (10)
        others = [int(t.name) for t in Path(f"/proc/{s.proc.pid}/task").iterdir() if int(t.name) != s.proc.pid]
        assert any(_policy(t)[0] != os.SCHED_FIFO for t in others)  # the supervisor thread, at least
        assert sorted(_fifo_priorities(_loop_pid(s))) == [5, 10]  # the loop process is not made real-time by it
    finally:
        s.stop()
    s = Service()
    try:
        assert _fifo_priorities(s.proc.pid) == []
    finally:
        s.stop()


def test_the_api_process_freezes_its_startup_objects():
    """The API process's event loop takes every wrench and sends every state: a full collection of the cyclic
    garbage collector over its ~200k startup objects (76–124 ms measured) stalled it and every stream. Once
    started, ``fdcontrol serve`` freezes them (``gc.freeze``), as the loop process does: /stats says how many."""
    s = Service()
    try:
        frozen = httpx.get(s.url + "/stats", timeout=30).json()["api_gc_frozen"]
    finally:
        s.stop()
    assert frozen > 50_000, frozen
