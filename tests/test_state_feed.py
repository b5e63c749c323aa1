"""Event-driven state sending: the loop process signals each publish on a pipe, the API
process's event loop watches that pipe, reads the state once and wakes the WebSocket senders
(server/feed.py StateFeed)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time

import numpy as np
import pytest

from fdcontrol.loop.state import LoopState
from fdcontrol.server.feed import _Fanout
from fdcontrol.server.worker import LoopWorker  # the project's own module: an import error fails


def state(cycle: int) -> LoopState:
    z = np.zeros(6)
    return LoopState(t=0.0, cycle=cycle, q=z, qd=z, q_ref=z, qd_ref=z, tip_pose=np.eye(4), wrench=z,
                     f_measured=z, mode="admittance", running=True, holding=False, watchdog="idle", seq_ack=0,
                     fault=None, sigma_min_j=1.0)


def test_fanout_wakes_control_clients_first_then_watchers_in_chunks():
    async def run() -> list[list[int]]:
        fan = _Fanout(asyncio.get_running_loop())
        watchers = [fan.wait(10) for _ in range(20)]
        control = fan.wait(1)
        fan.post(state(20))  # new block for both decimations
        done_per_pass = []
        while not all(f.done() for f in watchers) and len(done_per_pass) < 100:
            await asyncio.sleep(0)
            done_per_pass.append([int(control.done()), sum(f.done() for f in watchers)])
        return done_per_pass

    passes = asyncio.run(run())
    chunk = _Fanout.WAKE_CHUNK
    assert passes[0] == [1, chunk - 1]  # the control client is in the first chunk
    # the rest a chunk per event-loop pass (sockets are read in between), until all 20 are woken
    assert [n for _, n in passes] == [min(20, k * chunk - 1) for k in range(1, len(passes) + 1)]
    assert passes[-1] == [1, 20]



def test_fanout_wakes_the_later_waiters_later_delay_after_the_first():
    """The watchers' waits (``later``) are woken ``later_delay`` s after a publish, the control clients' at once;
    a publish meanwhile does not wake them twice, and they read the newest state when woken."""
    async def run() -> None:
        loop = asyncio.get_running_loop()
        fan = _Fanout(loop)
        fan.later_delay = 0.2
        watchers = [fan.wait(10, later=True) for _ in range(3)]
        control = fan.wait(1)
        t0 = loop.time()
        fan.deliver(state(20))
        for _ in range(5):
            await asyncio.sleep(0)
        assert control.done() and not any(f.done() for f in watchers)
        assert fan._groups[True, 10, 0][1] == []  # taken out of the group: the next publish does not take them
        fan.deliver(state(21))  # same block of 10
        await asyncio.wait_for(asyncio.gather(*watchers), 5.0)
        assert loop.time() - t0 >= 0.2
        assert [f.result() for f in watchers] == [False] * 3 and fan.current.cycle == 21
        fan.later_delay = 0.0  # none: woken in the publish's own pass, after the first waiters
        order: list[str] = []
        w, c = fan.wait(10, later=True), fan.wait(1)
        for name, f in (("w", w), ("c", c)):
            f.add_done_callback(lambda _, n=name: order.append(n))
        fan.deliver(state(30))
        for _ in range(3):
            await asyncio.sleep(0)
        assert order == ["c", "w"]

    asyncio.run(run())


def test_fanout_wakes_a_group_once_per_block_and_forgets_timed_out_waiters():
    async def run() -> None:
        fan = _Fanout(asyncio.get_running_loop())
        f = fan.wait(5)
        fan.post(state(10))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert f.done() and fan.current.cycle == 10
        g = fan.wait(5)
        fan.post(state(12))  # the same block of 5 cycles: nobody is woken
        for _ in range(3):
            await asyncio.sleep(0)
        assert not g.done()
        g.cancel()  # a heartbeat timeout
        fan.forget(5, g)
        assert fan._groups[False, 5, 0][1] == []
        h = fan.wait(5)
        fan.post(state(15))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert h.done()

    asyncio.run(run())


def test_fanout_times_waiters_out_at_their_deadlines_with_one_timer():
    """A waiter with a timeout is done with True once its deadline passed without a new block's publish, with
    False when a publish woke it first; the waiters share one timer (not one per wait), at the earliest
    deadline left, and a timed-out waiter leaves its group."""
    async def run() -> None:
        loop = asyncio.get_running_loop()
        fan = _Fanout(loop)
        t0 = loop.time()
        slow = [fan.wait(1, timeout=0.4) for _ in range(5)]
        first = fan._expiry
        fast = fan.wait(1, timeout=0.05)  # an earlier deadline: the one timer moves to it
        assert first is not None and first.cancelled() and fan._expiry is not None
        assert t0 + 0.05 <= fan._expiry.when() < t0 + 0.4
        assert await asyncio.wait_for(fast, 2.0) is True
        assert loop.time() - t0 >= 0.05 and not any(f.done() for f in slow)
        assert fast not in fan._groups[False, 1, 0][1] and len(fan._groups[False, 1, 0][1]) == 5
        fan.forget(1, fast)
        assert fan._expiry is not None and fan._expiry.when() >= t0 + 0.4  # the slow ones' deadline is next
        fan.deliver(state(1))  # a publish of a new block wakes them before their deadline
        for _ in range(10):
            await asyncio.sleep(0)
        assert [f.result() for f in slow] == [False] * 5
        for f in slow:
            fan.forget(1, f)
        assert fan._deadlines == {}
        t1 = loop.time()
        g = fan.wait(1, timeout=0.1)
        assert await asyncio.wait_for(g, 2.0) is True and loop.time() - t1 >= 0.1
        fan.forget(1, g)
        assert fan._groups[False, 1, 0][1] == [] and fan._deadlines == {}

    asyncio.run(run())


def test_fanout_phases_spread_one_decimation_over_the_cycles_of_a_block():
    """Watchers at decimation 10 with phases 0–9 are woken one phase per cycle (each once per
    block), a control waiter (decimation 1) on every cycle, and it first."""
    async def run() -> list[list[str]]:
        fan = _Fanout(asyncio.get_running_loop())
        woken = []
        for cycle in range(20, 40):
            futs = {f"w{p}": fan.wait(10, p) for p in range(10)} | {"ctl": fan.wait(1)}
            order: list[str] = []
            for name, f in futs.items():
                f.add_done_callback(lambda _, n=name, o=order: o.append(n))
            fan.deliver(state(cycle))
            for _ in range(5):
                await asyncio.sleep(0)
            woken.append(order)
            for p in range(10):
                fan.forget(10, futs[f"w{p}"], p)
        return woken

    woken = asyncio.run(run())
    assert woken[0][0] == "ctl"  # the first publish wakes every phase (a new block for each), control first
    assert sorted(woken[0]) == sorted(["ctl"] + [f"w{p}" for p in range(10)])
    for cycle, names in zip(range(21, 40), woken[1:], strict=True):
        assert names == ["ctl", f"w{cycle % 10}"], (cycle, names)


def started_loop_process():
    """A loop process at 250 Hz, started; the caller closes it."""
    from fdcontrol.server.settings import Settings

    w = LoopWorker(Settings(rate=250.0))
    w.call("start")
    return w


@pytest.fixture(scope="module")
def worker():
    w = started_loop_process()
    yield w
    w.close()


async def take(it, n: int) -> list[tuple[LoopState, bool]]:
    return [await it.__anext__() for _ in range(n)]


def test_states_follow_the_publishes_per_decimation(worker):
    async def run() -> tuple[list, list]:
        async with contextlib.aclosing(worker.states(1)) as a, contextlib.aclosing(worker.states(5)) as b:
            return await asyncio.gather(take(a, 40), take(b, 8))

    every, fifth = asyncio.run(run())
    cycles = [s.cycle for s, _ in every]
    assert all(fresh for _, fresh in every + fifth)
    assert all(b > a for a, b in itertools.pairwise(cycles))  # no repeats, never backwards
    blocks = [s.cycle // 5 for s, _ in fifth]
    assert all(b > a for a, b in itertools.pairwise(blocks))


def test_a_slow_client_gets_the_newest_state_and_does_not_hold_up_the_others(worker):
    async def run() -> tuple[list[int], list[tuple[int, int]]]:
        fast_cycles, slow = [], []
        async with contextlib.aclosing(worker.states(1)) as fast, contextlib.aclosing(worker.states(1)) as lazy:
            await lazy.__anext__()

            async def slow_client() -> None:
                for _ in range(3):
                    time.sleep(0.05)  # a client that blocks (here: the whole event loop) for 12 periods
                    newest = worker.state()[0].cycle
                    s, _ = await lazy.__anext__()
                    slow.append((newest, s.cycle))

            async def fast_client() -> None:
                while len(slow) < 3:
                    s, _ = await fast.__anext__()
                    fast_cycles.append(s.cycle)

            await asyncio.gather(slow_client(), fast_client())
        return fast_cycles, slow

    fast_cycles, slow = asyncio.run(run())
    # drop-latest: after blocking, the next state is the newest then, not the one after the last sent
    # (the feed may be one publish behind shared memory at the instant of that read)
    for newest, got in slow:
        assert got >= newest - 1
    assert len(fast_cycles) >= 3  # the other client kept receiving


def test_wrench_acknowledged_and_heartbeats_when_stopped_or_dead(worker):
    async def run() -> None:
        async with contextlib.aclosing(worker.states(1, heartbeat=0.05)) as it:
            await it.__anext__()
            worker.set_wrench([1.0, 0, 0, 0, 0, 0], seq=777)
            while True:
                s, fresh = await it.__anext__()
                if s.seq_ack >= 777:
                    break
            assert fresh and s.seq_ack == 777
            worker.call("stop")
            while (await it.__anext__())[0].running:
                pass
            (s1, f1), (s2, f2) = await take(it, 2)  # stopped: no publishes, heartbeats from shared memory
            assert not f1 and not f2 and s1.cycle == s2.cycle
            worker.proc.kill()
            worker.proc.join(5)
            s3, f3 = await it.__anext__()
            assert not f3 and s3.cycle >= s2.cycle and worker.problem() is not None

    asyncio.run(run())


@pytest.fixture(scope="module")
def running():
    """A running loop process of its own (the test above kills the shared one)."""
    w = started_loop_process()
    yield w
    w.close()


def test_the_event_loop_watches_the_publish_pipe_no_polling(running):
    """States come from the event loop's reader on the publish pipe: take the reader away and the
    next item is a heartbeat from shared memory (fresh False), although the loop keeps cycling."""
    async def run() -> tuple[list[bool], bool, LoopState, LoopState]:
        async with contextlib.aclosing(running.states(1, heartbeat=0.2)) as it:
            fresh = [f for _, f in await take(it, 20)]
            removed = asyncio.get_running_loop().remove_reader(running.feed.fd)  # True: it was watched
            before = running.state()[0]
            s, f = await it.__anext__()
            while f:  # at most the states delivered before the reader went away
                s, f = await it.__anext__()
            return fresh, removed, before, s

    fresh, removed, before, heartbeat = asyncio.run(run())
    assert all(fresh[1:]) and removed
    assert heartbeat.cycle > before.cycle  # the loop went on publishing, nobody was woken for it
    assert running.feed._watcher is None  # the last subscriber left: nobody watches


def test_every_subscriber_gets_the_acknowledging_state(running):
    async def run() -> list[tuple[int, bool]]:
        async with contextlib.AsyncExitStack() as stack:
            its = [await stack.enter_async_context(contextlib.aclosing(running.states(d, heartbeat=5.0)))
                   for d in (1, 1, 1, 3, 7)]
            for it in its:
                await it.__anext__()
            running.set_wrench([0.5, 0, 0, 0, 0, 0], seq=4242)

            async def until_ack(it) -> tuple[int, bool]:
                for _ in range(2000):
                    s, fresh = await it.__anext__()
                    if s.seq_ack >= 4242:
                        return s.seq_ack, fresh
                return -1, False

            return await asyncio.gather(*(until_ack(it) for it in its))

    assert asyncio.run(run()) == [(4242, True)] * 5


def test_a_second_event_loop_is_fed_and_takes_over_the_pipe(running):
    """Subscribers in two event loops (two threads): both get fresh, increasing states; when the
    watching loop's last subscriber leaves, the other loop watches the pipe and keeps getting them
    (heartbeat 5 s: a fresh state is a delivered publish, not a fallback read)."""
    first_in, second_in, first_left = threading.Event(), threading.Event(), threading.Event()
    got: dict[str, list[tuple[int, bool]]] = {"first": [], "second": []}
    watchers: list[bool] = []  # per loop: was it the one watching the pipe at the end

    async def first() -> None:
        async with contextlib.aclosing(running.states(1, heartbeat=5.0)) as it:
            first_in.set()
            got["first"] = [(s.cycle, f) for s, f in await take(it, 10)]
            await asyncio.to_thread(second_in.wait, 10)
            got["first"] += [(s.cycle, f) for s, f in await take(it, 10)]
            watchers.append(running.feed._watcher.loop is asyncio.get_running_loop())
        first_left.set()

    async def second() -> None:
        await asyncio.to_thread(first_in.wait, 10)
        async with contextlib.aclosing(running.states(1, heartbeat=5.0)) as it:
            second_in.set()
            got["second"] = [(s.cycle, f) for s, f in await take(it, 10)]
            await asyncio.to_thread(first_left.wait, 10)
            got["second"] += [(s.cycle, f) for s, f in await take(it, 20)]
            watchers.append(running.feed._watcher.loop is asyncio.get_running_loop())

    threads = [threading.Thread(target=lambda c=c: asyncio.run(c())) for c in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert first_left.is_set() and not any(t.is_alive() for t in threads)
    assert watchers == [True, True]  # the first loop watched while it was subscribed, then the second
    assert len(got["first"]) == 20 and len(got["second"]) == 30
    for name, items in got.items():
        assert all(f for _, f in items[1:]), name
        assert all(b > a for a, b in itertools.pairwise(c for c, _ in items)), name


def test_closing_from_another_thread_unwatches_before_the_pipe_closes():
    """The feed closed from another thread while an event loop watches the pipe and the loop
    process still writes to it (a process that would not end): the loop removes its reader, then
    the pipe is closed, so a reused fd number is never read by the feed."""
    from fdcontrol.server.settings import Settings

    w = LoopWorker(Settings(rate=250.0))
    w.call("start")

    async def run() -> tuple[bool, bool, bool]:
        loop = asyncio.get_running_loop()
        fd = w.feed.fd
        async with contextlib.aclosing(w.states(1, heartbeat=0.05)) as it:
            await take(it, 3)
            closer = threading.Thread(target=w.feed.close)
            closer.start()
            for _ in range(1000):  # the close is handed to this loop: give it passes
                if w.feed.pipe.closed:
                    break
                await asyncio.sleep(0.01)
            await asyncio.to_thread(closer.join, 10)
            alive = w.proc.is_alive()
            still_watched = loop.remove_reader(fd)
            for _ in range(100):  # no publishes reach it now: after those delivered, a heartbeat
                _, fresh = await it.__anext__()
                if not fresh:
                    break
        return alive and not fresh, still_watched, w.feed.pipe.closed

    try:
        heartbeat, still_watched, closed = asyncio.run(run())
    finally:
        w.close()
    assert heartbeat and closed and not still_watched


def test_a_wrench_in_the_input_slot_is_acknowledged_by_the_next_cycle_and_its_published_state():
    """The bound of the command latency (README, "Command latency"): the loop reads its inputs once in
    every cycle, so a wrench the API put into the shared-memory slot at any time before a cycle starts is taken
    by that cycle and acknowledged in the state it publishes — the slot the API's feed reads — never a later one."""
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop import build_loop
    from fdcontrol.model.robot import HOME, RobotModel
    from fdcontrol.server.channel import Channel, ShmIO

    robot = RobotModel.load("ur10")
    dt = 0.002
    loop = build_loop(driver=SimulatedRobot(robot, dt=dt, q0=np.array(HOME["ur10"])), robot=robot, rate=1 / dt)
    ch = Channel()
    try:
        loop.io = ShmIO(ch)
        loop.step(now=0.0)
        rng = np.random.default_rng(5)
        for k in range(1, 60):
            now = k * dt
            seq = 100 + k
            # arrived at a random phase of the period before this cycle (the API's stamp: its receipt)
            ch.write_wrench(np.array([2.0, 0, 0, 0, 0, 0]), "base", seq, now - dt * rng.uniform())
            s = loop.step(now=now)
            shared, _ = ch.read_state()
            assert s.seq_ack == seq and s.watchdog == "ok", k
            assert shared.cycle == s.cycle and shared.seq_ack == seq, k
    finally:
        ch.close(unlink=True)



