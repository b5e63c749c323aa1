"""The learning interface's routes: policy actions and episodes (docs/learning.md).

``PUT /control/action`` hands a goal pose to the loop's target interpolator (fdcontrol.loop.action):
the motion law's target ramps to it over ``step`` s, the policy's period. The answer carries the
API's arrival time (``time.monotonic()``, comparable with the state's ``stamp`` and
``action_used_at`` on the same host). ``POST /episode/start`` and ``/episode/stop`` mark an
episode in the active MCAP recording with its task, policy id, success and the full parameter
set at its start; every action is recorded with the loop cycle of the observation it answers.
"""

from __future__ import annotations

import threading
import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from fdcontrol.server.errors import CONFLICT, ERRORS
from fdcontrol.server.routers.control import pose
from fdcontrol.server.routers.deps import live, worker
from fdcontrol.server.schemas import SEQ_MAX, StrictFinite, Target

router = APIRouter(tags=["learning"])
Name = Annotated[str, Field(max_length=200)]


class ActionIn(Target):
    """A goal pose (base frame) reached over ``step`` seconds."""

    model_config = ConfigDict(extra="forbid")

    step: Annotated[StrictFinite, Field(gt=0, le=10)] = Field(
        0.05, description="the policy's step period: the goal is reached over this time (s), or longer when the "
        "interpolator's speed and acceleration bounds need it")
    seq: Annotated[int, Field(strict=True, ge=1, le=SEQ_MAX)] = Field(description="the action's sequence number")
    obs_cycle: Annotated[int, Field(strict=True, ge=0, le=SEQ_MAX)] | None = Field(
        None, description="loop cycle of the observation the action answers (recorded for alignment)")
    policy_action: Annotated[list[StrictFinite], Field(max_length=64)] | None = Field(
        None, description="the policy's action as it gave it (recorded for the dataset, not used by the loop)")


class ActionAck(BaseModel):
    ok: bool = True
    seq: int
    arrival: float = Field(description="time.monotonic() when the API received the action (s)")
    running: bool
    holding: bool


class EpisodeStart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: Name | None = None
    policy_id: Name | None = None
    metadata: dict[Name, Name] = Field(default_factory=dict, max_length=64)


class EpisodeStop(BaseModel):
    model_config = ConfigDict(extra="forbid")

    success: Annotated[bool, Field(strict=True)] | None = None
    metadata: dict[Name, Name] = Field(default_factory=dict, max_length=64)


class EpisodeStatus(BaseModel):
    active: bool
    episode: int | None = Field(None, description="number of the open (or last) episode in this recording")
    task: str | None = None
    policy_id: str | None = None
    recording: str | None = None


_lock = threading.Lock()


def _episodes(request: Request) -> dict[str, Any]:
    """Episode bookkeeping of this app: the open episode and the count per recording file."""
    st = request.app.state
    if not hasattr(st, "episodes"):
        st.episodes = {"open": None, "count": {}}
    return st.episodes


@router.put("/control/action", response_model=ActionAck, responses=ERRORS)
def put_action(body: ActionIn, request: Request) -> dict[str, Any]:
    arrival = time.monotonic()
    w = live(request)
    T = pose(body, w.state()[0].tip_pose)
    w.call("action", T, float(body.step), body.seq, arrival)
    w.recorder.push_command("action", {"position": T[:3, 3].tolist(), "orientation": _quat(T),
                                       "step": body.step, "seq": body.seq, "obs_cycle": body.obs_cycle,
                                       "policy_action": body.policy_action, "arrival": arrival})
    s = w.state()[0]
    return {"seq": body.seq, "arrival": arrival, "running": s.running, "holding": s.holding}


def _quat(T: Any) -> list[float]:
    from fdcontrol.recording import quaternion

    return quaternion(T[:3, :3])


@router.post("/episode/start", response_model=EpisodeStatus, responses={**ERRORS, **CONFLICT})
def episode_start(request: Request, body: EpisodeStart = Body(default_factory=EpisodeStart)) -> dict[str, Any]:  # noqa: B008
    """Open an episode in the active recording (409 when nothing records or one is open)."""
    w = worker(request)
    ep = _episodes(request)
    with _lock:
        status = w.recorder.status()
        if not status.get("active"):
            raise HTTPException(409, "not recording: POST /recording/start first")
        name = status.get("name")
        if ep["open"] is not None and ep["open"]["recording"] != name:
            ep["open"] = None  # its recording ended meanwhile
        if ep["open"] is not None:
            raise HTTPException(409, f"episode {ep['open']['episode']} is open: POST /episode/stop first")
        n = ep["count"].get(name, 0)
        ep["count"][name] = n + 1
        ep["open"] = {"episode": n, "task": body.task, "policy_id": body.policy_id, "recording": name}
        from fdcontrol.recording import robot_info_from_params

        w.recorder.push_config(w.params, {}, robot_info_from_params(w.params))  # the parameters at the start
        w.recorder.push_episode({"event": "start", "episode": n, "task": body.task, "policy_id": body.policy_id,
                                 "success": None, "metadata": body.metadata, "params": w.params,
                                 "monotonic_s": time.monotonic()})
        return {"active": True, **ep["open"]}


@router.post("/episode/stop", response_model=EpisodeStatus, responses={**ERRORS, **CONFLICT})
def episode_stop(request: Request, body: EpisodeStop = Body(default_factory=EpisodeStop)) -> dict[str, Any]:  # noqa: B008
    w = worker(request)
    ep = _episodes(request)
    with _lock:
        cur = ep["open"]
        if cur is None:
            raise HTTPException(409, "no episode is open")
        ep["open"] = None
        w.recorder.push_episode({"event": "stop", "episode": cur["episode"], "task": cur["task"],
                                 "policy_id": cur["policy_id"], "success": body.success, "metadata": body.metadata,
                                 "monotonic_s": time.monotonic()})
        return {"active": False, **cur}


@router.get("/episode", response_model=EpisodeStatus)
def episode_status(request: Request) -> dict[str, Any]:
    cur = _episodes(request)["open"]
    return {"active": cur is not None, **(cur or {})}
