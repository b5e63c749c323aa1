"""The Python client closes its WebSocket promptly although the caller read no state."""

from __future__ import annotations

import asyncio
import time

import pytest

from fdcontrol.client import CLOSE_TIMEOUT, AsyncClient, Client

from .service import Service

# the client uses websockets as its current API asks (connect as a context manager): no deprecation
pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")


@pytest.fixture(scope="module")
def service():
    s = Service()
    yield s
    s.stop()


def test_control_stream_closes_in_under_a_second_without_reading(service):
    with Client(service.url) as c:
        c.hold(False)
        with c.control_stream(decimation=1) as s:  # 500 states/s into a queue nobody reads
            for _ in range(50):
                s.send_twist([0.0] * 6)
                time.sleep(0.02)
            t0 = time.monotonic()
        closed = time.monotonic() - t0
        print(f"closed after {closed * 1e3:.1f} ms")
        assert closed < CLOSE_TIMEOUT  # the documented bound; was the 10 s default close_timeout
        assert c.health()["status"] == "ok"


def test_teleoperate_returns_after_its_duration(service):
    with Client(service.url) as c:
        t0 = time.monotonic()
        sent = c.teleoperate(lambda t: [0.0] * 6, rate=50, duration=1.0)
        took = time.monotonic() - t0
    print(f"1 s teleoperation returned after {took:.2f} s, {sent} twists")
    assert sent >= 1 and took < 1.0 + CLOSE_TIMEOUT + 1.0  # duration + closing + connecting (loaded machine)


def test_async_control_stream_closes_in_under_a_second_without_reading(service):
    async def main() -> float:
        async with AsyncClient(service.url) as c, c.control_stream(decimation=1) as s:
            for _ in range(50):
                await s.send_wrench([0.0] * 6)
                await asyncio.sleep(0.02)
            t0 = time.monotonic()
        return time.monotonic() - t0

    closed = asyncio.run(main())
    print(f"async: closed after {closed * 1e3:.1f} ms")
    assert closed < CLOSE_TIMEOUT
