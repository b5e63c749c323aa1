"""Dashboard sessions held by the server, the open WebSockets they (or the token) opened, and
throttling of failed authentication per client.

Sessions: ``POST /auth/login`` creates a random session id (the cookie's value), kept here with
its expiry; ``POST /auth/logout`` deletes it, so the old cookie no longer opens anything, and
closes the WebSockets that cookie opened (:class:`Sockets`). At most ``MAX_SESSIONS`` live at
once (the oldest is dropped first). Each session has a small number (its label in the lease:
"session 3"); the id itself is never shown.

Throttle: every failed attempt (a wrong bearer token, an unknown session cookie, a wrong login
token) spends one unit of the client's bucket of ``burst`` units, refilled at ``rate`` per
second. With the bucket empty, a wrong credential is answered 429 with Retry-After. The right
credential is always let through: whoever sends wrong tokens from the operator's address (or
through the same proxy) cannot lock the operator out. Requests carrying no credentials cost
nothing (a browser's first visit before login).
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

MAX_SESSIONS = 256
SESSION_TTL = 12 * 3600.0  # s
MAX_CLIENTS = 4096  # throttle buckets kept (least recently failing dropped first)


class Sessions:
    def __init__(self, ttl: float = SESSION_TTL, max_sessions: int = MAX_SESSIONS) -> None:
        self.ttl, self.max = ttl, max_sessions
        self._live: OrderedDict[str, float] = OrderedDict()
        self._numbers: dict[str, int] = {}
        self._made = 0
        self._lock = threading.Lock()

    def create(self) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._made += 1
            self._live[sid] = time.monotonic() + self.ttl
            self._numbers[sid] = self._made
            while len(self._live) > self.max:
                old, _ = self._live.popitem(last=False)
                self._numbers.pop(old, None)
        return sid

    def number(self, sid: str) -> int:
        """The session's public number (0 for an unknown id)."""
        with self._lock:
            return self._numbers.get(sid, 0)

    def valid(self, sid: str | None) -> bool:
        if not sid:
            return False
        with self._lock:
            expiry = self._live.get(sid)
            if expiry is None:
                return False
            if time.monotonic() > expiry:
                del self._live[sid]
                self._numbers.pop(sid, None)
                return False
            return True

    def revoke(self, sid: str | None) -> bool:
        with self._lock:
            self._numbers.pop(sid or "", None)
            return self._live.pop(sid or "", None) is not None

    def revoke_all(self) -> int:
        with self._lock:
            n = len(self._live)
            self._live.clear()
            self._numbers.clear()
            return n


class Sockets:
    """The open WebSockets and the credential each was opened with ("bearer", a session id, or
    None on an open service), so logout and token rotation can close them."""

    def __init__(self) -> None:
        self._open: dict[int, tuple[str | None, Callable[[str], None]]] = {}
        self._next = 0
        self._lock = threading.Lock()

    def add(self, credential: str | None, close: Callable[[str], None]) -> int:
        """Register a socket; ``close(reason)`` must be safe to call from any thread."""
        with self._lock:
            self._next += 1
            self._open[self._next] = (credential, close)
            return self._next

    def remove(self, sid: int) -> None:
        with self._lock:
            self._open.pop(sid, None)

    def close(self, which: Callable[[str | None], bool], reason: str) -> int:
        """Close every socket whose credential satisfies ``which``; the number closed."""
        with self._lock:
            chosen = [k for k, (cred, _) in self._open.items() if which(cred)]
            closers = [self._open.pop(k)[1] for k in chosen]
        for close in closers:
            close(reason)
        return len(closers)


class Throttle:
    """A token bucket of failed attempts per client address."""

    def __init__(self, burst: int, rate: float) -> None:
        self.burst, self.rate = float(burst), float(rate)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client → (units, at)
        self._lock = threading.Lock()

    def _units(self, client: str, now: float) -> float:
        units, at = self._buckets.get(client, (self.burst, now))
        return min(self.burst, units + (now - at) * self.rate)

    def retry_after(self, client: str) -> float:
        """0 when the client may try; else seconds until its next attempt is checked."""
        with self._lock:
            if client not in self._buckets:
                return 0.0
            units = self._units(client, time.monotonic())
        return 0.0 if units >= 1.0 else (1.0 - units) / self.rate

    def failed(self, client: str) -> None:
        now = time.monotonic()
        with self._lock:
            units = self._units(client, now)
            self._buckets[client] = (max(units - 1.0, 0.0), now)
            self._buckets.move_to_end(client)
            while len(self._buckets) > MAX_CLIENTS:
                self._buckets.popitem(last=False)


def retry_header(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))
