"""The numba kernels compiled ahead (fdcontrol.kernels), and the service's wait for a slow first start."""

from __future__ import annotations

import importlib
import json
import os
import pickle
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fdcontrol.kernels import KERNEL_MODULES

ROOT = Path(__file__).resolve().parents[1]
JIT = re.compile(r"\bnumba\.n?jit\(|@numba\.n?jit\b|@njit\b|\bnjit\(")


def _kernel_modules_in_sources() -> set[str]:
    found = set()
    for path in (ROOT / "fdcontrol").rglob("*.py"):
        if JIT.search(path.read_text()):
            found.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return found


def test_the_list_names_every_module_with_numba_kernels_and_nothing_else() -> None:
    found = _kernel_modules_in_sources()
    assert len(found) >= 10  # the scan finds the kernels at all
    assert set(KERNEL_MODULES) == found
    assert len(KERNEL_MODULES) == len(set(KERNEL_MODULES))


def test_python_m_fdcontrol_kernels_imports_each_and_leaves_its_cache() -> None:
    pytest.importorskip("numba")
    out = subprocess.run([sys.executable, "-m", "fdcontrol.kernels"], capture_output=True, text=True, timeout=900,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout
    for name in KERNEL_MODULES:
        assert f"  {name}: " in out
        path = ROOT / Path(*name.split("."))
        assert list(path.parent.glob(f"__pycache__/{path.name}.*.nbi")), f"no numba cache index for {name}"
    assert f"{len(KERNEL_MODULES)} modules' kernels compiled or loaded" in out


def run(code: str) -> str:
    """What `code` prints, run in a fresh Python process from the tree (it must succeed)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout


def test_the_link_geometrys_kernels_are_ready_after_compile_kernels_not_at_a_loops_first_call() -> None:
    """The link geometry's kernels (fdcontrol.model.collision) do not compile at import: without the warm-up of
    compile_kernels the first loop given a volume compiles them as its parts are built (tens of seconds on a loaded
    machine, which that configuration change waits for). In a fresh process, after
    compile_kernels, the distances and the velocity damper have their compiled form; and what it compiled is in
    numba's cache: a later process's loop with a keep-out box and self-collision loads them all, compiling none."""
    pytest.importorskip("numba")
    code = ("from fdcontrol.kernels import compile_kernels\n"
            "from fdcontrol.model import collision\n"
            "assert not collision.clearances_flat.signatures and not collision.damp.signatures  # lazy\n"
            "compile_kernels()\n"
            "print(len(collision.clearances_flat.signatures), len(collision.damp.signatures))\n")
    out = run(code)
    flat, damp = map(int, out.split())
    assert flat >= 1 and damp >= 1, out
    later = ("from fdcontrol.kernels import warm_first_calls\n"  # the service's loop given a volume, stepped
             "from fdcontrol.model import collision\n"
             "warm_first_calls()\n"
             "for k in (collision.clearances_flat, collision.damp):\n"
             "    print(sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values()))\n")
    out = run(later)
    (flat_hits, flat_misses), (damp_hits, damp_misses) = (map(int, line.split()) for line in out.splitlines())
    assert flat_hits >= 1 and damp_hits >= 1 and flat_misses == damp_misses == 0, out


def test_the_warm_up_loop_runs_without_a_fault() -> None:
    """warm_first_calls' keep-out box is placed clear of every link at the UR10's home pose (the tilted forearm
    overlapped a box centred 2 cm above the forearm's middle, so the warm-up loop held with a fault): its loop, pushed
    up towards the box for 300 cycles, ends without one."""
    from fdcontrol.kernels import warm_first_calls
    assert warm_first_calls() is None


#: a fresh process: a loop running without a volume is given a keep-out box 2 cm above the UR10's forearm and
#: self-collision, then pushed up into the box; how often each link geometry kernel was loaded (from numba's cache)
#: or compiled, before the parts are built, after, and after 300 cycles; the cycles' calls of the damper and of
#: the distances
VOLUME_GIVEN = """
import json
import numpy as np
import pinocchio as pin
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.limits import collision as limit
from fdcontrol.loop.build import build_loop, build_parts, loop_params
from fdcontrol.model import collision
from fdcontrol.model.robot import HOME, RobotModel

def loads():
    return [sum(k.stats.cache_hits.values()) + sum(k.stats.cache_misses.values())
            for k in (collision.clearances_flat, collision.damp)]

robot = RobotModel.load("ur10")
q0 = np.asarray(HOME["ur10"], dtype=float)
data = robot.model.createData()
pin.forwardKinematics(robot.model, data, q0)
cap = next(c for c in robot.geometry.capsules if c.link == "forearm_link")
X = robot._oMb.inverse() * data.oMi[cap.joint]  # the forearm's joint in the base frame
a, b = X.act(cap.a), X.act(cap.b)
h = 0.05
c = np.array([(a[0] + b[0]) / 2, (a[1] + b[1]) / 2, max(a[2], b[2]) + cap.radius + h + 0.02])
box = {"name": "ahead", "box": {"min": (c - h).tolist(), "max": (c + h).tolist()}, "margin": 0.0}
loop = build_loop(driver=SimulatedRobot(robot, dt=0.002, q0=q0), robot=robot)
for k in range(10):
    loop.step(now=k * 0.002)
before = loads()
parts = build_parts(robot, loop_params(keep_out=[box], self_collision=True), loop=loop)
built = loads()
calls = {"damp": 0, "compute": 0}
damp, compute = limit.damp, collision.Clearance.compute

def counted_damp(*args):
    calls["damp"] += 1
    return damp(*args)

def counted_compute(self, q):
    calls["compute"] += 1
    return compute(self, q)

limit.damp, collision.Clearance.compute = counted_damp, counted_compute
loop.reconfigure(**parts)
for k in range(10, 310):
    loop.set_wrench(np.array([0.0, 0.0, 15.0, 0.0, 0.0, 0.0]), t=k * 0.002)
    loop.step(now=k * 0.002)
print(json.dumps({"before": before, "built": built, "stepped": loads(), **calls, "fault": loop.fault}))
"""


def test_a_loop_given_a_volume_loads_the_link_geometrys_kernels_when_its_parts_are_built_never_in_a_cycle() -> None:
    """The distances' and the velocity damper's kernels (not compiled at import) are loaded
    from numba's cache — or compiled — when a Clearance is built (the parts a volume brings, built outside the loop),
    so the first cycle with a volume loads none: it did, for about 0.2 s (a compilation, without the cache, takes
    tens of seconds on a loaded machine). In a fresh process (nothing loaded yet), by numba's own count of each
    kernel's loads and compilations; the cycles did call both kernels."""
    pytest.importorskip("numba")
    out = json.loads(run(VOLUME_GIVEN))
    assert out["before"] == [0, 0], out  # nothing loaded by the loop without a volume
    assert out["built"] == [1, 1], out  # each loaded (or compiled) once, while the parts were built
    assert out["stepped"] == out["built"], out  # and never by a cycle
    assert out["compute"] >= 300 and out["damp"] > 0 and out["fault"] is None, out


# targets of the loop process for the start tests (spawned: module-level functions)
def exits_at_once(*_: object) -> None:
    os._exit(3)


def starts_late(*args: object) -> None:
    time.sleep(1.5)
    from fdcontrol.server.loop_process import main
    main(*args)  # type: ignore[arg-type]


@pytest.fixture
def quick_slow_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from fdcontrol.server import worker
    monkeypatch.setattr(worker, "SLOW_START", 0.3)


def test_a_loop_process_that_dies_while_starting_is_said_with_its_exit_code_at_once(quick_slow_start: None) -> None:
    pytest.importorskip("fastapi")
    from fdcontrol.server.settings import Settings
    from fdcontrol.server.worker import LoopWorker, WorkerError
    # (a wait that ignored the death would end in "did not start in 120 s" instead: no clock needed here)
    with pytest.raises(WorkerError, match=r"exited while starting \(exit code 3\)"):
        LoopWorker(Settings(realtime=False), start_timeout=120.0, target=exits_at_once)


def test_a_slow_start_is_waited_for_and_said_once_and_a_start_past_the_timeout_fails(quick_slow_start: None) -> None:
    pytest.importorskip("fastapi")
    from fdcontrol.server.settings import Settings
    from fdcontrol.server.worker import LoopWorker, WorkerError
    told: list[float] = []
    with pytest.raises(WorkerError, match=r"did not start in 0\.5 s"):
        LoopWorker(Settings(realtime=False), start_timeout=0.5, target=starts_late)
    w = LoopWorker(Settings(realtime=False), start_timeout=300.0, target=starts_late,
                   on_slow_start=lambda: told.append(time.monotonic()))
    try:
        assert len(told) == 1  # said once, while it waited
        assert w.problem() is None and w.proc.is_alive()
        if importlib.util.find_spec("numba") is not None:  # what became of the loop process's kernels, told
            assert w.kernels is not None and w.kernels["numba"] and w.kernels["error"] is None
            from fdcontrol.server import schemas
            from fdcontrol.server.routers.health import health
            request: Any = SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(worker=w, supervisor=None)))
            body = health(request)
            assert body["kernels"] == f"compiled (numba {w.kernels['numba']})" and schemas.Health(**body)
            w.kernels = {**w.kernels, "recompiled": [["fdcontrol.loop.stages", "_advance", "EOFError: Ran out"]]}
            assert health(request)["kernels"] == (f"compiled (numba {w.kernels['numba']}); compiled afresh, their "
                                                  "numba cache unreadable: fdcontrol.loop.stages._advance (EOFError: "
                                                  "Ran out)")
    finally:
        w.close()


