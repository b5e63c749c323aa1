"""The loop process's heartbeat is as timely as its loop: where the loop thread runs SCHED_FIFO, the
heartbeat thread does too (below it), so a loaded machine does not make the API refuse commands
for a "not responding" loop process while the loop itself cycles on time."""

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
