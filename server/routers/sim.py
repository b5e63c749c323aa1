"""The simulated world: objects and the simulated hand (a push on the tool), MuJoCo driver only.

``GET /environment`` → {"objects": [{"name", "kind": "box", "position": [x, y, z] (m),
"quaternion": [x, y, z, w], "size": [sx, sy, sz] full lengths (m)}], "push": [6]}, base frame.
``PUT /sim/push`` {"wrench": [fx, fy, fz, tx, ty, tz]} sets the hand's push on the tool at the
tip origin (base frame, N and N·m; |F| ≤ 500 N, |τ| ≤ 50 N·m); ``DELETE /sim/push`` releases it.
A driver without a simulated world answers 409.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

router = APIRouter(tags=["simulation"])

Float = Annotated[float, Field(allow_inf_nan=False)]


class Push(BaseModel):
    model_config = ConfigDict(extra="forbid")
    wrench: list[Float] = Field(min_length=6, max_length=6, description="[F; τ] base frame, at the tip origin")



def sim_call(driver: Any, op: str, *args: Any) -> Any:
    """Runs in the loop process (server/worker.py handler "sim")."""
    if not hasattr(driver, "set_push") or not hasattr(driver, "environment"):
        return {"error": f"the {type(driver).__name__} driver has no simulated environment"}
    if op == "environment":
        return driver.environment()
    if op == "push":
        driver.set_push(args[0])
        return driver.environment()
    raise ValueError(f"unknown simulation operation {op!r}")


def _call(request: Request, op: str, *args: Any) -> dict[str, Any]:
    from ..worker import WorkerError

    try:
        out = request.app.state.worker.call("sim", op, *args)
    except WorkerError as exc:
        if exc.kind == "invalid":
            raise HTTPException(422, str(exc.detail)) from exc
        raise
    if isinstance(out, dict) and "error" in out:
        raise HTTPException(409, out["error"])
    return out


@router.get("/environment")
def environment(request: Request) -> dict[str, Any]:
    return _call(request, "environment")


@router.put("/sim/push")
def set_push(body: Push, request: Request) -> dict[str, Any]:
    return _call(request, "push", body.wrench)


@router.delete("/sim/push")
def release_push(request: Request) -> dict[str, Any]:
    return _call(request, "push", [0.0] * 6)
