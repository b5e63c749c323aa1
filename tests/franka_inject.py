"""A Franka driver for the tests that makes the robot abort a motion as a real Franka does on a
reflex — franky-sim has none. After ``abort_after`` commands of a motion, the robot "aborts" it:
the velocity command is replaced by a stop that ends the motion on the simulator's side (a real
Franka's reflex brakes the arm), ``writeOnce`` raises libfranka's ``ControlException`` with the
robot's text, and the robot's state reports the error flag (``last_motion_errors``) by
libfranka's name. Everything after that — the driver's error path, the loop's fault, /state,
/health, /metrics, recovery — is the real code.

    fdcontrol serve --robot fr3 --driver tests.franka_inject:AbortingFranka --rate 1000
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from fdcontrol.drivers.franka import CLOCK_PERIOD, FrankaDriver

INJECTED = "joint_velocity_violation"


class _Aborting:
    """The active control of a motion the robot aborts on the next command."""

    def __init__(self, control: Any, lib: Any) -> None:
        self.control, self.lib = control, lib

    def readOnce(self) -> Any:
        return self.control.readOnce()

    def writeOnce(self, cmd: Any) -> None:
        stop = self.lib.JointVelocities([0.0] * 7)
        stop.motion_finished = True
        self.control.writeOnce(stop)
        raise self.lib.ControlException(f'libfranka: Move command aborted: motion aborted by reflex! ["{INJECTED}"]')


class AbortingFranka(FrankaDriver):
    def __init__(self, robot: Any, dt: float = CLOCK_PERIOD, *, abort_after: int = 300, **options: Any) -> None:
        self.abort_after, self._commands, self._aborting = int(abort_after), 0, False
        super().__init__(robot, dt, **options)

    def send(self, q_ref: Any, qd_ref: Any) -> None:
        if self._control is not None and not self._aborting:
            self._commands += 1
            if self._commands >= self.abort_after:
                self._aborting = True
                self._control = _Aborting(self._control, self.lib)
        super().send(q_ref, qd_ref)

    def _last_motion_errors(self, state: Any) -> Any:
        if self._aborting:
            self._aborting, self._commands = False, 0  # the next motion runs normally
            return SimpleNamespace(**{INJECTED: True, "joint_reflex": False})
        return super()._last_motion_errors(state)


class LateFranka(FrankaDriver):
    """A driver that answers the robot late every ``late_every``-th command (a loaded machine): the
    robot's clock goes on, so the command answers a later state — a missed robot cycle, on purpose."""

    def __init__(self, robot: Any, dt: float = CLOCK_PERIOD, *, late_every: int = 40, late_by: float = 0.0025,
                 **options: Any) -> None:
        self.late_every, self.late_by, self._n = int(late_every), float(late_by), 0
        super().__init__(robot, dt, **options)

    def send(self, q_ref: Any, qd_ref: Any) -> None:
        if self._control is not None:
            self._n += 1
            if self._n % self.late_every == 0:
                time.sleep(self.late_by)
        super().send(q_ref, qd_ref)
