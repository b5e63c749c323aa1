"""Mutation testing of the safety-critical modules (``make mutation``): mutmut over each module,
with only the tests that cover it, then the kill rate per module and the surviving mutants.

mutmut (3.x) mutates a copy of the package and imports it by the file's dotted path. The
service's source lives in ``server/`` but is imported as ``fdcontrol.server``, so each module runs
in a scratch copy laid out as installed (``fdcontrol/server/…``, ``fdcontrol/urdf/…``); the
working tree is never touched. One module at a time, one worker process (the machine is shared).

    python scripts/mutation.py                 # every module below
    python scripts/mutation.py --only supervisor,sensing
    python scripts/mutation.py --list          # the modules and their tests

The numbers go into the README's measured section by hand (they take long to make); the
mutants that survive and are equivalent to the original are listed in docs/testing.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Target:
    name: str
    source: str  # the file(s) as laid out in the scratch copy (fdcontrol/…; globs, separated by spaces)
    tests: tuple[str, ...]  # the tests that cover it (mutmut runs, per mutant, those that reach its function)
    functions: tuple[str, ...] = ()  # only the mutants of these functions (fnmatch on mutmut's names)


# the watchdog / hold / brake paths of the loop (fdcontrol/loop/cycle.py): not the whole cycle
LOOP_SAFETY = ("*ǁhold__mutmut_*", "*ǁstop__mutmut_*", "*ǁbraking_time__mutmut_*", "*ǁ_on_exception__mutmut_*",
               "*.x__fresh__mutmut_*", "*.x__received__mutmut_*", "*.x_brake_step__mutmut_*",
               "*.x__hold_after__mutmut_*", "*ǁrequest_stop__mutmut_*", "*ǁ_stopped__mutmut_*")

TARGETS = (
    Target("supervisor", "fdcontrol/server/supervisor.py", ("tests/test_supervisor.py",)),
    Target("auth", "fdcontrol/server/auth.py", ("tests/test_access_policy.py", "tests/test_access_asgi.py")),
    Target("sensing", "fdcontrol/control/sensing.py", ("tests/test_sensing.py",)),  # in-process, every function
    Target("loop-safety", "fdcontrol/loop/cycle.py", ("tests/test_loop.py",), LOOP_SAFETY),
    # fdcontrol/limits/ file by file (``--only limits`` runs them all), each with the tests that reach it.
    # compiled.py (numba) has no mutants: mutmut leaves decorated functions alone, and a mutated Python
    # function could not run in nopython code anyway; its equations are the classes', which tests/test_limits.py
    # compares it with (bit for bit, or to rounding with the path speed limit), so a wrong class line is caught
    # either by its own test or as a disagreement with the twin.
    Target("limits-safety", "fdcontrol/limits/safety.py fdcontrol/limits/base.py",
           ("tests/test_limits.py", "tests/test_jerk.py")),
    Target("limits-joint", "fdcontrol/limits/position.py fdcontrol/limits/velocity.py "
           "fdcontrol/limits/acceleration.py fdcontrol/limits/cartesian.py", ("tests/test_limits.py",)),
    Target("limits-path", "fdcontrol/limits/path_speed.py fdcontrol/limits/path_acceleration.py",
           ("tests/test_limits.py", "tests/test_drift.py::test_path_speed_caps_at_the_speed_the_straight_line_allows")),
    Target("limits-jerk", "fdcontrol/limits/jerk.py", ("tests/test_jerk.py",)),
    Target("limits-workspace", "fdcontrol/limits/workspace.py", ("tests/test_workspace.py",)),
    Target("limits-collision", "fdcontrol/limits/collision.py", ("tests/test_collision.py",)),
    Target("braking", "fdcontrol/limits/braking.py", ("tests/test_braking.py",)),
    Target("liveness", "fdcontrol/loop/liveness.py",
           ("tests/test_liveness.py", "tests/test_braking.py", "tests/test_loop.py")),
)
KILLED = ("killed", "timeout", "segfault")


def _layout(dst: Path) -> None:
    """The package as installed: fdcontrol/, with server/ and urdf/ inside it, and the tests."""
    shutil.copytree(ROOT / "fdcontrol", dst / "fdcontrol", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "server", dst / "fdcontrol" / "server", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "urdf", dst / "fdcontrol" / "urdf", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", dst / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    for extra in ("docs", "README.md", "examples", "benchmarks", "scripts", "Dockerfile", "Makefile"):
        if (ROOT / extra).exists():
            os.symlink(ROOT / extra, dst / extra)


def _config(t: Target) -> str:
    tests = ", ".join(json.dumps(x) for x in t.tests)
    sources = ", ".join(json.dumps(x) for x in t.source.split())
    return (f"[tool.mutmut]\nsource_paths = [\"fdcontrol\"]\nonly_mutate = [{sources}]\n"
            f"pytest_add_cli_args_test_selection = [{tests}]\n"
            "timeout_multiplier = 5.0\n"
            "pytest_add_cli_args = [\"-p\", \"no:cacheprovider\", \"-q\"]\n"
            "use_git_change_detection = false\n"
            "[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n")


def _statuses(work: Path) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for meta in (work / "mutants").rglob("*.meta"):
        out.update(json.loads(meta.read_text())["exit_code_by_key"])
    return out


def _changed_lines(diff: str) -> str:
    """A mutant's diff as its changed lines only."""
    return "\n".join(ln for ln in diff.splitlines() if ln[:1] in "-+" and not ln.startswith(("---", "+++")))


