"""The robot-paced loop at a Franka's 1 kHz: what one cycle costs and where its time goes, then the
whole path against franky-sim with /ws/state readers.

1. ``standin`` (default on): the service's loop (``fdcontrol.server.runtime.Runtime``, FR3, the
   franka limits with the jerk limit, its state published to shared memory as the loop process
   does) on the franka driver over a stand-in for libfranka that answers at once
   (tests/franka_inject.py ``StandInLibrary``: no network, no simulator on the CPU). The loop
   thread runs for ``--standin-cycles`` robot cycles (the wrench streamed on the robot's clock: every
   run sees the same inputs and poses; scripts/measure.py uses this) or else for ``--standin-seconds``
   of wall time; printed: its compute time per cycle (p50/p90/p99/p99.9/max, from the state's arrival
   to the end of the cycle, the loop's own statistics) and the garbage collections during the run —
   then, on a second run with each stage of the cycle (fdcontrol.loop.stages) wrapped in a timer, where a cycle's time
   goes, per phase: wait for the robot (until its state arrived), read (the state, the streamed
   inputs, kinematics), sense (the wrench reading), law (with the task-space parts), map (joint
   loads such as the posture task, and the solver), limits, send, publish (the state and its
   shared-memory slot); the rest of the cycle (the loop's own bookkeeping between stages) is the
   cycle minus the phases, so the split adds up to the cycle; then each stage by name; each as
   mean, p50, p99 and the mean over the run's slowest 1 % of cycles. The wrappers add ~0.2 µs
   each. Last, the same FR3 loop on the stand-in and on the kinematic simulator in process, cycle
   by cycle in this thread, interleaved, under the loop thread's scheduling (SCHED_FIFO where
   permitted): what the robot-paced path adds to the cycle (the difference of their p50).
2. ``sim`` (``--seconds`` > 0): franky-sim (a simulator of the libfranka network protocol, MuJoCo
   physics) in its own process on a loopback address, then ``fdcontrol serve --robot fr3 --driver
   franka`` (real uvicorn on 127.0.0.1); starts the loop, connects ``--watchers`` /ws/state readers
   (a child process) and streams a slowly turning wrench for ``--seconds`` of wall time. Printed:
   the loop's compute time per cycle, the robot-side cycles, the cycles that passed without a
   command (missed, % of the robot's), the success rate the robot reports. franky-sim is itself a
   Python process whose MuJoCo step has to fit in 1 ms, so on a small machine the robot's clock
   runs slower than real time (the ratio is printed).

Bounded in time; loopback only. Not a test: numbers depend on the machine and its load.

    PYTHONPATH=. python benchmarks/bench_franka.py [--standin-cycles 20000 | --standin-seconds 3] [--seconds 60]
        [--watchers 50] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import random
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from benchjson import write_json

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

STAGES = ("wait", "read", "sense", "law", "map", "limits", "send", "publish")


def standin_loop(driver: str = "tests.franka_inject:StandInFranka") -> tuple[Any, Any, Callable[[], None]]:
    """The service's loop on the stand-in robot (or on ``driver``) as the loop process runs it
    (server/loop_process.py): its state published to shared memory, the GIL's switch interval of the settings,
    the startup objects frozen out of the garbage collector. Not its heartbeat and metrics threads: beside a
    robot that answers at once the loop thread holds the GIL ~99 % of the time, so each of their turns would
    land inside a cycle (at a robot's 1 kHz they mostly come while the loop thread waits for the robot's state,
    without the GIL). A real-time (SCHED_FIFO) loop thread that never waits runs into the kernel's real-time
    throttling (sched_rt_runtime_us 950 ms of every second): a stall of ~50 ms now and then, which sets the
    run's max (on a robot the thread waits for most of each millisecond)."""
    from fdcontrol.server.channel import Channel, ShmIO
    from fdcontrol.server.metrics import LoopMetrics
    from fdcontrol.server.runtime import Runtime
    from fdcontrol.server.settings import Settings

    settings = Settings(robot="fr3", driver=driver, rate=1000.0,
                        limits=["cartesian", "position", "velocity", "acceleration", "jerk"], command_timeout=10.0)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(settings.switch_interval)
    runtime = Runtime(settings)
    loop = runtime.loop
    channel = Channel()
    io = ShmIO(channel)
    r, w = os.pipe()
    os.set_blocking(w, False)
    os.set_blocking(r, False)
    io.notify, io.metrics = w, LoopMetrics()
    loop.io = io
    gc.freeze()  # what is built so far out of the collector's sight, as the loop process does (server/loop_process.py)

    def close() -> None:
        with_suppress(loop.stop)
        with_suppress(runtime.close)
        os.close(r)
        os.close(w)
        channel.close(unlink=True)
        sys.setswitchinterval(switch)

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
    """Per cycle: the time (s) of each phase of :data:`STAGES`, and of each stage of the cycle by name
    (``names``), in ring buffers of the loop's statistics window, filled in place: the timers allocate
    nothing per cycle, so they add no collector's or allocator's work of their own to the cycles they time."""

    def __init__(self, names: list[str], n: int) -> None:
        self.names, self.n, self.count = names, n, 0
        self.acc = [0.0] * len(STAGES)  # this cycle's, per phase and per stage name
        self.by_stage = [0.0] * len(names)
        self._rows, self._stage_rows = np.zeros((n, len(STAGES))), np.zeros((n, len(names)))
        self._kinds = np.zeros(n, dtype=np.int8)  # per cycle: KINDS' bits
        self.clock = time.perf_counter

    def cycle_done(self, kind: int = 0) -> None:
        i = self.count % self.n
        self._rows[i] = self.acc
        self._stage_rows[i] = self.by_stage
        self._kinds[i] = kind
        self.count += 1
        acc, by = self.acc, self.by_stage
        for k in range(len(acc)):
            acc[k] = 0.0
        for k in range(len(by)):
            by[k] = 0.0

    def _ordered(self, ring: np.ndarray) -> np.ndarray:
        k = min(self.count, self.n)
        return np.roll(ring, -(self.count % self.n), axis=0)[-k:] if self.count >= self.n else ring[:k]

    @property
    def rows(self) -> np.ndarray:
        """The recorded cycles' phase times (s), oldest first: one row per cycle, a column per phase."""
        return self._ordered(self._rows)

    @property
    def kinds(self) -> np.ndarray:
        """The recorded cycles' kinds (bits of :data:`KINDS`), oldest first."""
        return self._ordered(self._kinds)

    @property
    def stage_rows(self) -> np.ndarray:
        """The recorded cycles' stage times (s), oldest first: a column per name of ``names``."""
        return self._ordered(self._stage_rows)


