"""Wrench in → acknowledging state out over WebSocket, on loopback, with and without watchers.

Starts the service (simulated UR10, real uvicorn on 127.0.0.1) at ``--rate`` Hz. For each
count of ``/ws/state`` watchers (default 0 and 50; they run in a child process and read
every message at ``--watch-decimation``), it streams wrenches with sequence numbers on
``/ws/control`` at decimation 1, each at a random phase of the loop period, and measures the
time until the first state whose ``seq_ack`` acknowledges it. Prints p50/p99/max and the
target: one loop period + 1 ms (issue 14). Bounded: ``--samples`` per count, 1 s per sample
at most. Not a test: numbers depend on the machine and its load.

With ``--hogs 0 2`` every watcher count runs again with two CPU-bound processes beside the service
(a loaded machine). The measuring client freezes its own objects out of its garbage collector before
it measures (a full collection in it paused it for 22–34 ms). Each latency is also split at the start
of the cycle that took the wrench (the state's ``stamp``): the wait for that cycle (a random phase of
the period by design), and that cycle's start → its state received here (the cycle, the hand-over
between the processes, the WebSocket).

With ``--client-realtime`` the measuring client runs SCHED_FIFO (where permitted), as the service's event
loop does: the latency a promptly scheduled client sees, without its own wait for a CPU. With ``--api-realtime``
the service runs with ``api_realtime: true`` (its API event loop SCHED_FIFO where permitted): its hand-over of
each state no longer waits for CPU-bound neighbours' time slices.

    PYTHONPATH=. python benchmarks/bench_ws_latency.py [--samples 1000] [--rate 500] [--watchers 0 50] [--hogs 0 2]
                                                       [--client-realtime] [--api-realtime] [--budget S] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from benchjson import fifo_threads, write_json

HOG = "while True: pass"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from fdcontrol.client import Client, Stream  # noqa: E402
from tests.service import Service  # noqa: E402

WATCH = """
import asyncio, sys, time
from websockets.asyncio.client import connect

async def watch(url, counts, i, ready):
    async with connect(url, max_size=None) as ws:
        ready.append(i)
        async for _ in ws:
            counts[i] += 1

async def main(url, n):
    counts, ready = [0] * n, []
    tasks = [asyncio.create_task(watch(url, counts, i, ready)) for i in range(n)]
    while len(ready) < n:
        await asyncio.sleep(0.01)
    print("ready", flush=True)
    t0 = time.monotonic()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # until the parent says stop
    dt = time.monotonic() - t0
    print(f"{sum(counts) / dt:.0f} {min(counts) / dt:.1f}", flush=True)
    for t in tasks:
        t.cancel()

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def watchers(url: str, n: int, decimation: int, nice: int = 0) -> subprocess.Popen | None:
    """``n`` /ws/state clients in a child process (so they do not share this process's GIL);
    ``nice``: its niceness, to tell the service's cost from the watchers' own CPU on a small machine."""
    if n == 0:
        return None
    ws = url.replace("http://", "ws://") + f"/ws/state?decimation={decimation}"
    p = subprocess.Popen([sys.executable, "-c", WATCH, ws, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, preexec_fn=(lambda: os.nice(nice)) if nice else None)
    line = p.stdout.readline()  # type: ignore[union-attr]
    if line.strip() != "ready":
        p.kill()
        raise RuntimeError(f"watchers did not connect: {line!r}")
    return p


def stop_watchers(p: subprocess.Popen | None) -> str:
    if p is None:
        return ""
    out, _ = p.communicate("stop\n", timeout=20)
    total, slowest = out.split()
    return f"; watchers received {total} msg/s in all, the slowest {slowest} msg/s"


def skip_arrived(s: Stream) -> None:
    """Drop the states that arrived before the wrench is sent, undecoded: none can acknowledge
    it, and decoding them inside the timed window would count this client's work as latency."""
    with contextlib.suppress(TimeoutError):
        for _ in range(10_000):
            s.ws.recv(timeout=0)


@contextlib.contextmanager
def realtime(on: bool) -> Iterator[bool]:
    """SCHED_FIFO (priority 1, the service's event loop's) for this thread and the threads it starts meanwhile
    (none for a ws:// service: the client reads its socket in this thread), then back to the normal policy; yields
    whether it was granted. Processes started before it (the service, the watchers, the CPU hogs) keep theirs."""
    if not on:
        yield False
        return
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))  # type: ignore[attr-defined]
    except (AttributeError, OSError):  # not permitted here, or not Linux
        yield False
        return
    try:
        yield True
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))  # type: ignore[attr-defined]


