"""The numba kernels, compiled ahead of the first start.

The loop's compiled twins (limits, solvers, the state's packing, …) are numba functions cached on disk
(``cache=True``, next to each module in ``__pycache__``). The first process that imports them compiles
them: on a 2-core machine about 40 s when idle and over 2 minutes beside other jobs. ``make install`` and
the container image run ``python -m fdcontrol.kernels`` once, so the service's first start only loads the
cache; ``fdcontrol serve`` otherwise waits for the compilation (``LoopWorker``'s ``start_timeout``). The link
geometry's kernels are not compiled at import but when the first
:class:`~fdcontrol.model.collision.Clearance` is built: they are compiled here by running a loop with a keep-out
volume (:func:`warm_first_calls`), so that a loop given a volume at run time loads them from the cache as its
parts are built (never in a cycle) instead of compiling them then.

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
    """Import every module of :data:`KERNEL_MODULES` (compiling its kernels into the cache, or loading them),
    then the kernels importing does not compile (:func:`warm_first_calls`); ``report(what, seconds)``
    after each. Returns the modules imported: none without numba, or with a numba that fails to import
    (:mod:`fdcontrol.kernel_cache` says why)."""
    kernel_cache.guard()
    if importlib.util.find_spec("numba") is None or kernel_cache.status()["error"]:
        return []
    done = []
    for name in KERNEL_MODULES:
        t0 = time.perf_counter()
        importlib.import_module(name)
        done.append(name)
        if report is not None:
            report(name, time.perf_counter() - t0)
    t0 = time.perf_counter()
    warm_first_calls()
    if report is not None:
        report(FIRST_CALLS, time.perf_counter() - t0)
    return done


#: what :func:`warm_first_calls` is reported as
FIRST_CALLS = "the link geometry's kernels (not compiled at import)"


def warm_first_calls() -> str | None:
    """Compile (or load) the kernels that importing does not: the link geometry's distances, the velocity damper
    and its promotion of left-out pairs (fdcontrol.model.collision, compiled when a Clearance is built), by running
    the loop the service builds with a keep-out box 2 cm above the UR10's forearm at its home pose (clear of every
    link) and self-collision, a wrench driving the forearm towards the box. Without this the first loop that gets a
    volume compiles them as its parts are built — tens of seconds on a loaded 2-core machine, which that
    configuration change waits for. Returns the loop's fault (None: the warm-up ran as a loop should)."""
    import numpy as np

    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop.build import build_loop, build_parts, loop_params
    from fdcontrol.model.collision import BOX, Clearance, Obstacle
    from fdcontrol.model.robot import HOME, RobotModel

    robot = RobotModel.load("ur10")
    q0 = np.asarray(HOME["ur10"], dtype=float)
    cl = Clearance(robot, robot.geometry, [])
    cl.compute(q0)
    i = [c.link for c in robot.geometry.capsules].index("forearm_link")
    h, gap = 0.05, 0.02
    # above the middle of the forearm, its underside 2 cm above the (tilted) forearm's highest point; raised
    # until every link is at least 2 cm from it (the distances computed, not assumed)
    c = (cl.A[i] + cl.B[i]) / 2
    c[2] = max(cl.A[i, 2], cl.B[i, 2]) + float(cl.cr[i]) + h + gap
    for _ in range(20):
        near = Clearance(robot, robot.geometry, [Obstacle("warm-up", BOX, c - h, c + h, margin=0.0)],
                         broad=False)
        near.compute(q0)
        short = gap - float(near.d.min())
        if short <= 0.0:
            break
        c[2] += short + 1e-3
    box = {"name": "warm-up", "box": {"min": (c - h).tolist(), "max": (c + h).tolist()}, "margin": 0.0}
    loop = build_loop(driver=SimulatedRobot(robot, dt=0.002, q0=q0), robot=robot)
    loop.reconfigure(**build_parts(robot, loop_params(keep_out=[box], self_collision=True), loop=loop))
    for k in range(300):
        loop.set_wrench(np.array([0.0, 0.0, 15.0, 0.0, 0.0, 0.0]), t=k * 0.002)
        loop.step(now=k * 0.002)
    return loop.fault


def main() -> int:
    """``python -m fdcontrol.kernels``: compile (or load) every kernel, one line per module."""
    t0 = time.perf_counter()
    done = compile_kernels(lambda name, s: print(f"  {name}: {s:.1f} s", flush=True))
    if kernel_cache.status()["error"]:  # numba installed but broken: the Python forms would run, slower — say so
        print(f"fdcontrol.kernels: {kernel_cache.summary()}", file=sys.stderr)
        return 1
    if not done:
        print("fdcontrol.kernels: numba is not installed (the `fast` extra): nothing to compile")
    else:
        print(f"fdcontrol.kernels: {len(done)} modules' kernels compiled or loaded in {time.perf_counter() - t0:.0f} s")
    if done and not kernel_cache.ok():  # a kernel whose cache could not be read, compiled afresh
        print(f"fdcontrol.kernels: {kernel_cache.summary()}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
