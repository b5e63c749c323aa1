"""Reading the loop: GET /state (newest published state), /stats (timing), /robots (shipped models)."""

from __future__ import annotations

import gc
from typing import Any

from fastapi import APIRouter, Request

from fdcontrol.loop import LoopState
from fdcontrol.loop import state as state_encoding
from fdcontrol.model.robot import SHIPPED
from fdcontrol.server import schemas
from fdcontrol.server.auth import request_client
from fdcontrol.server.routers.deps import shipped, worker

router = APIRouter(tags=["status"])


def state_dict(s: LoopState) -> dict[str, Any]:
    """The state's wire encoding, derived from its declaration (fdcontrol.loop.state); callers add ``stale``."""
    return state_encoding.to_dict(s)


@router.get("/robots", response_model=list[schemas.RobotInfo])
def robots() -> list[dict[str, Any]]:
    out = []
    for name in SHIPPED:
        r = shipped(name)
        lim = r.limits
        out.append({"name": name, "dof": r.dof, "base": r.base, "tip": r.tip,
                    "joints": [{"name": n, "lower": lo, "upper": up, "max_velocity": v}
                               for n, lo, up, v in zip(r.joint_names, lim.lower, lim.upper,
                                                       lim.velocity, strict=True)]})
    return out


@router.get("/state", response_model=schemas.State, responses={503: {"model": schemas.Error}})
def state(request: Request) -> dict[str, Any]:
    """The newest published state; ``stale`` is true when the loop process is dead or stuck; ``lease``
    says who controls the arm (server/lease.py)."""
    w, access = worker(request), request.app.state.access
    return {**state_dict(w.state()[0]), "stale": w.problem() is not None,
            "lease": access.lease.info(request_client(access, request))}


@router.get("/stats", response_model=schemas.Stats)
def stats(request: Request) -> dict[str, Any]:
    w, hub = worker(request), request.app.state.hub
    return {"rate": w.params["rate"], **w.call("stats"), "ws_clients": hub.clients, "ws_dropped": hub.dropped,
            "api_gc_frozen": gc.get_freeze_count()}
