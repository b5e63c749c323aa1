"""scripts/container.py's plumbing, without a container engine: a failing engine is said before any slow
step, a consumer that exits early never leaves the producer blocked on the pipe, and every file pip's
configuration names for each install (its constraints) reaches the build."""

from __future__ import annotations

import argparse
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


def test_removing_images_is_never_forced(container, tmp_path, monkeypatch):
    """podman's `rmi -f` also removes the containers that use the image (the deployed service, say): the build's
    clean-up and `make image-clean` never force; the engine's refusal keeps an image in use (checked with the real
    engine in `make image-test`)."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "podman"
    fake.write_text(f"""#!/bin/sh
echo "$*" >> {log}
case "$1 $2" in
  "images -q") echo sha256:build0; echo sha256:build1 ;;
  "image inspect") echo sha256:0ld1mage ;;
  rmi*) exit 2 ;;
esac
exit 0
""")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CONTAINER_ENGINE", str(fake))
    engine = container.Engine()
    assert container.prune_leftovers(engine) == 0  # the engine refused: nothing counted as removed
    assert container.clean(argparse.Namespace(tag="localhost/fdcontrol:latest")) == 1  # refused: said, not forced
    rmis = [ln.split() for ln in log.read_text().splitlines() if ln.startswith("rmi")]
    assert rmis and all(not {"-f", "--force"} & set(args) for args in rmis), rmis
    assert ["rmi", "sha256:build0", "sha256:build1"] in rmis and ["rmi", "localhost/fdcontrol:latest"] in rmis
    assert all("label=org.fdcontrol.stage=build" in ln for ln in log.read_text().splitlines()
               if ln.startswith("images"))
