"""Integrators: measured convergence orders and the adaptive pair's tolerance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fdcontrol.loop.integrators import RK4, BogackiShampine, SemiImplicitEuler, make_integrator

W = 2.0  # harmonic oscillator q̈ = −ω² q, q(0) = 1, q̇(0) = 0: q = cos ωt


def accel(q, qd):
    return -(W**2) * q


def global_error(integrator, dt, T=1.0):
    q, qd = np.array([1.0]), np.array([0.0])
    for _ in range(round(T / dt)):
        q, qd = integrator.step(accel, q, qd, dt)
    return abs(q[0] - math.cos(W * T)) + abs(qd[0] + W * math.sin(W * T)) / W


@pytest.mark.parametrize("make,order", [
    (SemiImplicitEuler, 1),
    (RK4, 4),
    (lambda: BogackiShampine(rtol=1e9, atol=1e9), 3),  # tolerance never binds: fixed steps
])
def test_convergence_order(make, order):
    e1, e2 = global_error(make(), 0.02), global_error(make(), 0.01)
    measured = math.log2(e1 / e2)
    print(f"{make().name}: measured order {measured:.2f}")
    assert abs(measured - order) < 0.25


def test_adaptive_meets_tolerance_and_reports_substeps():
    errors, steps = [], []
    for tol in (1e-4, 1e-7, 1e-10):
        bs = BogackiShampine(rtol=tol, atol=tol, max_substeps=10_000)
        q, qd, total = np.array([1.0]), np.array([0.0]), 0
        for _ in range(10):  # ten "cycles" of 0.1 s
            q, qd = bs.step(accel, q, qd, 0.1)
            total += bs.last_substeps
            assert bs.last_converged
        errors.append(abs(q[0] - math.cos(W)))
        steps.append(total)
        assert errors[-1] < 50 * tol  # global error of a locally controlled method
    assert errors[0] > errors[1] > errors[2] and steps[0] < steps[1] < steps[2]


def test_adaptive_work_is_bounded():
    bs = BogackiShampine(rtol=1e-12, atol=1e-14, max_substeps=3)
    q, qd = bs.step(accel, np.array([1.0]), np.array([0.0]), 1.0)
    assert bs.last_substeps <= 3 and not bs.last_converged
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(qd))


def test_make_integrator():
    assert make_integrator("rk4").name == "rk4"
    with pytest.raises(ValueError, match="unknown integrator"):
        make_integrator("leapfrog")


def test_loop_counts_integrator_non_convergence_and_decimates_telemetry(ur10):
    """An adaptive integrator that runs out of sub-steps is counted in the loop statistics; the σmin(J)
    telemetry is computed on cycles 1, 1 + n, 1 + 2n, … for telemetry_decimation n."""
    from fdcontrol import make_mapping
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop.cycle import ControlLoop
    from fdcontrol.loop.solvers import make_solver

    q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
    tight = make_solver(make_mapping("fd", ur10), BogackiShampine(rtol=1e-14, atol=1e-16, max_substeps=2))
    loop = ControlLoop(ur10, SimulatedRobot(ur10, q0=q0), tight, telemetry_decimation=3)
    sigmas = []
    for i in range(10):
        loop.set_wrench([10.0, 0, 0, 0, 0, 0], t=i * 0.002)
        sigmas.append(loop.step(now=i * 0.002).sigma_min_j)
    summary = loop.stats.summary()
    assert summary["integrator_nonconverged"] >= 8  # every cycle with motion misses 1e-14
    changed = [i for i in range(1, 10) if sigmas[i] != sigmas[i - 1]]
    assert changed == [3, 6, 9]  # cycles 4, 7, 10 (1-based) recompute it
    loose = make_solver(make_mapping("fd", ur10), BogackiShampine(rtol=1e-3, atol=1e-3))
    loop = ControlLoop(ur10, SimulatedRobot(ur10, q0=q0), loose)
    for i in range(10):
        loop.set_wrench([10.0, 0, 0, 0, 0, 0], t=i * 0.002)
        loop.step(now=i * 0.002)
    assert loop.stats.summary()["integrator_nonconverged"] == 0
    with pytest.raises(ValueError, match="telemetry_decimation"):
        ControlLoop(ur10, SimulatedRobot(ur10, q0=q0), loose, telemetry_decimation=0)