#: kinds of cycle, by the extra work they do: a bit each
KINDS = (("the γ band only (J's SVD taken)", 1), ("telemetry only (σmin(J) or κ(H) computed)", 2))


def kind_of(loop: Any, c: Any) -> int:
    """This cycle's kind (bits of :data:`KINDS`): whether something took J's SVD (the FD mapping's γ schedule
    inside its band), whether the published state's telemetry decomposed J or H (ControlLoop._telemetry)."""
    conf = getattr(c, "conf", None)
    band = conf is not None and conf.known_svd() is not None
    n, k = loop.telemetry_decimation, loop.cycle - 1
    return int(band) | (2 if k == 0 or k % n in (0, n // 2) else 0)


class TimedStage:
    """A stage of the cycle behind a timer that adds to its phase (its ``name`` and ``order`` read through);
    the last stage of the cycle ends the cycle's row."""

    def __init__(self, stage: Any, phase: str, timed: Timed, last: bool) -> None:
        self.stage, self.name, self.order = stage, stage.name, stage.order
        self.phase, self.timed, self.last = STAGES.index(phase), timed, last
        self.column = timed.names.index(stage.name)

    def run(self, loop: Any, c: Any) -> None:
        t = self.timed
        t0 = t.clock()
        try:
            self.stage.run(loop, c)
        finally:
            dt = t.clock() - t0
            t.acc[self.phase] += dt
            t.by_stage[self.column] += dt
            if self.last:
                t.cycle_done(kind_of(loop, c))


def instrument(loop: Any) -> Timed:
    """Each stage of the loop's cycle (fdcontrol.loop.stages) behind a timer, added up per phase (read,
    sense, law, map, limits, send, publish: the stage's ``order``); the wait for the robot's state (until
    the driver's ``read_at``, the tick the loop's compute time counts from), inside the read stage, is
    counted on its own and taken out of read. Instance attributes only: the classes are untouched."""
    from fdcontrol.loop.stages import phase_of

    stages = loop.stages
    t = Timed(list(dict.fromkeys(s.name for s in stages)), loop.stats.n)  # every stage, in cycle order
    d = loop.driver
    read = d.read
    wait, read_phase, read_column = STAGES.index("wait"), STAGES.index("read"), t.names.index("read")

    def timed_read() -> Any:
        t0 = t.clock()
        js = read()
        dt = max(d.read_at - t0, 0.0)  # until the state arrived (the loop's tick): the wait
        t.acc[wait] += dt
        t.acc[read_phase] -= dt  # the read stage's timer counts it too
        t.by_stage[read_column] -= dt
        return js
    d.read = timed_read
    loop.stages = [TimedStage(s, phase_of(s.order), t, i == len(stages) - 1) for i, s in enumerate(stages)]
    loop._wake = False  # a recomposition would drop the timers: the bench configures nothing meanwhile
    return t


@contextlib.contextmanager
def loop_scheduling(realtime: bool) -> Iterator[None]:
    """This thread under the loop thread's scheduling while inside: SCHED_FIFO where permitted, as the loop
    thread takes it (``realtime``, the service's default: fdcontrol.loop.cycle._try_realtime) — else a run in
    this thread at the default policy shares the CPUs with every other busy process of the machine (its cycles
    preempted for milliseconds, and its caches refilled after each turn of theirs), which the loop's own
    thread does not; the thread's policy restored after."""
    get = getattr(os, "sched_getscheduler", None)
    before = get(0) if realtime and get is not None else None
    param = os.sched_getparam(0) if before is not None else None  # type: ignore[attr-defined]
    if before is not None:
        from fdcontrol.loop.cycle import _try_realtime

        _try_realtime()
    try:
        yield
    finally:
        if before is not None:
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, before, param)  # type: ignore[attr-defined]


def paced_vs_inprocess(cycles: int, rounds: int) -> dict[str, Any]:
    """The same FR3 loop (same settings, publishing to shared memory) on the stand-in robot and on the
    kinematic simulator, called in this thread one cycle of each in turn, so that machine load hits both
    alike — under the loop thread's scheduling (:func:`loop_scheduling`), with a pause between rounds (a
    real-time thread that never waits would run into the kernel's real-time throttling) and 20 cycles of each
    after it untimed (the other processes' turn took over the caches). Stand-in: from
    the state's arrival (``read_at``) to the end of the cycle, as the loop counts it; simulator: the
    whole cycle (its read and send included). Their difference is what the robot-paced path adds to the
    cycle (µs). Each cycle runs after one of the other loop, whose work has taken over part of the CPU's
    caches: both are slower than a loop running alone (the threaded run)."""
    variants = {"paced": standin_loop(), "in-process": standin_loop("simulated")}
    times: dict[str, list[float]] = {k: [] for k in variants}
    clock = time.perf_counter
    realtime = variants["paced"][0].realtime
    fifo: bool | None = None  # (None: the loop does not ask for SCHED_FIFO, nor does this run)
    try:
        with loop_scheduling(realtime):
            get = getattr(os, "sched_getscheduler", None)
            if realtime:
                fifo = get is not None and get(0) == os.SCHED_FIFO  # type: ignore[attr-defined]
            for loop, _, _ in variants.values():
                loop._running.set()  # the cycles run as the loop thread would run them (not stopped)
                loop.set_wrench([2.0, 1.0, 0, 0, 0, 0])
                for _ in range(200):  # warm-up: the motion starts, the caches fill
                    loop._cycle(None)
            for r in range(rounds):
                for i in range(cycles):
                    for name, (loop, (drain, _), _) in variants.items():  # one cycle of each in turn
                        if i % 20 == 0:  # a streamed wrench, turning
                            el = 0.02 * (r * cycles + i) / 20
                            loop.set_wrench([2.0 * math.cos(0.5 * el), 2.0 * math.sin(0.5 * el), 0, 0, 0, 0])
                        t0 = clock()
                        loop._cycle(None)
                        end = clock()
                        times[name].append(end - (loop.driver.read_at if name == "paced" else t0))
                        if i % 50 == 0:
                            with contextlib.suppress(BlockingIOError):
                                os.read(drain, 1 << 16)  # the API's feed reads the publish pipe
                time.sleep(0.05)  # between rounds: the CPU to the rest of the machine (no real-time throttling)
                for loop, _, _ in variants.values():  # the caches filled again after the pause (not timed)
                    for _ in range(20):
                        loop._cycle(None)
    finally:
        for loop, _, close in variants.values():
            loop._running.clear()
            close()
    out: dict[str, Any] = {"cycles": cycles, "rounds": rounds, "sched_fifo": fifo}
    for name, ts in times.items():
        a = np.array(ts) * 1e6
        out[name] = {"p50_us": float(np.percentile(a, 50)), "p99_us": float(np.percentile(a, 99)),
                     "max_us": float(a.max())}
    out["added_p50_us"] = out["paced"]["p50_us"] - out["in-process"]["p50_us"]
    policy = {True: "SCHED_FIFO", False: "the default scheduling: SCHED_FIFO not granted",
              None: "the default scheduling, as the loop's"}[fifo]
    print(f"the same FR3 cycle, one of each in turn ({rounds} × {cycles} each, {policy}), µs p50 / p99: "
          "robot-paced on the "
          f"stand-in {out['paced']['p50_us']:.1f} / {out['paced']['p99_us']:.1f}, in process on the kinematic "
          f"simulator {out['in-process']['p50_us']:.1f} / {out['in-process']['p99_us']:.1f}; the paced path adds "
          f"{out['added_p50_us']:.1f} µs at p50")
    return out


class RobotClockFeed:
    """The stand-in robot's tick hook (its ``on_tick``) for a run of a fixed number of robot cycles: every
    20th tick a new wrench (the slowly turning 2 N of :func:`drive`, on the robot's clock) written to the
    shared memory's wrench slot as the API process does, and the publish pipe read as the API's feed reads
    it; at tick ``cycles`` the loop thread leaves its loop after this cycle. It runs in the loop thread
    before the robot hands its state over (the robot's side: not in a cycle's compute time), so every run
    sees the same ticks, the same wrenches and the same poses, whatever the machine's speed."""

    EVERY = 20  # ticks between two wrenches

    def __init__(self, loop: Any, channel: Any, drain: int, cycles: int) -> None:
        self.loop, self.channel, self.drain, self.cycles = loop, channel, drain, cycles
        self.done, self.seq = threading.Event(), 0

    def __call__(self, robot: Any) -> None:
        k = round(robot.t * 1000.0)  # the robot's tick (1 ms)
        if k % self.EVERY == 1:
            self.seq += 1
            t = robot.t
            self.channel.write_wrench(np.array([2.0 * math.cos(0.5 * t), 2.0 * math.sin(0.5 * t), 0, 0, 0, 0]),
                                      "base", self.seq, time.monotonic())
            with contextlib.suppress(BlockingIOError):
                os.read(self.drain, 1 << 16)
        if k >= self.cycles and not self.done.is_set():
            self.loop._running.clear()  # this cycle is the run's last
            self.done.set()


def run_cycles(loop: Any, channel: Any, drain: int, cycles: int) -> None:
    """Run the loop thread for ``cycles`` ticks of the stand-in robot (:class:`RobotClockFeed`); this thread
    only waits (it never takes the GIL meanwhile)."""
    feed = RobotClockFeed(loop, channel, drain, cycles)
    loop.driver._robot.on_tick = feed
    loop.start()
    finished = feed.done.wait(30.0 + 0.01 * cycles)  # bounded: a cycle of 10 ms would be far off
    loop.stop()
    loop.driver._robot.on_tick = None
    if not finished:
        raise RuntimeError(f"the stand-in run did not reach {cycles} robot cycles in time")


def recorded(st: Any) -> np.ndarray:
    """The compute times (s) a Stats ring holds, oldest first."""
    k = min(st.count, st.n)
    return np.roll(st.compute, -(st.count % st.n))[-k:] if st.count >= st.n else st.compute[:k].copy()


PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9))


