"""Drivers: the simulated arm's lag and limits and its spring-wall sensor (UDP: test_udp.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from fdcontrol.drivers import JointState, RobotDriver, SimulatedRobot, SimulatedSensor, SpringPlane

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


def test_the_simulators_state_is_its_own_read_and_its_attributes_give_copies(ur10):
    """send advances the simulator's q and q̇ in place (one compiled call, no new arrays): what read() and the
    q, qd attributes hand out are copies — a caller that writes into them (a test's runaway joint) changes
    nothing in the simulator, and a state read before a send keeps its values after it."""
    sim = SimulatedRobot(ur10, dt=0.01, tau=0.02, q0=Q0)
    ref = np.full(6, 0.4)
    sim.send(None, ref)
    js, q_attr = sim.read(), sim.q
    # a JointState as its constructor makes it (built from its dict): its fields, frozen
    assert type(js) is JointState and vars(js).keys() == {"q", "qd", "t"} and js.t == sim.t == 0.01
    with pytest.raises(dataclasses.FrozenInstanceError):
        js.t = 0.0  # type: ignore[misc]
    before = (js.q.copy(), js.qd.copy())
    js.qd[0], q_attr[1] = 9.0, 9.0  # the caller's arrays
    twin = SimulatedRobot(ur10, dt=0.01, tau=0.02, q0=Q0)
    twin.send(None, ref)
    assert np.array_equal(sim.q, twin.q) and np.array_equal(sim.qd, twin.qd)
    sim.send(None, ref)
    twin.send(None, ref)
    assert np.array_equal(sim.read().q, twin.read().q) and np.array_equal(sim.read().qd, twin.read().qd)
    assert np.array_equal(js.q, before[0]) and js.qd[0] == 9.0 and np.array_equal(js.qd[1:], before[1][1:])
    assert not np.array_equal(sim.q, before[0])  # it moved on; the state read before did not
    sim.qd = np.zeros(6)  # the attributes set the simulator's state (its length checked)
    assert not sim.read().qd.any()
    sim.q = Q0
    assert np.array_equal(sim.read().q, Q0)
    with pytest.raises(ValueError):
        sim.q = np.zeros(7)


def test_the_simulator_takes_any_vector_as_its_reference(ur10):
    """A list, an int array or a float32 one is taken as float64: the same step as the float64 vector's."""
    ref = np.array([0.5, -0.25, 0.125, 1.0, -1.0, 0.0])
    steps = np.array([1, -2, 0, 3, -1, 0])
    for want, given in ((ref, ref.tolist()), (ref, ref.astype(np.float32)), (steps.astype(float), steps)):
        a, b = (SimulatedRobot(ur10, dt=0.01, tau=0.02, q0=Q0) for _ in range(2))
        a.send(None, want)
        b.send(None, given)
        assert np.array_equal(a.q, b.q) and np.array_equal(a.qd, b.qd) and a.qd.any()
    sim = SimulatedRobot(ur10, dt=0.01, tau=0.02, q0=Q0)
    for bad in (np.zeros(5), np.zeros((2, 6)), [0.0] * 7):  # another length, not a vector: refused, nothing moved
        with pytest.raises((ValueError, TypeError)):
            sim.send(None, bad)
        assert np.array_equal(sim.q, Q0) and not sim.qd.any() and sim.sent == 0 and sim.t == 0.0
    from fdcontrol.drivers import simulated

    if simulated._lag_step is not None:  # the compiled step refuses other lengths itself (nothing written)
        q, qd = Q0.copy(), np.zeros(6)
        lim = ur10.limits
        assert not simulated._lag_step(q, qd, np.ones(5), lim.velocity, lim.lower, lim.upper, 0.5, 0.01)
        assert np.array_equal(q, Q0) and not qd.any()


def test_the_simulators_compiled_entry_steps_as_the_dispatched_kernel(ur10):
    """send enters the compiled step without numba's dispatch (float64 vectors for certain): the same q and q̇, bit
    for bit, as the dispatched kernel over random references, states and bounds — NaN, ±Inf, ±0, joints at and
    beyond their limits; bounds that are not float64 vectors (set through the attributes) take the dispatched
    kernel's conversion: the same step again."""
    from fdcontrol.drivers import simulated

    if simulated._lag_step is None:
        pytest.skip("numba missing")
    assert simulated._lag_entry is not simulated._lag_step  # the entry, not the dispatcher
    rng = np.random.default_rng(5)
    lim = ur10.limits
    specials = np.array([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e300, -1e-300])
    for i in range(3000):
        q = rng.uniform(lim.lower - 0.1, lim.upper + 0.1)
        if i % 5 == 0:
            q[rng.integers(6)] = lim.upper[rng.integers(6)]
        qd = rng.normal(scale=3.0, size=6)
        ref = rng.normal(scale=4.0, size=6)
        for v in (q, qd, ref):
            if rng.random() < 0.3:
                v[rng.integers(6)] = specials[rng.integers(len(specials))]
        lag, dt = float(rng.choice([0.0, 0.5, rng.random()])), float(rng.choice([0.002, 0.01, rng.random()]))
        bounds = (lim.velocity, lim.lower, lim.upper)
        a = (q.copy(), qd.copy())
        b = (q.copy(), qd.copy())
        assert simulated._lag_entry(*a, ref, *bounds, lag, dt) and simulated._lag_step(*b, ref, *bounds, lag, dt)
        np.testing.assert_array_equal(a[0], b[0], strict=True)
        np.testing.assert_array_equal(a[1], b[1], strict=True)
        assert np.array_equal(np.signbit(a[0]), np.signbit(b[0])) and np.array_equal(np.signbit(a[1]), np.signbit(b[1]))
    # the simulator's own path: float64 bounds take the entry, others (an int vmax) the dispatcher's conversion
    sim, twin = SimulatedRobot(ur10, dt=0.01, tau=0.02, q0=Q0), SimulatedRobot(ur10, dt=0.01, tau=0.02, q0=Q0)
    assert sim._bounds_f64
    twin.vmax = np.full(6, 2, dtype=np.int64)
    assert not twin._bounds_f64 and twin.vmax.dtype == np.int64
    sim.vmax = np.full(6, 2.0)
    assert sim._bounds_f64
    for _ in range(50):
        ref = rng.normal(scale=4.0, size=6)
        sim.send(None, ref)
        twin.send(None, ref)
        assert np.array_equal(sim.q, twin.q) and np.array_equal(sim.qd, twin.qd)
    assert np.abs(sim.qd).max() == 2.0  # the bound set acted
