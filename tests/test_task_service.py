"""The task space through the real service (uvicorn on loopback, loop process, MuJoCo arm): bad
input gets 422 with the reason and leaves the loop running; a guarded move down onto the table
holds on contact and the firing reaches /ws/state as an event and the metrics."""

from __future__ import annotations

import json
import time

import httpx
import numpy as np
import pytest
from websockets.sync.client import connect

from tests.service import Service


@pytest.fixture(scope="module")
def svc():
    with Service() as s:
        yield s


def assert_unaffected(svc, before: dict) -> None:
    s = svc.state()
    assert s["running"] and s["fault"] is None and s["cycle"] > before["cycle"]


@pytest.mark.parametrize("method, path, body, reason", [
    ("patch", "/config", {"workspace_box": {"min": [0.5, -1, -1], "max": [0.1, 1, 1]}}, "min must be < max"),
    ("patch", "/config", {"keep_out": [{"sphere": {"center": [0, 0, 0], "radius": -0.1}}]}, "greater than or equal"),
    ("patch", "/config", {"keep_out": [{"sphere": {"center": [0, 0, 0], "radius": 0.1},
                                        "box": {"min": [0, 0, 0], "max": [1, 1, 1]}}]}, "exactly one"),
    ("put", "/control/rules", {"rules": [{"signal": "fq", "op": ">", "value": 1}]}, "'workspace_distance'"),
    ("put", "/control/rules", {"rules": [{"signal": "fz", "op": ">", "value": 1, "action": "retract"}]},
     "distance"),
    # 5 m away: beyond the simulated arm's start box, the first check a goal meets
    ("post", "/control/move", {"position": [5.0, 0.0, 0.0]}, "out of the workspace"),
    ("post", "/control/move", {"q": [0.0, 0.0]}, "entries"),
    ("post", "/control/move", {"position": [0.1, 0, 0], "speed": 0}, "greater than 0"),
    ("post", "/control/gains", {"stiffness": [1e6] * 6}, "outside"),
])
def test_bad_input_gets_422_with_the_reason_and_the_loop_runs_on(svc, method, path, body, reason):
    before = svc.state()
    r = getattr(httpx, method)(svc.url + path, json=body, timeout=10)
    assert r.status_code == 422, r.text
    assert reason in r.text, r.text
    assert_unaffected(svc, before)


def test_workspace_through_the_api_refuses_one_that_would_move_the_arm(svc):
    tip = svc.state()["tip_pose"]
    p = [tip[0][3], tip[1][3], tip[2][3]]
    # the tip 1 cm from a wall with a 5 cm margin: the load would push the arm: refused
    near = {"workspace_box": {"min": [p[0] - 1, p[1] - 1, p[2] - 1], "max": [p[0] + 0.01, p[1] + 1, p[2] + 1]}}
    r = httpx.patch(svc.url + "/config", json=near, timeout=60)
    assert r.status_code == 422 and "move the arm by itself" in r.text, r.text
    box = {"workspace_box": {"min": [p[0] - 0.5, p[1] - 0.5, p[2] - 0.5], "max": [p[0] + 0.2, p[1] + 0.5, p[2] + 0.5]}}
    r = httpx.patch(svc.url + "/config", json=box, timeout=60)
    assert r.status_code == 200, r.text
    try:
        s = svc.state()
        assert s["workspace_distance"] == pytest.approx(0.2, abs=0.01)
        assert s["limits_active"]["workspace"] is False
        w = httpx.get(svc.url + "/workspace", timeout=5).json()
        assert w["box"]["max"][0] == pytest.approx(p[0] + 0.2)
        # a goal beyond the box: refused with the reason
        before = svc.state()
        r = httpx.post(svc.url + "/control/move", json={"position": [0.4, 0, 0], "relative": True}, timeout=60)
        assert r.status_code == 422 and "out of the workspace" in r.text, r.text
        assert_unaffected(svc, before)
    finally:
        assert httpx.patch(svc.url + "/config", json={"workspace_box": None}, timeout=60).status_code == 200


def test_null_in_the_environment_starts_the_simulated_arm_without_its_box():
    """``FDCONTROL_WORKSPACE_BOX=null`` means no box, as ``workspace_box: null`` in a settings file and
    ``PATCH /config {"workspace_box": null}`` do: the service shows none, the loop runs without one and a
    move the start box would refuse (40 cm ahead, its face is 20 cm away) is accepted."""
    s = Service(env={"FDCONTROL_WORKSPACE_BOX": "null"})
    try:
        assert httpx.get(s.url + "/config", timeout=60).json()["workspace_box"] is None
        w = httpx.get(s.url + "/workspace", timeout=10).json()
        assert w["box"] is None and w["distance"] is None, w
        assert s.state()["workspace_distance"] is None  # the loop's own record: no volume at all
        r = httpx.post(s.url + "/control/move", json={"position": [0.4, 0, 0], "relative": True}, timeout=60)
        assert r.status_code == 200, r.text
        assert httpx.post(s.url + "/control/move/cancel", timeout=60).status_code == 200
    finally:
        s.stop()


