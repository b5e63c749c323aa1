"""The simulated world: objects and the simulated hand (a push on the tool), MuJoCo driver only.

``GET /environment`` → {"objects": [{"name", "kind": "box", "position": [x, y, z] (m),
"quaternion": [x, y, z, w], "size": [sx, sy, sz] full lengths (m)}], "push": [6]}, base frame.
``PUT /sim/push`` {"wrench": [fx, fy, fz, tx, ty, tz]} sets the hand's push on the tool at the
tip origin (base frame, N and N·m; |F| ≤ 500 N, |τ| ≤ 50 N·m); ``DELETE /sim/push`` releases it.
A driver without a simulated world answers 409.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fdcontrol.server.errors import ERRORS
from fdcontrol.server.schemas import Error, StrictFinite
from fdcontrol.server.worker import WorkerError

router = APIRouter(tags=["simulation"])
MAX_PUSH_FORCE = 500.0  # N, the simulated hand's strength (MuJocoDriver.set_push checks the same)
MAX_PUSH_TORQUE = 50.0  # N·m
RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERRORS, 409: {"model": Error, "description": "the driver has no simulated world"}}


class Push(BaseModel):
    model_config = ConfigDict(extra="forbid")
    wrench: list[StrictFinite] = Field(min_length=6, max_length=6, description=(
        f"[F; τ] base frame, at the tip origin (N, N·m); |F| ≤ {MAX_PUSH_FORCE:g} N, |τ| ≤ {MAX_PUSH_TORQUE:g} N·m"))

    @field_validator("wrench")
    @classmethod
    def _in_range(cls, w: list[float]) -> list[float]:
        if math.hypot(*w[:3]) > MAX_PUSH_FORCE or math.hypot(*w[3:]) > MAX_PUSH_TORQUE:
            raise ValueError(f"push out of range: |F| ≤ {MAX_PUSH_FORCE:g} N, |τ| ≤ {MAX_PUSH_TORQUE:g} N·m")
        return w


def _call(request: Request, op: str, *args: Any) -> dict[str, Any]:
    try:
        out = request.app.state.worker.call("sim", op, *args)
    except WorkerError as exc:
        if exc.kind == "invalid":
            raise HTTPException(422, str(exc.detail)) from exc
        raise
    if isinstance(out, dict) and "error" in out:
        raise HTTPException(409, out["error"])
    return out


@router.get("/environment", responses=RESPONSES)
def environment(request: Request) -> dict[str, Any]:
    return _call(request, "environment")


@router.put("/sim/push", responses=RESPONSES)
def set_push(body: Push, request: Request) -> dict[str, Any]:
    return _call(request, "push", body.wrench)


@router.delete("/sim/push", responses=RESPONSES)
def release_push(request: Request) -> dict[str, Any]:
    return _call(request, "push", [0.0] * 6)