def test_a_wrench_that_arrives_after_the_cycles_read_and_sensor_is_taken_by_that_cycle():
    """The service's io takes the streamed inputs right before the cycle's inputs stage (ShmIO.inputs), not at
    its start: a wrench put into the slot while the cycle reads the robot, its kinematics and its sensor is
    acknowledged by that cycle's own state."""
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop import build_loop
    from fdcontrol.model.robot import HOME, RobotModel
    from fdcontrol.server.channel import Channel, ShmIO

    robot = RobotModel.load("ur10")
    dt = 0.002
    driver = SimulatedRobot(robot, dt=dt, q0=np.array(HOME["ur10"]))
    loop = build_loop(driver=driver, robot=robot, rate=1 / dt)
    ch = Channel()
    arriving: list[tuple[int, float]] = []  # the wrench to write during the next cycle's sensor read
    read_wrench = driver.read_wrench

    def sensor_then_arrival():  # the sensor stage's read: the robot's state and q's kinematics are taken already
        for seq, t in arriving:
            ch.write_wrench(np.array([2.0, 0, 0, 0, 0, 0]), "base", seq, t)
        arriving.clear()
        return read_wrench()

    driver.read_wrench = sensor_then_arrival  # type: ignore[method-assign]
    try:
        loop.io = ShmIO(ch)
        loop.step(now=0.0)
        for k in range(1, 30):
            now, seq = k * dt, 500 + k
            arriving.append((seq, now))
            s = loop.step(now=now)
            assert s.seq_ack == seq and s.watchdog == "ok", k
            assert ch.read_state()[0].seq_ack == seq, k
    finally:
        ch.close(unlink=True)


