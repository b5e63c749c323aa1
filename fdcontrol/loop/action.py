"""The policy's action input of the loop: goal poses at the policy's rate, tracked at the loop's.

:class:`ActionInput` holds the newest goal (latest wins) and the
:class:`~fdcontrol.control.interpolator.TargetInterpolator` that ramps the motion law's target to
it. A goal is handed over with the time it arrived (``time.monotonic()``) and its sequence number;
the first cycle whose law uses it records its own time, so the state says how long an action
waited (``action_seq``, ``action_used_at`` of :class:`~fdcontrol.loop.state.LoopState`).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from fdcontrol.control.interpolator import TargetInterpolator


@dataclass(frozen=True)
class Action:
    """A goal pose (4×4, base frame), the policy's step period (s), its sequence number, arrival time."""

    goal: np.ndarray
    step: float
    seq: int
    t: float


class ActionInput:
    """Latest-wins goal slot plus the interpolator; sampled once per cycle by the loop thread."""

    def __init__(self, start: np.ndarray, now: float, interpolator: TargetInterpolator | None = None) -> None:
        self.interpolator = interpolator or TargetInterpolator()
        self.interpolator.reset(start, now)
        self._new: Action | None = None  # written by any thread, taken by the loop thread
        self._lock = threading.Lock()
        self.seq = 0  # of the newest action a cycle has used
        self.used_at = math.nan  # the loop's time of the first cycle that used it

    def put(self, action: Action) -> None:
        with self._lock:
            self._new = action

    def target(self, now: float) -> np.ndarray:
        """The motion law's target this cycle; a new action starts its segment here."""
        if self._new is not None:
            with self._lock:
                a, self._new = self._new, None
            if a is not None:
                self.interpolator.set_goal(a.goal, a.step, now)
                self.seq, self.used_at = a.seq, now
        return self.interpolator.sample(now)