def test_guarded_move_onto_the_table_holds_and_pushes_an_event(svc):
    count0 = svc.state()["reaction_count"]
    with connect(svc.url.replace("http", "ws") + "/ws/state?decimation=5", open_timeout=10) as ws:
        json.loads(ws.recv(timeout=5))  # the first state: the event baseline
        r = httpx.post(svc.url + "/control/move", timeout=10, json={
            "position": [0, 0, -0.15], "relative": True,
            "until": {"name": "contact", "signal": "fz", "op": "abs>", "value": 5.0, "action": "hold"}})
        assert r.status_code == 200, r.text
        event, deadline = None, time.monotonic() + 15
        while event is None and time.monotonic() < deadline:
            msg = json.loads(ws.recv(timeout=5))
            event = msg.get("event")
    assert event is not None and event["type"] == "reaction" and "contact" in event["text"], event
    s = svc.state()
    assert s["holding"] and s["reaction_count"] == count0 + 1 and s["move_status"] == "cancelled"
    assert abs(s["f_measured"][2]) < 2 * 5.0
    rules = httpx.get(svc.url + "/control/rules", timeout=5).json()
    assert any(r["name"] == "contact" and r["fired"] == 1 and not r["armed"] for r in rules)
    metrics = httpx.get(svc.url + "/metrics", timeout=5).text
    assert "fdcontrol_loop_reactions_total 1.0" in metrics
    assert httpx.post(svc.url + "/control/hold", json={"hold": False}, timeout=5).status_code == 200


def test_rules_armed_and_disarmed_over_the_control_websocket(svc):
    with connect(svc.url.replace("http", "ws") + "/ws/control", open_timeout=10) as ws:
        ws.send(json.dumps({"rules": [{"name": "ws-rule", "signal": "force", "op": ">", "value": 400}]}))
        ws.send(json.dumps({"rules": [{"signal": "nope", "op": ">", "value": 1}]}))
        errors, deadline = [], time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            msg = json.loads(ws.recv(timeout=5))
            if "error" in msg:
                errors.append(msg["error"])
        assert errors and "signal" in errors[0]
    rules = httpx.get(svc.url + "/control/rules", timeout=5).json()
    assert [r["name"] for r in rules] == ["ws-rule"] and rules[0]["armed"]
    assert httpx.delete(svc.url + "/control/rules", timeout=5).json() == []


def test_a_move_through_a_keep_out_volume_is_refused_at_planning_time(svc):
    # the 40 cm move below reaches beyond the simulated arm's start workspace box: without it
    assert httpx.patch(svc.url + "/config", json={"workspace_box": None}, timeout=60).status_code == 200
    tip = svc.state()["tip_pose"]
    p = [tip[0][3], tip[1][3], tip[2][3]]
    # 25 cm ahead: clear of the wrist's collision capsules and their 5 cm margin (every link obeys the volume)
    ball = {"keep_out": [{"name": "ball", "sphere": {"center": [p[0] + 0.25, p[1], p[2]], "radius": 0.02}}]}
    assert httpx.patch(svc.url + "/config", json=ball, timeout=60).status_code == 200
    try:
        before = svc.state()
        # the goal itself is clear of the ball (13 cm beyond its surface), the straight path is not
        r = httpx.post(svc.url + "/control/move", json={"position": [0.4, 0, 0], "relative": True}, timeout=60)
        assert r.status_code == 422 and "path" in r.text and "through 'ball'" in r.text, r.text
        assert_unaffected(svc, before)
        s = svc.state()
        assert s["move_status"] != "moving" and np.allclose(
            [row[3] for row in s["tip_pose"][:3]], p, atol=2e-3)  # the arm did not move
        # around it: accepted
        r = httpx.post(svc.url + "/control/move", json={"position": [0, 0, 0.03], "relative": True}, timeout=60)
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 15
        while svc.state()["move_status"] != "done" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert svc.state()["move_status"] == "done"
    finally:
        assert httpx.patch(svc.url + "/config", json={"keep_out": []}, timeout=60).status_code == 200


def _after_cycles(svc, n: int) -> dict:
    """The state once the loop has run `n` more cycles by its own count (a deadline ends a hung test only)."""
    c0, deadline = svc.state()["cycle"], time.monotonic() + 30
    while (s := svc.state())["cycle"] < c0 + n:
        assert time.monotonic() < deadline, s["cycle"]
    return s


@pytest.mark.parametrize("route, body", [("/control/move", {"position": [0, 0, 0.05], "relative": True}),
                                         ("/control/home", {})])
def test_moves_are_refused_while_holding_or_stopped_and_nothing_moves_after(svc, route, body):
    """docs/task.md: goals are refused while the loop is stopped or holding. A move accepted then
    would start by itself when the hold is released or the loop started: after the refusal, the
    release and the start leave the arm where it was (no move runs)."""
    tip = lambda s: np.array([row[3] for row in s["tip_pose"][:3]])  # noqa: E731
    assert httpx.post(svc.url + "/control/hold", json={"hold": True}, timeout=5).json()["holding"] is True
    try:
        r = httpx.post(svc.url + route, json=body, timeout=10)
        assert r.status_code == 422 and "holding" in r.text, r.text
        before = _after_cycles(svc, 5)
        assert httpx.post(svc.url + "/control/hold", json={"hold": False}, timeout=5).json()["holding"] is False
        after = _after_cycles(svc, 250)
        assert after["move_status"] != "moving" and np.linalg.norm(tip(after) - tip(before)) < 1e-3
        assert httpx.post(svc.url + "/control/stop", timeout=10).json()["running"] is False
        r = httpx.post(svc.url + route, json=body, timeout=10)
        assert r.status_code == 422 and "not running" in r.text, r.text
        before = svc.state()
        assert httpx.post(svc.url + "/control/start", timeout=10).json()["running"] is True
        after = _after_cycles(svc, 250)
        assert after["move_status"] != "moving" and np.linalg.norm(tip(after) - tip(before)) < 1e-3
    finally:
        httpx.post(svc.url + "/control/hold", json={"hold": False}, timeout=5)
        if not svc.state()["running"]:
            httpx.post(svc.url + "/control/start", timeout=10)
