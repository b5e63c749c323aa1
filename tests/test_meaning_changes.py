"""What the sensor and the law mean never changes under a moving arm (the ``holding`` policy), and
hand guiding holds on a sensor stream that went quiet. Library level, on simulated time."""

from __future__ import annotations

import numpy as np
import pytest

from fdcontrol import make_mapping
from fdcontrol.control.law import ControlLaw, ForceTerm, WrenchFilter
from fdcontrol.drivers.simulated import SimulatedRobot, SimulatedSensor
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver

Q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
DT = 0.002


class SwitchableSensor(SimulatedRobot):
    """The simulated arm whose sensor stops (no reading: None) while ``quiet``."""

    quiet = False

    def read_wrench(self):  # type: ignore[override]
        return None if self.quiet else super().read_wrench()


def loop_on(robot, law=None, bias=(0.0,) * 6):
    sim = SwitchableSensor(robot, dt=DT, q0=Q0, sensor=SimulatedSensor(bias=np.array(bias)))
    return ControlLoop(robot, sim, make_solver(make_mapping("fd", robot)), law=law, rate=1 / DT), sim


def stream(loop, seconds, t0, wrench=None):
    states = []
    for i in range(round(seconds / DT)):
        now = t0 + i * DT
        if wrench is not None:
            loop.set_wrench(wrench, t=now)
        states.append(loop.step(now=now))
    return states, t0 + round(seconds / DT) * DT


def test_hand_guiding_holds_when_the_sensor_stream_goes_quiet_and_resumes_when_it_returns(ur10):
    law = ControlLaw(mode="force", force=ForceTerm(gain=np.full(6, 1.0)))
    loop, sim = loop_on(ur10, law, bias=(5.0, 0, 0, 0, 0, 0))  # a hand pushing with 5 N (a steady reading)
    states, t = stream(loop, 0.3, 0.0)
    assert all(s.watchdog != "sensor_stale" for s in states) and np.any(states[-1].qd_ref)  # pressing: moving
    sim.quiet = True
    states, t = stream(loop, 0.3, t)
    stale = [i for i, s in enumerate(states) if s.watchdog == "sensor_stale"]
    # the first cycle older than sensor_timeout (50 ms = 25 cycles) trips it, and it stays tripped
    assert stale and stale[0] == round(loop.sensor_timeout / DT) and stale == list(range(stale[0], len(states)))
    assert states[-1].holding and not np.any(states[-1].qd_ref)  # braked to standstill
    sim.quiet = False
    states, t = stream(loop, 0.1, t)
    assert states[0].watchdog != "sensor_stale" and not states[-1].holding


def test_admittance_does_not_read_the_sensor_and_keeps_going_without_it(ur10):
    loop, sim = loop_on(ur10)
    sim.quiet = True
    states, _ = stream(loop, 0.3, 0.0, wrench=[5.0, 0, 0, 0, 0, 0])
    assert all(s.watchdog == "ok" for s in states[1:]) and np.any(states[-1].qd_ref)


def test_a_change_of_meaning_brakes_to_standstill_then_applies_and_resumes_from_rest(ur10):
    # a sensor offset below the load threshold (fdcontrol.loop.liveness): not a hand, so no live input
    loop, _sim = loop_on(ur10, bias=(0.6, 0, -0.3, 0, 0, 0))
    states, t = stream(loop, 0.3, 0.0, wrench=[10.0, 0, 0, 0, 0, 0])
    v0 = np.abs(states[-1].qd_ref).max()
    assert v0 > 0.05  # moving
    done = loop.reconfigure(law=ControlLaw(mode="force"), filter=WrenchFilter(), rest=True,
                            rezero=True)  # as for a new tool model
    applied_at = None
    for i in range(round(2.0 / DT)):  # the stream goes on: the change still waits for standstill
        now = t + i * DT
        loop.set_wrench([10.0, 0, 0, 0, 0, 0], t=now)
        s = loop.step(now=now)
        if done.is_set() and applied_at is None:
            applied_at = i
            assert loop.law.mode == "force" and not np.any(loop.qd_state)
            break
        assert loop.law.mode == "admittance" and s.holding  # braking, old law, until standstill
        assert np.abs(s.qd_ref).max() <= v0 + 1e-12
    assert applied_at is not None and applied_at > 1  # it took braking cycles, not an instant switch
    states, t = stream(loop, 1.2, now + DT)  # force mode, nobody touches the tool
    # no change re-zeroes the sensor by itself: the new model reads what the old one read (its bias carried)
    np.testing.assert_allclose(loop.filter.bias, np.zeros(6), atol=1e-9)
    assert np.linalg.norm(states[-1].f_measured[:3]) == pytest.approx(np.hypot(0.6, 0.3), abs=1e-9)  # the offset
    assert max(np.abs(s.qd_ref).max() for s in states) < 1e-9  # resumed from rest, and stays there
    loop.zero_sensor()  # asked for: taken at the held pose, nothing on the tool
    stream(loop, 0.01, t)
    np.testing.assert_allclose(loop.filter.bias, [0.6, 0, -0.3, 0, 0, 0], atol=1e-9)
