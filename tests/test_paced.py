"""The robot-paced loop (fdcontrol/loop/paced.py) with a clock-owning driver written here: a
simulated arm whose read() blocks for its next state, like a Franka's 1 kHz stream."""

from __future__ import annotations

import threading
import time

import numpy as np

from fdcontrol import RobotModel, make_mapping
from fdcontrol.drivers.simulated import SimulatedRobot
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME

from .waits import HUNG, until


class ClockedArm(SimulatedRobot):
    """Sends a state every `period` s of its own clock (a thread); read() waits for the next one.
    Logs the order of reads and sends, and counts states that passed without a command."""

    owns_clock = True

    def __init__(self, robot: RobotModel, period: float, stall_after: int | None = None,
                 timeout: float = 1.0) -> None:
        super().__init__(robot, dt=period, q0=np.array(HOME[robot.name]))
        self.clock_period = period
        self.tick, self.answered, self.missed = 0, 0, 0
        self.log: list[str] = []
        self.read_at: float | None = None
        self._cv = threading.Condition()
        self._seen = 0
        self._stall_after = stall_after
        self._run, self.timeout = True, timeout
        threading.Thread(target=self._clock, daemon=True).start()

    def _clock(self) -> None:
        nxt = time.perf_counter()
        while self._run:
            nxt += self.clock_period
            time.sleep(max(0.0, nxt - time.perf_counter()))
            with self._cv:
                if self._stall_after is not None and self.tick >= self._stall_after:
                    continue  # the robot went silent
                if self.answered < self.tick:
                    self.missed += self.tick - self.answered
                    self.answered = self.tick
                self.tick += 1
                self._cv.notify_all()

    def read(self):
        with self._cv:
            if not self._cv.wait_for(lambda: self.tick > self._seen, timeout=self.timeout):
                raise ConnectionError(f"no robot state for {self.timeout} s")
            self._seen = self.tick
        self.read_at = time.perf_counter()
        self.log.append("r")
        return super().read()

    def send(self, q_ref, qd_ref):
        self.log.append("s")
        with self._cv:
            self.answered = self._seen
        super().send(q_ref, qd_ref)

    def clock_stats(self):
        return {"robot_success_rate": 1.0, "robot_missed_cycles": self.missed}

    def close(self) -> None:
        self._run = False


def make(robot: RobotModel, arm: ClockedArm) -> ControlLoop:
    return ControlLoop(robot, arm, make_solver(make_mapping("fd", robot)), rate=123.0,
                       limits=SafetyLimits.from_robot(robot, limits=("position", "velocity", "acceleration", "jerk")))


def test_the_robot_clock_paces_the_loop(panda):
    arm = ClockedArm(panda, period=0.004)
    loop = make(panda, arm)
    assert loop.period == 0.004  # the robot's period, not the rate asked for
    x0 = loop.state.tip_pose[0, 3]
    loop.start()
    try:
        deadline = time.monotonic() + HUNG  # ends a hung test only
        while loop.state.cycle < 250:  # 1 s of the robot's 4 ms cycles, by the loop's count
            assert time.monotonic() < deadline, loop.state.cycle
            loop.set_wrench([5.0, 0, 0, 0, 0, 0])
            time.sleep(0.02)  # the pace of the wrench stream
    finally:
        loop.stop()
        arm.close()
    log = "".join(arm.log)
    # every state is answered by exactly one command before the next state is read
    body = log[1:].rstrip("r")  # after the constructor's read of the initial state
    assert len(body) > 100 and body == "rs" * (len(body) // 2)
    cycles = loop.stats.count
    assert cycles > 0.5 * arm.tick  # the loop ran at the robot's pace (most states answered)
    s = loop.stats.summary()
    assert s["robot_missed_cycles"] == arm.missed and s["robot_success_rate"] == 1.0
    assert loop.state.tip_pose[0, 3] > x0 + 0.005  # the wrench moved the tip along +x


def test_a_silent_robot_faults_into_hold_and_the_loop_stays_alive(panda):
    arm = ClockedArm(panda, period=0.004, stall_after=60, timeout=0.05)
    loop = make(panda, arm)
    loop.start()
    try:
        deadline = time.monotonic() + 5
        while loop.state.fault is None and time.monotonic() < deadline:
            loop.set_wrench([5.0, 0, 0, 0, 0, 0])
            time.sleep(0.01)
        assert loop.state.fault is not None and "no robot state" in loop.state.fault
        assert loop.state.holding
        t = loop.last_cycle_at
        # alive and holding, not stuck: it goes on cycling (its cycle stamp moves; no robot state, no count)
        until(lambda: loop.last_cycle_at, lambda t1: t1 > t, what="a cycle after the fault")
        assert loop.running and loop.state.holding
    finally:
        loop.stop()
        arm.close()
