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
