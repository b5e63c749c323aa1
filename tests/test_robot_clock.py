"""The robot's clock: a loop paced by a robot takes each cycle's time step from the robot (2 ms after
a missed 1 ms cycle), and the jerk limit continues what a Franka does over a lost command — it
extrapolates the last one with constant acceleration (libfranka's rate_limiting.h) — so the signal
the robot executes, tick by tick, keeps the acceleration and jerk limits also around missed cycles.

The executed signal is rebuilt here independently of the limit: each lost tick is v_k = 2 v_(k−1) −
v_(k−2) (a constant acceleration), then finite differences at the robot's 1 ms.
"""

from __future__ import annotations

import numpy as np
import pytest

from fdcontrol import RobotModel, make_mapping
from fdcontrol.drivers.base import JointState
from fdcontrol.drivers.simulated import SimulatedRobot
from fdcontrol.limits import JointAcceleration, JointJerk, run
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME

H = 1e-3  # s, the robot's tick
A, J = 10.0, 5000.0  # rad/s², rad/s³: the FR3's published limits
N = 7


def drive(period: float | None, ticks: int = 3000, seed: int = 1) -> tuple[np.ndarray, int]:
    """A loop at the robot's 1 kHz whose commands miss the robot now and then (every 40th cycle by
    two ticks, and at random by one to three), shaped by the acceleration limit (8 rad/s²) and the
    jerk limit; `period` None is a loop that sees every cycle as one step. Returns the signal the
    robot executes (one row per tick) and the number of lost ticks."""
    rng = np.random.default_rng(seed)
    limits = (JointAcceleration(np.full(N, 8.0)), JointJerk(np.full(N, J), np.full(N, A)))
    q = np.zeros(N)
    prev = np.zeros(N)
    executed = [np.zeros(N), np.zeros(N)]  # at rest before the first command
    target = np.zeros(N)
    lost, cycle, tick = 0, 0, 0
    while tick < ticks:
        if cycle % 300 == 0:  # a new desired velocity now and then (steps: the hardest case), or a stop
            target = rng.uniform(-1.5, 1.5, N) if rng.random() < 0.8 else np.zeros(N)
        k = 3 if cycle % 40 == 39 else (int(rng.integers(2, 5)) if rng.random() < 0.03 else 1)
        if cycle == 0:
            k = 1
        for _ in range(k - 1):  # the robot fills the lost commands: constant acceleration
            executed.append(2 * executed[-1] - executed[-2])
        lost += k - 1
        dt = k * H
        out = run(limits, q, target, prev, None, dt, period=None if period is None else period)
        executed.append(out)
        q = q + dt * out
        prev = out
        cycle += 1
        tick += k
    return np.array(executed), lost


def derivatives(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.diff(v, axis=0) / H
    return a, np.diff(a, axis=0) / H


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_executed_signal_keeps_the_limits_around_missed_cycles(seed):
    v, lost = drive(H, seed=seed)
    assert lost > 100  # the scenario misses the robot many times
    a, j = derivatives(v)
    assert np.max(np.abs(a)) <= A * (1 + 1e-9), np.max(np.abs(a))
    assert np.max(np.abs(j)) <= J * (1 + 1e-9), np.max(np.abs(j))
    assert np.max(np.abs(v)) > 1.0  # it moved (up to 1.5 rad/s)


def test_a_loop_blind_to_the_robots_fill_exceeds_the_jerk_limit():
    """The same scenario with a limit that sees each cycle as one step of dt: the executed signal
    leaves the jerk limit (the check above can fail)."""
    v, _ = drive(None)
    _, j = derivatives(v)
    assert np.max(np.abs(j)) > 1.5 * J


class SkippingArm(SimulatedRobot):
    """A simulated arm on a robot's 1 kHz clock (read() is the tick) whose clock goes on 3 ms at the
    cycles listed in `skips` (the loop missed two of the robot's states)."""

    owns_clock = True
    clock_period = H

    def __init__(self, robot: RobotModel, skips: set[int]) -> None:
        super().__init__(robot, dt=H, q0=np.array(HOME[robot.name]))
        self.skips, self.reads, self.robot_time = skips, 0, 0.0

    def read(self) -> JointState:
        js = super().read()
        self.robot_time += 3 * H if self.reads in self.skips else H
        self.reads += 1
        return JointState(js.q, js.qd, self.robot_time)


def test_the_paced_loop_takes_its_time_step_from_the_robot():
    """A cycle after a 3 ms gap on the robot's clock integrates 3 ms: its position reference is
    q + 3 ms·q̇_ref; every other cycle 1 ms."""
    robot = RobotModel.load("panda")
    skips = {60}
    arm = SkippingArm(robot, skips)
    loop = ControlLoop(robot, arm, make_solver(make_mapping("fd", robot)), command_timeout=10.0)
    assert loop.period == H
    steps = []
    for i in range(80):
        loop.set_wrench([2.0, 0, 0, 0, 0, 0], t=float(i) * H)
        before = loop.state
        st = loop.step(now=float(i) * H)
        steps.append((st.q_ref - st.q, st.qd_ref, before.qd_ref))
    for i, (dq, qd, _) in enumerate(steps):
        dt = 3 * H if i + 1 in skips else H  # step i makes read i + 1 (the loop read once when built)
        assert np.allclose(dq, dt * qd, atol=1e-12), (i, dq, qd)
    assert loop.robot_t == pytest.approx(arm.robot_time)
