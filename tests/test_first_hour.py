"""What a new user meets in the first hour, each point a defect that once misled someone: a bad WebSocket
query parameter said as such (not a bare 403 that reads like an access failure), and a wrench's reply
that says what the arm does once the wrench arrived."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from .service import Service


@pytest.fixture(scope="module")
def svc():
    s = Service("--driver", "simulated")
    yield s
    s.stop()


@pytest.mark.parametrize("value", ["0", "abc", "10001", "-3"])
def test_a_bad_decimation_is_said_on_the_socket(svc, value):
    url = svc.url.replace("http", "ws") + f"/ws/state?decimation={value}"
    with connect(url, open_timeout=30) as ws:  # the handshake succeeds: this is no access failure
        reply = json.loads(ws.recv(timeout=30))
        assert "decimation must be an integer in [1, 10000]" in reply["error"]
        assert repr(value) in reply["error"]
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


def test_the_wrench_reply_says_the_arm_moves(svc):
    """After the watchdog tripped (the loop holds), a new wrench moves the arm again: its reply says
    holding false — the state once the loop took it — not the hold of the stream before it."""
    c = httpx.Client(base_url=svc.url, timeout=30)
    c.post("/control/hold", json={"hold": False})
    assert c.put("/control/wrench", json={"wrench": [2, 0, 0, 0, 0, 0]}).status_code == 200
    deadline = time.monotonic() + 60  # only ends a hung test: the trip is read from the loop's record
    while time.monotonic() < deadline:
        s = c.get("/state").json()
        if s["watchdog"] == "tripped" and s["holding"]:
            break
    else:
        pytest.fail("the watchdog never tripped")
    r = c.put("/control/wrench", json={"wrench": [2, 0, 0, 0, 0, 0]}).json()
    assert r["holding"] is False, r
    after = c.get("/state").json()
    assert after["seq_ack"] >= 2
