"""The README's measured section, rendered from ``docs/measured.json`` alone (tables, goals, prose).

Every number and every "met" / "not met" in the text comes from the JSON, so the text cannot
disagree with the measurement. Goals (issue 14):

* cycle: full ``ControlLoop.step`` p50 ≤ 4 × lean FD core p50, per robot;
* loop: under SCHED_FIFO, |period error| p99 ≤ 100 µs and overruns ≤ 0.1 % of cycles, per window;
* WebSocket: wrench → acknowledging state p99 ≤ one loop period + 1 ms, per watcher count;
* franka: the robot-paced cycle on the stand-in robot p99 ≤ 200 µs; on franky-sim with readers at most
  0.5 % of the robot's cycles missed.
"""

from __future__ import annotations

import math
import re
import shlex
import textwrap
from collections.abc import Callable

BEGIN, END = "<!-- measured:begin -->", "<!-- measured:end -->"
CYCLE_RATIO_GOAL = 4.0
PERIOD_P99_GOAL_US = 100.0
OVERRUN_GOAL_PCT = 0.1
WS_MARGIN_MS = 1.0
PACED_P99_GOAL_US = 200.0
MISSED_GOAL_PCT = 0.5
ROBOT_NAMES = {"ur10": "UR10", "panda": "Panda", "planar2": "planar 2-link"}
PARTS = (("config", "Configuration update"), ("solver", "solver"), ("limits", "limits"),
         ("sim_driver", "simulator read + send"), ("publish", "publish"), ("set_wrench", "new wrench"))
TITLES = {"cycle": "bench_cycle", "loop": "bench_loop", "ws": "bench_ws_latency", "franka": "bench_franka"}
ORDER = ("cycle", "loop", "ws", "franka")
WIDTH = 100


def met(ok: bool) -> str:
    return "met" if ok else "not met"


def num(x: float | None, digits: int) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [row(head), "|" + "---|" * len(head), *(row(r) for r in rows)]


def command(argv: list[str]) -> str:
    """The benchmark's command line as a reader would type it from the repository root (no --json)."""
    args, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--json":
            skip = True
        elif not a.startswith("--json="):
            args.append(a)
    return "PYTHONPATH=. python " + shlex.join(args)


def robot_name(name: str) -> str:
    return ROBOT_NAMES.get(name, name)


# --- bench_cycle ---------------------------------------------------------------------------------

def cycle_met(items: dict) -> bool:
    return items["loop"]["p50_us"] <= CYCLE_RATIO_GOAL * items["core"]["p50_us"]


