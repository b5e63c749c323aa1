"""End-to-end: the real service (uvicorn subprocess on loopback) with real HTTP/WS clients."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from websockets.sync.client import connect

from fdcontrol import JacobianInverse, RobotModel, analyze
from fdcontrol.client import AsyncClient, Client, ServiceError

from .service import Service
from .waits import HUNG, cycles_later, until


@pytest.fixture(scope="module")
def service():
    svc = Service(env={"FDCONTROL_MAX_BATCH": "200"})
    svc.without_start_box()  # the pushes here carry the tool past the simulated arm's start box
    yield svc
    svc.stop()


@pytest.fixture
def client(service):
    with Client(service.url) as c:
        c.patch_config(mapping="fd", mode="admittance")
        c.hold(False)
        yield c


def drain(stream, seconds=0.0):
    """Read whatever arrived (non-blocking after the first `seconds`)."""
    out = []
    try:
        while True:
            out.append(stream.recv(timeout=seconds))
            seconds = 0.001
    except TimeoutError:
        return out


def first_error(stream, timeout: float = HUNG) -> str:
    """The first error message the stream answers (state messages before it skipped); the deadline only
    ends a hung test."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            m = stream.recv(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise AssertionError(f"no error message in {timeout:g} s") from None
        if "error" in m:
            return m["error"]


def test_stream_a_wrench_moves_the_arm_then_it_holds(client):
    client.start()
    p0 = np.array(client.state()["tip_pose"])[:3, 3]
    got = []
    rate = client.config()["rate"]
    with client.control_stream(decimation=5) as s:
        c0, deadline = client.state()["cycle"], time.monotonic() + HUNG  # the deadline only ends a hung test
        # a live stream for 1 s of the loop's own cycles, and at least 50 wrenches taken
        while not got or got[-1]["cycle"] < c0 + rate or got[-1]["seq_ack"] < 50:
            assert time.monotonic() < deadline, got[-1:] or "no state"
            s.send_wrench([8.0, 0, 0, 0, 0, 0])
            got += drain(s, 0.01)
        acked = [m["seq_ack"] for m in got]
        assert max(acked) >= 50 and acked == sorted(acked)
        moved = np.array(got[-1]["tip_pose"])[:3, 3] - p0
        print("moved", moved)
        assert moved[0] > 0.1 and np.linalg.norm(moved[1:]) < 0.05 * moved[0]
        # the stream goes quiet: the watchdog trips and brakes the reference to rest
        last = until(client.state, lambda st: st["watchdog"] == "tripped" and not any(st["qd_ref"]),
                     what="watchdog tripped and at rest")
        # the arm settles (the simulated arm's own dynamics, ~1e-4 rad) and then holds still:
        settled = cycles_later(client.state, 250)
        later = cycles_later(client.state, 250)
        assert later["watchdog"] == "tripped" and later["holding"] and not any(later["qd_ref"])
        np.testing.assert_allclose(np.array(later["q"]), np.array(settled["q"]), atol=1e-9)
        assert later["cycle"] > last["cycle"]


def test_references_arrive_at_the_requested_rate(client):
    """Measured on the loop's clock (each state's cycle and stamp), not on this process's: the loop
    keeps its rate, and the stream delivers one state per block of 10 cycles (decimation), in order,
    missing few blocks — however late this reader is scheduled on a loaded machine."""
    rate = client.config()["rate"]
    with client.state_stream(decimation=10) as s:
        s.recv()
        msgs = [s.recv() for _ in range(int(2.0 * rate / 10))]  # 2 s of the loop's time
    cycle = np.array([m["cycle"] for m in msgs])
    stamp = np.array([m["stamp"] for m in msgs])
    blocks = (cycle[-1] - cycle[0]) / 10
    loop_rate = (cycle[-1] - cycle[0]) / (stamp[-1] - stamp[0])
    print(f"{len(msgs) - 1} messages over {blocks:.0f} blocks of 10 cycles; the loop ran "
          f"{loop_rate:.1f} cycles per second of its own clock (rate {rate})")
    assert np.all(np.diff(cycle) > 0), "a state twice or out of order"
    assert len(msgs) - 1 >= 0.85 * blocks, "the stream missed more than 15 % of the blocks"
    assert len(msgs) - 1 <= blocks + 1, "more than one state per block of 10 cycles"
    assert abs(loop_rate - rate) < 0.05 * rate


def test_msgpack_encoding_is_negotiated(client):
    with client.state_stream(decimation=50, msgpack_encoding=True) as s:
        assert s.ws.subprotocol == "msgpack"
        m = s.recv()
        assert isinstance(m["q"], list) and "tip_pose" in m
        s.send({"wrench": [1, 0, 0, 0, 0, 0]})
        assert "read-only" in first_error(s)


