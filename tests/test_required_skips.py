"""A required skip is a failure (tests/conftest.py, REQUIRE) and CI requires what it could install (.ci/run):
each shown by hiding the dependency from a run of the project's real tests, or of the real CI script.

- browser: the dashboard's browser tests with no chromium on PATH;
- fifo: the heartbeat test in a process tree that lost CAP_SYS_NICE (setpriv drops it from the bounding set);
- extras: a test module whose extra cannot be imported (a package on PYTHONPATH that raises ImportError);
- container: .ci/run on a machine where apt-get runs as root (a stand-in that installs nothing) and no
  container engine is found: CI fails, and it requires the browser tests though chromium is missing.
Each run without REQUIRE skips and passes, so the failure is the requirement's, nothing else's."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's python; no chromium, no container engine


def pytest_run(args: list[str], env: dict[str, str], prefix: list[str] | None = None,
               timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*(prefix or []), sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-o", "console_output_style=classic", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def said(out: str, category: str, reason: str) -> bool:
    """Whether a line of the run's output says a skip of `category` failed, with the skip's reason."""
    return any(f"skipped (REQUIRE includes {category!r})" in line and reason in line for line in out.splitlines())


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REQUIRE"}
    return {**env, **extra}


def test_a_browser_test_that_skips_fails_when_the_browser_is_required():
    env = clean_env(PATH=str(BIN))  # no chromium on PATH
    test = ["tests/test_dashboard_links.py"]
    r = pytest_run(test, env)
    assert r.returncode == 0 and " skipped" in r.stdout and "failed" not in r.stdout, r.stdout[-2000:]
    r = pytest_run(test, {**env, "REQUIRE": "browser"})
    assert r.returncode == 1 and " passed" not in r.stdout, r.stdout[-2000:]
    assert said(r.stdout, "browser", "needs Debian's chromium"), r.stdout[-3000:]


def test_a_real_time_test_that_skips_fails_when_sched_fifo_is_required():
    fifo = [sys.executable, "-c", "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))"]
    no_nice: list[str] = []
    if subprocess.run(fifo, capture_output=True, timeout=60).returncode == 0:  # granted here: take it away
        setpriv = shutil.which("setpriv")
        assert setpriv, "util-linux's setpriv (Debian: essential)"
        no_nice = [setpriv, "--bounding-set", "-sys_nice"]  # this process tree can no longer take SCHED_FIFO
    probe = subprocess.run([*no_nice, *fifo], capture_output=True, text=True, timeout=60)
    assert probe.returncode != 0 and "PermissionError" in probe.stderr, probe.stderr
    test = ["tests/test_heartbeat.py::test_the_heartbeat_runs_real_time_beside_the_loop"]
    r = pytest_run(test, clean_env(), prefix=no_nice)
    assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout[-2000:]
    r = pytest_run(test, clean_env(REQUIRE="fifo"), prefix=no_nice)
    assert r.returncode == 1, r.stdout[-2000:]
    assert said(r.stdout, "fifo", "SCHED_FIFO is not permitted here"), r.stdout[-3000:]


def test_a_module_whose_extra_is_missing_fails_when_the_extras_are_required(tmp_path):
    shadow = tmp_path / "foxglove"  # found before the installed foxglove-sdk: its import fails as if absent
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError('hidden by the test', name='foxglove')\n")
    env = clean_env(PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    r = pytest_run(["tests/test_foxglove.py"], env)
    # the whole module skipped at import: pytest's "no tests ran" (5), not a failure
    assert r.returncode == 5 and "1 skipped" in r.stdout and "could not import 'foxglove'" in r.stdout, r.stdout[-2000:]
    r = pytest_run(["tests/test_foxglove.py"], {**env, "REQUIRE": "extras"})
    assert r.returncode != 0, r.stdout[-2000:]
    assert said(r.stdout, "extras", "could not import 'foxglove'"), r.stdout[-3000:]


def _shim(d: Path, name: str, body: str) -> None:
    p = d / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


def _ci(tmp_path: Path, engine: bool, free_mib: int | None = None) -> tuple[subprocess.CompletedProcess, list[str]]:
    """.ci/run with stand-ins: root with apt-get that installs nothing, `make` that records its targets and
    REQUIRE, a podman stand-in only if `engine`, a `df` that reports `free_mib` MiB available if given; the real
    python3, dirname and timeout."""
    bin_ = tmp_path / (f"bin-{engine}-{free_mib}")
    bin_.mkdir()
    log = tmp_path / f"make-{engine}-{free_mib}.log"
    for tool in ("dirname", "timeout", "python3"):
        (bin_ / tool).symlink_to(shutil.which(tool) or "")
    _shim(bin_, "id", 'echo 0\n')
    _shim(bin_, "apt-get", "exit 0\n")  # runs, installs nothing (chromium, podman, runc, debootstrap stay missing)
    _shim(bin_, "make", f'echo "$* REQUIRE=$REQUIRE" >> {log}\n')
    if engine:
        _shim(bin_, "podman", "exit 0\n")
    if free_mib is not None:
        _shim(bin_, "df", f"echo 'Filesystem 1048576-blocks Used Available Capacity Mounted on'\n"
                          f"echo '/dev/vda 258020 {258020 - free_mib} {free_mib} 99% /'\n")
    r = subprocess.run(["/bin/bash", str(ROOT / ".ci" / "run")], env={"PATH": str(bin_), "HOME": str(tmp_path)},
                       capture_output=True, text=True, timeout=120)
    return r, log.read_text().splitlines() if log.exists() else []


def test_ci_fails_where_it_could_install_but_no_container_engine_or_chromium_came(tmp_path):
    r, made = _ci(tmp_path, engine=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED: the container image test is required here" in r.stderr, r.stderr
    assert "FAILED to install chromium" in r.stderr, r.stderr
    assert len(made) == 1 and made[0].startswith("test-loaded REQUIRE="), made
    assert {"extras", "browser"} <= set(made[0].split("REQUIRE=")[1].split(",")), made  # chromium missing: required
    assert "container" in r.stdout.split("required (a skip of these fails): ")[1].splitlines()[0], r.stdout
    # with an engine the image test runs, the image is removed again (its disk), and then LeRobot's install and
    # tests (the stand-in succeeds)
    r, made = _ci(tmp_path, engine=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [m.split()[0] for m in made] == ["test-loaded", "image-test", "image-clean", "lerobot", "test-lerobot"], made
    assert made[-1].endswith("REQUIRE=lerobot"), made
    # a disk with room for LeRobot's install (15 000 MiB on one filesystem): the same
    r, made = _ci(tmp_path, engine=True, free_mib=15000)
    assert r.returncode == 0 and [m.split()[0] for m in made][-2:] == ["lerobot", "test-lerobot"], made
    # a disk without: said in one line, no install that would fail half-way, and no LeRobot tests
    r, made = _ci(tmp_path, engine=True, free_mib=14999)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [m.split()[0] for m in made] == ["test-loaded", "image-test", "image-clean"], made
    said_short = "LeRobot cannot be installed on this disk (14999 MiB free here, about 15000 MiB needed)"
    assert said_short in r.stderr, r.stderr


@pytest.mark.parametrize("name", ["browser", "fifo", "extras", "lerobot"])
def test_every_category_ci_requires_is_known(name):
    """An unknown name in REQUIRE is an error (a typo must not require nothing)."""
    r = pytest_run(["--collect-only", "tests/test_required_skips.py"], clean_env(REQUIRE=f"{name},no_such"))
    assert r.returncode != 0 and "REQUIRE: unknown ['no_such']" in r.stdout + r.stderr, r.stdout + r.stderr
