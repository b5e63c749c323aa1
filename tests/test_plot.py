"""``fdcontrol plot``: every PNG is written, and what it plots is what the file holds.

The recording comes from the real loop (simulated UR10, real solver and limits, on its own
thread) with the real Recorder; the plotted data is compared with the file decoded
independently by mcap's indexed reader.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
from mcap.reader import make_reader

from fdcontrol.plot import FIGURES, figures
from fdcontrol.recording import STATE_TOPIC, LoopTap, Recorder, read_recording, robot_info

from .service import ROOT


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    from fdcontrol.server.runtime import Runtime
    from fdcontrol.server.settings import Settings

    rt = Runtime(Settings(realtime=False))
    loop = rt.loop
    rec = Recorder(cycle=lambda: loop.cycle)
    path = tmp_path_factory.mktemp("plot") / "run.mcap"
    rec.start(path, rt.params.model_dump(), robot_info(loop))
    loop.io = LoopTap(rec)
    loop.start()
    t0 = time.monotonic()
    while (t := loop.cycle * loop.period) < 1.5 and time.monotonic() - t0 < 30:  # 1.5 s of the loop's clock
        loop.set_wrench([20 * np.cos(3 * t), 20 * np.sin(3 * t), 5, 0, 0, 1])
        time.sleep(0.02)
    loop.stop()
    status = rec.stop()
    rt.close()
    assert status["dropped"] == 0 and status["states"] >= 1.5 / loop.period  # every cycle recorded
    return path, rt


def independent(path):
    with open(path, "rb") as f:
        msgs = [(m.log_time, json.loads(m.data)) for _, _, m in make_reader(f).iter_messages(topics=[STATE_TOPIC])]
    t = np.array([x[0] for x in msgs])
    return (t - t[0]) * 1e-9, [x[1] for x in msgs]


def line(ax, label):
    found = [ln for ln in ax.get_lines() if ln.get_label() == label]
    assert found, f"no line {label!r} in {[ln.get_label() for ln in ax.get_lines()]}"
    return found[0]


def test_cli_writes_every_png(recording, tmp_path):
    path, _ = recording
    out = tmp_path / "figs"
    p = subprocess.run([sys.executable, "-m", "fdcontrol.cli", "plot", str(path), "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    for name in FIGURES:
        f = out / f"{name}.png"
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.stat().st_size > 10_000, name
    bad = subprocess.run([sys.executable, "-m", "fdcontrol.cli", "plot", str(tmp_path / "missing.mcap")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no such recording" in bad.stderr


def test_plotted_numbers_match_the_file(recording):
    import matplotlib.pyplot as plt

    path, rt = recording
    t, states = independent(path)
    figs = figures(read_recording(path))
    try:
        # wrench: f_c and f_measured per axis, against time
        ax_f, ax_t = figs["wrench"].axes[:2]
        for i, a in enumerate("xyz"):
            ln = line(ax_f, f"f_c {a}")
            assert np.allclose(ln.get_xdata(), t) and np.allclose(ln.get_ydata(), [s["wrench"][i] for s in states])
            assert np.allclose(line(ax_t, f"τ_c {a}").get_ydata(), [s["wrench"][3 + i] for s in states])
        # the push reached f_c (20 N turning in x/y, 1 N·m about z)
        assert np.max(np.abs(line(ax_f, "f_c x").get_ydata())) > 15
        # joints: references and measured values, limits from the URDF (independently, via the robot model)
        lim = rt.robot.limits
        vlim = rt.params.velocity_scale * lim.velocity
        axes_v = [a for a in figs["joint_velocities"].axes if a.get_visible()]
        axes_q = [a for a in figs["joint_positions"].axes if a.get_visible()]
        assert len(axes_v) == len(axes_q) == rt.robot.dof
        for j in range(rt.robot.dof):
            assert np.allclose(line(axes_v[j], "q̇_ref sent").get_ydata(), [s["qd_ref"][j] for s in states])
            assert np.allclose(line(axes_q[j], "q measured").get_ydata(), [s["q"][j] for s in states])
            hl = [ln.get_ydata()[0] for ln in axes_v[j].get_lines() if ln.get_linestyle() == ":"]
            assert np.allclose(sorted(hl), [-vlim[j], vlim[j]])
            hq = [ln.get_ydata()[0] for ln in axes_q[j].get_lines() if ln.get_linestyle() == ":"]
            assert np.allclose(sorted(hq), [lim.lower[j], lim.upper[j]])
            assert rt.robot.joint_names[j] in axes_q[j].get_ylabel()
        # tip path in 3-D
        xs, ys, zs = figs["tip_path"].axes[0].get_lines()[0].get_data_3d()
        p = np.array([s["tip_pose"] for s in states])[:, :3, 3]
        assert np.allclose(xs, p[:, 0]) and np.allclose(ys, p[:, 1]) and np.allclose(zs, p[:, 2])
        ax = figs["tip_path"].axes[0]  # equal axes: one metre is as long along x, y and z
        spans = [np.ptp(ax.get_xlim()), np.ptp(ax.get_ylim()), np.ptp(ax.get_zlim())]
        assert np.allclose(spans, spans[0]) and spans[0] >= np.ptp(p, axis=0).max() - 1e-12
        # singularity: σmin(J)
        assert np.allclose(line(figs["singularity"].axes[0], "σmin(J)").get_ydata(),
                           [s["sigma_min_j"] for s in states])
        # timing histogram: every timed cycle counted once
        timed = [s for s in states if s["period_error_s"] is not None]
        bars = figs["timing"].axes[0].patches
        assert sum(b.get_height() for b in bars) == len(timed) >= len(states) - 2
    finally:
        for f in figs.values():
            plt.close(f)


def test_experiments_take_a_recording(recording, tmp_path):
    """``fdcontrol experiments --recording``: σ of every mapping along the recorded path; its σmin(J)
    equals the one the loop computed at run time (every 10th cycle, cycle % 10 == 1)."""
    path, _ = recording
    p = subprocess.run([sys.executable, "-m", "fdcontrol.cli", "experiments", "--recording", str(path),
                        "--out", str(tmp_path), "--samples", "100000", "--no-progress"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    folder = tmp_path / "recorded-path"
    assert (folder / "recorded_singular_path.png").stat().st_size > 10_000
    res = json.loads((folder / "results.json").read_text())
    _, states = independent(path)
    assert len(res["sigma_min_J"]) == len(states)
    # the cycles that computed σmin; not the state stop() re-publishes with the arm's last q (running: false)
    fresh = [i for i, s in enumerate(states) if s["cycle"] % 10 == 1 and s["running"]]
    assert len(fresh) > 20
    assert np.allclose([res["sigma_min_J"][i] for i in fresh], [states[i]["sigma_min_j"] for i in fresh],
                       rtol=1e-9)
    assert set(res["cases"]) >= {"J⁻¹", "Jᵀ", "FD γ=1e3", "DLS α=0.1"}


def test_recordings_with_the_old_field_names_plot_the_same(recording):
    """Earlier versions recorded ``f_c`` and ``tip_position``; they plot as ``wrench`` and ``tip_pose``."""
    import copy

    import matplotlib.pyplot as plt

    path, _ = recording
    new = read_recording(path)
    old = copy.deepcopy(new)
    for _, m in old.messages[STATE_TOPIC]:
        m["f_c"] = m.pop("wrench")
        m["tip_position"] = [row[3] for row in m.pop("tip_pose")[:3]]
    assert np.allclose(old.array("wrench"), new.array("wrench"))
    assert np.allclose(old.array("tip_pose")[:, :3, 3], new.array("tip_pose")[:, :3, 3])
    figs = figures(old)
    try:
        xs, ys, zs = figs["tip_path"].axes[0].get_lines()[0].get_data_3d()
        p = new.array("tip_pose")[:, :3, 3]
        assert np.allclose(xs, p[:, 0]) and np.allclose(ys, p[:, 1]) and np.allclose(zs, p[:, 2])
        assert np.allclose(line(figs["wrench"].axes[0], "f_c x").get_ydata(), new.array("wrench")[:, 0])
    finally:
        for f in figs.values():
            plt.close(f)
