"""The state declaration: every field round-trips through shared memory, dict, JSON,
MessagePack and the pydantic model — as the service wires them (server/channel.py's state slot,
server/app.py's state_dict, the app's OpenAPI State) — and a new field needs no other edit."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from fdcontrol.loop import state as st
from fdcontrol.loop.state import LoopState, SharedLayout

FAULT = "DriverError: tête de robot — ∞ % ✓"


def assert_same(a: LoopState, b: LoopState) -> None:
    for f in st.FIELDS:
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert isinstance(y, np.ndarray) and x.shape == y.shape and np.array_equal(x, y), f.name
        elif isinstance(x, float) and math.isnan(x):
            assert isinstance(y, float) and math.isnan(y), f.name
        else:
            assert x == y and type(x) is type(y), (f.name, x, y)


def synthetic(rng, dof=7, fault=FAULT, kappa=123.5, mode="compliance", watchdog="tripped") -> LoopState:
    """Every field set to a distinct, non-default value."""
    return LoopState(
        t=rng.uniform(0, 1e5), cycle=int(rng.integers(0, 2**40)), q=rng.normal(size=dof),
        qd=rng.normal(size=dof), q_ref=rng.normal(size=dof), qd_ref=rng.normal(size=dof),
        tip_pose=rng.normal(size=(4, 4)), wrench=rng.normal(size=6), f_measured=rng.normal(size=6),
        mode=mode, running=True, holding=True, watchdog=watchdog, seq_ack=int(rng.integers(0, 2**40)),
        fault=fault, sigma_min_j=float(rng.uniform()),
        limits_active={k: bool(i % 2) for i, k in enumerate(st.LIMIT_KEYS)}, kappa_h=kappa)


@pytest.fixture
def loop_state(ur10):
    """A state published by the real loop (UR10, FD, kinematic simulator)."""
    from fdcontrol import make_mapping
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop.cycle import ControlLoop
    from fdcontrol.loop.solvers import make_solver

    q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
    loop = ControlLoop(ur10, SimulatedRobot(ur10, q0=q0), make_solver(make_mapping("fd", ur10)))
    for i in range(12):
        loop.set_wrench([30.0, 0, 0, 0, 0, 0])
        s = loop.step(now=1e-3 * i)  # simulated time: the loop stamps each command at receipt
    return s


def cases(rng):
    yield synthetic(rng)
    yield synthetic(rng, dof=2, fault=None, kappa=math.nan, mode="admittance", watchdog="idle")
    yield synthetic(rng, dof=16, fault="", kappa=0.0, mode="force", watchdog="ok")
    yield dataclasses.replace(synthetic(rng, dof=6), limits_active={})  # empty flags read back all False


def test_shared_memory_layout_round_trips_every_field(rng, loop_state):
    lay = SharedLayout(max_dof=16, extra=("last_cycle_at",))
    buf = lay.empty()
    for s in [loop_state, *cases(rng)]:
        buf[:] = np.nan  # nothing may be left over from the previous state
        lay.pack(s, buf, last_cycle_at=42.5)
        back, extra = lay.unpack(buf.copy())
        # flags come back with every declared key (a missing key reads as False)
        expect = dataclasses.replace(s, limits_active={k: bool(s.limits_active.get(k)) for k in st.LIMIT_KEYS})
        assert_same(expect, back)
        assert extra == {"last_cycle_at": 42.5}


def test_pack_writes_each_array_where_its_slot_is(rng, loop_state):
    """pack's one scatter of the flattened arrays writes the buffer an array at a time would write: every
    array's entries at its slot start, in row-major order, nothing else touched — also for a state whose
    arrays are off their declared sizes (written as they come, as before)."""
    lay = SharedLayout(max_dof=16, extra=("last_cycle_at",))
    odd = dataclasses.replace(synthetic(rng, dof=6), qd=np.arange(4.0))  # qd shorter than q
    for s in [loop_state, *cases(rng), odd]:
        got, want = lay.empty(), lay.empty()
        got[:] = want[:] = np.nan
        lay.pack(s, got, last_cycle_at=1.0)
        lay.pack(s, want, last_cycle_at=1.0)
        for name, start in lay._arrays:  # the array slots by hand, after a full pack (the rest identical)
            want[lay.slots[name]] = np.nan
            v = np.asarray(getattr(s, name), dtype=float).reshape(-1)
            want[start:start + v.size] = v
        np.testing.assert_array_equal(got, want)


def test_a_packer_leaves_its_buffer_as_pack_would(rng, loop_state):
    """The state slot's packer (its own buffer, written every cycle) skips the flags and texts equal to the
    ones it wrote last: after every state of a run where they change, repeat and come back — also after a
    pack that failed half-way — its buffer is, slot for slot, the one plain pack leaves in a buffer of its own."""
    lay = SharedLayout(max_dof=16, extra=("last_cycle_at",))
    got, want = lay.empty(), lay.empty()
    got[:] = want[:] = np.nan
    packer = lay.packer(got)
    base = synthetic(rng, dof=7)
    flags = [{k: bool(i % 2) for i, k in enumerate(st.LIMIT_KEYS)}, {k: True for k in st.LIMIT_KEYS}, {}]
    seq = [loop_state, base]
    for i in range(60):
        seq.append(dataclasses.replace(
            synthetic(rng, dof=7), limits_active=dict(flags[(i // 3) % 3]),
            fault=(None, "short", FAULT, "é" * 200)[(i // 4) % 4],
            safety_mode=("Move", None, "Idle")[(i // 5) % 3], sensor_status=None if i % 7 else "status 0x8"))
    seq.insert(20, dataclasses.replace(seq[19], mode="dance"))  # fails at the mode, after nothing was written
    seq.insert(40, dataclasses.replace(seq[39], q=np.zeros(17)))  # fails at the joint count
    # numpy's scalars, and a float field without a number (numpy's assignment stores NaN for None)
    seq.insert(50, dataclasses.replace(seq[49], t=np.float64(-0.0), cycle=np.int64(2**60 + 1), running=np.True_))
    seq.insert(51, dataclasses.replace(seq[50], speed_scaling=None, gamma=np.float32(0.1)))
    for k, s in enumerate(seq):
        failed = []
        for pack in (packer.pack, lambda s, **extra: lay.pack(s, want, **extra)):
            try:
                pack(s, last_cycle_at=float(k))
            except ValueError as exc:
                failed.append(str(exc))
        assert len(failed) in (0, 2), failed
        np.testing.assert_array_equal(got, want, err_msg=f"state {k}")
        if not failed and k not in (50, 51):  # (those two do not round-trip their types)
            expect = dataclasses.replace(s, limits_active={k: bool(s.limits_active.get(k)) for k in st.LIMIT_KEYS})
            assert_same(expect, lay.unpack(got.copy())[0])


def test_wire_reads_to_dict_of_the_unpacked_state_from_the_slots(rng, loop_state):
    """SharedLayout.wire (the service's encoding of every published state) is to_dict of unpack, read straight
    from the packed slots: the same keys in the same order, the same values of the same types (JSON text
    equal: 1 and 1.0, true and 1, null and NaN differ) — for every joint count, NaN and ±Inf inside arrays and
    in nullable and plain floats, empty flags, texts cut at the layout's byte limit and mid-character."""
    import json

    odd = dataclasses.replace(synthetic(rng, dof=6), f_measured=np.array([np.nan, np.inf, -np.inf, 0, -0.0, 1e300]),
                              t=math.nan, sigma_min_j=math.inf, kappa_h=-math.inf, posture_distance=-0.0,
                              cycle=2**52 + 1, holding=False, safety_mode="é" * 40, link_pair="a ↔ b")
    states = [loop_state, *cases(rng), odd, *(synthetic(rng, dof=d, fault=None) for d in (1, 3, 16))]
    for lay in (SharedLayout(max_dof=16, extra=("last_cycle_at",)), SharedLayout(max_dof=16, text_bytes=15)):
        buf = lay.empty()
        for s in states:
            buf[:] = np.nan  # nothing may be left over from the previous state
            lay.pack(s, buf, **({"last_cycle_at": 3.5} if "last_cycle_at" in lay.slots else {}))
            want, got = st.to_dict(lay.unpack(buf.copy())[0]), lay.wire(buf)
            assert list(got) == list(want) == list(st.NAMES)
            assert json.dumps(got) == json.dumps(want), [k for k in want if json.dumps(got[k]) != json.dumps(want[k])]
            assert got["q"] is not want["q"] and lay.wire(buf) is not got  # new lists and a new dict per call


def _odd_bits(rng, n):
    """n float64 values with the bit patterns a copy could lose: NaN with payloads, ±0, ±Inf, subnormals."""
    special = np.array([0x7FF8_0000_0000_0000, 0x7FF8_DEAD_BEEF_0001, 0xFFF0_0000_0000_0001, 0x8000_0000_0000_0000,
                        0x7FF0_0000_0000_0000, 0xFFF0_0000_0000_0000, 0x0000_0000_0000_0001], dtype=np.uint64)
    v = rng.normal(size=n)
    pick = rng.random(n) < 0.5
    v[pick] = special[rng.integers(0, len(special), pick.sum())].view(np.float64)
    return v


def test_the_packer_writes_the_bytes_pack_writes(rng, loop_state):
    """The state slot's packer (fdcontrol.loop.state_compiled: the scalars by struct, the arrays by one compiled
    call) leaves its buffer byte for byte as plain pack (numpy calls: the reference) leaves one: random states of
    6, 7, 2 and 16 joints (a joint count below max_dof leaves the slots' tails as they were), NaN with payloads,
    −0, ±Inf, subnormals in the arrays and the scalars, numpy's and Python's other number types, texts None / a
    fault / cut inside a character, flags all, some, none; arrays in any memory layout, read-only too; and
    what it leaves to
    numpy (another dtype, an array off its declared shape, None in a float field), also after a state that
    fails (an undeclared mode, too many joints: the same error both ways). The compiled path is taken for every
    state it can take."""
    sc = pytest.importorskip("fdcontrol.loop.state_compiled")  # the fast extra (numba)
    lay = SharedLayout(max_dof=16, extra=("last_cycle_at",))
    got, want = lay.empty(), lay.empty()
    got[:] = want[:] = np.nan
    packer = lay.packer(got)
    assert packer._fast is not None  # numba is here: the compiled path is in use
    taken = []
    fast = packer._fast
    packer._fast = lambda *a: taken.append(fast(*a)) or taken[-1]

    def state(dof):
        s = synthetic(rng, dof=dof, fault=(None, "", FAULT, "é" * 300)[int(rng.integers(0, 4))],
                      kappa=float(_odd_bits(rng, 1)[0]), mode=("compliance", "admittance", "force")[dof % 3],
                      watchdog=("idle", "ok", "tripped", "sensor_stale")[int(rng.integers(0, 4))])
        arrays = {f.name: _odd_bits(rng, getattr(s, f.name).size).reshape(getattr(s, f.name).shape)
                  for f in st.FIELDS if f.metadata["kind"] == "array"}
        flags = (dict(s.limits_active), {k: True for k in st.LIMIT_KEYS}, {})[int(rng.integers(0, 3))]
        return dataclasses.replace(
            s, **arrays, limits_active=flags, t=float(_odd_bits(rng, 1)[0]), sigma_min_j=-0.0,
            gamma=float(_odd_bits(rng, 1)[0]), safety_mode=(None, "NORMAL")[dof % 2],
            running=bool(dof % 2), holding=not dof % 2, speed_scaling=np.float32(0.25), cycle=np.int64(2**60 + 1))

    regular = [loop_state] + [state(int(d)) for d in rng.choice([6, 7, 2, 16], size=40)]
    s7 = state(7)
    frozen = np.frombuffer(s7.qd.tobytes())  # read-only, as a driver's np.frombuffer of a packet
    odd = [dataclasses.replace(s7, tip_pose=np.asfortranarray(s7.tip_pose)),  # any layout: still the kernel's
           dataclasses.replace(s7, q=np.repeat(s7.q, 2)[::2], wrench=np.zeros((6, 2))[:, 1], qd=frozen)]
    foreign = [dataclasses.replace(s7, qd=s7.qd.astype(np.float32)),  # not float64: numpy's
               dataclasses.replace(s7, f_measured=np.arange(6)),
               dataclasses.replace(s7, qd=np.arange(4.0)),  # off the declared shape: numpy's, as it comes
               dataclasses.replace(s7, tip_pose=s7.tip_pose.reshape(2, 8)),
               dataclasses.replace(s7, speed_scaling=None),  # (a scalar numpy stores as NaN)
               dataclasses.replace(s7, cycle=2**70 + 1, seq_ack=np.uint64(2**64 - 1), running=np.True_,
                                   follow_joint=np.int32(-3), link_distance=np.float16(0.1), kappa_h=True)]
    seq = regular[:20] + odd + foreign + regular[20:] + [regular[3], regular[3]]  # the last: nothing changed
    first_foreign = len(regular[:20] + odd)
    for k, s in enumerate(seq):
        n = len(taken)
        packer.pack(s, last_cycle_at=float(k))
        lay.pack(s, want, last_cycle_at=float(k))
        assert got.tobytes() == want.tobytes(), f"state {k}"
        assert len(taken) == n + 1
        assert taken[-1] is not any(s is f for f in foreign[:5]), f"state {k}"  # compiled wherever it applies
        if k % 10 == 9:  # a state that cannot be packed: the same error, then the next state as ever
            bad = dataclasses.replace(s, mode="dance") if k % 20 == 9 else dataclasses.replace(s, q=np.zeros(17))
            errors = []
            for pack in (packer.pack, lambda s, **extra: lay.pack(s, want, **extra)):
                with pytest.raises(ValueError) as e:
                    pack(bad, last_cycle_at=-1.0)
                errors.append(str(e.value))
            assert errors[0] == errors[1]
        # numba's TypeError for an array it has no code for (float32) costs ~0.3 ms: after the first, the arrays
        # are checked in Python before the kernel is called (a state it takes still is compiled, the rest numpy's)
        assert fast.mode[0] == (sc.OPTIMISTIC if k < first_foreign else sc.CHECKED), f"state {k}"
    calls = []
    kernel = fast.__globals__["KERNEL"]
    fast.__globals__["KERNEL"] = lambda *a: calls.append(1) or kernel(*a)
    for s in (foreign[0], foreign[1], regular[5]):
        packer.pack(s, last_cycle_at=1.0)
        lay.pack(s, want, last_cycle_at=1.0)
        assert got.tobytes() == want.tobytes()
    assert len(calls) == 1 and taken[-3:] == [False, False, True]  # float32 and int arrays: no kernel call
    fast.__globals__["TAKES"] = lambda vecs, mats: True  # a check that misses a type: the kernel is off after it
    for s in (foreign[0], regular[6], regular[7]):
        packer.pack(s, last_cycle_at=2.0)
        lay.pack(s, want, last_cycle_at=2.0)
        assert got.tobytes() == want.tobytes()
    assert fast.mode[0] == sc.OFF and taken[-3:] == [False, False, False] and len(calls) == 2


def test_the_packers_extra_slots_are_numpys_bytes(rng, loop_state):
    """The compiled packing's extra slots (struct's float64) hold numpy's bytes for every value numpy stores: floats
    with NaN payloads, ±0, ±Inf, subnormals, ints, bools, numpy's scalars and 0-d arrays; what struct does not take
    (None, text numpy parses) is stored by numpy; what neither takes raises numpy's error, and the next state
    packs as ever."""
    pytest.importorskip("fdcontrol.loop.state_compiled")  # the fast extra (numba)
    lay = SharedLayout(max_dof=16, extra=("last_cycle_at", "other"))
    got, want = lay.empty(), lay.empty()
    packer = lay.packer(got)
    assert packer._fast is not None
    values = [*(float(v) for v in _odd_bits(rng, 20)), 0, -3, 2**70 + 1, True, np.float32(0.1), np.int64(-7),
              np.float64(-0.0), np.array(2.5), None, "1.5", np.uint64(2**64 - 1)]
    for k, v in enumerate(values):
        s = loop_state if k % 2 else synthetic(rng, dof=6)
        packer.pack(s, last_cycle_at=v, other=float(k))
        lay.pack(s, want, last_cycle_at=v, other=float(k))
        assert got.tobytes() == want.tobytes(), (k, v)
    errors = []
    for pack in (packer.pack, lambda s, **extra: lay.pack(s, want, **extra)):
        with pytest.raises(Exception) as e:
            pack(loop_state, last_cycle_at=10**400)
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]
    packer.pack(loop_state, last_cycle_at=1.0)
    lay.pack(loop_state, want, last_cycle_at=1.0)
    assert got.tobytes() == want.tobytes()


