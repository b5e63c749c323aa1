"""``fdcontrol plot FILE.mcap``: the standard figures of a recording, as PNG (matplotlib Agg).

Figures (x axis: seconds since the first recorded state):

* ``tip_path.png`` — tip position in 3-D (m, base frame), start and end marked;
* ``wrench.png`` — f_c given to the solver and f_measured (force N, torque N·m);
* ``joint_positions.png`` — q per joint against its URDF limits (rad);
* ``joint_velocities.png`` — q̇_ref and measured q̇ per joint against ± the enforced limit (rad/s);
* ``singularity.png`` — σmin(J) and κ(H) (FD virtual inertia), log scale;
* ``timing.png`` — histograms of |period error| and compute time (µs) with the period marked.

Cycles where a limit was active are shaded in the joint figures.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fdcontrol.extras import missing

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
except ImportError as exc:
    raise missing("experiments", "fdcontrol plot", exc) from exc

from fdcontrol.recording import Recording, read_recording

FIGURES = ("tip_path", "wrench", "joint_positions", "joint_velocities", "singularity", "timing")
AXES = ("x", "y", "z")


def _time(rec: Recording) -> np.ndarray:
    t = rec.log_times()
    return (t - t[0]) * 1e-9


def _shade(ax: plt.Axes, t: np.ndarray, mask: np.ndarray, label: str) -> None:
    if mask.any():
        ax.fill_between(t, 0, 1, where=mask, transform=ax.get_xaxis_transform(), color="#e8590c",
                        alpha=0.15, step="mid", label=label)


def _joint_grid(n: int, title: str) -> tuple[Figure, np.ndarray]:
    cols = 2 if n > 3 else 1
    rows = -(-n // cols)
    fig, axs = plt.subplots(rows, cols, figsize=(11, 2.2 * rows + 0.6), sharex=True, squeeze=False)
    fig.suptitle(title)
    for ax in axs.ravel()[n:]:
        ax.set_visible(False)
    return fig, axs.ravel()


def tip_path(rec: Recording) -> Figure:
    p = rec.array("tip_pose")[:, :3, 3]
    fig = plt.figure(figsize=(7, 6))
    ax = fig.add_subplot(projection="3d")
    ax.plot(p[:, 0], p[:, 1], p[:, 2], color="#1c7ed6", label="tip path")
    ax.scatter(*p[0], color="#2f9e44", label="start")
    ax.scatter(*p[-1], color="#c92a2a", label="end")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_zlabel("z (m)")
    span = np.ptp(p, axis=0)
    # equal axes: one cube around the path, so 9 mm of drift looks like 9 mm, not like a curve
    centre, half = (p.max(axis=0) + p.min(axis=0)) / 2, max(float(span.max()) / 2, 1e-3)
    ax.set_xlim(centre[0] - half, centre[0] + half)
    ax.set_ylim(centre[1] - half, centre[1] + half)
    ax.set_zlim(centre[2] - half, centre[2] + half)
    ax.set_box_aspect((1, 1, 1))
    ax.set_title(f"Tip path, base frame — travel {np.sum(np.linalg.norm(np.diff(p, axis=0), axis=1)):.3f} m, "
                 f"extent {span[0]:.3f} × {span[1]:.3f} × {span[2]:.3f} m")
    ax.legend(loc="upper left")
    return fig


def wrench(rec: Recording) -> Figure:
    t, fc, fm = _time(rec), rec.array("wrench"), rec.array("f_measured")
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    colors = ("#c92a2a", "#2f9e44", "#1c7ed6")
    for i, c in enumerate(colors):
        a1.plot(t, fc[:, i], color=c, label=f"f_c {AXES[i]}")
        a1.plot(t, fm[:, i], color=c, ls="--", lw=1, label=f"f_measured {AXES[i]}")
        a2.plot(t, fc[:, 3 + i], color=c, label=f"τ_c {AXES[i]}")
        a2.plot(t, fm[:, 3 + i], color=c, ls="--", lw=1, label=f"τ_measured {AXES[i]}")
    a1.set_ylabel("force (N)")
    a2.set_ylabel("torque (N·m)")
    a2.set_xlabel("time (s)")
    a1.set_title("Wrench, base frame: f_c given to the solver (solid), measured (dashed)")
    for a in (a1, a2):
        a.grid(alpha=0.3)
        a.legend(ncol=3, fontsize=8, loc="upper right")
    return fig


def _names(rec: Recording, n: int) -> list[str]:
    names = rec.robot().get("joint_names") or []
    return names if len(names) == n else [f"joint {i + 1}" for i in range(n)]


def joint_positions(rec: Recording) -> Figure:
    t, q, qr = _time(rec), rec.array("q"), rec.array("q_ref")
    robot, n = rec.robot(), q.shape[1]
    names = _names(rec, n)
    fig, axs = _joint_grid(n, "Joint positions (rad) against their limits; shaded: position limit active")
    active = np.array([s["limits_active"].get("position", False) for s in rec.states()])
    for i, ax in enumerate(axs[:n]):
        ax.plot(t, q[:, i], color="#1c7ed6", label="q measured")
        ax.plot(t, qr[:, i], color="#e8590c", ls="--", lw=1, label="q_ref")
        if "lower" in robot:
            lo, up = robot["lower"][i], robot["upper"][i]
            ax.axhline(lo, color="#c92a2a", ls=":", label="limit")
            ax.axhline(up, color="#c92a2a", ls=":")
            viol = (q[:, i] < lo) | (q[:, i] > up)
            if viol.any():
                ax.plot(t[viol], q[viol, i], "x", color="#c92a2a", label="outside the limit")
            pad = 0.1 * max(1e-3, np.ptp(q[:, i]))
            ax.set_ylim(min(q[:, i].min() - pad, max(lo, q[:, i].min() - 1.0)),
                        max(q[:, i].max() + pad, min(up, q[:, i].max() + 1.0)))
        _shade(ax, t, active, "position limit active")
        ax.set_ylabel(f"{names[i]} (rad)")
        ax.grid(alpha=0.3)
    axs[0].legend(fontsize=8, loc="upper right")
    for ax in axs[max(0, n - 2):n]:
        ax.set_xlabel("time (s)")
    return fig


def joint_velocities(rec: Recording) -> Figure:
    t, qd, qdr = _time(rec), rec.array("qd"), rec.array("qd_ref")
    robot, n = rec.robot(), qd.shape[1]
    names = _names(rec, n)
    fig, axs = _joint_grid(n, "Joint velocities (rad/s) against ± the enforced limit; "
                              "shaded: velocity or acceleration limit active")
    states = rec.states()
    active = np.array([s["limits_active"].get("velocity", False) or s["limits_active"].get("acceleration", False)
                       for s in states])
    vlim = robot.get("velocity_limit")
    for i, ax in enumerate(axs[:n]):
        ax.plot(t, qdr[:, i], color="#e8590c", label="q̇_ref sent")
        ax.plot(t, qd[:, i], color="#1c7ed6", lw=1, label="q̇ measured")
        if vlim:
            ax.axhline(vlim[i], color="#c92a2a", ls=":", label="± limit")
            ax.axhline(-vlim[i], color="#c92a2a", ls=":")
        _shade(ax, t, active, "limit active")
        ax.set_ylabel(f"{names[i]} (rad/s)")
        ax.grid(alpha=0.3)
    axs[0].legend(fontsize=8, loc="upper right")
    for ax in axs[max(0, n - 2):n]:
        ax.set_xlabel("time (s)")
    return fig


def singularity(rec: Recording) -> Figure:
    t, s, k = _time(rec), rec.array("sigma_min_j"), rec.array("kappa_h")
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(11, 5.5), sharex=True)
    a1.semilogy(t, s, color="#1c7ed6", label="σmin(J)")
    a1.set_ylabel("σmin(J) (m/rad or 1)")
    a1.set_title("Distance to singularity: σmin(J) (small: near a singular pose); κ(H) of the FD virtual inertia")
    a2.semilogy(t, k, color="#ae3ec9", label="κ(H)")
    a2.set_ylabel("κ(H)")
    a2.set_xlabel("time (s)")
    for a in (a1, a2):
        a.grid(alpha=0.3, which="both")
        a.legend(loc="upper right")
    return fig


def timing(rec: Recording) -> Figure:
    err, comp = np.abs(rec.array("period_error_s")) * 1e6, rec.array("compute_s") * 1e6
    err, comp = err[np.isfinite(err)], comp[np.isfinite(comp)]
    period = 1e6 / rec.robot().get("rate", 500.0)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for ax, x, what, color in ((a1, err, "|period error|", "#1c7ed6"), (a2, comp, "compute time", "#2f9e44")):
        if len(x):
            ax.hist(x, bins=60, color=color, label=f"{what}: p50 {np.percentile(x, 50):.0f}, "
                                                   f"p99 {np.percentile(x, 99):.0f}, max {x.max():.0f} µs")
        ax.axvline(period, color="#c92a2a", ls=":", label=f"period {period:.0f} µs")
        ax.set_yscale("log")
        ax.set_xlabel(f"{what} (µs)")
        ax.set_ylabel("cycles")
        ax.legend(fontsize=8)
    fig.suptitle(f"Loop timing over {len(err)} cycles")
    return fig


BUILDERS = {"tip_path": tip_path, "wrench": wrench, "joint_positions": joint_positions,
            "joint_velocities": joint_velocities, "singularity": singularity, "timing": timing}


def figures(rec: Recording) -> dict[str, Figure]:
    if not rec.states():
        raise ValueError(f"{rec.path} holds no loop states")
    return {name: BUILDERS[name](rec) for name in FIGURES}


def plot_file(path: str | Path, out: str | Path | None = None) -> list[Path]:
    """Write every figure of ``path`` as PNG into ``out`` (default: ``<file stem>/`` next to it)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"no such recording: {p}")
    rec = read_recording(p)
    d = Path(out) if out is not None else p.with_suffix("")
    d.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in figures(rec).items():
        fig.tight_layout()
        target = d / f"{name}.png"
        fig.savefig(target, dpi=100)
        plt.close(fig)
        written.append(target)
    return written


__all__ = ["FIGURES", "figures", "plot_file"]
