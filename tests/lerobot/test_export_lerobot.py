"""`fdcontrol export lerobot`: a real recording of the service (MuJoCo arm, loopback, two env episodes)
becomes a LeRobotDataset that LeRobot's own ``LeRobotDataset`` loads; its frame count, fps, episode
boundaries, tasks and spot-checked values agree with the MCAP file read here with mcap's own reader.

Runs where LeRobot is installed (`make test-lerobot`: its own venv); elsewhere the module skips.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing from the hub: the dataset is local
pytest.importorskip("lerobot", reason="needs LeRobot (make test-lerobot installs it in its own venv)")

from lerobot.datasets.lerobot_dataset import LeRobotDataset
from mcap.reader import make_reader

from fdcontrol.env.features import action_names, observation_names
from fdcontrol.env.service import ServiceEnv
from fdcontrol.env.spaces import ActionSpec
from tests.service import ROOT, Service

FPS = 30
TASKS = ("push along x", "lift along z")


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    """Two env episodes recorded by the service: +x steps, then +z steps."""
    rec_dir = tmp_path_factory.mktemp("recordings")
    svc = Service("--record-dir", str(rec_dir))
    try:
        env = ServiceEnv(svc.url, rate=20.0, action=ActionSpec("delta_pose"), mode="compliance", episodes=True,
                         reset_timeout=60.0)
        env.client.start_recording("demo.mcap")
        try:
            for task, step in zip(TASKS, ([0.004, 0, 0, 0, 0, 0], [0, 0, 0.004, 0, 0, 0]), strict=True):
                env.task = task
                env.reset()
                for _ in range(20):
                    env.step(np.array(step))
            env.end_episode(True)
        finally:
            env.client.stop_recording()
            env.close()
    finally:
        svc.stop()
    return rec_dir / "demo.mcap"


def read_mcap(path: Path) -> tuple[np.ndarray, list[dict], list[tuple[int, dict]]]:
    """States (log times, messages) and episode events, read with mcap's reader (not fdcontrol's)."""
    times, states, events = [], [], []
    with open(path, "rb") as f:
        for _, channel, msg in make_reader(f).iter_messages(topics=["/fdcontrol/state", "/fdcontrol/episode"]):
            data = json.loads(msg.data)
            if channel.topic == "/fdcontrol/state":
                times.append(msg.log_time)
                states.append(data)
            else:
                events.append((msg.log_time, data))
    return np.array(times, dtype=np.int64), states, events


def export(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "fdcontrol.cli", "export", "lerobot", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_an_exported_recording_loads_with_lerobot_and_agrees_with_the_mcap_file(recording, tmp_path):
    root = tmp_path / "dataset"
    summary = export(str(recording), str(root), "--fps", str(FPS))
    assert summary["episodes"] == 2
    ds = LeRobotDataset("local/demo", root=root)
    times, states, events = read_mcap(recording)

    # the episodes the recording marks, sampled at FPS from their start (or the first state) to their stop
    starts = [(t, e) for t, e in events if e["event"] == "start"]
    stops = {e["episode"]: t for t, e in events if e["event"] == "stop"}
    spans = [(max(t, int(times[0])), stops[e["episode"]], e["task"]) for t, e in starts]
    counts = [math.floor((t1 - t0) * FPS / 1e9) + 1 for t0, t1, _ in spans]
    assert [s[2] for s in spans] == list(TASKS)

    assert ds.fps == FPS and ds.meta.total_episodes == 2
    assert ds.num_frames == sum(counts) == len(ds)
    eps = ds.meta.episodes
    bounds = np.cumsum([0, *counts])
    assert list(eps["dataset_from_index"]) == bounds[:-1].tolist()
    assert list(eps["dataset_to_index"]) == bounds[1:].tolist()
    assert [list(t) for t in eps["tasks"]] == [[t] for t in TASKS]
    assert ds.features["observation.state"]["names"] == list(observation_names(6))
    assert ds.features["action"]["names"] == list(action_names("delta_pose", 6))

    def held_state(t_ns: int) -> dict:
        """The state recorded last at or before t (the documented sample-and-hold)."""
        return states[int(np.searchsorted(times, t_ns, side="right")) - 1]

    names = list(observation_names(6))
    col = {n: names.index(n) for n in ("joint_1.pos", "joint_3.vel", "ee.x", "ee.z", "wrench.fx", "held")}
    checked = 0
    for ep, k in ((0, 5), (1, counts[1] // 2), (1, counts[1] - 1)):
        t0 = spans[ep][0]
        row = ds[int(bounds[ep] + k)]
        assert int(row["episode_index"]) == ep and int(row["frame_index"]) == k
        assert float(row["timestamp"]) == pytest.approx(k / FPS, abs=1e-6)
        s = held_state(t0 + round(k * 1e9 / FPS))
        obs = row["observation.state"].numpy()
        T = np.array(s["tip_pose"])
        expect = {"joint_1.pos": s["q"][0], "joint_3.vel": s["qd"][2], "ee.x": T[0, 3], "ee.z": T[2, 3],
                  "wrench.fx": s["f_measured"][0], "held": float(s["holding"])}
        for name, v in expect.items():
            assert obs[col[name]] == pytest.approx(v, rel=1e-6, abs=1e-6), (ep, k, name)
        act = row["action"].numpy()
        if k < counts[ep] - 1:  # the step to the next frame
            nxt = np.array(held_state(t0 + round((k + 1) * 1e9 / FPS))["tip_pose"])
            np.testing.assert_allclose(act[:3], nxt[:3, 3] - T[:3, 3], atol=1e-6)
        else:  # the last frame: no motion
            np.testing.assert_allclose(act, 0.0, atol=1e-7)
        checked += 1
    assert checked == 3

    # the arm moved in each episode along its task's axis (the spot checks compare changing values)
    obs_all = np.stack(list(ds.hf_dataset.with_format("numpy")["observation.state"]))
    x, z = obs_all[:, col["ee.x"]], obs_all[:, col["ee.z"]]
    assert x[bounds[1] - 1] - x[0] > 0.02 and abs(z[bounds[1] - 1] - z[0]) < 0.005
    assert z[bounds[2] - 1] - z[bounds[1]] > 0.02


def test_the_whole_recording_as_one_episode(recording, tmp_path):
    summary = export(str(recording), str(tmp_path / "whole"), "--fps", "10", "--per", "recording",
                     "--task", "two reaches", "--action", "twist")
    ds = LeRobotDataset("local/demo", root=tmp_path / "whole")
    times, _, _ = read_mcap(recording)
    assert summary["episodes"] == 1 == ds.meta.total_episodes
    assert ds.num_frames == math.floor((times[-1] - times[0]) * 10 / 1e9) + 1
    assert ds.meta.tasks.index.tolist() == ["two reaches"]
    assert ds.features["action"]["names"] == list(action_names("twist", 6))


def test_refusals_are_one_line(recording, tmp_path):
    out = subprocess.run([sys.executable, "-m", "fdcontrol.cli", "export", "lerobot", str(recording),
                          str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and "exists" in out.stderr and "Traceback" not in out.stderr
