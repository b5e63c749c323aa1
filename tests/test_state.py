"""The state declaration: every field round-trips through shared memory, dict, JSON,
MessagePack and the pydantic model; and the hand-kept forms of today have not drifted."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from fdcontrol import state as st
from fdcontrol.state import LoopState, SharedLayout

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
    from fdcontrol.loop import ControlLoop
    from fdcontrol.solvers import make_solver

    q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
    loop = ControlLoop(ur10, SimulatedRobot(ur10, q0=q0), make_solver(make_mapping("fd", ur10)))
    for i in range(12):
        loop.set_wrench([30.0, 0, 0, 0, 0, 0])
        s = loop.step(now=loop._command.t + 1e-3 * i)
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


# ---------------------------------------------------------------------- drift against today's forms
def test_loop_state_in_loop_py_matches_the_declaration():
    """fdcontrol/loop.py still declares its own LoopState; it must match field for field."""
    from fdcontrol import loop

    if loop.LoopState is LoopState:
        return  # switched over: nothing can drift
    ours = [(f.name, f.default if f.default is not dataclasses.MISSING else None) for f in st.FIELDS]
    theirs = [(f.name, f.default if f.default is not dataclasses.MISSING else None)
              for f in dataclasses.fields(loop.LoopState)]
    assert [n for n, _ in theirs] == [n for n, _ in ours]
    for (n, a), (_, b) in zip(ours, theirs, strict=True):
        assert (a is None and b is None) or a == b or (math.isnan(a) and math.isnan(b)), n
    assert loop.LoopState.__dataclass_params__.frozen


def test_service_forms_match_the_declaration(loop_state):
    """server/app.py's state_dict, server/schemas.py's State and the worker's hand-written
    shared-memory layout agree with the declaration (until they are derived from it)."""
    pytest.importorskip("fastapi")
    from server import schemas, worker
    from server.app import state_dict

    assert state_dict(loop_state) == st.to_dict(loop_state)
    assert set(schemas.State.model_fields) - {"stale"} == {f.name for f in st.FIELDS}  # stale: set by the API
    assert tuple(worker.MODES) == tuple(st.LoopState.__dataclass_fields__["mode"].metadata["choices"])
    assert tuple(worker.LIMIT_KEYS) == st.LIMIT_KEYS
    ch = worker.Channel()
    try:
        ch.write_state(loop_state, 1.0)
        assert_same(loop_state, ch.read_state()[0])
    finally:
        ch.close(unlink=True)
