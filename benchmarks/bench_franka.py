"""The robot-paced loop at a Franka's 1 kHz: what one cycle costs and where its time goes, then the
whole path against franky-sim with /ws/state readers.

1. ``standin`` (default on): the service's loop (``fdcontrol.server.runtime.Runtime``, FR3, the
   franka limits with the jerk limit, its state published to shared memory as the loop process
   does) on the franka driver over a stand-in for libfranka that answers at once
   (tests/franka_inject.py ``StandInLibrary``: no network, no simulator on the CPU). The loop
   thread runs for ``--standin-seconds``; printed: its compute time per cycle (p50/p99/max, from
   the state's arrival to the end of the cycle, the loop's own statistics) — then, on a second run
   with each stage wrapped in a timer, where a cycle's time goes: wait for the robot, read, sense
   (kinematics and the wrench reading), law, map (the solver), limits, send, publish (the state
   and its shared-memory slot), and the rest of the cycle. The wrappers add ~0.2 µs each.
2. ``sim`` (``--seconds`` > 0): franky-sim (a simulator of the libfranka network protocol, MuJoCo
   physics) in its own process on a loopback address, then ``fdcontrol serve --robot fr3 --driver
   franka`` (real uvicorn on 127.0.0.1); starts the loop, connects ``--watchers`` /ws/state readers
   (a child process) and streams a slowly turning wrench for ``--seconds`` of wall time. Printed:
   the loop's compute time per cycle, the robot-side cycles, the cycles that passed without a
   command (missed, % of the robot's), the success rate the robot reports. franky-sim is itself a
   Python process whose MuJoCo step has to fit in 1 ms, so on a small machine the robot's clock
   runs slower than real time (the ratio is printed).

Bounded in time; loopback only. Not a test: numbers depend on the machine and its load.

    PYTHONPATH=. python benchmarks/bench_franka.py [--standin-seconds 3] [--seconds 60] [--watchers 50] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from benchjson import write_json

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

STAGES = ("wait", "read", "sense", "law", "map", "limits", "send", "publish")


def standin_loop() -> tuple[Any, Any, Callable[[], None]]:
    """The service's loop on the stand-in robot, publishing to shared memory as the loop process does."""
    from fdcontrol.server.channel import Channel, ShmIO
    from fdcontrol.server.metrics import LoopMetrics
    from fdcontrol.server.runtime import Runtime
    from fdcontrol.server.settings import Settings

    settings = Settings(robot="fr3", driver="tests.franka_inject:StandInFranka", rate=1000.0,
                        limits=["cartesian", "position", "velocity", "acceleration", "jerk"], command_timeout=10.0)
    runtime = Runtime(settings)
    loop = runtime.loop
    channel = Channel()
    io = ShmIO(channel)
    r, w = os.pipe()
    os.set_blocking(w, False)
    os.set_blocking(r, False)
    io.notify, io.metrics = w, LoopMetrics()
    loop.io = io

    def close() -> None:
        with_suppress(loop.stop)
        with_suppress(runtime.close)
        os.close(r)
        os.close(w)
        channel.close(unlink=True)

    return loop, (r, channel), close


def with_suppress(f: Callable[[], Any]) -> None:
    try:
        f()
    except Exception as exc:  # a benchmark's teardown: say it, go on
        print(f"  ({type(exc).__name__}: {exc})", file=sys.stderr)


def drive(loop: Any, seconds: float, drain: int) -> None:
    """Run the loop thread for `seconds` with a slowly turning 2 N wrench (a new one every 20 ms)."""
    loop.start()
    start = time.monotonic()
    for _ in range(int(seconds / 0.02) + 1):  # bounded in count and time
        el = time.monotonic() - start
        if el >= seconds:
            break
        loop.set_wrench([2.0 * math.cos(0.5 * el), 2.0 * math.sin(0.5 * el), 0, 0, 0, 0])
        try:
            os.read(drain, 1 << 16)  # the API's feed reads the publish pipe
        except BlockingIOError:
            pass
        time.sleep(0.02)
    loop.stop()


class Timed:
    """Wraps callables with a timer that adds to a stage's total (s) per cycle."""

    def __init__(self) -> None:
        self.acc = dict.fromkeys(STAGES, 0.0)
        self.rows: list[list[float]] = []
        self.clock = time.perf_counter

    def wrap(self, stage: str, f: Callable[..., Any]) -> Callable[..., Any]:
        acc, clock = self.acc, self.clock

        def timed(*a: Any, **k: Any) -> Any:
            t0 = clock()
            try:
                return f(*a, **k)
            finally:
                acc[stage] += clock() - t0
        return timed

    def cycle_done(self) -> None:
        self.rows.append([self.acc[s] for s in STAGES])
        for s in STAGES:
            self.acc[s] = 0.0


