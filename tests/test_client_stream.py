"""The client's WebSocket connection read in the caller's thread (fdcontrol.client._Connection) behaves as
websockets' own sync connection does for what a Stream uses: messages whole and in order (text as str, binary
as bytes, fragmented ones joined), recv's timeouts, the server's pings answered, the closing handshake and its
codes, refused handshakes and oversized messages — against a websockets server on loopback."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, ConnectionClosedOK, InvalidStatus
from websockets.sync.client import connect
from websockets.sync.server import ServerConnection, serve

from fdcontrol.client import Client, Stream, _Connection

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")


@contextlib.contextmanager
def server(handler: Callable[[ServerConnection], None], **kwargs: Any) -> Iterator[str]:
    """A websockets server on loopback running ``handler`` per connection; yields its ws:// URL."""
    with serve(handler, "127.0.0.1", 0, compression=None, **kwargs) as srv:
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        try:
            yield f"ws://127.0.0.1:{srv.socket.getsockname()[1]}/path?x=1"
        finally:
            srv.shutdown()
            t.join(5)


def echo_then(messages: list[Any], close: tuple[int, str] | None = None) -> Callable[[ServerConnection], None]:
    """A handler that sends ``messages`` (a list: one fragmented message), echoes what it receives until the
    client sends "close", then closes with ``close``."""
    def handler(ws: ServerConnection) -> None:
        for m in messages:
            ws.send(m)
        with contextlib.suppress(ConnectionClosed):
            for m in ws:
                if m == "close":
                    break
                ws.send(m)
        if close is not None:
            ws.close(*close)
    return handler


def test_messages_arrive_whole_and_in_order_as_str_or_bytes():
    sent = ["first", b"\x00\x01binary", ["frag", "ment", "ed"], [b"by", b"tes"], "é" * 5000, "last"]
    with server(echo_then(sent)) as url, _Connection(url) as ws:
        got = [ws.recv(timeout=5) for _ in sent]
        assert got == ["first", b"\x00\x01binary", "fragmented", b"bytes", "é" * 5000, "last"]
        assert [type(g) for g in got] == [str, bytes, str, bytes, str, str]
        ws.send("echo me")
        ws.send(b"\xff\x00")
        assert ws.recv(timeout=5) == "echo me"
        assert ws.recv(timeout=5) == b"\xff\x00"


def test_recv_timeouts():
    release = threading.Event()

    def handler(ws: ServerConnection) -> None:
        release.wait(5)
        ws.send("late")
        ws.recv()

    with server(handler) as url, _Connection(url) as ws:
        with pytest.raises(TimeoutError):
            ws.recv(timeout=0)  # nothing has arrived
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            ws.recv(timeout=0.2)
        assert 0.2 <= time.monotonic() - t0 < 2.0
        release.set()
        assert ws.recv(timeout=5) == "late"  # waits for it
        with pytest.raises(TimeoutError):
            ws.recv(timeout=0)


