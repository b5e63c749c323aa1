"""The numba kernels compiled ahead (fdcontrol.kernels), and the service's wait for a slow first start."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

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
    finally:
        w.close()
