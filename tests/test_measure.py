"""scripts/measure.py: the README's measured section is what the committed JSON renders to, and a real
(tiny) run of the three benchmarks yields sane numbers that the rendered tables hold.

The tables are read back here with an independent parser and every number, count and goal verdict
is compared with the JSON (goals recomputed here from their definitions in issue 14).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "measure.py"
BEGIN, END = "<!-- measured:begin -->", "<!-- measured:end -->"
TINY = ["--cycles", "50", "--rounds", "2", "--robots", "ur10", "--seconds", "1", "--no-realtime",
        "--samples", "20", "--watchers", "0", "--ws-hogs", "0", "--only", "cycle", "loop", "ws"]
PART_COLUMNS = {"Configuration update": "config", "solver": "solver", "limits": "limits",
                "simulator read + send": "sim_driver", "publish": "publish", "new wrench": "set_wrench"}


def measure(*args: str | Path, timeout: float = 150) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def section(readme: str) -> str:
    i, j = readme.index(BEGIN), readme.index(END)
    return readme[i + len(BEGIN):j]


def tables(text: str) -> list[dict[str, list[str]]]:
    """Each markdown table as {first cell: cells}, the header row under the key '__head__'."""
    out, cur = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            cur = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cur is None:
            cur = {"__head__": cells}
            out.append(cur)
        elif not set(line) <= set("|-"):
            cur[cells[0]] = cells
    return out


def close(cell: str, *values: float) -> None:
    """The numbers in ``cell`` are ``values`` rounded to the digits shown."""
    tokens = re.findall(r"-?\d+(?:\.\d+)?", cell)
    assert len(tokens) == len(values), (cell, values)
    for tok, v in zip(tokens, values, strict=True):
        digits = len(tok.split(".")[1]) if "." in tok else 0
        assert abs(float(tok) - v) <= 0.5 * 10 ** -digits + 1e-9 * abs(v), (cell, values)


def verdict(ok: bool) -> str:
    return "met" if ok else "not met"


def flat(text: str) -> str:
    return " ".join(text.split())


def check_cycle(text: str, entry: dict) -> None:
    res = entry["output"]["results"]
    found = tables(text)
    cycle = found[0]
    (parts,) = [t for t in found if t["__head__"][1:] == list(PART_COLUMNS)]
    names = {"ur10": "UR10", "panda": "Panda"}
    for robot, r in res["robots"].items():
        it, row = r["items"], cycle[names[robot]]
        core, loop = it["core"], it["loop"]
        close(row[1], core["p50_us"], core["p99_us"])
        close(row[2], loop["p50_us"], loop["p99_us"])
        close(row[3], loop["p50_us"] / core["p50_us"], loop["p99_us"] / core["p99_us"])
        assert row[4] == verdict(loop["p50_us"] <= 4 * core["p50_us"])
        for col, key in zip(parts["__head__"][1:], parts[names[robot]][1:], strict=True):
            close(key, it[PART_COLUMNS[col]]["p50_us"])
        stages = [k[len("stage:"):] for k in it if k.startswith("stage:")]
        if not stages:  # a JSON from before the per-stage items
            continue
        (st,) = [t for t in found if t["__head__"][0] == "robot" and "solver" in t["__head__"]
                 and "read" in t["__head__"]]
        head = st["__head__"][1:]
        assert [h for h in head if h in stages] == stages  # this robot's stages in cycle order; others "—"
        for name, cell in zip(head, st[names[robot]][1:], strict=True):
            if name in stages:
                close(cell, it[f"stage:{name}"]["p50_us"])
            else:
                assert cell == "—"
        # one table of added costs per robot, in the order of the robots measured
        added = [t for t in found if t["__head__"][0] == "part"][list(res["robots"]).index(robot)]
        for k in (k for k in it if k.startswith("with:")):
            cells = added[k[len("with:"):]]
            close(cells[1], it[k]["p50_us"], it[k]["p99_us"])
            close(cells[2], it[k]["p50_us"] - loop["p50_us"])
            close(cells[3], (it[k]["p50_us"] - loop["p50_us"]) / core["p50_us"])
    ok = all(r["items"]["loop"]["p50_us"] <= 4 * r["items"]["core"]["p50_us"] for r in res["robots"].values())
    assert f"Goal full cycle p50 ≤ 4× lean core p50: **{verdict(ok)}**" in flat(text)
    missed = [robot for robot, r in res["robots"].items()
              if r["items"]["loop"]["p50_us"] > 4 * r["items"]["core"]["p50_us"]]
    if missed:  # the explanation names the first robot that missed the goal, with its numbers
        it = res["robots"][missed[0]]["items"]
        assert (f"The goal is {4 * it['core']['p50_us']:.1f} µs for the {names[missed[0]]}; its cycle takes "
                f"{it['loop']['p50_us']:.1f} µs") in flat(text)


def check_loop(text: str, entry: dict) -> None:
    wins = entry["output"]["results"]["windows"]
    (table,) = [t for t in tables(text) if t["__head__"][0] == "window"]
    for name, w in wins.items():
        row, pct = table[name], 100 * w["overruns"] / w["cycles"]
        assert row[1] == ("yes" if w["fifo"] else "no")
        assert int(row[2]) == w["cycles"]
        close(row[3], pct)
        close(row[4], w["period_error_p50_us"], w["period_error_p99_us"], w["period_error_max_us"])
        close(row[5], w["compute_p50_us"], w["compute_p99_us"], w["compute_max_us"])
        assert row[6] == verdict(w["fifo"] and w["period_error_p99_us"] <= 100 and pct <= 0.1)


def check_ws(text: str, entry: dict) -> None:
    res = entry["output"]["results"]
    (table,) = [t for t in tables(text) if t["__head__"][0] == "/ws/state watchers"]
    target = 1e3 / res["rate_hz"] + 1
    assert table["__head__"][5] == f"goal p99 ≤ {target:g} ms"
    for r in res["runs"]:
        row = table[str(r["watchers"]) + (f" + {r['hogs']} CPU hogs" if r.get("hogs") else "")]
        assert row[1] == f"{r['acknowledged']} / {r.get('sent', res['samples'])}"  # of those sent
        close(row[2], r["p50_ms"])
        close(row[3], r["p99_ms"])
        close(row[4], r["max_ms"])
        assert row[5] == verdict(r["p99_ms"] <= target)
        assert row[6] == f"{r['loop_overruns']} of {r['loop_cycles']}"
        if "to_cycle_p50_ms" in r:  # the split at the acknowledging cycle's start
            close(row[7], r["to_cycle_p50_ms"], r["to_cycle_p99_ms"])
            close(row[8], r["cycle_to_client_p50_ms"], r["cycle_to_client_p99_ms"])


def check_franka(text: str, entry: dict) -> None:
    res = entry["output"]["results"]
    # {"standin": …, "sim": …}, or (older runs) the franky-sim run alone
    stand, r = (res.get("standin"), res.get("sim")) if "sim" in res or "standin" in res else (None, res)
    if r is not None:
        (table,) = [t for t in tables(text) if t["__head__"][0] == "cycles"]
        row = table[str(r["cycles"])]
        total = r["cycles"] + r["missed_cycles"]
        share = 100.0 * r["missed_cycles"] / max(total, 1)  # the share of robot states that passed without a command
        assert row[0] == str(r["cycles"]) and row[5] == f"{r['missed_cycles']} of {total} ({share:.2f} %)"
        assert f"Goal at most 0.5 % missed: **{verdict(share <= 0.5)}** ({share:.2f} %" in flat(text)
    if stand is not None:
        ok = stand["compute_p99_us"] <= 200
        assert f"Goal compute p99 ≤ 200 µs on the stand-in: **{verdict(ok)}**" in flat(text)
        cmp = stand.get("against_inprocess")
        if cmp:
            assert (f"the robot-paced path adds {cmp['added_p50_us']:.1f} µs at p50") in flat(text)
            if "sched_fifo" in cmp:  # the scheduling the in-turn run had, as the benchmark saw it
                said = "under SCHED_FIFO" if cmp["sched_fifo"] else "SCHED_FIFO not granted"
                assert said in flat(text)
        (split,) = [t for t in tables(text) if t["__head__"][0] == "stage"]
        for name, v in stand["split_us"].items():
            close(split[name][1], v[0])
            if len(v) > 3:  # the mean over the slowest 1 %
                close(split[name][4], v[3])
        if stand.get("stages_us"):
            (stages,) = [t for t in tables(text) if t["__head__"][0] == "cycle stage"]
            for name, v in stand["stages_us"].items():
                close(stages[name][1], v[0])
                if len(v) > 3:
                    close(stages[name][4], v[3])
        if stand.get("compute_us") and stand.get("robot_cycles"):
            c = stand["compute_us"]
            assert (f"p90 {c['p90_us']:.0f} µs, p99.9 {c['p99.9_us']:.0f} µs over {stand['robot_cycles']} cycles"
                    in flat(text))
        if stand.get("kinds"):
            (kinds,) = [t for t in tables(text) if t["__head__"][0] == "kind of cycle"]
            for name, k in stand["kinds"].items():
                close(kinds[name][1], k["p50_us"])
                close(kinds[name][2], k["p99_us"])
                close(kinds[name][4], 100 * k["share_of_slowest"])


CHECKS = {"cycle": check_cycle, "loop": check_loop, "ws": check_ws, "franka": check_franka}


def parts_of(text: str) -> dict[str, str]:
    """The section split at each benchmark's command line, keyed by benchmark."""
    keys = {"bench_cycle.py": "cycle", "bench_loop.py": "loop", "bench_ws_latency.py": "ws",
            "bench_franka.py": "franka"}
    pieces = re.split(r"(?<=\n\n)`PYTHONPATH=\. python benchmarks/(\w+\.py)", text)  # paragraphs that open with it
    return {keys[pieces[i]]: pieces[i + 1] for i in range(1, len(pieces), 2)}


