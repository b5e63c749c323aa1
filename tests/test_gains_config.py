"""Gains and the configuration: gains set live (POST /control/gains) are what GET /config shows, a
later configuration change goes on from them instead of snapping back to the configured ones, and
gains changed by a configuration change are ramped, never stepped. Stepped in-process on the
service's own runtime (simulated arm), so every cycle's gains are seen."""

from __future__ import annotations

import numpy as np
import pytest

from fdcontrol.server.runtime import Runtime
from fdcontrol.server.settings import Settings
from fdcontrol.server.taskspace import PATCH_GAIN_RAMP, set_gains


@pytest.fixture()
def rt():
    r = Runtime(Settings(realtime=False))
    yield r
    r.close()


def gains(rt) -> np.ndarray:
    return rt.loop.law.motion.stiffness.copy()


def test_live_gains_survive_a_configuration_change_and_patched_gains_ramp(rt):
    loop = rt.loop
    for _ in range(5):
        loop.step()
    k0 = np.array(rt.params.stiffness)
    k2 = k0 * 0.5
    set_gains(rt, {"stiffness": list(k2), "ramp_time": 0.1})
    for _ in range(int(0.1 / loop.period) + 5):
        loop.step()
    assert np.allclose(gains(rt), k2)
    assert np.allclose(rt.params.stiffness, k2)  # GET /config tells the truth
    # a change of something else keeps the live gains (it used to rebuild the law from the configuration)
    rt.update({"telemetry_decimation": 3})
    loop.step()
    assert np.allclose(gains(rt), k2), gains(rt)
    # a change of the stiffness itself is ramped with the smooth step over PATCH_GAIN_RAMP
    k3 = k0 * 1.5
    rt.update({"stiffness": list(k3)})
    seen = [gains(rt)]
    for _ in range(int(PATCH_GAIN_RAMP / loop.period) + 10):
        loop.step()
        seen.append(gains(rt))
    seen = np.array(seen)
    assert np.allclose(seen[0], k2)  # no step at the swap
    assert np.allclose(seen[-1], k3)
    # the smooth step's largest slope is 1.5/duration: per cycle at most 1.5 Δ dt / T (+ rounding)
    bound = 1.5 * np.abs(k3 - k2) * loop.period / PATCH_GAIN_RAMP * 1.01 + 1e-9
    assert np.all(np.abs(np.diff(seen, axis=0)) <= bound)
    assert np.allclose(rt.params.stiffness, k3)


def test_gains_handed_over_as_a_ramp_ends_are_not_lost():
    """POST /control/gains sets the task's ramp from the API thread; one arriving in the cycle a
    previous ramp ends (here: exactly while the loop asks whether that ramp is done) is run, not
    dropped with the finished one."""
    from fdcontrol.control.gains import GainRamp
    from fdcontrol.control.law import ControlLaw, MotionTerm
    from fdcontrol.control.task import TaskSpace
    from fdcontrol.experiments import physics as P
    from fdcontrol.model.robot import RobotModel

    k0, d0 = np.full(6, 50.0), np.full(6, 10.0)
    k1 = np.full(6, 200.0)
    law = ControlLaw(mode="motion", motion=MotionTerm(stiffness=k0.copy(), damping=d0.copy()))
    r = P.rig(RobotModel.load("ur10"), law=law)
    task = r.loop.task = TaskSpace()
    new = GainRamp(k0, d0, k1, d0, 0.01)

    class EndingRamp(GainRamp):
        @property
        def done(self) -> bool:
            if task.ramp is self:  # the API thread's hand-over, at this very moment
                task.ramp = new
            return super().done

    task.ramp = EndingRamp(k0, d0, k0, d0, 0.0)
    for i in range(20):
        r.loop.step(now=i * P.DT)
    assert np.allclose(law.motion.stiffness, k1), law.motion.stiffness
