"""Python client for the fdcontrol service: REST (sync and async) and WebSocket streaming.

    from fdcontrol.client import Client
    with Client("http://127.0.0.1:8000") as c:
        c.start()
        with c.control_stream(decimation=5) as s:
            s.send_wrench([5, 0, 0, 0, 0, 0])
            print(s.recv()["q_ref"])
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from fdcontrol.extras import missing

try:
    import httpx
    import msgpack
    from websockets.asyncio.client import ClientConnection as AsyncConnection
    from websockets.asyncio.client import connect as aconnect
    from websockets.sync.client import ClientConnection, connect
except ImportError as exc:
    raise missing("server", "the fdcontrol client", exc) from exc

try:  # the server extra brings orjson (~5× json.loads on a state); an older environment falls back to json
    from orjson import dumps as _orjson_dumps
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - depends on the install
    _loads = json.loads
    _orjson_dumps = None

#: s a closing handshake may take at most (the states the caller did not read are drained meanwhile)
CLOSE_TIMEOUT = 1.0


def _close(ws: ClientConnection) -> None:
    """Close promptly even when the caller never read the incoming states: a full receive queue
    stops the connection from reading the socket, and with it the server's close frame, so a
    thread drains the queue while the closing handshake runs."""
    def drain() -> None:
        with contextlib.suppress(Exception):
            while True:
                ws.recv(timeout=CLOSE_TIMEOUT)

    t = threading.Thread(target=drain, name="fdcontrol-ws-drain", daemon=True)
    t.start()
    ws.close()
    t.join(CLOSE_TIMEOUT)


async def _aclose(ws: AsyncConnection) -> None:
    """The asyncio counterpart of :func:`_close`."""
    async def drain() -> None:
        with contextlib.suppress(Exception):
            while True:
                await ws.recv()

    task = asyncio.create_task(drain())
    try:
        await ws.close()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


class ServiceError(RuntimeError):
    """An HTTP error answer of the service (status and its detail)."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail = status, detail


def _check(r: httpx.Response) -> Any:
    if r.status_code >= 400:
        try:
            detail = r.json().get("detail")
        except ValueError:
            detail = r.text
        raise ServiceError(r.status_code, detail)
    return r.json()


class _Routes:
    """Request builders shared by the sync and async clients: (method, path, json body)."""

    @staticmethod
    def analysis(q: Sequence[float] | Sequence[Sequence[float]], mappings: Sequence[Any] | None,
                 type: str, robot: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"q": [list(map(float, x)) for x in q] if q and isinstance(q[0], Sequence)
                                else list(map(float, q)), "type": type}  # type: ignore[arg-type]
        if mappings is not None:
            body["mappings"] = list(mappings)
        if robot is not None:
            body["robot"] = robot
        return body

    @staticmethod
    def wrench(wrench: Sequence[float], frame: str, seq: int | None) -> dict[str, Any]:
        return {"wrench": list(map(float, wrench)), "frame": frame, "seq": seq}

    @staticmethod
    def twist(twist: Sequence[float], frame: str, seq: int | None) -> dict[str, Any]:
        return {"twist": list(map(float, twist)), "frame": frame, "seq": seq}

    @staticmethod
    def target(position: Sequence[float], orientation: Sequence[float] | None) -> dict[str, Any]:
        return {"position": list(position), "orientation": None if orientation is None else list(orientation)}