def render_cycle(entry: dict) -> list[str]:
    res = entry["output"]["results"]
    robots = res["robots"]
    rows, parts = [], []
    calls = " / ".join(sorted({str(r["calls"]) for r in robots.values()}))
    for name, r in robots.items():
        it = r["items"]
        core, loop = it["core"], it["loop"]
        rows.append([robot_name(name), f"{num(core['p50_us'], 1)} / {num(core['p99_us'], 1)}",
                     f"{num(loop['p50_us'], 1)} / {num(loop['p99_us'], 1)}",
                     f"{num(loop['ratio_p50'], 1)}× / {num(loop['ratio_p99'], 1)}×", met(cycle_met(it))])
        parts.append([robot_name(name)] + [num(it[k]["p50_us"], 1) if k in it else "—" for k, _ in PARTS])
    six = any("four_limits" in r["items"] for r in robots.values())  # measured since `loop` has the default six
    out = [f"`{command(entry['output']['argv'])}` — one `ControlLoop.step` of the loop `build_loop` makes from "
           + ("the default parameters (FD with the γ schedule, the default six limits, nothing else configured; "
              if six else "the default parameters (FD, the default four limits, nothing else configured; ")
           + "kinematic simulator, a wrench applied) against the lean FD core (CRBA, frame Jacobian, Cholesky, "
           "Euler) in the same process, "
           f"{calls} calls each in {res['rounds']} interleaved rounds"
           + (f" at most (no round starts after {num(res['budget_s'], 0)} s per robot: a loaded machine ends them "
              "early)" if res.get("budget_s") is not None else "") + ":", ""]
    out += table(["robot", "lean core p50 / p99 (µs)", "full cycle p50 / p99 (µs)", "ratio p50 / p99",
                  f"goal p50 ≤ {CYCLE_RATIO_GOAL:g}×"], rows)
    sway = [(n, r["items"]) for n, r in robots.items() if "loop_swaying" in r["items"]]
    if sway:  # the held wrench pushes the arm into its stretched singular pose: the schedule's SVD every cycle
        held = [(n, it) for n, it in sway if "loop_singular" in it]
        out += ["", "The wrench is held from the start pose: the arm moves for about 2000 cycles, then rests stretched "
                "at a singular pose; the rounds measure both, the motion first."
                + (" Held at that pose from the start, where the γ schedule takes J's SVD every cycle: "
                   + ", ".join(f"{robot_name(n)} {num(it['loop_singular']['p50_us'], 1)} µs p50 "
                               f"({num(it['loop_singular']['p50_us'] / it['core']['p50_us'], 1)}× the core)"
                               for n, it in held) + "." if held else "")
                + " The same cycle under a small swaying wrench, the arm near its start pose: "
                + ", ".join(f"{robot_name(n)} {num(it['loop_swaying']['p50_us'], 1)} µs p50 "
                            f"({num(it['loop_swaying']['p50_us'] / it['core']['p50_us'], 1)}× the core)"
                            for n, it in sway) + "."]
    stages = {name: {k[len("stage:"):]: v for k, v in r["items"].items() if k.startswith("stage:")}
              for name, r in robots.items()}
    if any(stages.values()):
        names: list[str] = []  # every robot's stages, in cycle order (a stage one robot lacks shows "—")
        for v in stages.values():
            for i, k in enumerate(v):
                if k not in names:
                    prev = list(v)[i - 1] if i else None
                    names.insert(names.index(prev) + 1 if prev in names else 0, k)
        out += ["", "The cycle's stages, each timed inside the cycle, p50 (µs):", ""]
        out += table(["robot", *names], [[robot_name(n)] + [num(v[k]["p50_us"], 1) if k in v else "—" for k in names]
                                         for n, v in stages.items() if v])
    added = {name: {k[len("with:"):]: v for k, v in r["items"].items() if k.startswith("with:")}
             for name, r in robots.items()}
    if any(added.values()):
        out += ["", "What a stage adds when its part is configured: the full cycle with that part, p50 (µs), "
                "minus the cycle's p50 above, and the added cost as a multiple of the lean core's p50:", ""]
        for n, v in added.items():
            if not v:
                continue
            base, core = robots[n]["items"]["loop"]["p50_us"], robots[n]["items"]["core"]["p50_us"]
            out += ["", f"{robot_name(n)}:", ""] if len(robots) > 1 else []
            out += table(["part", "cycle p50 / p99 (µs)", "added p50 (µs)", "added / core"],
                         [[k, f"{num(x['p50_us'], 1)} / {num(x['p99_us'], 1)}", num(x["p50_us"] - base, 1),
                           f"{num((x['p50_us'] - base) / core, 1)}×"] for k, x in v.items()])
    four = [(n, r["items"]) for n, r in robots.items() if "four_limits" in r["items"]]
    if four:  # the default path limits' cost: the cycle with the basic four limits only
        out += ["", "The default path limits (`path_speed`, `path_acceleration`) add "
                + ", ".join(f"{num(it['loop']['p50_us'] - it['four_limits']['p50_us'], 1)} µs "
                            f"({robot_name(n)}; its cycle with the basic four limits only: "
                            f"{num(it['four_limits']['p50_us'], 1)} µs p50)" for n, it in four) + "."]
    out += ["", "Parts of the cycle alone, p50 (µs):", ""]
    out += table(["robot"] + [label for _, label in PARTS], parts)
    verdicts = ", ".join(f"{robot_name(n)} {r['items']['loop']['ratio_p50']:.1f}×" for n, r in robots.items())
    all_met = all(cycle_met(r["items"]) for r in robots.values())
    out += ["", f"Goal full cycle p50 ≤ {CYCLE_RATIO_GOAL:g}× lean core p50: **{met(all_met)}** ({verdicts})."]
    if not all_met:
        name, r = next((n, r) for n, r in robots.items() if not cycle_met(r["items"]))  # the first not met
        it, v = r["items"], stages[name]
        out[-1] += (f" The goal is {CYCLE_RATIO_GOAL * it['core']['p50_us']:.1f} µs for the {robot_name(name)}; "
                    f"its cycle takes {it['loop']['p50_us']:.1f} µs")
        if v:
            big = sorted(v.items(), key=lambda kv: -kv[1]["p50_us"])[:3]
            out[-1] += ", most of it in " + ", ".join(f"{k} ({num(x['p50_us'], 1)} µs)" for k, x in big)
        out[-1] += "."
    return out


