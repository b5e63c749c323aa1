"""``/health`` says when the arm does not do what the loop asks — against the real service on loopback,
with a MuJoCo arm whose servos ignore the loop's commands (tests/ignoring_driver.py).

Outcomes are read from the service's own reports (``/health``, the state's ``cycle``); a wait is a
deadline that only ends a hung test.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np
import pytest
from websockets.sync.client import connect

from fdcontrol.loop.liveness import FOLLOW_SPEED

from .service import Service

pytest.importorskip("mujoco")

DEADLINE = 30.0  # s, ends only a hung test


@pytest.fixture(scope="module")
def svc():
    s = Service("--driver", "tests.ignoring_driver:IgnoringMujoco")
    yield s
    s.stop()


def until(c: httpx.Client, path: str, done) -> dict:
    end = time.monotonic() + DEADLINE
    while True:
        r = c.get(path)
        body = r.json()
        if done(r, body):
            return body
        assert time.monotonic() < end, body
        time.sleep(0.01)


def test_health_says_the_arm_does_not_follow_and_that_it_is_no_fault(svc):
    c = httpx.Client(base_url=svc.url, timeout=30)
    assert c.post("/control/start").status_code == 200
    h = c.get("/health")
    assert h.status_code == 200 and h.json()["following"] is True and h.json()["following_joint"] is None
    q0 = np.array(c.get("/state").json()["q"])
    done = threading.Event()

    def push() -> None:  # a live stream: a torque about the base, every 5 ms
        with connect(svc.url.replace("http", "ws") + "/ws/control?decimation=10000", open_timeout=10) as ws:
            t0 = time.monotonic()
            while not done.is_set() and time.monotonic() - t0 < 60:
                ws.send(json.dumps({"wrench": [0, 0, 0, 0, 0, 15.0]}))
                time.sleep(0.005)

    pusher = threading.Thread(target=push, daemon=True)
    pusher.start()
    try:
        h = until(c, "/health", lambda r, b: r.status_code == 200 and b["following"] is False)
        s = c.get("/state").json()
    finally:
        done.set()
        pusher.join(10)
    # the report: which joint, by how much; the status stays ok (no fault), the loop runs
    assert h["status"] == "ok" and h["fault"] is None and h["loop_running"], h
    j = h["following_joint"]
    assert isinstance(j, int) and 0 <= j < 6 and h["following_error"] > FOLLOW_SPEED, h
    # independently: MuJoCo's arm has not moved, while the loop asks for more than FOLLOW_SPEED
    assert np.abs(np.array(s["q"]) - q0).max() < 0.01, (s["q"], q0)
    assert np.abs(s["qd"]).max() < 0.05 and np.abs(s["qd_ref"]).max() > FOLLOW_SPEED, s
    assert s["following"] is False and s["follow_joint"] == j and s["fault"] is None
    # the stream ends: the watchdog brakes the reference, and once it is within FOLLOW_SPEED of the arm's,
    # the arm does what the loop asks again
    h = until(c, "/health", lambda r, b: b["following"] is True)
    assert h["status"] == "ok" and h["following_joint"] is None and h["following_error"] is None, h
    s = until(c, "/state", lambda r, b: not any(b["qd_ref"]))  # at rest
    assert s["following"] and s["fault"] is None
    c.close()