# ---- a kernel whose cache cannot be read, and numba missing or broken (fdcontrol.kernel_cache) ----
CONF = "fdcontrol.model.configuration"  # one small kernel (_q_ok), compiled in about a second


@pytest.fixture
def fresh_configuration(monkeypatch: pytest.MonkeyPatch) -> Callable[[], Any]:
    """Import fdcontrol.model.configuration anew (its kernels compiled or loaded again) as often as asked; the
    module the other tests use is put back afterwards, and so is what kernel_cache recorded."""
    import fdcontrol.model
    from fdcontrol import kernel_cache

    original = importlib.import_module(CONF)
    monkeypatch.setattr(fdcontrol.model, "configuration", original)  # (each import rebinds it: restored)
    monkeypatch.setattr(kernel_cache, "_RECOMPILED", [])

    def fresh() -> Any:
        monkeypatch.delitem(sys.modules, CONF, raising=False)
        return importlib.import_module(CONF)

    return fresh


def _index(cache: Path) -> Path:
    (index,) = cache.rglob("configuration._q_ok_py-*.nbi")
    return index


def _damage(index: Path, how: str) -> None:
    """An index (or the data it names) as another numba or Python would have left it, or cut short."""
    if how == "foreign":  # numba's version first, then a pickle that names a module this Python lacks
        with index.open("rb") as f:
            pickle.load(f)
            head = index.read_bytes()[: f.tell()]
        index.write_bytes(head + b"cfdcontrol_numba_from_elsewhere\nIndex\n(tR.")
    elif how == "truncated index":
        index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    else:  # "truncated data"
        (data,) = index.parent.glob("configuration._q_ok_py-*.nbc")
        data.write_bytes(data.read_bytes()[:40])


