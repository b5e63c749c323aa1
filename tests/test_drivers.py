"""Drivers: the simulated arm's lag and limits, and the UDP bridge to a separate process."""

from __future__ import annotations

import math
import socket
import threading
import time

import numpy as np
import pytest

from fdcontrol import make_mapping
from fdcontrol.drivers import RobotDriver, SimulatedRobot, SimulatedSensor, SpringPlane
from fdcontrol.drivers.udp import StaleStateError, UdpBridgeDriver
from fdcontrol.loop import ControlLoop
from fdcontrol.solvers import make_solver

Q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])


def test_simulated_first_order_lag(ur10):
    sim = SimulatedRobot(ur10, dt=0.001, tau=0.05, q0=Q0)
    assert isinstance(sim, RobotDriver)
    ref = np.full(6, 0.5)
    for _ in range(50):  # one time constant
        sim.send(None, ref)
    np.testing.assert_allclose(sim.read().qd, ref * (1 - math.exp(-1)), rtol=1e-9)


def test_simulated_limits(ur10):
    sim = SimulatedRobot(ur10, dt=0.01, tau=0.0, q0=Q0)
    sim.send(None, np.full(6, 100.0))
    np.testing.assert_allclose(sim.read().qd, ur10.limits.velocity)
    q0 = Q0.copy()
    q0[0] = ur10.limits.upper[0] - 0.001
    sim = SimulatedRobot(ur10, dt=0.01, tau=0.0, q0=q0)
    sim.send(None, np.full(6, 1.0))
    assert sim.read().q[0] == ur10.limits.upper[0] and sim.read().qd[0] == 0.0


def test_spring_wall_sensor_reads_robot_on_environment(ur10):
    p = ur10.pose(Q0)[:3, 3]
    wall = SpringPlane(point=p - np.array([0.01, 0, 0]), normal=[1, 0, 0], stiffness=1000)
    sensor = SimulatedSensor(planes=[wall])
    R = ur10.pose(Q0)[:3, :3]
    w = sensor.reading(ur10.pose(Q0))  # tool frame
    np.testing.assert_allclose(R @ w[:3], [10.0, 0, 0], atol=1e-9)


def fake_robot(port: int, dof: int, stop: threading.Event, log: list):
    """A separate 'driver process': integrates the velocity references it receives."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.002)
    q, qd, seq = Q0.copy(), np.zeros(dof), 0
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
        moved = ur10.pose(loop.state.q)[:3, 3] - ur10.pose(Q0)[:3, 3]
        stop.set()
        t.join()
        time.sleep(0.3)  # the driver went quiet: the loop faults and holds
        assert loop.state.fault and "no joint state" in loop.state.fault
        loop.stop()
        drv.close()
    finally:
        stop.set()
    assert len(log) > 50 and moved[0] > 0.05


def test_udp_bridge_needs_a_first_state(ur10):
    with pytest.raises(StaleStateError, match="no joint state"):
        UdpBridgeDriver(ur10, listen="127.0.0.1:0", connect_timeout=0.2)