# --- bench_loop ----------------------------------------------------------------------------------

def window_met(w: dict) -> bool:
    return bool(w["fifo"]) and w["period_error_p99_us"] <= PERIOD_P99_GOAL_US and w["overrun_pct"] <= OVERRUN_GOAL_PCT


def render_loop(entry: dict) -> list[str]:
    res = entry["output"]["results"]
    wins = res["windows"]
    period_us = 1e6 / res["rate_hz"]
    fifo = [n for n, w in wins.items() if w["fifo"]]
    granted = ("SCHED_FIFO granted in both windows" if len(fifo) == len(wins) else
               "SCHED_FIFO not requested" if not res["realtime"] else
               f"SCHED_FIFO granted in: {', '.join(fifo) or 'no window'}")
    out = [f"`{command(entry['output']['argv'])}` — threaded loop at {res['rate_hz']:.0f} Hz "
           f"({robot_name(res['robot'])}, {res['mapping'].upper()}, kinematic simulator, a wrench streamed at "
           "~100 Hz), "
           f"{granted}, {res['spin_s'] * 1e6:.0f} µs spin; an idle and a busy window ({res['hogs']} CPU hog) of "
           f"{res['seconds']:g} s each in one run:", ""]
    goal = f"p99 ≤ {PERIOD_P99_GOAL_US:g} µs, overruns ≤ {OVERRUN_GOAL_PCT:g} %"
    rows = [[n, "yes" if w["fifo"] else "no", str(w["cycles"]), f"{num(w['overrun_pct'], 3)} %",
             f"{num(w['period_error_p50_us'], 1)} / {num(w['period_error_p99_us'], 1)} / "
             f"{num(w['period_error_max_us'], 0)}",
             f"{num(w['compute_p50_us'], 0)} / {num(w['compute_p99_us'], 0)} / {num(w['compute_max_us'], 0)}",
             met(window_met(w))] for n, w in wins.items()]
    out += table(["window", "SCHED_FIFO", "cycles", "overruns", "period error p50 / p99 / max (µs)",
                  "compute p50 / p99 / max (µs)", goal], rows)
    verdicts = ", ".join(f"{n} {met(window_met(w))}" for n, w in wins.items())
    out += ["", f"Goal under SCHED_FIFO — period error p99 ≤ {PERIOD_P99_GOAL_US:g} µs and overruns ≤ "
            f"{OVERRUN_GOAL_PCT:g} % of cycles: **{met(all(window_met(w) for w in wins.values()))}** ({verdicts})."]
    worst = ", ".join(f"{w['period_error_max_us'] / 1e3:.1f} ms {n}" for n, w in wins.items())
    if any(w["period_error_max_us"] >= period_us for w in wins.values()):
        out[-1] += f" The worst case is not bounded: single cycles late by up to {worst}."
    else:
        out[-1] += f" No cycle was late by a period or more in this run (worst {worst})."
    return out


# --- bench_ws_latency ----------------------------------------------------------------------------