def test_the_packer_leaves_float64_of_the_other_byte_order_to_numpy(rng, loop_state):
    """A driver's packet decoded in network byte order ('>f8', kept as is): numba takes such an array inside the
    compiled call's tuple and reads its bytes as native ones (q̇ published as ±1e300 garbage, a reviewer's case).
    The packer leaves it to numpy's path: the same bytes as plain pack, after native states the kernel took and
    before the next, vectors and matrices, writable and read-only."""
    pytest.importorskip("fdcontrol.loop.state_compiled")  # the fast extra (numba)
    lay = SharedLayout(max_dof=16)
    got, want = lay.empty(), lay.empty()
    packer = lay.packer(got)
    s = synthetic(rng, dof=7)
    big = np.frombuffer(s.qd.astype(">f8").tobytes(), dtype=">f8")
    for state in (s, dataclasses.replace(s, qd=big.copy()), s, dataclasses.replace(s, qd=big),
                  dataclasses.replace(s, tip_pose=s.tip_pose.astype(">f8")), loop_state):
        packer.pack(state)
        lay.pack(state, want)
        assert got.tobytes() == want.tobytes()
        assert np.array_equal(lay.unpack(got)[0].qd, np.asarray(state.qd, dtype=float))


def test_unpacked_state_owns_its_arrays(rng):
    """The unpacked state's arrays are its own: rewriting the packed vector afterwards (the next state in
    a reused buffer) changes none of them, and each has its declared shape."""
    lay = SharedLayout(max_dof=16)
    s = synthetic(rng, dof=7)
    buf = lay.empty()
    lay.pack(s, buf)
    back = lay.unpack(buf)[0]
    buf[:] = 7.0
    assert_same(dataclasses.replace(s, limits_active={k: bool(s.limits_active.get(k)) for k in st.LIMIT_KEYS}),
                back)
    assert back.q.shape == (7,) and back.tip_pose.shape == (4, 4)
    back.q[0] = 99.0  # a consumer that writes one array touches no other field
    assert back.qd[-1] == s.qd[-1] and back.q_ref[0] == s.q_ref[0]


