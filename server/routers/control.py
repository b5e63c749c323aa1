"""Commanding the loop over REST: start, stop, hold, zero the sensor, a tip target, a wrench.

Every answer is an acknowledgement (``schemas.Ack``) carrying the state after the command:
the handler waits (bounded) until the loop has published it. Commands check first that the
loop process can take them (503 otherwise, never a false acknowledgement); stopping is
always allowed. PUT /control/twist is in server/routers/twist.py.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
from fastapi import APIRouter, Body, HTTPException, Request

from fdcontrol.loop import InputError
from fdcontrol.model.spatial import target_pose
from fdcontrol.server import schemas
from fdcontrol.server.errors import CONFLICT, ERRORS
from fdcontrol.server.routers.deps import ack, live, worker

router = APIRouter(tags=["control"])


@router.post("/control/start", response_model=schemas.Ack, responses=ERRORS)
def start(request: Request) -> dict[str, Any]:
    live(request).call("start")
    return ack(request, done=lambda s: s.running)


#: s a stop waits for the loop thread to end it before the command thread is asked as well (a braking time
#: longer than this still ends at rest: the command thread waits for it)
STOP_WAIT = 5.0


@router.post("/control/stop", response_model=schemas.Ack, responses=ERRORS)
async def stop(request: Request) -> dict[str, Any]:
    """Brake to standstill with the braking profile fixed when the stop began, then stop the loop.

    Like a hold, the stop goes straight from the event loop into shared memory (no thread, no pipe): the
    loop brakes from its next cycle start and its thread ends itself at rest, so the answer — the first
    stopped state the loop publishes — comes one braking time after the stop arrived, plus the machine's
    scheduling. A loop process that cannot be trusted right now (stuck, ending), or one that has not stopped
    within ``STOP_WAIT``, is asked through the command thread as well: stopping is always safe to ask."""
    w = worker(request)
    if w.alive:
        w.request_stop()
        end = time.monotonic() + STOP_WAIT
        while w.problem() is None and time.monotonic() < end:
            if not w.channel.read_running()[0]:  # (not the whole state: this polls every 2 ms)
                w.stop_acknowledged = True  # as a stop through the pipe (server/supervisor.py: a restart stays stopped)
                s = w.state()[0]
                return {"ok": True, "running": s.running, "holding": s.holding, "detail": None}
            await asyncio.sleep(0.002)
    await asyncio.to_thread(w.call, "stop")
    return await asyncio.to_thread(ack, request, None, lambda s: not s.running)


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
