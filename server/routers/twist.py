"""PUT /control/twist: a commanded tip twist for teleoperation (fdcontrol.twist).

For streaming at loop rate use /ws/control with {"twist": [vx, vy, vz, wx, wy, wz],
"frame": "base"|"tool"}; both go through the same latest-wins shared-memory slot and the
same watchdog as wrenches (a twist older than ``command_timeout`` holds the arm).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from .. import schemas

Twist = Annotated[list[Annotated[float, Field(allow_inf_nan=False)]], Field(
    min_length=6, max_length=6, description="[vx, vy, vz, wx, wy, wz] in m/s and rad/s")]


class TwistIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    twist: Twist
    frame: Literal["base", "tool"] = "base"
    seq: int | None = None


router = APIRouter(tags=["control"])


@router.put("/control/twist", response_model=schemas.Ack, responses={422: {"model": schemas.Error}})
def put_twist(body: TwistIn, request: Request) -> dict[str, Any]:
    """Command the tip twist; the velocity-tracking term f = B v + K_v (v − ẋ) drives the arm."""
    w = request.app.state.worker
    w.set_twist(body.twist, body.frame, body.seq)
    s, _ = w.state()
    return {"ok": True, "running": s.running, "holding": s.holding, "detail": None}
