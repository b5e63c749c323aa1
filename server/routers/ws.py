"""WebSockets: /ws/control (wrenches, twists and targets in, states out) and /ws/state (states out).

Each socket has a receiver (this handler) and a sender task (``stream``). Wrench and twist
messages are one latest-wins shared-memory write (server/channel.py), so they never queue
work for the loop process; targets take a pipe round-trip and run off the event loop.
Subprotocol ``msgpack`` switches both directions to binary MessagePack. Messages larger than
``max_ws_message_bytes`` or nested deeper than ``max_json_depth`` get an error reply and the
socket stays open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from fdcontrol import ModelError, RobotModel
from fdcontrol.loop import InputError, LoopState
from fdcontrol.params import error_message
from fdcontrol.server import schemas
from fdcontrol.server.auth import json_depth_ok
from fdcontrol.server.errors import clip
from fdcontrol.server.feed import Snapshot
from fdcontrol.server.lease import LeaseError
from fdcontrol.server.routers.control import pose
from fdcontrol.server.routers.state import state_dict
from fdcontrol.server.routers.twist import TwistIn
from fdcontrol.server.worker import LoopWorker, WorkerError

try:  # the server extra brings orjson; an environment installed before it joined falls back to json
    import orjson

    def dumps(d: Any) -> str:
        """JSON text of a state: orjson, ~10× json.dumps (a non-finite number is null: JSON has none)."""
        return orjson.dumps(d).decode()

    def loads(text: str) -> Any:
        """A received JSON message: json.loads's object. orjson reads it where it gives the same object — any text
        it accepts without a run of 19 digits (orjson reads an integer beyond 64 bits as a float; json as an int) —
        at a fraction of the cost (one C call: each streamed wrench is read on a wake-up of its own, its code
        mostly out of cache); json.loads reads the rest and what orjson refuses (NaN, lone surrogates, malformed
        text), so those read and fail exactly as before, with json's messages."""
        if _DIGITS_19.search(text) is None:
            try:
                return orjson.loads(text)
            except orjson.JSONDecodeError:
                pass
        return json.loads(text)
except ImportError:  # pragma: no cover - depends on the install
    def dumps(d: Any) -> str:
        return json.dumps(d)

    loads = json.loads

router = APIRouter(tags=["streaming"])
_DIGITS_19 = re.compile(r"[0-9]{19}")  # (not \d: that matches other scripts' digits, which JSON has none of)
MSGPACK = "msgpack"  # WebSocket subprotocol that switches the stream to binary MessagePack
#: s between a stream's looks at a send in flight: the drops of a send that blocks (a client that stopped
#: reading) are counted meanwhile, at most this much late (exactly when the send ends)
STALL_CHECK = 0.05


