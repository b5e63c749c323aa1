"""Reading the loop: GET /state (newest published state), /stats (timing), /robots (shipped models)."""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Request

from fdcontrol.loop import LoopState
from fdcontrol.robot import SHIPPED

from .. import schemas
from .deps import shipped, worker

router = APIRouter(tags=["status"])


def state_dict(s: LoopState) -> dict[str, Any]:
    return {
        "t": s.t, "cycle": s.cycle, "seq_ack": s.seq_ack, "q": s.q.tolist(), "qd": s.qd.tolist(),
        "q_ref": s.q_ref.tolist(), "qd_ref": s.qd_ref.tolist(), "tip_pose": s.tip_pose.tolist(),
        "wrench": s.wrench.tolist(), "f_measured": s.f_measured.tolist(), "mode": s.mode,
        "running": s.running, "holding": s.holding, "watchdog": s.watchdog, "fault": s.fault,
        "sigma_min_j": s.sigma_min_j, "limits_active": s.limits_active,
        "kappa_h": s.kappa_h if math.isfinite(s.kappa_h) else None,
        "posture_distance": s.posture_distance if math.isfinite(s.posture_distance) else None,
        "link_clearance": s.link_clearance if math.isfinite(s.link_clearance) else None,
    }


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
    """The newest published state; ``stale`` is true when the loop process is dead or stuck."""
    w = worker(request)
    return {**state_dict(w.state()[0]), "stale": w.problem() is not None}


@router.get("/stats", response_model=schemas.Stats)
def stats(request: Request) -> dict[str, Any]:
    w, hub = worker(request), request.app.state.hub
    return {"rate": w.params["rate"], **w.call("stats"), "ws_clients": hub.clients, "ws_dropped": hub.dropped}
