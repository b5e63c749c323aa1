"""The access middleware of docs/security.md as the server runs it, in this process: each request or
WebSocket handshake goes through :class:`AccessMiddleware` around a tiny ASGI app that records what
reached it, with fake ``receive``/``send`` (no sockets). Checked from the outside: the status, the
refusal's body and headers, the WebSocket close, and what the inner app got (nothing, or the whole
body once). The dashboard's login, logout, token rotation and the lease routes run the same way,
through httpx's in-process ASGI transport. Fast on purpose: `make mutation` runs these against
server/auth.py together with tests/test_access_policy.py."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from fdcontrol.server.auth import (
    COOKIE,
    Access,
    AccessMiddleware,
    login_router,
    request_client,
)
from fdcontrol.server.lease import Client
from fdcontrol.server.metrics import AUTH_FAILURES
from fdcontrol.server.settings import Settings

TOKEN = "a-token-of-twenty-chars"
NEW = "another-token-of-24-chars"
WRONG = "Bearer wrong-token-wrong-token"
HOST_DETAIL = "unknown Host header; add it to allowed_hosts to serve under that name"
ORIGIN_DETAIL = "foreign Origin refused; add it to allowed_origins to allow it"
TYPE_DETAIL = "state changes need a JSON body (Content-Type: application/json)"
AUTH_DETAIL = "authentication required: 'Authorization: Bearer <token>' or POST /auth/login"
THROTTLE_DETAIL = "too many failed authentication attempts; retry later"


def access(**kw: Any) -> Access:
    return Access(Settings(**kw))


class Clock:
    """A stand-in for the time module of server/sessions.py: the throttle on a clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """The throttle's (and the sessions') clock, still unless the test moves it: Retry-After exact."""
    import fdcontrol.server.sessions as sessions

    c = Clock()
    monkeypatch.setattr(sessions, "time", c)
    return c


@dataclass
class Outcome:
    """What one request through the middleware produced."""

    sent: list[dict[str, Any]]  # the messages sent to the client
    reached: list[dict[str, Any]] = field(default_factory=list)  # scopes the inner app saw
    got: list[dict[str, Any]] = field(default_factory=list)  # the messages the inner app received

    @property
    def status(self) -> int | None:
        starts = [m for m in self.sent if m["type"] == "http.response.start"]
        return starts[0]["status"] if starts else None

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        return next(m["headers"] for m in self.sent if m["type"] == "http.response.start")

    def header(self, name: str) -> str | None:
        found = [v.decode() for k, v in self.headers if k == name.encode()]
        assert len(found) <= 1, f"{name} sent {len(found)} times"
        return found[0] if found else None

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")

    @property
    def detail(self) -> str:
        return json.loads(self.body)["detail"]

    @property
    def app_body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.got if m["type"] == "http.request")


