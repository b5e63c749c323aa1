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
from fdcontrol.drivers.udp import ImplausibleStateError, StaleStateError, UdpBridgeDriver
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME, RobotModel
from tests.service import Service, free_port
from tests.waits import HUNG, cycles_later, until


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
        # a live stream for 0.8 s of the loop's own cycles (500 Hz); the deadline only ends a hung test
        c0, deadline = loop.state.cycle, time.monotonic() + HUNG
        while loop.state.cycle < c0 + 400:
            assert time.monotonic() < deadline, loop.state.cycle
            loop.set_wrench([5.0, 0, 0, 0, 0, 0])
            time.sleep(0.01)  # the pace of the wrench stream
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


# ---------------------------------------------------------------------- trust only the robot
def _robot_thread(sock: socket.socket, port: int, q0: np.ndarray, stop: threading.Event, got: list) -> None:
    """The robot's driver process: its state at 500 Hz from its own socket, the references it receives."""
    sock.settimeout(0.002)
    seq = 0
    while not stop.is_set() and seq < 20000:
        seq += 1
        sock.sendto(np.concatenate(([seq, time.monotonic()], q0, np.zeros(len(q0)))).astype("<f8").tobytes(),
                    ("127.0.0.1", port))
        try:
            got.append(sock.recv(65536))
        except TimeoutError:
            pass


def _udp_socket() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    return s


@pytest.mark.parametrize("configured", [True, False], ids=["peer configured", "first sender pinned"])
def test_udp_bridge_ignores_a_second_local_sender_and_never_answers_it(ur10, configured):
    """A second process on the same host sends joint states with q[0] one radian off: the loop never
    uses them (q[0] stays the robot's), the intruder gets no reference, the robot gets them all."""
    port = free_port()
    q0 = np.array(HOME["ur10"])
    robot, intruder = _udp_socket(), _udp_socket()
    stop, got = threading.Event(), []
    t = threading.Thread(target=_robot_thread, args=(robot, port, q0, stop, got), daemon=True)
    t.start()
    peer = f"127.0.0.1:{robot.getsockname()[1]}" if configured else None
    drv = UdpBridgeDriver(ur10, listen=f"127.0.0.1:{port}", connect_timeout=5, peer=peer)
    loop = ControlLoop(ur10, drv, make_solver(make_mapping("fd", ur10)), rate=500)
    intruder.settimeout(0.001)
    answered, seen = 0, []
    try:
        loop.start()
        fake = q0.copy()
        fake[0] += 1.0
        t0 = time.monotonic()
        k = 0
        while time.monotonic() - t0 < 1.0 and k < 5000:  # 1 s of intrusion, bounded
            k += 1
            intruder.sendto(np.concatenate(([k, time.monotonic()], fake, np.zeros(6))).astype("<f8").tobytes(),
                            ("127.0.0.1", port))
            try:
                intruder.recv(65536)
                answered += 1
            except TimeoutError:
                pass
            seen.append(loop.state.q[0])
        cycles = loop.state.cycle
    finally:
        loop.stop()
        stop.set()
        t.join(5)
        drv.close()
        robot.close()
        intruder.close()
    assert k > 50 and cycles > 100, (k, cycles)
    assert drv.ignored >= k // 2, (drv.ignored, k)  # the intruder's datagrams arrived, and were dropped
    assert max(abs(np.array(seen) - q0[0])) < 1e-9  # the loop never saw the intruder's joint 0
    assert answered == 0, f"the intruder received {answered} references"
    assert len(got) > 50  # the robot got its references


def test_udp_bridge_faults_on_a_joint_jump_beyond_the_velocity_limit(ur10):
    """The robot's own stream jumping a joint by 1 rad in one 2-ms step (its limit allows ~5 mrad)
    is not used: read raises, the loop records the fault and holds; a plausible step is used."""
    port = free_port()
    q0 = np.array(HOME["ur10"])
    robot = _udp_socket()
    t = 100.0

    def state(q: np.ndarray) -> bytes:
        return np.concatenate(([1, t], q, np.zeros(6))).astype("<f8").tobytes()

    sender = threading.Timer(0.05, lambda: robot.sendto(state(q0), ("127.0.0.1", port)))
    sender.start()
    drv = UdpBridgeDriver(ur10, listen=f"127.0.0.1:{port}", connect_timeout=5,
                          peer=f"127.0.0.1:{robot.getsockname()[1]}")
    try:
        vmax = ur10.limits.velocity[0]
        t += 0.002
        ok = q0.copy()
        ok[0] += 0.9 * vmax * 0.002  # within the limit
        robot.sendto(state(ok), ("127.0.0.1", port))
        deadline = time.monotonic() + 5
        while abs(drv.read().q[0] - ok[0]) > 1e-12:
            assert time.monotonic() < deadline
        t += 0.002
        jump = ok.copy()
        jump[0] += 1.0
        robot.sendto(state(jump), ("127.0.0.1", port))
        with pytest.raises(ImplausibleStateError, match="joint 1"):
            while time.monotonic() < deadline:
                drv.read()
        assert drv.read().q[0] == ok[0]  # the jump was never used
    finally:
        drv.close()
        robot.close()