@pytest.mark.parametrize("how", ["foreign", "truncated index", "truncated data"])
def test_a_kernel_whose_cache_cannot_be_read_is_said_compiled_afresh_and_its_cache_written_again(
        how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_configuration: Callable[[], Any]) -> None:
    numba = pytest.importorskip("numba")
    from fdcontrol import kernel_cache

    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))  # (read as each kernel is made)
    first = fresh_configuration()
    assert first._q_ok is not first._q_ok_plain  # compiled, and cached in tmp_path
    _damage(_index(tmp_path), how)

    # before: a "foreign" cache (ModuleNotFoundError, an ImportError) was taken for a missing numba and the
    # Python form ran without a word; a cut-short one made the import fail
    with pytest.warns(RuntimeWarning, match=r"the numba cache of fdcontrol\.model\.configuration\._q_ok_py could "
                                            r"not be read \((ModuleNotFoundError|UnpicklingError|EOFError)"):
        second = fresh_configuration()
    assert second._q_ok is not second._q_ok_plain and isinstance(second._q_ok, numba.core.dispatcher.Dispatcher)
    stats = second._q_ok.stats
    assert sum(stats.cache_hits.values()) == 0 and sum(stats.cache_misses.values()) == 1  # compiled afresh
    assert second._q_ok(np.array([1.0, 2.0]), 2) is True and second._q_ok(np.array([1.0, np.nan]), 2) is False
    (recompiled,) = kernel_cache.status()["recompiled"]
    assert recompiled[:2] == [CONF, "_q_ok_py"]
    line = kernel_cache.summary()
    assert line.startswith("compiled (numba ") and "fdcontrol.model.configuration._q_ok_py (" in line
    assert not kernel_cache.ok()

    with warnings.catch_warnings():  # the cache written again: the next import loads it, and says nothing
        warnings.simplefilter("error")
        third = fresh_configuration()
    assert sum(third._q_ok.stats.cache_hits.values()) == 1