def measure(url: str, samples: int, period: float, rng: np.random.Generator, budget: float = math.inf
            ) -> tuple[np.ndarray, np.ndarray, int]:
    """Latencies (ms), and per sample the split (ms): [send → start of the cycle that took the wrench,
    that cycle's start → its state received here] (the state's ``stamp`` is the loop's time.monotonic()
    at the cycle's start, the same clock as this process's on one host); and the number of wrenches sent
    (fewer than `samples` when `budget` seconds ran out first)."""
    lat, split = [], []
    end, sent = time.monotonic() + budget, 0
    with Client(url) as c, c.control_stream(decimation=1) as s:
        # this process's objects so far frozen out of its cyclic garbage collector: a full collection here (22–34
        # ms measured, over its libraries' objects) is the measuring client's pause, not the service's latency
        gc.freeze()
        for i in range(samples):
            if i and time.monotonic() > end:
                break
            sent += 1
            time.sleep(period * (1 + rng.uniform()))  # a random phase of the loop period
            skip_arrived(s)
            t0 = time.monotonic()
            seq = s.send_wrench([2.0 * np.sin(i / 20), 0, 0, 0, 0, 0])
            while (left := 1.0 - (time.monotonic() - t0)) > 0:  # 1 s at most: else not acknowledged
                try:
                    m = s.recv(timeout=left)
                except TimeoutError:
                    break
                if m.get("seq_ack", 0) >= seq:
                    t1 = time.monotonic()
                    lat.append(t1 - t0)
                    stamp = m.get("stamp")
                    split.append([stamp - t0, t1 - stamp] if stamp is not None else [np.nan, np.nan])
                    break
    return np.array(lat) * 1e3, np.array(split).reshape(-1, 2) * 1e3, sent


