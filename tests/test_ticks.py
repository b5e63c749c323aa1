"""The robot-clock tick counts without round() on the usual cycle (one tick): fdcontrol.loop.paced.robot_step,
FrankaDriver._ticks and the missed cycles FrankaDriver.read counts give what the formulas with round() give, for
any time step — about one tick, half-way cases (round half to even), far ones, subnormal and infinite ones (the
same error)."""

from __future__ import annotations

import itertools
import math
import random
from types import SimpleNamespace
from typing import Any

import pytest

from fdcontrol.drivers.franka import _MAX_TICKS, CLOCK_PERIOD, FrankaDriver
from fdcontrol.loop.paced import MAX_STEP_PERIODS, robot_step


def _steps(period: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    out = [0.0, -0.0, -period, 5e-324, math.nan]
    for k in (0.5, 1.0, 1.5, 2.0, 2.5, 3.5, 99.5, 100.0, 100.5, 1e6):
        x = k * period
        out += [x, math.nextafter(x, math.inf), math.nextafter(x, -math.inf),
                math.nextafter(math.nextafter(x, math.inf), math.inf)]
    out += [period * rng.uniform(0.0, 3.0) for _ in range(3000)]
    out += [period * (1.0 + rng.gauss(0.0, 1e-6)) for _ in range(1000)]  # a robot's clock about one tick
    out += [period * rng.choice([2, 3, 5, 200]) * (1.0 + rng.gauss(0.0, 1e-9)) for _ in range(500)]
    return out


def _old_robot_step(period: float, step: float) -> float:
    if not step > 0.5 * period:
        return period
    return min(round(step / period), MAX_STEP_PERIODS) * period


@pytest.mark.parametrize("period", [1e-3, 0.002, 1.0 / 123.0])
def test_robot_step_is_the_rounded_step(period):
    for step in _steps(period, 1):
        loop = SimpleNamespace(robot_t=None, period=period, driver=SimpleNamespace(clock_step=step))
        got = robot_step(loop, 0.0)  # type: ignore[arg-type]
        want = _old_robot_step(period, step)
        assert math.copysign(1.0, got) == math.copysign(1.0, want) and got == want, step
    loop = SimpleNamespace(robot_t=None, period=period, driver=SimpleNamespace(clock_step=math.inf))
    with pytest.raises(OverflowError):
        robot_step(loop, 0.0)  # type: ignore[arg-type]


def _old_ticks(t: float | None, t_cmd: float | None) -> int:
    n = 1
    if t is not None and t_cmd is not None and t > t_cmd:
        n = min(max(round((t - t_cmd) / CLOCK_PERIOD), 1), _MAX_TICKS)
    return n


def _driver_at(t: float | None, t_cmd: float | None) -> Any:
    state = None if t is None else SimpleNamespace(time=SimpleNamespace(to_sec=lambda: t))
    return SimpleNamespace(_state=state, _t_cmd=t_cmd)


def test_the_franka_drivers_ticks_are_the_rounded_ones():
    t0 = 12.345
    cases = [(None, None), (t0, None), (None, t0), (t0, t0), (t0, t0 + 1e-3)]
    cases += [(t0 + dt, t0) for dt in _steps(CLOCK_PERIOD, 2)]
    cases += [(k * CLOCK_PERIOD, 0.0) for k in (0.5, 1.5, 2.5, 3.5)]  # half-way, to the bit: round half to even
    assert 0.0015 / CLOCK_PERIOD == 1.5 and 0.0025 / CLOCK_PERIOD == 2.5
    for t, t_cmd in cases:
        d = _driver_at(t, t_cmd)
        assert FrankaDriver._ticks(d) == _old_ticks(t, t_cmd), (t, t_cmd)  # type: ignore[arg-type]
        assert d._t_cmd is t or (t != t and d._t_cmd != d._t_cmd)
    with pytest.raises(OverflowError):
        FrankaDriver._ticks(_driver_at(math.inf, t0))  # type: ignore[arg-type]


class _Read:
    """Just enough of a connected driver for FrankaDriver.read: its control hands out states at given times."""

    def __init__(self, times: list[float]) -> None:
        self.times = times
        self._lock, self._lost, self._robot, self._fd = _Lock(), False, object(), None
        self._control = SimpleNamespace(readOnce=self._next)
        self._t_read = self._t_last = None
        self.missed_cycles = 0

    def _next(self) -> tuple[Any, None]:
        t = self.times.pop(0)
        return SimpleNamespace(time=SimpleNamespace(to_sec=lambda: t), q=[0.0] * 7, dq=[0.0] * 7), None

    def _update(self, state: Any) -> None:
        pass


class _Lock:
    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        pass


def test_the_missed_cycles_are_the_rounded_gaps():
    rng = random.Random(3)
    gaps = _steps(CLOCK_PERIOD, 4)
    gaps = [g for g in gaps if g == g and g > 0.0]  # a robot's clock only goes on (NaN: below)
    rng.shuffle(gaps)
    times, t = [0.0, 0.0015, 0.0015, 0.0040], 0.0040  # gaps of 1.5 and 2.5 ticks to the bit (missed: 1 and 1)
    for g in gaps:
        t += g
        times.append(t)
    want = 0
    for a, b in itertools.pairwise(times):
        gap = round((b - a) / CLOCK_PERIOD) - 1
        if gap > 0:
            want += gap
    d = _Read(list(times))
    for _ in times:
        FrankaDriver.read(d)  # type: ignore[arg-type]
    assert want > 0 and d.missed_cycles == want
    d = _Read([1.0, math.nan])  # a time that is not a number raises as round() did
    FrankaDriver.read(d)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        FrankaDriver.read(d)  # type: ignore[arg-type]