def spread(a: np.ndarray) -> dict[str, float]:
    """p50/p90/p99/p99.9/max of ``a`` (µs)."""
    out = {f"{name}_us": float(np.percentile(a, p)) for name, p in PERCENTILES}
    out["max_us"] = float(a.max())
    return out


def spread_text(d: dict[str, float]) -> str:
    return ", ".join(f"{name} {d[f'{name}_us']:.0f}" for name in (*(n for n, _ in PERCENTILES), "max")) + " µs"


def standin_run(cycles: int, seconds: float, timed: bool) -> tuple[Any, np.ndarray, Timed | None]:
    """One run on the stand-in: ``cycles`` robot cycles (else ``seconds`` of wall time); the loop's
    statistics, the cycles' compute times (µs, oldest first), the stage timers (``timed``)."""
    from fdcontrol.loop.cycle import Stats

    loop, (drain, channel), close = standin_loop()
    try:
        if cycles:
            stats = Stats(cycles + 100)  # every cycle of the run (the loop's window is 5000)
            stats.clock = loop.stats.clock
            loop.stats = stats
        t = instrument(loop) if timed else None
        gc0 = [g["collections"] for g in gc.get_stats()]
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        if cycles:
            run_cycles(loop, channel, drain, cycles)
        else:
            drive(loop, seconds, drain)
        loop.garbage = [g["collections"] - c for g, c in zip(gc.get_stats(), gc0, strict=True)]
        ru = resource.getrusage(resource.RUSAGE_SELF)  # the process's: this thread only waits meanwhile
        loop.rusage = {"minor_faults": ru.ru_minflt - ru0.ru_minflt, "major_faults": ru.ru_majflt - ru0.ru_majflt,
                       "involuntary_switches": ru.ru_nivcsw - ru0.ru_nivcsw}
        loop.commands = loop.driver._robot.commands
        total = recorded(loop.stats) * 1e6
    finally:
        close()
    return loop, total, t


