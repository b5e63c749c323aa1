"""A LeRobot-style policy closes the loop on the compliant arm, recorded as ``lerobot-record`` records.

The policy is any callable from LeRobot's observation (the robot plugin's flat dict of named floats)
to an action dict; here a scripted one that steers the tip to a point 10 cm away. It runs for one
episode against the ``fdcontrol`` robot plugin on the embedded MuJoCo arm (fdcontrol's service on
loopback, started for it), and every frame goes into a LeRobotDataset through LeRobot's own
machinery: the features from the robot as ``lerobot-record`` builds them, its default processors,
``build_dataset_frame``, ``add_frame``, ``save_episode``. The dataset then loads back with
``LeRobotDataset``.

    python examples/lerobot_policy.py --root datasets/reach     # needs LeRobot and the robot plugin (README)

The recorded action is the one ``send_action`` applied (clipped to the action bounds), so a policy
trained on the dataset learns what the arm was told.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.datasets.pipeline_features import aggregate_pipeline_dataset_features, create_initial_features
from lerobot.datasets.utils import build_dataset_frame, combine_feature_dicts
from lerobot.processor import make_default_processors
from lerobot.robots import make_robot_from_config
from lerobot.utils.constants import ACTION, OBS_STR
from lerobot.utils.robot_utils import precise_sleep
from lerobot_robot_fdcontrol import FdcontrolRobotConfig

Policy = Callable[[dict[str, Any]], dict[str, float]]
OFFSET = np.array([0.08, 0.04, 0.04])  # m, the goal relative to the tip's pose at the start (inside
# the workspace box the simulated arm starts with)
GAIN, STEP = 0.5, 0.01  # the fraction of the remaining distance per step; at most 1 cm per step and axis


def reach(goal: np.ndarray) -> Policy:
    """A scripted policy: a step of GAIN × the remaining distance to `goal`, at most STEP per axis."""
    def policy(obs: dict[str, Any]) -> dict[str, float]:
        d = np.clip(GAIN * (goal - np.array([obs["ee.x"], obs["ee.y"], obs["ee.z"]])), -STEP, STEP)
        return {"delta_x": float(d[0]), "delta_y": float(d[1]), "delta_z": float(d[2]),
                "delta_rx": 0.0, "delta_ry": 0.0, "delta_rz": 0.0}
    return policy


def record_episode(root: Path, seconds: float = 6.0, fps: int = 10, repo_id: str = "local/fdcontrol_reach",
                   task: str = "reach a point 10 cm away") -> tuple[LeRobotDataset, np.ndarray]:
    """One episode of the scripted policy on the embedded arm into a new dataset at `root`; the dataset
    and the policy's goal."""
    # origin="measured": each step starts from where the tip is (the policy closes the loop on the measured pose)
    cfg = FdcontrolRobotConfig(embedded=True, fps=fps, action_type="delta_pose", origin="measured")
    robot = make_robot_from_config(cfg)
    teleop_action_processor, robot_action_processor, robot_observation_processor = make_default_processors()
    features = combine_feature_dicts(  # as lerobot-record builds them
        aggregate_pipeline_dataset_features(pipeline=teleop_action_processor,
                                            initial_features=create_initial_features(action=robot.action_features),
                                            use_videos=False),
        aggregate_pipeline_dataset_features(pipeline=robot_observation_processor,
                                            initial_features=create_initial_features(
                                                observation=robot.observation_features),
                                            use_videos=False))
    dataset = LeRobotDataset.create(repo_id, fps, root=root, robot_type=robot.name, features=features,
                                    use_videos=False)
    robot.connect()
    try:
        obs = robot.get_observation()
        goal = np.array([obs["ee.x"], obs["ee.y"], obs["ee.z"]]) + OFFSET
        policy = reach(goal)
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            t = time.perf_counter()
            obs = robot_observation_processor(robot.get_observation())
            frame = build_dataset_frame(dataset.features, obs, prefix=OBS_STR)
            action = policy(obs)
            applied = robot.send_action(robot_action_processor((action, obs)))
            dataset.add_frame({**frame, **build_dataset_frame(dataset.features, applied, prefix=ACTION),
                               "task": task})
            precise_sleep(max(1.0 / fps - (time.perf_counter() - t), 0.0))
        dataset.save_episode()
    finally:
        dataset.finalize()
        robot.disconnect()  # the arm holds
    return dataset, goal


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, required=True, help="the new dataset's directory (must not exist)")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--fps", type=int, default=10)
    args = ap.parse_args()
    _, goal = record_episode(args.root, args.seconds, args.fps)
    ds = LeRobotDataset("local/fdcontrol_reach", root=args.root)  # loaded back
    names = ds.features["observation.state"]["names"]
    last = ds[ds.num_frames - 1]["observation.state"].numpy()
    tip = np.array([last[names.index(k)] for k in ("ee.x", "ee.y", "ee.z")])
    print(f"{ds.num_episodes} episode, {ds.num_frames} frames at {ds.fps} fps in {args.root}; "
          f"the tip ended {np.linalg.norm(tip - goal) * 1e3:.1f} mm from the goal")


if __name__ == "__main__":
    main()
