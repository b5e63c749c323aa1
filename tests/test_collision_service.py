"""Link geometry through the real service (uvicorn on loopback, loop process, MuJoCo UR10): volumes set at run
time are validated (a volume a link is already in is refused naming the link; boxes need a positive size), and
/state and /ws/state carry the smallest link distance and its pair."""

from __future__ import annotations

import json
import re
import time

import httpx
import numpy as np
import pytest
from websockets.sync.client import connect

from fdcontrol.model.collision import Clearance
from fdcontrol.model.robot import RobotModel
from tests.service import Service


@pytest.fixture(scope="module")
def svc():
    from fdcontrol.kernels import warm_first_calls

    # the link geometry's kernels into numba's cache first, as `make install` does (fdcontrol.kernels): from a cold
    # cache the service's loop compiled them inside its cycle when a volume came, past the 2 s stall limit on a
    # loaded machine, and was restarted into hold (the arm then never moved towards the volume)
    warm_first_calls()
    with Service() as s:
        yield s


def _forearm(q: list[float]) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, np.ndarray]:
    """The UR10 forearm capsule's middle, radius, a unit vector across it and its end points, base frame."""
    robot = RobotModel.load("ur10")
    cl = Clearance(robot, robot.geometry, [])
    cl.compute(np.asarray(q))
    i = [c.link for c in robot.geometry.capsules].index("forearm_link")
    u = cl.B[i] - cl.A[i]
    e = np.cross(u, [0.0, 0.0, 1.0])
    return (cl.A[i] + cl.B[i]) / 2, float(cl.cr[i]), e / np.linalg.norm(e), cl.A[i].copy(), cl.B[i].copy()


def _sampled(a: np.ndarray, b: np.ndarray, r: float, box: dict) -> float:
    """Capsule–box distance by brute force: 20001 points along the segment (an independent check)."""
    lo, hi = np.array(box["box"]["min"]), np.array(box["box"]["max"])
    p = a + np.linspace(0, 1, 20001)[:, None] * (b - a)
    return float(np.linalg.norm(np.maximum(np.maximum(lo - p, p - hi), 0), axis=1).min()) - r


def _box(c: np.ndarray, h: float = 0.05) -> dict:
    return {"name": "fixture", "box": {"min": (c - h).tolist(), "max": (c + h).tolist()}}


def test_a_volume_on_a_link_is_refused_naming_the_link(svc):
    before = svc.state()
    mid = _forearm(before["q"])[0]
    r = httpx.patch(svc.url + "/config", json={"keep_out": [_box(mid)]}, timeout=60)
    assert r.status_code == 422, r.text
    assert "link forearm_link is inside volume 'fixture'" in r.text and "move the arm by itself" in r.text, r.text
    s = svc.state()
    assert s["running"] and s["fault"] is None and s["cycle"] > before["cycle"]
    assert httpx.get(svc.url + "/config", timeout=5).json()["keep_out"] == []


@pytest.mark.parametrize("volume, reason", [
    ({"box": {"min": [1, 1, 1], "max": [1, 1.2, 1.2]}}, "positive size"),
    ({"sphere": {"center": [1, 1, 1], "radius": 0}}, "radius > 0"),
    ({"sphere": {"center": [1, "nan", 1], "radius": 0.1}}, "finite number"),
    ({"plane": {"point": [1, 1, 1], "normal": [0, 0, 0]}}, "normal"),
])
def test_bad_volumes_are_refused_with_the_reason(svc, volume, reason):
    r = httpx.patch(svc.url + "/config", json={"keep_out": [volume]}, timeout=60)
    assert r.status_code == 422 and reason in r.text, r.text


def test_state_carries_the_smallest_link_distance_and_its_pair(svc):
    s0 = svc.state()
    assert s0["link_distance"] is None and s0["link_pair"] is None  # nothing configured
    mid, r, e, a, b = _forearm(s0["q"])
    fixture = _box(mid + (r + 0.15 + 0.05) * e)  # about 15 cm beside the forearm
    gap = _sampled(a, b, r, fixture)
    assert httpx.patch(svc.url + "/config", json={"keep_out": [fixture]}, timeout=60).status_code == 200
    try:
        deadline, s = time.monotonic() + 10, svc.state()
        while s["link_pair"] is None and time.monotonic() < deadline:
            s = svc.state()
        assert s["link_pair"] == "forearm_link ↔ fixture", s["link_pair"]
        assert s["link_distance"] == pytest.approx(gap, abs=0.002)  # the arm rests: the distance set up
        assert "collision" in s["limits_active"]  # the links' velocity damper joined the limits
        with connect(svc.url.replace("http", "ws") + "/ws/state?decimation=5", open_timeout=10) as ws:
            msg = json.loads(ws.recv(timeout=5))
        assert msg["link_pair"] == "forearm_link ↔ fixture" and msg["link_distance"] == pytest.approx(gap, abs=0.002)
        # self-collision too: the nearest pair is now whichever is nearer
        assert httpx.patch(svc.url + "/config", json={"self_collision": True}, timeout=60).status_code == 200
        robot = RobotModel.load("ur10")
        cl = Clearance(robot, robot.geometry, [], self_collision=True)
        cl.compute(np.asarray(svc.state()["q"]))
        own = float(cl.d.min())
        deadline, s = time.monotonic() + 10, svc.state()
        while s["link_distance"] > min(own, gap) + 0.01 and time.monotonic() < deadline:
            s = svc.state()
        assert s["link_distance"] == pytest.approx(min(own, gap), abs=0.01), (s["link_pair"], own)
    finally:
        r = httpx.patch(svc.url + "/config", json={"keep_out": [], "self_collision": False}, timeout=60)
        assert r.status_code == 200, r.text
    deadline, s = time.monotonic() + 10, svc.state()
    while s["link_pair"] is not None and time.monotonic() < deadline:
        s = svc.state()
    assert s["link_distance"] is None and s["link_pair"] is None and not s["limits_active"].get("collision")


