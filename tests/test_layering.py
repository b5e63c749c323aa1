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


def _imports(path: Path, package: str) -> list[str]:
    """Every module an import statement of `path` names (relative ones resolved, lazy ones and those
    under TYPE_CHECKING included: ast.walk sees every statement)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            out += [base, *(f"{base}.{a.name}" for a in node.names)]
    return out


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_control_layer_never_imports_the_loop():
    """Dependencies run loop → control → model: no module under fdcontrol/control/ imports fdcontrol.loop,
    not even for type checking."""
    control = LIBRARY_DIR / "control"
    found = []
    for path in sorted(control.rglob("*.py")):
        parts = path.relative_to(LIBRARY_DIR).with_suffix("").parts
        package = ".".join(("fdcontrol", *parts[:-1]))
        found += [f"{path.relative_to(LIBRARY_DIR)}: {n}" for n in _imports(path, package)
                  if _under(n, "fdcontrol.loop")]
    assert len(list(control.rglob("*.py"))) > 10  # the scan saw the control layer
    assert not found, found


def test_the_layer_scan_sees_type_checking_and_relative_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fdcontrol.loop.cycle import X\n"
                 "def g():\n    from ..loop import stages\n")
    names = _imports(f, "fdcontrol.control")
    assert "fdcontrol.loop.cycle" in names and "fdcontrol.loop.stages" in names


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


# ---------------------------------------------------------------------- the service: no circle, a lean loop process
SERVER_DIR = Path(__file__).resolve().parent.parent / "server"  # the service's source (installed as fdcontrol.server)
WEB = ("fastapi", "starlette")


def _server_imports() -> dict[str, set[str]]:
    """Module → the service modules it imports (every import statement, lazy ones inside functions included)."""
    mods = {}
    for path in sorted(SERVER_DIR.rglob("*.py")):
        parts = path.relative_to(SERVER_DIR).with_suffix("").parts
        name = ".".join((SERVICE, *parts[:-1])) if parts[-1] == "__init__" else ".".join((SERVICE, *parts))
        mods[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                targets.add(base)
                targets |= {f"{base}.{a.name}" for a in node.names}  # `from pkg import module`
        graph[name] = {t for t in targets if t in mods and t != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_circle_detector_finds_circles():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set(), "c": {"b"}}) == []
    # the two circles the service once had
    had = {"w": {"sim"}, "sim": {"errors"}, "errors": {"w"}, "ring": {"w"}}
    assert _circles({**had, "w": {"sim", "ring"}}) == [["errors", "ring", "sim", "w"]]


def test_no_import_circle_in_the_service():
    graph = _server_imports()
    assert {f"{SERVICE}.worker", f"{SERVICE}.routers.sim", f"{SERVICE}.errors", f"{SERVICE}.record_ring"} <= set(graph)
    assert f"{SERVICE}.worker" in graph[f"{SERVICE}.routers.sim"]  # the scan sees imports (lazy ones too)
    assert _circles(graph) == []


def test_the_loop_process_imports_no_web_framework():
    """The real loop process (spawned by LoopWorker, MuJoCo driver) lists its own sys.modules."""
    out = _fresh(f"""
import json, sys
from {SERVICE}.settings import Settings
from {SERVICE}.worker import LoopWorker
w = LoopWorker(Settings())
try:
    mods = w.call("modules")
    w.call("start")
    state = w.state()[0]
finally:
    w.close()
print(json.dumps({{"web": [m for m in mods if m.split(".")[0] in {WEB!r}], "n": len(mods),
                  "loop": "fdcontrol.loop.cycle" in mods, "mujoco": "mujoco" in mods, "running": state.running}}))
""")
    assert out["loop"] and out["mujoco"] and out["n"] > 100  # it is the loop process, with its driver
    assert out["web"] == []
