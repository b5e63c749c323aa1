"""WebSocket delivery end to end: the real service (uvicorn on 127.0.0.1) and real websockets
clients. Every socket gets the state that acknowledges a wrench; a client whose socket is full
holds up neither the others nor the control stream (its states are dropped and counted)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import time
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from .service import Service

WATCHERS = 5


@pytest.fixture(scope="module")
def service():
    svc = Service("--rate", "250")
    try:
        httpx.post(svc.url + "/control/start", timeout=10).raise_for_status()
        yield svc
    finally:
        svc.stop()


def dropped(service: Service) -> int:
    return int(httpx.get(service.url + "/stats", timeout=10).json()["ws_dropped"])


def stalled_reader(service: Service) -> socket.socket:
    """A /ws/state?decimation=1 client that completes the handshake and never reads again, with a
    4 KiB receive window: the service's send to it blocks after a few hundred kB at most."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", service.port))
    sock.sendall(f"GET /ws/state?decimation=1 HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n"
                 "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 13\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)  # byte by byte: no state frame is taken off the socket
        assert chunk, "the service closed the handshake"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


async def until_ack(ws: Any, seq: int, limit: int = 5000) -> list[dict[str, Any]]:
    """The messages up to and including the first that acknowledges ``seq`` (bounded in count)."""
    out = []
    for _ in range(limit):
        out.append(json.loads(await ws.recv()))
        if out[-1]["seq_ack"] >= seq:
            return out
    raise AssertionError(f"no acknowledgement of seq {seq} in {limit} messages")


def test_every_socket_gets_the_acknowledging_state_and_a_stalled_reader_holds_up_nobody(service):
    url = service.url.replace("http", "ws")
    sock = stalled_reader(service)
    try:
        d0 = dropped(service)
        for _ in range(200):  # bounded: the stalled sender blocks, then its states are dropped
            if dropped(service) > d0:
                break
            time.sleep(0.05)
        assert dropped(service) > d0

        async def run() -> tuple[list[list[dict[str, Any]]], list[list[list[dict[str, Any]]]]]:
            async with contextlib.AsyncExitStack() as stack:
                ctl = await stack.enter_async_context(connect(url + "/ws/control?decimation=1"))
                watchers = [await stack.enter_async_context(connect(url + "/ws/state?decimation=1"))
                            for _ in range(WATCHERS)]
                acks, seen = [], [[] for _ in watchers]
                for seq in range(1, 6):
                    await ctl.send(json.dumps({"wrench": [1.0, 0, 0, 0, 0, 0], "seq": 1000 + seq}))
                    acks.append(await until_ack(ctl, 1000 + seq))
                    for got, ws in zip(seen, watchers, strict=True):
                        got.append(await until_ack(ws, 1000 + seq))
                return acks, seen

        acks, seen = asyncio.run(asyncio.wait_for(run(), 60))
        assert dropped(service) > d0  # the stalled reader is still stalled: dropping, not queueing
    finally:
        sock.close()
    for got in [acks, *seen]:
        msgs = [m for batch in got for m in batch]
        assert [batch[-1]["seq_ack"] for batch in got] == [1001, 1002, 1003, 1004, 1005]
        assert not any(m["stale"] for m in msgs)  # delivered publishes, not heartbeats
        cycles = [m["cycle"] for m in msgs]
        assert all(b > a for a, b in itertools.pairwise(cycles)), cycles[:8]  # never repeated or backwards


def test_plain_wrench_messages_read_as_the_model_reads_them():
    """The streamed wrench's plain form skips pydantic's model (server/routers/ws.py plain_wrench): wherever it
    answers, the model accepts the message and gives the same values of the same types; every other message
    (bools, strings, NaN/Inf, huge or out-of-range numbers, wrong lengths, tuples, unknown frames, odd seqs,
    subclasses) is left to the model. Messages of every mix of those parts, one at a time."""
    import enum
    import math

    from pydantic import ValidationError

    from fdcontrol.server import schemas
    from fdcontrol.server.routers.ws import plain_wrench

    class Num(float):
        pass

    class Count(enum.IntEnum):
        ONE = 1

    entries = [1.5, 0, -3, -0.0, 2**53, -(2**53), 2**53 + 1, 1e308, -1e-300, True, False, "1.0", None, math.nan,
               math.inf, -math.inf, 10**400, Num(2.0), Count.ONE, [1.0]]
    frames = [..., "base", "tool", "Base", "tool ", None, 1]
    seqs = [..., None, 0, 7, schemas.SEQ_MAX, schemas.SEQ_MAX + 1, -1, True, 3.0, "3", Count.ONE]
    plain, rng = 0, __import__("random").Random(5)
    messages = []
    for e in entries:  # each odd entry at each place, in an otherwise plain wrench
        for at in range(6):
            messages.append({"wrench": [1.0, 0, -2.5, 0, 0, 3][:at] + [e] + [1.0, 0, -2.5, 0, 0, 3][at + 1:]})
    for n in (0, 5, 7):
        messages.append({"wrench": [1.0] * n})
    messages.append({"wrench": (1.0, 0, 0, 0, 0, 0)})
    for frame, seq in itertools.product(frames, seqs):
        for _ in range(3):
            m = {"wrench": [rng.choice([0, 1.25, -7, 2**40, 0.5]) for _ in range(6)]}
            if frame is not ...:
                m["frame"] = frame
            if seq is not ...:
                m["seq"] = seq
            messages.append(m)
    for m in messages:
        got = plain_wrench(m)
        try:
            v = schemas.WrenchIn.model_validate({k: m[k] for k in ("wrench", "frame", "seq") if k in m})
            want = (v.wrench, v.frame, v.seq)
        except ValidationError:
            want = None
        if got is None:
            continue
        plain += 1
        assert want is not None, m  # never takes what the model refuses
        assert got == want and [type(x) for x in got[0]] == [type(x) for x in want[0]] == [float] * 6, m
        assert type(got[2]) is type(want[2]), m
    # the plain form is taken wherever it is plain: 8 plain entries at 6 places, 3 plain frames (absent, base, tool)
    # × 5 plain seqs (absent, null, 0, 7, SEQ_MAX) × 3 wrenches of ints and floats
    assert plain == 8 * 6 + 3 * 5 * 3


def test_received_json_reads_as_json_loads_reads_it():
    """The WebSocket's JSON reader (server/routers/ws.py loads: orjson where it reads the same, json.loads else)
    gives json.loads's object — of the same types, repr for repr — or json.loads's error, word for word: odd texts
    (duplicate keys, NaN and infinities, integers beyond 64 bits, float overflow and subnormals, lone surrogates,
    a BOM, trailing data), random integers of up to 70 bits and random floats in three spellings."""
    import json
    import math
    import random
    import struct

    from fdcontrol.server.routers.ws import loads

    def read(f, text):
        try:
            x = f(text)
            return "ok", type(x), repr(x)
        except Exception as exc:  # the error itself is compared: its type and its message
            return "error", type(exc), str(exc)

    texts = ['{"a": 1, "a": 2}', "1e400", "-1e400", "1E-400", "-0", "-0.0", "18446744073709551615",
             "18446744073709551616", "-9223372036854775808", "-9223372036854775809", "9223372036854775807",
             "123456789012345678901234567890", '{"seq": 99999999999999999999}', '"\\ud800"', "NaN", "Infinity",
             "\ufeff{}", ' {"a": [1, 2.5e-3, "x\\u00e9"]} ', "[1,]", '{"a":1}x', "1" * 5000, "00", "-", "",
             "1.7976931348623159e308", "4.9e-324", '"a\x01"', '{"wrench": [1.0, 0, -2, 0, 0, 3], "seq": 5}']
    rng = random.Random(4)
    texts += [str(rng.choice([-1, 1]) * rng.getrandbits(rng.randint(1, 70))) for _ in range(3000)]
    for _ in range(3000):
        x = struct.unpack("d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(x):
            texts += [repr(x), f"{x:.17e}", f"[{x:.5g}]"]
    for t in texts:
        assert read(loads, t) == read(json.loads, t), t