def test_an_error_of_a_kernels_load_that_is_not_its_cache_being_read_is_raised_as_it_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_configuration: Callable[[], Any]) -> None:
    """Only what numba raises reading the entry (its files, the kernel rebuilt from them) is an unreadable cache,
    said and compiled afresh; an error elsewhere in the load (here numba's key of the entry, as a bug would raise
    it) is raised as it is, not said to be the cache's and hidden by a compilation."""
    numba = pytest.importorskip("numba")
    from numba.core import caching

    from fdcontrol import kernel_cache

    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    fresh_configuration()  # compiled, and cached in tmp_path

    def rebuild(self: Any, target_context: Any, payload: Any) -> Any:
        raise TypeError("a payload this numba cannot take")

    with monkeypatch.context() as m:  # the entry read, but not rebuilt into a kernel: the cache's
        m.setattr(caching.CompileResultCacheImpl, "rebuild", rebuild)
        with pytest.warns(RuntimeWarning, match=r"numba cache of fdcontrol\.model\.configuration\._q_ok_py could not "
                                                r"be read \(TypeError: a payload this numba cannot take\)"):
            conf = fresh_configuration()
    assert sum(conf._q_ok.stats.cache_misses.values()) == 1 and len(kernel_cache.status()["recompiled"]) == 1

    def index_key(self: Any, sig: Any, codegen: Any) -> Any:
        raise RuntimeError("a bug in the key")

    monkeypatch.setattr(kernel_cache, "_RECOMPILED", [])
    monkeypatch.setattr(caching.Cache, "_index_key", index_key)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing said of a cache
        with pytest.raises(RuntimeError, match="a bug in the key"):
            fresh_configuration()
    assert kernel_cache.status()["recompiled"] == []


def test_a_numba_that_imports_without_its_cache_module_compiles_and_says_what_failed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """numba imports but ``numba.core.caching`` does not (another numba's layout): its kernels compile — not "numba
    failed to import", which would make ``python -m fdcontrol.kernels`` compile nothing and fail — and the warning
    names the module that failed, with its error."""
    numba = pytest.importorskip("numba")
    from fdcontrol import kernel_cache

    monkeypatch.delattr(numba.core, "caching")
    monkeypatch.setitem(sys.modules, "numba.core.caching", None)  # its import raises ModuleNotFoundError
    monkeypatch.setattr(kernel_cache, "_STATE", {"guarded": False, "numba": None, "error": None})
    with pytest.warns(RuntimeWarning) as said:
        kernel_cache.guard()
    (w,) = said
    assert re.fullmatch(rf"fdcontrol: numba {re.escape(numba.__version__)} imports, but its cache module "
                        r"numba\.core\.caching does not \(ModuleNotFoundError: .*\): the kernels are compiled, and a "
                        r"cache entry that cannot be read is left to numba's own handling", str(w.message)), w.message
    assert "failed to import" not in str(w.message)
    assert kernel_cache.status() == {"numba": numba.__version__, "error": None, "recompiled": []}
    assert kernel_cache.summary() == f"compiled (numba {numba.__version__})" and kernel_cache.ok()


