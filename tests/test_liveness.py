"""A hand on the sensor is a live input; the tool's own inertia is not — on the MuJoCo arm.

The service's loop (``Runtime``, the default simulated UR10 with its 0.5 kg tool) in compliance mode (a law
that reads the force sensor), stepped synchronously on its own clock. A hand (MuJoCo's applied force at the
tool) pushes the arm into motion and lets go: the arm brakes, and while it does the sensor reads the force
that decelerates the tool (about 1 N, at the load threshold). That is no hand: the arm rests within the
braking time of the profile in force. A hand that stays on the tool with 2 N, along the motion or against
it, is: the arm keeps following it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("mujoco")

from fdcontrol.loop.liveness import LOAD_FORCE
from fdcontrol.server import runtime as runtime_module
from fdcontrol.server.runtime import Runtime
from fdcontrol.server.settings import Settings

PUSH = 30.0  # N, the push that sets the arm moving
PUSH_CYCLES = 150


class Arm:
    """The service's loop on the MuJoCo arm, stepped by the test (as the loop's thread would)."""

    def __init__(self, mode: str = "compliance") -> None:
        runtime_module.BRAKE_WAIT = 0.0  # the test steps the loop itself: PATCH never waits for a thread
        self.rt = Runtime(Settings(realtime=False))
        self.loop = self.rt.loop
        self.loop._running.set()  # "running" without a thread: the test is its clock
        self.t = 0.0
        self.steps(5)
        self.rt.update({"mode": mode, "workspace_box": None})  # the push may carry the tip past the start box
        self.loop = self.rt.loop
        self.loop.hold(False)
        self.steps(5)

    def steps(self, n: int) -> None:
        for _ in range(n):
            self.loop.step(now=self.t)  # never raises
            self.t += self.loop.period

    def push(self, f: list[float], n: int) -> None:
        self.loop.driver.set_push([*f, 0.0, 0.0, 0.0])
        self.steps(n)

    def braking_time(self, v0: np.ndarray) -> float:
        """The braking time of the profile a stop beginning now fixes (fdcontrol.limits.braking)."""
        a = np.maximum(self.loop.limits.max_acceleration, self.loop.braking.floor)
        return float(np.max(np.abs(v0) / a))

    def close(self) -> None:
        self.loop._running.clear()
        self.loop.driver.close()


@pytest.fixture
def arm():
    a = Arm()
    yield a
    a.close()


@pytest.mark.parametrize("direction", [[1.0, 0.0, 0.0], [0.0, -0.8, 0.6]])
def test_the_tools_own_deceleration_is_no_hand_the_arm_rests_within_its_braking_time(arm, direction):
    loop, dt = arm.loop, arm.loop.period
    arm.push([PUSH * d for d in direction], PUSH_CYCLES)
    arm.loop.driver.set_push([0.0] * 6)  # the hand lets go
    v0 = loop.qd_ref.copy()
    assert np.abs(v0).max() > 0.3, v0  # the push set the arm moving
    tb = arm.braking_time(v0)
    n, travelled, reading = 0, np.zeros_like(v0), []
    while loop.qd_ref.any():
        arm.steps(1)
        n += 1
        travelled += np.abs(loop.qd_ref) * dt
        reading.append(float(np.linalg.norm(loop.state.f_measured[:3])))
        assert n * dt <= tb + 3 * dt, f"still moving {n} cycles after the hand let go (braking time {tb / dt:.1f})"
    assert np.all(travelled <= np.abs(v0) * (tb / 2 + 2 * dt) + 1e-9), (travelled, v0)
    # what makes it a test: the braking tool itself read above the load threshold on the law's reading
    assert max(reading[3:]) > LOAD_FORCE, max(reading[3:])
    arm.steps(25)
    assert not loop.qd_ref.any()  # and nothing moves it at rest


@pytest.mark.parametrize("along", [1.0, -1.0])
def test_a_hand_that_stays_on_the_tool_while_the_arm_brakes_keeps_it_moving(arm, along):
    """2 N held — along the motion, or against it (where the tool's inertia cancels half of it on the
    sensor) — is a hand: the arm never comes to rest, and in the end it moves the way the hand pushes."""
    loop = arm.loop
    arm.push([PUSH, 0.0, 0.0], PUSH_CYCLES)
    v0 = loop.qd_ref.copy()
    tb = arm.braking_time(v0)
    hand = np.array([2.0 * along, 0.0, 0.0])
    loop.driver.set_push([*hand, 0.0, 0.0, 0.0])
    for _ in range(math.ceil(3 * tb / loop.period)):
        arm.steps(1)
        assert loop.qd_ref.any(), "the arm came to rest under a hand"
    v_tip = loop.state.tip_twist[:3]
    assert float(v_tip @ hand) / np.linalg.norm(hand) > 0.01, v_tip