def check_section(text: str, data: dict) -> None:
    """Every table cell and verdict of ``text`` agrees with ``data``; each command is the benchmark's own."""
    parts = parts_of(text)
    assert set(parts) == {k for k, e in data["benches"].items() if e["status"] == "ok"}
    for key, part in parts.items():
        argv = data["benches"][key]["output"]["argv"]
        argv = argv[:argv.index("--json")] + argv[argv.index("--json") + 2:]
        assert f"`PYTHONPATH=. python {' '.join(argv)}`" in flat(text)
        CHECKS[key](part, data["benches"][key])


def finite_numbers(x) -> None:
    if isinstance(x, dict):
        for v in x.values():
            finite_numbers(v)
    elif isinstance(x, list):
        for v in x:
            finite_numbers(v)
    elif isinstance(x, float):
        assert math.isfinite(x)


def ordered(*values: float) -> bool:
    return all(0 <= a <= b for a, b in pairwise(values))


def test_readme_is_rendered_from_the_committed_json(tmp_path: Path) -> None:
    """A hand edit of the README's numbers, or of docs/measured.json without re-rendering, fails here."""
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    r = measure("--render-only", "--readme", readme, "--out", ROOT / "docs" / "measured.json")
    assert r.returncode == 0, r.stderr
    assert section(readme.read_text()) == section((ROOT / "README.md").read_text())
    data = json.loads((ROOT / "docs" / "measured.json").read_text())
    assert set(data["benches"]) == {"cycle", "loop", "ws", "franka"}
    check_section(section(readme.read_text()), data)