def run(a: Access | AccessMiddleware, method: str = "GET", path: str = "/state", *,
        messages: list[dict[str, Any]] | None = None, body: bytes | None = None,
        host: str | None = "127.0.0.1:8000", client: tuple[str, int] | None = ("10.0.0.1", 5000),
        ws: bool = False, headers: dict[str, str] | None = None, scope_type: str | None = None) -> Outcome:
    """One HTTP request (or WebSocket handshake) through the middleware to an app that reads its
    whole body, once more past it (to see what the middleware passes on), and answers 200."""
    mw = a if isinstance(a, AccessMiddleware) else AccessMiddleware(None, a)
    if messages is None:
        messages = ([{"type": "websocket.connect"}] if ws else [{"type": "lifespan.startup"}] if scope_type else
                    [{"type": "http.request", "body": body or b"", "more_body": False}])
    pending = [*messages, {"type": "websocket.disconnect" if ws else "http.disconnect"}]
    out = Outcome(sent=[])

    async def receive() -> dict[str, Any]:
        assert pending, "receive() called past the end of the client's messages"
        return pending.pop(0)

    async def send(msg: dict[str, Any]) -> None:
        out.sent.append(msg)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        out.reached.append(scope)
        if scope["type"] == "websocket":
            out.got.append(await receive())
            await send({"type": "websocket.accept"})
            return
        if scope["type"] != "http":  # lifespan: the app talks to the server through the same channels
            out.got.append(await receive())
            await send({"type": "lifespan.startup.complete"})
            return
        while True:
            m = await receive()
            out.got.append(m)
            if m["type"] != "http.request" or not m.get("more_body", False):
                break
        out.got.append(await receive())  # past the body: what the client sends next
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"inner"})

    mw.app = app
    hdrs = {**({"host": host} if host is not None else {}), **(headers or {})}
    scope: dict[str, Any] = {"type": scope_type or ("websocket" if ws else "http"), "path": path,
                             "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in hdrs.items()]}
    if not ws:
        scope["method"] = method
    if client is not None:
        scope["client"] = client
    asyncio.run(mw(scope, receive, send))
    return out


def refused(o: Outcome, status: int, detail: str) -> None:
    """A refusal as docs/security.md gives it: the status, a JSON body {"detail": …} of exactly that
    length, nothing reaching the app."""
    assert o.reached == [], "a refused request reached the app"
    assert o.status == status and o.detail == detail
    assert [m["type"] for m in o.sent] == ["http.response.start", "http.response.body"]
    assert o.body == json.dumps({"detail": detail}).encode()
    assert o.header("content-type") == "application/json"
    assert o.header("content-length") == str(len(o.body))
    assert (o.header("www-authenticate") == 'Bearer realm="fdcontrol"') is (status == 401)


def passed(o: Outcome, body: bytes = b"") -> None:
    assert o.status == 200 and o.body == b"inner" and len(o.reached) == 1
    assert o.app_body == body


def ws_refused(o: Outcome, detail: str) -> None:
    """A refused handshake: closed with 1008 and the reason, before accept, the app never called."""
    assert o.reached == [] and o.sent == [{"type": "websocket.close", "code": 1008, "reason": detail}]


def ws_passed(o: Outcome) -> None:
    assert len(o.reached) == 1 and o.sent == [{"type": "websocket.accept"}]
    assert o.got == [{"type": "websocket.connect"}]  # the handshake reaches the app untouched


# ------------------------------------------------------------------------------ the checks in order
def test_other_scopes_pass_untouched():
    o = run(access(token=TOKEN), scope_type="lifespan", host="evil.example")
    assert len(o.reached) == 1 and o.reached[0]["type"] == "lifespan"
    assert o.got == [{"type": "lifespan.startup"}] and o.sent == [{"type": "lifespan.startup.complete"}]


def test_a_sparse_scope_is_read_with_safe_defaults():
    """ASGI servers always send headers, method and path; a scope without them is still answered
    (no Host: 421; no method: a GET), never an exception."""
    a = access()
    a.allowed = lambda path: ["GET", "HEAD"]
    sent: list[dict[str, Any]] = []

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    reached: list[dict[str, Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        reached.append(scope)

    asyncio.run(AccessMiddleware(app, a)({"type": "http"}, receive, send))
    assert sent[0]["status"] == 421 and reached == []
    sent.clear()
    asyncio.run(AccessMiddleware(app, a)({"type": "http", "headers": [(b"host", b"localhost")]}, receive, send))
    assert sent == [] and len(reached) == 1  # a GET the route takes


def test_unknown_host_is_421_for_requests_and_handshakes():
    a = access(allowed_hosts=["cell.example"])
    refused(run(a, host="evil.example"), 421, HOST_DETAIL)
    refused(run(a, "POST", "/control/hold", host="evil.example:8000", body=b'{"hold": true}'), 421, HOST_DETAIL)
    refused(run(a, host=None), 421, HOST_DETAIL)  # no Host header at all
    ws_refused(run(a, "GET", "/ws/state", ws=True, host="evil.example"), HOST_DETAIL)
    passed(run(a, host="CELL.example:8000"))
    passed(run(a, host="localhost"))
    ws_passed(run(a, "GET", "/ws/state", ws=True, host="[::1]:8000"))
    passed(run(access(allowed_hosts=["*"]), host="anything.example"))
    # the Host check comes first: a foreign Host with the right token and a good Origin is still refused
    refused(run(access(token=TOKEN), host="evil.example", headers={"authorization": f"Bearer {TOKEN}"}),
            421, HOST_DETAIL)


def test_foreign_origin_is_403_on_state_changes_and_handshakes_only():
    a = access(allowed_origins=["https://hmi.example"])
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        refused(run(a, method, "/control/hold", body=b"{}", headers={"origin": "http://evil.example"}),
                403, ORIGIN_DETAIL)
        passed(run(a, method, "/control/hold", body=b"{}", headers={"origin": "https://hmi.example"}), b"{}")
        passed(run(a, method, "/control/hold", body=b"{}", headers={"origin": "http://127.0.0.1:8000"}), b"{}")
    ws_refused(run(a, "GET", "/ws/control", ws=True, headers={"origin": "http://evil.example"}), ORIGIN_DETAIL)
    ws_passed(run(a, "GET", "/ws/control", ws=True, headers={"origin": "https://hmi.example"}))
    ws_passed(run(a, "GET", "/ws/control", ws=True, headers={"origin": "https://127.0.0.1:8000"}))
    ws_passed(run(a, "GET", "/ws/control", ws=True))  # no Origin: not a browser
    passed(run(a, "GET", "/state", headers={"origin": "http://evil.example"}))  # a read changes nothing
    passed(run(a, "HEAD", "/state", headers={"origin": "http://evil.example"}))
    b = access(allowed_origins=["https://HMI.EXAMPLEX/"])  # an allowed origin is matched in any case
    passed(run(b, "POST", "/control/hold", body=b"{}", headers={"origin": "https://hmi.examplex"}), b"{}")
    refused(run(b, "POST", "/control/hold", body=b"{}", headers={"origin": "https://hmi.example"}), 403, ORIGIN_DETAIL)
    for host in ("localhost:8000", "LocalHost:8000"):  # the own origin under the name the client used
        passed(run(a, "POST", "/control/hold", host=host, body=b"{}", headers={"origin": "http://localhost:8000"}),
               b"{}")
        passed(run(a, "POST", "/control/hold", host=host, body=b"{}", headers={"origin": "https://LOCALHOST:8000"}),
               b"{}")
        refused(run(a, "POST", "/control/hold", host=host, body=b"{}", headers={"origin": "http://localhost:8001"}),
                403, ORIGIN_DETAIL)
    # a WebSocket's scope has no method: the handshake is checked as a WebSocket whatever it says
    o = run(a, "GET", "/ws/control", ws=True, headers={"origin": "http://evil.example"})
    assert o.reached == []


def test_form_and_text_bodies_are_415_on_state_changes():
    a = access()
    for ctype in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x", " Text/Plain ;charset=1"):
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            refused(run(a, method, "/control/start", body=b"a=1", headers={"content-type": ctype}), 415, TYPE_DETAIL)
        passed(run(a, "GET", "/state", headers={"content-type": ctype}))
        ws_passed(run(a, "GET", "/ws/control", ws=True, headers={"content-type": ctype}))
    passed(run(a, "POST", "/control/start", body=b"{}", headers={"content-type": "application/json"}), b"{}")
    passed(run(a, "POST", "/control/start", body=b"{}"), b"{}")  # no content type: the route validates


def test_missing_or_wrong_credentials_are_401_with_the_challenge():
    a = access(token=TOKEN)
    refused(run(a), 401, AUTH_DETAIL)
    refused(run(a, headers={"authorization": f"Bearer {TOKEN}x"}), 401, AUTH_DETAIL)
    refused(run(a, headers={"authorization": f"Basic {TOKEN}"}), 401, AUTH_DETAIL)
    refused(run(a, headers={"cookie": f"{COOKIE}=forged"}), 401, AUTH_DETAIL)
    refused(run(a, "POST", "/control/stop", body=b"{}"), 401, AUTH_DETAIL)  # even stop needs the token
    ws_refused(run(a, "GET", "/ws/state", ws=True), AUTH_DETAIL)
    ws_refused(run(a, "GET", "/ws/control", ws=True, headers={"authorization": WRONG}), AUTH_DETAIL)
    passed(run(a, headers={"authorization": f"Bearer {TOKEN}"}))
    passed(run(a, headers={"Authorization": f"BEARER   {TOKEN}  "}))  # header and scheme in any case
    ws_passed(run(a, "GET", "/ws/control", ws=True, headers={"authorization": f"Bearer {TOKEN}"}))
    for path in ("/", "/index.html", "/login.html", "/app.js", "/style.css", "/auth/login", "/auth/logout"):
        passed(run(a, "GET", path))  # the dashboard's files and the login are public
    passed(run(a, "POST", "/auth/login", body=b'{"token": "x"}'), b'{"token": "x"}')


def test_the_session_cookie_opens_until_logout_or_rotation():
    a = access(token=TOKEN)
    sid = a.sessions.create()
    cookie = {"cookie": f"theme=dark; {COOKIE}={sid}"}
    passed(run(a, headers=cookie))
    ws_passed(run(a, "GET", "/ws/control", ws=True, headers=cookie))
    assert a.credential(cookie) == sid and a.credential({"authorization": f"Bearer {TOKEN}"}) == "bearer"
    assert a.credential({"authorization": f"Bearer {TOKEN}", **cookie}) == "bearer"
    assert a.credential({"authorization": WRONG, **cookie}) == sid
    assert a.credential({"cookie": f"{COOKIE}=forged"}) is None and a.credential({}) is None
    assert access().credential({"authorization": f"Bearer {TOKEN}"}) is None  # open service: no credential
    a.sessions.revoke(sid)
    refused(run(a, headers=cookie), 401, AUTH_DETAIL)
    assert a.credential(cookie) is None
    # either credential opens: a live session with a stale bearer header, the token with a stale cookie
    sid2 = a.sessions.create()
    passed(run(a, headers={"authorization": WRONG, "cookie": f"{COOKIE}={sid2}"}))
    refused(run(a, headers={"authorization": WRONG, "cookie": f"{COOKIE}={sid}"}), 401, AUTH_DETAIL)
    passed(run(a, headers={"authorization": f"Bearer {TOKEN}", "cookie": f"{COOKIE}=forged"}))


def test_public_read_opens_reads_of_status_routes_only():
    a = access(token=TOKEN, public_read=True)
    for path in ("/health", "/state", "/stats", "/robots", "/config", "/robot/description"):
        passed(run(a, "GET", path))
        passed(run(a, "HEAD", path))
    ws_passed(run(a, "GET", "/ws/state", ws=True))
    ws_refused(run(a, "GET", "/ws/control", ws=True), AUTH_DETAIL)
    refused(run(a, "PATCH", "/config", body=b"{}"), 401, AUTH_DETAIL)
    refused(run(a, "POST", "/control/hold", body=b"{}"), 401, AUTH_DETAIL)
    refused(run(a, "GET", "/params"), 401, AUTH_DETAIL)
    refused(run(access(token=TOKEN), "GET", "/health"), 401, AUTH_DETAIL)  # not without public_read


# ------------------------------------------------------------------------------ throttle and counting
def test_wrong_credentials_throttle_429_with_retry_after_and_the_right_token_passes(clock, caplog):
    a = access(token=TOKEN, auth_burst=2, auth_rate=0.25)  # an empty bucket refills one attempt in 4 s
    caplog.set_level(logging.WARNING, logger="fdcontrol.auth")
    before = AUTH_FAILURES._value.get()
    refused(run(a, client=("10.0.0.8", 1), headers={"authorization": WRONG}), 401, AUTH_DETAIL)
    refused(run(a, client=("10.0.0.8", 2), headers={"cookie": f"{COOKIE}=forged"}), 401, AUTH_DETAIL)
    for _ in range(2):
        o = run(a, client=("10.0.0.8", 3), headers={"authorization": WRONG})
        refused(o, 429, THROTTLE_DETAIL)
        assert o.header("retry-after") == "4"
    ws_refused(run(a, "GET", "/ws/control", ws=True, client=("10.0.0.8", 4), headers={"authorization": WRONG}),
               THROTTLE_DETAIL)
    assert AUTH_FAILURES._value.get() - before == 5  # every wrong credential, throttled ones too
    # the right token gets through the throttled address at once; no credential is just 401
    passed(run(a, client=("10.0.0.8", 5), headers={"authorization": f"Bearer {TOKEN}"}))
    ws_passed(run(a, "GET", "/ws/control", ws=True, client=("10.0.0.8", 6),
                  headers={"authorization": f"Bearer {TOKEN}"}))
    refused(run(a, client=("10.0.0.8", 7)), 401, AUTH_DETAIL)
    assert AUTH_FAILURES._value.get() - before == 5  # missing credentials cost nothing
    refused(run(a, client=("10.0.0.9", 1), headers={"authorization": WRONG}), 401, AUTH_DETAIL)  # another client
    logged = [r.getMessage() for r in caplog.records if r.name == "fdcontrol.auth"]
    assert logged == [  # each failure until the throttle, with client and path; a throttled run logs nothing more
        "authentication failed: wrong bearer token from 10.0.0.8 on /state",
        "authentication failed: unknown session cookie from 10.0.0.8 on /state (throttled from now on)",
        "authentication failed: wrong bearer token from 10.0.0.9 on /state"]


def test_a_client_without_an_address_is_throttled_as_one(clock, caplog):
    a = access(token=TOKEN, auth_burst=1, auth_rate=0.001)
    caplog.set_level(logging.WARNING, logger="fdcontrol.auth")
    refused(run(a, client=None, headers={"authorization": WRONG}), 401, AUTH_DETAIL)
    o = run(a, client=None, headers={"authorization": WRONG})
    refused(o, 429, THROTTLE_DETAIL)
    assert o.header("retry-after") == "1000"
    assert a.throttle.retry_after("") > 0 and a.throttle.retry_after("None") == 0
    assert [r.getMessage() for r in caplog.records if r.name == "fdcontrol.auth"] == [
        "authentication failed: wrong bearer token from ? on /state (throttled from now on)"]


def test_x_forwarded_for_names_the_client_only_from_a_trusted_proxy():
    """The service runs uvicorn's proxy-header middleware (server/main.py: proxy_headers and
    forwarded_allow_ips from trusted_proxies) outside this one: the throttle then counts the client
    the trusted proxy names, and ignores the header from anyone else."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    a = access(token=TOKEN, auth_burst=1, auth_rate=0.001, trusted_proxies=["127.0.0.1"])
    mw = AccessMiddleware(None, a)
    outer = ProxyHeadersMiddleware(mw, trusted_hosts="127.0.0.1")

    def through(peer: str, xff: str | None) -> Outcome:
        out = Outcome(sent=[])

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(msg: dict[str, Any]) -> None:
            out.sent.append(msg)

        headers = [(b"host", b"127.0.0.1:8000"), (b"authorization", WRONG.encode())]
        if xff is not None:
            headers.append((b"x-forwarded-for", xff.encode()))
        mw.app = lambda *_: out.reached.append({})  # never reached: every credential here is wrong
        scope = {"type": "http", "method": "GET", "path": "/state", "headers": headers, "client": (peer, 1),
                 "scheme": "http"}
        asyncio.run(outer(scope, receive, send))
        return out

    assert through("127.0.0.1", "203.0.113.5").status == 401  # the proxy's client: its first failure
    assert through("127.0.0.1", "203.0.113.6").status == 401  # another client behind the same proxy
    assert through("127.0.0.1", "203.0.113.5").status == 429
    assert a.throttle.retry_after("127.0.0.1") == 0  # the proxy itself is not throttled
    assert through("10.9.9.9", "203.0.113.6").status == 401  # an untrusted peer: the header is ignored
    assert through("10.9.9.9", "203.0.113.7").status == 429  # ... and the peer's own address counts
    assert a.throttle.retry_after("203.0.113.7") == 0


# ------------------------------------------------------------------------------ bodies
def test_bodies_are_read_whole_within_the_limit_and_replayed_once():
    a = access(max_body_bytes=1024, max_json_depth=4)
    chunks = [b'{"wrench": [', b"1, 2, 3, 4, 5, 6", b"]}"]
    msgs = [{"type": "http.request", "body": c, "more_body": i < 2} for i, c in enumerate(chunks)]
    o = run(a, "PUT", "/control/wrench", messages=msgs)
    passed(o, b"".join(chunks))
    # the app gets the body as one message, then whatever the client sends next (here: it left)
    assert o.got == [{"type": "http.request", "body": b"".join(chunks), "more_body": False},
                     {"type": "http.disconnect"}]
    passed(run(a, "POST", "/control/start", messages=[{"type": "http.request"}]), b"")  # no body key
    passed(run(a, "PUT", "/control/wrench", body=b"[" * 4 + b"1" + b"]" * 4 + b" " * 1015), b"[[[[1]]]]" + b" " * 1015)
    assert len(b"[[[[1]]]]" + b" " * 1015) == 1024  # exactly the limit passes
    passed(run(a, "PUT", "/control/wrench", body=b"{}", headers={"content-length": "1024"}), b"{}")


def test_bodies_past_the_limit_are_413_streamed_or_declared():
    a = access(max_body_bytes=1024)
    detail = "request body exceeds max_body_bytes = 1024"
    refused(run(a, "PUT", "/control/wrench", body=b" " * 1025), 413, detail)
    msgs = [{"type": "http.request", "body": b" " * 600, "more_body": True}] * 2
    o = run(a, "POST", "/control/target", messages=msgs)
    refused(o, 413, detail)
    refused(run(a, "PUT", "/control/wrench", body=b"{}", headers={"content-length": "1025"}), 413, detail)
    passed(run(a, "PUT", "/control/wrench", body=b"{}", headers={"content-length": "x1025"}), b"{}")  # not a number
    o = run(a, "GET", "/state", body=b" " * 5000)  # reads are not buffered: the app reads what it wants
    passed(o, b" " * 5000)


def test_a_client_leaving_mid_body_gets_nothing_and_nothing_reaches_the_app():
    a = access()
    o = run(a, "PUT", "/control/wrench", messages=[{"type": "http.request", "body": b"[1,", "more_body": True}])
    assert o.sent == [] and o.reached == []


def test_json_nested_too_deep_is_400():
    a = access(max_json_depth=4)
    detail = "JSON nested deeper than max_json_depth = 4"
    refused(run(a, "PUT", "/control/wrench", body=b"[[[[[1]]]]]"), 400, detail)
    refused(run(a, "PATCH", "/config", body=b'{"a": {"b": {"c": {"d": {"e": 1}}}}}'), 400, detail)
    passed(run(a, "PATCH", "/config", body=b'{"a": {"b": {"c": {"d": 1}}}}'), b'{"a": {"b": {"c": {"d": 1}}}}')
    passed(run(a, "GET", "/state", body=b"[[[[[[[["), b"[[[[[[[[")  # reads are not checked


# ------------------------------------------------------------------------------ methods and the lease
def test_a_method_the_route_does_not_take_is_405_with_allow():
    a = access()
    a.allowed = lambda path: ["GET", "HEAD"] if path == "/state" else []
    o = run(a, "DELETE", "/state", body=b"{}")
    refused(o, 405, "method DELETE not allowed")
    assert o.header("allow") == "GET, HEAD"
    passed(run(a, "GET", "/state"))
    passed(run(a, "POST", "/anything", body=b"{}"), b"{}")  # not an API route: the dashboard answers
    ws_passed(run(a, "GET", "/state", ws=True))


def test_commands_from_a_client_without_the_lease_are_409_and_stop_always_passes():
    a = access(lease_timeout=3600)  # the lease outlives the test however slow the machine
    one, two = ("10.0.0.1", 1), ("10.0.0.2", 1)
    passed(run(a, "PUT", "/control/wrench", body=b"[0]", client=one), b"[0]")  # takes the free lease
    held = "control is held by 10.0.0.1 since cycle 0 (idle "
    o = run(a, "PUT", "/control/wrench", body=b"[0]", client=two)
    assert o.detail.startswith(held) and o.detail.endswith(' s); POST /control/lease {"take": true} takes it over')
    refused(o, 409, o.detail)
    o = run(a, "POST", "/control/hold", body=b'{"hold": false}', client=two)  # releasing a hold is a command
    assert o.detail.startswith(held)
    refused(o, 409, o.detail)
    for path, body in (("/control/hold", b'{"hold": true}'), ("/control/stop", b"{}"), ("/control/move/cancel", b"")):
        passed(run(a, "POST", path, body=body, client=two), body)
    passed(run(a, "GET", "/control/lease", client=two))
    passed(run(a, "GET", "/state", client=two))
    passed(run(a, "PATCH", "/params", body=b"{}", client=two), b"{}")  # not a command
    o = run(a, "PATCH", "/config", body=b"{}", client=two)
    assert o.detail.startswith(held)
    refused(o, 409, o.detail)
    ws_passed(run(a, "GET", "/ws/control", ws=True, client=two))  # the stream's frames meet the lease, not this
    passed(run(a, "PUT", "/control/wrench", body=b"[1]", client=one), b"[1]")
    # a named client at the holder's address is another client; the holder's name is the holder
    named = {"x-fdcontrol-client": "cell-hmi"}
    o = run(a, "PUT", "/control/wrench", body=b"[0]", client=one, headers=named)
    assert o.status == 409 and o.reached == []


def test_who_a_client_is():
    a = access(token=TOKEN)
    sid = a.sessions.create()
    n = a.sessions.number(sid)
    cookie = {"cookie": f"{COOKIE}={sid}"}
    assert a.client(cookie, "10.0.0.1") == Client(f"session:{n}", f"session {n} (10.0.0.1)")
    assert a.client({**cookie, "x-fdcontrol-client": "hmi"}, "10.0.0.1").key == f"session:{n}"
    assert a.client({"x-fdcontrol-client": "hmi"}, "10.0.0.1") == Client("name:hmi@10.0.0.1", "hmi (10.0.0.1)")
    assert a.client({}, "10.0.0.1", name="py") == Client("name:py@10.0.0.1", "py (10.0.0.1)")
    assert a.client({"x-fdcontrol-client": "hmi"}, "10.0.0.1", name="py").key == "name:py@10.0.0.1"
    assert a.client({"x-fdcontrol-client": "no spaces"}, "10.0.0.1") == Client("addr:10.0.0.1", "10.0.0.1")
    assert a.client({"authorization": f"Bearer {TOKEN}"}, "10.0.0.1") == Client("addr:10.0.0.1", "10.0.0.1")
    assert a.client({}, "10.0.0.1", stream=3) == Client("addr:10.0.0.1", "websocket 3 of 10.0.0.1", 3)
    assert a.client(cookie, "10.0.0.1", stream=0).label == f"websocket 0 of session {n} (10.0.0.1)"
    assert a.client({"cookie": f"{COOKIE}=forged"}, "10.0.0.1").key == "addr:10.0.0.1"


# ------------------------------------------------------------------------------ rotation
def test_rotation_replaces_the_token_ends_sessions_and_closes_credentialed_sockets(caplog):
    a = access(token=TOKEN)
    sid = a.sessions.create()
    closed: list[tuple[str, str]] = []
    a.sockets.add("bearer", lambda why: closed.append(("bearer", why)))
    a.sockets.add(sid, lambda why: closed.append(("session", why)))
    a.sockets.add(None, lambda why: closed.append(("open", why)))
    caplog.set_level(logging.WARNING, logger="fdcontrol.auth")
    a.rotate(f"  {NEW}\n", "a test")
    assert a.token == NEW
    assert sorted(closed) == [("bearer", "the API token was replaced"), ("session", "the API token was replaced")]
    assert [r.getMessage() for r in caplog.records if r.name == "fdcontrol.auth"] == [
        "API token replaced (a test); 2 WebSocket(s) closed, every session ended"]
    refused(run(a, headers={"authorization": f"Bearer {TOKEN}"}), 401, AUTH_DETAIL)
    refused(run(a, headers={"cookie": f"{COOKIE}={sid}"}), 401, AUTH_DETAIL)
    passed(run(a, headers={"authorization": f"Bearer {NEW}"}))
    for short in ("x" * 15, " " * 20 + "x" * 15):
        with pytest.raises(ValueError, match=r"^the new token must be at least 16 characters$"):
            a.rotate(short, "a test")
    assert a.token == NEW
    a.rotate("y" * 16, "a test")  # exactly 16 is enough
    assert a.token == "y" * 16


def test_sighup_rereads_the_token_file_and_keeps_the_token_on_a_bad_one(tmp_path, caplog):
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    a = access(token_file=str(f))
    assert a.token == TOKEN
    caplog.set_level(logging.WARNING, logger="fdcontrol.auth")
    for bad in ("", "\nsecond-line-is-not-read-ever", "short\n"):
        f.write_text(bad)
        a.reload_token_file()
        assert a.token == TOKEN
    f.unlink()
    a.reload_token_file()
    assert a.token == TOKEN
    msgs = [r.getMessage() for r in caplog.records if r.name == "fdcontrol.auth"]
    assert msgs[:3] == ["SIGHUP: token unchanged: the new token must be at least 16 characters"] * 3
    assert msgs[3].startswith("SIGHUP: token unchanged: [Errno 2]") and len(msgs) == 4
    f.write_text(f"{NEW}\nignored\n")
    sid = a.sessions.create()
    a.reload_token_file()
    assert a.token == NEW and not a.sessions.valid(sid)
    assert caplog.records[-1].getMessage() == (f"API token replaced (SIGHUP re-read {f}); 0 WebSocket(s) closed, "
                                               "every session ended")
    b = access(token=TOKEN)
    b.reload_token_file()
    assert b.token == TOKEN
    assert caplog.records[-1].getMessage() == "SIGHUP: no token_file configured; the token is unchanged"


# ------------------------------------------------------------------------------ the login routes
def service(a: Access, https: bool = False, client: tuple[str, int] = ("10.0.0.3", 4000)) -> httpx.AsyncClient:
    """The login router behind the middleware, as create_app assembles them, with a route to open."""
    app = FastAPI()
    app.include_router(login_router(a))

    @app.get("/state")
    def state() -> dict[str, bool]:
        return {"ok": True}

    app.add_middleware(AccessMiddleware, access=a)
    base = "https://127.0.0.1:8000" if https else "http://127.0.0.1:8000"
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=client), base_url=base)


def test_login_sets_a_strict_httponly_session_cookie_and_logout_ends_it():
    a = access(token=TOKEN)
    closed: list[str] = []

    async def go() -> None:
        async with service(a) as c:
            r = await c.post("/auth/login", json={"token": TOKEN})
            assert r.status_code == 200 and r.json() == {"ok": True}
            cookie = r.headers["set-cookie"]
            sid = r.cookies[COOKIE]
            assert a.sessions.valid(sid) and sid != TOKEN
            parts = {p.strip().split("=")[0].lower(): p for p in cookie.split(";")}
            assert "httponly" in parts and parts["samesite"].strip().lower() == "samesite=strict"
            assert parts["path"].strip() == "Path=/" and "secure" not in parts
            assert (await c.get("/state")).status_code == 200  # the cookie opens the API
            a.sockets.add(sid, closed.append)
            a.sockets.add("bearer", lambda why: closed.append("bearer: " + why))
            r = await c.post("/auth/logout")
            assert r.status_code == 200 and r.json() == {"ok": True}
            assert 'fdcontrol_session=""' in r.headers["set-cookie"] and "Path=/" in r.headers["set-cookie"]
            assert not a.sessions.valid(sid) and closed == ["logged out"]
            c.cookies.set(COOKIE, sid)
            assert (await c.get("/state")).status_code == 401
            r = await c.post("/auth/logout")  # an ended session: nothing more closes
            assert r.status_code == 200 and closed == ["logged out"]
        async with service(a, https=True) as c:
            r = await c.post("/auth/login", json={"token": TOKEN})
            assert "secure" in r.headers["set-cookie"].lower()

    asyncio.run(go())


def test_a_wrong_login_is_401_counted_and_throttled(clock):
    a = access(token=TOKEN, auth_burst=2, auth_rate=0.5)

    async def go() -> None:
        async with service(a) as c:
            before = AUTH_FAILURES._value.get()
            for _ in range(2):
                r = await c.post("/auth/login", json={"token": TOKEN + "x"})
                assert r.status_code == 401 and r.json() == {"detail": "wrong token"} and COOKIE not in r.cookies
            r = await c.post("/auth/login", json={"token": "wrong"})
            assert r.status_code == 429 and r.json() == {"detail": "too many failed attempts; retry later"}
            assert r.headers["retry-after"] == "2"
            assert AUTH_FAILURES._value.get() - before == 3
            r = await c.post("/auth/login", json={"token": TOKEN})  # the right token, throttled or not
            assert r.status_code == 200 and a.sessions.valid(r.cookies[COOKIE])

    asyncio.run(go())


def test_login_on_an_open_service_sets_no_cookie():
    a = access()

    async def go() -> None:
        async with service(a) as c:
            r = await c.post("/auth/login", json={"token": "anything"})
            assert r.status_code == 200 and r.json() == {"ok": True} and "set-cookie" not in r.headers
            r = await c.post("/auth/token", json={"token": NEW})
            assert r.status_code == 409
            assert r.json() == {"detail": "the service runs without a token; start it with one to rotate it"}
            assert a.token is None

    asyncio.run(go())


def test_rotating_by_request_needs_the_current_token_as_bearer():
    a = access(token=TOKEN)
    need = {"detail": "rotating the token needs the current token as 'Authorization: Bearer'"}

    async def go() -> None:
        async with service(a) as c:
            r = await c.post("/auth/login", json={"token": TOKEN})
            sid = r.cookies[COOKIE]
            r = await c.post("/auth/token", json={"token": NEW})  # the session cookie alone
            assert r.status_code == 401 and r.json() == need and a.token == TOKEN
            c.cookies.clear()
            bearer = {"authorization": f"Bearer {TOKEN}"}
            r = await c.post("/auth/token", json={"token": " " * 10 + "x" * 15}, headers=bearer)
            assert r.status_code == 422 and r.json() == {"detail": "the new token must be at least 16 characters"}
            r = await c.post("/auth/token", json={"token": NEW}, headers=bearer)
            assert r.status_code == 200 and r.json() == {"ok": True} and a.token == NEW
            assert not a.sessions.valid(sid)
            assert (await c.get("/state", headers=bearer)).status_code == 401
            assert (await c.get("/state", headers={"authorization": f"Bearer {NEW}"})).status_code == 200

    asyncio.run(go())


def test_the_lease_routes_take_release_and_name_the_holder():
    a = access(lease_timeout=3600)
    took: list[int] = []
    a.on_take_over = lambda: took.append(1)
    a.lease.cycle = lambda: 7

    async def go() -> None:
        async with service(a) as c:
            hmi, py = {"x-fdcontrol-client": "hmi"}, {"x-fdcontrol-client": "py"}
            r = await c.get("/control/lease", headers=hmi)
            assert r.status_code == 200 and r.json()["holder"] is None and r.json()["yours"] is False
            r = await c.post("/control/lease", json={"take": True}, headers=hmi)
            assert r.json()["holder"] == "hmi (10.0.0.3)" and r.json()["yours"] is True
            assert r.json()["since_cycle"] == 7 and took == []  # a free lease: no take-over, no hold
            r = await c.post("/control/lease", headers=hmi)  # the default body takes it
            assert r.json()["yours"] is True and took == []
            r = await c.post("/control/lease", json={"take": False}, headers=py)
            assert r.status_code == 409
            assert r.json()["detail"] == "control is held by hmi (10.0.0.3); only the holder releases it"
            r = await c.post("/control/lease", json={"take": True}, headers=py)
            assert r.json()["holder"] == "py (10.0.0.3)" and took == [1]  # taken over: the arm holds
            r = await c.get("/control/lease", headers=hmi)
            assert r.json()["yours"] is False and r.json()["holder"] == "py (10.0.0.3)"
            r = await c.post("/control/lease", json={"take": False}, headers=py)
            assert r.status_code == 200 and r.json()["holder"] is None and r.json()["yours"] is False
        bare = access(lease_timeout=3600)  # no hold wired in (create_app wires it): a take-over still works
        async with service(bare) as c:
            await c.post("/control/lease", headers={"x-fdcontrol-client": "hmi"})
            r = await c.post("/control/lease", headers={"x-fdcontrol-client": "py"})
            assert r.status_code == 200 and r.json()["holder"] == "py (10.0.0.3)"

    asyncio.run(go())


def test_request_client_reads_the_connection_and_the_name():
    from starlette.requests import Request

    a = access()
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"X-Fdcontrol-Client", b"hmi")],
             "client": ("10.0.0.4", 1)}
    assert request_client(a, Request(scope)) == Client("name:hmi@10.0.0.4", "hmi (10.0.0.4)")
    assert request_client(a, Request({**scope, "client": None})) == Client("name:hmi@", "hmi ()")


# ------------------------------------------------------------------------------ more edges
def test_the_throttle_on_a_clock_a_throttled_run_and_its_end(clock, caplog):
    a = access(token=TOKEN, auth_burst=1, auth_rate=1.0)
    caplog.set_level(logging.WARNING, logger="fdcontrol.auth")
    wrong = {"authorization": WRONG}
    refused(run(a, headers=wrong), 401, AUTH_DETAIL)  # the one attempt of the bucket
    clock.now += 0.5
    o = run(a, headers=wrong)  # half an attempt regained: throttled, retry in 0.5 s (rounded up to 1)
    refused(o, 429, THROTTLE_DETAIL)
    assert o.header("retry-after") == "1"
    clock.now += 0.25
    refused(run(a, headers=wrong), 429, THROTTLE_DETAIL)
    clock.now += 0.25  # exactly a whole attempt regained (the throttled ones spent nothing)
    refused(run(a, headers=wrong), 401, AUTH_DETAIL)
    clock.now += 0.5
    o = run(a, headers=wrong)
    assert o.status == 429 and o.header("retry-after") == "1"
    passed(run(a, headers={"authorization": f"Bearer {TOKEN}"}))
    clock.now += 2.0  # a full bucket holds one attempt (auth_burst), however long the client waited
    refused(run(a, headers=wrong), 401, AUTH_DETAIL)
    refused(run(a, headers=wrong), 429, THROTTLE_DETAIL)
    assert [r.getMessage() for r in caplog.records if r.name == "fdcontrol.auth"] == [
        "authentication failed: wrong bearer token from 10.0.0.1 on /state (throttled from now on)"] * 3


def test_header_bytes_are_latin_1():
    """Header values are bytes; a name or value outside ASCII is read as Latin-1, never an error."""
    a = access(allowed_hosts=["caf\xe9.example"])
    o = run(a, host="caf\xe9.example", headers={"x-caf\xe9": "\xe9t\xe9", "x-fdcontrol-client": "h\xe9"})
    passed(o)
    refused(run(a, host="cafe.example"), 421, HOST_DETAIL)


def test_a_wildcard_bind_names_no_host():
    for bound in ("0.0.0.0", "::", ""):
        a = access(host=bound, token=TOKEN)
        assert not a.host_ok(bound) and not a.host_ok(f"[{bound}]") and not a.host_ok(f"[{bound}]:8000")
        refused(run(a, host=f"[{bound}]:8000"), 421, HOST_DETAIL)
        refused(run(a, host=f"{bound}:8000"), 421, HOST_DETAIL)
        passed(run(a, host="127.0.0.1:8000", headers={"authorization": f"Bearer {TOKEN}"}))
    passed(run(access(host="fd00::5", token=TOKEN), host="[FD00::5]:8000",
               headers={"authorization": f"Bearer {TOKEN}"}))
    passed(run(access(host="[fd00::5]", token=TOKEN), host="[fd00::5]:8000",
               headers={"authorization": f"Bearer {TOKEN}"}))


def test_login_throttle_counts_per_address_and_rotation_by_request_is_logged(caplog):
    a = access(token=TOKEN, auth_burst=1, auth_rate=0.001)
    caplog.set_level(logging.WARNING, logger="fdcontrol.auth")

    async def go() -> None:
        async with service(a) as c:
            assert (await c.post("/auth/login", json={"token": "wrong"})).status_code == 401
            assert (await c.post("/auth/login", json={"token": "wrong"})).status_code == 429
        async with service(a, client=("10.0.0.4", 1)) as c:
            assert (await c.post("/auth/login", json={"token": "wrong"})).status_code == 401  # its own bucket
            r = await c.post("/auth/token", json={"token": NEW}, headers={"authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 200

    asyncio.run(go())
    assert [r.getMessage() for r in caplog.records if r.name == "fdcontrol.auth"] == [
        "authentication failed: wrong login token from 10.0.0.3 on /auth/login (throttled from now on)",
        "authentication failed: wrong login token from 10.0.0.4 on /auth/login (throttled from now on)",
        "API token replaced (POST /auth/token from 10.0.0.4); 0 WebSocket(s) closed, every session ended"]


def test_the_published_schema_names_the_auth_routes_answers():
    """The OpenAPI schema (GET /openapi.json) tells clients which errors each auth route answers."""
    app = FastAPI()
    app.include_router(login_router(access(token=TOKEN)))
    paths = app.openapi()["paths"]

    def answers(path: str, method: str) -> dict[str, str]:
        op = paths[path][method]
        return {code: r["content"]["application/json"]["schema"].get("$ref", "").rsplit("/", 1)[-1]
                for code, r in op["responses"].items()}

    assert answers("/auth/login", "post") == {"200": "LoginOut", "401": "_ErrorModel", "429": "_ErrorModel",
                                              "422": "HTTPValidationError"}
    assert answers("/auth/logout", "post") == {"200": "LoginOut"}
    assert answers("/auth/token", "post") == {"200": "LoginOut", "401": "_ErrorModel", "422": "_InvalidModel"}
    assert answers("/control/lease", "get") == {"200": "LeaseOut"}
    assert answers("/control/lease", "post") == {"200": "LeaseOut", "409": "_ErrorModel", "422": "HTTPValidationError"}
    tags = {(p, m): op["tags"] for p, ops in paths.items() for m, op in ops.items()}
    assert tags == {("/auth/login", "post"): ["auth"], ("/auth/logout", "post"): ["auth"],
                    ("/auth/token", "post"): ["auth"], ("/control/lease", "get"): ["auth", "control"],
                    ("/control/lease", "post"): ["auth", "control"]}