def test_other_libraries_kernels_keep_numbas_own_handling_of_their_cache(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    numba = pytest.importorskip("numba")
    from fdcontrol import kernel_cache

    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernel_cache, "_RECOMPILED", [])
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "elsewhere_kernel.py").write_text(
        "import numba\n\n\n@numba.njit('float64(float64)', cache=True)\ndef twice(x):\n    return 2.0 * x\n")
    importlib.invalidate_caches()
    monkeypatch.delitem(sys.modules, "elsewhere_kernel", raising=False)
    assert importlib.import_module("elsewhere_kernel").twice(1.5) == 3.0
    (index,) = tmp_path.rglob("elsewhere_kernel.twice-*.nbi")
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    del sys.modules["elsewhere_kernel"]
    with pytest.raises(Exception) as err:  # numba's own behaviour: the error, not fdcontrol's report
        importlib.import_module("elsewhere_kernel")
    assert not isinstance(err.value, AssertionError)
    assert kernel_cache.status()["recompiled"] == []


def test_without_numba_the_python_forms_run_and_nothing_is_reported(
        monkeypatch: pytest.MonkeyPatch, fresh_configuration: Callable[[], Any]) -> None:
    from fdcontrol import kernel_cache

    monkeypatch.setitem(sys.modules, "numba", None)  # ``import numba`` raises ModuleNotFoundError: not installed
    monkeypatch.setattr(kernel_cache, "_STATE", {"guarded": False, "numba": None, "error": None})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the documented fallback says nothing
        kernel_cache.guard()
        conf = fresh_configuration()
    assert conf._q_ok is conf._q_ok_plain
    assert kernel_cache.status() == {"numba": None, "error": None, "recompiled": []}
    assert kernel_cache.summary() == ("not compiled: numba is not installed (the fast extra); the Python forms run, "
                                      "slower")
    assert not kernel_cache.ok()


def test_numba_installed_but_failing_to_import_is_said_with_its_error(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from fdcontrol import kernel_cache

    broken = tmp_path / "numba"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('Numba needs NumPy 0.1 or less')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    importlib.invalidate_caches()
    monkeypatch.setattr(kernel_cache, "_STATE", {"guarded": False, "numba": None, "error": None})
    with pytest.warns(RuntimeWarning, match=r"numba is installed but failed to import \(ImportError: Numba needs "
                                            r"NumPy 0\.1 or less\)"):
        kernel_cache.guard()
    assert kernel_cache.status()["error"] == "ImportError: Numba needs NumPy 0.1 or less"
    assert kernel_cache.summary().startswith("not compiled: numba is installed but failed to import (ImportError: ")
    # two processes' statuses in one line (the service: the API's and the loop process's)
    loop = {"numba": "0.68.1", "error": None, "recompiled": [["fdcontrol.x", "f", "EOFError: "]]}
    assert kernel_cache.summary({"numba": "0.68.1", "error": None, "recompiled": []}, loop) == (
        "compiled (numba 0.68.1); compiled afresh, their numba cache unreadable: fdcontrol.x.f (EOFError: )")
    assert kernel_cache.ok({"numba": "0.68.1", "error": None, "recompiled": []})


def test_python_m_fdcontrol_kernels_says_a_broken_numba_and_fails(tmp_path: Path) -> None:
    """``python -m fdcontrol.kernels`` (run by make install and the image build) with a numba that fails to import:
    it says so with numba's error and exits 1 — not "numba is not installed", and not a crash in a kernel module."""
    broken = tmp_path / "numba"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('Numba needs NumPy 0.1 or less')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    r = subprocess.run([sys.executable, "-W", "ignore::RuntimeWarning", "-m", "fdcontrol.kernels"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "numba is installed but failed to import (ImportError: Numba needs NumPy 0.1 or less)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "not installed" not in r.stdout + r.stderr


def test_a_numba_whose_cache_is_laid_out_otherwise_keeps_its_own_handling(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard wraps numba's cache class; a numba without it (another layout) imports fdcontrol all the same and
    is left alone."""
    pytest.importorskip("numba")
    from numba.core import caching

    from fdcontrol import kernel_cache

    monkeypatch.delattr(caching, "Cache")
    monkeypatch.setattr(kernel_cache, "_STATE", {"guarded": False, "numba": None, "error": None})
    kernel_cache.guard()
    assert kernel_cache.status()["numba"] and kernel_cache.status()["error"] is None