class Client:
    """Synchronous client."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", timeout: float = 10.0,
                 token: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self.http = httpx.Client(base_url=self.base_url, timeout=timeout, headers=headers)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _get(self, path: str) -> Any:
        return _check(self.http.get(path))

    def _send(self, method: str, path: str, body: Any = None) -> Any:
        return _check(self.http.request(method, path, json=body))

    def health(self) -> dict[str, Any]:
        return self._get("/health")

    def robots(self) -> list[dict[str, Any]]:
        return self._get("/robots")

    def state(self) -> dict[str, Any]:
        return self._get("/state")

    def stats(self) -> dict[str, Any]:
        return self._get("/stats")

    def config(self) -> dict[str, Any]:
        return self._get("/config")

    def patch_config(self, **changes: Any) -> dict[str, Any]:
        return self._send("PATCH", "/config", changes)

    def singular_values(self, q: Sequence[Any], mappings: Sequence[Any] | None = None,
                        type: str = "joint", robot: str | None = None) -> dict[str, Any]:
        return self._send("POST", "/analysis/singular-values", _Routes.analysis(q, mappings, type, robot))

    def start(self) -> dict[str, Any]:
        return self._send("POST", "/control/start")

    def stop(self) -> dict[str, Any]:
        return self._send("POST", "/control/stop")

    def hold(self, on: bool = True) -> dict[str, Any]:
        return self._send("POST", "/control/hold", {"hold": on})

    def zero_sensor(self) -> dict[str, Any]:
        return self._send("POST", "/control/zero-sensor")

    def set_target(self, position: Sequence[float], orientation: Sequence[float] | None = None) -> dict[str, Any]:
        return self._send("PUT", "/control/target", _Routes.target(position, orientation))

    def set_wrench(self, wrench: Sequence[float], frame: str = "base", seq: int | None = None) -> dict[str, Any]:
        return self._send("PUT", "/control/wrench", _Routes.wrench(wrench, frame, seq))

    def set_action(self, position: Sequence[float], orientation: Sequence[float] | None, step: float, seq: int,
                   obs_cycle: int | None = None, policy_action: Sequence[float] | None = None) -> dict[str, Any]:
        """A policy's goal pose (base frame, quaternion [x, y, z, w]) reached over ``step`` s (docs/learning.md)."""
        body = {**_Routes.target(position, orientation), "step": float(step), "seq": int(seq),
                "obs_cycle": obs_cycle,
                "policy_action": None if policy_action is None else [float(x) for x in policy_action]}
        return self._send("PUT", "/control/action", body)

    def start_recording(self, name: str | None = None) -> dict[str, Any]:
        return self._send("POST", "/recording/start", {"name": name})

    def stop_recording(self) -> dict[str, Any]:
        return self._send("POST", "/recording/stop")

    def start_episode(self, task: str | None = None, policy_id: str | None = None,
                      metadata: dict[str, str] | None = None) -> dict[str, Any]:
        """Open an episode in the active recording (its task, policy id and the parameters at its start)."""
        return self._send("POST", "/episode/start", {"task": task, "policy_id": policy_id,
                                                      "metadata": metadata or {}})

    def stop_episode(self, success: bool | None = None, metadata: dict[str, str] | None = None) -> dict[str, Any]:
        return self._send("POST", "/episode/stop", {"success": success, "metadata": metadata or {}})

    def environment(self) -> dict[str, Any]:
        return self._get("/environment")

    def set_twist(self, twist: Sequence[float], frame: str = "base", seq: int | None = None) -> dict[str, Any]:
        """One commanded tip twist [v; ω] (m/s, rad/s); it holds for ``command_timeout`` only."""
        return self._send("PUT", "/control/twist", _Routes.twist(twist, frame, seq))

    def teleoperate(self, twist: Callable[[float], Sequence[float] | None], rate: float = 100.0,
                    duration: float = 10.0, frame: str = "base",
                    on_state: Callable[[dict[str, Any]], None] | None = None) -> int:
        """Stream ``twist(t)`` (t in s since the start) over /ws/control at ``rate`` Hz until it
        returns None or ``duration`` s have passed; ``on_state`` sees each state message.
        Returns the number of twists sent. When the stream ends the service's watchdog holds
        the arm after ``command_timeout``; a new stream moves it again.

            c.teleoperate(lambda t: [0.05, 0, 0, 0, 0, 0] if t < 2 else None)
        """
        if not (0 < rate <= 2000 and 0 < duration < 86400):
            raise ValueError("rate must be in (0, 2000] Hz and duration in (0, 86400) s")
        period, sent = 1.0 / rate, 0
        with self.control_stream() as s:
            t0 = time.monotonic()
            while (t := time.monotonic() - t0) < duration:
                v = twist(t)
                if v is None:
                    break
                s.send_twist(v, frame)
                sent += 1
                while on_state is not None and (msg := s.poll()) is not None:
                    on_state(msg)
                time.sleep(max(0.0, t0 + sent * period - time.monotonic()))
        return sent

    @contextmanager
    def control_stream(self, decimation: int | None = None, msgpack_encoding: bool = False,
                       path: str = "/ws/control") -> Iterator[Stream]:
        """A WebSocket session: send wrenches (and targets), receive state messages."""
        url = self.base_url.replace("http", "ws", 1) + path
        if decimation is not None:
            url += f"?decimation={decimation}"
        with connect(url, subprotocols=["msgpack"] if msgpack_encoding else None,  # type: ignore[list-item]
                     max_size=2**20, close_timeout=CLOSE_TIMEOUT) as ws:
            try:
                yield Stream(ws, msgpack_encoding)
            finally:
                _close(ws)  # promptly, also when the caller never read the states

    def state_stream(self, decimation: int | None = None, msgpack_encoding: bool = False):
        return self.control_stream(decimation, msgpack_encoding, path="/ws/state")