def test_the_servers_close_after_its_messages_raises_its_code():
    with server(echo_then(["a", "b"], close=(1008, "go away"))) as url, _Connection(url) as ws:
        ws.send("close")
        assert ws.recv(timeout=5) == "a" and ws.recv(timeout=5) == "b"  # the messages before the close first
        with pytest.raises(ConnectionClosedError) as closed:
            ws.recv(timeout=5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        assert closed.value.rcvd.reason == "go away"
        with pytest.raises(ConnectionClosedError):  # and from then on
            ws.recv(timeout=0)
        with pytest.raises(ConnectionClosedError):
            ws.send("more")
    with server(echo_then([], close=(1000, ""))) as url, _Connection(url) as ws:
        ws.send("close")
        with pytest.raises(ConnectionClosedOK):
            ws.recv(timeout=5)


def test_close_is_the_closing_handshake_and_the_server_sees_code_1000():
    seen: list[Any] = []

    def handler(ws: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            for _ in ws:
                pass
        seen.append((ws.close_code, ws.close_reason))

    with server(handler) as url:
        ws = _Connection(url)
        ws.send("hello")
        ws.close()
        ws.close()  # twice: nothing more
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
    assert seen == [(1000, "")]
    with pytest.raises(ConnectionClosedOK):
        ws.recv(timeout=0)


def test_close_ends_by_the_handshake_when_the_caller_read_nothing_of_a_flood():
    def handler(ws: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            while True:
                ws.send("x" * 4000)

    with server(handler) as url:
        ws = _Connection(url, close_timeout=60.0)  # only a close that ran out of it would take that long
        time.sleep(0.5)  # the socket's buffers full, the server blocked in its sends
        ws.close()
        # ended by the closing handshake — the server's close frame read through the flood the caller never
        # read — not by running out of close_timeout (then no close frame is received)
        assert ws.protocol.close_rcvd is not None and ws.protocol.close_rcvd.code == 1000


def test_a_reader_in_another_thread_ends_when_the_connection_is_closed():
    with server(echo_then([])) as url:
        ws = _Connection(url, close_timeout=60.0)  # only a close that ran out of it would take that long
        out: list[BaseException] = []

        def reader() -> None:
            try:
                ws.recv()  # no timeout: waits
            except BaseException as exc:  # what it raised is the test's
                out.append(exc)

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.2)
        ws.close()
        t.join(60)
        assert not t.is_alive()
        assert len(out) == 1 and isinstance(out[0], ConnectionClosed)
        # the reader woke to the server's close frame and ended the handshake: close did not wait out its timeout
        assert ws.protocol.close_rcvd is not None and ws.protocol.close_rcvd.code == 1000


def test_the_servers_pings_are_answered_while_reading():
    pongs: list[bool] = []

    def handler(ws: ServerConnection) -> None:
        pong = ws.ping(b"are you there")
        ws.send("ping sent")
        pongs.append(pong.wait(5))
        ws.send("done")
        ws.recv()

    with server(handler, ping_interval=None) as url, _Connection(url) as ws:
        assert ws.recv(timeout=5) == "ping sent"
        assert ws.recv(timeout=10) == "done"
    assert pongs == [True]


def test_subprotocol_and_the_request():
    headers: list[Any] = []

    def handler(ws: ServerConnection) -> None:
        assert ws.request is not None
        headers.append((ws.request.path, ws.request.headers.get("User-Agent")))
        ws.send(ws.subprotocol or "none")
        ws.recv()

    with server(handler, subprotocols=["msgpack"]) as url:
        with _Connection(url, subprotocols=["msgpack"]) as ws:
            assert ws.subprotocol == "msgpack" and ws.recv(timeout=5) == "msgpack"
    assert headers[0][0] == "/path?x=1" and headers[0][1]


def test_a_refused_handshake_raises_websockets_error():
    def refuse(conn: ServerConnection, request: Any) -> Any:
        return conn.respond(403, "not you\n")

    with server(echo_then([]), process_request=refuse) as url:
        with pytest.raises(InvalidStatus) as e:
            _Connection(url)
        assert e.value.response.status_code == 403
        with pytest.raises(InvalidStatus):  # as websockets' own connect says it
            with connect(url):
                pass


def test_an_oversized_message_closes_with_1009():
    with server(echo_then(["y" * 5000])) as url, _Connection(url, max_size=4096) as ws:
        with pytest.raises(ConnectionClosedError) as closed:
            ws.recv(timeout=5)
        assert closed.value.sent is not None and closed.value.sent.code == 1009


def test_control_stream_reads_ws_urls_in_the_callers_thread_and_leaves_the_rest_to_websockets(monkeypatch):
    """A ws:// service without a proxy: the connection above, no reader thread; through a proxy (or wss://):
    websockets' own connection, as before."""
    import fdcontrol.client as client

    with server(echo_then(['{"cycle": 7}'])) as url:
        base = url.replace("ws://", "http://").split("/path")[0]
        with Client(base) as c, c.control_stream(decimation=3) as s:
            assert isinstance(s, Stream) and isinstance(s.ws, _Connection)
            assert s.recv(timeout=5) == {"cycle": 7}
        used: list[str] = []

        @contextlib.contextmanager
        def fake_connect(u: str, **kwargs: Any) -> Iterator[Any]:
            used.append(u)
            with connect(u, **kwargs) as ws:
                yield ws

        monkeypatch.setattr(client, "_proxy", lambda uri: "http://proxy.example:3128")
        monkeypatch.setattr(client, "connect", fake_connect)
        with Client(base) as c, c.control_stream() as s:
            assert not isinstance(s.ws, _Connection) and used == [base.replace("http", "ws") + "/ws/control"]
            assert s.recv(timeout=5) == {"cycle": 7}


def test_teleoperate_reads_the_states_without_on_state(monkeypatch):
    """Its stream's states are read even when no ``on_state`` looks at them: unread, the connection answers no
    ping and the service ends it (a 60 s teleoperation without on_state failed after 41 s: keepalive ping
    timeout)."""
    class FakeStream:
        def __init__(self) -> None:
            self.waiting = 0  # states arrived, not read
            self.sent = 0

        def send_twist(self, v: Any, frame: str) -> None:
            self.sent += 1
            self.waiting += 2

        def poll(self) -> dict[str, Any] | None:
            if not self.waiting:
                return None
            self.waiting -= 1
            return {"cycle": self.sent}

    fake = FakeStream()

    @contextlib.contextmanager
    def stream(self: Client, *args: Any, **kwargs: Any) -> Iterator[FakeStream]:
        yield fake

    monkeypatch.setattr(Client, "control_stream", stream)
    with Client("http://127.0.0.1:9") as c:
        assert c.teleoperate(lambda t: [0.0] * 6 if t < 0.2 else None, rate=50) == fake.sent > 0
        assert fake.waiting == 0  # all read
        seen: list[dict[str, Any]] = []
        fake.sent = 0
        c.teleoperate(lambda t: [0.0] * 6 if t < 0.2 else None, rate=50, on_state=seen.append)
        assert fake.waiting == 0 and len(seen) == 2 * fake.sent
