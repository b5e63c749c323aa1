"""Prometheus metrics: ``GET /metrics`` in the text exposition format (prometheus-client).

Two halves, because the loop runs in its own process:

* :class:`LoopMetrics` lives in the loop process. ``observe`` runs on the loop thread in
  ``ShmIO.publish`` and only compares three fields with the previous state (edge counts of
  watchdog trips, holds, faults). A background thread (``start_folding``) folds the loop's
  Stats ring (compute time, period error) into cumulative histogram buckets twice a second,
  so every cycle is counted once however rarely Prometheus scrapes.
* :class:`ServiceCollector` lives in the API process; on each scrape it asks the loop
  process for ``LoopMetrics.snapshot()`` (one pipe round-trip) and adds the WebSocket hub's
  numbers. Scraping never touches the loop thread.

``AUTH_FAILURES`` lives in the API process: server/auth.py increments it for every wrong credential.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

#: upper bucket bounds (s) of |period error| = |cycle start − scheduled start|
PERIOD_ERROR_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2.5e-2)
#: upper bucket bounds (s) of a cycle's compute time
COMPUTE_BUCKETS = (5e-5, 1e-4, 2e-4, 3e-4, 5e-4, 7.5e-4, 1e-3, 2e-3, 5e-3, 1e-2)

AUTH_REGISTRY = CollectorRegistry(auto_describe=True)
AUTH_FAILURES = Counter("fdcontrol_auth_failures",
                        "Wrong credentials refused (bearer token, session cookie, login token)",
                        registry=AUTH_REGISTRY)  # incremented by server/auth.py (Access.failed)


class _Hist:
    """Cumulative histogram of non-negative samples (s)."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = np.asarray(bounds)
        self.counts = np.zeros(len(bounds) + 1, dtype=np.int64)  # last: above every bound
        self.sum = 0.0

    def add(self, x: np.ndarray) -> None:
        if len(x):
            idx = np.searchsorted(self.bounds, x, side="left")  # x ≤ bound i → bucket i (Prometheus 'le')
            self.counts += np.bincount(idx, minlength=len(self.counts))
            self.sum += float(x.sum())

    def as_dict(self) -> dict[str, Any]:
        return {"bounds": self.bounds.tolist(), "counts": self.counts.tolist(), "sum": self.sum}


class LoopMetrics:
    """Loop-process counters and histograms (see the module doc)."""

    def __init__(self) -> None:
        self.watchdog_trips = self.holds = self.faults = 0
        self.reactions, self._rx = 0, 0  # reaction rules fired (state.reaction_count rises)
        self._wd, self._hold, self._fault = "idle", False, False
        self.period_error, self.compute = _Hist(PERIOD_ERROR_BUCKETS), _Hist(COMPUTE_BUCKETS)
        self.cycles = self.overruns = 0
        self._stats: Any = None
        self._seen = self._overruns_seen = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def observe(self, s: Any) -> None:
        """Loop thread, every cycle: count rising edges only (a few comparisons)."""
        if s.watchdog != self._wd:
            if s.watchdog == "tripped":
                self.watchdog_trips += 1
            self._wd = s.watchdog
        if s.holding != self._hold:
            if s.holding:
                self.holds += 1
            self._hold = s.holding
        has_fault = s.fault is not None
        if has_fault != self._fault:
            if has_fault:
                self.faults += 1
            self._fault = has_fault
        rx = getattr(s, "reaction_count", 0)
        if rx != self._rx:
            self.reactions += rx - self._rx if rx > self._rx else rx  # a rebuilt loop counts from 0
            self._rx = rx

    def fold(self, stats: Any) -> None:
        """Add the Stats ring entries recorded since the last fold (a new loop starts over)."""
        with self._lock:
            if stats is not self._stats:
                self._stats, self._seen, self._overruns_seen = stats, 0, 0
            count, n = stats.count, stats.n
            new = min(count - self._seen, n)
            if new > 0:
                idx = np.arange(count - new, count) % n
                self.period_error.add(np.abs(stats.period_error[idx]))
                self.compute.add(stats.compute[idx])
                self.cycles += new
            self._seen = count
            self.overruns += stats.overruns - self._overruns_seen
            self._overruns_seen = stats.overruns

    def start_folding(self, stats: Callable[[], Any], interval: float = 0.5) -> None:
        def run() -> None:
            while not self._stop.wait(interval):
                self.fold(stats())
        threading.Thread(target=run, name="fdcontrol-metrics", daemon=True).start()

    def close(self) -> None:
        self._stop.set()

    def snapshot(self, stats: Any, driver: Any = None) -> dict[str, Any]:
        self.fold(stats)
        errors = driver.robot_errors() if driver is not None else None
        return {"cycles": self.cycles, "overruns": self.overruns, "watchdog_trips": self.watchdog_trips,
                "holds": self.holds, "faults": self.faults, "reactions": self.reactions,
                "period_error": self.period_error.as_dict(),
                "compute": self.compute.as_dict(), "robot_errors": errors}


