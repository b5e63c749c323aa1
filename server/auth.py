"""Access control in one place: an ASGI middleware in front of every route and WebSocket.

Because it wraps the whole application, routers added later (server/routers/*.py) are
covered without doing anything. Checks, in order, for HTTP requests and WebSocket handshakes:

1. Host: the Host header must be one of localhost, 127.0.0.1, [::1], the bound host or
   ``allowed_hosts`` (stops DNS rebinding: a foreign name resolving to us is refused, 421).
2. Origin: a browser's Origin header must be the service's own origin (scheme://Host) or in
   ``allowed_origins`` — refused (403) for WebSocket handshakes and state-changing methods.
3. Simple requests: POST/PUT/PATCH/DELETE with a form or text content type are refused (415),
   so no cross-site HTML form can start the arm.
4. Body: REST bodies above ``max_body_bytes`` are refused (413); JSON nested deeper than
   ``max_json_depth`` is refused (400).
5. Token (when configured): ``Authorization: Bearer <token>`` or the dashboard's session
   cookie (set by ``POST /auth/login``, HttpOnly, SameSite=Strict; a random id the server
   keeps, deleted by ``POST /auth/logout``), else 401. The dashboard files and the login route
   are public; with ``public_read`` the GET status routes and ``/ws/state`` are too.
6. Throttle: a client whose wrong credentials used up ``auth_burst`` attempts gets 429 with
   Retry-After for each further wrong one, regaining ``auth_rate`` attempts per second
   (server/sessions.py); the right credential always gets through. Every wrong credential
   is counted (``fdcontrol_auth_failures_total``) and logged (logger ``fdcontrol.auth``, the
   first of a throttled run only). The client is its connection's address: ``X-Forwarded-For``
   counts only from a configured ``trusted_proxies`` address (server/main.py).
7. Lease: a command (server/lease.py: ``needs_lease``) from a client that does not hold the
   control lease is refused (409, naming the holder).

The token can be replaced without a restart (:meth:`Access.rotate`: ``POST /auth/token`` with
the current token, or SIGHUP re-reading ``token_file``); that ends every session and closes
every WebSocket opened with the old credentials. Without a token the service refuses to bind a
non-loopback address (server/main.py), and an empty token is refused at startup.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Body, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from fdcontrol.server.lease import Client, Lease, LeaseError, client_name, needs_lease
from fdcontrol.server.metrics import AUTH_FAILURES
from fdcontrol.server.sessions import Sessions, Sockets, Throttle, retry_header
from fdcontrol.server.settings import MIN_TOKEN, Settings

log = logging.getLogger("fdcontrol.auth")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

COOKIE = "fdcontrol_session"
LOOPBACK = ("localhost", "127.0.0.1", "::1")
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SIMPLE_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")
PUBLIC_PATHS = frozenset({"/", "/index.html", "/login.html", "/app.js", "/task.js", "/params.js", "/style.css",
                          "/login.js", "/favicon.ico", "/auth/login", "/auth/logout"})
MIDDLEWARE_ERRORS = {400: "JSON nested deeper than max_json_depth", 401: "token required",
                     403: "foreign Origin", 409: "another client holds the control lease",
                     413: "body larger than max_body_bytes",
                     415: "a form or text body on a state change", 421: "unknown Host",
                     429: "too many failed authentication attempts"}
CLIENT_HEADER = "x-fdcontrol-client"  # a client's own name, to tell REST clients at one address apart
READ_PATHS = frozenset({"/health", "/state", "/stats", "/robots", "/config", "/ws/state", "/robot/description"})


def is_loopback(host: str) -> bool:
    return host.strip("[]") in LOOPBACK or host.startswith("127.")


def json_depth_ok(text: str | bytes, limit: int) -> bool:
    """True when no bracket nesting exceeds `limit` (strings skipped); linear, no recursion."""
    data = text.encode() if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= limit:
        return True
    depth, in_str, esc = 0, False, False
    for c in data:
        if in_str:
            if esc:
                esc = False
            elif c == 0x5C:  # backslash
                esc = True
            elif c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return False
        elif c in (0x5D, 0x7D):
            depth -= 1
    return True


def _host_name(host: str) -> str:
    """'example:8000' → 'example'; '[::1]:8000' → '[::1]'; a malformed one ('[::1]x') stays whole."""
    if host.startswith("["):
        name, bracket, rest = host.partition("]")
        return name + bracket if not rest or rest.startswith(":") else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Access:
    """The access policy derived from the settings."""

    def __init__(self, settings: Settings) -> None:
        self.token = settings.api_token()
        self.token_file = settings.token_file
        self._rotate_lock = threading.Lock()
        self.sessions = Sessions()
        self.sockets = Sockets()
        self.lease = Lease(settings.lease_timeout)
        self.throttle = Throttle(settings.auth_burst, settings.auth_rate)
        self.public_read = settings.public_read
        bound = settings.host
        hosts = {"localhost", "127.0.0.1", "[::1]", *settings.allowed_hosts}
        if bound not in ("0.0.0.0", "::", ""):
            hosts.add(f"[{bound}]" if ":" in bound and not bound.startswith("[") else bound)
        self.hosts = {h.lower() for h in hosts}
        self.any_host = "*" in self.hosts
        self.origins = {o.rstrip("/").lower() for o in settings.allowed_origins}
        self.max_body = settings.max_body_bytes
        self.max_depth = settings.max_json_depth
        self.allowed: Callable[[str], list[str]] = lambda path: []  # set by create_app
        self.on_take_over: Callable[[], None] = lambda: None  # set by create_app: hold the arm

    def host_ok(self, host: str) -> bool:
        return self.any_host or _host_name(host.lower()) in self.hosts

    def origin_ok(self, origin: str, host: str) -> bool:
        """The service's own origin (http or https, the Host it was asked under) or an allowed one."""
        origin = origin.rstrip("/").lower()
        return origin in (f"http://{host.lower()}", f"https://{host.lower()}") or origin in self.origins

    def authorized(self, headers: dict[str, str], path: str, method: str) -> bool | None:
        """True (open), False (credentials given and wrong: a failed attempt) or None (none given)."""
        if self.token is None or path in PUBLIC_PATHS:
            return True
        if self.public_read and method in ("GET", "HEAD") and path in READ_PATHS:
            return True
        auth = headers.get("authorization", "")
        cookie = _cookie(headers.get("cookie", ""), COOKIE)
        if auth[:7].lower() == "bearer ":
            if self.token_ok(auth[7:].strip()):
                return True
        elif cookie is None:
            return None
        return cookie is not None and self.sessions.valid(cookie)

    def token_ok(self, token: str) -> bool:
        current = self.token
        return current is None or hmac.compare_digest(token.encode(), current.encode())

    def credential(self, headers: dict[str, str]) -> str | None:
        """What opened this (already authorized) request: "bearer", the session id, or None (open)."""
        if self.token is None:
            return None
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and self.token_ok(auth[7:].strip()):
            return "bearer"
        cookie = _cookie(headers.get("cookie", ""), COOKIE)
        return cookie if cookie is not None and self.sessions.valid(cookie) else None

    def client(self, headers: dict[str, str], address: str, name: str | None = None,
               stream: int | None = None) -> Client:
        """Who sends a request (server/lease.py): a session, a named client at its address, or the address."""
        cred = self.credential(headers)
        name = client_name(name if name is not None else headers.get(CLIENT_HEADER))
        if cred not in (None, "bearer"):
            n = self.sessions.number(cred)
            key, label = f"session:{n}", f"session {n} ({address})"
        elif name is not None:
            key, label = f"name:{name}@{address}", f"{name} ({address})"
        else:
            key, label = f"addr:{address}", address
        if stream is not None:
            label = f"websocket {stream} of {label}"
        return Client(key, label, stream)

    def rotate(self, new: str, why: str) -> None:
        """Replace the token: every session ends, every WebSocket opened with a credential closes."""
        new = new.strip()
        if len(new) < MIN_TOKEN:
            raise ValueError(f"the new token must be at least {MIN_TOKEN} characters")
        with self._rotate_lock:
            self.token = new
            self.sessions.revoke_all()
            closed = self.sockets.close(lambda cred: cred is not None, "the API token was replaced")
        log.warning("API token replaced (%s); %d WebSocket(s) closed, every session ended", why, closed)

    def reload_token_file(self) -> None:
        """SIGHUP: read ``token_file`` again (a blank or short first line keeps the old token)."""
        if not self.token_file:
            log.warning("SIGHUP: no token_file configured; the token is unchanged")
            return
        try:
            lines = Path(self.token_file).read_text().splitlines()
            self.rotate(lines[0] if lines else "", f"SIGHUP re-read {self.token_file}")
        except (OSError, ValueError) as exc:
            log.warning("SIGHUP: token unchanged: %s", exc)

    def failed(self, client: str, what: str, path: str) -> bool:
        """Count and log one wrong credential; True when this client is throttled (answer 429)."""
        AUTH_FAILURES.inc()
        if self.throttle.retry_after(client) > 0:
            return True
        self.throttle.failed(client)
        throttled = self.throttle.retry_after(client) > 0
        log.warning("authentication failed: %s from %s on %s%s", what, client or "?", path,
                    " (throttled from now on)" if throttled else "")
        return False


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        k, _, v = part.strip().partition("=")
        if k == name:
            return v
    return None


