"""The FastAPI application: settings, lifespan, error handlers, routers, access middleware.

The control loop runs in its own process (handle: server/worker.py ``LoopWorker``); handlers only
swap its latest-wins inputs in shared memory or make one pipe call, and read its newest
published state, so API traffic never queues work for it. The routes live in
server/routers/, one module per concern; each reads the loop handle from
``request.app.state.worker``, which the supervisor may replace with a restarted process.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.routing import Match
from starlette.routing import Mount as StaticFilesMount

from fdcontrol.server import docs_pages
from fdcontrol.server.auth import Access, AccessMiddleware, login_router
from fdcontrol.server.errors import install_handlers, true_validation_schema
from fdcontrol.server.routers import (
    analysis,
    config,
    control,
    health,
    learning,
    metrics,
    options,
    recording,
    recovery,
    scene,
    sim,
    state,
    task,
    twist,
    ws,
)
from fdcontrol.server.routers.state import state_dict  # noqa: F401  (its historical home; tests import it from here)
from fdcontrol.server.settings import Settings
from fdcontrol.server.supervisor import Supervisor
from fdcontrol.server.worker import LoopWorker

STATIC = Path(__file__).resolve().parent / "static"  # the dashboard, shipped as plain files
ROUTERS = (health, state, config, analysis, control, ws, sim, twist, recording, metrics, options, learning,
           task, recovery, scene)


#: SCHED_FIFO priority of the API process's event loop thread: the lowest real-time priority, below the loop
#: process's heartbeat (5) and its loop thread (10), so it never delays them
API_FIFO_PRIORITY = 1


def realtime_event_loop(on: bool) -> bool:
    """SCHED_FIFO (:data:`API_FIFO_PRIORITY`) for the calling thread, the one that runs the API's event loop
    (``api_realtime``); True when granted. Only where permitted (CAP_SYS_NICE or RLIMIT_RTPRIO), as for the
    loop thread; elsewhere the thread keeps ``api_nice``. That event loop takes every wrench and sends every
    state: a woken normal thread may wait for a CPU-bound neighbour's time slice (milliseconds), a real-time
    one preempts it at once. The threads it starts later (request handlers) inherit the policy; the threads
    started before it (the supervisor, which restarts the loop process) keep the normal one. Off by default:
    the API's CPU time then counts against the kernel's real-time budget that the loop's threads share, and
    a flood of requests would run ahead of every normal process — for a machine that runs nothing else."""
    if not on:
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(API_FIFO_PRIORITY))  # type: ignore[attr-defined]
    except (AttributeError, PermissionError, OSError):  # not permitted here, or not Linux
        return False
    return True


def create_app(settings: Settings | None = None, worker: LoopWorker | None = None) -> FastAPI:
    """The service; `worker` (already started, see server/main.py) or one started at lifespan."""
    settings = settings or Settings()

    def install(w: LoopWorker) -> None:
        app.state.worker = w  # read per request: the supervisor installs a restarted loop process here

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sys.setswitchinterval(settings.switch_interval)  # bound how long Python code holds the GIL
        install(worker or LoopWorker(settings))
        if settings.record:  # fdcontrol serve --record FILE
            app.state.worker.record_start(settings.record_path())
        if _autostart(settings):
            app.state.worker.call("start")
        sup = Supervisor(settings, lambda: app.state.worker, install) if settings.supervise else None
        if sup is not None:
            sup.start()
        app.state.supervisor = sup
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError, AttributeError):
            # SIGHUP re-reads token_file (token rotation without a restart); only where this event loop
            # owns the process's signals (uvicorn's main thread), never in an in-process test client
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, access.reload_token_file)
        app.state.foxglove = None
        if settings.foxglove_port is not None:  # fdcontrol serve --foxglove PORT (server/foxglove.py)
            from fdcontrol.server.foxglove import FoxgloveLive

            app.state.foxglove = FoxgloveLive(lambda: app.state.worker, settings.foxglove_host,
                                              settings.foxglove_port, settings.foxglove_rate)
        if threading.current_thread() is threading.main_thread():  # uvicorn's own thread (fdcontrol serve), never
            # an in-process test client's; last, so the threads started above keep the normal policy
            realtime_event_loop(settings.api_realtime)
            # everything imported and built so far (~200k objects: the libraries, the app, the worker) lives as
            # long as the process: kept out of the cyclic collector's sight, as in the loop process. A full
            # collection walked them all holding the GIL — 76–124 ms measured, the event loop and every stream
            # stalled meanwhile — and now walks only what came since (a few ms at most)
            gc.freeze()
        yield
        if app.state.foxglove is not None:
            app.state.foxglove.close()
        if sup is not None:
            sup.stop()
        app.state.worker.close()

    app = FastAPI(title="fdcontrol", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Cartesian admittance control with virtual forward dynamics. "
                              "WebSockets: /ws/control (wrench in, references out) and /ws/state "
                              "(read-only); subprotocol 'msgpack' for binary MessagePack frames.")
    app.state.settings = settings
    app.state.hub = ws.Hub()  # WebSocket numbers for /stats and /metrics
    install_handlers(app)
    for r in ROUTERS:
        app.include_router(r.router)
    true_validation_schema(app)
    access = Access(settings)
    app.state.access = access  # the WebSockets register with it (logout, token rotation, the lease)
    access.lease.cycle = lambda: app.state.worker.state()[0].cycle
    access.on_take_over = lambda: _hold_for_take_over(app)
    app.include_router(login_router(access))
    app.include_router(docs_pages.router)  # /docs and /redoc from shipped files, nothing from a CDN
    app.mount("/", StaticFiles(directory=STATIC, html=True), name="dashboard")  # last: it matches every path
    access.allowed = lambda path: _allowed_methods(app, path)
    app.add_middleware(AccessMiddleware, access=access)  # outermost: covers every route and router
    return app


def _hold_for_take_over(app: FastAPI) -> None:
    """A client took the lease over from another: the arm holds, so the new controller starts from rest."""
    w = app.state.worker
    with contextlib.suppress(Exception):  # a dead loop holds anyway (the supervisor restarts it holding)
        if w.state()[0].running:
            w.call("hold", True)


def _autostart(settings: Settings) -> bool:
    """Simulated arms start at once; a real arm waits for POST /control/start (unless set)."""
    if settings.autostart is not None:
        return settings.autostart
    from fdcontrol.drivers.registry import DRIVERS

    return settings.driver in DRIVERS and DRIVERS.get(settings.driver).simulated


def _allowed_methods(app: FastAPI, path: str) -> list[str]:
    """Methods of the routes matching `path` (for the Allow header of a 405)."""
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
