"""scripts/container.py's plumbing, without a container engine: a failing engine is said before any slow
step, a consumer that exits early never leaves the producer blocked on the pipe, and every file pip's
configuration names for each install (its constraints) reaches the build."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def container():
    spec = importlib.util.spec_from_file_location("fdcontrol_container_script", ROOT / "scripts" / "container.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_consumer_exiting_early_ends_the_producer(container):
    # `yes` writes forever; the consumer fails at once, as `podman import` does without its OCI runtime.
    # With the parent still holding the pipe's reading end, `yes` would block on the full pipe for good
    # (the wait below would then end the test with TimeoutExpired, not hang it).
    r = container.pipe_into(["yes"], ["sh", "-c", "echo 'Error: default OCI runtime \"runc\" not found' >&2; exit 125"],
                            dict(os.environ), timeout=30)
    assert r.returncode == 125
    assert "runc" in r.stderr


def test_producer_failure_fails_the_pipe(container):
    r = container.pipe_into(["sh", "-c", "echo data; exit 3"], ["cat"], dict(os.environ), timeout=30)
    assert r.returncode == 3 and r.stdout == "data\n"


def test_an_engine_that_cannot_run_is_said_first(container, tmp_path, monkeypatch):
    fake = tmp_path / "podman"
    fake.write_text("#!/bin/sh\necho 'Error: default OCI runtime \"runc\" not found: invalid argument' >&2\nexit 125\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CONTAINER_ENGINE", str(fake))
    problem = container.engine_problem(container.Engine())
    assert problem is not None and 'OCI runtime "runc" not found' in problem
    ok = tmp_path / "okengine"
    ok.write_text("#!/bin/sh\nexit 0\n")
    ok.chmod(ok.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CONTAINER_ENGINE", str(ok))
    assert container.engine_problem(container.Engine()) is None


def test_the_constraints_file_reaches_the_build(container, tmp_path, monkeypatch):
    cons = tmp_path / "pipcfg" / "constraints.txt"
    cons.parent.mkdir()
    cons.write_text("torch<=2.14.1\n")
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nconstraint = {cons}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    text, dirs, _ = container.pip_config()
    assert str(cons) in text  # the build's pip reads it …
    assert str(cons.parent) in dirs  # … from the folder mounted into the build