class AccessMiddleware:
    """Pure ASGI middleware applying :class:`Access` to HTTP and WebSocket scopes."""

    def __init__(self, app: Any, access: Access) -> None:
        self.app, self.access = app, access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        ws = scope["type"] == "websocket"
        method = "GET" if ws else scope.get("method", "GET")
        path = scope.get("path", "")
        host = headers.get("host", "")
        refusal = self._refusal(headers, host, method, path, ws, _client(scope))
        if refusal is not None:
            await _refuse(scope, send, *refusal)
            return
        body = b""
        if not ws and method in UNSAFE:
            buffered = await self._buffered(scope, receive, send, headers)
            if buffered is None:
                return
            receive, body = buffered
        if not ws:
            allowed = self.access.allowed(path)
            if allowed and method not in allowed:  # an API route, another method: 405, not the dashboard's 404
                await _refuse(scope, send, 405, f"method {method} not allowed",
                              [(b"allow", ", ".join(allowed).encode())])
                return
            if needs_lease(method, path, body):
                try:
                    self.access.lease.command(self.access.client(headers, _client(scope)))
                except LeaseError as exc:
                    await _refuse(scope, send, 409, exc.detail)
                    return
        await self.app(scope, receive, send)

    def _refusal(self, headers: dict[str, str], host: str, method: str, path: str,
                 ws: bool, client: str) -> tuple[int, str] | tuple[int, str, list[tuple[bytes, bytes]]] | None:
        a = self.access
        if not a.host_ok(host):
            return 421, "unknown Host header; add it to allowed_hosts to serve under that name"
        origin = headers.get("origin")
        if origin is not None and (ws or method in UNSAFE) and not a.origin_ok(origin, host):
            return 403, "foreign Origin refused; add it to allowed_origins to allow it"
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if not ws and method in UNSAFE and ctype in SIMPLE_TYPES:
            return 415, "state changes need a JSON body (Content-Type: application/json)"
        verdict = a.authorized(headers, path, method)
        if verdict:
            return None  # the right credential always gets through, throttled or not
        if verdict is False:
            what = "wrong bearer token" if headers.get("authorization") else "unknown session cookie"
            if a.failed(client, what, path):
                return 429, "too many failed authentication attempts; retry later", [
                    (b"retry-after", retry_header(a.throttle.retry_after(client)).encode())]
        return 401, "authentication required: 'Authorization: Bearer <token>' or POST /auth/login"

    async def _buffered(self, scope: Scope, receive: Receive, send: Send,
                        headers: dict[str, str]) -> tuple[Receive, bytes] | None:
        """Read the whole body within max_body_bytes, check its nesting, replay it to the app."""
        limit = self.access.max_body
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await _refuse(scope, send, 413, f"request body exceeds max_body_bytes = {limit}")
            return None
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return None
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _refuse(scope, send, 413, f"request body exceeds max_body_bytes = {limit}")
                return None
            chunks.append(chunk)
            if not msg.get("more_body", False):
                break
        body = b"".join(chunks)
        if not json_depth_ok(body, self.access.max_depth):
            await _refuse(scope, send, 400, f"JSON nested deeper than max_json_depth = "
                                                     f"{self.access.max_depth}")
            return None
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay, body