def cpu_seconds(pid: int) -> float:
    """User + system CPU time (s) of process ``pid`` so far, all its threads (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def budget_note(sent: int, samples: int, budget: float) -> str:
    return f" (the time budget of {budget:g} s ended the run after {sent} of {samples})" if sent < samples else ""


def one_run(c: Client, svc: Service, n: int, n_hogs: int, args: argparse.Namespace, samples: int, period: float,
            rng: np.random.Generator) -> dict:
    """``samples`` wrenches with ``n`` watchers connected: prints the numbers and returns them."""
    url = svc.url
    p = watchers(url, min(n, 500), args.watch_decimation, min(max(args.watchers_nice, 0), 19))
    try:
        s0 = c.stats()
        pids = [svc.proc.pid, *svc.children()]
        cpu0, t0 = [cpu_seconds(pid) for pid in pids], time.monotonic()
        with realtime(args.client_realtime) as rt:
            ms, split, sent = measure(url, samples, period, rng, args.budget)
        cpu = [(cpu_seconds(pid) - c0) / (time.monotonic() - t0) for pid, c0 in zip(pids, cpu0, strict=True)]
        s1 = c.stats()
    finally:
        note = stop_watchers(p)
    nice = f", nice {args.watchers_nice}" if n and args.watchers_nice else ""
    nice += ", the measuring client SCHED_FIFO" if rt else ""
    nice += ", the service's API event loop SCHED_FIFO" if args.api_fifo else ""
    print(f"{args.rate:.0f} Hz, {n} /ws/state watchers (decimation {args.watch_decimation}{nice}), {n_hogs} CPU hogs "
          f"beside, {len(ms)} of {sent} acknowledged{budget_note(sent, samples, args.budget)}: "
          f"wrench → ack p50 {np.percentile(ms, 50):.2f} ms, "
          f"p99 {np.percentile(ms, 99):.2f} ms, max {ms.max():.2f} ms (target p99 ≤ {1e3 * period + 1:.1f} ms){note}")
    waited, out = split[:, 0], split[:, 1]
    print(f"  split: send → start of the cycle that took it p50 {np.nanpercentile(waited, 50):.2f} ms, "
          f"p99 {np.nanpercentile(waited, 99):.2f} ms (a random phase of the period: 0–{1e3 * period:.1f} "
          f"ms by design); that cycle's start → its state here p50 {np.nanpercentile(out, 50):.2f} ms, "
          f"p99 {np.nanpercentile(out, 99):.2f} ms")
    print(f"  loop meanwhile: overruns {s1['overruns'] - s0['overruns']} of "
          f"{s1['cycles'] - s0['cycles']} cycles, period error p99 {s1['period_error_p99_us']:.0f} µs")
    api_cpu, loop_cpu = 100 * cpu[0], 100 * sum(cpu[1:])
    print(f"  CPU meanwhile: the API process {api_cpu:.0f} %, the loop process {loop_cpu:.0f} % of one core")
    rates = re.search(r"received (\S+) msg/s in all, the slowest (\S+) msg/s", note)
    return {"watchers": n, "hogs": n_hogs, "sent": sent, "acknowledged": len(ms), "p50_ms": np.percentile(ms, 50),
            "p99_ms": np.percentile(ms, 99), "max_ms": ms.max(),
            "to_cycle_p50_ms": np.nanpercentile(waited, 50), "to_cycle_p99_ms": np.nanpercentile(waited, 99),
            "cycle_to_client_p50_ms": np.nanpercentile(out, 50), "cycle_to_client_p99_ms": np.nanpercentile(out, 99),
            "watchers_msg_per_s": float(rates[1]) if rates else None,
            "slowest_watcher_msg_per_s": float(rates[2]) if rates else None,
            "loop_overruns": s1["overruns"] - s0["overruns"], "loop_cycles": s1["cycles"] - s0["cycles"],
            "loop_period_error_p99_us": s1["period_error_p99_us"], "api_cpu_percent": api_cpu,
            "loop_cpu_percent": loop_cpu, "client_realtime": rt, "api_realtime": args.api_fifo}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--watchers", type=int, nargs="+", default=[0, 50])
    ap.add_argument("--hogs", type=int, nargs="+", default=[0],
                    help="CPU-bound processes beside the service, per run (e.g. 0 2: every watcher count without, "
                         "then with two)")
    ap.add_argument("--watch-decimation", type=int, default=10, help="the watchers' decimation (service default 10)")
    ap.add_argument("--watchers-nice", type=int, default=0, help="niceness of the watchers' process (0–19)")
    ap.add_argument("--client-realtime", action="store_true",
                    help="the measuring client (this process's sampling thread, which also reads its WebSocket) at "
                         "SCHED_FIFO where permitted: beside CPU hogs its own wait for a CPU otherwise dominates the "
                         "tail")
    ap.add_argument("--api-realtime", action="store_true",
                    help="the service with api_realtime: true (its API event loop SCHED_FIFO where permitted); each "
                         "run says whether it was granted")
    ap.add_argument("--budget", type=float, default=math.inf,
                    help="seconds of sampling per run (watcher count × hog count): no wrench is sent past it, so the "
                         "benchmark ends in bounded time on a loaded machine; the number sent is printed")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON to PATH")
    args = ap.parse_args()
    samples, period = min(args.samples, 20_000), 1.0 / args.rate
    rng = np.random.default_rng(1)
    report: dict = {"rate_hz": args.rate, "period_ms": 1e3 * period, "target_p99_ms": 1e3 * period + 1,
                    "samples": samples, "watch_decimation": args.watch_decimation,
                    "watchers_nice": args.watchers_nice, "runs": []}
    svc = Service("--rate", str(args.rate), env={"FDCONTROL_API_REALTIME": "true"} if args.api_realtime else None)
    try:
        with Client(svc.url) as c:
            c.start()
            report["fifo_threads"] = sum(fifo_threads(pid) for pid in svc.children())
            args.api_fifo = fifo_threads(svc.proc.pid) > 0  # the API process's event loop thread (api_realtime)
            report["api_fifo_threads"] = fifo_threads(svc.proc.pid)
            for n_hogs in args.hogs:
                # CPU-bound processes beside the service and the clients (a loaded machine), ended after the runs
                hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(min(max(n_hogs, 0), 8))]
                try:
                    for n in args.watchers:
                        report["runs"].append(one_run(c, svc, n, n_hogs, args, samples, period, rng))
                finally:
                    for h in hogs:
                        h.kill()
                        h.wait()
    finally:
        svc.stop()
    write_json(args.json, "ws", report)


if __name__ == "__main__":
    main()
