"""Run the speed benchmarks, collect their JSON into docs/measured.json, regenerate the README's numbers.

    python scripts/measure.py                     # all three at the README's sizes (several minutes)
    python scripts/measure.py --only cycle ws     # some of them; the others keep their recorded results
    python scripts/measure.py --quick             # small sizes, for a quick look (~15 s)
    python scripts/measure.py --render-only       # re-render the README from docs/measured.json

Each benchmark (``benchmarks/bench_cycle.py``, ``bench_loop.py``, ``bench_ws_latency.py``) runs
alone, one after the other, as a subprocess in its own process group with a time limit; it writes
its numbers with ``--json``. Next to them this script records the commit, the 1-min load average
before the run and the CPU steal time during it (other jobs on the machine). After each
benchmark it writes ``--out`` and rewrites the README between ``<!-- measured:begin -->`` and
``<!-- measured:end -->`` (``scripts/render_measured.py``). A benchmark that fails or times out is
recorded as failed, its section says so, and the script exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from render_measured import ORDER, render_section, replace_section

ROOT = Path(__file__).resolve().parent.parent
FULL = {"cycles": 4000, "rounds": 8, "robots": ["ur10", "panda"], "seconds": 30.0, "rate": 1000.0,
        "spin": 0.0002, "hogs": 1, "samples": 1000, "ws_rate": 500.0, "watchers": [0, 50],
        "ws_hogs": [0, 2], "franka_seconds": 60.0, "franka_watchers": 50, "franka_cycles": 20000, "cycle_budget": 30.0,
        "ws_budget": 20.0}
QUICK = {**FULL, "cycles": 400, "rounds": 4, "robots": ["ur10"], "seconds": 2.0, "samples": 100, "watchers": [0, 10],
         "ws_hogs": [0], "franka_seconds": 5.0, "franka_watchers": 10, "franka_cycles": 3000, "cycle_budget": 5.0,
         "ws_budget": 3.0}


@dataclass(frozen=True)
class Bench:
    """One benchmark: its script, its arguments from the options and its time limit (s)."""

    script: str
    args: Callable[[argparse.Namespace], list[str]]
    timeout: Callable[[argparse.Namespace], float]


BENCHES = {
    "cycle": Bench("benchmarks/bench_cycle.py",
                   lambda o: ["--cycles", str(o.cycles), "--rounds", str(o.rounds), "--robots", *o.robots,
                              "--budget", f"{o.cycle_budget:g}"],
                   # per robot: building its loops and the warm-up, the timed rounds (none starts past the budget)
                   # and the one that ran over it (~45 items × cycles/rounds calls of ≤ 1 ms on a loaded machine)
                   lambda o: 60 + len(o.robots) * (o.cycle_budget + 90 + 0.045 * o.cycles / max(o.rounds, 1))),
    "loop": Bench("benchmarks/bench_loop.py",
                  lambda o: ["--seconds", f"{o.seconds:g}", "--rate", f"{o.rate:g}",
                             *(["--realtime"] if o.realtime else []), "--spin", f"{o.spin:g}", "--hogs", str(o.hogs)],
                  lambda o: 60 + 4 * o.seconds),  # two windows of o.seconds
    "ws": Bench("benchmarks/bench_ws_latency.py",
                lambda o: ["--samples", str(o.samples), "--rate", f"{o.ws_rate:g}",
                           "--watchers", *map(str, o.watchers), "--hogs", *map(str, o.ws_hogs),
                           "--budget", f"{o.ws_budget:g}"],
                # the service's start (≤ 30 s), then per watcher count and hog count: the watchers' connect and
                # stop (≤ 20 s each), the samples (none sent past the budget; the last one waits ≤ 1 s for its ack)
                lambda o: 60 + len(o.watchers) * len(o.ws_hogs) * (o.ws_budget + 45)),
    "franka": Bench("benchmarks/bench_franka.py",
                    lambda o: ["--standin-cycles", str(o.franka_cycles), "--seconds", f"{o.franka_seconds:g}",
                               "--watchers", str(o.franka_watchers)],
                    # two stand-in runs of a fixed count of robot cycles (the same inputs and poses in every
                    # measurement; ≤ 2 ms a cycle on a loaded machine) and their imports, the simulator and service
                    # start, the run, the stop
                    lambda o: 180 + 2 * o.franka_seconds + 0.004 * o.franka_cycles),
}


def cpu_times() -> list[int] | None:
    """Machine-wide jiffies: user nice system idle iowait irq softirq steal (Linux /proc/stat)."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError, IndexError):
        return None


def cpu_share(before: list[int] | None, after: list[int] | None) -> dict | None:
    """Busy and steal time between two samples, % of all CPUs' time (busy includes the benchmark's own)."""
    if not before or not after or len(before) < 8 or len(after) < 8:
        return None
    d = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(d) or 1
    return {"busy_pct": 100 * (d[0] + d[1] + d[2] + d[5] + d[6]) / total, "steal_pct": 100 * d[7] / total}