def test_shared_memory_bounds_and_text(rng):
    lay = SharedLayout(max_dof=6, text_bytes=16)
    with pytest.raises(ValueError, match="max_dof"):
        lay.pack(synthetic(rng, dof=7), lay.empty())
    with pytest.raises(ValueError, match="mode"):
        lay.pack(dataclasses.replace(synthetic(rng, dof=6), mode="dance"), lay.empty())
    buf = lay.empty()
    lay.pack(synthetic(rng, dof=6, fault="é" * 20), buf)  # 40 bytes of UTF-8, cut inside a character
    assert lay.unpack(buf)[0].fault == "é" * 8
    assert lay.nbytes == 8 * lay.size


def test_dict_json_msgpack_round_trip_every_field(rng, loop_state):
    for s in [loop_state, *cases(rng)]:
        d = st.to_dict(s)
        assert list(d) == [f.name for f in st.FIELDS]
        assert_same(s, st.from_dict(d))
        assert_same(s, st.from_json(st.to_json(s)))
        assert_same(s, st.from_msgpack(st.to_msgpack(s)))
    d = st.to_dict(synthetic(rng, kappa=math.nan))
    assert d["kappa_h"] is None and "NaN" not in st.to_json(synthetic(rng, kappa=math.nan))


def test_websocket_json_frame_is_the_state(rng, loop_state):
    """The /ws/state JSON frame (encoded once per cycle for every reader) is strict JSON whose object is the
    state's dict and ``stale``; a non-finite number inside an array is null, never a bare NaN."""
    pytest.importorskip("fastapi")
    import json

    from fdcontrol.server.routers.ws import Hub

    def strict(text: str) -> dict:
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the frame"))

    from fdcontrol.server import channel
    from fdcontrol.server.feed import Snapshot

    ch = channel.Channel()
    try:
        for s in [loop_state, *cases(rng)]:
            frame = Hub().encode(s, "json")
            assert isinstance(frame, str)
            assert strict(frame) == {**st.to_dict(s), "stale": False}
            assert_same(s, st.from_dict(strict(frame)))
            # as the feed hands it to the senders: undecoded from shared memory, the same frames (flags read
            # back with every key, as from the LoopState that went through shared memory)
            ch.write_state(s, 1.0)
            snap, back = Snapshot(ch.read_packed()), ch.read_state()[0]
            assert (snap.cycle, snap.reaction_count) == (back.cycle, back.reaction_count)
            assert_same(back, snap.state)
            for enc in ("json", "msgpack"):
                assert Hub().encode(snap, enc) == Hub().encode(back, enc)
    finally:
        ch.close(unlink=True)
    odd = dataclasses.replace(loop_state, f_measured=np.array([np.nan, np.inf, 0, 0, 0, 0]))
    assert strict(Hub().encode(odd, "json"))["f_measured"][:3] == [None, None, 0.0]


