"""An MCAP recording as a LeRobotDataset v3 (``fdcontrol export lerobot RECORDING.mcap OUT/``).

The dataset has the features a ``lerobot-record --robot.type=fdcontrol`` session writes (the names
of :mod:`fdcontrol.env.features`): ``observation.state`` (joint positions and velocities, tip pose,
tip twist, measured wrench, mode, held, fault) and ``action`` of one action kind, both float32, at
``fps`` frames per second, one episode per episode of the recording (``POST /episode/start`` …
``/episode/stop``, what ``ServiceEnv(episodes=True)`` opens at each reset) or one for the whole
recording (``per="recording"``). It is written through LeRobot's own API
(``LeRobotDataset.create``, ``add_frame``, ``save_episode``, ``finalize``): parquet data,
``meta/info.json``, episodes, tasks and statistics.

Resampling: frame k of an episode that starts at log time t₀ (its start event, or its first
recorded state if later) is at t₀ + k/fps, for every such time up to the episode's end; its
observation is the state recorded last at or before that time (sample-and-hold: the loop records
every cycle, so a frame is at most one control period older than its time). The action of frame k
is what takes the arm from frame k to frame k + 1 (the last frame's: no motion):

* ``delta_pose``: [Δx, Δy, Δz, Δr_x, Δr_y, Δr_z], Δp = p₊ − p and Δr = log(R₊ Rᵀ) (base frame, the
  robot plugin's and the environment's ``delta_pose`` with ``frame="base"``);
* ``pose``: the tip pose of frame k + 1 (``ee.x`` … ``ee.qw``);
* ``twist``: the tip twist that makes that step in one frame, ``delta_pose`` × fps;
* ``joint_delta``: q₊ − q.

Without LeRobot the command stops with one line naming the extra to install.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin

from fdcontrol.env.features import action_names, observation_names, observation_vector
from fdcontrol.recording import EPISODE_TOPIC, STATE_TOPIC, read_recording

EXPORT_ACTIONS: tuple[str, ...] = ("delta_pose", "pose", "twist", "joint_delta")


class LeRobotExportError(ValueError):
    """A recording that cannot become a dataset (no episodes, no states, a bad option)."""


@dataclass
class Episode:
    """One episode's frames: ``times`` (log time, ns), ``state`` (frames × observation), ``action``."""

    index: int
    task: str
    start_ns: int
    end_ns: int
    times: np.ndarray
    state: np.ndarray
    action: np.ndarray
    source: np.ndarray  # index of the recorded state each frame holds


def _spans(events: list[tuple[int, dict[str, Any]]], last_ns: int) -> list[tuple[int, int, dict[str, Any]]]:
    """(start ns, end ns, start event) of each episode: a start closed by the stop of the same episode
    number; one still open when the recording ended runs to the last state."""
    out: list[tuple[int, int, dict[str, Any]]] = []
    opened: tuple[int, dict[str, Any]] | None = None
    for t, ev in events:
        if ev.get("event") == "start":
            if opened is not None:  # a start without a stop: the new start closes the old episode
                out.append((opened[0], t, opened[1]))
            opened = (t, ev)
        elif ev.get("event") == "stop" and opened is not None and opened[1].get("episode") == ev.get("episode"):
            out.append((opened[0], t, opened[1]))
            opened = None
    if opened is not None:
        out.append((opened[0], last_ns, opened[1]))
    return out


def _action(kind: str, s: np.ndarray, s_next: np.ndarray, dof: int, fps: float) -> np.ndarray:
    """The action from the observation vector ``s`` to ``s_next`` (layout of observation_names)."""
    q, qn = s[:dof], s_next[:dof]
    pose, pose_n = s[2 * dof:2 * dof + 7], s_next[2 * dof:2 * dof + 7]
    if kind == "pose":
        return pose_n.copy()
    if kind == "joint_delta":
        return qn - q
    R = pin.Quaternion(pose[6], *pose[3:6]).toRotationMatrix()
    Rn = pin.Quaternion(pose_n[6], *pose_n[3:6]).toRotationMatrix()
    delta = np.concatenate((pose_n[:3] - pose[:3], pin.log3(Rn @ R.T)))
    return delta if kind == "delta_pose" else delta * fps