def git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def kill_group(p: subprocess.Popen) -> None:
    """End the benchmark and what it started (hogs, the service, watchers): its own process group."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def source() -> dict:
    """The commit measured and whether tracked files differ from it (this script's own outputs aside)."""
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!README.md", ":!docs/measured.json")
    return {"commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(changed)}


def run(key: str, opts: argparse.Namespace, tmp: Path, src: dict) -> dict:
    """Run one benchmark; its entry for measured.json (status ok with its JSON, or failed with why)."""
    b, out = BENCHES[key], tmp / f"{key}.json"
    cmd = [b.script, *b.args(opts)]
    timeout = opts.timeout or b.timeout(opts)
    entry: dict = {"command": cmd, "timeout_s": timeout, "started_utc": now(), **src,
                   "loadavg_before": list(os.getloadavg())}
    print(f"\n$ PYTHONPATH=. python {' '.join(cmd)}   (at most {timeout:g} s)", flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    c0, t0 = cpu_times(), time.monotonic()
    p = subprocess.Popen([sys.executable, *cmd, "--json", str(out)], cwd=ROOT, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=timeout)
        error = f"exit status {p.returncode}" if p.returncode else None
    except subprocess.TimeoutExpired:
        kill_group(p)
        stdout, stderr = p.communicate()
        error = f"timed out after {timeout:g} s"
    except BaseException:  # Ctrl-C: leave nothing running
        kill_group(p)
        raise
    entry.update(seconds=round(time.monotonic() - t0, 1), cpu=cpu_share(c0, cpu_times()))
    print(stdout, end="", flush=True)
    if error is None:
        try:
            entry["output"] = json.loads(out.read_text())
        except (OSError, ValueError) as e:
            error = f"no JSON result ({type(e).__name__})"
    if error:
        last = [ln for ln in stderr.strip().splitlines() if ln.strip()][-1:]
        entry.update(status="failed", error=error + (f": {last[0].strip()}" if last else ""), stderr=stderr[-4000:])
        print(f"{key}: FAILED, {entry['error']}\n{stderr[-2000:]}", file=sys.stderr, flush=True)
    else:
        entry["status"] = "ok"
    return entry


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def load(path: Path) -> dict:
    """The recorded results, or an empty record where there are none yet (or they cannot be read)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"benches": {}}
    return data if isinstance(data.get("benches"), dict) else {"benches": {}}


def write(data: dict, out: Path, readme: Path) -> bool:
    """Write the JSON and the README's section; whether every result rendered."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    tmp.replace(out)
    return render(data, readme)


def render(data: dict, readme: Path) -> bool:
    section, ok = render_section(data)
    readme.write_text(replace_section(readme.read_text(), section))
    return ok


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=ORDER, help="run only these benchmarks")
    ap.add_argument("--quick", action="store_true", help="small sizes for a quick look: " + json.dumps(
        {k: v for k, v in QUICK.items() if FULL[k] != v}))
    ap.add_argument("--render-only", action="store_true", help="only re-render the README from --out")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "measured.json")
    ap.add_argument("--timeout", type=float, help="time limit per benchmark (s); default from its size")
    g = ap.add_argument_group("sizes (default: the README's; with --quick, the small ones)")
    g.add_argument("--cycles", type=int, help="bench_cycle: timed calls per item")
    g.add_argument("--rounds", type=int, help="bench_cycle: interleaved rounds")
    g.add_argument("--robots", nargs="+", help="bench_cycle: robots")
    g.add_argument("--seconds", type=float, help="bench_loop: length of each window (s)")
    g.add_argument("--rate", type=float, help="bench_loop: loop rate (Hz)")
    g.add_argument("--realtime", action=argparse.BooleanOptionalAction, default=True,
                   help="bench_loop: ask for SCHED_FIFO")
    g.add_argument("--spin", type=float, help="bench_loop: busy-wait before each deadline (s)")
    g.add_argument("--hogs", type=int, help="bench_loop: CPU hogs in the busy window")
    g.add_argument("--samples", type=int, help="bench_ws_latency: wrenches per watcher count")
    g.add_argument("--ws-rate", type=float, help="bench_ws_latency: loop rate (Hz)")
    g.add_argument("--watchers", type=int, nargs="+", help="bench_ws_latency: /ws/state watcher counts")
    g.add_argument("--ws-hogs", type=int, nargs="+", help="bench_ws_latency: CPU hogs beside the service, per run")
    g.add_argument("--cycle-budget", type=float, help="bench_cycle: seconds of timed rounds per robot (bounds the run)")
    g.add_argument("--ws-budget", type=float, help="bench_ws_latency: seconds of samples per run (bounds the run)")
    g.add_argument("--franka-seconds", type=float, help="bench_franka: length of the run (s)")
    g.add_argument("--franka-watchers", type=int, help="bench_franka: /ws/state readers")
    g.add_argument("--franka-cycles", type=int, help="bench_franka: robot cycles of each stand-in run")
    opts = ap.parse_args(argv)
    for k, v in (QUICK if opts.quick else FULL).items():
        if getattr(opts, k) is None:
            setattr(opts, k, v)
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    data = load(opts.out)
    if opts.render_only:
        if not data["benches"]:
            print(f"no results in {opts.out}", file=sys.stderr)
            return 1
        return 0 if render(data, opts.readme) else 1
    try:  # fail before minutes of measuring if the README cannot take the result
        replace_section(opts.readme.read_text(), "")
    except (OSError, ValueError) as e:
        print(e, file=sys.stderr)
        return 2
    failed, src = [], source()
    with tempfile.TemporaryDirectory(prefix="fdcontrol-measure-") as tmp:
        for key in [k for k in ORDER if not opts.only or k in opts.only]:
            entry = run(key, opts, Path(tmp), src)
            data["benches"][key] = entry
            data["benches"] = {k: data["benches"][k] for k in ORDER if k in data["benches"]}
            data.update(schema=1, written_utc=now())
            if entry["status"] != "ok":
                failed.append(key)
            if not write(data, opts.out, opts.readme):
                failed.append(f"{key} (render)")
    print(f"\nwrote {opts.out} and the measured section of {opts.readme}"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