def test_pydantic_model_round_trips_and_documents_units(rng, loop_state):
    model = st.state_model()
    for s in [loop_state, *cases(rng)]:
        d = st.to_dict(s)
        assert model.model_validate(d).model_dump() == d
        assert_same(s, st.from_dict(model.model_validate_json(st.to_json(s)).model_dump()))
    schema = model.model_json_schema()
    assert set(schema["properties"]) == {f.name for f in st.FIELDS}
    assert "(rad/s)" in schema["properties"]["qd"]["description"]
    bad = st.to_dict(synthetic(rng))
    for key, value in (("mode", "dance"), ("watchdog", "maybe"), ("q", [math.inf])):
        with pytest.raises(ValueError):
            model.model_validate({**bad, key: value})


def test_describe_lists_every_field():
    table = st.describe()
    for f in st.FIELDS:
        assert f"`{f.name}`" in table


# ---------------------------------------------------------------------- the service's real wiring
def test_loop_py_publishes_the_declared_state(loop_state):
    """The loop's state is a LoopState with every declared field, in declaration order (the loop writes its dict
    as one display: a field left out or misspelt there fails here)."""
    from fdcontrol.loop import cycle as loop

    assert loop.LoopState is LoopState
    assert type(loop_state) is LoopState and list(vars(loop_state)) == list(st.NAMES)
    assert_same(loop_state, LoopState(**vars(loop_state)))


