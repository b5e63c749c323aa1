"""PUT /control/twist: a commanded tip twist for teleoperation (fdcontrol.control.twist).

For streaming at loop rate use /ws/control with {"twist": [vx, vy, vz, wx, wy, wz],
"frame": "base"|"tool"}; both go through the same latest-wins shared-memory slot and the
same watchdog as wrenches (a twist older than ``command_timeout`` holds the arm).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from fdcontrol.server import schemas
from fdcontrol.server.errors import ERRORS
from fdcontrol.server.routers.deps import ack

Twist = Annotated[list[schemas.StrictFinite], Field(
    min_length=6, max_length=6, description="[vx, vy, vz, wx, wy, wz] in m/s and rad/s")]


class TwistIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    twist: Twist
    frame: Literal["base", "tool"] = "base"
    seq: Annotated[int, Field(strict=True, ge=0, le=schemas.SEQ_MAX)] | None = None


router = APIRouter(tags=["control"])


@router.put("/control/twist", response_model=schemas.Ack, responses=ERRORS)
def put_twist(body: TwistIn, request: Request) -> dict[str, Any]:
    """Command the tip twist; the velocity-tracking term f = B v + K_v (v − ẋ) drives the arm."""
    request.app.state.worker.set_twist(body.twist, body.frame, body.seq)  # checks the loop is alive first
    return ack(request)
