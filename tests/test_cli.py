"""`fdcontrol analyze` as a user runs it: a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from fdcontrol import ForwardDynamics, RobotModel, analyze


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fdcontrol.cli", *args], capture_output=True,
                          text=True, timeout=60)


def test_analyze_json_matches_library():
    q = "0.1,-1.2,1.5,-0.3,1.2,0.4"
    p = run("analyze", "--robot", "ur10", "--q", q, "--mapping", "all", "--gamma", "500",
            "--type", "cartesian", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert set(out["mappings"]) == {"ji", "jt", "dls", "sdls", "fd"}  # the shipped mappings
    qv = np.array([float(x) for x in q.split(",")])
    ref = analyze(ForwardDynamics(RobotModel.load("ur10"), 500, gamma_schedule="conditioning").cartesian(qv))
    np.testing.assert_allclose(out["mappings"]["fd"]["singular_values"], ref.singular_values)


def test_analyze_table_and_singular_json():
    p = run("analyze", "--robot", "ur10", "--q", "0,0,0,0,0,0", "--mapping", "ji", "--json")
    assert p.returncode == 0
    ji = json.loads(p.stdout)["mappings"]["ji"]
    assert ji["singular"] is True and ji["condition"] is None
    table = run("analyze", "--robot", "panda", "--q", "0,-0.3,0,-2,0,1.8,0.7")
    assert table.returncode == 0 and "fd" in table.stdout and "kappa" in table.stdout


@pytest.mark.parametrize("args,message", [
    (("--robot", "ur5", "--q", "0,0,0,0,0,0"), "unknown robot 'ur5'"),
    (("--robot", "ur10", "--q", "0,0"), "must have 6 entries"),
    (("--robot", "ur10", "--q", "0,0,nan,0,0,0"), "NaN or Inf"),
    (("--robot", "ur10", "--q", "0,zero,0,0,0,0"), "cannot parse"),
    (("--robot", "ur10", "--tip", "flange", "--q", "0,0,0,0,0,0"), "available frames"),
    (("--robot", "ur10", "--q", "0,0,0,0,0,0", "--gamma", "-1"), "gamma must be ≥ 1e-06"),
])
def test_analyze_bad_input_exits_2_with_one_line(args, message):
    p = run("analyze", *args)
    assert p.returncode == 2
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1


Q_NEG = [-1.2, 0.3, 1.5, -0.3, 1.2, 0.4]


@pytest.mark.parametrize("form", [
    ("--q=-1.2,0.3,1.5,-0.3,1.2,0.4",),
    ("--q", "-1.2,0.3,1.5,-0.3,1.2,0.4"),
    ("--q", "-1.2", "0.3", "1.5", "-0.3", "1.2", "0.4"),
])
def test_analyze_accepts_q_starting_with_a_negative_value(form):
    p = run("analyze", "--robot", "ur10", *form, "--mapping", "ji", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["q"] == Q_NEG


def test_analyze_json_shape_is_the_documented_one():
    from fdcontrol.cli import ANALYZE_JSON
    from fdcontrol.mappings import MAPPING_NAMES

    p = run("analyze", "--robot", "ur10", "--q=-1.2,0.3,1.5,-0.3,1.2,0.4", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert set(out) == {"robot", "q", "type", "manipulability_J", "mappings", "why_singular"}
    assert set(out["mappings"]) == set(MAPPING_NAMES)
    for r in out["mappings"].values():
        assert set(r) == {"params", "singular_values", "sigma_min", "sigma_max", "condition", "singular",
                          "manipulability"}
    for key in (*out, *next(iter(out["mappings"].values()))):  # the help text names every key
        assert f'"{key}"' in ANALYZE_JSON
    assert '"mappings": {<mapping name>' in run("analyze", "--help").stdout


def test_the_fdcontrol_command_is_the_library_commands_plus_serve():
    """The console script is the service's main (pyproject), which adds ``serve`` to the library's
    parser; ``python -m fdcontrol.cli`` (the library alone) has no ``serve``."""
    import importlib
    import re
    import tomllib
    from pathlib import Path

    script = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())[
        "project"]["scripts"]["fdcontrol"]
    module, func = script.split("#")[0].strip().split(":")
    assert callable(getattr(importlib.import_module(module), func))
    full = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60)
    lib = run("--help")
    assert full.returncode == 0 and lib.returncode == 0, full.stderr + lib.stderr

    def commands(text: str) -> list[str]:
        return re.search(r"\{([a-z,]+)\}", text).group(1).split(",")  # type: ignore[union-attr]

    assert commands(full.stdout) == ["analyze", "experiments", "serve", "plot", "teleop", "export"]
    assert commands(lib.stdout) == ["analyze", "experiments", "plot", "teleop", "export"]
    args = ["analyze", "--robot", "ur10", "--q", "0.1,-1.2,1.5,-0.3,1.2,0.4", "--json"]
    same = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=60)
    assert same.returncode == 0 and json.loads(same.stdout) == json.loads(run(*args).stdout)


def test_serve_says_where_it_runs_and_how_to_get_in():
    """A person who types `make serve` sees what runs, the dashboard's address and the access rule."""
    from tests.service import Service

    svc = Service("--driver", "simulated")
    try:
        line = svc.output().splitlines()[0]  # printed before the server accepts
    finally:
        svc.stop()
    assert line.startswith("fdcontrol serve: ur10 on the simulated driver at 500 Hz"), line
    assert f"dashboard http://127.0.0.1:{svc.port}/" in line and "no token (loopback)" in line


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`fdcontrol analyze … --json | head -c 1`: the pipe closes before the output is written."""
    p = subprocess.Popen([sys.executable, "-m", "fdcontrol.cli", "analyze", "--robot", "ur10",
                          "--q=-1.2,0.3,1.5,-0.3,1.2,0.4", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # the reader is gone before the command prints
    err = p.stderr.read().decode()
    assert p.wait(60) == 0 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_a_taken_port_is_said_at_once_with_the_way_to_choose_another():
    """`make serve` with the port taken: one line naming the port and how to choose another, before the
    loop process is started (the port is bound first)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "fdcontrol.server.main", "serve", "--port", str(port)],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert f"port {port} on 127.0.0.1 is already in use" in last, r.stderr
    assert f"make serve PORT={port + 1}" in last and f"--port {port + 1}" in last
    assert "the loop process" not in r.stderr and "control loop" not in r.stderr  # no loop was started


def test_analyze_says_why_every_mapping_is_singular():
    """At q = 0 (the UR10 stretched, wrist axes aligned) every mapping shows σmin ≈ 0: the output says J's
    rank and the tip direction it loses; a bent pose gets no such line."""
    import json

    import numpy as np

    from fdcontrol import RobotModel

    r = run("analyze", "--robot", "ur10", "--q=0,0,0,0,0,0", "--json")
    note = json.loads(r.stdout)["why_singular"]
    J = RobotModel.load("ur10").jacobian(np.zeros(6))
    rank = np.linalg.matrix_rank(J, tol=1e-9 * np.linalg.norm(J, 2))
    assert rank < 6 and f"rank {rank} of 6" in note
    assert "stretched arm" in note
    text = run("analyze", "--robot", "ur10", "--q=0,0,0,0,0,0").stdout
    assert text.strip().splitlines()[-1] == note
    bent = run("analyze", "--robot", "ur10", "--q=0.1,-1.2,1.5,-0.3,1.2,0.4", "--json")
    assert json.loads(bent.stdout)["why_singular"] is None