def test_state_of_is_the_dataclass(rng):
    """The loop's per-cycle constructor builds the same frozen LoopState as its __init__."""
    a = synthetic(rng)
    b = st.state_of({n: getattr(a, n) for n in st.NAMES})
    assert type(b) is LoopState
    assert_same(a, b)
    assert list(vars(b)) == list(vars(a)) == list(st.NAMES)  # the same dict, key order included
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.cycle = 0  # type: ignore[misc]
    c = dataclasses.replace(b, cycle=3)
    assert c.cycle == 3 and b.cycle == a.cycle


@pytest.fixture(scope="module")
def openapi_state():
    """A validator of the State schema as the running app documents it (/openapi.json)."""
    pytest.importorskip("fastapi")
    jsonschema = pytest.importorskip("jsonschema")
    from fdcontrol.server.app import create_app
    from fdcontrol.server.settings import Settings

    spec = create_app(Settings()).openapi()  # the document /openapi.json serves; no loop process needed
    schema = {"$ref": "#/components/schemas/State", "components": spec["components"]}
    return jsonschema.Draft202012Validator(schema), spec["components"]["schemas"]["State"]


def service_encodings(s: LoopState):
    """LoopState → the worker's shared memory → LoopState → /state dict, JSON and MessagePack."""
    import json

    import msgpack

    from fdcontrol.server import channel
    from fdcontrol.server.app import state_dict

    ch = channel.Channel()
    try:
        ch.write_state(s, 12.5)
        back, last_cycle_at = ch.read_state()
    finally:
        ch.close(unlink=True)
    assert last_cycle_at == 12.5
    d = {**state_dict(back), "stale": False}
    return back, d, json.loads(json.dumps(d)), msgpack.unpackb(msgpack.packb(d))


