"""Timing of the learning interface: observation age and action delay, as percentiles."""

from __future__ import annotations

import math
from collections import deque

import numpy as np


class Samples:
    """The last ``n`` samples of one duration (s), summarised as n, p50, p99 and max."""

    def __init__(self, n: int = 100_000) -> None:
        self.values: deque[float] = deque(maxlen=n)

    def add(self, x: float | None) -> None:
        if x is not None and math.isfinite(x):
            self.values.append(float(x))

    def summary(self) -> dict[str, float | int]:
        a = np.array(self.values, dtype=float)
        if not a.size:
            return {"n": 0, "p50": math.nan, "p99": math.nan, "max": math.nan}
        return {"n": int(a.size), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
                "max": float(a.max())}


class Timing:
    """``observation_age``: from the loop cycle that produced an observation to ``step()`` returning it;
    ``action_delay``: from ``step()`` being called to the first loop cycle whose motion law used the
    action. Both in s, measured on one clock (``time.monotonic()``: the service on the same host)."""

    def __init__(self) -> None:
        self.observation_age = Samples()
        self.action_delay = Samples()
        self.missed_actions = 0  # actions not yet used by the loop when the next observation was taken
        self.late_steps = 0  # steps that started later than their period allowed

    def summary(self) -> dict[str, object]:
        return {"observation_age": self.observation_age.summary(), "action_delay": self.action_delay.summary(),
                "missed_actions": self.missed_actions, "late_steps": self.late_steps}
