"""UDP bridge: latest wins, silence detected within the timeout, rebuild on PATCH /config."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import numpy as np
import pytest

from fdcontrol import make_mapping
from fdcontrol.drivers.udp import StaleStateError, UdpBridgeDriver
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME, RobotModel
from tests.service import Service, free_port
from tests.waits import cycles_later, until


def state_datagram(seq: int, q: np.ndarray) -> bytes:
    return np.concatenate(([seq, time.monotonic()], q, np.zeros(len(q)))).astype("<f8").tobytes()


@pytest.fixture(scope="module")
def ur10() -> RobotModel:
    return RobotModel.load("ur10")


def test_ten_queued_datagrams_the_newest_wins(ur10):
    port = free_port()
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    q0 = np.array(HOME["ur10"])
    sender = threading.Timer(0.05, lambda: tx.sendto(state_datagram(0, q0), ("127.0.0.1", port)))
    sender.start()
    drv = UdpBridgeDriver(ur10, listen=f"127.0.0.1:{port}", timeout=0.1, connect_timeout=5)
    try:
        for k in range(1, 11):  # ten states queue up while the loop is busy
            tx.sendto(state_datagram(k, q0 + 0.001 * k), ("127.0.0.1", port))
        # no wait: on loopback, sendto returns once the datagram is in the receiver's queue
        t_before = time.monotonic()  # the datagrams are taken (stamped as received) within this read
        js = drv.read()
        t_received = time.monotonic()
        np.testing.assert_allclose(js.q, q0 + 0.010, atol=1e-12)  # the 10th, not the 1st
        # silence: every read that still answers checked a state at most `timeout` old, the first
        # refusal found it older. Each read is bracketed by this host's monotonic clock, so the
        # bounds hold however late this thread gets scheduled on a loaded machine.
        last_ok = t_before
        with pytest.raises(StaleStateError) as refused:
            while time.monotonic() - t_received < 1.0:
                t_call = time.monotonic()
                drv.read()
                last_ok = t_call
                time.sleep(0.002)
        t_refused = time.monotonic()
        assert last_ok - t_received <= 0.1, f"a state {last_ok - t_received:.3f} s old was still answered"
        assert t_refused - t_before > 0.1, f"refused after {t_refused - t_before:.3f} s, before the timeout"
        assert "no joint state" in str(refused.value)
    finally:
        drv.close()
        tx.close()


def test_udp_connect_timeout_is_one_line(ur10):
    with pytest.raises(StaleStateError) as e:
        UdpBridgeDriver(ur10, listen="127.0.0.1:0", connect_timeout=0.2)
    assert "\n" not in str(e.value) and "connect_timeout" in str(e.value)


def test_patch_rate_rebuilds_the_udp_driver_on_the_same_port():
    port = free_port()
    stop = threading.Event()
    q0 = np.array(HOME["ur10"])

    def robot():  # a separate 'driver' streaming its state at 250 Hz
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        k = 0
        while not stop.is_set() and k < 20000:
            k += 1
            s.sendto(state_datagram(k, q0), ("127.0.0.1", port))
            time.sleep(0.004)
        s.close()

    t = threading.Thread(target=robot, daemon=True)
    t.start()
    svc = None
    try:
        opts = {"listen": f"127.0.0.1:{port}", "connect_timeout": 10}
        svc = Service("--driver", "udp", "--robot", "ur10", env={"FDCONTROL_DRIVER_OPTIONS": json.dumps(opts)})
        r = httpx.patch(svc.url + "/config", json={"rate": 250.0}, timeout=20)
        assert r.status_code == 200, r.text
        assert httpx.get(svc.url + "/config", timeout=5).json()["rate"] == 250.0
        assert httpx.post(svc.url + "/control/start", timeout=5).status_code == 200
        st = cycles_later(lambda: httpx.get(svc.url + "/state", timeout=5).json(), 75)  # 0.3 s at 250 Hz
        assert st["running"] and st["fault"] is None
    finally:
        stop.set()
        if svc is not None:
            svc.stop()
        t.join(5)


def fake_robot(port: int, dof: int, stop: threading.Event, log: list):
    """A separate 'driver process': integrates the velocity references it receives."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.002)
    q, qd, seq = np.array(HOME["ur10"]), np.zeros(dof), 0
    while not stop.is_set():
        seq += 1
        s.sendto(np.concatenate(([seq, time.monotonic()], q, qd)).astype("<f8").tobytes(),
                 ("127.0.0.1", port))
        try:
            msg = np.frombuffer(s.recv(65536), dtype="<f8")
            qd = msg[2 + dof:]
            log.append(msg)
        except TimeoutError:
            pass
        q = q + 0.002 * qd
        time.sleep(0.001)
    s.close()


def test_udp_bridge_drives_a_separate_driver(ur10):
    port = 50000 + np.random.default_rng().integers(0, 9000)
    stop, log = threading.Event(), []
    t = threading.Thread(target=fake_robot, args=(int(port), 6, stop, log))
    t.start()
    try:
        drv = UdpBridgeDriver(ur10, listen=f"127.0.0.1:{port}", connect_timeout=5)
        loop = ControlLoop(ur10, drv, make_solver(make_mapping("fd", ur10)), rate=500)
        loop.start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.8:
            loop.set_wrench([5.0, 0, 0, 0, 0, 0])
            time.sleep(0.01)
        moved = ur10.pose(loop.state.q)[:3, 3] - ur10.pose(np.array(HOME["ur10"]))[:3, 3]
        stop.set()
        t.join()
        # the driver went quiet: the loop faults and holds
        until(lambda: loop.state.fault, lambda f: f is not None, what="a fault")
        assert "no joint state" in loop.state.fault and loop.state.holding
        loop.stop()
        drv.close()
    finally:
        stop.set()
    assert len(log) > 50 and moved[0] > 0.05
