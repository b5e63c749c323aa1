"""Waiting in tests: on the loop's own record (its state's ``cycle``, ``stamp``, ``fault``), never a
fixed sleep. A deadline only ends a hung test; it is never what a test measures."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
HUNG = 60.0  # s: a bound on a wait that, on a loaded 2-core machine, normally takes well under a second


def until(read: Callable[[], T], ok: Callable[[T], bool], timeout: float = HUNG, what: str = "") -> T:
    """The first value of `read()` for which `ok` holds (polled); AssertionError past the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        v = read()
        if ok(v):
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or 'condition'} not reached in {timeout:g} s; last: {v!r}"[:2000])
        time.sleep(0.002)


def cycles_later(read_state: Callable[[], dict[str, Any]], n: int, each: Callable[[], Any] | None = None,
                 timeout: float = HUNG) -> dict[str, Any]:
    """The state once the loop has run `n` more cycles by its own count (`each()` called meanwhile)."""
    c0 = read_state()["cycle"]

    def read() -> dict[str, Any]:
        if each is not None:
            each()
        return read_state()

    return until(read, lambda s: s["cycle"] >= c0 + n, timeout, f"{n} more cycles after cycle {c0}")


def loop_cycles_later(loop: Any, n: int, timeout: float = HUNG) -> int:
    """For a ControlLoop in this process: its cycle count once it ran `n` more cycles."""
    c0 = loop.state.cycle
    return until(lambda: loop.state.cycle, lambda c: c >= c0 + n, timeout, f"{n} more cycles after {c0}")
