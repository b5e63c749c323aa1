"""The numba kernels, compiled ahead of the first start.

The loop's compiled twins (limits, solvers, the state's packing, …) are numba functions cached on disk
(``cache=True``, next to each module in ``__pycache__``). The first process that imports them compiles
them: on a 2-core machine about 40 s when idle and over 2 minutes beside other jobs. ``make install`` and
the container image run ``python -m fdcontrol.kernels`` once, so the service's first start only loads the
cache; ``fdcontrol serve`` otherwise waits for the compilation (``LoopWorker``'s ``start_timeout``).

Without numba (the ``fast`` extra not installed) there is nothing to compile: the loop runs the Python
forms of the same computations. Numba installed but failing to import, or a kernel whose cache cannot be read
(cut short, or written by another numba or Python), is not taken for that: it is reported, and such a kernel is
compiled afresh (:mod:`fdcontrol.kernel_cache`; ``fdcontrol serve`` says it at startup, ``/health`` as
``kernels``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
from collections.abc import Callable

from fdcontrol import kernel_cache

#: every module that defines numba kernels (tests/test_kernels.py checks the list against the sources):
#: importing one compiles its kernels, or loads them from the cache
KERNEL_MODULES = (
    "fdcontrol.limits.compiled",
    "fdcontrol.limits.workspace",
    "fdcontrol.loop.liveness",
    "fdcontrol.loop.solvers",
    "fdcontrol.loop.stages",
    "fdcontrol.loop.state_compiled",
    "fdcontrol.model.collision",
    "fdcontrol.model.conditioning",
    "fdcontrol.model.configuration",
    "fdcontrol.model.constraints",
    "fdcontrol.model.jacobi",
    "fdcontrol.model.linalg",
    "fdcontrol.model.virtual",
    "fdcontrol.control.posture",
    "fdcontrol.control.sensing",
    "fdcontrol.control.workspace",
    "fdcontrol.drivers.franka_compiled",
    "fdcontrol.drivers.simulated",
)

__all__ = ["KERNEL_MODULES", "compile_kernels"]


def compile_kernels(report: Callable[[str, float], None] | None = None) -> list[str]:
    """Import every module of :data:`KERNEL_MODULES` (compiling its kernels into the cache, or loading them);
    ``report(module, seconds)`` after each. Returns the modules imported: none without numba."""
    if importlib.util.find_spec("numba") is None:
        return []
    done = []
    for name in KERNEL_MODULES:
        t0 = time.perf_counter()
        importlib.import_module(name)
        done.append(name)
        if report is not None:
            report(name, time.perf_counter() - t0)
    return done


def main() -> int:
    """``python -m fdcontrol.kernels``: compile (or load) every kernel, one line per module."""
    t0 = time.perf_counter()
    done = compile_kernels(lambda name, s: print(f"  {name}: {s:.1f} s", flush=True))
    if not done:
        print("fdcontrol.kernels: numba is not installed (the `fast` extra): nothing to compile")
    else:
        print(f"fdcontrol.kernels: {len(done)} modules' kernels compiled or loaded in {time.perf_counter() - t0:.0f} s")
    if done and not kernel_cache.ok():  # a kernel whose cache could not be read, compiled afresh
        print(f"fdcontrol.kernels: {kernel_cache.summary()}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
