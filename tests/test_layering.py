"""Layering: the library (fdcontrol) never imports the service; the service does not pull in
the experiments' heavy optional dependencies (plots, arbitrary precision, progress bars)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import fdcontrol

SERVICE = "fdcontrol.server"  # the service package (source: server/)
LIBRARY_DIR = Path(fdcontrol.__file__).resolve().parent
HEAVY = ("matplotlib", "mpmath", "tqdm")  # used by fdcontrol.experiments and fdcontrol.plot only


def _is_service(name: str) -> bool:
    return name == SERVICE or name.startswith(SERVICE + ".")


def _fresh(code: str) -> dict:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_no_library_source_names_the_service():
    """Every import statement in fdcontrol/, lazy ones inside functions included."""
    found = []
    for path in sorted(LIBRARY_DIR.rglob("*.py")):
        if path.is_relative_to(LIBRARY_DIR / "server"):  # installed from a wheel, the service sits inside
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            found += [f"{path.relative_to(LIBRARY_DIR)}: {n}" for n in names if _is_service(n)]
    assert not found, found
    assert (LIBRARY_DIR / "cli.py").is_file()  # the scan saw the library (the cli imported it once)


def test_importing_every_library_module_never_imports_the_service():
    out = _fresh(f"""
import importlib, json, pkgutil, sys
import fdcontrol
names = ["fdcontrol"] + [m.name for m in pkgutil.walk_packages(fdcontrol.__path__, "fdcontrol.")
                         if not (m.name == {SERVICE!r} or m.name.startswith({SERVICE!r} + "."))]
for n in names:
    importlib.import_module(n)
print(json.dumps({{"modules": names, "service": sorted(m for m in sys.modules
                  if m == {SERVICE!r} or m.startswith({SERVICE!r} + "."))}}))
""")
    assert {"fdcontrol.cli", "fdcontrol.loop.cycle", "fdcontrol.experiments.batch",
            "fdcontrol.plot"} <= set(out["modules"])
    assert out["service"] == []


def test_the_service_app_does_not_import_the_experiments_heavy_dependencies():
    out = _fresh(f"""
import importlib.util, json, sys
import {SERVICE}.app, {SERVICE}.main
{SERVICE}.app.create_app()
print(json.dumps({{"installed": [m for m in {HEAVY!r} if importlib.util.find_spec(m)],
                  "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
""")
    assert out["installed"] == list(HEAVY)  # dependencies of the experiments: the check means something
    assert out["loaded"] == []
    # and the experiments do load them (the same check on the library side can see them)
    exp = _fresh("import json, sys, fdcontrol.experiments.batch, fdcontrol.plot; "
                 f"print(json.dumps({{'loaded': [m for m in {HEAVY!r} if m in sys.modules]}}))")
    assert set(exp["loaded"]) >= {"matplotlib", "tqdm"}
