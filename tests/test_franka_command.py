"""The franka driver's command compiled (fdcontrol.drivers.franka_compiled) is its Python definition's to the
last bit: the robot's fill of missed ticks, the rate limiting (acceleration, jerk, velocity limits crossed, NaN
held), the position interface's integrated positions — on random commands, both interfaces, with and without
rate limiting, no robot needed (the stand-in library of tests/franka_inject.py)."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import numpy as np
import pytest

from fdcontrol import RobotModel
from fdcontrol.drivers import franka
from tests.franka_inject import StandInFranka

pytest.importorskip("numba")


@pytest.fixture(scope="module")
def fr3() -> RobotModel:
    return RobotModel.load("fr3")


def _floats(x):
    return None if x is None else np.asarray(x, dtype=float).tolist()


@pytest.mark.parametrize("interface", ["velocity", "position"])
@pytest.mark.parametrize("rate_limit", [True, False])
def test_the_compiled_command_is_the_python_one(fr3, monkeypatch, interface, rate_limit):
    assert franka._next_command is not None  # the compiled twin is what the driver runs here
    compiled = franka._next_command
    drivers = {name: StandInFranka(fr3, interface=interface, rate_limit=rate_limit) for name in ("py", "nb")}
    rng = random.Random(7)
    t, n, limited = 0.0, 0, 0
    try:
        for k in range(4000):
            if k % 400 == 0:  # a new history: the robot's last two ticks, the positions, the time of the last command
                sent = ([rng.uniform(-2, 2) for _ in range(7)], [rng.uniform(-2, 2) for _ in range(7)])
                q_c = None if rng.random() < 0.3 else [rng.uniform(-1, 1) for _ in range(7)]
                t_cmd = None if rng.random() < 0.2 else t
                for d in drivers.values():
                    d._sent, d._t_cmd = (list(sent[0]), list(sent[1])), t_cmd
                    d._q_c = None if q_c is None else list(q_c)
            t += 1e-3 * (1 if rng.random() < 0.9 else rng.choice([2, 3, 5, 200]))  # missed ticks, a lost robot
            qd = np.array([rng.uniform(-2.5, 2.5) if rng.random() < 0.97 else rng.choice([math.nan, 0.0, 1e9])
                           for _ in range(7)])
            if rng.random() < 0.5:  # within the limits: the guard leaves the command as it is
                qd = np.asarray(drivers["py"]._sent[1], dtype=float) + np.array([rng.gauss(0, 1e-3) for _ in range(7)])
            qd_ref = None if rng.random() < 0.02 else qd
            q_ref = None if rng.random() < 0.05 else np.array([rng.uniform(-1, 1) for _ in range(7)])
            q_d = [rng.uniform(-1, 1) for _ in range(7)]
            state = SimpleNamespace(time=SimpleNamespace(to_sec=lambda t=t: t), q_d=q_d)
            finished = rng.random() < 0.01
            out = {}
            for name, d in drivers.items():
                monkeypatch.setattr(franka, "_next_command", None if name == "py" else compiled)
                d._state = state
                cmd = d._command(q_ref, qd_ref, finished=finished)
                value = cmd.q if interface == "position" else cmd.dq
                assert all(type(x) is float for x in value)  # libfranka's commands take floats
                out[name] = (value, cmd.motion_finished, _floats(d._sent), _floats(d._q_c), d._t_cmd)
            assert repr(out["nb"]) == repr(out["py"]), k  # repr: the same bits (NaN included)
            n += 1
            limited += out["py"][2][1] != _floats(qd_ref if qd_ref is not None else np.zeros(7))
    finally:
        for d in drivers.values():
            d.close()
    assert n == 4000 and (limited > 500 or not rate_limit)  # the guard acted on many of them


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("interface", ["velocity", "position"])
@pytest.mark.parametrize("bad", [np.full(6, 0.05), np.full(8, 0.05), np.zeros((1, 7)), [0.05] * 6])
def test_a_reference_without_seven_joints_is_refused_and_nothing_changes(fr3, monkeypatch, compiled, interface, bad):
    """A joint-velocity (or position) reference of another shape is a clear ValueError before any command is
    built — the compiled form never reads or sends an entry that was not given — and the next valid commands
    are those of a driver that never saw it."""
    if not compiled:
        monkeypatch.setattr(franka, "_next_command", None)
    drivers = [StandInFranka(fr3, interface=interface, rate_limit=True) for _ in range(2)]
    try:
        for d in drivers:
            d._sent = ([0.0] * 7, [0.0] * 7)
            d._q_c = [0.1] * 7 if interface == "position" else None
            d._state = SimpleNamespace(time=SimpleNamespace(to_sec=lambda: 1.0), q_d=[0.1] * 7)
        with pytest.raises(ValueError, match="7 joints"):
            drivers[0]._command(None, bad)
        with pytest.raises(ValueError, match="7 joints"):
            drivers[0]._command(bad, np.zeros(7))
        for _ in range(5):
            a, b = (d._command(None, np.zeros(7)) for d in drivers)
            assert (a.dq if interface == "velocity" else a.q) == (b.dq if interface == "velocity" else b.q)
    finally:
        for d in drivers:
            d.close()



@pytest.mark.parametrize("interface", ["velocity", "position"])
def test_the_command_takes_any_float_vector_as_its_float64_copy(fr3, interface):
    """The compiled command reads the loop's float64 vector as it is: a strided or a read-only one, float64 of the
    other byte order, a list, float32 give the command a plain contiguous float64 copy of the same values gives —
    in both interfaces, after missed ticks too."""
    rng = np.random.default_rng(11)
    a, b = rng.uniform(-0.5, 0.5, size=7), rng.uniform(-0.5, 0.5, size=7)
    variants = {
        "plain": lambda v: np.array(v, dtype=float),
        "strided": lambda v: np.repeat(np.array(v, dtype=float), 2)[::2],
        "read-only": lambda v: np.frombuffer(np.array(v, dtype=float).tobytes()),
        "big-endian": lambda v: np.array(v, dtype=">f8"),
        "list": lambda v: np.array(v, dtype=float).tolist(),
        "float32": lambda v: np.array(v, dtype=np.float32),
        "plain of float32": lambda v: np.array(v, dtype=np.float32).astype(float),
    }
    drivers = {name: StandInFranka(fr3, interface=interface, rate_limit=True) for name in variants}
    try:
        for d in drivers.values():
            d._sent, d._t_cmd, d._q_c = ([0.0] * 7, [0.0] * 7), None, None
        for k in range(40):
            t = 1e-3 * (k + (3 if k > 20 else 0))  # three missed ticks at k = 21
            qd = a * math.cos(0.1 * k) + b * math.sin(0.1 * k)
            state = SimpleNamespace(time=SimpleNamespace(to_sec=lambda t=t: t), q_d=[0.1] * 7)
            out = {}
            for name, d in drivers.items():
                d._state = state
                cmd = d._command(None, variants[name](qd))
                out[name] = repr(cmd.q if interface == "position" else cmd.dq)
            for name in ("strided", "read-only", "big-endian", "list"):
                assert out[name] == out["plain"], (k, name)
            assert out["float32"] == out["plain of float32"], k
    finally:
        for d in drivers.values():
            d.close()