def frames(path: str | Path, fps: float, per: str = "episode", task: str | None = None,
           action: str = "delta_pose") -> tuple[list[Episode], dict[str, Any]]:
    """The episodes of a recording resampled at ``fps`` (module docstring), and the dataset's features."""
    if not (math.isfinite(fps) and 0 < fps <= 1000):
        raise LeRobotExportError(f"--fps must be in (0, 1000], got {fps!r}")
    if per not in ("episode", "recording"):
        raise LeRobotExportError(f"--per must be 'episode' or 'recording', got {per!r}")
    if action not in EXPORT_ACTIONS:
        raise LeRobotExportError(f"--action must be one of {', '.join(EXPORT_ACTIONS)}, got {action!r}")
    rec = read_recording(path, topics=(STATE_TOPIC, EPISODE_TOPIC))
    states = rec.messages.get(STATE_TOPIC, [])
    if not states:
        raise LeRobotExportError(f"{path}: the recording holds no loop state")
    t_states = np.array([t for t, _ in states], dtype=np.int64)
    if per == "recording":
        spans = [(int(t_states[0]), int(t_states[-1]), {"task": None})]
    else:
        spans = _spans(rec.messages.get(EPISODE_TOPIC, []), int(t_states[-1]))
        if not spans:
            raise LeRobotExportError(f"{path}: the recording holds no episode (POST /episode/start while "
                                     "recording, or ServiceEnv(episodes=True)); export it whole with "
                                     "--per recording")
    dof = len(states[0][1]["q"])
    step = 1e9 / fps
    out: list[Episode] = []
    for start, end, ev in spans:
        start = max(start, int(t_states[0]))
        if end < start:
            continue
        name = task if task is not None else ev.get("task")
        if not name:
            raise LeRobotExportError(f"episode {ev.get('episode', 0)} has no task: give one with --task \"...\"")
        n = math.floor((end - start) / step + 1e-9) + 1
        times = start + np.round(np.arange(n) * step).astype(np.int64)
        src = np.searchsorted(t_states, times, side="right") - 1  # sample-and-hold
        obs = np.array([observation_vector(_floats(states[i][1])) for i in src], dtype=float)
        act = np.array([_action(action, obs[k], obs[min(k + 1, n - 1)], dof, fps) for k in range(n)])
        out.append(Episode(len(out), str(name), start, end, times, obs, act, src))
    if not out:
        raise LeRobotExportError(f"{path}: no episode spans a recorded state")
    names = {"observation.state": list(observation_names(dof)), "action": list(action_names(action, dof))}
    features = {k: {"dtype": "float32", "shape": (len(v),), "names": v} for k, v in names.items()}
    return out, features


def _floats(state: dict[str, Any]) -> dict[str, Any]:
    """A recorded state with JSON's nulls (non-finite values of a faulted cycle) as NaN."""
    return {k: (np.array(v, dtype=float) if isinstance(v, list) else v) for k, v in state.items()}


def export_lerobot(path: str | Path, out: str | Path, fps: float, per: str = "episode", task: str | None = None,
                   action: str = "delta_pose", repo_id: str | None = None) -> dict[str, Any]:
    """Write the dataset to ``out`` (a new directory) with LeRobot's API; a summary of what was written."""
    out = Path(out)
    if out.exists():
        raise LeRobotExportError(f"{out} exists: the dataset goes into a new directory")
    if not (math.isfinite(fps) and float(fps).is_integer()):
        raise LeRobotExportError(f"--fps must be a whole number of frames per second for LeRobot, got {fps!r}")
    try:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
    except ImportError as exc:
        from fdcontrol.extras import missing

        raise missing("lerobot", "fdcontrol export lerobot", exc) from exc
    eps, features = frames(path, fps, per, task, action)
    ds = LeRobotDataset.create(repo_id or f"local/{Path(path).stem}", int(fps), features, root=out,
                               robot_type="fdcontrol", use_videos=False)
    try:
        for ep in eps:
            for k in range(len(ep.times)):
                ds.add_frame({"observation.state": ep.state[k].astype(np.float32),
                              "action": ep.action[k].astype(np.float32), "task": ep.task})
            ds.save_episode()
    finally:
        ds.finalize()
    return {"root": str(out), "fps": int(fps), "episodes": len(eps), "frames": sum(len(e.times) for e in eps),
            "action": action, "tasks": sorted({e.task for e in eps})}


__all__ = ["EXPORT_ACTIONS", "Episode", "LeRobotExportError", "export_lerobot", "frames"]