def test_a_volume_moved_onto_the_running_arm_holds_it_and_the_api_names_link_and_volume(svc):
    """A keep-out box set at run time (PATCH /config) 2 mm ahead of the UR10's forearm — inside half the hard
    margin of 10 mm, outside its own margin of 0, so the change itself moves nothing — then the forearm
    driven towards it by a streamed wrench: the loop holds with a fault naming the link and the volume,
    /state and /health say so, and the reference brakes to standstill. Removing the volume and releasing the
    hold resumes."""
    from fdcontrol.client import Client
    from fdcontrol.model.robot import RobotModel
    from tests.test_collision import box_ahead, link_motion

    robot = RobotModel.load("ur10")
    s0 = svc.state()
    assert s0["running"] and s0["fault"] is None
    wrench = np.array([0.0, 0.0, 15.0, 0.0, 0.0, 0.0])
    q = np.asarray(s0["q"])
    u = link_motion(robot, q, wrench, "forearm_link")
    spec, d = box_ahead(robot, q, "forearm_link", u, 0.002)
    assert 0.0 < d < 0.005
    r = httpx.patch(svc.url + "/config", json={"keep_out": [spec]}, timeout=60)
    assert r.status_code == 200, r.text
    try:
        with Client(svc.url) as client, client.control_stream(decimation=5) as stream:
            deadline, msg = time.monotonic() + 20, stream.recv()
            assert msg["fault"] is None
            while msg["fault"] is None and time.monotonic() < deadline:
                stream.send_wrench(wrench.tolist())
                msg = stream.recv()
        fault = msg["fault"]
        assert fault is not None and re.match(r"link forearm_link is -?\d+\.\d mm from volume 'fixture', inside "
                                              r"half the hard margin of 10\.0 mm", fault), fault
        s = svc.state()
        assert s["fault"] == fault and s["holding"] and s["link_pair"] == "forearm_link ↔ fixture"
        h = httpx.get(svc.url + "/health", timeout=5).json()
        assert h["status"] == "fault" and h["fault"] == fault
        deadline = time.monotonic() + 10
        while any(s["qd_ref"]) and time.monotonic() < deadline:  # braked to standstill
            s = svc.state()
        assert not any(s["qd_ref"]) and s["link_distance"] > -0.01  # it held, not far into the box
    finally:
        r = httpx.patch(svc.url + "/config", json={"keep_out": []}, timeout=60)
        assert r.status_code == 200, r.text
        assert httpx.post(svc.url + "/control/hold", json={"hold": False}, timeout=10).status_code == 200
    deadline, s = time.monotonic() + 10, svc.state()
    while (s["fault"] is not None or s["holding"]) and time.monotonic() < deadline:
        s = svc.state()
    assert s["fault"] is None and not s["holding"]


def test_a_move_that_would_drive_a_link_into_a_volume_is_refused_naming_both(svc):
    """POST /control/move with a joint goal whose path sweeps the forearm through a keep-out box (the tool
    passes clear): 422 naming the link and the volume; the arm did not move. The same move without the box
    starts."""
    from tests.test_collision import _forearm_box

    robot = RobotModel.load("ur10")
    # the base turns 1.2 rad: the tool's goal lies beyond the simulated arm's start workspace box: without it
    assert httpx.patch(svc.url + "/config", json={"workspace_box": None}, timeout=60).status_code == 200
    s0 = svc.state()
    q0 = np.asarray(s0["q"])
    q_mid, q_goal = q0.copy(), q0.copy()
    q_mid[0] += 0.6
    q_goal[0] += 1.2
    lo, hi = _forearm_box(robot, q_mid)
    box = {"name": "fixture", "box": {"min": lo.tolist(), "max": hi.tolist()}, "margin": 0.02}  # the upper arm
    start_box = httpx.get(svc.url + "/config", timeout=5).json()["workspace_box"]  # the simulated arm's: the
    # pan takes the tool out of it, and only the links are studied here
    r = httpx.patch(svc.url + "/config", json={"keep_out": [box], "workspace_box": None}, timeout=60)
    assert r.status_code == 200, r.text
    try:
        r = httpx.post(svc.url + "/control/move", json={"q": q_goal.tolist(), "speed": 0.5}, timeout=30)
        assert r.status_code == 422, r.text
        assert "the path of link forearm_link passes through 'fixture'" in r.text, r.text
        s = svc.state()
        assert s["move_status"] in ("idle", "cancelled") and np.abs(np.asarray(s["q"]) - q0).max() < 1e-3
    finally:
        assert httpx.patch(svc.url + "/config", json={"keep_out": []}, timeout=60).status_code == 200
    # the same move without the box is allowed: it starts (and is cancelled at once)
    r = httpx.post(svc.url + "/control/move", json={"q": q_goal.tolist(), "speed": 0.5}, timeout=30)
    assert r.status_code == 200, r.text
    assert httpx.post(svc.url + "/control/move/cancel", timeout=60).status_code == 200
    if start_box is not None:  # back as it was (the move was cancelled at once: the tool is still inside)
        r = httpx.patch(svc.url + "/config", json={"workspace_box": start_box}, timeout=60)
        assert r.status_code == 200, r.text