def test_every_field_round_trips_through_the_service(rng, loop_state, openapi_state):
    """shm → LoopState → JSON / MessagePack → valid against the app's OpenAPI State → LoopState."""
    validator, schema = openapi_state
    # the service adds "stale" and "lease" (who controls the arm: server/lease.py) to the loop's own fields
    assert set(schema["properties"]) == {f.name for f in st.FIELDS} | {"stale", "lease"}
    for s in [loop_state, *cases(rng)]:
        expect = dataclasses.replace(s, limits_active={k: bool(s.limits_active.get(k)) for k in st.LIMIT_KEYS})
        back, _, from_json, from_msgpack = service_encodings(s)
        assert_same(expect, back)
        for wire in (from_json, from_msgpack):
            validator.validate(wire)  # raises on any field the schema does not describe as sent
            assert wire.pop("stale") is False
            assert_same(expect, st.from_dict(wire))


def test_schema_rejects_what_the_declaration_forbids(rng, openapi_state):
    """The OpenAPI model is not a rubber stamp: wrong choices, types and missing fields fail."""
    import jsonschema

    validator, _ = openapi_state
    good = service_encodings(synthetic(rng))[1]
    validator.validate(good)
    for key, value in (("mode", "dance"), ("watchdog", "maybe"), ("q", ["x"]), ("running", "yes"),
                       ("cycle", 1.5), ("fault", 3)):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate({**good, key: value})
    for f in st.FIELDS:
        with pytest.raises(jsonschema.ValidationError):
            validator.validate({k: v for k, v in good.items() if k != f.name})