class TimedLaw:
    """The control law behind a timer (its attributes read through)."""

    def __init__(self, law: Any, timed: Timed) -> None:
        self.__dict__["_law"], self.__dict__["_call"] = law, timed.wrap("law", law.__call__)

    def __call__(self, x: Any) -> Any:
        return self._call(x)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._law, name)


def instrument(loop: Any) -> Timed:
    """Each stage of the loop's cycle behind a timer (instance attributes: the classes are untouched)."""
    t = Timed()
    d = loop.driver
    d._wait = t.wrap("wait", d._wait)
    read = d.read

    def read_minus_wait() -> Any:
        w0 = t.acc["wait"]
        t0 = t.clock()
        js = read()
        t.acc["read"] += t.clock() - t0 - (t.acc["wait"] - w0)
        return js
    d.read = read_minus_wait
    d.read_wrench = t.wrap("sense", d.read_wrench)
    conf = loop.config
    conf.update = t.wrap("sense", conf.update)
    conf.twist = t.wrap("sense", conf.twist)
    loop.law = TimedLaw(loop.law, t)
    loop.solver.step = t.wrap("map", loop.solver.step)
    loop.limits.apply = t.wrap("limits", loop.limits.apply)
    d.send = t.wrap("send", d.send)
    loop._publish = t.wrap("publish", loop._publish)
    io = loop.io
    io.publish = t.wrap("publish", io.publish)
    # one row per cycle: the exchange hook runs last in every cycle
    exchange = loop.exchange

    def exchange_and_row(lp: Any, st: Any) -> None:
        if exchange is not None:
            exchange(lp, st)
        t.cycle_done()
    loop.exchange = exchange_and_row
    return t


def run_standin(seconds: float) -> dict[str, Any]:
    loop, (drain, _), close = standin_loop()
    try:
        drive(loop, seconds, drain)
        s = loop.stats.summary()
        commands = loop.driver._robot.commands
    finally:
        close()
    res: dict[str, Any] = {"cycles": s["cycles"], "commands": commands, "window": s["window"],
                           "compute_p50_us": s["compute_p50_us"], "compute_p99_us": s["compute_p99_us"],
                           "compute_max_us": s["compute_max_us"]}
    print(f"stand-in robot (answers at once), {seconds:.1f} s: {s['cycles']} cycles, {commands} commands; "
          f"compute per cycle (last {s['window']}): p50 {s['compute_p50_us']:.0f} µs, "
          f"p99 {s['compute_p99_us']:.0f} µs, max {s['compute_max_us']:.0f} µs")
    loop, (drain, _), close = standin_loop()
    try:
        timed = instrument(loop)
        drive(loop, seconds, drain)
        st = loop.stats
        k = min(st.count, st.n)
        total = np.roll(st.compute, -(st.count % st.n))[-k:] if st.count >= st.n else st.compute[:k]
    finally:
        close()
    rows = np.array(timed.rows[-len(total):]) * 1e6
    total = total[-len(rows):] * 1e6
    rest = total - rows.sum(axis=1)
    print(f"where a cycle's time goes (second run, {len(rows)} cycles, µs: mean / p50 / p99):")
    split = {}
    for i, name in enumerate((*STAGES, "rest of the cycle", "cycle (wrapped)")):
        col = rows[:, i] if i < len(STAGES) else (rest if i == len(STAGES) else total)
        split[name] = [float(np.mean(col)), float(np.percentile(col, 50)), float(np.percentile(col, 99))]
        print(f"  {name:<18} {split[name][0]:7.1f} {split[name][1]:7.1f} {split[name][2]:7.1f}")
    res["split_us"] = split
    return res


def schedstat(pids: list[int]) -> dict[int, tuple[float, float]]:
    """Per thread of the processes `pids`: (s on a CPU, s waiting for one) — Linux's /proc/…/schedstat."""
    out = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                run, wait, _ = Path(task, "schedstat").read_text().split()
            except (OSError, ValueError):
                continue
            out[int(task.name)] = (int(run) * 1e-9, int(wait) * 1e-9)
    return out


def busiest(before: dict[int, tuple[float, float]], after: dict[int, tuple[float, float]]) -> tuple[float, float]:
    """(CPU s, run-queue wait s) of the thread that ran most between two schedstat samples: the loop thread."""
    d = {t: (after[t][0] - before[t][0], after[t][1] - before[t][1]) for t in after if t in before}
    return max(d.values()) if d else (math.nan, math.nan)