def test_a_joint_jump_in_the_udp_stream_faults_the_loop_and_holds(ur10):
    port = free_port()
    q0 = np.array(HOME["ur10"])
    robot = _udp_socket()
    stop, jump = threading.Event(), threading.Event()

    def run() -> None:  # the robot at ~500 Hz, its own clock; one state 1 rad off when asked
        k = 0
        while not stop.is_set() and k < 20000:
            k += 1
            q = q0.copy()
            if jump.is_set():
                q[0] += 1.0
                jump.clear()
            robot.sendto(np.concatenate(([k, time.monotonic()], q, np.zeros(6))).astype("<f8").tobytes(),
                         ("127.0.0.1", port))
            time.sleep(0.002)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    drv = UdpBridgeDriver(ur10, listen=f"127.0.0.1:{port}", connect_timeout=5, timeout=1.0,
                          peer=f"127.0.0.1:{robot.getsockname()[1]}")
    loop = ControlLoop(ur10, drv, make_solver(make_mapping("fd", ur10)), rate=500)
    try:
        loop.start()
        deadline = time.monotonic() + 10
        while loop.state.cycle < 50:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert loop.state.fault is None and not loop.state.holding
        jump.set()
        while loop.state.fault is None:
            assert time.monotonic() < deadline, "no fault after the jump"
            time.sleep(0.005)
        assert "implausible joint state: joint 1" in loop.state.fault and loop.state.holding
        assert abs(loop.state.q[0] - q0[0]) < 1e-9  # the jumped state never reached the loop
    finally:
        loop.stop()
        stop.set()
        t.join(5)
        drv.close()
        robot.close()


def test_the_service_on_the_udp_bridge_trusts_only_the_robot():
    """The audit's UDP row against the real service (``--driver udp``, no peer configured: the first sender,
    the robot, is pinned). A second local process sends joint states with q[0] one radian off for a second:
    the service's state never shows them and that process receives no reference, while the robot gets its
    references. Then the robot's own stream jumps joint 1 by a radian in one step: the loop faults, naming
    the joint, and holds; the jumped state never reaches /state."""
    port = free_port()
    q0 = np.array(HOME["ur10"])
    robot, intruder = _udp_socket(), _udp_socket()
    stop, jump, got = threading.Event(), threading.Event(), []

    def run() -> None:  # the robot's driver process at ~500 Hz; one state 1 rad off when asked
        robot.settimeout(0.002)
        k = 0
        while not stop.is_set() and k < 60000:
            k += 1
            q = q0.copy()
            if jump.is_set():
                q[0] += 1.0
            robot.sendto(state_datagram(k, q), ("127.0.0.1", port))
            try:
                got.append(robot.recv(65536))
            except TimeoutError:
                pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    svc = None
    try:
        opts = {"listen": f"127.0.0.1:{port}", "connect_timeout": 10}
        svc = Service("--driver", "udp", "--robot", "ur10", env={"FDCONTROL_DRIVER_OPTIONS": json.dumps(opts)})
        http = httpx.Client(base_url=svc.url, timeout=10)
        if not http.get("/state").json()["running"]:
            assert http.post("/control/start").status_code == 200
        cycles_later(lambda: http.get("/state").json(), 50)
        fake = q0.copy()
        fake[0] += 1.0
        intruder.settimeout(0.001)
        answered, seen, k, t0 = 0, [], 0, time.monotonic()
        while time.monotonic() - t0 < 1.0 and k < 5000:  # 1 s of intrusion, bounded
            k += 1
            intruder.sendto(state_datagram(k, fake), ("127.0.0.1", port))
            try:
                intruder.recv(65536)
                answered += 1
            except TimeoutError:
                pass
            if k % 10 == 0:
                seen.append(http.get("/state").json())
        n_got = len(got)
        assert k > 50 and len(seen) > 5, (k, len(seen))
        assert max(abs(s["q"][0] - q0[0]) for s in seen) < 1e-9  # the service never showed the intruder's q
        assert all(s["fault"] is None and s["running"] for s in seen), seen[-1]
        assert answered == 0, f"the intruder received {answered} references"
        assert n_got > 50  # the robot got its references
        jump.set()
        s = until(lambda: http.get("/state").json(), lambda s: s["fault"] is not None, what="the jump's fault")
        assert "implausible joint state: joint 1" in s["fault"] and s["holding"], s["fault"]
        assert abs(s["q"][0] - q0[0]) < 1e-9  # the jumped state never reached the loop
        http.close()
    finally:
        stop.set()
        if svc is not None:
            svc.stop()
        t.join(5)
        robot.close()
        intruder.close()
