"""The loop process keeps what it built at startup out of the cyclic garbage collector: a full collection
walks every tracked object while holding the GIL — ~0.3 s over the ~160k objects of a loop process (its
libraries, the model, the loop) on a loaded 2-core machine, hundreds of missed cycles of a robot-paced loop.
Frozen after startup (``gc.freeze``), a collection walks only what was made since."""

from __future__ import annotations

import pytest


def test_the_loop_process_freezes_its_startup_objects():
    pytest.importorskip("fastapi")
    from fdcontrol.server.settings import Settings
    from fdcontrol.server.worker import LoopWorker

    w = LoopWorker(Settings(realtime=False))
    try:
        w.call("start")
        before = w.call("gc")
        w.call("stop")
        after = w.call("gc")
    finally:
        w.close()
    # everything the process built before it answered is frozen; what the collector still tracks is what came
    # after (the command loop's objects, a started and stopped loop thread): a small fraction of it
    assert before["frozen"] > 50_000, before
    assert before["tracked"] < before["frozen"] // 20 and after["tracked"] < after["frozen"] // 20, (before, after)