NEW_FIELD = """
import dataclasses, json, math, sys
import numpy as np
from fdcontrol.loop import state as st

# one more declared field, before the service is imported: nothing else is edited
extra = dataclasses.make_dataclass("LoopState", [("new_gauge", float, dataclasses.field(
    default=math.nan, metadata=st.scalar("float", "a field added by the test", "m", nullable=True)))],
    bases=(st.LoopState,), frozen=True)
st.LoopState, st.FIELDS = extra, dataclasses.fields(extra)

from fdcontrol.server import channel, schemas
from fdcontrol.server.app import create_app, state_dict
from fdcontrol.server.feed import Snapshot
from fdcontrol.server.routers.ws import Hub
from fdcontrol.server.settings import Settings

z = np.zeros(6)
s = extra(t=1.0, cycle=2, q=z, qd=z, q_ref=z, qd_ref=z, tip_pose=np.eye(4), wrench=z, f_measured=z,
          mode="admittance", running=True, holding=False, watchdog="ok", seq_ack=3, fault=None,
          sigma_min_j=0.5, new_gauge=0.25)
ch = channel.Channel()
try:
    ch.write_state(s, 1.0)
    back = ch.read_state()[0]
    snap = Snapshot(ch.read_packed())  # as the WebSocket senders get it
finally:
    ch.close(unlink=True)
d = {**state_dict(back), "stale": False}
assert d["new_gauge"] == 0.25, d
assert json.loads(Hub().encode(snap, "json"))["new_gauge"] == 0.25
assert schemas.State.model_validate(d).new_gauge == 0.25
spec = create_app(Settings()).openapi()
assert "new_gauge" in spec["components"]["schemas"]["State"]["properties"]
print("reached")
"""


