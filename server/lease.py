"""Control is a lease: one client commands the arm at a time; everyone may read, hold and stop.

A *client* is a dashboard session (its cookie), else a name the client gives itself
(header ``X-Fdcontrol-Client``, or ``?client=`` on a WebSocket), else its address. A
WebSocket on ``/ws/control`` is a *stream* of its client: while a stream holds the lease,
another client's stream is refused, and of one client's streams only the newest commands (a
reconnecting client replaces its old stream, whose frames are refused from then on); REST
commands of the holder's client are allowed (the dashboard's buttons and its push pad are one
operator).

* The first client to command takes a free lease automatically, so single-client use needs
  nothing.
* Another client's command gets 409 naming the holder and since when; it may take the lease
  over explicitly (``POST /control/lease {"take": true}``), which holds the arm so the new
  controller starts from rest.
* The lease ends when its holder releases it (``{"take": false}``), when the holding stream's
  connection closes, or ``lease_timeout`` seconds after its holder's last command.
* Hold (``{"hold": true}``), stop and cancelling a move never need the lease; releasing a hold
  does.

Which requests are commands is decided here from the method and path (:func:`needs_lease`),
so routes added later under ``/control/`` are covered without doing anything.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: state changes that never need the lease: stopping is never a privilege
FREE = frozenset({("POST", "/control/stop"), ("POST", "/control/move/cancel"), ("POST", "/control/lease"),
                  ("GET", "/control/lease")})
NAME = re.compile(r"[A-Za-z0-9_.\-]{1,32}")


def client_name(raw: str | None) -> str | None:
    """A client's own name when it is short and plain (anything else is ignored)."""
    return raw if raw and NAME.fullmatch(raw) else None


def needs_lease(method: str, path: str, body: bytes = b"") -> bool:
    """Whether this REST request commands the arm: every state change under ``/control/`` and
    ``PATCH /config``, except stop, cancelling a move, the lease itself and a hold."""
    if method not in ("POST", "PUT", "PATCH", "DELETE") or (method, path) in FREE:
        return False
    if path == "/control/hold":
        return _releases(body)
    return path.startswith("/control/") or path == "/config"


def _releases(body: bytes) -> bool:
    """True when a hold request asks to release (``{"hold": false}``); a malformed body is left to
    the route's validation (it refuses it), so it needs no lease either."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("hold") is False


@dataclass(frozen=True)
class Client:
    """Who sends a command: ``key`` tells clients apart, ``stream`` a WebSocket (None: REST)."""

    key: str
    label: str
    stream: int | None = None


@dataclass
class _Holder:
    client: Client
    since: float  # time.time()
    since_cycle: int
    last: float  # time.monotonic() of the last command


class LeaseError(Exception):
    """A command from a client that does not hold the lease (409)."""

    def __init__(self, detail: str, lease: dict[str, Any]) -> None:
        super().__init__(detail)
        self.detail, self.lease = detail, lease


class Lease:
    def __init__(self, timeout: float, cycle: Callable[[], int] = lambda: 0) -> None:
        self.timeout = float(timeout)
        self.cycle = cycle  # the loop's current cycle (set by the app)
        self._holder: _Holder | None = None
        self._lock = threading.Lock()
        self.version = 0  # changes whenever the holder changes (the state streams' cache key)

    def _current(self, now: float) -> _Holder | None:
        h = self._holder
        if h is not None and now - h.last > self.timeout:
            self._holder = h = None
            self.version += 1
        return h

    def _take(self, c: Client, now: float) -> None:
        try:
            cycle = int(self.cycle())
        except Exception:  # a dead loop process: the lease still works
            cycle = -1
        self._holder = _Holder(c, time.time(), cycle, now)
        self.version += 1

    def command(self, c: Client) -> None:
        """Let ``c`` command (taking a free lease) or raise :class:`LeaseError`."""
        now = time.monotonic()
        with self._lock:
            h = self._current(now)
            if h is None:
                self._take(c, now)
                return
            if h.client.key == c.key and (c.stream is None or h.client.stream is None or c.stream >= h.client.stream):
                if c.stream is not None and c.stream != h.client.stream:  # the client's (newest) stream holds it
                    h.client = c
                    self.version += 1
                h.last = now
                return
            info = self._info(h, now)
        raise LeaseError(f"control is held by {info['holder']} since cycle {info['since_cycle']} "
                         f"(idle {info['idle']:.1f} s); POST /control/lease {{\"take\": true}} takes it over", info)

    def take(self, c: Client) -> bool:
        """Take the lease whoever holds it; True when another client held it (a take-over)."""
        now = time.monotonic()
        with self._lock:
            h = self._current(now)
            other = h is not None and h.client.key != c.key
            if h is None or other or h.client.stream != c.stream:
                self._take(c, now)
            else:
                h.last = now
            return other

    def release(self, c: Client) -> None:
        """Give the lease up (only its holder may; a free lease stays free)."""
        now = time.monotonic()
        with self._lock:
            h = self._current(now)
            if h is None:
                return
            if h.client.key != c.key:
                info = self._info(h, now)
                raise LeaseError(f"control is held by {info['holder']}; only the holder releases it", info)
            self._holder = None
            self.version += 1

    def ended(self, stream: int) -> None:
        """A WebSocket closed: a lease it held ends now."""
        with self._lock:
            if self._holder is not None and self._holder.client.stream == stream:
                self._holder = None
                self.version += 1

    def info(self, c: Client | None = None) -> dict[str, Any]:
        """``{"holder", "since", "since_cycle", "idle", "timeout"}`` (holder None: free), plus
        ``"yours"`` when asked for a client."""
        now = time.monotonic()
        with self._lock:
            h = self._current(now)
            out = self._info(h, now)
            if c is not None:
                out["yours"] = h is not None and h.client.key == c.key and c.stream in (None, h.client.stream)
        return out

    def _info(self, h: _Holder | None, now: float) -> dict[str, Any]:
        if h is None:
            return {"holder": None, "since": None, "since_cycle": None, "idle": None, "timeout": self.timeout}
        return {"holder": h.client.label, "since": h.since, "since_cycle": h.since_cycle,
                "idle": round(now - h.last, 3), "timeout": self.timeout}