def run(t: Target, python: str, timeout: float, keep: bool) -> dict[str, object]:
    import fnmatch

    work = Path(tempfile.mkdtemp(prefix=f"fdcontrol-mutation-{t.name}-"))
    try:
        _layout(work)
        (work / "pyproject.toml").write_text(_config(t))
        # (FDCONTROL_MUTATION: tests/conftest.py) numba checks every index: a mutant that leaves a compiled
        # kernel's buffer too short fails with an IndexError instead of writing past its end
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "FDCONTROL_MUTATION": "1", "NUMBA_BOUNDSCHECK": "1"}
        t0 = time.monotonic()
        cmd = [python, "-m", "mutmut", "run", "--max-children", "1", *t.functions]
        try:
            p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
            out = p.stdout + p.stderr
            if p.returncode != 0:  # (e.g. the clean run of the tests failed): the mutants not checked count as
                print(f"mutmut ended with {p.returncode}:\n{out[-3000:]}", file=sys.stderr)  # survivors; say why
        except subprocess.TimeoutExpired:
            out = f"(stopped after {timeout:g} s: the mutants not checked count as survivors)"
        took = time.monotonic() - t0
        codes = _statuses(work)
        if t.functions:
            codes = {k: v for k, v in codes.items() if any(fnmatch.fnmatch(k, f) for f in t.functions)}
        from mutmut.stats import status_by_exit_code

        status = {k: status_by_exit_code[v] for k, v in codes.items()}
        killed = sum(s in KILLED for s in status.values())
        survivors = sorted(k for k, s in status.items() if s not in KILLED)
        diffs = {}
        for k in survivors:
            d = subprocess.run([python, "-m", "mutmut", "show", k], cwd=work, capture_output=True, text=True,
                               timeout=900)  # (a loaded machine: minutes)
            diffs[k] = f"[{status[k]}] " + _changed_lines(d.stdout)
        if not codes:
            print(out[-3000:], file=sys.stderr)
        return {"module": t.name, "source": t.source, "mutants": len(codes), "killed": killed,
                "rate": killed / len(codes) if codes else 0.0, "seconds": took, "survivors": diffs}
    finally:
        if keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated module names (default: all)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--timeout", type=float, default=3600.0, help="s per module")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copies")
    ap.add_argument("--json", type=Path, help="write the results here too")
    a = ap.parse_args()
    only = {x for x in a.only.split(",") if x}
    # a group name runs its parts: ``limits`` is every ``limits-…``
    targets = [t for t in TARGETS if not only or t.name in only or t.name.split("-")[0] in only]
    if a.list:
        for t in targets:
            print(f"{t.name:12s} {t.source:40s} {' '.join(t.tests)}")
        return 0
    results = []
    for t in targets:
        r = run(t, sys.executable, a.timeout, a.keep)
        results.append(r)
        print(f"{r['module']:12s} {r['killed']:4d}/{r['mutants']:<4d} killed  {100 * r['rate']:5.1f} %  "
              f"({r['seconds']:.0f} s)", flush=True)
        for k, diff in r["survivors"].items():
            print(f"  {k.rsplit('.', 1)[-1]} " + "\n".join("      " + ln for ln in diff.splitlines()).lstrip(),
                  flush=True)
    print("\nmodule        killed / mutants   rate")
    for r in results:
        print(f"{r['module']:12s} {r['killed']:4d} / {r['mutants']:<4d}      {100 * r['rate']:5.1f} %")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