def test_a_new_field_reaches_the_api():
    """Declaring one more LoopState field is all it takes: it reaches shared memory, /state and
    the OpenAPI model (fails as soon as any of them is written by hand again). In a child
    process: the service modules derive their forms at import."""
    pytest.importorskip("fastapi")
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-c", NEW_FIELD], cwd=root, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 0 and "reached" in r.stdout, r.stderr[-2000:]


def test_the_state_slot_holds_the_packed_row(rng, loop_state):
    """The seqlock write copies the texts only when the packer wrote them since they were last copied: after
    every state of a run where the texts change, stay, and come back (and after a state that fails to pack),
    the slot is byte for byte what plain pack writes; a second writer on the same block (a restarted loop
    process, the slot's texts another's) copies the whole row at its first write."""
    pytest.importorskip("fastapi")
    from fdcontrol.server import channel

    lay = channel.LAYOUT
    want = lay.empty()
    lo, hi = channel._TEXTS
    ch = channel.Channel()
    ch2 = None
    try:
        seq = [dataclasses.replace(loop_state, q=rng.normal(size=loop_state.q.size), cycle=i,
                                   fault=(None, None, FAULT, FAULT, "é" * 300, None)[i % 6],
                                   safety_mode=("NORMAL", "NORMAL", None)[(i // 5) % 3]) for i in range(40)]
        seq.insert(17, dataclasses.replace(seq[16], mode="dance"))  # fails to pack: nothing is published
        version = ch.out[0]
        for k, s in enumerate(seq):
            try:
                ch.write_state(s, float(k))
            except ValueError:
                assert k == 17 and ch.out[0] == version  # nothing published: the version as it was
                continue
            lay.pack(s, want, last_cycle_at=float(k))
            assert ch.out[1:].tobytes() == want.tobytes(), f"state {k}"
            assert ch.out[0] == version + 2  # odd while it wrote, even again: one write
            version = ch.out[0]
            assert ch.read_state()[0].fault == lay.unpack(want.copy())[0].fault == (s.fault and s.fault[:256])
        ch2 = channel.Channel(ch.name)
        ch.out[1 + lo:1 + hi] = 7.0  # the slot's texts as another writer left them
        ch2.write_state(seq[-1], 1.0)
        fresh = lay.empty()  # (the new writer's row starts from zeros)
        lay.pack(seq[-1], fresh, last_cycle_at=1.0)
        assert ch2.out[1:].tobytes() == fresh.tobytes()
    finally:
        if ch2 is not None:
            ch2.close()
        ch.close(unlink=True)


def test_liveness_read_matches_the_full_read(loop_state):
    """LoopWorker.problem reads only running and last_cycle_at: the same slots the full read decodes."""
    pytest.importorskip("fastapi")
    from fdcontrol.server import channel

    ch = channel.Channel()
    try:
        for running, count in ((True, 3), (False, 0)):
            ch.write_state(dataclasses.replace(loop_state, running=running, reaction_count=count), 7.25)
            s, last = ch.read_state()
            assert ch.read_running() == (s.running, last) == (running, 7.25)
            assert ch.read_reaction_count() == s.reaction_count == count
        ch.out[0] += 1  # a writer stopped mid-write (odd version): no read returns, each says so
        for read in (ch.read_running, ch.read_reaction_count, ch.read_state, ch.read_packed):
            with pytest.raises(channel.TornRead):
                read()
    finally:
        ch.close(unlink=True)
