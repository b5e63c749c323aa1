"""Episodes of an MCAP recording as aligned per-episode arrays (``fdcontrol export``, docs/learning.md).

One row per policy step: the action the policy sent (``PUT /control/action``) and the observation
it answered — the loop state of the cycle named by the action's ``obs_cycle``, taken from the
recording's ``/fdcontrol/state`` messages (every cycle is recorded). Rows are the actions whose
arrival lies between the episode's start and stop events.

Per episode (npz keys ``episode_<k>/<name>``, parquet columns ``<name>`` with an ``episode`` column):

======================  =========  ===========================================================
name                    shape      content
======================  =========  ===========================================================
t                       (N,)       action arrival, s after the episode's start
seq                     (N,)       action sequence number
obs_cycle               (N,)       loop cycle of the observation
obs_q, obs_qd           (N, dof)   joint positions (rad), velocities (rad/s)
obs_tip_pose            (N, 7)     tip position (m) and quaternion [x, y, z, w], base frame
obs_tip_twist           (N, 6)     tip twist [v; ω] (m/s, rad/s), base frame
obs_wrench              (N, 6)     filtered measured wrench [F; τ] (N, N·m), base frame
action                  (N, A)     the policy's action as given (its action space)
goal                    (N, 7)     the goal pose the action became (m; quaternion [x, y, z, w])
======================  =========  ===========================================================

and the episode's ``meta`` (JSON: episode number, task, policy id, success, metadata),
``params`` (JSON: the full parameter set at the start) and ``param_changes`` (JSON list of
``{"t", "changes"}`` during the episode).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from fdcontrol.recording import COMMAND_TOPIC, CONFIG_TOPIC, EPISODE_TOPIC, STATE_TOPIC, quaternion, read_recording

ARRAYS = ("t", "seq", "obs_cycle", "obs_q", "obs_qd", "obs_tip_pose", "obs_tip_twist", "obs_wrench", "action", "goal")


class ExportError(ValueError):
    """A recording that cannot be exported (no episodes, missing observations)."""


def episodes(path: str | Path) -> list[dict[str, Any]]:
    """The episodes of a recording, each ``{"meta", "params", "param_changes", "arrays"}``."""
    rec = read_recording(path)
    events = rec.messages.get(EPISODE_TOPIC, [])
    states = rec.messages.get(STATE_TOPIC, [])
    by_cycle: dict[int, list[int]] = {}
    state_times = [t for t, _ in states]
    for i, (_, m) in enumerate(states):
        by_cycle.setdefault(int(m["cycle"]), []).append(i)
    actions = [(t, {**m["args"][0], "_log_ns": t}) for t, m in rec.messages.get(COMMAND_TOPIC, [])
               if m["command"] == "action"]
    configs = rec.messages.get(CONFIG_TOPIC, [])
    out = []
    opened: tuple[int, dict[str, Any]] | None = None
    for t, ev in events:
        if ev["event"] == "start":
            opened = (t, ev)
            continue
        if opened is None or opened[1]["episode"] != ev["episode"]:
            continue
        t0, start = opened
        opened = None
        rows = [a for ta, a in actions if t0 <= ta <= t]
        out.append({
            "meta": {"episode": start["episode"], "task": start.get("task"), "policy_id": start.get("policy_id"),
                     "success": ev.get("success"), "metadata": {**start.get("metadata", {}),
                                                                **ev.get("metadata", {})}},
            "params": start.get("params", {}),
            "param_changes": [{"t": (tc - t0) * 1e-9, "changes": c["changes"]} for tc, c in configs
                              if t0 < tc <= t and c["changes"]],
            "arrays": _arrays(rows, t0, states, state_times, by_cycle),
        })
    if opened is not None:  # an episode still open when the recording ended: up to the last action
        t0, start = opened
        rows = [a for ta, a in actions if ta >= t0]
        out.append({"meta": {"episode": start["episode"], "task": start.get("task"),
                             "policy_id": start.get("policy_id"), "success": None,
                             "metadata": {**start.get("metadata", {}), "unterminated": "true"}},
                    "params": start.get("params", {}), "param_changes": [],
                    "arrays": _arrays(rows, t0, states, state_times, by_cycle)})
    return out


def _observation(cycle: int, arrival_ns: int, states: list, state_times: list[int],
                 by_cycle: dict[int, list[int]]) -> dict[str, Any]:
    """The state of ``cycle`` recorded last before the action arrived (cycles restart with the loop)."""
    cands = [i for i in by_cycle.get(cycle, []) if state_times[i] <= arrival_ns]
    if not cands:
        raise ExportError(f"the recording has no state of cycle {cycle} before the action (dropped?)")
    return states[cands[-1]][1]


def _arrays(rows: list[dict[str, Any]], t0: int, states: list, state_times: list[int],
            by_cycle: dict[int, list[int]]) -> dict[str, np.ndarray]:
    cols: dict[str, list[Any]] = {k: [] for k in ARRAYS}
    for a in rows:
        if a.get("obs_cycle") is None:
            raise ExportError(f"action {a.get('seq')} names no observation (obs_cycle)")
        s = _observation(int(a["obs_cycle"]), int(a["_log_ns"]), states, state_times, by_cycle)
        cols["t"].append((int(a["_log_ns"]) - t0) * 1e-9)
        cols["seq"].append(int(a["seq"]))
        cols["obs_cycle"].append(int(a["obs_cycle"]))
        cols["obs_q"].append(s["q"])
        cols["obs_qd"].append(s["qd"])
        T = np.asarray(s["tip_pose"], dtype=float)  # the recorded state: the LoopState's own 4×4
        cols["obs_tip_pose"].append([*T[:3, 3], *quaternion(T[:3, :3])])
        cols["obs_tip_twist"].append(s.get("tip_twist") or [np.nan] * 6)
        cols["obs_wrench"].append(s["f_measured"])
        cols["action"].append(a.get("policy_action") or [])
        cols["goal"].append([*a["position"], *a["orientation"]])
    out = {}
    for k, v in cols.items():
        dtype = np.int64 if k in ("seq", "obs_cycle") else np.float64
        out[k] = np.array(v, dtype=dtype) if v else np.zeros((0,), dtype=dtype)
    return out


def write_npz(eps: list[dict[str, Any]], out: str | Path) -> Path:
    """One .npz: ``episodes`` (count) and ``episode_<k>/<name>`` per episode (see the module docstring)."""
    data: dict[str, np.ndarray] = {"episodes": np.array(len(eps))}
    for k, ep in enumerate(eps):
        pre = f"episode_{k:03d}/"
        data.update({pre + n: v for n, v in ep["arrays"].items()})
        for n in ("meta", "params", "param_changes"):
            data[pre + n] = np.array(json.dumps(ep[n]))
    out = Path(out)
    np.savez_compressed(out, **data)
    return out if out.suffix == ".npz" else out.with_suffix(out.suffix + ".npz")


def write_parquet(eps: list[dict[str, Any]], out: str | Path) -> Path:
    """One Parquet table, a row per policy step with an ``episode`` column; per-episode ``meta``,
    ``params`` and ``param_changes`` as JSON in the table's metadata (key ``fdcontrol.episodes``)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ExportError("parquet export needs pyarrow: pip install 'fdcontrol[env]'") from exc
    cols: dict[str, list[Any]] = {"episode": [], "step": [], **{n: [] for n in ARRAYS}}
    for k, ep in enumerate(eps):
        a = ep["arrays"]
        n = len(a["seq"])
        cols["episode"] += [k] * n
        cols["step"] += list(range(n))
        for name in ARRAYS:
            cols[name] += [x.tolist() if isinstance(x, np.ndarray) else x.item() for x in a[name]]
    table = pa.table(cols)
    meta = [{n: ep[n] for n in ("meta", "params", "param_changes")} for ep in eps]
    table = table.replace_schema_metadata({"fdcontrol.episodes": json.dumps(meta)})
    pq.write_table(table, out)
    return Path(out)


def export(path: str | Path, to: str = "npz", out: str | Path | None = None) -> Path:
    """Export the episodes of ``path`` to ``out`` (default: next to it, FILE.npz / FILE.parquet)."""
    eps = episodes(path)
    if not eps:
        raise ExportError(f"{path}: the recording holds no episode (POST /episode/start while recording)")
    if to not in ("npz", "parquet"):
        raise ExportError(f"unknown format {to!r}: npz or parquet")
    out = Path(out) if out is not None else Path(path).with_suffix("." + to)
    return write_npz(eps, out) if to == "npz" else write_parquet(eps, out)
