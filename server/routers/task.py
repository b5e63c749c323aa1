"""The task space over REST: moves (POST /control/move, /control/home), reactions (/control/rules)
and live stiffness (POST /control/gains). Workspace volumes are settings (PATCH /config
``workspace_box``, ``workspace_links``, ``keep_out``), shown by GET /workspace. The work is
done in the loop process (server/taskspace.py).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from fdcontrol.server.errors import CONFLICT, ERRORS
from fdcontrol.server.routers.deps import ack, live, worker
from fdcontrol.server.taskspace import GainsIn, HomeIn, MoveIn, RulesIn

router = APIRouter(tags=["task space"])


# ---------------------------------------------------------------------- REST
@router.post("/control/move", response_model=dict[str, Any], responses={**ERRORS, **CONFLICT})
def post_move(body: MoveIn, request: Request) -> dict[str, Any]:
    """A time-optimal, jerk-limited move (Ruckig) to a Cartesian or joint goal, tracked compliantly.
    422 with the reason for an unreachable or out-of-workspace goal, or when the loop cannot move."""
    out = live(request).call("task", "move", body.model_dump())
    return {**ack(request, "move started"), **out}


@router.post("/control/home", response_model=dict[str, Any], responses={**ERRORS, **CONFLICT})
def post_home(request: Request, body: HomeIn | None = None) -> dict[str, Any]:
    out = live(request).call("task", "home", (body or HomeIn()).model_dump())
    return {**ack(request, "moving home"), **out}


@router.post("/control/move/cancel", response_model=dict[str, Any], responses=ERRORS)
def cancel_move(request: Request) -> dict[str, Any]:
    live(request).call("task", "cancel")
    return ack(request, "move cancelled")


@router.put("/control/rules", response_model=list[dict[str, Any]], responses=ERRORS)
def put_rules(body: RulesIn, request: Request) -> Any:
    """Arm these rules (replacing the armed ones); [] disarms all."""
    return live(request).call("task", "rules", [r.model_dump(exclude_none=True) for r in body.rules])


@router.get("/control/rules", response_model=list[dict[str, Any]], responses=ERRORS)
def list_rules(request: Request) -> Any:
    return worker(request).call("task", "get_rules")


@router.delete("/control/rules", response_model=list[dict[str, Any]], responses=ERRORS)
def disarm_rules(request: Request) -> Any:
    return live(request).call("task", "rules", [])


@router.post("/control/gains", response_model=dict[str, Any], responses=ERRORS)
def post_gains(body: GainsIn, request: Request) -> Any:
    """Per-axis stiffness and damping of the motion term, ramped over ramp_time within the startup bounds."""
    return live(request).call("task", "gains", body.model_dump())


@router.get("/workspace", response_model=dict[str, Any], responses=ERRORS)
def get_workspace(request: Request) -> Any:
    return worker(request).call("task", "workspace")
