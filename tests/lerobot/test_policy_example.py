"""examples/lerobot_policy.py: a scripted policy closes the loop on the robot plugin (embedded MuJoCo arm) for one
episode, recorded with LeRobot's machinery; the dataset loads back and holds what the policy saw and did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lerobot", reason="needs LeRobot (make test-lerobot installs it in its own venv)")
pytest.importorskip("lerobot_robot_fdcontrol", reason="needs LeRobot and the fdcontrol robot plugin "
                    "(make test-lerobot installs plugins/*)")

from lerobot.datasets.lerobot_dataset import LeRobotDataset

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import lerobot_policy  # noqa: E402


def test_policy_episode_is_recorded_and_loads_back(tmp_path):
    root = tmp_path / "reach"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "examples/lerobot_policy.py", "--root", str(root), "--seconds", "8"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    assert "1 episode" in p.stdout
    ds = LeRobotDataset("local/fdcontrol_reach", root=root)
    assert ds.num_episodes == 1 and ds.meta.robot_type == "fdcontrol"
    n = ds.num_frames
    assert n >= 20, n
    names = ds.features["observation.state"]["names"]
    obs = np.stack([ds[i]["observation.state"].numpy() for i in range(n)]).astype(float)
    act = np.stack([ds[i]["action"].numpy() for i in range(n)]).astype(float)
    ee = obs[:, [names.index(k) for k in ("ee.x", "ee.y", "ee.z")]]
    goal = ee[0] + lerobot_policy.OFFSET  # the arm rests at the start: the first frame's tip is where it started
    # each recorded action is the policy's answer to that frame's recorded observation (the pairs are aligned)
    policy = lerobot_policy.reach(goal)
    for i in range(n):
        a = policy(dict(zip(names, obs[i], strict=True)))
        assert np.allclose(act[i], [a[k] for k in ds.features["action"]["names"]], atol=1e-4), i
    # the loop closed: the tip ended at the goal, 10 cm from where it started (within 5 mm)
    assert np.linalg.norm(ee[-1] - goal) < 0.005, ee[-1] - goal
