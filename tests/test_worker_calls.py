"""The API's commands to the loop process and their replies stay paired when one of them timed out: the loop
process answers each command in order, so a reply that came after its caller gave up (a long configuration
change on a loaded machine: the link geometry's kernels compiled from a cold cache take tens of seconds) would
otherwise be read as the answer to the next command, and every answer after it would be one command late."""

from __future__ import annotations

import pytest


def test_a_late_reply_is_not_taken_for_the_next_commands_answer():
    pytest.importorskip("fastapi")
    from fdcontrol.server.settings import Settings
    from fdcontrol.server.worker import LoopWorker, WorkerError

    w = LoopWorker(Settings(realtime=False))
    try:
        late = 0
        for _ in range(20):  # a reply within no time at all would not be late: asked again (bounded)
            try:
                w.call("stats", timeout=0.0)
            except WorkerError as exc:
                assert exc.kind == "timeout", exc
                late += 1
                break
        assert late == 1  # the stats' reply is on its way (or already waiting in the pipe), unread
        # the next commands get their own answers: a list of module names, then the loop's statistics
        modules = w.call("modules")
        assert isinstance(modules, list) and "fdcontrol" in modules, type(modules)
        stats = w.call("stats")
        assert isinstance(stats, dict) and "scheduler" in stats, type(stats)
        assert isinstance(w.call("modules"), list)
    finally:
        w.close()


def test_a_configuration_change_answered_late_still_updates_what_the_api_serves(monkeypatch):
    """A change the caller stopped waiting for (503) took effect in the loop process all the same: its reply, read
    when the next command is answered, updates the parameters the API serves (GET /config) and checks with."""
    pytest.importorskip("fastapi")
    from fdcontrol.server import worker as module
    from fdcontrol.server.settings import Settings
    from fdcontrol.server.worker import LoopWorker, WorkerError

    w = LoopWorker(Settings(realtime=False))
    try:
        before = w.params["max_force"]
        monkeypatch.setattr(module, "UPDATE_TIMEOUT", 0.0)
        wanted = before / 2
        for _ in range(20):  # (a reply within no time at all is not late: asked again, bounded)
            try:
                w.update({"max_force": wanted})
            except WorkerError as exc:
                assert exc.kind == "timeout", exc
                break
            wanted /= 2
        else:
            pytest.fail("every change was answered at once")
        assert w.params["max_force"] != wanted  # not yet: its reply is unread
        assert isinstance(w.call("modules"), list)  # the next command's own answer, after the late one
        assert w.params["max_force"] == wanted and w.max_force == wanted
    finally:
        w.close()