def test_the_streams_stall_checks_share_one_timer_per_event_loop():
    """Every stream checks its send in flight for stalls every STALL_CHECK s: one timer of the hub runs all
    the checks of an event loop (one wake-up per period, not one per stream), and the last stream to leave
    takes the timer with it."""
    from fdcontrol.server.routers.ws import STALL_CHECK, Hub

    async def run() -> tuple[int, int, list[int], int, dict]:
        loop, hub = asyncio.get_running_loop(), Hub()
        timers = 0
        call_later = loop.call_later

        def counted(delay, *args, **kwargs):
            nonlocal timers
            timers += delay == STALL_CHECK  # the stall checks' timers (this test's sleeps are others)
            return call_later(delay, *args, **kwargs)

        loop.call_later = counted  # type: ignore[method-assign]
        calls = [0] * 50
        unwatch = [hub.watch_stalls(lambda i=i: calls.__setitem__(i, calls[i] + 1)) for i in range(50)]
        for _ in range(2000):  # bounded; ends when every check has run three times
            if min(calls) >= 3:
                break
            await asyncio.sleep(0.01)
        rounds, scheduled = max(calls), timers
        for u in unwatch:
            u()
        after = list(calls)
        await asyncio.sleep(0.2)  # several periods: no check runs once every stream has left
        return rounds, scheduled, [c - a for c, a in zip(calls, after, strict=True)], timers, hub._stall_timers

    rounds, scheduled, later, timers_after, left = asyncio.run(run())
    assert min(later) == max(later) == 0 and left == {}
    assert rounds >= 3 and scheduled <= rounds + 1  # one timer per round for all 50 (per stream: 50 per round)
    assert timers_after == scheduled