def run_standin(seconds: float, cycles: int = 0) -> dict[str, Any]:
    loop, total, _ = standin_run(cycles, seconds, False)
    s = loop.stats.summary()
    what = f"{cycles} robot cycles" if cycles else f"{seconds:.1f} s"
    res: dict[str, Any] = {"cycles": s["cycles"], "commands": loop.commands, "window": len(total),
                           "compute_p50_us": s["compute_p50_us"], "compute_p99_us": s["compute_p99_us"],
                           "compute_max_us": s["compute_max_us"], "robot_cycles": cycles or None,
                           "compute_us": spread(total), "gc_collections": loop.garbage, "rusage": loop.rusage}
    print(f"stand-in robot (answers at once), {what}: {s['cycles']} cycles, {loop.commands} commands; "
          f"compute per cycle (last {len(total)}): {spread_text(res['compute_us'])} (the max at cycle "
          f"{int(np.argmax(total)) + 1 + s['cycles'] - len(total)}); "
          f"garbage collections (generation 0/1/2): {'/'.join(map(str, loop.garbage))}; page faults (minor/major) "
          f"{loop.rusage['minor_faults']}/{loop.rusage['major_faults']}, involuntary context switches "
          f"{loop.rusage['involuntary_switches']}")
    loop, total, timed = standin_run(cycles, seconds, True)
    assert timed is not None
    rows = timed.rows[-len(total):] * 1e6
    total = total[-len(rows):]
    rest = total - rows[:, 1:].sum(axis=1)  # the cycle's time counts from the state's arrival: without the wait
    slow = total >= np.percentile(total, 99)  # the slowest 1 % of this run's cycles
    res["timed_compute_us"] = spread(total)
    print(f"where a cycle's time goes (second run, {len(rows)} cycles: {spread_text(res['timed_compute_us'])}; "
          f"garbage collections {'/'.join(map(str, loop.garbage))}), µs: mean / p50 / p99 / mean over the slowest "
          f"1 % ({int(slow.sum())} cycles):")
    split = {}
    for i, name in enumerate((*STAGES, "rest of the cycle", "cycle (wrapped)")):
        col = rows[:, i] if i < len(STAGES) else (rest if i == len(STAGES) else total)
        split[name] = [float(np.mean(col)), float(np.percentile(col, 50)), float(np.percentile(col, 99)),
                       float(np.mean(col[slow]))]
        print(f"  {name:<18} {split[name][0]:7.1f} {split[name][1]:7.1f} {split[name][2]:7.1f} {split[name][3]:7.1f}")
    res["split_us"] = split
    print("  each stage (read without the wait):")
    by_stage = {}
    stage_rows = timed.stage_rows[-len(rows):] * 1e6
    for j, name in enumerate(timed.names):  # every stage, in cycle order
        col = stage_rows[:, j]
        by_stage[name] = [float(np.mean(col)), float(np.percentile(col, 50)), float(np.percentile(col, 99)),
                          float(np.mean(col[slow]))]
        print(f"    {name:<16} {by_stage[name][0]:7.1f} {by_stage[name][1]:7.1f} {by_stage[name][2]:7.1f} "
              f"{by_stage[name][3]:7.1f}")
    res["stages_us"] = by_stage
    kinds = timed.kinds[-len(rows):]
    res["kinds"] = {}
    print("  by kind of cycle (the wrapped cycle, µs p50 / p99; share of all cycles, of the slowest 1 %):")
    (band, b1), (tele, b2) = KINDS
    for label, mask in (("neither", kinds == 0), (band, kinds == b1), (tele, kinds == b2), ("both", kinds == b1 | b2)):
        if mask.any():
            k = res["kinds"][label] = {"p50_us": float(np.percentile(total[mask], 50)),
                                       "p99_us": float(np.percentile(total[mask], 99)),
                                       "share": float(mask.mean()), "share_of_slowest": float(mask[slow].mean())}
            print(f"    {label:<38} {k['p50_us']:6.0f} {k['p99_us']:6.0f}   {100 * k['share']:5.1f} % "
                  f"{100 * k['share_of_slowest']:5.1f} %")
    res["against_inprocess"] = paced_vs_inprocess(500, 6)
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
            start, slow_puts = time.monotonic(), 0
            for _ in range(int(seconds / 0.02) + 1):  # bounded in count and time
                el = time.monotonic() - start
                if el >= seconds:
                    break
                w = [2.0 * math.cos(0.5 * el), 2.0 * math.sin(0.5 * el), 0, 0, 0, 0]  # N, turning
                try:
                    httpx.put(svc.url + "/control/wrench", json={"wrench": w}, timeout=5)
                except httpx.TimeoutException:  # a starved API on a loaded machine: the loop holds, the run goes on
                    slow_puts += 1
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
           "success_rate": s1["robot_success_rate"], "fault": st["fault"], "stats_window": s1["window"],
           "wrench_puts_timed_out": slow_puts}
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
    ap.add_argument("--standin-cycles", type=int, default=0,
                    help="run the stand-in for this many robot cycles instead of --standin-seconds (the same "
                         "inputs on the robot's clock, the same poses in every run)")
    ap.add_argument("--seconds", type=float, default=60.0, help="franky-sim part; 0: skip it")
    ap.add_argument("--watchers", type=int, default=50)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    res: dict[str, Any] = {}
    if args.standin_seconds > 0 or args.standin_cycles > 0:
        res["standin"] = run_standin(min(max(args.standin_seconds, 0.5), 60.0), min(max(args.standin_cycles, 0),
                                                                                    200_000))
    if args.seconds > 0:
        res["sim"] = run_sim(min(max(args.seconds, 1.0), 600.0), min(max(args.watchers, 0), 500))
    write_json(args.json, "franka", res)


if __name__ == "__main__":
    main()