async def _refuse(scope: Scope, send: Send, status: int, detail: str,
                  extra: list[tuple[bytes, bytes]] | None = None) -> None:
    if scope["type"] == "websocket":
        # before accept: the server answers the handshake with an HTTP 403
        await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})
        return
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="fdcontrol"'))
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------------- dashboard login
class LoginIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    token: str = Field(min_length=1, max_length=4096)


class LoginOut(BaseModel):
    ok: bool


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    token: str = Field(min_length=MIN_TOKEN, max_length=4096, description="the new API token")


class LeaseIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    take: bool = Field(True, description="true: take the lease (over from its holder); false: release it")


class LeaseOut(BaseModel):
    holder: str | None = Field(description="who holds the lease (null: free)")
    since: float | None = Field(description="when it was taken (Unix time, s)")
    since_cycle: int | None = Field(description="the loop's cycle when it was taken")
    idle: float | None = Field(description="s since the holder's last command")
    timeout: float = Field(description="the lease ends this long after its holder's last command (s)")
    yours: bool = Field(False, description="the asking client holds it")


def request_client(access: Access, request: Request) -> Client:
    return access.client({k.lower(): v for k, v in request.headers.items()},
                         request.client.host if request.client else "")


def login_router(access: Access) -> APIRouter:
    router = APIRouter(tags=["auth"])
    errors: dict[int | str, dict[str, Any]] = {401: {"model": _ErrorModel}}

    @router.post("/auth/login", response_model=LoginOut, responses={**errors, 429: {"model": _ErrorModel}})
    def login(body: LoginIn, request: Request, response: Response) -> Any:
        """Exchange the token for an HttpOnly, SameSite=Strict session cookie (the dashboard's way in)."""
        if access.token is None:
            return {"ok": True}
        client = request.client.host if request.client else ""
        if not access.token_ok(body.token):
            if access.failed(client, "wrong login token", "/auth/login"):
                return JSONResponse(status_code=429, content={"detail": "too many failed attempts; retry later"},
                                    headers={"retry-after": retry_header(access.throttle.retry_after(client))})
            return JSONResponse(status_code=401, content={"detail": "wrong token"})
        response.set_cookie(COOKIE, access.sessions.create(), httponly=True, samesite="strict",
                            secure=request.url.scheme == "https", path="/")
        return {"ok": True}

    @router.post("/auth/logout", response_model=LoginOut)
    def logout(request: Request, response: Response) -> Any:
        """End the dashboard session: the server forgets it, so the cookie no longer opens anything,
        and the WebSockets it opened are closed."""
        sid = request.cookies.get(COOKIE)
        if sid and access.sessions.revoke(sid):
            access.sockets.close(lambda cred: cred == sid, "logged out")
        response.delete_cookie(COOKIE, path="/")
        return {"ok": True}

    @router.post("/auth/token", response_model=LoginOut, responses={**errors, 422: {"model": _InvalidModel}})
    def rotate(body: TokenIn, request: Request) -> Any:
        """Replace the API token without a restart; needs the current token as a bearer token (a
        session cookie is not enough). Every session ends and every WebSocket opened with the old
        credentials closes. The new token lives in memory: put it in the token file (or the
        environment) too, or a restart brings the configured one back."""
        if access.token is None:
            return JSONResponse(status_code=409, content={"detail": "the service runs without a token; "
                                                                    "start it with one to rotate it"})
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() != "bearer " or not access.token_ok(auth[7:].strip()):
            return JSONResponse(status_code=401, content={"detail": "rotating the token needs the current "
                                                                    "token as 'Authorization: Bearer'"})
        try:
            access.rotate(body.token, f"POST /auth/token from {request.client.host if request.client else '?'}")
        except ValueError as exc:
            return JSONResponse(status_code=422, content={"detail": str(exc)})
        return {"ok": True}

    @router.get("/control/lease", response_model=LeaseOut, tags=["control"])
    def lease(request: Request) -> Any:
        """Who holds the control lease, since when, and whether it is yours."""
        return access.lease.info(request_client(access, request))

    @router.post("/control/lease", response_model=LeaseOut, tags=["control"],
                 responses={409: {"model": _ErrorModel}})
    def take_lease(request: Request, body: LeaseIn = Body(default_factory=LeaseIn)) -> Any:  # noqa: B008
        """Take the control lease (``{"take": true}``, over from another holder: the arm holds, so you
        start from rest and release the hold yourself) or give it up (``{"take": false}``)."""
        me = request_client(access, request)
        if body.take:
            if access.lease.take(me):
                access.on_take_over()
        else:
            try:
                access.lease.release(me)
            except LeaseError as exc:
                return JSONResponse(status_code=409, content={"detail": exc.detail})
        return access.lease.info(me)

    return router


class _ErrorModel(BaseModel):
    detail: str


class _InvalidModel(BaseModel):
    """A 422: the request's fields (a list, as every route's validation errors) or a refused value (text)."""

    detail: list[dict[str, Any]] | str