def test_read_only_streams_wait_later_and_control_streams_do_not():
    """The WebSocket sender asks the feed for its states as a watcher (``later``: half a period after each
    publish) on /ws/state, and at once on /ws/control (server/routers/ws.py stream)."""
    from types import SimpleNamespace

    from fdcontrol.server.routers.ws import Hub, stream

    class Asked(Exception):
        pass

    asked: list[bool] = []

    class Worker:
        def __init__(self) -> None:
            self.params = {"rate": 500.0, "robot": "ur10", "base": None, "tip": None}

        def snapshots(self, decimation, heartbeat=0.5, phase=0, later=False):
            asked.append(later)
            raise Asked

    w = Worker()
    lease = SimpleNamespace(info=lambda: {})
    app = SimpleNamespace(state=SimpleNamespace(worker=w, hub=Hub(), access=SimpleNamespace(lease=lease)))
    for control in (False, True):
        with pytest.raises(Asked):
            asyncio.run(stream(SimpleNamespace(app=app), "json", 10, control=control))
    assert asked == [True, False]


def test_a_stuck_loop_takes_no_wrench_and_a_dead_one_acknowledges_none():
    """LoopWorker.set_wrench: a stuck loop process (stopped, not dead) is refused before the write — its input
    slot keeps its version, so it cannot take the wrench when it resumes — with the health rules' reason; it
    takes wrenches again once it runs. A dead process is refused too (after the write: nobody reads its slot),
    never acknowledged."""
    import os
    import signal

    from fdcontrol.server.worker import WorkerError

    w = started_loop_process()
    try:
        assert w.set_wrench([1.0, 0, 0, 0, 0, 0], seq=5) == 5
        end = time.monotonic() + 10  # bounds a hung test only: "start" returns before the loop's first cycle is
        while not all(w.channel.read_running()):  # published; stopped before it, there is no record to go stale
            assert time.monotonic() < end
            time.sleep(0.01)
        os.kill(w.proc.pid, signal.SIGSTOP)
        try:
            end = time.monotonic() + 10  # bounds a hung test only: stuck once the heartbeat is stale_after old
            while w.problem() is None:
                assert time.monotonic() < end
                time.sleep(0.01)
            version = w.channel.inp[0]
            with pytest.raises(WorkerError) as e:
                w.set_wrench([2.0, 0, 0, 0, 0, 0], seq=6)
            assert "not responding" in str(e.value) or "stalled" in str(e.value)
            assert w.channel.inp[0] == version  # not written
        finally:
            os.kill(w.proc.pid, signal.SIGCONT)
        end = time.monotonic() + 10
        while w.problem() is not None:
            assert time.monotonic() < end
            time.sleep(0.01)
        assert w.set_wrench([3.0, 0, 0, 0, 0, 0], seq=7) == 7 and w.channel.read_wrench()[3] == 7
        w.proc.kill()
        w.proc.join(5)
        with pytest.raises(WorkerError, match="has exited"):
            w.set_wrench([4.0, 0, 0, 0, 0, 0], seq=8)
    finally:
        w.close()


