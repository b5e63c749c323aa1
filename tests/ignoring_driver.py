"""A driver stand-in for the service: the MuJoCo arm, whose servos never get the loop's commands.

    fdcontrol serve --driver tests.ignoring_driver:IgnoringMujoco

Every reference the loop sends is dropped; the simulated servos hold the arm where it started (real
MuJoCo physics). What an arm with a lost command link, or one blocked by its brakes, looks like.
"""

from __future__ import annotations

import numpy as np

from fdcontrol.drivers.mujoco import MujocoRobot


class IgnoringMujoco(MujocoRobot):
    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None:
        super().send(None, None)  # (None, None): hold the previous reference; the loop's is ignored
