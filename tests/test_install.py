"""A lean install: the package without extras is the library (numpy, scipy, pin), runs ``fdcontrol
analyze`` and a control loop, and every part whose extra is missing says in one line which to install.

The fresh environment is a new venv holding the wheel built from this source (offline, no build
isolation) and, of the development environment's packages, exactly the closure of the wheel's
declared core requirements (``Requires-Dist`` without extras, followed through each dependency's
own metadata), linked in — so nothing is downloaded and nothing undeclared is visible.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from fdcontrol.extras import EXTRAS

from .extras_env import closure as closure_of
from .extras_env import linked_venv
from .service import ROOT

#: what only an extra brings: none of it may be visible in the lean environment
NOT_CORE = ("fastapi", "starlette", "uvicorn", "pydantic", "yaml", "httpx", "msgpack", "orjson", "mcap", "mujoco",
            "cyclonedds", "numba", "matplotlib", "tqdm", "mpmath", "rtde_control", "websockets", "prometheus_client",
            "gymnasium", "ruckig", "pylibfranka", "foxglove", "uvloop")
#: modules that need an extra, and which (the service's own modules are the server extra's and not walked)
NEEDS = {"fdcontrol.client": "server", "fdcontrol.recording": "record", "fdcontrol.plot": "experiments",
         "fdcontrol.experiments": "experiments", "fdcontrol.drivers.mujoco": "mujoco",
         "fdcontrol.drivers.ros2_msgs": "ros2", "fdcontrol.limits.compiled": "fast",
         "fdcontrol.drivers.franka_compiled": "fast", "fdcontrol.model.jacobi": "fast",
         "fdcontrol.loop.state_compiled": "fast",
         "fdcontrol.env.service": "env", "fdcontrol.env.sim": "env", "fdcontrol.env.spaces": "env",
         "fdcontrol.export": "record", "fdcontrol.export_lerobot": "record"}

PROBE = r"""
import importlib, importlib.util, json, pkgutil, sys
import fdcontrol
from fdcontrol.extras import MissingExtra
ok, extra, broken = [], {}, {}
names = ["fdcontrol"] + [m.name for m in pkgutil.walk_packages(fdcontrol.__path__, "fdcontrol.")]
for n in names:
    if n.startswith("fdcontrol.server.") and n != "fdcontrol.server.main":
        continue
    try:
        importlib.import_module(n)
        ok.append(n)
    except MissingExtra as exc:
        extra[n] = [exc.extra, str(exc)]
    except ImportError as exc:
        broken[n] = f"{type(exc).__name__}: {exc}"
visible = [m for m in json.loads(sys.argv[1]) if importlib.util.find_spec(m) is not None]
print(json.dumps({"ok": ok, "extra": extra, "broken": broken, "visible": visible, "file": fdcontrol.__file__}))
"""

LOOP = r"""
import json
import numpy as np
from fdcontrol import RobotModel, make_mapping
from fdcontrol.drivers.simulated import SimulatedRobot
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver

robot = RobotModel.resolve("ur10")
q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
sim = SimulatedRobot(robot, dt=0.002, q0=q0)
limits = SafetyLimits.from_robot(robot)
loop = ControlLoop(robot, sim, make_solver(make_mapping("fd", robot)), limits=limits, rate=500.0)
for i in range(100):  # simulated time; the wrench re-sent every cycle, a live stream
    loop.set_wrench([5.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    loop._command = type(loop._command)(loop._command.wrench, loop._command.seq, i * 0.002)
    s = loop.step(now=i * 0.002)
print(json.dumps({"compiled": limits._compiled is not None, "moved": float(np.linalg.norm(sim.q - q0)),
                  "fault": s.fault, "cycle": s.cycle}))
"""


def _core_closure(wheel: Path) -> dict[str, importlib.metadata.Distribution]:
    """The wheel's Requires-Dist without extras, and theirs, as installed here."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        reqs = [line.split(":", 1)[1].strip() for line in z.read(meta).decode().splitlines()
                if line.startswith("Requires-Dist:")]
    return closure_of(Requirement(r) for r in reqs)


@pytest.fixture(scope="module")
def lean(tmp_path_factory):
    d = tmp_path_factory.mktemp("lean")
    src = d / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, src / name)
    for name in ("fdcontrol", "server", "urdf"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    # verbose: the build backend's own output (its warnings) is kept for test_the_build_prints_no_warnings
    built = subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-v", "-w",
                            str(d / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr
    (wheel,) = (d / "dist").glob("fdcontrol-*.whl")
    closure = _core_closure(wheel)
    py = linked_venv(d, closure.values())  # the declared core, linked in (the same files pip would install)
    venv = py.parent.parent
    inst = subprocess.run([*pip, "--python", str(py), "install", "--no-deps", "--no-index", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert inst.returncode == 0, inst.stderr
    check = subprocess.run([*pip, "--python", str(py), "check"], capture_output=True, text=True, timeout=120)
    return {"py": py, "bin": venv / "bin", "closure": sorted(closure), "check": check, "tmp": d,
            "build": built.stdout + built.stderr}


def _run(lean, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{lean['bin']}:/usr/bin:/bin", "HOME": str(lean["tmp"]), "MPLBACKEND": "Agg"}
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env, cwd=lean["tmp"])


def test_the_core_is_numpy_scipy_pin(lean):
    assert {"numpy", "scipy", "pin"} <= set(lean["closure"])
    assert not {"fastapi", "mujoco", "numba", "matplotlib", "cyclonedds", "mcap"} & set(lean["closure"])
    assert lean["check"].returncode == 0, lean["check"].stdout  # every requirement of fdcontrol is met
    assert sysconfig.get_paths()["purelib"] not in str(lean["py"])


def test_lean_install_imports_the_library_and_names_the_extras(lean):
    out = _run(lean, str(lean["py"]), "-c", PROBE, json.dumps(NOT_CORE))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["visible"] == []  # nothing of an extra leaks in: the check below means something
    assert str(lean["tmp"]) in got["file"]  # the installed wheel, not this source tree
    assert got["broken"] == {}, got["broken"]
    needs = {n: e for n, (e, _) in got["extra"].items() if not n.startswith("fdcontrol.experiments.")}
    assert needs == NEEDS
    for n, (e, msg) in got["extra"].items():
        assert f"pip install 'fdcontrol[{e}]'" in msg and "\n" not in msg, (n, msg)
        assert any(m in msg for m in EXTRAS[e]), msg
    assert {"fdcontrol.loop.cycle", "fdcontrol.limits.safety", "fdcontrol.drivers.registry", "fdcontrol.cli",
            "fdcontrol.server.main", "fdcontrol.drivers.ur_rtde", "fdcontrol.drivers.ros2"} <= set(got["ok"])


def test_lean_install_runs_analyze_and_a_loop(lean):
    q = "--q=0,-1.2,1.4,-1.8,-1.57,0.3"
    out = _run(lean, str(lean["bin"] / "fdcontrol"), "analyze", "--robot", "ur10", q, "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    here = subprocess.run([sys.executable, "-m", "fdcontrol.cli", "analyze", "--robot", "ur10", q, "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert got == json.loads(here.stdout)  # the same numbers as the full environment
    loop = _run(lean, str(lean["py"]), "-c", LOOP)
    assert loop.returncode == 0, loop.stderr
    s = json.loads(loop.stdout.strip().splitlines()[-1])
    assert not s["compiled"]  # without numba the limits run as Python loops
    assert s["fault"] is None and s["cycle"] == 100 and s["moved"] > 1e-4


@pytest.mark.parametrize(("argv", "extra"), [(["serve"], "server"), (["plot", "x.mcap"], "experiments"),
                                             (["experiments", "--quick"], "experiments")])
def test_a_command_without_its_extra_says_which_to_install(lean, argv, extra):
    out = _run(lean, str(lean["bin"] / "fdcontrol"), *argv)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pip install 'fdcontrol[{extra}]'" in lines[0], out.stderr


def test_the_build_prints_no_warnings(lean):
    """Building the package (what `make serve`'s install runs) prints no wall of setuptools warnings: the
    page's assets are declared package data (folders setuptools would otherwise warn it ignores) and the
    license is an SPDX expression (a TOML table stops building in 2027). "byte-compiling is disabled" is
    this machine's PYTHONDONTWRITEBYTECODE, not the package's."""
    noise = [line for line in lean["build"].splitlines()
             if re.search(r"Warning\b|would be ignored|is deprecated|^\s*!!\s*$", line)]
    assert not noise, "\n".join(noise[:20])