class Stream:
    """One WebSocket session (JSON text or MessagePack binary frames)."""

    def __init__(self, ws: ClientConnection, binary: bool) -> None:
        self.ws, self.binary, self.seq = ws, binary, 0

    def send(self, message: dict[str, Any]) -> None:
        self.ws.send(msgpack.packb(message) if self.binary else json.dumps(message))

    def _send_vector(self, message: dict[str, Any], vector: list[float], frame: str) -> None:
        """A wrench or twist message (``vector`` its six floats): as JSON by orjson — one C call, a quarter of
        json.dumps's time on a stream's every message — where it reads back as the same object (finite floats,
        a plain ``str`` frame, an int seq: compact JSON of the same values), else by :meth:`send`."""
        if (not self.binary and _orjson_dumps is not None and type(frame) is str
                and all(map(math.isfinite, vector))):
            try:
                text = _orjson_dumps(message).decode()
            except TypeError:  # (a seq beyond 64 bits: json's text)
                text = json.dumps(message)
            self.ws.send(text)
        else:  # NaN and infinities (json's NaN / Infinity, for the service to refuse as ever), or msgpack
            self.send(message)

    def send_wrench(self, wrench: Sequence[float], frame: str = "base") -> int:
        self.seq += 1
        message = _Routes.wrench(wrench, frame, self.seq)
        self._send_vector(message, message["wrench"], frame)
        return self.seq

    def send_twist(self, twist: Sequence[float], frame: str = "base") -> int:
        """A commanded tip twist [v; ω] (m/s, rad/s) for teleoperation."""
        self.seq += 1
        message = _Routes.twist(twist, frame, self.seq)
        self._send_vector(message, message["twist"], frame)
        return self.seq

    def recv(self, timeout: float | None = 5.0) -> dict[str, Any]:
        raw = self.ws.recv(timeout=timeout)
        return msgpack.unpackb(raw) if isinstance(raw, bytes) else _loads(raw)

    def poll(self) -> dict[str, Any] | None:
        """The next waiting message, or None at once when there is none."""
        try:
            return self.recv(timeout=0)
        except TimeoutError:
            return None


class AsyncClient:
    """Asynchronous REST client (httpx.AsyncClient); same methods as :class:`Client`."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", timeout: float = 10.0) -> None:
        self.http = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def _req(self, method: str, path: str, body: Any = None) -> Any:
        return _check(await self.http.request(method, path, json=body))

    async def health(self) -> dict[str, Any]:
        return await self._req("GET", "/health")

    async def state(self) -> dict[str, Any]:
        return await self._req("GET", "/state")

    async def stats(self) -> dict[str, Any]:
        return await self._req("GET", "/stats")

    async def config(self) -> dict[str, Any]:
        return await self._req("GET", "/config")

    async def patch_config(self, **changes: Any) -> dict[str, Any]:
        return await self._req("PATCH", "/config", changes)

    async def singular_values(self, q: Sequence[Any], mappings: Sequence[Any] | None = None,
                              type: str = "joint", robot: str | None = None) -> dict[str, Any]:
        return await self._req("POST", "/analysis/singular-values", _Routes.analysis(q, mappings, type, robot))

    async def start(self) -> dict[str, Any]:
        return await self._req("POST", "/control/start")

    async def stop(self) -> dict[str, Any]:
        return await self._req("POST", "/control/stop")

    async def hold(self, on: bool = True) -> dict[str, Any]:
        return await self._req("POST", "/control/hold", {"hold": on})

    async def set_wrench(self, wrench: Sequence[float], frame: str = "base", seq: int | None = None) -> dict[str, Any]:
        return await self._req("PUT", "/control/wrench", _Routes.wrench(wrench, frame, seq))

    async def set_twist(self, twist: Sequence[float], frame: str = "base", seq: int | None = None) -> dict[str, Any]:
        return await self._req("PUT", "/control/twist", _Routes.twist(twist, frame, seq))

    async def set_target(self, position: Sequence[float], orientation: Sequence[float] | None = None) -> dict[str, Any]:
        return await self._req("PUT", "/control/target", _Routes.target(position, orientation))

    @asynccontextmanager
    async def control_stream(self, decimation: int | None = None, msgpack_encoding: bool = False,
                             path: str = "/ws/control"):
        url = str(self.http.base_url).rstrip("/").replace("http", "ws", 1) + path
        if decimation is not None:
            url += f"?decimation={decimation}"
        async with aconnect(url, subprotocols=["msgpack"] if msgpack_encoding else None,  # type: ignore[list-item]
                            max_size=2**20, close_timeout=CLOSE_TIMEOUT) as ws:
            try:
                yield AsyncStream(ws, msgpack_encoding)
            finally:
                await _aclose(ws)


class AsyncStream:
    """Async counterpart of :class:`Stream`."""

    def __init__(self, ws: AsyncConnection, binary: bool) -> None:
        self.ws, self.binary, self.seq = ws, binary, 0

    async def send_wrench(self, wrench: Sequence[float], frame: str = "base") -> int:
        self.seq += 1
        msg = _Routes.wrench(wrench, frame, self.seq)
        await self.ws.send(msgpack.packb(msg) if self.binary else json.dumps(msg))
        return self.seq

    async def send_twist(self, twist: Sequence[float], frame: str = "base") -> int:
        self.seq += 1
        msg = _Routes.twist(twist, frame, self.seq)
        await self.ws.send(msgpack.packb(msg) if self.binary else json.dumps(msg))
        return self.seq

    async def recv(self) -> dict[str, Any]:
        raw = await self.ws.recv()
        return msgpack.unpackb(raw) if isinstance(raw, bytes) else _loads(raw)
