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
from starlette.routing import Mount as StaticFilesMount

from fdcontrol import ForwardDynamics, ModelError, RobotModel, VirtualModel, analyze, make_mapping
from fdcontrol import state as state_encoding
from fdcontrol.loop import InputError, LoopState
from fdcontrol.robot import SHIPPED

from . import schemas
from .auth import MIDDLEWARE_ERRORS, UNSAFE, Access, AccessMiddleware, json_depth_ok, login_router
from .routers import options as options_router
from .routers import sim
from .routers import twist as twist_router
from .settings import STARTUP_ONLY, TIGHTEN_ONLY, ControlParams, Settings
from .supervisor import Supervisor
from .worker import LoopWorker, WorkerError

STATIC = Path(__file__).resolve().parent / "static"  # the dashboard, shipped as plain files
ANALYSIS_LOCK = threading.Lock()
MSGPACK = "msgpack"  # WebSocket subprotocol that switches the stream to binary MessagePack

MAX_DETAIL = 300  # characters of an error message: replies never echo megabytes back
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": schemas.Error, "description": "malformed or too deeply nested JSON"},
    401: {"model": schemas.Error, "description": "token required"},
    403: {"model": schemas.Error, "description": "foreign Origin"},
    413: {"model": schemas.Error, "description": "body too large"},
    415: {"model": schemas.Error, "description": "a form or text body on a state change"},
    421: {"model": schemas.Error, "description": "unknown Host"},
    422: {"model": schemas.ValidationErrorOut, "description": "invalid input"},
    503: {"model": schemas.Error, "description": "the loop process is dead, stuck or restarting"},
}
CONFLICT: dict[int | str, dict[str, Any]] = {409: {"model": schemas.Error, "description": "needs the loop stopped"}}

ConfigPatch = create_model(  # the run-time ControlParams fields, optional and strict, for PATCH /config
    "ConfigPatch", __config__=ConfigDict(extra="forbid", strict=True),
    **{k: (Optional[f.annotation], None) for k, f in ControlParams.model_fields.items()  # noqa: UP045
       if k not in STARTUP_ONLY},
)


def clip(text: str) -> str:
    return text if len(text) <= MAX_DETAIL else text[:MAX_DETAIL] + "…"


def state_dict(s: LoopState) -> dict[str, Any]:
    """The state's wire encoding, derived from its declaration (fdcontrol.state); callers add ``stale``."""
    return state_encoding.to_dict(s)


class Hub:
    """WebSocket bookkeeping: client count, drops, and one encoding of each state per cycle."""

    def __init__(self) -> None:
        self.clients = 0
        self.dropped = 0
        self._cache: dict[str, tuple[int, str | bytes]] = {}

    def encode(self, s: LoopState, encoding: str, robot: RobotModel | None = None,
               stale: bool = False) -> str | bytes:
        key = encoding + ("+frames" if robot is not None else "") + ("+stale" if stale else "")
        hit = self._cache.get(key)
        if hit is not None and hit[0] == s.cycle:
            return hit[1]
        d = state_dict(s)
        d["stale"] = stale
        if robot is not None and robot.dof == len(s.q):
            d["frames"] = robot.joint_origins(s.q).tolist()
        msg: str | bytes = msgpack.packb(d) if encoding == MSGPACK else json.dumps(d)
        self._cache[key] = (s.cycle, msg)
        return msg


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": clip(detail)})


def _detail(detail: Any) -> str:
    if isinstance(detail, list):
        return "; ".join(f"{'.'.join(map(str, e.get('loc', ()))) or 'body'}: {e.get('msg', '')}"
                         for e in detail if isinstance(e, dict))
    return str(detail)


@lru_cache(maxsize=8)
def _robot(name: str, base: str | None, tip: str | None) -> RobotModel:
    return RobotModel.resolve(name, base, tip)


def _shipped(name: str) -> RobotModel:
    return _robot(name, None, None)


