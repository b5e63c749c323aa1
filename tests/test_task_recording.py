"""The task space in the MCAP recording (real service, MuJoCo arm): the workspace volumes are in the
recorded configuration (at the start and as a change), every state carries the distance to them, and
a reaction's firing is recorded in the cycle it fired, with its rule and action."""

from __future__ import annotations

import math
import time

import httpx

from fdcontrol.recording import CONFIG_TOPIC, STATE_TOPIC, read_recording

from .service import Service
from .waits import cycles_later


def test_workspace_and_a_reaction_are_in_the_recording(tmp_path):
    svc = Service("--record-dir", str(tmp_path))
    http = httpx.Client(base_url=svc.url, timeout=20)
    try:
        tip = http.get("/state").json()["tip_pose"]
        p = [tip[0][3], tip[1][3], tip[2][3]]
        box = {"min": [p[0] - 0.6, p[1] - 0.6, p[2] - 0.6], "max": [p[0] + 0.4, p[1] + 0.6, p[2] + 0.6]}
        assert http.patch("/config", json={"workspace_box": box}).status_code == 200
        assert http.post("/recording/start", json={"name": "task.mcap"}).status_code == 200
        # beside the tool, on the side away from the arm (its links pass far from it during the move)
        sphere = {"sphere": {"center": [p[0] - 0.3, p[1] - 0.3, p[2]], "radius": 0.05}}
        assert http.patch("/config", json={"keep_out": [sphere]}).status_code == 200  # a change while recording
        assert http.post("/control/start").status_code == 200
        count0 = http.get("/state").json()["reaction_count"]
        r = http.post("/control/move", json={"position": [0, 0, -0.15], "relative": True, "until": {
            "name": "contact", "signal": "fz", "op": "abs>", "value": 5.0, "action": "hold"}})
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 20  # bounded: the move takes about 1 s
        while http.get("/state").json()["reaction_count"] == count0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert http.get("/state").json()["reaction_count"] == count0 + 1
        cycles_later(lambda: http.get("/state").json(), 100)  # states after the reaction's hold
        assert http.post("/recording/stop").status_code == 200
    finally:
        http.close()
        svc.stop()
    rec = read_recording(tmp_path / "task.mcap")
    configs = [m for _, m in rec.messages[CONFIG_TOPIC]]
    recorded = configs[0]["params"]["workspace_box"]  # the configuration at the start
    assert (recorded["min"], recorded["max"]) == (box["min"], box["max"])
    changed = [c["changes"]["keep_out"] for c in configs[1:] if "keep_out" in c["changes"]]
    assert changed and changed[0][0]["sphere"] == sphere["sphere"], configs[1:]
    states = [m for _, m in rec.messages[STATE_TOPIC]]
    # every state: the signed distance to the nearest boundary, recomputed here from the recorded tip —
    # to the box alone until the loop took the sphere in, to both from then on
    sphere_in = None
    for k, s in enumerate(states):
        t = s["tip_pose"]
        x = [t[0][3], t[1][3], t[2][3]]
        to_box = min(min(x[i] - box["min"][i], box["max"][i] - x[i]) for i in range(3))
        to_both = min(to_box, math.dist(x, sphere["sphere"]["center"]) - sphere["sphere"]["radius"])
        if sphere_in is None and to_both < to_box - 1e-3 and math.isclose(s["workspace_distance"], to_both,
                                                                           abs_tol=1e-6):
            sphere_in = k
        expected = to_box if sphere_in is None else to_both
        assert math.isclose(s["workspace_distance"], expected, abs_tol=1e-6), (s["cycle"], x, sphere_in)
    assert sphere_in is not None
    fired = [s for s in states if s["reaction_count"] == count0 + 1]
    assert fired, "the firing is not in the recording"
    first = fired[0]
    assert "contact" in first["reaction_event"] and "hold" in first["reaction_event"]
    assert f"cycle {first['cycle']}" in first["reaction_event"]  # recorded in the cycle it fired
