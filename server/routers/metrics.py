"""GET /metrics: Prometheus text exposition (see server/metrics.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from fdcontrol.server.metrics import exposition

router = APIRouter(tags=["monitoring"])


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
                             "description": "Prometheus text format"}})
def metrics(request: Request) -> Response:
    """Loop period error and compute histograms, overruns, watchdog trips, holds, faults,
    WebSocket clients and drops, authentication failures."""
    return Response(exposition(request.app), media_type=CONTENT_TYPE_LATEST)