def create_app(settings: Settings | None = None, worker: LoopWorker | None = None) -> FastAPI:
    """The service; `worker` (already started, see server/main.py) or one started at lifespan."""
    settings = settings or Settings()
    given = worker  # the name `worker` is the accessor below
    hub = Hub()
    rt: dict[str, LoopWorker] = {}
    startup = ControlParams.model_validate(settings.model_dump(include=set(ControlParams.model_fields)))

    def install(w: LoopWorker) -> None:
        rt["w"] = w
        app.state.worker = w  # routers in server/routers/ read app.state.worker per request

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sys.setswitchinterval(settings.switch_interval)  # bound how long Python code holds the GIL
        install(given or LoopWorker(settings))
        app.state.settings = settings
        app.state.hub = hub  # WebSocket numbers for /metrics
        if settings.record:  # fdcontrol serve --record FILE
            rt["w"].record_start(settings.record_path())
        autostart = settings.autostart
        if autostart is None:  # simulated arms start at once; a real arm waits for POST /control/start
            from fdcontrol.drivers.registry import DRIVERS

            autostart = settings.driver in DRIVERS and getattr(DRIVERS.get(settings.driver), "simulated", False)
        if autostart:
            rt["w"].call("start")
        sup = Supervisor(settings, lambda: rt["w"], install) if settings.supervise else None
        if sup is not None:
            sup.start()
        app.state.supervisor = sup
        yield
        if sup is not None:
            sup.stop()
        rt["w"].close()

    app = FastAPI(title="fdcontrol", version="0.1.0", lifespan=lifespan,
                  description="Cartesian admittance control with virtual forward dynamics. "
                              "WebSockets: /ws/control (wrench in, references out) and /ws/state "
                              "(read-only); subprotocol 'msgpack' for binary MessagePack frames.")

    def worker() -> LoopWorker:
        return rt["w"]

    def live() -> LoopWorker:
        """The worker, after checking it can take commands (else 503, never a false ack)."""
        w = rt["w"]
        w.check()
        return w

    def current_robot() -> RobotModel:
        p = worker().params
        return _robot(p["robot"], p["base"], p["tip"])

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        # loc + msg only: echoing the input would put NaN into JSON (a 500)
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": [x if isinstance(x, int) else clip(str(x))[:80] for x in list(e.get("loc", ()))[:10]],
             "msg": clip(str(e.get("msg", "")))} for e in exc.errors()[:20]]})

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        # one body shape for every error status: {"detail": "text"} (422 validation: a list)
        return JSONResponse(status_code=exc.status_code, content={"detail": clip(_detail(exc.detail))},
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(ModelError)
    async def _model_error(_: Request, exc: ModelError) -> JSONResponse:
        return _error(422, str(exc))

    @app.exception_handler(InputError)
    async def _input_error(_: Request, exc: InputError) -> JSONResponse:
        return _error(422, str(exc))

    @app.exception_handler(WorkerError)
    async def _worker_error(_: Request, exc: WorkerError) -> JSONResponse:
        status = {"conflict": 409, "invalid": 422}.get(exc.kind, 503)
        detail = exc.detail
        if status == 422 and isinstance(detail, list):
            return JSONResponse(status_code=422, content={"detail": detail[:20]})
        return _error(status, _detail(detail))

    # ------------------------------------------------------------------ status
    @app.get("/health", response_model=schemas.Health, responses={503: {"model": schemas.Health}})
    def health() -> Any:
        """200 when the loop process is alive and cycling; 503 with the reason when dead, stuck or faulted."""
        w = worker()
        problem = w.problem()
        try:
            s, last = w.state()
        except WorkerError:
            s, last = None, 0.0
        age = time.monotonic() - last if last else None
        fault = problem or (s.fault if s is not None else None)
        sup = getattr(app.state, "supervisor", None)
        body = {"status": "fault" if fault else "ok", "loop_running": bool(s and s.running and not problem),
                "last_cycle_age_s": age, "cycles": s.cycle if s else 0, "fault": fault,
                "restarts": sup.restarts if sup else 0}
        return JSONResponse(status_code=503, content=body) if problem else body

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

    @app.get("/state", response_model=schemas.State, responses={503: {"model": schemas.Error}})
    def state() -> dict[str, Any]:
        """The newest published state; ``stale`` is true when the loop process is dead or stuck."""
        w = worker()
        return {**state_dict(w.state()[0]), "stale": w.problem() is not None}

    @app.get("/stats", response_model=schemas.Stats)
    def stats() -> dict[str, Any]:
        return {"rate": worker().params["rate"], **worker().call("stats"), "ws_clients": hub.clients,
                "ws_dropped": hub.dropped}

    # ------------------------------------------------------------------ config
    @app.get("/config", response_model=ControlParams)
    def get_config() -> dict[str, Any]:
        return worker().params

    @app.patch("/config", response_model=ControlParams, responses={**ERRORS, **CONFLICT})
    def patch_config(patch: ConfigPatch) -> Any:  # type: ignore[valid-type]
        """Run-time settings. Driver, driver options and base/tip frames are startup-only; the robot
        may switch among the shipped ones; safety bounds may be tightened, loosened only up to startup."""
        changes = patch.model_dump(exclude_unset=True)  # type: ignore[attr-defined]
        errors = _patch_errors(changes, startup)
        if errors:
            return JSONResponse(status_code=422, content={"detail": errors})
        try:  # validate here for field-named 422s; the loop process validates again
            ControlParams.model_validate({**worker().params, **changes})
        except ValidationError as exc:
            return JSONResponse(status_code=422, content={"detail": [
                {"loc": ["body", *map(str, e["loc"])], "msg": clip(e["msg"])} for e in exc.errors()[:20]]})
        return live().update(changes)

    # ------------------------------------------------------------------ analysis
    @app.post("/analysis/singular-values", response_model=schemas.AnalysisResponse, responses=ERRORS)
    def singular_values(req: schemas.AnalysisRequest) -> dict[str, Any]:
        if req.robot is None or req.robot == worker().params["robot"]:
            robot = current_robot()
        elif req.robot in SHIPPED:
            robot = _shipped(req.robot)
        else:  # never a server path: nothing file-system shaped from the network
            raise HTTPException(422, f"robot must be the loaded one or shipped: {', '.join(SHIPPED)}")
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
    def ack(detail: str | None = None, done: Any = None) -> dict[str, Any]:
        """The state after the command: wait (bounded) until the loop has published it."""
        w = worker()
        s = w.wait_state(done) if done is not None else w.state()[0]
        return {"ok": True, "running": s.running, "holding": s.holding, "detail": detail}

    @app.post("/control/start", response_model=schemas.Ack, responses=ERRORS)
    def start() -> dict[str, Any]:
        live().call("start")
        return ack(done=lambda s: s.running)

    @app.post("/control/stop", response_model=schemas.Ack, responses=ERRORS)
    def stop() -> dict[str, Any]:
        """Brake to standstill within the acceleration limit, then stop the loop."""
        worker().call("stop")  # allowed on a stuck loop too: stopping is always safe to ask
        return ack(done=lambda s: not s.running)

    @app.post("/control/hold", response_model=schemas.Ack, responses=ERRORS)
    def hold(body: schemas.HoldIn = Body(default_factory=schemas.HoldIn)) -> dict[str, Any]:  # noqa: B008
        live().call("hold", body.hold)
        return ack("holding" if body.hold else "released", done=lambda s: not s.running or s.holding == body.hold)

    @app.post("/control/zero-sensor", response_model=schemas.Ack, responses={**ERRORS, **CONFLICT})
    def zero_sensor() -> dict[str, Any]:
        if not live().call("has_sensor"):
            raise HTTPException(409, "the driver has no force-torque sensor")
        worker().call("zero_sensor")
        return ack("bias zeroed on the next cycle")

    @app.put("/control/target", response_model=schemas.Ack, responses=ERRORS)
    def put_target(target: schemas.Target) -> dict[str, Any]:
        live().call("target", _pose(target, worker().state()[0].tip_pose))
        return ack()

    @app.put("/control/wrench", response_model=schemas.Ack, responses=ERRORS)
    def put_wrench(w: schemas.WrenchIn) -> dict[str, Any]:
        worker().set_wrench(w.wrench, w.frame, w.seq)  # checks the loop is alive first
        return ack()

    # ------------------------------------------------------------------ websockets
    async def stream(ws: WebSocket, encoding: str, decimation: int, frames: bool = False) -> None:
        """Send the state when the loop publishes it, every `decimation` cycles (LoopWorker.states).

        Clients with the same decimation are woken by the same publish, so they send the same
        state, encoded once (Hub cache); a slow client skips states (counted as drops) and
        never delays the others or the loop. ``frames``: add the joint origins ("frames",
        (N+1)×3, base frame) for drawing the arm.
        """
        p = worker().params  # its own model: pinocchio's Data must not be shared across threads
        robot = RobotModel.resolve(p["robot"], p["base"], p["tip"]) if frames else None
        every = decimation / p["rate"]  # s between the states this client takes
        loop = asyncio.get_running_loop()
        last, missed = -1, 0  # missed: states counted as dropped while a send was still in flight

        def stalled() -> None:  # the send takes longer than the next state: that state is dropped
            nonlocal missed, timer
            hub.dropped += 1
            missed += 1
            timer = loop.call_later(every, stalled)

        timer: asyncio.TimerHandle | None = None
        while True:
            w = worker()
            try:
                async with contextlib.aclosing(w.states(decimation)) as states:
                    async for s, fresh in states:
                        if last >= 0 and s.cycle - last > decimation:
                            hub.dropped += max(0, (s.cycle - last) // decimation - 1 - missed)
                        stale = not fresh and w.problem() is not None  # no new state for a while: dead?
                        last, missed = s.cycle, 0
                        msg = hub.encode(s, encoding, robot, stale=stale)
                        timer = loop.call_later(1.5 * every, stalled)
                        try:
                            if isinstance(msg, bytes):
                                await ws.send_bytes(msg)
                            else:
                                await ws.send_text(msg)
                        finally:
                            timer.cancel()
                        if worker() is not w:  # the supervisor replaced the loop process
                            break
            except WorkerError:  # the loop process died mid-write: the supervisor replaces it
                await asyncio.sleep(0.1)

    async def accept(ws: WebSocket) -> str:
        enc = MSGPACK if MSGPACK in ws.scope.get("subprotocols", []) else "json"
        await ws.accept(subprotocol=MSGPACK if enc == MSGPACK else None)
        return enc

    async def send_error(ws: WebSocket, encoding: str, detail: str) -> None:
        msg = {"error": clip(detail)}
        if encoding == MSGPACK:
            await ws.send_bytes(msgpack.packb(msg))
        else:
            await ws.send_text(json.dumps(msg))

    def decode(raw: dict[str, Any], encoding: str) -> Any:
        data = raw.get("bytes") if raw.get("bytes") is not None else (raw.get("text") or "")
        if len(data) > settings.max_ws_message_bytes:
            raise InputError(f"message of {len(data)} bytes exceeds max_ws_message_bytes = "
                             f"{settings.max_ws_message_bytes}")
        if isinstance(data, bytes):
            msg = msgpack.unpackb(data)
            if not _depth_ok(msg, settings.max_json_depth):
                raise InputError(f"message nested deeper than max_json_depth = {settings.max_json_depth}")
            return msg
        if not json_depth_ok(data, settings.max_json_depth):
            raise InputError(f"message nested deeper than max_json_depth = {settings.max_json_depth}")
        return json.loads(data)

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
                        await asyncio.to_thread(_apply_message, live(), msg)
                    else:  # a wrench: one shared-memory write
                        _apply_message(worker(), msg)
                except (ValueError, InputError, ModelError, ValidationError, TypeError, WorkerError,
                        RecursionError, msgpack.UnpackException) as exc:
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

    app.include_router(options_router.router)
    app.include_router(sim.router)
    app.include_router(twist_router.router)
    from .routers import metrics as metrics_router
    from .routers import recording as recording_router

    app.include_router(recording_router.router)
    app.include_router(metrics_router.router)
    _true_validation_schema(app)
    access = Access(settings)
    app.include_router(login_router(access))
    app.mount("/", StaticFiles(directory=STATIC, html=True), name="dashboard")
    access.allowed = lambda path: _allowed_methods(app, path)
    app.add_middleware(AccessMiddleware, access=access)  # outermost: covers every route and router

    return app


def _true_validation_schema(app: FastAPI) -> None:
    """FastAPI's default 422 schema names fields our handler does not send (type, input, ctx):
    document the body actually sent, {"detail": [{"loc": [...], "msg": "..."}]}."""
    base = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = base()
            comp = spec.get("components", {}).get("schemas", {})
            if "ValidationError" in comp:
                comp["ValidationError"] = {"title": "ValidationError", "type": "object", "required": ["loc", "msg"],
                                           "properties": {"loc": {"type": "array", "items": {
                                               "anyOf": [{"type": "string"}, {"type": "integer"}]}},
                                               "msg": {"type": "string"}}}
            comp.setdefault("Error", schemas.Error.model_json_schema())
            for ops in spec.get("paths", {}).values():  # every route, routers added later too
                for method, op in ops.items():
                    for status, text in MIDDLEWARE_ERRORS.items():
                        if method.upper() in UNSAFE or status in (401, 421):
                            op.setdefault("responses", {}).setdefault(str(status), {
                                "description": text, "content": {"application/json": {
                                    "schema": {"$ref": "#/components/schemas/Error"}}}})
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _allowed_methods(app: FastAPI, path: str) -> list[str]:
    """Methods of the routes matching `path` (for the Allow header of a 405)."""
    from starlette.routing import Match

    methods: set[str] = set()
    scope = {"type": "http", "path": path, "root_path": "", "method": "GET", "headers": []}
    for r in app.routes:
        if isinstance(r, StaticFilesMount):
            continue
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"):
            with contextlib.suppress(Exception):
                if r.matches({**scope, "method": method})[0] == Match.FULL:
                    methods.add(method)
    return sorted(methods)


def _patch_errors(changes: dict[str, Any], startup: ControlParams) -> list[dict[str, Any]]:
    """Selection among what was configured, and safety bounds no looser than at startup."""
    errors = []
    robot = changes.get("robot")
    if robot is not None and robot != startup.robot and robot not in SHIPPED:
        errors.append({"loc": ["body", "robot"], "msg": f"robot must be {startup.robot!r} (startup) or a "
                       f"shipped one: {', '.join(SHIPPED)}"})
    for k in sorted(TIGHTEN_ONLY & changes.keys()):
        v, bound = changes[k], getattr(startup, k)
        if v is not None and v > bound:
            errors.append({"loc": ["body", k], "msg": f"may be tightened at run time but not loosened "
                           f"beyond the startup value {bound}"})
    return errors


def _depth_ok(obj: Any, limit: int, depth: int = 0) -> bool:
    if depth > limit:
        return False
    if isinstance(obj, dict):
        return all(_depth_ok(v, limit, depth + 1) for v in obj.values())
    if isinstance(obj, list | tuple):
        return all(_depth_ok(v, limit, depth + 1) for v in obj)
    return True


def _message(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "message nested too deeply"
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
        raise InputError(clip(f"unknown keys: {', '.join(sorted(map(str, unknown)))}"))
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