class Hub:
    """WebSocket bookkeeping: client count, drops, and one encoding of each state per cycle."""

    def __init__(self) -> None:
        self.clients = 0
        self.dropped = 0
        self.streams = 0  # streams started: the next one's phase within its decimation block
        self._cache: dict[str, tuple[int, str | bytes]] = {}
        # per event loop: the streams' stall checks and the one timer that runs them every STALL_CHECK s
        self._stall_checks: dict[asyncio.AbstractEventLoop, set[Callable[[], None]]] = {}
        self._stall_timers: dict[asyncio.AbstractEventLoop, asyncio.TimerHandle] = {}

    def watch_stalls(self, check: Callable[[], None]) -> Callable[[], None]:
        """Call ``check`` every STALL_CHECK s, from the running event loop, until the returned function is
        called: one timer for all the streams of an event loop (50 watchers: 20 wake-ups per second, not 1000)."""
        loop = asyncio.get_running_loop()
        self._stall_checks.setdefault(loop, set()).add(check)
        if loop not in self._stall_timers:
            self._stall_timers[loop] = loop.call_later(STALL_CHECK, self._check_stalls, loop)

        def unwatch() -> None:
            checks = self._stall_checks.get(loop)
            if checks is not None:
                checks.discard(check)
                if not checks:  # the last stream of this event loop has left: no timer until the next one
                    del self._stall_checks[loop]
                    self._stall_timers.pop(loop).cancel()

        return unwatch

    def _check_stalls(self, loop: asyncio.AbstractEventLoop) -> None:
        for check in list(self._stall_checks.get(loop, ())):
            check()
        self._stall_timers[loop] = loop.call_later(STALL_CHECK, self._check_stalls, loop)

    def encode(self, s: LoopState | Snapshot, encoding: str, robot: RobotModel | None = None,
               stale: bool = False, lease: Callable[[], dict[str, Any]] | None = None) -> str | bytes:
        """The state's message (``s`` a LoopState, or a Snapshot as the feed delivers it: its wire dict read
        straight from the shared-memory slots, the same message)."""
        key = encoding + ("+frames" if robot is not None else "") + ("+stale" if stale else "")
        hit = self._cache.get(key)
        if hit is not None and hit[0] == s.cycle:
            return hit[1]
        d = s.wire() if isinstance(s, Snapshot) else state_dict(s)
        d["stale"] = stale
        if lease is not None:
            d["lease"] = lease()  # who controls (server/lease.py), for the dashboard
        if robot is not None and robot.dof == len(d["q"]):
            d["frames"] = robot.joint_origins(np.asarray(d["q"], dtype=float)).tolist()
        msg: str | bytes = msgpack.packb(d) if encoding == MSGPACK else dumps(d)
        self._cache[key] = (s.cycle, msg)
        return msg


def handles(ws: WebSocket) -> tuple[Callable[[], LoopWorker], Hub]:
    """The current worker (read per use: the supervisor may replace it) and the app's Hub."""
    st = ws.app.state
    return (lambda: st.worker), st.hub