def run_met(res: dict, run: dict) -> bool:
    return run["p99_ms"] <= res["period_ms"] + WS_MARGIN_MS


def run_label(run: dict) -> str:
    """A run's first cell: its watcher count, and the CPU hogs beside the service when there were any."""
    hogs = run.get("hogs") or 0
    return str(run["watchers"]) + (f" + {hogs} CPU hogs" if hogs else "")


def render_ws(entry: dict) -> list[str]:
    res = entry["output"]["results"]
    target = res["period_ms"] + WS_MARGIN_MS
    fifo = "SCHED_FIFO granted to the loop thread" if res.get("fifo_threads") else "the loop without SCHED_FIFO"
    out = [f"`{command(entry['output']['argv'])}` — a wrench on /ws/control → the first state acknowledging it, "
           f"real uvicorn on loopback, loop at {res['rate_hz']:.0f} Hz ({fifo}), each wrench at a random phase of the "
           f"period; /ws/state watchers at decimation {res['watch_decimation']} in a separate process:", ""]
    rows = [[run_label(r), f"{r['acknowledged']} / {r.get('sent', res['samples'])}", num(r["p50_ms"], 2),
             num(r["p99_ms"], 2),
             num(r["max_ms"], 2), met(run_met(res, r)), f"{r['loop_overruns']} of {r['loop_cycles']}",
             f"{num(r.get('to_cycle_p50_ms'), 2)} / {num(r.get('to_cycle_p99_ms'), 2)}",
             f"{num(r.get('cycle_to_client_p50_ms'), 2)} / {num(r.get('cycle_to_client_p99_ms'), 2)}"]
            for r in res["runs"]]
    out += table(["/ws/state watchers", "acknowledged", "p50 (ms)", "p99 (ms)", "max (ms)",
                  f"goal p99 ≤ {target:g} ms", "loop overruns meanwhile", "send → cycle start p50 / p99 (ms)",
                  "cycle start → client p50 / p99 (ms)"], rows)
    quiet = [r for r in res["runs"] if not r.get("hogs")]  # the goal is the machine's own; beside hogs: reported
    verdicts = ", ".join(f"{r['watchers']} watchers {met(run_met(res, r))}" for r in quiet)
    all_met = all(run_met(res, r) for r in quiet)
    out += ["", f"Goal p99 ≤ one period + {WS_MARGIN_MS:g} ms = {target:g} ms without CPU hogs: **{met(all_met)}** "
            f"({verdicts})."]
    if res["runs"]:
        extra = res["runs"][0]["p50_ms"] - res["period_ms"] / 2
        out[-1] += (f" A wrench waits up to one period for the next cycle, half a period ({res['period_ms'] / 2:g} ms) "
                    f"on average; the cycle and the hand-over between processes add the rest "
                    f"(p50 without watchers exceeds half a period by {extra:.2f} ms). The last two columns split "
                    "each latency at the start of the cycle that took the wrench (the state's stamp): the wait "
                    "for that cycle, a random phase of the period by design, and what the cycle, the hand-over "
                    "to the service and the WebSocket add.")
    return out


