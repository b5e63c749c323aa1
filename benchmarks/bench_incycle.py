"""Why a part of the default cycle costs more inside the cycle than alone: each part timed in five settings.

    PYTHONPATH=. python benchmarks/bench_incycle.py [--robot ur10] [--calls 3000]

The default loop (:func:`fdcontrol.loop.build_loop`, kinematic simulator, a wrench held, as
``benchmarks/bench_cycle.py`` runs it) is stepped with a clock around each part's call; then each part is
called again with the arguments it last had in the cycle (p50, µs):

* ``in cycle`` — inside the running cycle;
* ``alone`` — back to back, nothing in between (its code, branch history and data stay warm);
* ``32 KiB sweep`` / ``256 KiB sweep`` / ``8192 KiB sweep`` — after writing an array of that size between calls:
  about the first-level data cache, the second-level cache, and more than the last-level cache (the caches then
  hold none of the part's data, and the last one none of its code either);
* ``after a cycle`` — after one step of a second loop of the same kind (its own objects: only the code is
  shared) between calls;
* ``after pinocchio`` / ``after python`` / ``after numpy`` — after a few calls of one kind between calls: the
  kinematics and dynamics of another arm; dict, JSON and string work; a dozen calls on small arrays.

A part as slow after another loop's cycle as in its own cycle loses that time to what runs around it, not to
its own inputs; the sweeps of growing size say how much of it the data caches explain, the per-kind columns
(code, little data) how much the other code does. Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cycle import hold_wrench, make_loop

from fdcontrol import RobotModel
from fdcontrol.loop.state import to_dict

#: the data written between two calls in the sweep columns (KiB): about L1d, L2, and past the last-level cache
SWEEPS_KIB = (32, 256, 8192)
#: the parts timed: (label, attribute path on the loop, method name)
PARTS = (("driver.read", "driver", "read"), ("driver.send", "driver", "send"),
         ("conf.update", "config", "update"), ("gamma schedule", "solver.mapping", "gamma_at"),
         ("limits.apply", "limits", "apply"), ("loop._publish", "", "_publish"))


def resolve(loop: Any, path: str) -> Any:
    obj = loop
    for name in filter(None, path.split(".")):
        obj = getattr(obj, name)
    return obj


def neighbours(robot: RobotModel) -> dict[str, Callable[[], Any]]:
    """What runs between two calls, by kind (their own objects: nothing of the timed part's data)."""
    other = RobotModel.load("panda" if robot.name != "panda" else "ur10")
    m = other.model.copy()
    d = m.createData()
    q = pin.neutral(m) + 0.1
    state = make_loop(robot).state
    a, b, M = np.arange(6.0), np.ones(6), np.eye(6)

    def pinocchio() -> None:
        pin.crba(m, d, q, pin.Convention.WORLD)
        pin.cholesky.decompose(m, d)
        pin.rnea(m, d, q, q, q)
        pin.getFrameJacobian(m, d, other.tip_id, pin.LOCAL_WORLD_ALIGNED)

    def python() -> None:
        json.dumps(to_dict(state))
        sorted({i: str(i) for i in range(60)}.items())

    def numpy() -> None:
        x = np.clip(a * 2.0 - b, -1, 1)
        y = np.maximum(x, 0) + np.sqrt(np.abs(x))
        z = M @ y
        np.linalg.norm(z)
        np.where(z > 0, z, 0.0).sum()
        np.concatenate((x, y)).tolist()
        np.linalg.svd(M + 0.1)

    return {"after pinocchio": pinocchio, "after python": python, "after numpy": numpy}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--robot", default="ur10")
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    n = min(max(args.calls, 300), 50_000)
    robot = RobotModel.load(args.robot)
    loop = make_loop(robot)
    hold_wrench(loop)
    for _ in range(2000):  # the arm stretched toward the singular pose, as bench_cycle's loop gets
        loop.step(now=0.0)
    clock = time.perf_counter_ns
    inside: dict[str, list[int]] = {label: [] for label, _, _ in PARTS}
    last: dict[str, tuple[tuple, dict]] = {}
    plain: dict[str, Callable[..., Any]] = {}
    for label, path, name in PARTS:
        obj = resolve(loop, path)
        fn = plain[label] = getattr(obj, name)

        def timed(*a: Any, fn: Callable[..., Any] = fn, label: str = label, **k: Any) -> Any:
            t = clock()
            r = fn(*a, **k)
            inside[label].append(clock() - t)
            last[label] = (a, k)
            return r

        setattr(obj, name, timed)
    for _ in range(n):
        loop.step(now=0.0)
    second = make_loop(robot)
    hold_wrench(second)
    for _ in range(2000):
        second.step(now=0.0)
    sweeps = {f"{kib} KiB sweep": np.zeros(kib * 128) for kib in SWEEPS_KIB}  # float64: 128 per KiB
    between: dict[str, Callable[[], Any]] = {
        "alone": lambda: None, **{k: (lambda a=a: a.__iadd__(1.0)) for k, a in sweeps.items()},
        "after a cycle": lambda: second.step(now=0.0), **neighbours(robot)}
    table: dict[str, dict[str, float]] = {}
    for label, _, _ in PARTS:
        a, k = last[label]
        fn = plain[label]
        if label == "gamma schedule":  # it takes the Configuration's SVD: a fresh one each call, as in the cycle
            def call(fn: Callable[..., Any] = fn, a: tuple = a, k: dict = k, conf: Any = loop.config) -> None:
                conf._svd = None
                fn(*a, **k)
        else:
            def call(fn: Callable[..., Any] = fn, a: tuple = a, k: dict = k) -> None:
                fn(*a, **k)
        row = {"in cycle": float(np.percentile(inside[label], 50)) / 1e3}
        for name, other in between.items():
            for _ in range(100):
                other()
                call()
            t: list[int] = []
            for _ in range(n // 3):
                other()
                t0 = clock()
                call()
                t.append(clock() - t0)
            row[name] = float(np.percentile(t, 50)) / 1e3
        table[label] = row
    print("PYTHONPATH=. python benchmarks/bench_incycle.py " + " ".join(sys.argv[1:]))
    print(f"{robot.name}, 1-min load average {os.getloadavg()[0]:.2f}; p50 µs per call")
    cols = list(next(iter(table.values())))
    print(f"{'part':>16} " + " ".join(f"{c:>{max(len(c), 8)}}" for c in cols))
    for label, row in table.items():
        print(f"{label:>16} " + " ".join(f"{row[c]:{max(len(c), 8)}.1f}" for c in cols))


if __name__ == "__main__":
    main()
