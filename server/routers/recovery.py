"""Robot error recovery and reconnection, for drivers that offer them (the franka driver).

``POST /control/recover`` runs the robot's automatic error recovery (after a reflex) and
``POST /control/reconnect`` connects to the robot anew (after a lost connection). Neither moves
the arm: the loop stays in hold until it is released (``POST /control/hold {"hold": false}``).
A driver without the capability answers 409.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from fdcontrol.server import schemas
from fdcontrol.server.errors import CONFLICT, ERRORS
from fdcontrol.server.routers.deps import ack, worker

router = APIRouter(tags=["control"])


@router.post("/control/recover", response_model=schemas.Ack, responses={**ERRORS, **CONFLICT})
def recover(request: Request) -> dict[str, Any]:
    """The robot's automatic error recovery; the loop keeps holding until released."""
    worker(request).call("driver_call", "recover")
    return ack(request, "error recovery done; release the hold to move")


@router.post("/control/reconnect", response_model=schemas.Ack, responses={**ERRORS, **CONFLICT})
def reconnect(request: Request) -> dict[str, Any]:
    """Connect to the robot anew (checks the model again); the loop keeps holding until released."""
    worker(request).call("driver_call", "reconnect")
    return ack(request, "reconnected; release the hold to move")