def render_franka(entry: dict) -> list[str]:
    res = entry["output"]["results"]
    stand, r = (res.get("standin"), res.get("sim")) if "sim" in res or "standin" in res else (None, res)
    out = [f"`{command(entry['output']['argv'])}`:", ""]
    if stand is not None:
        slowest = all(len(v) > 3 for v in stand["split_us"].values())
        out += [f"The robot-paced cycle's own cost — the service's FR3 loop (franka limits with the jerk limit, its "
                f"state published to shared memory) on the franka driver over a stand-in for libfranka that answers "
                f"at once (no network, no simulator on the CPU): {stand['cycles']} cycles, compute per cycle p50 "
                f"{num(stand['compute_p50_us'], 0)} µs, p99 {num(stand['compute_p99_us'], 0)} µs, max "
                f"{num(stand['compute_max_us'], 0)} µs (last {stand['window']} cycles)"
                + (f"; p90 {num(stand['compute_us']['p90_us'], 0)} µs, p99.9 {num(stand['compute_us']['p99.9_us'], 0)} "
                   f"µs over {stand['robot_cycles']} cycles of the robot's clock (the same inputs and poses in "
                   "every run)" if stand.get("compute_us") and stand.get("robot_cycles") else "")
                + ". Where a cycle's time goes (a second run with each stage behind a timer"
                + ("; the last column: the mean over that run's slowest 1 % of cycles" if slowest else "") + "):", ""]
        cols = 4 if slowest else 3
        head = ["mean (µs)", "p50 (µs)", "p99 (µs)", "slowest 1 % (µs)"][:cols]
        rows = [[name, *(num(x, 1) for x in v[:cols])] for name, v in stand["split_us"].items()]
        out += table(["stage", *head], rows) + [""]
        if stand.get("stages_us"):
            out += ["Each stage of the cycle by name (read without the wait):", ""]
            rows = [[name, *(num(x, 1) for x in v[:cols])] for name, v in stand["stages_us"].items()]
            out += table(["cycle stage", *head], rows) + [""]
        if stand.get("kinds"):
            out += ["The cycles by the extra work they do (the timed run's cycles):", ""]
            rows = [[name, num(k["p50_us"], 0), num(k["p99_us"], 0), f"{100 * k['share']:.1f} %",
                     f"{100 * k['share_of_slowest']:.1f} %"] for name, k in stand["kinds"].items()]
            out += table(["kind of cycle", "p50 (µs)", "p99 (µs)", "of all cycles", "of the slowest 1 %"],
                         rows) + [""]
        cmp = stand.get("against_inprocess")
        if cmp:
            sched = {True: ", under SCHED_FIFO as the loop thread runs",
                     False: ", at the default scheduling (SCHED_FIFO not granted here)"}.get(cmp.get("sched_fifo"), "")
            out += [f"The same FR3 cycle called in one thread, one cycle of each in turn ({cmp['rounds']} × "
                    f"{cmp['cycles']} each{sched}): robot-paced on the stand-in p50 "
                    f"{num(cmp['paced']['p50_us'], 1)} µs, p99 "
                    f"{num(cmp['paced']['p99_us'], 1)} µs; in process on the kinematic simulator p50 "
                    f"{num(cmp['in-process']['p50_us'], 1)} µs, p99 {num(cmp['in-process']['p99_us'], 1)} µs: the "
                    f"robot-paced path adds {num(cmp['added_p50_us'], 1)} µs at p50.", ""]
        ok = stand["compute_p99_us"] <= PACED_P99_GOAL_US
        out += [f"Goal compute p99 ≤ {PACED_P99_GOAL_US:g} µs on the stand-in: **{met(ok)}** "
                f"(p99 {num(stand['compute_p99_us'], 0)} µs).", ""]
    if r is not None:
        total = r["cycles"] + r["missed_cycles"]
        out += [f"Against franky-sim (libfranka's network protocol, MuJoCo physics) in its own process on loopback, "
                f"{r['watchers']} /ws/state readers, a streamed wrench, {r['seconds']:.0f} s wall = "
                f"{r['robot_seconds']:.1f} s of the robot's clock (ratio {r['robot_clock_ratio']:.2f}: the simulator's "
                "step does not always fit in 1 ms here):", ""]
        rows = [[str(r["cycles"]), num(r["compute_p50_us"], 0), num(r["compute_p99_us"], 0),
                 num(r["compute_max_us"], 0), f"{r['overruns']}",
                 f"{r['missed_cycles']} of {total} ({100.0 * r['missed_cycles'] / max(total, 1):.2f} %)",
                 str(r["success_rate"])]]
        out += table(["cycles", "compute p50 (µs)", "compute p99 (µs)", "compute max (µs)", "compute > 1 ms",
                      "missed cycles", "robot success rate"], rows)
        share = 100.0 * r["missed_cycles"] / max(total, 1)
        out += ["", "Compute is from the robot state's arrival to the command's departure (the last "
                f"{r['stats_window']} cycles); a missed cycle is a robot state that passed without a command. "
                f"Goal at most {MISSED_GOAL_PCT:g} % missed: **{met(share <= MISSED_GOAL_PCT)}** ({share:.2f} % over "
                f"{r['seconds']:.0f} s)."]
    return out