def test_a_plain_wrench_is_checked_and_written_as_set_wrench_checks_and_writes_it():
    """LoopWorker.set_plain_wrench (the streamed wrench's plain form: its range check on plain floats, no numpy)
    against set_wrench: the same error, word for word, or the same record in the input slot, byte for byte (all
    but its arrival time) — in range, out of range by force or torque alone, exactly at the bounds, ±0, both
    frames, with and without seq. And the slot's record itself against the one built independently with numpy."""
    import math
    import random

    w = started_loop_process()
    try:
        fmax, tmax = w.max_force, w.max_torque
        rng = random.Random(3)
        wrenches = [[0.0] * 6, [-0.0] * 6, [fmax, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, -tmax],
                    [fmax * 0.6, fmax * 0.8, 0, tmax * 0.6, 0, tmax * 0.8],  # |F| and |τ| at their bounds
                    [fmax, 1e-9, 0, 0, 0, 0], [0, 0, 0, 0, tmax, 1e-9], [fmax * 2, 0, 0, 0, 0, 0],
                    [0, 0, 0, tmax * 2, 0, 0], [1e300, 1e300, 0, 0, 0, 0]]
        wrenches += [[rng.uniform(-1, 1) * fmax * rng.choice([0.3, 0.7, 1.2]) for _ in range(3)]
                     + [rng.uniform(-1, 1) * tmax * rng.choice([0.3, 0.7, 1.2]) for _ in range(3)] for _ in range(300)]
        slot = w.channel.inp
        checked = refused = 0
        for k, v in enumerate(wrenches):
            v = [float(x) for x in v]
            frame, seq = rng.choice(["base", "tool"]), rng.choice([None, 10_000 + k])
            outcomes = []
            for set_ in (w.set_wrench, w.set_plain_wrench):
                try:
                    got = set_(list(v), frame, seq)
                    assert slot[8] == float(got)  # the seq it returned (None: the worker's count, +1 each time)
                    outcomes.append(("ok", got, slot[1:8].tobytes()))
                except ValueError as exc:
                    outcomes.append(("refused", type(exc), str(exc)))
            old, new = outcomes
            if old[0] == "ok":  # seq None: the worker's own count, one more each time
                assert new[0] == "ok" and new[2] == old[2] and new[1] == (old[1] + 1 if seq is None else seq), v
                want = np.empty(7)
                want[0:6], want[6] = np.asarray(v), 1.0 if frame == "tool" else 0.0
                assert new[2] == want.tobytes(), v
                checked += 1
            else:
                assert new == old and "out of range" in old[2], v
                assert not (math.hypot(*v[:3]) <= fmax and math.hypot(*v[3:]) <= tmax), v
                refused += 1
        assert checked > 100 and refused > 50
    finally:
        w.close()