def test_render_shows_the_loaded_runs_and_the_robot_paced_split(tmp_path: Path) -> None:
    """The WS runs beside CPU hogs get rows of their own (outside the goal), the latency split is shown, and
    the franka entry with its stand-in part renders the phase table, the per-stage table, the comparison with
    the in-process cycle and both goals — every cell from the JSON (numbers made up, rendered as measured)."""
    data = json.loads((ROOT / "docs" / "measured.json").read_text())
    ws = data["benches"]["ws"]["output"]["results"]
    base = dict(ws["runs"][0], to_cycle_p50_ms=1.01, to_cycle_p99_ms=1.98, cycle_to_client_p50_ms=0.42,
                cycle_to_client_p99_ms=0.93)
    ws["runs"] = [dict(base, hogs=0), dict(base, hogs=2, p50_ms=2.5, p99_ms=9.75, max_ms=12.0)]
    fr = data["benches"]["franka"]["output"]
    split = {name: [10.0 + i, 9.0 + i, 30.0 + i, 41.0 + i] for i, name in enumerate(
        ("wait", "read", "sense", "law", "map", "limits", "send", "publish", "rest of the cycle", "cycle (wrapped)"))}
    stand = {"cycles": 3000, "commands": 2990, "window": 3000, "compute_p50_us": 120.0, "compute_p99_us": 250.0,
             "compute_max_us": 900.0, "split_us": split, "stages_us": {"posture": [20.5, 20.0, 40.0, 52.0],
                                                                        "solver": [60.25, 60.0, 90.0, 97.0]},
             "robot_cycles": 3000, "compute_us": {"p50_us": 120.0, "p90_us": 170.0, "p99_us": 250.0,
                                                   "p99.9_us": 410.0, "max_us": 900.0},
             "kinds": {"neither": {"p50_us": 118.0, "p99_us": 211.0, "share": 0.47, "share_of_slowest": 0.135},
                       "both": {"p50_us": 192.0, "p99_us": 337.0, "share": 0.08, "share_of_slowest": 0.25}},
             "against_inprocess": {"cycles": 500, "rounds": 6, "sched_fifo": True,
                                   "paced": {"p50_us": 130.0, "p99_us": 260.0},
                                   "in-process": {"p50_us": 128.0, "p99_us": 255.0}, "added_p50_us": 2.0}}
    sim = fr["results"].get("sim") if "standin" in fr["results"] or "sim" in fr["results"] else fr["results"]
    fr["results"] = {"standin": stand, "sim": sim}
    out = tmp_path / "measured.json"
    out.write_text(json.dumps(data))
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    r = measure("--render-only", "--readme", readme, "--out", out)
    assert r.returncode == 0, r.stderr
    text = section(readme.read_text())
    check_section(text, data)
    (table,) = [t for t in tables(text) if t["__head__"][0] == "/ws/state watchers"]
    assert table[f"{base['watchers']} + 2 CPU hogs"][5] == "not met"
    assert "without CPU hogs: **" in flat(text)
    assert "Goal compute p99 ≤ 200 µs on the stand-in: **not met** (p99 250 µs)" in flat(text)
    assert "the robot-paced path adds 2.0 µs at p50" in flat(text)
    assert "p90 170 µs, p99.9 410 µs over 3000 cycles of the robot's clock" in flat(text)