# --- the section ---------------------------------------------------------------------------------

RENDER: dict[str, Callable[[dict], list[str]]] = {"cycle": render_cycle, "loop": render_loop, "ws": render_ws,
                                                  "franka": render_franka}


def provenance(benches: dict) -> str:
    """When and on what the numbers were measured, from the benchmarks' own JSON."""
    ok = [e for e in benches.values() if e.get("status") == "ok"]
    if not ok:
        return "No benchmark result is recorded."
    m = ok[0]["output"]["machine"]
    kind = "virtual machine" if m.get("hypervisor") else "machine"
    clock = f", {m['mhz'] / 1e3:.1f} GHz" if m.get("mhz") else ""
    when = sorted({(e["started_utc"][:10], e["commit"] or "unknown", e["dirty"]) for e in ok})
    at = "; ".join(f"{d} at commit `{c}`{' with local changes' if dirty else ''}" for d, c, dirty in when)
    loads = ", ".join(f"{TITLES[k]} {e['loadavg_before'][0]:.1f}" for k, e in benches.items()
                      if e.get("status") == "ok" and e.get("loadavg_before"))
    took = sum(e.get("seconds", 0) for e in ok)
    steal = ", ".join(f"{TITLES[k]} {e['cpu']['steal_pct']:.1f} %" for k, e in benches.items()
                      if e.get("status") == "ok" and e.get("cpu"))
    return (f"Measured {at}, on a {m['cpus_usable']}-CPU {kind} ({m['model']}{clock}), Python {m['python']}, "
            f"pinocchio {m['pinocchio']}, numpy {m['numpy']}. Other jobs shared the machine (1-min load average "
            f"before each run: {loads}; steal time during the runs: {steal}), so read the ratios and idle/busy pairs "
            f"measured in one run, not absolute numbers. `make measure` reruns the benchmarks below ({took:.0f} s "
            "here; `scripts/measure.py --help` for smaller runs) and rewrites this text and "
            "[docs/measured.json](docs/measured.json).")


def render_failure(key: str, entry: dict) -> list[str]:
    return [f"**{TITLES[key]} failed**: {entry.get('error', 'no result')} — `{command(entry['command'])}`."]


def render_section(data: dict) -> tuple[str, bool]:
    """The text between the markers (without them), ending in a newline, and whether every result rendered."""
    benches, ok = data.get("benches", {}), True
    out = ["<!-- generated by `make measure` (scripts/measure.py) from docs/measured.json: edit those, "
           "not this text -->", "", provenance(benches)]
    for key in ORDER:
        if key not in benches:
            continue
        entry = benches[key]
        try:
            body = RENDER[key](entry) if entry.get("status") == "ok" else render_failure(key, entry)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            body, ok = [f"**{TITLES[key]}**: its result could not be rendered ({type(e).__name__}: {e})."], False
        out += ["", *body]
    return "\n".join(wrap(line) for line in out) + "\n", ok


def wrap(line: str) -> str:
    """Prose at the README's width; table rows and comments stay one line."""
    if line.startswith(("|", "<!--")):
        return line
    keep = re.sub(r"`[^`]*`", lambda m: m.group().replace(" ", "\0"), line)  # a command stays on one line
    return textwrap.fill(keep, WIDTH, break_long_words=False, break_on_hyphens=False).replace("\0", " ")


def replace_section(readme: str, section: str) -> str:
    """``readme`` with the text between the markers replaced by ``section``; ValueError without markers."""
    i, j = readme.find(BEGIN), readme.find(END)
    if i < 0 or j < i:
        raise ValueError(f"the README has no {BEGIN} … {END} section")
    return readme[: i + len(BEGIN)] + "\n" + section + readme[j:]
