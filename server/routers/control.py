"""Commanding the loop over REST: start, stop, hold, zero the sensor, a tip target, a wrench.

Every answer is an acknowledgement (``schemas.Ack``) carrying the state after the command:
the handler waits (bounded) until the loop has published it. Commands check first that the
loop process can take them (503 otherwise, never a false acknowledgement); stopping is
always allowed. PUT /control/twist is in server/routers/twist.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from fastapi import APIRouter, Body, HTTPException, Request

from fdcontrol.loop.cycle import InputError
from fdcontrol.model.spatial import target_pose
from fdcontrol.server import schemas
from fdcontrol.server.errors import CONFLICT, ERRORS
from fdcontrol.server.routers.deps import ack, live, worker

router = APIRouter(tags=["control"])


@router.post("/control/start", response_model=schemas.Ack, responses=ERRORS)
def start(request: Request) -> dict[str, Any]:
    live(request).call("start")
    return ack(request, done=lambda s: s.running)


@router.post("/control/stop", response_model=schemas.Ack, responses=ERRORS)
def stop(request: Request) -> dict[str, Any]:
    """Brake to standstill within the acceleration limit, then stop the loop."""
    worker(request).call("stop")  # allowed on a stuck loop too: stopping is always safe to ask
    return ack(request, done=lambda s: not s.running)


@router.post("/control/hold", response_model=schemas.Ack, responses=ERRORS)
async def hold(request: Request, body: schemas.HoldIn = Body(default_factory=schemas.HoldIn)) -> dict[str, Any]:  # noqa: B008
    """Hold (brake to standstill) or release. A hold goes straight from the event loop into shared
    memory (no thread, no pipe), so it lands at the loop's next cycle even while a client floods
    /ws/control; releasing needs the control lease (server/lease.py)."""
    w = live(request)
    if body.hold:
        w.request_hold()
    else:
        await asyncio.to_thread(w.call, "hold", False)
    return await asyncio.to_thread(ack, request, "holding" if body.hold else "released",
                                   lambda s: not s.running or s.holding == body.hold)


@router.post("/control/zero-sensor", response_model=schemas.Ack, responses={**ERRORS, **CONFLICT})
def zero_sensor(request: Request) -> dict[str, Any]:
    if not live(request).call("has_sensor"):
        raise HTTPException(409, "the driver has no force-torque sensor")
    if any(worker(request).state()[0].qd_ref):
        raise HTTPException(409, "policy 'holding': the sensor bias is taken at standstill only "
                                 "(POST /control/hold, then zero the sensor)")
    worker(request).call("zero_sensor")
    return ack(request, "bias zeroed on the next cycle")


@router.put("/control/target", response_model=schemas.Ack, responses=ERRORS)
def put_target(target: schemas.Target, request: Request) -> dict[str, Any]:
    live(request).call("target", pose(target, worker(request).state()[0].tip_pose))
    return ack(request)


@router.put("/control/wrench", response_model=schemas.Ack, responses=ERRORS)
def put_wrench(w: schemas.WrenchIn, request: Request) -> dict[str, Any]:
    seq = worker(request).set_wrench(w.wrench, w.frame, w.seq)  # checks the loop is alive first
    # the state once the loop has taken this wrench (bounded): "holding" then says what the arm does now,
    # not what it did before the wrench arrived
    return ack(request, done=lambda s: s.seq_ack == seq or not s.running)


def pose(target: schemas.Target, current: np.ndarray) -> np.ndarray:
    """The 4×4 target pose (base frame); without an orientation, keep the current one."""
    return target_pose(target.position, target.orientation, current, InputError)
