"""`fdcontrol export lerobot` without LeRobot: the resampling (fdcontrol.export_lerobot.frames) on a recording
with known times and a closed-form motion, the refusals, and the one-line message naming the extra.

(The dataset written through LeRobot and loaded back by it: tests/lerobot/test_export_lerobot.py.)
"""

from __future__ import annotations

import importlib.util
import json
import math

import numpy as np
import pytest

pytest.importorskip("mcap", reason="could not import 'mcap' (the record extra)")
from mcap.writer import Writer

from fdcontrol.cli import main
from fdcontrol.env.features import observation_names
from fdcontrol.export_lerobot import LeRobotExportError, frames

RATE = 500  # recorded states per second
T0 = 1_700_000_000_000_000_000  # ns


def tip(t: float) -> list[list[float]]:
    """x = 0.1 t (m), a turn about z of 0.2 t (rad)."""
    c, s = math.cos(0.2 * t), math.sin(0.2 * t)
    return [[c, -s, 0, 0.1 * t], [s, c, 0, 0.0], [0, 0, 1, 0.5], [0, 0, 0, 1]]


def state(k: int) -> dict:
    t = k / RATE
    return {"cycle": k, "q": [t, 0, 0, 0, 0, 0], "qd": [1.0, 0, 0, 0, 0, 0], "tip_pose": tip(t),
            "tip_twist": [0.1, 0, 0, 0, 0, 0.2], "f_measured": [0, 0, 0, 0, 0, 0], "mode": "admittance",
            "holding": k > 3 * RATE, "fault": None}


def write(path, episodes: list[tuple[float, float, str | None]], seconds: float = 4.0) -> None:
    """States at RATE for `seconds`; episode (start s, stop s, task) events at those times."""
    with open(path, "wb") as f:
        w = Writer(f)
        w.start()
        ids = {}
        for topic in ("/fdcontrol/state", "/fdcontrol/episode"):
            sid = w.register_schema(topic, "jsonschema", b"{}")
            ids[topic] = w.register_channel(topic, "json", sid)
        msgs = [(T0 + round(k * 1e9 / RATE), "/fdcontrol/state", state(k)) for k in range(int(seconds * RATE))]
        for i, (a, b, task) in enumerate(episodes):
            msgs.append((T0 + round(a * 1e9), "/fdcontrol/episode", {"event": "start", "episode": i, "task": task,
                                                                      "monotonic_s": a}))
            msgs.append((T0 + round(b * 1e9), "/fdcontrol/episode", {"event": "stop", "episode": i,
                                                                     "monotonic_s": b}))
        for t, topic, m in sorted(msgs, key=lambda x: x[0]):
            w.add_message(ids[topic], log_time=t, publish_time=t, data=json.dumps(m).encode())
        w.finish()


def test_frames_sample_and_hold_at_the_fps(tmp_path):
    p = tmp_path / "r.mcap"
    write(p, [(0.5013, 1.5, "a"), (2.0, 3.5, "b")])
    eps, features = frames(p, 30, action="delta_pose")
    assert [e.task for e in eps] == ["a", "b"]
    assert [len(e.times) for e in eps] == [math.floor((1.5 - 0.5013) * 30) + 1, math.floor(1.5 * 30) + 1]
    names = list(observation_names(6))
    assert features["observation.state"]["names"] == names
    x = names.index("ee.x")
    for e, start in zip(eps, (0.5013, 2.0), strict=True):
        for k in (0, 7, len(e.times) - 1):
            t = start + k / 30
            held = math.floor(t * RATE + 1e-9) / RATE  # the last state at or before t
            assert e.state[k, x] == pytest.approx(0.1 * held, abs=1e-12)
            assert e.state[k, 0] == pytest.approx(held, abs=1e-12)  # joint_1.pos
        k = 3
        t, t1 = start + k / 30, start + (k + 1) / 30
        h, h1 = (math.floor(v * RATE + 1e-9) / RATE for v in (t, t1))
        np.testing.assert_allclose(e.action[k], [0.1 * (h1 - h), 0, 0, 0, 0, 0.2 * (h1 - h)], atol=1e-12)
        np.testing.assert_allclose(e.action[-1], 0.0, atol=1e-15)  # the last frame: no motion
    held_col = names.index("held")
    assert eps[1].state[-1, held_col] == 1.0 and eps[0].state[0, held_col] == 0.0

    twist, _ = frames(p, 30, action="twist")
    np.testing.assert_allclose(twist[0].action[3], eps[0].action[3] * 30, atol=1e-12)
    pose, f = frames(p, 30, action="pose")
    assert f["action"]["names"] == ["ee.x", "ee.y", "ee.z", "ee.qx", "ee.qy", "ee.qz", "ee.qw"]
    np.testing.assert_allclose(pose[0].action[3], pose[0].state[4, 12:19], atol=1e-12)

    whole, _ = frames(p, 10, per="recording", task="all")
    assert len(whole) == 1 and len(whole[0].times) == math.floor((4 * RATE - 1) / RATE * 10 + 1e-9) + 1


def test_refusals(tmp_path):
    p = tmp_path / "r.mcap"
    write(p, [])
    with pytest.raises(LeRobotExportError, match="--per recording"):
        frames(p, 30)
    with pytest.raises(LeRobotExportError, match="--task"):
        frames(p, 30, per="recording")
    q = tmp_path / "q.mcap"
    write(q, [(0.5, 1.0, None)])
    with pytest.raises(LeRobotExportError, match="--task"):
        frames(q, 30)
    assert len(frames(q, 30, task="given")[0]) == 1
    for bad in ({"fps": 0}, {"fps": math.nan}, {"per": "chunk"}, {"action": "wrench"}):
        with pytest.raises(LeRobotExportError):
            frames(q, **{"fps": 30, "task": "t", **bad})


@pytest.mark.skipif(importlib.util.find_spec("lerobot") is not None, reason="LeRobot is installed here")
def test_without_lerobot_one_line_names_the_extra(tmp_path, capsys):
    p = tmp_path / "r.mcap"
    write(p, [(0.5, 1.0, "t")])
    assert main(["export", "lerobot", str(p), str(tmp_path / "out"), "--fps", "30"]) == 2
    err = capsys.readouterr().err.strip()
    assert "pip install 'fdcontrol[lerobot]'" in err and "\n" not in err
    assert not (tmp_path / "out").exists()
    assert main(["export", "lerobot", str(p)]) == 2  # no output directory