@pytest.mark.parametrize("message,fragment", [
    ("{not json", "malformed JSON"),
    (json.dumps({"wrench": [1, 2, 3]}), "wrench"),
    ('{"wrench": [NaN, 0, 0, 0, 0, 0]}', "finite"),
    (json.dumps({"wrench": [0, 0, 0, 0, 0, 0], "frame": "world"}), "frame"),
    (json.dumps({"wrench": [1e6, 0, 0, 0, 0, 0]}), "out of range"),
    (json.dumps({"torque": 1}), "unknown keys"),
    (json.dumps([1, 2]), "JSON object"),
])
def test_bad_websocket_messages_get_an_error_and_the_loop_keeps_going(client, service, message, fragment):
    client.start()
    with client.control_stream(decimation=50) as s:
        seq = s.send_wrench([2.0, 0, 0, 0, 0, 0])
        before = until(client.state, lambda st: st["seq_ack"] == seq, what="the valid message taken")["seq_ack"]
        s.ws.send(message)
        assert fragment in first_error(s)
        st = cycles_later(client.state, 20)  # the loop went on, and took nothing from the bad message
        assert st["seq_ack"] == before and st["fault"] is None
    h = client.health()
    assert h["status"] == "ok" and h["loop_running"] and h["last_cycle_age_s"] < 0.1


def test_rest_error_paths_and_the_service_stays_healthy(client, service):
    http = httpx.Client(base_url=service.url)
    cases = [
        ("PUT", "/control/wrench", '{"wrench": [1, 2', 422),
        ("PUT", "/control/wrench", json.dumps({"wrench": [1, 2, 3]}), 422),
        ("PUT", "/control/wrench", '{"wrench": [NaN, 0, 0, 0, 0, 0]}', 422),
        ("PATCH", "/config", json.dumps({"mapping": "foo"}), 422),
        ("PATCH", "/config", json.dumps({"gamma": -1}), 422),
        ("PATCH", "/config", json.dumps({"alpha": 1e9}), 422),
        ("PATCH", "/config", json.dumps({"stiffness": [1, 2]}), 422),
        ("PATCH", "/config", json.dumps({"warp": 9}), 422),
        ("POST", "/analysis/singular-values", json.dumps({"q": [0, 0, 0]}), 422),
        ("POST", "/analysis/singular-values", json.dumps({"q": [0] * 6, "robot": "ur5"}), 422),
        ("POST", "/analysis/singular-values", json.dumps({"q": [[0.1] * 6] * 201}), 413),
        ("PUT", "/control/target", json.dumps({"position": [0.5, 0, 0.5], "orientation": [0, 0, 0, 2]}), 422),
    ]
    for method, path, body, status in cases:
        r = http.request(method, path, content=body, headers={"content-type": "application/json"})
        assert r.status_code == status, (method, path, body, r.text)
        assert r.json()["detail"]
    r = http.patch("/config", json={"gamma": -1})
    assert "gamma" in json.dumps(r.json()["detail"])
    client.start()
    with pytest.raises(ServiceError) as e:
        client.patch_config(rate=1000)
    assert e.value.status == 409 and "stopped" in e.value.detail
    h = client.health()
    assert h["status"] == "ok" and h["loop_running"]


def test_config_changes_apply_at_run_time(client):
    client.start()
    assert client.patch_config(mapping="dls", alpha=0.05)["mapping"] == "dls"
    cfg = client.config()
    assert cfg["mapping"] == "dls" and cfg["alpha"] == 0.05
    client.patch_config(mapping="fd", gamma=500)
    assert client.config()["gamma"] == 500
    client.stop()
    assert client.patch_config(rate=250)["rate"] == 250
    client.start()
    s0 = cycles_later(client.state, 5)
    s1 = cycles_later(client.state, 100)
    loop_rate = (s1["cycle"] - s0["cycle"]) / (s1["stamp"] - s0["stamp"])  # on the loop's own clock
    assert client.stats()["rate"] == 250 and abs(loop_rate - 250) < 0.05 * 250, loop_rate
    client.stop()
    client.patch_config(rate=500)


