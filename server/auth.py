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
   Retry-After, its credentials unchecked, regaining ``auth_rate`` attempts per second
   (server/sessions.py).

Without a token the service refuses to bind a non-loopback address (server/main.py).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from fdcontrol.server.sessions import Sessions, Throttle, retry_header
from fdcontrol.server.settings import Settings

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
                     403: "foreign Origin", 413: "body larger than max_body_bytes",
                     415: "a form or text body on a state change", 421: "unknown Host",
                     429: "too many failed authentication attempts"}
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
    """'example:8000' → 'example'; '[::1]:8000' → '[::1]'."""
    if host.startswith("["):
        return host[: host.index("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Access:
    """The access policy derived from the settings."""

    def __init__(self, settings: Settings) -> None:
        self.token = settings.api_token()
        self.sessions = Sessions()
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

    def host_ok(self, host: str) -> bool:
        return self.any_host or _host_name(host.lower()) in self.hosts

    def origin_ok(self, origin: str, host: str, scheme: str) -> bool:
        origin = origin.rstrip("/").lower()
        own = {f"{s}://{host.lower()}" for s in ("http", "https")} if scheme else set()
        return origin in own or origin in self.origins

    def authorized(self, headers: dict[str, str], path: str, method: str) -> bool | None:
        """True (open), False (credentials given and wrong: a failed attempt) or None (none given)."""
        if self.token is None or path in PUBLIC_PATHS:
            return True
        if self.public_read and method in ("GET", "HEAD") and path in READ_PATHS:
            return True
        auth = headers.get("authorization", "")
        cookie = _cookie(headers.get("cookie", ""), COOKIE)
        if auth[:7].lower() == "bearer ":
            if hmac.compare_digest(auth[7:].strip().encode(), self.token.encode()):
                return True
        elif cookie is None:
            return None
        return cookie is not None and self.sessions.valid(cookie)

    def token_ok(self, token: str) -> bool:
        return self.token is None or hmac.compare_digest(token.encode(), self.token.encode())


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
            await _refuse(scope, receive, send, *refusal)
            return
        if not ws and method in UNSAFE:
            receive = await self._buffered(scope, receive, send, headers)
            if receive is None:
                return
        if not ws:
            allowed = self.access.allowed(path)
            if allowed and method not in allowed:  # an API route, another method: 405, not the dashboard's 404
                await _refuse(scope, receive, send, 405, f"method {method} not allowed",
                              [(b"allow", ", ".join(allowed).encode())])
                return
        await self.app(scope, receive, send)

    def _refusal(self, headers: dict[str, str], host: str, method: str, path: str,
                 ws: bool, client: str = "") -> tuple[int, str] | tuple[int, str, list[tuple[bytes, bytes]]] | None:
        a = self.access
        if not a.host_ok(host):
            return 421, "unknown Host header; add it to allowed_hosts to serve under that name"
        origin = headers.get("origin")
        if origin is not None and (ws or method in UNSAFE) and not a.origin_ok(origin, host, "http"):
            return 403, "foreign Origin refused; add it to allowed_origins to allow it"
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if not ws and method in UNSAFE and ctype in SIMPLE_TYPES:
            return 415, "state changes need a JSON body (Content-Type: application/json)"
        if a.token is not None and path not in PUBLIC_PATHS and (wait := a.throttle.retry_after(client)) > 0:
            return 429, "too many failed authentication attempts; retry later", [
                (b"retry-after", retry_header(wait).encode())]
        verdict = a.authorized(headers, path, method)
        if verdict is False:
            a.throttle.failed(client)
        if not verdict:
            return 401, "authentication required: 'Authorization: Bearer <token>' or POST /auth/login"
        return None

    async def _buffered(self, scope: Scope, receive: Receive, send: Send,
                        headers: dict[str, str]) -> Receive | None:
        """Read the whole body within max_body_bytes, check its nesting, replay it to the app."""
        limit = self.access.max_body
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await _refuse(scope, receive, send, 413, f"request body exceeds max_body_bytes = {limit}")
            return None
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return None
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _refuse(scope, receive, send, 413, f"request body exceeds max_body_bytes = {limit}")
                return None
            chunks.append(chunk)
            if not msg.get("more_body", False):
                break
        body = b"".join(chunks)
        if not json_depth_ok(body, self.access.max_depth):
            await _refuse(scope, receive, send, 400, f"JSON nested deeper than max_json_depth = "
                                                     f"{self.access.max_depth}")
            return None
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, detail: str,
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


def login_router(access: Access) -> APIRouter:
    router = APIRouter(tags=["auth"])
    errors: dict[int | str, dict[str, Any]] = {401: {"model": _ErrorModel}}

    @router.post("/auth/login", response_model=LoginOut, responses={**errors, 429: {"model": _ErrorModel}})
    def login(body: LoginIn, request: Request, response: Response) -> Any:
        """Exchange the token for an HttpOnly, SameSite=Strict session cookie (the dashboard's way in)."""
        if access.token is None:
            return {"ok": True}
        client = request.client.host if request.client else ""
        if (wait := access.throttle.retry_after(client)) > 0:
            return JSONResponse(status_code=429, content={"detail": "too many failed attempts; retry later"},
                                headers={"retry-after": retry_header(wait)})
        if not access.token_ok(body.token):
            access.throttle.failed(client)
            return JSONResponse(status_code=401, content={"detail": "wrong token"})
        response.set_cookie(COOKIE, access.sessions.create(), httponly=True, samesite="strict",
                            secure=request.url.scheme == "https", path="/")
        return {"ok": True}

    @router.post("/auth/logout", response_model=LoginOut)
    def logout(request: Request, response: Response) -> Any:
        """End the dashboard session: the server forgets it, so the cookie no longer opens anything."""
        access.sessions.revoke(request.cookies.get(COOKIE))
        response.delete_cookie(COOKIE, path="/")
        return {"ok": True}

    return router


class _ErrorModel(BaseModel):
    detail: str
