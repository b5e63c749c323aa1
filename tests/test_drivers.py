"""Drivers: the simulated arm's lag and limits and its spring-wall sensor (UDP: test_udp.py)."""

from __future__ import annotations

import math

import numpy as np

from fdcontrol.drivers import RobotDriver, SimulatedRobot, SimulatedSensor, SpringPlane

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
