"""GET /health: the truth about the loop process (the container healthcheck reads it)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from fdcontrol import kernel_cache
from fdcontrol.server import schemas
from fdcontrol.server.routers.deps import worker
from fdcontrol.server.worker import WorkerError

router = APIRouter(tags=["status"])


@router.get("/health", response_model=schemas.Health, responses={503: {"model": schemas.Health}})
def health(request: Request) -> Any:
    """200 when the loop process is alive and cycling; 503 with the reason when dead, stuck or faulted.
    ``following`` false (with the joint and its velocity error) when the arm does not do what the loop asks."""
    w = worker(request)
    try:
        s, last = w.state()
    except WorkerError:
        s, last = None, 0.0
    # the age is read before the verdict: a 200 never reports a cycle older than the verdict saw
    age = time.monotonic() - last if last else None
    problem = w.problem()
    # the loop's fault and a force–torque sensor's own error report, each by name
    fault = problem or "; ".join(x for x in ((s.fault, s.sensor_status) if s is not None else ()) if x) or None
    sup = getattr(request.app.state, "supervisor", None)
    body = {"status": "fault" if fault else "ok", "loop_running": bool(s and s.running and not problem),
            "last_cycle_age_s": age, "cycles": s.cycle if s else 0, "fault": fault,
            "restarts": sup.restarts if sup else 0}
    # does the arm do what the loop asks? (the loop's Following check; a report next to the status, not a fault)
    lags = s is not None and not problem and not s.following
    body.update(following=not lags, following_joint=s.follow_joint if lags else None,
                following_error=s.follow_error if lags else None,
                kernels=kernel_cache.summary(kernel_cache.status(), getattr(w, "kernels", None)))
    return JSONResponse(status_code=503, content=body) if problem else body
