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


def test_simulated_step_matches_its_equations_in_numpy(ur10):
    """The per-joint float loop against the module's equations written as whole-array numpy:
    q̇⁺ = clip(q̇_ref + (q̇ − q̇_ref) e^(−dt/τ), ±v_max), q⁺ = q + dt q̇⁺, stopped (q̇ = 0) where it
    would leave [min(lower, q), max(upper, q)] — joints inside, at and beyond limits, saturated."""
    rng = np.random.default_rng(7)
    lo, up, vmax = ur10.limits.lower, ur10.limits.upper, ur10.limits.velocity
    dt, tau = 0.004, 0.02
    for k in range(200):
        q0 = rng.uniform(lo - 0.05, up + 0.05)
        q0[k % 6] = up[k % 6] - 1e-4 if k % 2 else lo[k % 6] + 1e-4
        sim = SimulatedRobot(ur10, dt=dt, tau=tau, q0=q0)
        sim.qd = rng.normal(scale=2.0, size=6)
        ref = rng.normal(scale=3.0, size=6)
        qd = np.clip(ref + (sim.qd - ref) * math.exp(-dt / tau), -vmax, vmax)
        q = q0 + dt * qd
        lo_k, up_k = np.minimum(lo, q0), np.maximum(up, q0)
        hit = (q < lo_k) | (q > up_k)
        q, qd = np.clip(q, lo_k, up_k), np.where(hit, 0.0, qd)
        twin = SimulatedRobot(ur10, dt=dt, tau=tau, q0=q0)
        twin.qd = sim.qd.copy()
        sim.send(None, ref)
        np.testing.assert_allclose(sim.q, q, rtol=0, atol=1e-15)
        np.testing.assert_allclose(sim.qd, qd, rtol=0, atol=1e-15)
        # the compiled step (numba) and the plain-float loop: bit for bit
        from fdcontrol.drivers import simulated

        compiled, simulated._lag_step = simulated._lag_step, None
        try:
            twin.send(None, ref)
        finally:
            simulated._lag_step = compiled
        assert np.array_equal(sim.q, twin.q) and np.array_equal(sim.qd, twin.qd), k


def test_spring_wall_sensor_reads_robot_on_environment(ur10):
    p = ur10.pose(Q0)[:3, 3]
    wall = SpringPlane(point=p - np.array([0.01, 0, 0]), normal=[1, 0, 0], stiffness=1000)
    sensor = SimulatedSensor(planes=[wall])
    R = ur10.pose(Q0)[:3, :3]
    w = sensor.reading(ur10.pose(Q0))  # tool frame
    np.testing.assert_allclose(R @ w[:3], [10.0, 0, 0], atol=1e-9)
