"""The loop process's reads of the shared-memory input slots (server/channel.py): the slot's record as numpy's
scalars give it, a slot mid-write never taken, a rejected input ignored."""

from __future__ import annotations

import math
import struct

import numpy as np

from fdcontrol.server.channel import IN_SIZE, Channel, ShmIO, _slot_read


def _numpy_read(slot: np.ndarray) -> tuple[int, np.ndarray, str, int, float] | None:
    """The slot read with numpy's scalars (the definition _slot_read keeps)."""
    for _ in range(100):
        v1 = slot[0]
        data = slot.copy()
        if v1 % 2 == 0 and slot[0] == v1:
            return (int(v1), data[1:7], "tool" if data[7] else "base", int(data[8]), float(data[9]))
    return None


def _bits(x: float) -> bytes:
    return struct.pack("=d", x)


def test_the_slot_read_gives_what_numpys_scalars_give():
    rng = np.random.default_rng(3)
    odd = [0.0, -0.0, math.inf, -math.inf, math.nan, struct.unpack("=d", b"\x01\x00\x00\x00\x00\x00\xf8\x7f")[0]]
    checked = 0
    for k in range(3000):
        rec = rng.normal(scale=10.0 ** rng.integers(-3, 4), size=IN_SIZE)
        rec[0] = 2.0 * int(rng.integers(0, 2**40))  # an even version (a record written whole)
        for i in rng.choice(np.arange(1, 7), size=int(rng.integers(0, 3)), replace=False):
            rec[i] = odd[int(rng.integers(len(odd)))]
        rec[7] = [0.0, 1.0, -0.0, math.nan][k % 4]  # the frame: 0 base, else tool (NaN: tool, as numpy's bool)
        rec[8] = float(rng.integers(0, 2**53))
        rec[9] = odd[k % len(odd)] if k % 3 == 0 else float(rng.uniform(0, 1e6))
        got, want = _slot_read(rec), _numpy_read(rec)
        assert got is not None and want is not None
        assert got[0] == want[0] and type(got[0]) is int
        assert got[1].dtype == np.float64 and got[1].tobytes() == want[1].tobytes()  # the wrench's bits
        assert got[2] == want[2] and got[3] == want[3] and type(got[3]) is int
        assert type(got[4]) is float and _bits(got[4]) == _bits(want[4])
        checked += 1
    assert checked == 3000


def test_a_slot_mid_write_is_not_taken():
    rec = np.zeros(IN_SIZE)
    rec[0] = 7.0  # odd: the writer is inside its write
    assert _slot_read(rec) is None and _numpy_read(rec) is None


def test_a_rejected_wrench_in_the_slot_is_ignored_and_the_next_one_taken():
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop import build_loop
    from fdcontrol.model.robot import HOME, RobotModel

    robot = RobotModel.load("ur10")
    loop = build_loop(driver=SimulatedRobot(robot, dt=0.002, q0=np.array(HOME["ur10"])), robot=robot, rate=500.0)
    ch = Channel()
    try:
        io = loop.io = ShmIO(ch)
        ch.write_wrench(np.array([1e9, 0, 0, 0, 0, 0]), "base", 3, 0.0)  # beyond max_force: set_wrench refuses it
        io.inputs(loop)
        assert loop._command is None and io.version == ch.inp[0]  # not taken, and not read again
        ch.write_wrench(np.array([2.0, 0, 0, 0, 0, 0]), "tool", 4, 0.0)
        io.inputs(loop)
        assert loop._command is not None and loop._command.seq == 4
    finally:
        ch.close(unlink=True)


def test_the_loop_takes_each_hold_and_stop_request_once_and_the_block_still_closes():
    """ShmIO.poll reads the request counters (the worker's stores into the block) each cycle: a new count is one
    request, taken once; a twist and a wrench taken by version. Channel.close then releases the block (no view of
    it left behind: SharedMemory.close() would refuse with exported buffers)."""
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop import build_loop
    from fdcontrol.model.robot import HOME, RobotModel

    robot = RobotModel.load("ur10")
    loop = build_loop(driver=SimulatedRobot(robot, dt=0.002, q0=np.array(HOME["ur10"])), robot=robot, rate=500.0)
    ch = Channel()
    io = loop.io = ShmIO(ch)
    holds, stops = [], []
    loop.hold = lambda on=True: holds.append(on)  # type: ignore[method-assign]
    loop.request_stop = lambda: stops.append(1)  # type: ignore[method-assign]
    try:
        io.poll(loop)
        assert holds == [] and stops == []
        ch.hold[0] = ch.hold[0] + 1.0  # LoopWorker.request_hold's store
        io.poll(loop)
        io.poll(loop)
        assert holds == [True] and stops == []
        ch.stop[0] = ch.stop[0] + 1.0
        ch.hold[0] = ch.hold[0] + 1.0
        io.poll(loop)
        io.poll(loop)
        assert holds == [True, True] and stops == [1]
        assert type(io.holds_seen) is float and io.holds_seen == 2.0 and io.stops_seen == 1.0
        ch.write_twist(np.array([0.01, 0, 0, 0, 0, 0]), "base", 5, 0.0)
        io.inputs(loop)
        assert loop._twist is not None and loop._twist.seq == 5 and io.twist_version == ch.twist[0]
    finally:
        ch.close(unlink=True)
    assert ch.shm.buf is None  # closed: every view of the block was dropped first