async def stream(ws: WebSocket, encoding: str, decimation: int, frames: bool = False, control: bool = True) -> None:
    """Send the state when the loop publishes it, every `decimation` cycles (LoopWorker.snapshots).

    Streams of one decimation take turns over the cycles of a block (phase: start order modulo
    the decimation), so 50 watchers at decimation 10 send 5 states per cycle, not 50 every
    tenth cycle in a burst that delays the control streams; each cycle's state is encoded once
    (Hub cache) for every stream sending it. A slow client skips states (counted as drops) and
    never delays the others or the loop. ``frames``: add the joint origins ("frames",
    (N+1)×3, base frame) for drawing the arm. A read-only stream (``control`` False) gets each state
    half a period after the control streams (LoopWorker.snapshots ``later``): their states leave first.
    """
    worker, hub = handles(ws)
    lease = ws.app.state.access.lease
    hub.streams += 1
    phase = hub.streams % decimation
    p = worker().params  # its own model: pinocchio's Data must not be shared across threads
    robot = RobotModel.resolve(p["robot"], p["base"], p["tip"]) if frames else None
    every = decimation / p["rate"]  # s between the states this client takes
    loop = asyncio.get_running_loop()
    last, missed = -1, 0  # missed: states counted as dropped while a send was still in flight
    reactions = -1  # the reaction count this client has seen (-1: none yet; the first state sets it)
    since: float | None = None  # loop.time() when the send in flight began (None: none in flight)

    def stalls() -> None:
        """A send in flight for t ≥ 1.5 `every` drops a state, then one more every `every` (the states it
        outlasts): counted up to now."""
        nonlocal missed
        if since is not None:
            n = max(0, math.floor((loop.time() - since - 1.5 * every) / every) + 1)
            if n > missed:
                hub.dropped += n - missed
                missed = n

    # a send that blocks (the client stopped reading) counts its drops meanwhile: the hub's one timer
    unwatch = hub.watch_stalls(stalls)
    try:
        while True:
            w = worker()
            try:
                async with contextlib.aclosing(w.snapshots(decimation, phase=phase, later=not control)) as states:
                    async for s, fresh in states:
                        if last >= 0 and s.cycle - last > decimation:
                            hub.dropped += max(0, (s.cycle - last) // decimation - 1 - missed)
                        stale = not fresh and w.problem() is not None  # no new state for a while: dead?
                        last, missed = s.cycle, 0
                        msg = hub.encode(s, encoding, robot, stale=stale, lease=lease.info)
                        since = loop.time()
                        try:
                            if isinstance(msg, bytes):
                                await ws.send_bytes(msg)
                            else:
                                await ws.send_text(msg)
                            if s.reaction_count != reactions:  # a reaction fired: push it as an event
                                if reactions >= 0:
                                    await send_event(ws, encoding, s.state)
                                reactions = s.reaction_count
                        finally:
                            stalls()  # the drops of a send that outlasted the next states, to its end
                            since = None
                        if worker() is not w:  # the supervisor replaced the loop process
                            break
            except WorkerError:  # the loop process died mid-write: the supervisor replaces it
                await asyncio.sleep(0.1)
    finally:
        unwatch()


async def send_event(ws: WebSocket, encoding: str, s: LoopState) -> None:
    """{"event": {"type": "reaction", "count", "cycle", "text"}}: the last reaction that fired."""
    msg = {"event": {"type": "reaction", "count": s.reaction_count, "cycle": s.cycle, "text": s.reaction_event}}
    if encoding == MSGPACK:
        await ws.send_bytes(msgpack.packb(msg))
    else:
        await ws.send_text(json.dumps(msg))


async def accept(ws: WebSocket) -> str:
    enc = MSGPACK if MSGPACK in ws.scope.get("subprotocols", []) else "json"
    await ws.accept(subprotocol=MSGPACK if enc == MSGPACK else None)
    return enc


async def send_error(ws: WebSocket, encoding: str, detail: str, **extra: Any) -> None:
    msg = {"error": clip(detail), **extra}
    if encoding == MSGPACK:
        await ws.send_bytes(msgpack.packb(msg))
    else:
        await ws.send_text(json.dumps(msg))


def decode(raw: dict[str, Any], encoding: str, max_bytes: int, max_depth: int) -> Any:
    """One received frame → a Python object, refusing oversized and too deeply nested messages."""
    data = raw.get("bytes") if raw.get("bytes") is not None else (raw.get("text") or "")
    if len(data) > max_bytes:
        raise InputError(f"message of {len(data)} bytes exceeds max_ws_message_bytes = {max_bytes}")
    if isinstance(data, bytes):
        msg = msgpack.unpackb(data)
        if not depth_ok(msg, max_depth):
            raise InputError(f"message nested deeper than max_json_depth = {max_depth}")
        return msg
    if not json_depth_ok(data, max_depth):
        raise InputError(f"message nested deeper than max_json_depth = {max_depth}")
    return loads(data)


#: the query parameter ``decimation``'s bounds (every n-th cycle's state)
DECIMATION = (1, 10000)


def parse_decimation(text: str | None, default: int) -> int:
    """``?decimation=``: an integer in DECIMATION, else InputError saying so (a bad query parameter is
    said on the socket, not as a bare 403 at the handshake that reads like an access failure)."""
    if text is None:
        return default
    lo, hi = DECIMATION
    try:
        n = int(text)
    except ValueError:
        n = None
    if n is None or not lo <= n <= hi:
        raise InputError(f"decimation must be an integer in [{lo}, {hi}] (every n-th cycle's state), got {text[:40]!r}")
    return n


class Pace:
    """Per-connection rate limit: a bucket of ``burst`` messages refilled at ``rate`` per second. A
    faster sender waits (this socket is not read meanwhile, so TCP back-pressure slows it down), so
    a flooding client costs the service at most ``rate`` messages per second and hold and stop
    (other requests on the same event loop) are served at once."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = rate
        self.burst = burst if burst is not None else max(10.0, rate * 0.05)
        self.units, self.at = self.burst, time.monotonic()

    async def take(self) -> None:
        now = time.monotonic()
        self.units = min(self.burst, self.units + (now - self.at) * self.rate)
        self.at = now
        if self.units < 1.0:
            await asyncio.sleep((1.0 - self.units) / self.rate)
            self.units, self.at = 1.0, time.monotonic()
        self.units -= 1.0


async def serve_socket(ws: WebSocket, decimation: str | None, control: bool, frames: bool = False,
                       name: str | None = None) -> None:
    settings = ws.app.state.settings
    access = ws.app.state.access
    worker, hub = handles(ws)
    headers = {k.lower(): v for k, v in ws.headers.items()}
    encoding = await accept(ws)
    try:
        dec = parse_decimation(decimation, settings.state_decimation)
    except InputError as exc:
        await send_error(ws, encoding, str(exc))
        await ws.close(code=1008, reason=clip(str(exc))[:120])
        return
    closed = asyncio.Event()  # set when logout or a token rotation revoked this socket's credential
    loop = asyncio.get_running_loop()

    closing: list[asyncio.Task[None]] = []

    def revoke(reason: str) -> None:  # any thread
        def now() -> None:
            closed.set()
            closing.append(asyncio.ensure_future(_close(ws, reason)))
        with contextlib.suppress(RuntimeError):  # the event loop is closed: the socket is gone anyway
            loop.call_soon_threadsafe(now)

    sock = access.sockets.add(access.credential(headers), revoke)
    me = access.client(headers, ws.client.host if ws.client else "", name, stream=sock)
    pace = Pace(settings.max_stream_rate or float(worker().params["rate"]))
    hub.clients += 1
    sender = asyncio.create_task(stream(ws, encoding, dec, frames, control))
    try:
        while not closed.is_set():
            raw = await ws.receive()
            if raw["type"] == "websocket.disconnect" or closed.is_set():
                break
            await pace.take()
            try:
                msg = decode(raw, encoding, settings.max_ws_message_bytes, settings.max_json_depth)
                if not control:
                    raise InputError("/ws/state is read-only; stream wrenches on /ws/control")
                access.lease.command(me)  # every /ws/control message commands the arm
                if isinstance(msg, dict) and ("target" in msg or "rules" in msg):  # a pipe round-trip: off the loop
                    w = worker()
                    w.check()  # can take commands (else an error reply, never a false ack)
                    await asyncio.to_thread(apply_message, w, msg)
                else:  # a wrench: one shared-memory write
                    apply_message(worker(), msg)
            except LeaseError as exc:
                await send_error(ws, encoding, exc.detail, status=409, lease=exc.lease)
            except (ValueError, InputError, ModelError, ValidationError, TypeError, WorkerError,
                    RecursionError, msgpack.UnpackException) as exc:
                await send_error(ws, encoding, message(exc))
    except (WebSocketDisconnect, RuntimeError):  # RuntimeError: receive after a close we sent
        pass
    finally:
        access.sockets.remove(sock)
        access.lease.ended(sock)
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await sender
        hub.clients -= 1


async def _close(ws: WebSocket, reason: str) -> None:
    with contextlib.suppress(Exception):
        await ws.close(code=1008, reason=reason)


@router.websocket("/ws/control")
async def ws_control(ws: WebSocket, decimation: str | None = Query(None, description="every n-th cycle's state, "
                                                                      "an integer in [1, 10000]"),
                     client: str | None = Query(None, description="this client's name in the control lease: "
                                                "letters, digits, _.- (up to 32; anything else is ignored)")) -> None:
    await serve_socket(ws, decimation, control=True, name=client)


@router.websocket("/ws/state")
async def ws_state(ws: WebSocket, decimation: str | None = Query(None, description="every n-th cycle's state, "
                                                                    "an integer in [1, 10000]"),
                   frames: bool = False) -> None:
    await serve_socket(ws, decimation, control=False, frames=frames)


def depth_ok(obj: Any, limit: int, depth: int = 0) -> bool:
    if depth > limit:
        return False
    if isinstance(obj, dict):
        return all(depth_ok(v, limit, depth + 1) for v in obj.values())
    if isinstance(obj, list | tuple):
        return all(depth_ok(v, limit, depth + 1) for v in obj)
    return True


LONG_KEY = 32  # characters: a longer key is input, not a typo to show; it is never echoed back


def key_name(k: Any) -> str:
    """A key as an error names it: itself when short, "(a long key)" when it is long input."""
    k = str(k)
    return k if len(k) <= LONG_KEY else "(a long key)"


def message(exc: Exception, at: tuple[str, ...] = ()) -> str:
    """An exception as a one-line error reply (`at`: where the failing part sits in the message)."""
    if isinstance(exc, RecursionError):
        return "message nested too deeply"
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(key_name, (*at, *e['loc']))) or 'message'}: {error_message(e['msg'])}"
                         for e in exc.errors())
    if isinstance(exc, json.JSONDecodeError):
        return f"malformed JSON: {exc.msg}"
    return str(exc)


MESSAGE_KEYS = ("wrench", "twist", "frame", "seq", "target", "rules")
_MESSAGE_KEYS = frozenset(MESSAGE_KEYS)


#: the largest integer entry plain_wrench converts itself: float() is exact up to here; larger ones go to the model
_EXACT_INT = 2**53
_FRAMES = ("base", "tool")


def plain_wrench(msg: dict[str, Any]) -> tuple[list[float], str, int | None] | None:
    """``(wrench, frame, seq)`` of a wrench message in its plain form — "wrench" a list of six finite floats or
    ints (|int| ≤ 2⁵³), "frame" "base" or "tool" or absent, "seq" an int in [0, SEQ_MAX], null or absent — the
    values schemas.WrenchIn gives for it; None for any other form, which the model then validates. A stream
    sends hundreds of wrenches per second, each in this form: they skip building the model
    (tests/test_ws_delivery.py holds it to the model's answers)."""
    w = msg["wrench"]
    if type(w) is not list or len(w) != 6:
        return None
    out: list[float] = []
    for x in w:
        if type(x) is float:
            if not math.isfinite(x):
                return None
            out.append(x)
        elif type(x) is int and -_EXACT_INT <= x <= _EXACT_INT:
            out.append(float(x))
        else:  # bool, str, None, a subclass, a huge int: the model's rules
            return None
    frame = msg.get("frame", "base")
    if type(frame) is not str or frame not in _FRAMES:
        return None
    seq = msg.get("seq")
    if seq is not None and (type(seq) is not int or not 0 <= seq <= schemas.SEQ_MAX):
        return None
    return out, frame, seq


def apply_message(worker: LoopWorker, msg: Any) -> None:
    """{"wrench": [...] | "twist": [...], "frame": "base"|"tool", "seq": n, "target": {...}} — all optional."""
    if not isinstance(msg, dict):
        raise InputError("a message must be a JSON object")
    if not _MESSAGE_KEYS.issuperset(msg):  # short names are named (a typo to see); long ones are input not to echo back
        names = sorted(map(key_name, set(msg) - _MESSAGE_KEYS))[:5]
        raise InputError(clip(f"unknown keys: {', '.join(names)}; allowed: {', '.join(MESSAGE_KEYS)}"))
    if "rules" in msg:  # arm (replace) the reaction rules; [] disarms (server/taskspace.py)
        if not isinstance(msg["rules"], list):
            raise InputError("rules must be a list of rules ([] disarms all)")
        worker.call("task", "rules", msg["rules"])
    if "target" in msg:
        try:
            target = schemas.Target.model_validate(msg["target"])
        except ValidationError as exc:
            raise InputError(message(exc, at=("target",))) from exc
        worker.call("target", pose(target, worker.state()[0].tip_pose))
    if "wrench" in msg:
        plain = plain_wrench(msg)
        if plain is None:  # anything but the plain form: the model validates it (and says what is wrong)
            w = schemas.WrenchIn.model_validate({k: msg[k] for k in ("wrench", "frame", "seq") if k in msg})
            worker.set_wrench(w.wrench, w.frame, w.seq)
        else:
            worker.set_plain_wrench(*plain)
    if "twist" in msg:
        v = TwistIn.model_validate({k: msg[k] for k in ("twist", "frame", "seq") if k in msg})
        worker.set_twist(v.twist, v.frame, v.seq)
