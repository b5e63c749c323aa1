"""The loop records when a fault began on its own clock (``LoopState.fault_at``), so that how soon a
fault was noticed is read from the loop's record, not from how fast a test or an operator polls."""

from __future__ import annotations

import math
import time

import numpy as np

from fdcontrol import RobotModel, make_mapping
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver

Q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
DT = 0.002


class DyingRobot(SimulatedRobot):
    """Answers until `die()`, then every read raises; records this host's monotonic time of each read."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.dead = False
        self.reads: list[tuple[float, bool]] = []  # (time.monotonic() at the read, it raised)

    def read(self):
        t = time.monotonic()
        self.reads.append((t, self.dead))
        if self.dead:
            raise ConnectionError("the robot is gone")
        return super().read()


def test_fault_at_is_the_first_failing_read_on_the_loops_clock_and_stays_until_released():
    robot = RobotModel.load("ur10")
    drv = DyingRobot(robot, dt=DT, q0=Q0)
    loop = ControlLoop(robot, drv, make_solver(make_mapping("fd", robot)), rate=1 / DT)
    loop.start()
    try:
        deadline = time.monotonic() + 10
        while loop.cycle < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert math.isnan(loop.state.fault_at)  # no fault: null
        drv.dead = True
        while loop.state.fault is None and time.monotonic() < deadline:
            time.sleep(0.005)
        first = loop.state
        while sum(dead for _, dead in drv.reads) < 10 and time.monotonic() < deadline:  # it keeps failing
            time.sleep(0.005)
        later = loop.state
    finally:
        loop.stop()
    assert first.holding and "the robot is gone" in first.fault
    first_failed = next(t for t, dead in drv.reads if dead)
    last_ok = max(t for t, dead in drv.reads if not dead)
    # between the first failing read and the end of its cycle's fault handling: after the read,
    # before the second failing read (a period later)
    second_failed = [t for t, dead in drv.reads if dead][1]
    assert first_failed <= first.fault_at <= second_failed
    assert last_ok <= first.stamp < first.fault_at  # stamp: the last good cycle's
    assert later.fault_at == first.fault_at  # when the fault began, not the newest failing read
    loop.hold(False)
    assert math.isnan(loop.fault_at)
