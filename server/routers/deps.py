"""What the routers share: the loop handle from ``request.app.state`` and the robot models.

``app.state.worker`` is the current ``LoopWorker`` (the supervisor may replace it, so it is
read per request, never captured), ``app.state.settings`` the startup ``Settings``,
``app.state.hub`` the WebSocket bookkeeping (server/routers/ws.py).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from fastapi import Request

from fdcontrol import RobotModel
from fdcontrol.loop import LoopState
from fdcontrol.server.worker import LoopWorker


def worker(request: Request) -> LoopWorker:
    return request.app.state.worker


def phase(request: Request) -> str:
    """The loop's phase as the run-time policies see it (fdcontrol.params): ``stopped``, ``holding`` (at
    standstill: every reference velocity zero) or ``moving``; the loop process checks again itself."""
    s, _ = worker(request).state()
    if not s.running:
        return "stopped"
    return "holding" if s.holding and not any(s.qd_ref) else "moving"


def live(request: Request) -> LoopWorker:
    """The worker, after checking it can take commands (else 503, never a false ack)."""
    w = worker(request)
    w.check()
    return w


def ack(request: Request, detail: str | None = None, done: Callable[[LoopState], bool] | None = None) -> dict[str, Any]:
    """The state after the command: wait (bounded) until the loop has published it."""
    w = worker(request)
    s = w.wait_state(done) if done is not None else w.state()[0]
    return {"ok": True, "running": s.running, "holding": s.holding, "detail": detail}


@lru_cache(maxsize=8)
def robot_model(name: str, base: str | None, tip: str | None) -> RobotModel:
    """Cached models for the API thread(s); pinocchio Data is not thread-safe, so callers that
    compute with them hold a lock (see server/routers/analysis.py)."""
    return RobotModel.resolve(name, base, tip)


def shipped(name: str) -> RobotModel:
    return robot_model(name, None, None)


def current_robot(request: Request) -> RobotModel:
    p = worker(request).params
    return robot_model(p["robot"], p["base"], p["tip"])
