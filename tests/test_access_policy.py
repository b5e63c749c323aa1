"""The access policy of docs/security.md, rule by rule, in this process (server/auth.py's Access and
the middleware's verdicts, no service): Host, Origin, simple content types, token, public reads,
JSON nesting. The same rules against the real service: tests/test_security.py and test_access.py.
Fast on purpose: these are the tests `make mutation` runs against server/auth.py."""

from __future__ import annotations

import asyncio
import json

import pytest

from fdcontrol.server.auth import Access, AccessMiddleware, _cookie, _host_name, is_loopback, json_depth_ok
from fdcontrol.server.metrics import AUTH_FAILURES
from fdcontrol.server.settings import Settings

TOKEN = "a-token-of-twenty-chars"


def access(**kw) -> Access:
    return Access(Settings(**kw))


def refusal(a: Access, method: str = "GET", path: str = "/state", host: str = "127.0.0.1:8000",
            ws: bool = False, client: str = "10.0.0.1", **headers: str):
    hdrs = {"host": host, **{k.replace("_", "-"): v for k, v in headers.items()}}
    r = AccessMiddleware(lambda *a: None, a)._refusal(hdrs, host, method, path, ws, client)
    return None if r is None else r[0]


@pytest.mark.parametrize(("host", "ok"), [
    ("127.0.0.1", True), ("127.0.0.1:8000", True), ("localhost:1", True), ("LOCALHOST", True),
    ("[::1]:8000", True), ("[::1]", True), ("cell.example", False), ("127.0.0.2", False), ("", False),
    ("localhost.evil.example", False), ("evil.example:127.0.0.1", False), ("[::1]evil.example", False),
    ("[::1]]:8000", False)])
def test_host_names_without_an_allowlist(host, ok):
    assert access().host_ok(host) is ok
    assert refusal(access(), host=host) == (None if ok else 421)


def test_allowed_hosts_add_names_and_the_bound_host_counts():
    a = access(allowed_hosts=["Cell.Example"])
    assert a.host_ok("cell.example") and a.host_ok("CELL.EXAMPLE:8443") and a.host_ok("localhost")
    assert not a.host_ok("cell.example.evil") and not a.host_ok("evil.cell.example")
    assert access(allowed_hosts=["*"]).host_ok("anything.example")
    assert access(host="10.1.2.3", token=TOKEN).host_ok("10.1.2.3:8000")
    assert not access(host="0.0.0.0", token=TOKEN).host_ok("0.0.0.0")  # a wildcard bind names no host
    assert access(host="fd00::5", token=TOKEN).host_ok("[fd00::5]:8000")


@pytest.mark.parametrize(("origin", "ok"), [
    ("http://127.0.0.1:8000", True), ("https://127.0.0.1:8000", True), ("http://127.0.0.1:8000/", True),
    ("http://127.0.0.1:8001", False), ("http://localhost:8000", False), ("null", False),
    ("https://hmi.example", True), ("https://HMI.example/", True), ("http://hmi.example", False),
    ("https://hmi.example:8443", False), ("https://hmi.example.evil", False), ("https://hmi.exampleX", False)])
def test_origins_own_and_allowed(origin, ok):
    a = access(allowed_origins=["https://hmi.example/"])
    assert a.origin_ok(origin, "127.0.0.1:8000") is ok
    assert refusal(a, "POST", "/control/hold", origin=origin) == (None if ok else 403)
    assert refusal(a, "GET", "/ws/control", ws=True, origin=origin) == (None if ok else 403)
    assert refusal(a, "GET", "/state", origin=origin) is None  # a read is not a state change
    assert refusal(a, "POST", "/control/hold") is None  # no Origin: not a browser


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize(("ctype", "refused"), [
    ("application/x-www-form-urlencoded", True), ("multipart/form-data; boundary=x", True),
    ("Text/Plain;charset=utf-8", True), ("application/json", False), ("", False)])
def test_cross_site_form_types_are_refused_on_state_changes(method, ctype, refused):
    a = access()
    assert refusal(a, method, "/control/hold", content_type=ctype) == (415 if refused else None)
    assert refusal(a, "GET", "/state", content_type=ctype) is None


def test_token_bearer_cookie_public_paths_and_public_read():
    a = access(token=TOKEN)
    assert refusal(a, path="/state") == 401
    assert refusal(a, path="/state", authorization=f"Bearer {TOKEN}") is None
    assert refusal(a, path="/state", authorization=f"bearer  {TOKEN} ") is None  # scheme case, spaces
    assert refusal(a, path="/state", authorization=f"Bearer {TOKEN}x") == 401
    assert refusal(a, path="/state", authorization=TOKEN) == 401  # no scheme
    assert refusal(a, path="/", client="10.0.0.9") is None and refusal(a, path="/auth/login") is None
    sid = a.sessions.create()
    assert refusal(a, path="/state", cookie=f"x=1; fdcontrol_session={sid}") is None
    assert refusal(a, path="/state", cookie="fdcontrol_session=forged") == 401
    assert refusal(a, path="/state", cookie="other=1") == 401
    open_ = access()
    assert open_.authorized({}, "/control/start", "POST") is True  # no token: open (loopback only)
    ro = access(token=TOKEN, public_read=True)
    assert refusal(ro, "GET", "/state") is None and refusal(ro, "HEAD", "/health") is None
    assert refusal(ro, "GET", "/ws/state", ws=True) is None
    assert refusal(ro, "POST", "/control/start") == 401 and refusal(ro, "GET", "/ws/control", ws=True) == 401
    assert refusal(ro, "GET", "/params") == 401  # not a status route


