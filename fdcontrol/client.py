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
import collections
import contextlib
import json
import math
import selectors
import socket
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
    from websockets.client import ClientProtocol
    from websockets.exceptions import ConnectionClosed
    from websockets.frames import CloseCode, Frame, Opcode
    from websockets.protocol import CLOSED, CONNECTING, OPEN
    from websockets.sync.client import ClientConnection, connect
    from websockets.uri import parse_uri
except ImportError as exc:
    raise missing("server", "the fdcontrol client", exc) from exc

try:  # the server extra brings orjson (~5× json.loads on a state); an older environment falls back to json
    from orjson import dumps as _orjson_dumps
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - depends on the install
    _loads = json.loads
    _orjson_dumps = None

try:
    from websockets.http11 import USER_AGENT
except ImportError:  # pragma: no cover - depends on the websockets version
    USER_AGENT = "Python/websockets"

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


def _proxy(uri: Any) -> str | None:
    """The proxy websockets' connect would take for ``uri`` (websockets ≥ 15 reads the environment's; earlier
    ones take none)."""
    try:
        from websockets.proxy import get_proxy
    except ImportError:  # pragma: no cover - websockets < 15: no proxy support
        return None
    return get_proxy(uri)


class _Connection:
    """A ``ws://`` WebSocket client connection read in the caller's thread: websockets' own protocol (sans-I/O:
    the handshake, framing, pings answered, the closing handshake) on a TCP socket, without the reader thread of
    websockets' sync connection. A state reaches :meth:`Stream.recv` on the caller's one wake-up, not through
    a reader thread's wake-up and a hand-over to the caller (~0.07 ms a state, and a second thread to be
    scheduled on a busy machine: the tail of a stream's latency).

    The part of websockets' sync ``ClientConnection`` the streams use, with its semantics: :meth:`send` (str:
    a text frame, bytes: binary), :meth:`recv` (``timeout`` None: wait; 0: only what has arrived; TimeoutError
    when nothing came; ConnectionClosed once closed), :attr:`subprotocol`, :meth:`close`. The socket is read
    only inside :meth:`recv` (and :meth:`close`): a caller that stops reading stops answering the server's pings
    too, as websockets' connection does once its queue of 16 messages is full."""

    recv_bufsize = 65536

    def __init__(self, url: str, subprotocols: Sequence[str] | None = None, max_size: int = 2**20,
                 close_timeout: float = CLOSE_TIMEOUT, open_timeout: float = 10.0) -> None:
        uri = parse_uri(url)
        self.close_timeout = close_timeout
        self.protocol = ClientProtocol(uri, subprotocols=subprotocols, max_size=max_size)  # type: ignore[arg-type]
        self.socket = socket.create_connection((uri.host, uri.port), timeout=open_timeout)
        self._selector = selectors.DefaultSelector()
        self._messages: collections.deque[str | bytes] = collections.deque()
        self._fragments: list[bytes] = []  # a fragmented message's frames so far
        self._text = False  # whether that message is text
        self._lock = threading.Lock()  # the protocol's one user at a time: a send from another thread than recv's
        self._reading = threading.Lock()  # one reader of the socket at a time
        try:
            self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
            self._selector.register(self.socket, selectors.EVENT_READ)
            deadline = time.monotonic() + open_timeout
            request = self.protocol.connect()
            request.headers.setdefault("User-Agent", USER_AGENT)
            with self._lock:
                self.protocol.send_request(request)
                self._flush()
            while self.protocol.handshake_exc is None and self.protocol.state is CONNECTING:
                if not self._wait(max(0.0, deadline - time.monotonic())):
                    raise TimeoutError("timed out while waiting for handshake response")
                self._read()
            if self.protocol.handshake_exc is not None:
                raise self.protocol.handshake_exc
        except BaseException:
            self._shut()
            self._selector.close()
            raise
        self.socket.settimeout(None)

    def __enter__(self) -> _Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def subprotocol(self) -> str | None:
        return self.protocol.subprotocol

    def _flush(self) -> None:
        """What the protocol has to send (the caller holds ``_lock``); b"": the end of our side's stream."""
        for data in self.protocol.data_to_send():
            if data:
                self.socket.sendall(data)
            else:
                with contextlib.suppress(OSError):
                    self.socket.shutdown(socket.SHUT_WR)

    def _read(self) -> None:
        """One read of the socket (readable, or this blocks) into the protocol; whole messages to ``_messages``."""
        try:
            data = self.socket.recv(self.recv_bufsize)
        except OSError:  # reset, or closed under us: the end of the stream
            data = b""
        with self._lock:
            if data:
                self.protocol.receive_data(data)
            else:
                self.protocol.receive_eof()
            events = self.protocol.events_received()
            with contextlib.suppress(OSError):  # (a lost peer shows as the end of the stream on the next read)
                self._flush()  # pongs, the closing handshake's reply
        if not data:
            self._shut()
        for frame in events:
            if not isinstance(frame, Frame):  # the handshake's response
                continue
            opcode = frame.opcode
            if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
                self._text, self._fragments = opcode is Opcode.TEXT, [frame.data]
            elif opcode is Opcode.CONT:
                self._fragments.append(frame.data)
            else:  # ping, pong, close: the protocol answered them
                continue
            if frame.fin:
                payload = b"".join(self._fragments)
                self._fragments = []
                if self._text:
                    try:
                        self._messages.append(payload.decode())
                    except UnicodeDecodeError as exc:  # as websockets does: fail the connection with 1007
                        with self._lock:
                            with contextlib.suppress(Exception):
                                self.protocol.fail(CloseCode.INVALID_DATA, f"{exc.reason} at position {exc.start}")
                            with contextlib.suppress(OSError):
                                self._flush()
                else:
                    self._messages.append(payload)

    def _wait(self, timeout: float | None) -> bool:
        """Whether the socket is readable within ``timeout`` s (None: no limit); True too once it was closed
        (by :meth:`close` in another thread): the next read finds the end of the stream."""
        try:
            return bool(self._selector.select(timeout))
        except (OSError, ValueError):  # the selector or the socket closed meanwhile
            return True

    def _shut(self) -> None:
        """The socket closed: the protocol at its end of stream (CLOSED), no more reads (a reader waiting in
        another thread wakes to the end of the stream)."""
        with self._lock:
            self.protocol.receive_eof()
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.socket.close()

    def _closed(self) -> ConnectionClosed:
        """The connection's ConnectionClosed, once its end was reached or ``close_timeout`` s ran out."""
        deadline = time.monotonic() + self.close_timeout
        while self.protocol.state is not CLOSED:
            left = deadline - time.monotonic()
            if left <= 0 or not self._wait(left):
                self._shut()
                break
            self._read()
        return self.protocol.close_exc

    def _closed_by_any_reader(self) -> ConnectionClosed:
        """:meth:`_closed` as the socket's reader; a reader in another thread (that may wait without a limit)
        is woken to the end of the stream instead."""
        if self._reading.acquire(timeout=self.close_timeout):
            try:
                self._messages.clear()
                return self._closed()
            finally:
                self._reading.release()
        self._shut()
        return self.protocol.close_exc

    def recv(self, timeout: float | None = None) -> str | bytes:
        """The next message (str for text, bytes for binary); ``timeout`` s at most (None: no limit; 0: only a
        message that has arrived), else TimeoutError; ConnectionClosed once the connection is closed."""
        with self._reading:
            if self._messages:
                return self._messages.popleft()
            deadline = None if timeout is None else time.monotonic() + timeout
            while self.protocol.state is OPEN:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if self._wait(left):
                    self._read()
                    if self._messages:
                        return self._messages.popleft()
                elif deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError("no message within the timeout")
            raise self._closed()  # closing (the server's close frame, a protocol error) or closed

    def send(self, message: str | bytes) -> None:
        """One message: a text frame for str, binary for bytes; ConnectionClosed when the connection is closed."""
        data = message.encode() if isinstance(message, str) else message
        with self._lock:
            if self.protocol.state is OPEN:
                if isinstance(message, str):
                    self.protocol.send_text(data)
                else:
                    self.protocol.send_binary(data)
                try:
                    self._flush()
                    return
                except OSError:  # the peer is gone
                    pass
        raise self._closed_by_any_reader()

    def close(self) -> None:
        """The closing handshake (code 1000), ``close_timeout`` s at most; messages not read meanwhile are
        dropped (a caller that never read them does not delay it)."""
        with self._lock:
            if self.protocol.state is OPEN:
                self.protocol.send_close(CloseCode.NORMAL_CLOSURE)
                with contextlib.suppress(OSError):
                    self._flush()
        self._closed_by_any_reader()
        with contextlib.suppress(Exception):
            self._selector.close()


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
                # the states are read even when nobody looks at them: a stream's socket is read only by its reader
                # (Stream.recv, poll), and unread it answers no ping — the service ends it after its ping timeout
                while (msg := s.poll()) is not None:
                    if on_state is not None:
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
        subprotocols = ["msgpack"] if msgpack_encoding else None
        if url.startswith("ws://") and _proxy(parse_uri(url)) is None:  # read in the caller's thread
            with _Connection(url, subprotocols, max_size=2**20, close_timeout=CLOSE_TIMEOUT) as conn:
                yield Stream(conn, msgpack_encoding)  # (closed promptly, also when the caller never read the states)
            return
        # wss:// or through a proxy: websockets' connection (TLS, proxies), read by its own thread
        with connect(url, subprotocols=subprotocols,  # type: ignore[arg-type]
                     max_size=2**20, close_timeout=CLOSE_TIMEOUT) as ws:
            try:
                yield Stream(ws, msgpack_encoding)
            finally:
                _close(ws)  # promptly, also when the caller never read the states

    def state_stream(self, decimation: int | None = None, msgpack_encoding: bool = False):
        return self.control_stream(decimation, msgpack_encoding, path="/ws/state")


class Stream:
    """One WebSocket session (JSON text or MessagePack binary frames). ``ws``: its connection — for a ``ws://``
    service one read in the caller's thread (:meth:`recv` and :meth:`poll` read the socket themselves: no reader
    thread between a state's arrival and the caller), else websockets' ``ClientConnection`` (``wss://``, a
    proxy); either has ``send``, ``recv(timeout)``, ``subprotocol`` and ``close``."""

    def __init__(self, ws: ClientConnection | _Connection, binary: bool) -> None:
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
