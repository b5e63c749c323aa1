"""The RDT force–torque sensor client (fdcontrol.drivers.netft) against a loopback peer that speaks
ATI's RDT protocol (tests/rdt_peer.py, written from the protocol description with its own packing)."""

from __future__ import annotations

import math
import random
import socket
import struct
import time

import numpy as np
import pytest

from fdcontrol.drivers.netft import REORDER_WINDOW, RESTART_INTERVAL, NetFT, record
from tests.rdt_peer import RdtPeer


def host() -> str:
    return f"127.24.{random.randint(1, 254)}.{random.randint(1, 254)}"


def pending(ft: NetFT) -> bool:
    """Is a datagram waiting in the client's socket (not yet read)?"""
    try:
        ft.sock.recv(512, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return False
    return True


def step_until(loop, pred, n: int, period: float):
    """Step the loop until pred(state), a cycle every `period` s (bounded: ≤ n cycles); the last state."""
    s = loop.step()
    for _ in range(n):
        if pred(s):
            break
        time.sleep(period)
        s = loop.step()
    return s


def read_until(ft: NetFT, pred, seconds: float = 5.0):
    """Read every 2 ms until pred(reading) (bounded: `seconds`)."""
    w = ft.read()
    for _ in range(int(seconds / 0.002)):
        if pred(w):
            break
        time.sleep(0.002)
        w = ft.read()
    return w


@pytest.fixture
def peer():
    p = RdtPeer(host())
    yield p
    p.close()


def test_start_request_and_counts_to_newton(peer):
    """The start request is the 8 bytes of the manual (0x1234, command 2, 0 samples: endless); a
    record's counts divided by counts per force / torque are N and N·m, in the record's order."""
    peer.counts = [1_500_000, -2_000_000, 250_000, 100_000, -300_000, 700_000]
    ft = NetFT(f"{peer.sock.getsockname()[0]}", counts_per_force=1e6, counts_per_torque=1e5)
    try:
        w = read_until(ft, lambda w: w is not None)
        assert peer.requests[0] == (0x1234, 2, 0)
        assert np.allclose(w, [1.5, -2.0, 0.25, 1.0, -3.0, 7.0])
        peer.counts = [0, 0, -1_000_000, 0, 0, 0]  # latest wins
        w = read_until(ft, lambda w: w is not None and w[2] < 0)
        assert np.allclose(w, [0, 0, -1.0, 0, 0, 0])
    finally:
        ft.close()
    deadline = time.monotonic() + 2
    while (0x1234, 0, 0) not in peer.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (0x1234, 0, 0) in peer.requests  # close stops the stream


def test_bad_records_are_ignored(peer):
    """Wrong size, a non-zero status word, an older sequence number: ignored; the last good reading stays."""
    peer.counts = [1_000_000, 0, 0, 0, 0, 0]
    ft = NetFT(peer.sock.getsockname()[0], timeout=5.0)
    try:
        assert read_until(ft, lambda w: w is not None and ft.rdt_sequence > 10) is not None
        peer.pause()  # no record streams after this; the last ones are in ft's socket buffer (loopback)
        for _ in range(100):  # bounded: the records streamed before the pause
            if not pending(ft):
                break
            ft.read()
        assert not pending(ft)
        seq = ft.rdt_sequence
        peer.send_raw(struct.pack("!3L6l", seq + 1, 0, 0x8000_0000, 9, 9, 9, 9, 9, 9))  # status: error
        peer.send_raw(struct.pack("!3L6l", seq - 5, 0, 0, -7_000_000, 0, 0, 0, 0, 0))  # older
        peer.send_raw(b"\x00" * 35)  # truncated
        w = read_until(ft, lambda w: ft.status != 0)  # the three are in the buffer: one read takes them
        assert not pending(ft)  # all three were read, and none changed the reading
        assert np.allclose(w, [1.0, 0, 0, 0, 0, 0])
        assert ft.status == 0x8000_0000  # the sensor's own error report, for the operator
        peer.send_raw(struct.pack("!3L6l", seq + 2, 0, 0, 2_000_000, 0, 0, 0, 0, 0))  # newer, good
        w = read_until(ft, lambda w: w[0] > 1.5)
        assert np.allclose(w, [2.0, 0, 0, 0, 0, 0])
        assert ft.status == 0 and ft.problem() is None  # a healthy record clears it
    finally:
        ft.close()


def test_a_quiet_sensor_is_stale_and_asked_again(peer):
    """No record for `timeout`: None (the loop's sensor watchdog holds); the start request is repeated."""
    peer.counts = [1_000_000, 0, 0, 0, 0, 0]
    ft = NetFT(peer.sock.getsockname()[0], timeout=0.05)
    try:
        assert np.allclose(read_until(ft, lambda w: w is not None), [1.0, 0, 0, 0, 0, 0])  # 1e6 counts/N
        peer.paused = True
        assert read_until(ft, lambda w: w is None, seconds=3.0) is None
        starts = sum(1 for r in peer.requests if r[1] == 2)
        read_until(ft, lambda w: sum(1 for r in peer.requests if r[1] == 2) > starts, seconds=3.0)
        assert sum(1 for r in peer.requests if r[1] == 2) > starts
        peer.paused = False
        assert np.allclose(read_until(ft, lambda w: w is not None), [1.0, 0, 0, 0, 0, 0])
    finally:
        ft.close()


@pytest.mark.parametrize("bad", [{"counts_per_force": math.nan}, {"counts_per_torque": 0},
                                 {"timeout": math.inf}, {"address": "127.0.0.1:99999"},
                                 {"address": "127.0.0.1:port"}, {"address": "127.0.0.1:-1"},
                                 {"counts_per_force": True}, {"timeout": True}])
def test_bad_options_are_refused(bad):
    """A clear ValueError (no DNS query is sent: the tests stay on loopback)."""
    opts = {"address": "127.0.0.1", **bad}
    with pytest.raises(ValueError):
        NetFT(**opts).close()


def test_a_restarted_stream_is_read_again(peer):
    """The sensor counts a stream's records from 1 for each start request (ATI's manual, RDT). After
    a quiet spell the client asks again; the new stream's low sequence numbers are not "older" records."""
    peer.counts = [1_000_000, 0, 0, 0, 0, 0]
    ft = NetFT(peer.sock.getsockname()[0], timeout=0.05)
    try:
        assert read_until(ft, lambda w: w is not None and ft.rdt_sequence > 50) is not None
        peer.paused = True
        assert read_until(ft, lambda w: w is None, seconds=3.0) is None
        starts = sum(1 for r in peer.requests if r[1] == 2)
        read_until(ft, lambda w: sum(1 for r in peer.requests if r[1] == 2) > starts, seconds=3.0)
        peer.counts = [3_000_000, 0, 0, 0, 0, 0]
        peer.paused = False  # the new stream: 1, 2, 3, …
        w = read_until(ft, lambda w: w is not None, seconds=3.0)
        assert w is not None and np.allclose(w, [3.0, 0, 0, 0, 0, 0]) and ft.rdt_sequence < 50
    finally:
        ft.close()


def test_a_record_of_the_old_stream_after_a_restart_does_not_hide_the_new_stream():
    """A start request sent while the old stream's next record is already on its way (the sensor sends
    it before it reads the request): that record arrives first, then the new stream counting from 1.
    The new stream's records are read at once, not dropped as "older" until they pass the old count."""
    addr = host()
    sensor = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sensor.bind((addr, 49152))
    sensor.settimeout(3.0)  # bounded: a client that never asks fails the test, not hangs it
    ft = NetFT(addr, timeout=0.05)
    try:
        data, client = sensor.recvfrom(64)
        assert struct.unpack("!HHI", data) == (0x1234, 2, 0)
        for seq in range(1, 101):  # the first stream: 1 N (few: a socket buffer holds a few hundred)
            sensor.sendto(struct.pack("!3L6l", seq, seq, 0, 1_000_000, 0, 0, 0, 0, 0), client)
        assert read_until(ft, lambda w: ft.rdt_sequence == 100) is not None
        # quiet: the client finds the stream stale and asks again (at most once per second)
        assert read_until(ft, lambda w: w is None, seconds=3.0) is None
        sensor.settimeout(0.002)
        request = None
        for _ in range(1500):  # bounded: ≤ 3 s of reads
            ft.read()
            try:
                request = struct.unpack("!HHI", sensor.recvfrom(64)[0])
                break
            except TimeoutError:
                pass
        assert request == (0x1234, 2, 0)
        sensor.sendto(struct.pack("!3L6l", 101, 101, 0, 1_000_000, 0, 0, 0, 0, 0), client)  # the old stream's
        for seq in range(1, 21):  # the new stream: 3 N, counting from 1
            sensor.sendto(struct.pack("!3L6l", seq, seq, 0, 3_000_000, 0, 0, 0, 0, 0), client)
        w = read_until(ft, lambda w: w is not None and w[0] > 2.0, seconds=0.5)
        assert w is not None and np.allclose(w, [3.0, 0, 0, 0, 0, 0]) and ft.rdt_sequence == 20, (w, ft.rdt_sequence)
    finally:
        ft.close()
        sensor.close()


class _Script:
    """A socket that hands out the given records once, then nothing."""

    def __init__(self, peer: tuple[str, int], records: list[bytes]) -> None:
        self.peer, self.records = peer, list(records)

    def recvfrom(self, n: int):
        if not self.records:
            raise BlockingIOError
        return self.records.pop(0), self.peer

    def sendto(self, data: bytes, addr) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize("back, asked, read", [(1, True, False), (REORDER_WINDOW - 1, True, False),
                                               (REORDER_WINDOW, True, True), (2**31, True, True), (0, True, True),
                                               (REORDER_WINDOW, False, False), (2**31 - 1, False, False),
                                               (2**31, False, True), (0, False, True)])
def test_a_record_behind_the_newest_is_ignored_up_to_the_reorder_window(back, asked, read):
    """Up to REORDER_WINDOW − 1 behind the newest: overtaken on the network, ignored; further back: the
    sensor's new stream when a start request went out within the last second (``asked``: the client's
    own, at construction), else a late record, ignored. The same number again is read (latest wins); 2³¹
    behind is ahead (the sequence wraps)."""
    ft = NetFT("127.0.0.1", timeout=1.0)
    if not asked:
        ft._asked = time.monotonic() - RESTART_INTERVAL - 0.5  # the last start request 1.5 s ago
    ft.sock.close()
    newest = 1000
    ft.sock = _Script(ft.peer, [record(newest, 0, 0, [1_000_000, 0, 0, 0, 0, 0]),
                                record((newest - back) % 2**32, 0, 0, [2_000_000, 0, 0, 0, 0, 0])])
    w = ft.read()
    assert w is not None and w[0] == (2.0 if read else 1.0)
    assert ft.rdt_sequence == ((newest - back) % 2**32 if read else newest)
    ft.close()


class _Flood:
    """A socket on which records never stop arriving (a flood), each newer than the last."""

    def __init__(self, peer: tuple[str, int]) -> None:
        self.peer, self.reads = peer, 0

    def recvfrom(self, n: int):
        self.reads += 1
        if self.reads > 100_000:  # the test's own bound: an unbounded drain fails here, not by hanging
            raise AssertionError("read() kept draining a flooded socket")
        return struct.pack("!3L6l", self.reads, 0, 0, 1_000_000, 0, 0, 0, 0, 0), self.peer

    def sendto(self, data: bytes, addr) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_flood_cannot_keep_read_busy():
    """read() takes a bounded number of records per call and returns the newest of them."""
    ft = NetFT("127.0.0.1", timeout=1.0)
    ft.sock.close()
    ft.sock = flood = _Flood(ft.peer)
    first = ft.read()
    assert first is not None and np.allclose(first, [1.0, 0, 0, 0, 0, 0])
    assert flood.reads <= 1000 and ft.rdt_sequence == flood.reads
    ft.close()


@pytest.mark.parametrize("sensor, reason", [({"address": "127.0.0.1", "adress": "127.0.0.2"}, "unknown: adress"),
                                            ({"counts_per_force": 1e6}, "address"), ("127.0.0.1", "address")])
def test_the_franka_drivers_sensor_options_are_checked(sensor, reason):
    """driver_options.sensor: a misspelt or missing key is a clear ValueError before any connection."""
    from fdcontrol.drivers.franka import FrankaDriver
    from fdcontrol.model.robot import RobotModel

    with pytest.raises(ValueError, match=reason):
        FrankaDriver(RobotModel.load("fr3"), 0.001, robot_ip="127.0.0.1", wrench_source="sensor", sensor=sensor,
                     library=object())


def test_a_sensor_gone_quiet_makes_a_law_that_reads_it_hold(peer):
    """The loop (MuJoCo arm, force law) reads the RDT sensor as its driver's wrench: a push moves
    the arm; the stream stops: the sensor watchdog trips and the arm holds (its reference brakes to
    zero); the stream returns: the watchdog clears. Steps on the loop's own clock (time.monotonic()),
    bounded in count."""
    from fdcontrol.experiments import physics as P
    from fdcontrol.model.robot import RobotModel

    peer.counts = [5_000_000, 0, 0, 0, 0, 0]  # 5 N
    ft = NetFT(peer.sock.getsockname()[0], timeout=0.05)
    try:
        assert np.allclose(read_until(ft, lambda w: w is not None), [5.0, 0, 0, 0, 0, 0])
        r = P.rig(RobotModel.load("ur10"), law=P.force_law())
        r.drv.read_wrench = ft.read  # the driver's wrench reading is the network sensor's

        def run(pred, n: int = 3000):
            return step_until(r.loop, pred, n, 0.001)

        s = run(lambda s: np.max(np.abs(s.qd_ref)) > 1e-3)
        assert s.watchdog != "sensor_stale" and not s.holding and np.max(np.abs(s.qd_ref)) > 1e-3
        peer.paused = True
        s = run(lambda s: s.watchdog == "sensor_stale")
        assert s.watchdog == "sensor_stale" and s.holding, (s.watchdog, s.holding)
        s = run(lambda s: not np.any(s.qd_ref))
        assert not np.any(s.qd_ref), s.qd_ref  # braked to standstill
        peer.paused = False
        s = run(lambda s: s.watchdog != "sensor_stale")
        assert s.watchdog != "sensor_stale"
        assert r.loop.fault is None
    finally:
        ft.close()


def test_the_sensors_status_word_reaches_the_loop_state_and_health_by_name(peer):
    """A sensor that reports an error in its status word (the RDT stand-in sets it): the Franka driver's
    glue publishes it as the loop state's sensor_status, naming the sensor and the word, and /health's
    verdict says so; when the sensor reports healthy records again, both clear."""
    from types import SimpleNamespace

    from fdcontrol.drivers.franka import FrankaDriver
    from fdcontrol.experiments import physics as P
    from fdcontrol.model.robot import RobotModel
    from fdcontrol.server.routers.health import health

    peer.counts = [1_000_000, 0, 0, 0, 0, 0]
    ft = NetFT(peer.sock.getsockname()[0], timeout=0.5)
    try:
        assert read_until(ft, lambda w: w is not None) is not None
        r = P.rig(RobotModel.load("ur10"), law=P.force_law())
        franka = SimpleNamespace(sensor=ft, sensor_status=None)  # the Franka driver's sensor path, on this arm

        def read_wrench():
            w = FrankaDriver.read_wrench(franka)
            r.drv.sensor_status = franka.sensor_status
            return w

        r.drv.read_wrench = read_wrench

        def advance(pred, n: int = 2000):
            return step_until(r.loop, pred, n, 0.002)

        assert advance(lambda s: s.cycle > 5).sensor_status is None
        peer.status = 0x2000_0000
        s = advance(lambda s: s.sensor_status is not None)
        host_, port = ft.peer
        assert s.sensor_status is not None and f"{host_}:{port}" in s.sensor_status and "0x20000000" in s.sensor_status

        worker = SimpleNamespace(state=lambda: (s, time.monotonic()), problem=lambda: None)
        request = SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(worker=worker, supervisor=None)))
        body = health(request)
        assert body["status"] == "fault" and "force–torque sensor" in body["fault"] and "0x20000000" in body["fault"]
        peer.status = 0
        s = advance(lambda s: s.sensor_status is None)
        assert s.sensor_status is None and health(request)["status"] == "ok"
    finally:
        ft.close()
