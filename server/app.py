"""FastAPI app: REST to configure and analyse, WebSocket to stream wrenches in and references out.

The control loop runs on its own thread (``fdcontrol.loop``); handlers only swap its
latest-wins inputs and read its latest published state, so API traffic never queues work
for it. WebSocket senders read the newest state on their own schedule: a slow client
skips states (counted as drops) instead of building a queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import sys
import threading
import time
from collections.abc import AsyncIterator
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import msgpack
import numpy as np
from fastapi import Body, FastAPI, HTTPException, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import ConfigDict, ValidationError, create_model

from fdcontrol import ForwardDynamics, ModelError, RobotModel, VirtualModel, analyze, make_mapping
from fdcontrol.loop import InputError, LoopState
from fdcontrol.robot import SHIPPED

from . import schemas
from .routers import sim
from .routers import twist as twist_router
from .settings import ControlParams, Settings
from .worker import LoopWorker, WorkerError

STATIC = Path(__file__).resolve().parent / "static"  # the dashboard, shipped as plain files
ANALYSIS_LOCK = threading.Lock()
MSGPACK = "msgpack"  # WebSocket subprotocol that switches the stream to binary MessagePack

ConfigPatch = create_model(  # every ControlParams field, optional, for PATCH /config
    "ConfigPatch", __config__=ConfigDict(extra="forbid"),
    **{k: (Optional[f.annotation], None) for k, f in ControlParams.model_fields.items()},  # noqa: UP045
)


def state_dict(s: LoopState) -> dict[str, Any]:
    return {
        "t": s.t, "cycle": s.cycle, "seq_ack": s.seq_ack, "q": s.q.tolist(), "qd": s.qd.tolist(),
        "q_ref": s.q_ref.tolist(), "qd_ref": s.qd_ref.tolist(), "tip_pose": s.tip_pose.tolist(),
        "wrench": s.wrench.tolist(), "f_measured": s.f_measured.tolist(), "mode": s.mode,
        "running": s.running, "holding": s.holding, "watchdog": s.watchdog, "fault": s.fault,
        "sigma_min_j": s.sigma_min_j, "limits_active": s.limits_active,
        "kappa_h": s.kappa_h if math.isfinite(s.kappa_h) else None,
        "posture_distance": s.posture_distance if math.isfinite(s.posture_distance) else None,
        "link_clearance": s.link_clearance if math.isfinite(s.link_clearance) else None,
    }


class Hub:
    """WebSocket bookkeeping: client count, drops, and one encoding of each state per cycle."""

    def __init__(self) -> None:
        self.clients = 0
        self.dropped = 0
        self._cache: dict[str, tuple[int, str | bytes]] = {}

    def encode(self, s: LoopState, encoding: str, robot: RobotModel | None = None) -> str | bytes:
        key = encoding + ("+frames" if robot is not None else "")
        hit = self._cache.get(key)
        if hit is not None and hit[0] == s.cycle:
            return hit[1]
        d = state_dict(s)
        if robot is not None and robot.dof == len(s.q):
            d["frames"] = robot.joint_origins(s.q).tolist()
        msg: str | bytes = msgpack.packb(d) if encoding == MSGPACK else json.dumps(d)
        self._cache[key] = (s.cycle, msg)
        return msg


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": detail})


@lru_cache(maxsize=8)
def _robot(name: str, base: str | None, tip: str | None) -> RobotModel:
    return RobotModel.resolve(name, base, tip)


def _shipped(name: str) -> RobotModel:
    return _robot(name, None, None)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    hub = Hub()
    rt: dict[str, LoopWorker] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sys.setswitchinterval(settings.switch_interval)  # bound how long Python code holds the GIL
        worker = LoopWorker(settings)
        rt["w"] = worker
        app.state.worker, app.state.settings = worker, settings  # for routers in server/routers/
        app.state.hub = hub  # WebSocket numbers for /metrics
        if settings.record:  # fdcontrol serve --record FILE
            worker.record_start(settings.record_path())
        autostart = settings.autostart
        if autostart is None:  # simulated arms start at once; a real arm waits for POST /control/start
            from fdcontrol.drivers.registry import DRIVERS

            autostart = settings.driver in DRIVERS and getattr(DRIVERS.get(settings.driver), "simulated", False)
        if autostart:
            worker.call("start")
        yield
        worker.close()

    app = FastAPI(title="fdcontrol", version="0.1.0", lifespan=lifespan,
                  description="Cartesian admittance control with virtual forward dynamics. "
                              "WebSockets: /ws/control (wrench in, references out) and /ws/state "
                              "(read-only); subprotocol 'msgpack' for binary MessagePack frames.")

    def worker() -> LoopWorker:
        return rt["w"]

    def current_robot() -> RobotModel:
        p = worker().params
        return _robot(p["robot"], p["base"], p["tip"])

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        # loc + msg only: echoing the input would put NaN into JSON (a 500)
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]})

    @app.exception_handler(ModelError)
    async def _model_error(_: Request, exc: ModelError) -> JSONResponse:
        return _error(422, str(exc))

    @app.exception_handler(InputError)
    async def _input_error(_: Request, exc: InputError) -> JSONResponse:
        return _error(422, str(exc))

    @app.exception_handler(WorkerError)
    async def _worker_error(_: Request, exc: WorkerError) -> JSONResponse:
        status = {"conflict": 409, "invalid": 422}.get(exc.kind, 503)
        return JSONResponse(status_code=status, content={"detail": exc.detail})

    # ------------------------------------------------------------------ status
    @app.get("/health", response_model=schemas.Health)
    def health() -> dict[str, Any]:
        w = worker()
        s, last = w.state()
        age = time.monotonic() - last if last else None
        fault = s.fault if w.alive else "the loop process has exited"
        return {"status": "fault" if fault else "ok", "loop_running": s.running and w.alive,
                "last_cycle_age_s": age, "cycles": s.cycle, "fault": fault}

    @app.get("/robots", response_model=list[schemas.RobotInfo])
    def robots() -> list[dict[str, Any]]:
        out = []
        for name in SHIPPED:
            r = _shipped(name)
            lim = r.limits
            out.append({"name": name, "dof": r.dof, "base": r.base, "tip": r.tip,
                        "joints": [{"name": n, "lower": lo, "upper": up, "max_velocity": v}
                                   for n, lo, up, v in zip(r.joint_names, lim.lower, lim.upper,
                                                           lim.velocity, strict=True)]})
        return out

    @app.get("/state", response_model=schemas.State)
    def state() -> dict[str, Any]:
        return state_dict(worker().state()[0])

    @app.get("/stats", response_model=schemas.Stats)
    def stats() -> dict[str, Any]:
        return {"rate": worker().params["rate"], **worker().call("stats"), "ws_clients": hub.clients,
                "ws_dropped": hub.dropped}

    # ------------------------------------------------------------------ config
    @app.get("/config", response_model=ControlParams)
    def get_config() -> dict[str, Any]:
        return worker().params

    @app.patch("/config", response_model=ControlParams,
               responses={409: {"model": schemas.Error}, 422: {"model": schemas.Error}})
    def patch_config(patch: ConfigPatch) -> Any:  # type: ignore[valid-type]
        changes = patch.model_dump(exclude_unset=True)  # type: ignore[attr-defined]
        try:  # validate here for field-named 422s; the loop process validates again
            ControlParams.model_validate({**worker().params, **changes})
        except ValidationError as exc:
            raise HTTPException(422, [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]) from exc
        return worker().update(changes)

    # ------------------------------------------------------------------ analysis
    @app.post("/analysis/singular-values", response_model=schemas.AnalysisResponse,
              responses={422: {"model": schemas.Error}, 413: {"model": schemas.Error}})
    def singular_values(req: schemas.AnalysisRequest) -> dict[str, Any]:
        robot = current_robot() if req.robot is None else _robot(req.robot, None, None)
        qs = req.q if req.q and isinstance(req.q[0], list) else [req.q]
        if len(qs) > settings.max_batch:
            raise HTTPException(413, f"batch of {len(qs)} configurations exceeds max_batch = "
                                     f"{settings.max_batch}")
        with ANALYSIS_LOCK:  # the cached models' pinocchio Data are not thread-safe
            return _analysis(robot, qs, req)

    def _analysis(robot: RobotModel, qs: list, req: schemas.AnalysisRequest) -> dict[str, Any]:
        specs = [schemas.MappingSpec(name=m) if isinstance(m, str) else m for m in req.mappings]
        maps = [make_mapping(s.name, robot, gamma=s.gamma, alpha=s.alpha, gamma_max=s.gamma_max,
                             algorithm=s.algorithm) for s in specs]
        fd = [m for m in maps if isinstance(m, ForwardDynamics)]
        vm = fd[0].virtual if fd else VirtualModel(robot, 1e3)
        points = []
        for q in qs:
            qv = robot.check_q(np.asarray(q, dtype=float))
            results = []
            for m in maps:
                M = m.joint_space(qv) if req.type == "joint" else m.cartesian(qv)
                a = analyze(M).as_dict()
                results.append({"mapping": m.name, "params": m.params(), **_json_safe(a)})
            sj = np.linalg.svd(robot.jacobian(qv), compute_uv=False)
            kh = analyze(vm.inertia(qv)).condition
            points.append({"q": qv.tolist(), "manipulability_j": float(np.prod(sj)),
                           "sigma_min_j": float(sj[-1]), "kappa_h": kh if math.isfinite(kh) else None,
                           "results": results})
        return {"robot": robot.name, "type": req.type, "points": points}

    # ------------------------------------------------------------------ control
    def ack(detail: str | None = None) -> dict[str, Any]:
        s, _ = worker().state()
        return {"ok": True, "running": s.running, "holding": s.holding, "detail": detail}

    @app.post("/control/start", response_model=schemas.Ack)
    def start() -> dict[str, Any]:
        worker().call("start")
        return ack()

    @app.post("/control/stop", response_model=schemas.Ack)
    def stop() -> dict[str, Any]:
        worker().call("stop")
        return ack()

    @app.post("/control/hold", response_model=schemas.Ack)
    def hold(body: schemas.HoldIn = Body(default_factory=schemas.HoldIn)) -> dict[str, Any]:  # noqa: B008
        worker().call("hold", body.hold)
        return ack("holding" if body.hold else "released")

    @app.post("/control/zero-sensor", response_model=schemas.Ack, responses={409: {"model": schemas.Error}})
    def zero_sensor() -> dict[str, Any]:
        if not worker().call("has_sensor"):
            raise HTTPException(409, "the driver has no force-torque sensor")
        worker().call("zero_sensor")
        return ack("bias zeroed on the next cycle")

    @app.put("/control/target", response_model=schemas.Ack, responses={422: {"model": schemas.Error}})
    def put_target(target: schemas.Target) -> dict[str, Any]:
        worker().call("target", _pose(target, worker().state()[0].tip_pose))
        return ack()

    @app.put("/control/wrench", response_model=schemas.Ack, responses={422: {"model": schemas.Error}})
    def put_wrench(w: schemas.WrenchIn) -> dict[str, Any]:
        worker().set_wrench(w.wrench, w.frame, w.seq)
        return ack()

    # ------------------------------------------------------------------ websockets
    async def stream(ws: WebSocket, encoding: str, decimation: int, frames: bool = False) -> None:
        """Send the newest state every `decimation` cycles on an absolute schedule.

        ``frames``: add the joint origins ("frames", (N+1)×3, base frame) for drawing the arm.
        """
        p = worker().params  # its own model: pinocchio's Data must not be shared across threads
        robot = RobotModel.resolve(p["robot"], p["base"], p["tip"]) if frames else None
        interval = decimation / worker().params["rate"]
        last, sent_at = -1, 0.0
        while True:
            s, _ = worker().state()
            if s.cycle != last or time.monotonic() - sent_at > 0.5:  # a heartbeat while stopped
                sent_at = time.monotonic()
                if last >= 0 and s.cycle - last > decimation:
                    hub.dropped += (s.cycle - last) // decimation - 1
                last = s.cycle
                msg = hub.encode(s, encoding, robot)
                if isinstance(msg, bytes):
                    await ws.send_bytes(msg)
                else:
                    await ws.send_text(msg)
            # wake on a grid shared by every client with this decimation, so they all read the
            # same state and it is encoded once (Hub cache); a slow client skips grid points
            now = time.monotonic()
            next_t = (math.floor(now / interval) + 1) * interval
            await asyncio.sleep(next_t - now)

    async def accept(ws: WebSocket) -> str:
        enc = MSGPACK if MSGPACK in ws.scope.get("subprotocols", []) else "json"
        await ws.accept(subprotocol=MSGPACK if enc == MSGPACK else None)
        return enc

    async def send_error(ws: WebSocket, encoding: str, detail: str) -> None:
        msg = {"error": detail}
        if encoding == MSGPACK:
            await ws.send_bytes(msgpack.packb(msg))
        else:
            await ws.send_text(json.dumps(msg))

    def decode(raw: dict[str, Any], encoding: str) -> Any:
        if raw.get("bytes") is not None:
            return msgpack.unpackb(raw["bytes"])
        return json.loads(raw.get("text") or "")

    async def serve_socket(ws: WebSocket, decimation: int | None, control: bool, frames: bool = False) -> None:
        encoding = await accept(ws)
        hub.clients += 1
        dec = decimation or settings.state_decimation
        sender = asyncio.create_task(stream(ws, encoding, dec, frames))
        try:
            while True:
                raw = await ws.receive()
                if raw["type"] == "websocket.disconnect":
                    break
                try:
                    msg = decode(raw, encoding)
                    if not control:
                        raise InputError("/ws/state is read-only; stream wrenches on /ws/control")
                    if isinstance(msg, dict) and "target" in msg:  # a pipe round-trip: off the event loop
                        await asyncio.to_thread(_apply_message, worker(), msg)
                    else:  # a wrench: one shared-memory write
                        _apply_message(worker(), msg)
                except (ValueError, InputError, ModelError, ValidationError, TypeError, WorkerError,
                        msgpack.UnpackException) as exc:
                    await send_error(ws, encoding, _message(exc))
        except WebSocketDisconnect:
            pass
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            hub.clients -= 1

    @app.websocket("/ws/control")
    async def ws_control(ws: WebSocket, decimation: int | None = Query(None, ge=1, le=10000)) -> None:
        await serve_socket(ws, decimation, control=True)

    @app.websocket("/ws/state")
    async def ws_state(ws: WebSocket, decimation: int | None = Query(None, ge=1, le=10000),
                       frames: bool = False) -> None:
        await serve_socket(ws, decimation, control=False, frames=frames)

    app.include_router(sim.router)
    app.include_router(twist_router.router)
    from .routers import metrics as metrics_router
    from .routers import recording as recording_router

    app.include_router(recording_router.router)
    app.include_router(metrics_router.router)
    app.mount("/", StaticFiles(directory=STATIC, html=True), name="dashboard")

    return app


def _message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'message'}: {e['msg']}" for e in exc.errors())
    if isinstance(exc, json.JSONDecodeError):
        return f"malformed JSON: {exc.msg}"
    return str(exc)


def _apply_message(worker: LoopWorker, msg: Any) -> None:
    """{"wrench": [...] | "twist": [...], "frame": "base"|"tool", "seq": n, "target": {...}} — all optional."""
    if not isinstance(msg, dict):
        raise InputError("a message must be a JSON object")
    unknown = set(msg) - {"wrench", "twist", "frame", "seq", "target"}
    if unknown:
        raise InputError(f"unknown keys: {', '.join(sorted(unknown))}")
    if "target" in msg:
        try:
            target = schemas.Target.model_validate(msg["target"])
        except ValidationError as exc:
            raise InputError(f"target.{_message(exc)}") from exc
        worker.call("target", _pose(target, worker.state()[0].tip_pose))
    if "wrench" in msg:
        w = schemas.WrenchIn.model_validate({k: msg[k] for k in ("wrench", "frame", "seq") if k in msg})
        worker.set_wrench(w.wrench, w.frame, w.seq)
    if "twist" in msg:
        v = twist_router.TwistIn.model_validate({k: msg[k] for k in ("twist", "frame", "seq") if k in msg})
        worker.set_twist(v.twist, v.frame, v.seq)


def _pose(target: schemas.Target, current: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, 3] = target.position
    if target.orientation is None:
        T[:3, :3] = current[:3, :3]
    else:
        x, y, z, w = target.orientation
        n = math.sqrt(x * x + y * y + z * z + w * w)
        if abs(n - 1.0) > 1e-3:
            raise InputError(f"orientation must be a unit quaternion [x, y, z, w], norm is {n:.4g}")
        import pinocchio as pin

        T[:3, :3] = pin.Quaternion(w / n, x / n, y / n, z / n).toRotationMatrix()
    return T


def _json_safe(a: dict[str, Any]) -> dict[str, Any]:
    """inf/NaN are not JSON: σ that overflowed becomes None (κ is already None when singular)."""
    def fix(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v
    a = {k: fix(v) for k, v in a.items()}
    a["singular_values"] = [x if math.isfinite(x) else None for x in a["singular_values"]]
    return a
