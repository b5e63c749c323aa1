"""Seed 004 section 4.3 (Figs. 8–10) on a recorded trajectory: σmin and σmax of the
joint-space matrices of every mapping along the joint path the arm actually took.

Input: an MCAP recording (``fdcontrol serve --record`` or ``POST /recording/start``). The
path is the recorded measured q(t), subsampled to at most ``n`` points; the robot is the
one named in the recording's config. Output in ``<out>/recorded-path/``: the figure, the
results as JSON and a markdown summary, like the other experiments.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from fdcontrol.experiments.batch import evaluate, joint_space, sigmas
from fdcontrol.experiments.common import Context, save, table, write_results
from fdcontrol.experiments.singular_path import CASES
from fdcontrol.model.robot import RobotModel
from fdcontrol.recording import read_recording


def run_recording(path: str | Path, out: str | Path, samples: int | None = None, quick: bool = False,
                  progress: bool = True) -> dict:
    rec = read_recording(path)
    states = rec.states()
    if not states:
        raise ValueError(f"{path} holds no loop states")
    cfg = rec.messages.get("/fdcontrol/config", [(0, {})])[0][1].get("params", {})
    robot = RobotModel.resolve(cfg.get("robot", "ur10"), cfg.get("base"), cfg.get("tip"))
    q_all = rec.array("q")
    t_all = (rec.log_times() - rec.log_times()[0]) * 1e-9
    if q_all.shape[1] != robot.dof:
        raise ValueError(f"recorded q has {q_all.shape[1]} joints, {robot.name} has {robot.dof}")
    ctx = Context(robot, Path(out), 0, quick, samples, progress)
    n = min(len(states), ctx.n(2000, 400))
    idx = np.unique(np.linspace(0, len(states) - 1, n).round().astype(int))
    Q, t = q_all[idx], t_all[idx]
    b = evaluate(robot, Q, progress, "recorded path")
    sj = sigmas(b.J)
    res: dict = {"recording": str(path), "robot": robot.name, "t": t, "q": Q, "sigma_min_J": sj[:, -1],
                 "sigma_min_J_recorded": rec.array("sigma_min_j")[idx], "cases": {}}
    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    axes[0].semilogy(t, sj[:, -1], color="k", label="σmin(J)")
    for name, p, label in CASES:
        sv = sigmas(joint_space(b, name, p))
        res["cases"][label] = {"sigma_min": sv[:, -1], "sigma_max": sv[:, 0]}
        axes[1].semilogy(t, np.maximum(sv[:, -1], 1e-18), label=label)
        axes[2].semilogy(t, sv[:, 0], label=label)
    for ax, title in zip(axes, ("σmin(J) of the recorded path", "σmin (as Fig. 9)", "σmax (as Fig. 10)"),
                         strict=True):
        ax.set_title(title)
        ax.legend(fontsize=7, ncol=4)
        ax.grid(alpha=0.3, which="both")
    axes[2].set_xlabel("time since the first recorded state (s)")
    folder = ctx.folder("recorded-path")
    save(fig, folder / "recorded_singular_path.png")
    rows = [[label, float(np.max(c["sigma_max"])), float(np.min(c["sigma_min"])),
             float(np.mean(c["sigma_min"]))] for label, c in res["cases"].items()]
    write_results(folder, res, f"""# 4.3 Singular values along a recorded path — {robot.name}

Recording {Path(path).name}: {len(states)} states over {t_all[-1]:.2f} s, {len(idx)} evaluated.
σmin(J) along the path: min {sj[:, -1].min():.3g}, max {sj[:, -1].max():.3g}.
Matrices of type (a) (joint space).

{table(["mapping", "max σmax", "min σmin", "mean σmin"], rows)}
""")
    if progress:
        print(f"recorded-path → {folder}")
    return res
