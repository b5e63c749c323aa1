"""Instructions per call of the full FD cycle and its parts, counted by valgrind (callgrind).

    PYTHONPATH=. python benchmarks/bench_instructions.py [--calls 1000] [--items core loop limits]

Unlike a clock, the count does not depend on the machine's load: each item runs in two
processes under ``valgrind --tool=callgrind``, one making ``--calls`` calls after a warm-up and
one making none, and the difference divided by ``--calls`` is printed. One BLAS thread and a
fixed hash seed make it repeatable to ~0.2 % (a first, discarded run compiles the numba kernels
for valgrind's CPU model). Needs valgrind (Debian package); ~1 min per item.
Items: ``core`` (the lean FD core of bench_cycle.py), ``loop`` (``ControlLoop.step``), ``limits``
(``SafetyLimits.apply``), ``solver``, ``config``, ``sim_driver``, ``publish``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
ITEMS = ("core", "loop", "limits", "solver", "config", "sim_driver", "publish")


def call(item: str):
    """The function one call of `item` runs (built like bench_cycle.py's items)."""
    from bench_cycle import DT, WRENCH, LeanCore, hold_wrench, make_loop

    from fdcontrol import RobotModel
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.limits.safety import SafetyLimits
    from fdcontrol.model.robot import HOME

    robot = RobotModel.load("ur10")
    loop = make_loop(robot)
    hold_wrench(loop)
    q, qd = np.array(HOME[robot.name]), np.full(robot.dof, 0.1)
    conf, solver = loop.config, loop.solver
    qc, f = conf.update(q).q, WRENCH.copy()
    if item == "core":
        core = LeanCore(solver)  # type: ignore[arg-type]
        return lambda: core(q, qd, WRENCH)
    if item == "limits":
        lim, J, prev = SafetyLimits.from_robot(robot), robot.jacobian(q), np.zeros(robot.dof)
        return lambda: lim.apply(q, 3 * qd, prev, J, DT)
    if item == "sim_driver":
        drv = SimulatedRobot(robot, dt=DT, q0=q)
        return lambda: drv.send(drv.read().q, qd)
    return {"loop": lambda: loop.step(now=0.0), "config": lambda: conf.update(q),
            "solver": lambda: solver.step(qc, qd, f, DT, config=conf),
            "publish": lambda: loop._publish(0.0, q, qd, q, qd, conf.pose, f, f, "ok", 0.1, False, 1, 0.2)}[item]


def run_calls(item: str, n: int) -> None:
    fn = call(item)
    for _ in range(200):
        fn()
    for _ in range(n):
        fn()


def count(item: str, n: int) -> int:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
           "--child", item, str(n)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    m = re.search(r"Collected : (\d+)", out.stderr)
    if m is None:
        raise RuntimeError(f"valgrind gave no count for {item}: {out.stderr[-500:]}")
    return int(m.group(1))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        run_calls(sys.argv[2], int(sys.argv[3]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--items", nargs="+", choices=ITEMS, default=["core", "loop", "limits"])
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian: apt-get install valgrind)")
    n = max(1, min(args.calls, 100_000))
    # numba caches per CPU model, and valgrind shows the child another CPU: one discarded child
    # run fills that cache, so no counted run includes the compiler
    count(args.items[0], 0)
    per = {}
    for item in args.items:
        base = count(item, 0)
        per[item] = (count(item, n) - base) / n
    print(f"instructions per call (UR10, {n} calls, callgrind)")
    for item, k in per.items():
        ratio = f"{k / per['core']:6.1f}× core" if "core" in per else ""
        print(f"{item:>11} {k / 1e3:9.1f} k  {ratio}")


if __name__ == "__main__":
    main()