def run_sim(seconds: float, n: int) -> dict[str, Any]:
    import httpx
    from bench_ws_latency import stop_watchers, watchers

    from tests.service import Service
    from tests.test_franka import FrankaSim

    host = f"127.23.{random.randint(1, 254)}.{random.randint(1, 254)}"
    sim = FrankaSim(host)
    opts = {"robot_ip": host, "realtime": "ignore", "state_timeout": 1.0}
    svc = Service("--robot", "fr3", "--driver", "franka",
                  env={"FDCONTROL_DRIVER_OPTIONS": json.dumps(opts), "FDCONTROL_COMMAND_TIMEOUT": "1.0"})
    try:
        assert httpx.post(svc.url + "/control/start", timeout=10).status_code == 200
        p = watchers(svc.url, n, 10) if n else None
        note = ""
        try:
            loop_pids = svc.children()  # the loop process (and multiprocessing's resource tracker)
            s0 = httpx.get(svc.url + "/stats", timeout=10).json()
            t_robot0 = httpx.get(svc.url + "/state", timeout=10).json()["t"]
            sched0 = schedstat(loop_pids)
            start = time.monotonic()
            for _ in range(int(seconds / 0.02) + 1):  # bounded in count and time
                el = time.monotonic() - start
                if el >= seconds:
                    break
                w = [2.0 * math.cos(0.5 * el), 2.0 * math.sin(0.5 * el), 0, 0, 0, 0]  # N, turning
                httpx.put(svc.url + "/control/wrench", json={"wrench": w}, timeout=5)
                time.sleep(0.02)
            wall = time.monotonic() - start
            sched1 = schedstat(loop_pids)
            s1 = httpx.get(svc.url + "/stats", timeout=10).json()
            st = httpx.get(svc.url + "/state", timeout=10).json()
        finally:
            if p is not None:
                note = stop_watchers(p)
        httpx.post(svc.url + "/control/stop", timeout=10)
    finally:
        svc.stop()
        sim.stop()
    robot_s = st["t"] - t_robot0
    cycles = s1["cycles"] - s0["cycles"]
    missed = s1["robot_missed_cycles"] - (s0["robot_missed_cycles"] or 0)
    cpu, runq = busiest(sched0, sched1)
    res = {"seconds": wall, "watchers": n, "loop_thread_cpu_us": 1e6 * cpu / max(cycles, 1),
           "loop_thread_runqueue_us": 1e6 * runq / max(cycles, 1), "robot_seconds": robot_s,
           "robot_clock_ratio": robot_s / wall,
           "cycles": cycles, "compute_p50_us": s1["compute_p50_us"], "compute_p99_us": s1["compute_p99_us"],
           "compute_max_us": s1["compute_max_us"], "overruns": s1["overruns"], "missed_cycles": missed,
           "missed_percent": 100.0 * missed / max(cycles + missed, 1),
           "success_rate": s1["robot_success_rate"], "fault": st["fault"], "stats_window": s1["window"]}
    print(f"franky-sim, {n} /ws/state watchers, {wall:.1f} s wall = {robot_s:.1f} s of robot time "
          f"(robot clock / wall {res['robot_clock_ratio']:.2f}); {cycles} cycles")
    print(f"compute per cycle (last {s1['window']} cycles): p50 {res['compute_p50_us']:.0f} µs, "
          f"p99 {res['compute_p99_us']:.0f} µs, max {res['compute_max_us']:.0f} µs; compute > 1 ms: {res['overruns']}")
    print(f"the loop thread per cycle: {res['loop_thread_cpu_us']:.0f} µs on a CPU, "
          f"{res['loop_thread_runqueue_us']:.0f} µs runnable but waiting for a CPU (Linux schedstat)")
    print(f"missed cycles {missed} of {cycles + missed} ({res['missed_percent']:.2f} %); robot success rate "
          f"{res['success_rate']}; fault {res['fault']}{note}")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--standin-seconds", type=float, default=3.0, help="0: skip the stand-in part")
    ap.add_argument("--seconds", type=float, default=60.0, help="franky-sim part; 0: skip it")
    ap.add_argument("--watchers", type=int, default=50)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    res: dict[str, Any] = {}
    if args.standin_seconds > 0:
        res["standin"] = run_standin(min(max(args.standin_seconds, 0.5), 60.0))
    if args.seconds > 0:
        res["sim"] = run_sim(min(max(args.seconds, 1.0), 600.0), min(max(args.watchers, 0), 500))
    write_json(args.json, "franka", res)


if __name__ == "__main__":
    main()
