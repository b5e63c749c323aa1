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


def test_a_streamed_wrench_or_twist_reads_as_the_json_it_was():
    """Stream.send_wrench / send_twist write their JSON with orjson where it reads back as json.dumps's text does
    (the service reads both): the same object, types and all, for finite floats, ±0, ints and floats as entries,
    both frames, any seq; json.dumps's very text for NaN and infinities (which the service then refuses, as ever),
    a frame that is no plain str and a seq beyond 64 bits; MessagePack streams as before."""
    import json
    import math
    import random

    import msgpack

    from fdcontrol.client import Stream

    class Frame(str):
        pass

    class Socket:
        def __init__(self) -> None:
            self.sent: list[str | bytes] = []

        def send(self, data: str | bytes) -> None:
            self.sent.append(data)

    rng = random.Random(6)
    vectors = [[0.0] * 6, [-0.0] * 6, [1, 2, 3, 4, 5, 6], [1e308, -1e-308, 5e-324, 0.1, 1 / 3, 2**60],
               [math.nan, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, math.inf], [0, 0, -math.inf, 0, 0, 0]]
    vectors += [[rng.uniform(-1e3, 1e3) for _ in range(6)] for _ in range(200)]
    for binary in (False, True):
        for k, v in enumerate(vectors):
            for frame, seq in (("base", 0), ("tool", 2**53 + k), (Frame("tool"), k), ("base", 2**70))[:4 - binary]:
                for send, key in (("send_wrench", "wrench"), ("send_twist", "twist")):
                    ws = Socket()
                    s = Stream(ws, binary)  # type: ignore[arg-type]
                    s.seq = seq - 1
                    assert getattr(s, send)(v, frame) == seq
                    want = {key: [float(x) for x in v], "frame": frame, "seq": seq}
                    (got,) = ws.sent
                    if binary:
                        assert got == msgpack.packb(want)
                    elif not all(map(math.isfinite, want[key])) or type(frame) is not str or seq >= 2**64:
                        assert got == json.dumps(want)
                    else:
                        assert repr(json.loads(got)) == repr(json.loads(json.dumps(want))), got
