"""LeRobot's own commands with ``--robot.type=fdcontrol`` on the embedded MuJoCo arm: ``lerobot-record``
writes a dataset that LeRobot loads back, ``lerobot-replay`` drives the arm through it again.

Everything on loopback and offline (``HF_HUB_OFFLINE``); the teleoperator is a keyboard-free script
(tests/lerobot/scripted.py). Runs where LeRobot is installed (`make test-lerobot`).
"""

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

from fdcontrol.env.features import action_names, observation_names
from fdcontrol.model.robot import RobotModel
from fdcontrol.recording import read_recording

ROOT = Path(__file__).resolve().parents[2]
FPS, STEPS, DX, SECONDS = 10, 10, 0.01, 8  # 10 steps of +1 cm x at 10 Hz, then zeros: 8 s per episode
REPO = "local/fdcontrol_push"


def lerobot(command: str, *args: str, home: Path, timeout: float = 900) -> str:
    """Run LeRobot's own `command` (its main(), as the installed script) with the scripted teleoperator
    registered; offline, its caches under `home`. Returns its output; fails with it."""
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-m", "tests.lerobot.scripted", command, *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One episode recorded with lerobot-record on the embedded arm."""
    d = tmp_path_factory.mktemp("lerobot")
    root = d / "dataset"
    lerobot("lerobot-record", "--robot.type=fdcontrol", "--robot.embedded=true", f"--robot.fps={FPS}",
            "--teleop.type=fdcontrol_test_script", f"--teleop.steps={STEPS}", f"--teleop.dx={DX}",
            f"--dataset.repo_id={REPO}", f"--dataset.root={root}", "--dataset.single_task=push along x",
            f"--dataset.fps={FPS}", f"--dataset.episode_time_s={SECONDS}", "--dataset.reset_time_s=0",
            "--dataset.num_episodes=1", "--dataset.video=false", "--dataset.push_to_hub=false",
            "--play_sounds=false", home=d / "hf")
    return d, root


def test_lerobot_record_writes_a_dataset_lerobot_loads(recorded):
    _, root = recorded
    ds = LeRobotDataset(REPO, root=root)
    assert ds.fps == FPS and ds.num_episodes == 1
    assert ds.meta.robot_type == "fdcontrol"
    assert ds.features["action"]["names"] == list(action_names("delta_pose", 6))
    assert ds.features["observation.state"]["names"] == list(observation_names(6))
    n = ds.num_frames
    # LeRobot's loop runs for SECONDS of wall time at up to FPS (fewer frames on a loaded machine)
    assert STEPS + 5 <= n <= SECONDS * FPS + 1, n
    act = np.stack([ds[i]["action"].numpy() for i in range(n)])
    state = np.stack([ds[i]["observation.state"].numpy() for i in range(n)]).astype(float)
    # the script's actions as recorded: STEPS × +DX along x, then zeros
    assert np.allclose(act[:STEPS, 0], DX) and np.allclose(act[STEPS:], 0) and np.allclose(act[:, 1:], 0)
    names = list(observation_names(6))
    col = {k: state[:, i] for i, k in enumerate(names)}
    # each frame's tip pose is the forward kinematics of its joint positions (the names hold what they say)
    ur10 = RobotModel.load("ur10")
    for i in (0, n // 2, n - 1):
        T = ur10.pose(np.array([col[f"joint_{j}.pos"][i] for j in range(1, 7)]))
        assert np.allclose([col["ee.x"][i], col["ee.y"][i], col["ee.z"][i]], T[:3, 3], atol=2e-5)
    # the arm went where the actions said: +10 cm in x (goal-origin deltas), y and z unchanged
    dp = np.array([col["ee.x"][-1] - col["ee.x"][0], col["ee.y"][-1] - col["ee.y"][0],
                   col["ee.z"][-1] - col["ee.z"][0]])
    assert abs(dp[0] - STEPS * DX) < 0.005 and np.hypot(dp[1], dp[2]) < 0.002, dp
    assert np.all(col["held"] == 0) and np.all(col["fault"] == 0)


def test_lerobot_replay_drives_the_arm_through_the_episode(recorded):
    d, root = recorded
    mcap = d / "replay.mcap"  # the embedded service records its loop: what the arm did during the replay
    lerobot("lerobot-replay", "--robot.type=fdcontrol", "--robot.embedded=true", f"--robot.fps={FPS}",
            f"--robot.embedded_args=[--record, {mcap}]", f"--dataset.repo_id={REPO}", f"--dataset.root={root}",
            "--dataset.episode=0", f"--dataset.fps={FPS}", "--play_sounds=false", home=d / "hf")
    rec = read_recording(mcap)
    states = rec.states()
    tips = np.array([np.asarray(s["tip_pose"], float)[:3, 3] for s in states])
    dp = tips[-1] - tips[0]
    assert abs(dp[0] - STEPS * DX) < 0.005 and np.hypot(dp[1], dp[2]) < 0.002, dp
    assert len({s["action_seq"] for s in states if s["action_seq"]}) >= STEPS  # the replayed actions reached it
    assert states[-1]["holding"]  # disconnect held the arm


def test_lerobot_teleoperate_moves_the_arm_as_the_teleoperator_asks(tmp_path):
    """LeRobot's own ``lerobot-teleoperate`` with ``--robot.type=fdcontrol``: the scripted teleoperator's
    10 steps of +1 cm along x reach the embedded arm (its loop's own recording), nothing sideways,
    and the arm is held when the command ends."""
    mcap = tmp_path / "teleop.mcap"
    lerobot("lerobot-teleoperate", "--robot.type=fdcontrol", "--robot.embedded=true", f"--robot.fps={FPS}",
            f"--robot.embedded_args=[--record, {mcap}]", "--teleop.type=fdcontrol_test_script",
            f"--teleop.steps={STEPS}", f"--teleop.dx={DX}", f"--fps={FPS}", "--teleop_time_s=4",
            "--display_data=false", home=tmp_path / "hf")
    states = read_recording(mcap).states()
    tips = np.array([np.asarray(s["tip_pose"], float)[:3, 3] for s in states])
    dp = tips[-1] - tips[0]
    assert abs(dp[0] - STEPS * DX) < 0.005 and np.hypot(dp[1], dp[2]) < 0.002, dp
    assert states[-1]["holding"]  # disconnect held the arm
