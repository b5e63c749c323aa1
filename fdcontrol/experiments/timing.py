"""Seed 004 section 4.5 / Fig. 13: per-call time of q̈ = M(q) f with f = 1 at random q.

Each call includes the Jacobian (and H for FD) at its q, as a control cycle would; the
same q is used for every method within one evaluation.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import matplotlib.pyplot as plt
import numpy as np

from fdcontrol.experiments.batch import uniform_q
from fdcontrol.experiments.common import Context, save, table, write_results
from fdcontrol.mappings import make_mapping
from fdcontrol.model.robot import RobotModel


def methods(robot: RobotModel) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    f = np.ones(6)
    jt, ji, dls = (make_mapping(n, robot) for n in ("jt", "ji", "dls"))
    sdls = make_mapping("sdls", robot)
    # the paper's FD: a fixed γ (1e3), each algorithm
    fd_c, fd_a = make_mapping("fd", robot, gamma=1e3), make_mapping("fd", robot, gamma=1e3, algorithm="aba")
    fd_q = make_mapping("fd", robot, gamma=1e3, algorithm="qr")
    return {
        "JT": lambda q: jt.joint_space(q) @ f,
        "JI": lambda q: ji.joint_space(q) @ f,
        "DLS": lambda q: dls.joint_space(q) @ f,
        "SDLS": lambda q: sdls.solve(q, f),  # type: ignore[attr-defined]  # all three clamps
        "FD (CRBA+Cholesky)": lambda q: fd_c.virtual.acceleration(q, f),  # type: ignore[attr-defined]
        "FD (ABA)": lambda q: fd_a.virtual.acceleration(q, f, algorithm="aba"),  # type: ignore[attr-defined]
        "FD (QR)": lambda q: fd_q.virtual.acceleration(q, f, algorithm="qr"),  # type: ignore[attr-defined]
    }


def measure(robot: RobotModel, Q: np.ndarray) -> dict[str, np.ndarray]:
    """Per-call seconds of every method, interleaved per q so load drifts hit all alike."""
    ms = methods(robot)
    out = {k: np.empty(len(Q)) for k in ms}
    clock = time.perf_counter
    for i, q in enumerate(Q):
        for k, fn in ms.items():
            t0 = clock()
            fn(q)
            out[k][i] = clock() - t0
    return out


def run(ctx: Context) -> dict:
    n = ctx.n(100_000, 2_000)
    t = measure(ctx.robot, uniform_q(ctx.robot, n, ctx.rng(45)))
    us = {k: v * 1e6 for k, v in t.items()}
    ref = float(np.median(us["DLS"]))
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.boxplot(list(us.values()), showfliers=False)
    ax.set_xticks(range(1, len(us) + 1), list(us), rotation=15)
    ax.set_ylabel("µs per call")
    ax.set_title(f"q̈ = M f, {n} random configurations ({ctx.robot.name})")
    folder = ctx.folder("timing")
    save(fig, folder / "fig13_timing.png")
    res = {"calls": n, "median_us": {k: float(np.median(v)) for k, v in us.items()},
           "quartiles_us": {k: np.percentile(v, [25, 50, 75]) for k, v in us.items()},
           "ratio_to_dls": {k: float(np.median(v)) / ref for k, v in us.items()}}
    rows = [[k, res["median_us"][k], res["ratio_to_dls"][k]] for k in us]
    write_results(folder, res, f"""# 4.5 Timing (Fig. 13) — {ctx.robot.name}

{n} calls per method, f = 1, q ~ U[−π, π], interleaved per configuration. Python 3.11:
Jᵀ/J⁻¹/DLS/SDLS in numpy, FD in pinocchio (C++).

{table(["method", "median µs", "/ DLS"], rows)}
Paper (C++, every method hand-written): FD "a little more" than DLS, about half of SDLS.
Here FD (CRBA + Cholesky) costs less than DLS because pinocchio does the whole FD in
C++ while each numpy call pays ~µs of Python overhead; the ordering FD < SDLS holds.
""")
    return res
