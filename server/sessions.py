"""Dashboard sessions held by the server, and throttling of failed authentication per client.

Sessions: ``POST /auth/login`` creates a random session id (the cookie's value), kept here with
its expiry; ``POST /auth/logout`` deletes it, so the old cookie no longer opens anything. At
most ``MAX_SESSIONS`` live at once (the oldest is dropped first).

Throttle: every failed attempt (a wrong bearer token, an unknown session cookie, a wrong login
token) spends one unit of the client's bucket of ``burst`` units, refilled at ``rate`` per
second. With the bucket empty the client's credentials are not checked at all: 429 with
Retry-After, so guessing runs at ``rate`` tries per second at most. Requests carrying no
credentials cost nothing (a browser's first visit before login).
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections import OrderedDict

MAX_SESSIONS = 256
SESSION_TTL = 12 * 3600.0  # s
MAX_CLIENTS = 4096  # throttle buckets kept (least recently failing dropped first)


class Sessions:
    def __init__(self, ttl: float = SESSION_TTL, max_sessions: int = MAX_SESSIONS) -> None:
        self.ttl, self.max = ttl, max_sessions
        self._live: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def create(self) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._live[sid] = time.monotonic() + self.ttl
            while len(self._live) > self.max:
                self._live.popitem(last=False)
        return sid

    def valid(self, sid: str | None) -> bool:
        if not sid:
            return False
        with self._lock:
            expiry = self._live.get(sid)
            if expiry is None:
                return False
            if time.monotonic() > expiry:
                del self._live[sid]
                return False
            return True

    def revoke(self, sid: str | None) -> bool:
        with self._lock:
            return self._live.pop(sid or "", None) is not None


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