def test_singular_values_match_the_library(client):
    robot = RobotModel.load("ur10")
    qs = [[0.1, -1.2, 1.5, -0.3, 1.2, 0.4], [0.0] * 6]
    out = client.singular_values(qs, ["ji", {"name": "fd", "gamma": 200}, "dls"], type="cartesian")
    assert out["robot"] == "ur10" and len(out["points"]) == 2
    ref = analyze(robot.jacobian(np.array(qs[0])) @ JacobianInverse(robot).joint_space(np.array(qs[0])))
    np.testing.assert_allclose(out["points"][0]["results"][0]["singular_values"], ref.singular_values)
    singular = out["points"][1]["results"]
    assert all(r["singular"] and r["condition"] is None for r in singular)
    panda = client.singular_values([0, -0.3, 0, -2, 0, 1.8, 0.7], ["fd"], robot="panda")
    assert len(panda["points"][0]["results"][0]["singular_values"]) == 6


def test_motion_mode_reaches_a_target(client):
    client.start()
    client.patch_config(mode="motion")
    try:
        p = np.array(client.state()["tip_pose"])[:3, 3]
        goal = p + [0.03, -0.02, 0.02]
        client.set_target(goal.tolist())
        tip = lambda st: np.array(st["tip_pose"])[:3, 3]  # noqa: E731
        until(client.state, lambda st: np.linalg.norm(tip(st) - goal) < 2e-3, what="the target reached")
        reached = tip(cycles_later(client.state, 100))  # and it stays there
        np.testing.assert_allclose(reached, goal, atol=2e-3)
    finally:
        client.patch_config(mode="admittance")


def test_openapi_lists_every_route_with_a_response_model(service):
    spec = httpx.get(service.url + "/openapi.json").json()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            content = op["responses"]["200"].get("content", {})  # JSON, or a declared other type (file, text)
            assert any(c.get("schema") for c in content.values()), f"{method.upper()} {path} has no response model"
    assert {"/health", "/state", "/stats", "/config", "/analysis/singular-values"} <= set(spec["paths"])
    assert httpx.get(service.url + "/docs").status_code == 200


def overrun_rate(client, seconds, work=None):
    """The overrun rate over a window (calling ``work`` meanwhile), and /stats at its end with ``own_rate``: the
    loop's cycles per second of its own clock over the window (its state's cycle and stamp)."""
    s0, st0, t0 = client.stats(), client.state(), time.monotonic()
    while time.monotonic() - t0 < seconds:
        work() if work else time.sleep(0.05)
    s1, st1 = client.stats(), client.state()
    s1["own_rate"] = (st1["cycle"] - st0["cycle"]) / (st1["stamp"] - st0["stamp"])
    return (s1["overruns"] - s0["overruns"]) / max(1, s1["cycles"] - s0["cycles"]), s1