def test_wrong_credentials_are_counted_and_throttled_missing_ones_are_not():
    a = access(token=TOKEN, auth_burst=3, auth_rate=0.001)
    for _ in range(5):
        assert refusal(a, client="10.0.0.7") == 401  # no credentials: not an attack on the token
    assert a.throttle.retry_after("10.0.0.7") == 0.0
    counted = AUTH_FAILURES._value.get()
    for _ in range(3):
        assert refusal(a, client="10.0.0.8", authorization="Bearer wrong-token-wrong-token") == 401
    assert refusal(a, client="10.0.0.8", authorization="Bearer wrong-token-wrong-token") == 429  # throttled
    assert AUTH_FAILURES._value.get() - counted == 4  # every wrong credential counted, the throttled one too
    assert refusal(a, client="10.0.0.8", authorization=f"Bearer {TOKEN}") is None  # the right token: never locked out
    assert refusal(a, client="10.0.0.8", authorization="Bearer wrong-token-wrong-token") == 429  # still throttled
    assert refusal(a, client="10.0.0.9", authorization="Bearer wrong-token-wrong-token") == 401  # another client
    assert refusal(a, client="10.0.0.8", path="/auth/login") is None  # the login route stays reachable


def test_token_ok_and_helpers():
    assert access(token=TOKEN).token_ok(TOKEN) and not access(token=TOKEN).token_ok(TOKEN + " ")
    assert access().token_ok("anything")
    assert _host_name("example:8000") == "example" and _host_name("[::1]:8000") == "[::1]"
    assert _host_name("[::1") == "[::1" and _host_name("fe80::1") == "fe80::1" and _host_name("plain") == "plain"
    assert _host_name("[::1]x") == "[::1]x" and _host_name("[::1]]:8000") == "[::1]]:8000"  # malformed: whole
    assert _host_name("[::1]") == "[::1]" and _host_name("[::1]:") == "[::1]"
    assert _cookie("a=1; fdcontrol_session=xyz; b=2", "fdcontrol_session") == "xyz"
    assert _cookie("fdcontrol_sessionx=1", "fdcontrol_session") is None and _cookie("", "a") is None
    assert _cookie("a=b=c; fdcontrol_session=x=y==", "fdcontrol_session") == "x=y=="  # values may hold "="
    assert is_loopback("127.0.0.5") and is_loopback("[::1]") and is_loopback("localhost")
    assert not is_loopback("10.0.0.1") and not is_loopback("0.0.0.0")
    assert not is_loopback("localhostX") and not is_loopback("X127.0.0.1") and not is_loopback("[::1]X")


@pytest.mark.parametrize(("text", "limit", "ok"), [
    ("[[[]]]", 3, True), ("[[[[]]]]", 3, False), ('{"a": {"b": [1]}}', 3, True), ('{"a": {"b": [[1]]}}', 3, False),
    ('["[[[[[[", "]]]]"]', 2, True), ('["\\"[[[[[["]', 2, True), ('["\\\\", [[[]]]]', 3, False),
    ("[]" * 50, 1, True), (b"[[]]", 1, False), ('{"a": {}, "b": {}, "c": {}}', 2, True),
    ("[[], [[[]]]]", 3, False), ("[[], [[]]]", 3, True)])
def test_json_depth_counts_brackets_outside_strings(text, limit, ok):
    assert json_depth_ok(text, limit) is ok


def _asgi(mw: AccessMiddleware, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """One HTTP request through the middleware to an app that echoes the body it got."""
    sent: list[dict] = []
    chunks = [body[i:i + 1000] for i in range(0, len(body), 1000)] or [b""]

    async def receive():
        c = chunks.pop(0) if chunks else b""
        return {"type": "http.request", "body": c, "more_body": bool(chunks)}

    async def send(msg):
        sent.append(msg)

    async def app(scope, receive, send):
        got = b""
        while True:
            m = await receive()
            got += m.get("body", b"")
            if not m.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": got})

    mw.app = app
    scope = {"type": "http", "method": method, "path": path, "client": ("127.0.0.1", 5),
             "headers": [(k.encode(), v.encode()) for k, v in {"host": "127.0.0.1:8000", **headers}.items()]}
    asyncio.run(mw(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_bodies_are_bounded_and_replayed_whole():
    mw = AccessMiddleware(None, access(max_body_bytes=2048, max_json_depth=4))
    body = json.dumps({"wrench": [1.0] * 6, "pad": "x" * 1500}).encode()
    assert _asgi(mw, "PUT", "/control/wrench", body, {"content-type": "application/json"}) == (200, body)
    status, _ = _asgi(mw, "PUT", "/control/wrench", b"[" * 3000, {"content-type": "application/json"})
    assert status == 413  # streamed past the limit
    status, _ = _asgi(mw, "PUT", "/control/wrench", b"{}", {"content-length": "4096"})
    assert status == 413  # declared past the limit
    status, text = _asgi(mw, "PUT", "/control/wrench", b"[[[[[1]]]]]", {})
    assert status == 400 and b"max_json_depth = 4" in text
    assert _asgi(mw, "PUT", "/control/wrench", b"[[[[1]]]]", {})[0] == 200
    assert _asgi(mw, "GET", "/state", b"[[[[[[[[", {})[0] == 200  # reads are not buffered nor checked
