"""The robot-paced loop: for a driver that owns the clock (``driver.owns_clock``), its
``read()`` is the tick.

A robot such as a Franka sends its state at a fixed rate and expects one command back before
the next state. The thread does not sleep: each cycle starts by waiting in ``read()`` for the
robot's next state and answers with ``send()`` in the same cycle. The statistics record, per
cycle, the compute time from the state's arrival (``driver.read_at``, ``time.perf_counter()``)
to the end of the cycle, and the period error as the interval between two arrivals minus the
period; the driver adds the robot's own view (``driver.clock_stats()``: success rate, missed
cycles). A failing cycle (a lost connection) holds and reports like in the fixed-rate loop,
then waits ``FAILED_CYCLE_PAUSE`` before the next try, so a dead robot does not make the thread
spin; such a cycle counts as the loop's sign of life (``last_cycle_at``): the loop is alive and
holding with a fault — the API reports the fault, the supervisor does not replace the process
(a new one could not reach the robot either; reconnecting is explicit).

The robot's clock is also the cycle's time step (:func:`robot_step`): libfranka hands its control
callback the time since the last state — 1 ms, 2 ms after a missed cycle — and so does this loop:
the limits, the solver's integration and the reference see a missed cycle as the time it was.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fdcontrol.loop.cycle import ControlLoop


FAILED_CYCLE_PAUSE = 0.01  # s between tries while the driver fails (e.g. the robot is gone)
MAX_STEP_PERIODS = 100  # the longest time step a cycle integrates, in periods (a lost robot faults sooner)


def robot_step(loop: ControlLoop, t: float) -> float:
    """This cycle's time step on the robot's clock, in whole periods (1 ms, 2 ms after a missed cycle,
    …), at most ``MAX_STEP_PERIODS``: the driver's ``clock_step`` (the robot's time since the state
    before, as libfranka hands it to its control callback) or else the robot's time ``t`` (s) of this
    state minus that of the previous cycle's; one period for the first state, and where the robot's
    time did not advance or started anew (a reconnect)."""
    prev, loop.robot_t = loop.robot_t, t
    period = loop.period
    step = loop.driver.clock_step
    if step is None:
        if prev is None:
            return period
        step = t - prev
    if not step > 0.5 * period:
        return period
    n = step / period  # (> 0.5: step > 0.5 period, a power of two's scaling, leaves the rounded quotient above it)
    if n < 1.5:  # one period (round(n) is 1): the usual cycle, without round's and min's calls
        return period
    return min(round(n), MAX_STEP_PERIODS) * period


def run_paced(loop: ControlLoop, report: object) -> None:
    """The loop thread's body for a driver that owns the clock (see the module doc)."""
    period, clock, driver = loop.period, time.perf_counter, loop.driver
    last_tick: float | None = None
    while loop._running.is_set():
        start = clock()
        failed = False
        try:
            loop._cycle(None)  # the paced loop records its own timing (from the robot's tick)
        except Exception as exc:  # a failing driver or a bug holds the robot, loudly
            failed = True
            # the thread is alive and reports the fault (a lost robot is a fault, not a stuck loop)
            loop.last_cycle_at = time.monotonic()
            try:
                loop._on_exception(exc)
            except Exception as inner:
                report(f"fault handling failed: {type(inner).__name__}: {inner}")  # type: ignore[operator]
        if loop._stop_request and not loop.qd_ref.any():  # braked to standstill: stop
            loop._running.clear()
            break
        end = clock()
        tick = driver.read_at or start
        if not failed:
            err = 0.0 if last_tick is None else (tick - last_tick) - period
            loop.stats.record(end - tick, err, period)
            if err > period and end - tick <= period:  # a late state is the robot's (or the network's)
                loop.stats.overruns -= 1  # doing: an overrun here is only our compute exceeding the period
            last_tick = tick
        else:
            last_tick = None
            time.sleep(max(period, FAILED_CYCLE_PAUSE))