def _histogram(name: str, doc: str, h: dict[str, Any]) -> HistogramMetricFamily:
    cum = np.cumsum(h["counts"]).tolist()
    buckets = [(repr(float(b)), c) for b, c in zip(h["bounds"], cum[:-1], strict=True)]
    return HistogramMetricFamily(name, doc, buckets=[*buckets, ("+Inf", cum[-1])], sum_value=h["sum"])


def _robot_gauges(state: Any) -> Iterator[Metric]:
    """The robot controller's own state, when the driver reports it (UR RTDE)."""
    if math.isfinite(state.speed_scaling):
        yield GaugeMetricFamily("fdcontrol_robot_speed_scaling", "Robot controller speed scaling, fraction 0–1",
                                value=state.speed_scaling)
    if state.safety_mode is not None:
        g = GaugeMetricFamily("fdcontrol_robot_safety_mode", "1 for the robot controller's safety mode",
                              labels=["mode"])
        g.add_metric([state.safety_mode], 1.0)
        yield g


def _robot_errors(errors: dict[str, Any] | None) -> Iterator[Metric]:
    """The robot's errors by name (the franka driver: libfranka's), when the driver reports them."""
    if errors is None:
        return
    c = CounterMetricFamily("fdcontrol_robot_errors", "Robot errors since the driver started, by the robot's "
                            "error name (libfranka: joint_velocity_violation, cartesian_reflex, …; "
                            "connection_lost)", labels=["error"])
    for name, n in sorted(errors["counts"].items()):
        c.add_metric([name], n)
    yield c
    g = GaugeMetricFamily("fdcontrol_robot_error_active", "1 for each error name of the robot's current "
                          "error (until recovered or reconnected)", labels=["error"])
    for name in errors["active"]:
        g.add_metric([name], 1.0)
    yield g


class ServiceCollector:
    """Collects, per scrape, the loop process's metrics and the API process's WebSocket numbers."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        st = self.app.state
        worker, hub = getattr(st, "worker", None), getattr(st, "hub", None)
        up = GaugeMetricFamily("fdcontrol_loop_up", "1 while the loop process answers")
        m: dict[str, Any] | None = None
        if worker is not None:
            try:
                m = worker.call("metrics", timeout=5.0)
            except Exception:  # a dead or busy loop process: say so, keep serving
                m = None
        up.add_metric([], 1.0 if m is not None else 0.0)
        yield up
        if m is not None:
            state = worker.state()[0]
            running = GaugeMetricFamily("fdcontrol_loop_running", "1 while the control loop runs")
            running.add_metric([], float(state.running))
            yield running
            yield from _robot_gauges(state)
            for key, doc in (("cycles", "Control cycles run"),
                             ("overruns", "Cycles that computed or started more than one period late"),
                             ("watchdog_trips", "Times the command watchdog tripped (stale streamed wrench)"),
                             ("holds", "Times the loop entered hold (request, watchdog or fault)"),
                             ("faults", "Faults raised by the loop (non-finite values, driver errors)"),
                             ("reactions", "Reaction rules fired (guarded moves)")):
                yield CounterMetricFamily(f"fdcontrol_loop_{key}", doc, value=m[key])
            yield _histogram("fdcontrol_loop_period_error_seconds",
                             "|cycle start − scheduled start| per cycle", m["period_error"])
            yield _histogram("fdcontrol_loop_compute_seconds", "Compute time per cycle", m["compute"])
            yield from _robot_errors(m.get("robot_errors"))
        if hub is not None:
            g = GaugeMetricFamily("fdcontrol_ws_clients", "Connected WebSocket clients")
            g.add_metric([], hub.clients)
            yield g
            yield CounterMetricFamily("fdcontrol_ws_dropped_states",
                                      "States a slow WebSocket client skipped", value=hub.dropped)


def exposition(app: Any) -> bytes:
    """The /metrics body for this app (its registry is made on the first scrape)."""
    reg = getattr(app.state, "metrics_registry", None)
    if reg is None:
        reg = CollectorRegistry(auto_describe=False)
        reg.register(ServiceCollector(app))  # type: ignore[arg-type]
        app.state.metrics_registry = reg
    return generate_latest(reg) + generate_latest(AUTH_REGISTRY)


__all__ = ["AUTH_FAILURES", "COMPUTE_BUCKETS", "PERIOD_ERROR_BUCKETS", "LoopMetrics", "ServiceCollector",
           "exposition"]