def test_render_only_rewrites_a_hand_edited_table(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    text = (ROOT / "README.md").read_text()
    edited = text.replace("| UR10 |", "| UR10 | 1.0 |", 1)
    assert edited != text
    readme.write_text(edited)
    assert measure("--render-only", "--readme", readme, "--out", ROOT / "docs" / "measured.json").returncode == 0
    assert readme.read_text() == text


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess]:
    """The three benchmarks at tiny sizes, into a copy of the README and a temporary JSON."""
    tmp = tmp_path_factory.mktemp("measure")
    readme, out = tmp / "README.md", tmp / "measured.json"
    shutil.copy(ROOT / "README.md", readme)
    before = (ROOT / "README.md").read_text(), (ROOT / "docs" / "measured.json").read_bytes()
    r = measure(*TINY, "--readme", readme, "--out", out)
    assert ((ROOT / "README.md").read_text(), (ROOT / "docs" / "measured.json").read_bytes()) == before
    return readme, out, r


def test_a_tiny_real_run_renders_its_numbers(tiny_run) -> None:
    readme, out, r = tiny_run
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out.read_text())
    finite_numbers(data)
    cycle, loop, ws = (data["benches"][k] for k in ("cycle", "loop", "ws"))
    assert all(e["status"] == "ok" for e in (cycle, loop, ws))
    items = cycle["output"]["results"]["robots"]["ur10"]["items"]
    assert cycle["output"]["results"]["robots"]["ur10"]["calls"] == 50
    assert {"core", "loop", *PART_COLUMNS.values()} <= set(items)
    for v in items.values():
        assert ordered(v["p50_us"], v["p99_us"], v["max_us"]) and v["p50_us"] > 0
    for w in loop["output"]["results"]["windows"].values():
        # the loop ran through its 1 s window at 1 kHz (how many cycles it kept on a loaded machine is the
        # benchmark's number, not the test's); SCHED_FIFO not asked for
        assert 100 <= w["cycles"] <= 5000 and not w["fifo"]
        assert ordered(w["period_error_p50_us"], w["period_error_p99_us"], w["period_error_max_us"])
        assert ordered(w["compute_p50_us"], w["compute_p99_us"], w["compute_max_us"]) and w["compute_p50_us"] > 0
    (run,) = ws["output"]["results"]["runs"]
    assert run["watchers"] == 0 and run["acknowledged"] == 20
    assert ordered(run["p50_ms"], run["p99_ms"], run["max_ms"]) and run["p50_ms"] > 0
    machine = cycle["output"]["machine"]
    assert machine["cpu_count"] >= 1 and machine["python"] == ".".join(map(str, sys.version_info[:3]))
    check_section(section(readme.read_text()), data)


def test_a_failing_benchmark_is_recorded_and_the_others_kept(tiny_run, tmp_path: Path) -> None:
    readme, out = tmp_path / "README.md", tmp_path / "measured.json"
    shutil.copy(tiny_run[0], readme)
    shutil.copy(tiny_run[1], out)
    files = ("--readme", readme, "--out", out)
    assert measure("--only", "cycle", "--robots", "no_such_robot", *files, timeout=60).returncode == 1
    assert measure("--only", "ws", "--timeout", "1", *files, timeout=60).returncode == 1
    data = json.loads(out.read_text())
    assert data["benches"]["cycle"]["status"] == "failed" and "exit status 1" in data["benches"]["cycle"]["error"]
    assert data["benches"]["ws"]["error"].startswith("timed out after 1 s")
    assert data["benches"]["loop"] == json.loads(tiny_run[1].read_text())["benches"]["loop"]
    text = flat(section(readme.read_text()))
    assert "**bench_cycle failed**" in text and "**bench_ws_latency failed**: timed out after 1 s" in text
    check_section(section(readme.read_text()), data)  # the loop's table is still there and right