def test_many_monitors_are_served_the_loop_does_not_wait_and_a_silent_reader_does_not_grow(client, service):
    """20 monitors + 1 control stream + 1 client that never reads.

    What must hold: every client is served, memory does not grow (the silent reader's states are dropped), and the
    loop never waits for its clients: idle and busy windows are paired, up to three pairs on a machine whose load
    varies, and with the 22 clients the loop runs at least half the cycles per second of its own clock it ran idle
    (a loop that waited for the clients would run at their pace) and fewer than half its cycles overrun (a loop made
    late by its clients in every cycle re-anchors its clock after each late cycle and still runs over half its idle
    rate: at 3 ms per 2 ms period, 306 of 500 cycles per second). A bound for a loaded 2-core machine, not a speed
    claim: how much the clients' CPU use delays the loop (the overrun rate, printed: this 2-vCPU VM loses 5–15 % of
    its CPU time to the hypervisor in bursts, 0–7 % of cycles late idle; with 22 clients it rose by 0.3 to 10 points
    with the machine's phase) is a benchmark's number (benchmarks/bench_ws_latency.py). The loop put back into the
    API process, sharing its GIL, is caught by the test below, structurally.
    """
    client.start()
    stop = threading.Event()
    counts = [0] * 20

    def monitor(i):
        with client.state_stream(decimation=10) as s:
            while not stop.is_set():
                s.recv()
                counts[i] += 1

    results = []
    with client.control_stream(decimation=5) as ctl:
        def control_work():
            ctl.send_wrench([3 * math.sin(time.monotonic()), 0, 0, 0, 0, 0])
            drain(ctl, 0.01)

        for _attempt in range(3):
            base, idle = overrun_rate(client, 2.0)
            stop.clear()
            threads = [threading.Thread(target=monitor, args=(i,)) for i in range(20)]
            for t in threads:
                t.start()
            rss0 = service.rss_kib()
            with connect(service.url.replace("http", "ws") + "/ws/state?decimation=1"):  # never reads
                busy, stats = overrun_rate(client, 2.0, control_work)
                rss1 = service.rss_kib()
            stop.set()
            for t in threads:
                t.join(5)
            results.append((idle["own_rate"], stats["own_rate"], busy))
            print(f"overrun rate idle {base:.4f}, with 22 clients {busy:.4f}; loop cycles per second of its clock "
                  f"idle {idle['own_rate']:.1f}, with the clients {stats['own_rate']:.1f}; period error p99 "
                  f"{stats['period_error_p99_us']:.0f} µs; RSS {rss0} → {rss1} KiB; dropped "
                  f"{stats['ws_dropped']}; monitor messages {sum(counts)}")
            assert min(counts) > 50  # every monitor was served
            assert rss1 - rss0 < 20_000  # the silent reader's states are dropped, not queued
            assert stats["ws_dropped"] > 0
            if stats["own_rate"] >= 0.5 * idle["own_rate"] and busy < 0.5:
                break
    assert any(own >= 0.5 * idle and late < 0.5 for idle, own, late in results), results


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_the_loop_runs_in_its_own_process_and_the_api_does_not_run_it(client, service):
    """Structural half of the load test: undo the process split and this fails (no loop child,
    or the API process doing the loop's work)."""
    client.start()
    loops = [p for p in service.children() if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(loops) == 1
    rate = client.config()["rate"]
    c0 = _cpu_ticks(loops[0])
    cycles_later(client.state, rate)  # one second of the loop's cycles
    assert _cpu_ticks(loops[0]) > c0  # the child cycles and spends the CPU for it


def test_async_client(service):
    async def go():
        async with AsyncClient(service.url) as c:
            assert (await c.health())["status"] == "ok"
            async with c.control_stream(decimation=25) as s:
                seq = await s.send_wrench([1.0, 0, 0, 0, 0, 0])
                for _ in range(20):
                    m = await s.recv()
                    if m.get("seq_ack") == seq:
                        return m
        return None

    assert asyncio.run(go()) is not None


def test_example_script_pushes_the_arm(service):
    import subprocess
    import sys

    from .service import ROOT

    p = subprocess.run([sys.executable, str(ROOT / "examples" / "push_sinusoid.py"), "--url", service.url,
                        "--seconds", "1.5"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "tip Δ=" in p.stdout and "watchdog tripped" in p.stdout


def test_force_mode_with_a_simulated_wall():
    """A service whose simulated arm has a wall 2 cm ahead: force mode presses with 10 N."""
    import os

    p0 = RobotModel.load("ur10").pose(np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2]))[:3, 3]
    opts = {"sensor": {"planes": [{"point": (p0 + [0.02, 0, 0]).tolist(), "normal": [1, 0, 0],
                                   "stiffness": 2000.0}]}}
    env = {"FDCONTROL_DRIVER": "simulated", "FDCONTROL_DRIVER_OPTIONS": json.dumps(opts), "FDCONTROL_MODE": "force",
           "FDCONTROL_FORCE_GAIN": json.dumps([0.1] * 6), "FDCONTROL_FORCE_TARGET": "[10, 0, 0, 0, 0, 0]"}
    svc = Service(env={**os.environ, **env})
    try:
        with Client(svc.url) as c:
            c.hold(True)  # the bias is taken at standstill: hold, zero, release
            until(c.state, lambda st: not any(st["qd_ref"]), what="at rest, held")
            assert c.zero_sensor()["ok"]
            c.hold(False)
            # the force setpoint moves the arm only on a live input: an operator's stream of zero wrenches
            start, n = c.state()["cycle"], 3 * c.config()["rate"]  # 3 s of the loop's time: settled on the wall
            deadline = time.monotonic() + 120  # only ends a hung test
            with c.control_stream(decimation=50) as stream:
                while (st := c.state())["cycle"] < start + n and time.monotonic() < deadline:
                    stream.send_wrench([0, 0, 0, 0, 0, 0])
                    time.sleep(0.02)
            assert st["cycle"] >= start + n
            assert abs(st["f_measured"][0] - 10.0) < 0.5, st["f_measured"]
    finally:
        svc.stop()


def test_target_over_the_websocket(client):
    client.start()
    client.patch_config(mode="motion")
    try:
        p = np.array(client.state()["tip_pose"])[:3, 3]
        goal = (p + [0.0, 0.02, -0.02]).tolist()
        with client.control_stream(decimation=50) as s:
            s.send({"target": {"position": goal}})
            s.send({"target": {"position": [0, 0]}})  # malformed: an error, the first target stays
            assert "target" in first_error(s)
        tip = lambda st: np.array(st["tip_pose"])[:3, 3]  # noqa: E731
        until(client.state, lambda st: np.linalg.norm(tip(st) - goal) < 2e-3, what="the target reached")
        np.testing.assert_allclose(tip(cycles_later(client.state, 100)), goal, atol=2e-3)
    finally:
        client.patch_config(mode="admittance")
