"""The README's quick start, typed one line at a time against `make serve`'s service (the MuJoCo UR10):
every command of its shell blocks runs as written (curl and the example script; only the address
differs), answers without an error, and the arm does what the text beside it says. The service and the
example run in an environment that holds only what `make serve` installs (the extras of its install rule
in the Makefile), as on a fresh clone. Outcomes are read from the loop's record."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time

import numpy as np
import pytest

from .extras_env import closure, declared, installed_fdcontrol, linked_venv
from .service import ROOT, Service

README = (ROOT / "README.md").read_text()
DEADLINE = 90.0  # s: only ends a hung test


def quick_start_commands() -> list[str]:
    """Every command in the bash blocks of the README's quick start, after `make serve`/`make test`."""
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        pending = ""
        for line in block.splitlines():
            pending = f"{pending}\n{line}" if pending else line
            try:
                shlex.split(pending, comments=True)
            except ValueError:  # an open quote: the command goes on in the next line
                continue
            if pending.strip() and not pending.lstrip().startswith("make "):
                commands.append(pending.strip())
            pending = ""
    return commands


def serve_extras() -> list[str]:
    """The extras `make serve` installs: its install rule in the Makefile."""
    rule = (ROOT / "Makefile").read_text().split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    (extras,) = re.findall(r"pip install -q -e '\.\[([^\]]*)\]'", rule)
    return extras.split(",")


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    # the service and the example see only what `make serve` installs: a route that needs more (an extra
    # it leaves out) fails here as on a fresh clone, although the test environment has every extra
    python = linked_venv(tmp_path_factory.mktemp("serve"),
                         [installed_fdcontrol(), *closure(declared(serve_extras())).values()])
    s = Service(python=str(python))  # the defaults, as `make serve` runs them
    s.python = str(python)
    yield s
    s.stop()


def run(svc: Service, command: str) -> str:
    cmd = command.replace("127.0.0.1:8000", f"127.0.0.1:{svc.port}")
    cmd = cmd.replace(".venv/bin/python", shlex.quote(getattr(svc, "python", sys.executable)))
    if "examples/" in cmd:  # the script's own flag for the address, before the line's comment
        cmd = cmd.split("#", 1)[0].rstrip() + f" --url http://127.0.0.1:{svc.port}"
    p = subprocess.run(["bash", "-c", cmd], cwd=ROOT,
                       capture_output=True, text=True, timeout=DEADLINE)
    assert p.returncode == 0, f"{command!r} failed ({p.returncode}): {p.stderr[-1500:]}"
    try:  # curl -s exits 0 on an HTTP error: the service's error body ({"detail": …}, no "ok") says it
        reply = json.loads(p.stdout)
    except ValueError:
        reply = None
    assert not (isinstance(reply, dict) and reply.get("detail") and "ok" not in reply), f"{command!r}: {p.stdout}"
    return p.stdout


def state(svc: Service) -> dict:
    return json.loads(run(svc, "curl -s 127.0.0.1:8000/state"))


def wait(svc: Service, ok, what: str) -> dict:
    end = time.monotonic() + DEADLINE
    s: dict = {}
    while time.monotonic() < end:
        s = state(svc)
        if ok(s):
            return s
    pytest.fail(f"never: {what}; last state: tip {tip(s)}, |qd| {np.linalg.norm(s['qd']):.3g}, "
                f"max|qd_ref| {np.abs(s['qd_ref']).max():.3g}, f_measured {s['f_measured']}, mode {s['mode']}, "
                f"holding {s['holding']}, watchdog {s['watchdog']}, fault {s['fault']}")


def tip(s: dict) -> np.ndarray:
    return np.array(s["tip_pose"])[:3, 3]


def test_the_quick_start_runs_line_by_line_as_it_says(svc):
    commands = quick_start_commands()
    assert any("/sim/push" in c for c in commands) and any("/control/home" in c for c in commands)
    home = tip(state(svc))
    for command in commands:
        before = state(svc)
        out = run(svc, command)
        if "/health" in command:
            assert json.loads(out)["status"] == "ok"
        elif "-XPUT" in command and "/control/wrench" in command:
            # one wrench pushes for one watchdog period, then the arm holds
            s = wait(svc, lambda s, c=before["cycle"]: s["cycle"] > c and s["watchdog"] == "tripped"
                     and s["holding"] and not any(s["qd_ref"]), "the arm holds after one wrench")
            assert tip(s)[0] > tip(before)[0] + 1e-5  # it moved along +x first
        elif "examples/push_sinusoid.py" in command:
            assert "tip starts at" in out
        elif '"mode":"force"' in command or '"mode":"admittance"' in command:
            assert json.loads(out)["mode"] in command
        elif '"hold":false' in command:
            assert json.loads(out)["holding"] is False
        elif "-XPUT" in command and "/sim/push" in command:
            x0 = tip(before)[0]
            wait(svc, lambda s, x0=x0: tip(s)[0] > x0 + 0.01, "the hand moves the tool along +x")
            # typed one line at a time the hand keeps pushing: the tool comes to rest at the start
            # workspace's +x face (inside its margin), not at the end of the arm's reach
            box = json.loads(run(svc, "curl -s 127.0.0.1:8000/config"))["workspace_box"]
            assert box is not None, "the simulated arm starts with a workspace box"
            s = wait(svc, lambda s, x0=x0: tip(s)[0] > x0 + 0.05 and np.linalg.norm(s["qd"]) < 1e-3
                     and np.abs(s["qd_ref"]).max() < 1e-4, "the pushed tool comes to rest")
            assert box["max"][0] - box["margin"] < tip(s)[0] <= box["max"][0], (tip(s), box)
            assert np.all(tip(s) >= np.array(box["min"])) and np.all(tip(s) <= np.array(box["max"])), (tip(s), box)
            # it did not drop, nor swing sideways: at rest up to about a centimetre off the push's line
            assert np.linalg.norm(tip(s)[1:] - tip(before)[1:]) < 0.02, (tip(s), tip(before))
        elif "-XDELETE" in command and "/sim/push" in command:
            # let go: the tool stops (force mode, nothing pushes)
            wait(svc, lambda s: np.linalg.norm(s["qd"]) < 1e-3 and np.abs(s["qd_ref"]).max() < 1e-6, "the tool stops")
        elif "/control/home" in command:
            s = wait(svc, lambda s: s["move_status"] == "done", "the move home ends")
            assert np.linalg.norm(tip(s) - home) < 0.01, (tip(s), home)


def test_the_quick_starts_make_lines_do_what_the_readme_says():
    """`make serve PORT=8001` serves on that port and `make test PYTEST_ARGS=…` hands the options to pytest
    with progress as a count (make -n: the commands, not run)."""
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    make = ["make", "-n", "-C", str(ROOT)]
    serve = subprocess.run([*make, "serve", "PORT=8001"], capture_output=True, text=True, timeout=60)
    assert "`make serve PORT=8001`" in section and "fdcontrol serve --host 127.0.0.1 --port 8001" in serve.stdout, \
        serve.stdout + serve.stderr
    quick = re.search(r"`make test PYTEST_ARGS='([^']+)'`", section)
    assert quick, "the README gives the quick subset"
    test = subprocess.run([*make, "test", f"PYTEST_ARGS={quick.group(1)}"], capture_output=True, text=True,
                          timeout=60)
    assert f"-m pytest -q -o console_output_style=count {quick.group(1)}" in test.stdout, test.stdout + test.stderr
