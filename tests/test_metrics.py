"""GET /metrics: the Prometheus text parser reads it, and its counters move with the loop."""

from __future__ import annotations

import json
import time

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.sync.client import connect

from fdcontrol.server.metrics import LoopMetrics

from .service import Service
from .waits import cycles_later, until


@pytest.fixture(scope="module")
def service():
    svc = Service()
    yield svc
    svc.stop()


def scrape(http) -> dict[str, dict]:
    r = http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out: dict[str, dict] = {}
    for fam in text_string_to_metric_families(r.text):
        out[fam.name] = {"type": fam.type, "samples": {(s.name, tuple(sorted(s.labels.items()))): s.value
                                                        for s in fam.samples}}
    return out


def value(m, family, sample=None, **labels):
    return m[family]["samples"][(sample or family, tuple(sorted(labels.items())))]


def test_metrics_parse_and_move_with_the_loop(service):
    http = httpx.Client(base_url=service.url, timeout=30)
    http.post("/control/start")
    state = lambda: http.get("/state").json()  # noqa: E731
    cycles_later(state, 50)
    m0 = scrape(http)
    c0 = state()["cycle"]
    assert value(m0, "fdcontrol_loop_up") == 1 and value(m0, "fdcontrol_loop_running") == 1
    for name, kind in (("fdcontrol_loop_cycles", "counter"), ("fdcontrol_loop_overruns", "counter"),
                       ("fdcontrol_loop_watchdog_trips", "counter"), ("fdcontrol_loop_holds", "counter"),
                       ("fdcontrol_loop_faults", "counter"), ("fdcontrol_loop_period_error_seconds", "histogram"),
                       ("fdcontrol_loop_compute_seconds", "histogram"), ("fdcontrol_ws_clients", "gauge"),
                       ("fdcontrol_ws_dropped_states", "counter"), ("fdcontrol_auth_failures", "counter")):
        assert m0[name]["type"] == kind, name
    s0 = http.get("/stats").json()
    # a push that ends: the watchdog trips once and the loop holds
    with connect(service.url.replace("http", "ws") + "/ws/control?decimation=50") as ws:
        for _ in range(20):
            ws.send(json.dumps({"wrench": [5, 0, 0, 0, 0, 0]}))
            time.sleep(0.02)  # the pace of the stream
        until(state, lambda st: st["watchdog"] == "tripped", what="the watchdog tripped")
        m_mid = scrape(http)
    rate = http.get("/stats").json()["rate"]
    until(state, lambda st: st["cycle"] > c0 + rate, what="1 s of cycles since the first scrape")
    m1 = until(lambda: scrape(http), lambda m: value(m, "fdcontrol_ws_clients") == 0, what="the client gone")
    s1 = http.get("/stats").json()
    d_cycles = value(m1, "fdcontrol_loop_cycles", "fdcontrol_loop_cycles_total") - value(
        m0, "fdcontrol_loop_cycles", "fdcontrol_loop_cycles_total")
    d_stats = s1["cycles"] - s0["cycles"]
    print(f"cycles: metrics +{d_cycles:.0f}, /stats +{d_stats}")
    assert d_cycles > 0.5 * s1["rate"]  # > 1 s of loop between the scrapes
    assert abs(d_cycles - d_stats) < 0.2 * s1["rate"]  # the two counts differ only by the calls' spacing
    assert value(m1, "fdcontrol_loop_watchdog_trips", "fdcontrol_loop_watchdog_trips_total") >= value(
        m0, "fdcontrol_loop_watchdog_trips", "fdcontrol_loop_watchdog_trips_total") + 1
    assert value(m1, "fdcontrol_loop_holds", "fdcontrol_loop_holds_total") >= value(
        m0, "fdcontrol_loop_holds", "fdcontrol_loop_holds_total") + 1
    assert value(m_mid, "fdcontrol_ws_clients") >= 1 and value(m1, "fdcontrol_ws_clients") == 0
    # histograms: cumulative buckets, +Inf = count = cycles counted, mean within the observed range
    for fam in ("fdcontrol_loop_period_error_seconds", "fdcontrol_loop_compute_seconds"):
        b = sorted(((float(dict(k)["le"]), v) for (n, k), v in m1[fam]["samples"].items() if n.endswith("_bucket")))
        counts = [v for _, v in b]
        assert counts == sorted(counts) and b[-1][0] == float("inf")
        total = value(m1, fam, fam + "_count")
        assert counts[-1] == total == value(m1, "fdcontrol_loop_cycles", "fdcontrol_loop_cycles_total")
        mean = value(m1, fam, fam + "_sum") / total
        assert 0 < mean < 0.05
    http.post("/control/hold", json={"hold": False})


def test_loop_metrics_count_edges_and_fold_every_cycle_once():
    """LoopMetrics against a hand-made sequence and a hand-filled Stats ring."""
    from types import SimpleNamespace as S

    from fdcontrol.loop.cycle import Stats

    m = LoopMetrics()
    seq = [("idle", False, None), ("ok", False, None), ("tripped", True, None), ("tripped", True, None),
           ("ok", False, None), ("tripped", True, "x"), ("ok", False, None)]
    for wd, hold, fault in seq:
        m.observe(S(watchdog=wd, holding=hold, fault=fault))
    assert (m.watchdog_trips, m.holds, m.faults) == (2, 2, 1)
    st = Stats(n=100)
    rng = np.random.default_rng(0)
    errs, comps = rng.uniform(0, 3e-3, 250), rng.uniform(0, 1e-3, 250)
    for k in range(250):
        st.record(comps[k], errs[k], 2e-3)
        if k % 40 == 39:  # fold more often than the ring wraps
            m.fold(st)
    snap = m.snapshot(st)
    assert snap["cycles"] == 250 and snap["overruns"] == st.overruns
    h = snap["period_error"]
    expect = np.histogram(errs, bins=[-np.inf, *h["bounds"], np.inf])[0]  # independent binning
    # np.histogram bins are [a, b); Prometheus buckets are (a, b]; no sample sits on a bound here
    assert h["counts"] == expect.tolist()
    assert abs(h["sum"] - errs.sum()) < 1e-12


def test_auth_failures_counter_is_exported(service):
    """Exported (0 on a service without a token: nothing can fail); that the running service really
    counts wrong tokens and logins is tests/test_access.py::test_auth_failures_are_counted_in_the_service_and_logged."""
    http = httpx.Client(base_url=service.url, timeout=30)
    assert value(scrape(http), "fdcontrol_auth_failures", "fdcontrol_auth_failures_total") == 0


def _fifo_permitted() -> bool:
    """Whether a thread of this machine may take SCHED_FIFO (CAP_SYS_NICE and a real-time budget)."""
    import os
    import threading

    ok: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
            ok.append(True)
        except (AttributeError, OSError):
            ok.append(False)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return ok[0]


def test_stats_report_the_loop_threads_scheduler(service):
    """/stats says whether the loop thread got SCHED_FIFO (realtime: true), as this machine permits; null
    while the loop is stopped."""
    http = httpx.Client(base_url=service.url, timeout=30)
    assert http.post("/control/start").status_code == 200
    st = until(lambda: http.get("/stats").json(), lambda st: st["scheduler"] is not None, what="a scheduler")
    assert st["scheduler"] == ("SCHED_FIFO" if _fifo_permitted() else "SCHED_OTHER")
    assert http.post("/control/stop").status_code == 200
    assert http.get("/stats").json()["scheduler"] is None
    assert http.post("/control/start").status_code == 200
