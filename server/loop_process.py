"""The loop process: the control loop thread, the heartbeat, and a command thread that
answers the API's rare requests (config, start/stop/hold, targets, statistics) on a pipe.

Why a process of its own: in one process, the API's Python code (JSON encoding for 20
WebSocket clients, batch analysis) holds the GIL and delays the loop (measured before the
0.2 ms GIL switch interval: overruns 0.1 % → 2.5 % of cycles with 21 WebSocket clients). Here
the loop process runs nothing but
the loop thread, the heartbeat and the command loop below.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any

from pydantic import ValidationError

from fdcontrol import kernel_cache
from fdcontrol.loop import ControlLoop
from fdcontrol.loop.cycle import SensorLoaded
from fdcontrol.params import error_message
from fdcontrol.server.channel import Channel, ShmIO, beat
from fdcontrol.server.sim_ops import sim_call
from fdcontrol.server.taskspace import task_call


def _scheduler(loop: ControlLoop) -> str | None:
    """The loop thread's scheduling policy (SCHED_FIFO when real-time was granted); None while stopped."""
    thread = getattr(loop, "_thread", None)
    if thread is None or not thread.is_alive() or thread.native_id is None:
        return None
    try:
        policy = os.sched_getscheduler(thread.native_id)
    except (AttributeError, OSError):  # not Linux, or the thread just ended
        return None
    names = {getattr(os, n, None): n for n in ("SCHED_OTHER", "SCHED_FIFO", "SCHED_RR", "SCHED_BATCH", "SCHED_IDLE")}
    return names.get(policy, str(policy))


def main(settings_json: str, shm_name: str, conn: Connection, notify: Connection) -> None:
    # Ctrl-C in a terminal (SIGINT) and a service manager's stop (SIGTERM, which systemd sends to the
    # whole control group) reach this process too: the API process ends it in order ("close": the arm
    # brakes, the loop stops, the driver closes), never a signal halfway (nor a restart by the supervisor
    # while the service shuts down). Should the API process die, its pipe closes and this one ends in
    # order on its own (the EOFError below); SIGKILL still ends it at once.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from fdcontrol.server.metrics import LoopMetrics
    from fdcontrol.server.record_ring import StateRing
    from fdcontrol.server.runtime import ConflictError, PolicyError, Runtime
    from fdcontrol.server.settings import Settings

    settings = Settings.model_validate_json(settings_json)
    sys.setswitchinterval(settings.switch_interval)
    channel = Channel(shm_name)
    try:
        runtime = Runtime(settings)
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        channel.close()
        return
    beating = threading.Event()
    threading.Thread(target=beat, args=(channel, beating, settings.realtime), name="fdcontrol-heartbeat",
                     daemon=True).start()
    io = ShmIO(channel)
    os.set_blocking(notify.fileno(), False)
    io.notify = notify.fileno()
    io.ring, io.metrics = StateRing(shm_name + "r"), LoopMetrics()
    io.metrics.start_folding(lambda: runtime.loop.stats)

    def attach() -> None:
        runtime.loop.io = io
        io.publish(runtime.loop, runtime.loop.state)

    def start() -> None:
        io.forget_stops()  # a stop asked for while the loop was stopped does not end the new run
        runtime.loop.start()

    attach()
    # everything imported and built so far (the libraries, the model, the loop: ~160k objects) lives as long as
    # the process: kept out of the cyclic collector's sight. A full collection walks every tracked object holding
    # the GIL — ~0.3 s over these on a loaded 2-core machine, hundreds of missed cycles of a robot-paced loop —
    # and now walks only what was made since (µs). Frozen objects are never collected as cycles: the garbage among
    # them now, and startup parts that a later update replaces while in a reference cycle, are kept (once, bounded;
    # whatever is freed by its reference count is freed as ever).
    gc.freeze()
    # the configuration, and what became of the numba kernels here (compiled, or why not: fdcontrol.kernel_cache)
    conn.send(("ok", runtime.params.model_dump(), kernel_cache.status()))
    handlers = {
        "start": lambda: start(),
        "stop": lambda: runtime.loop.stop(),
        "hold": lambda on: runtime.loop.hold(on),
        "zero_sensor": lambda: runtime.loop.zero_sensor(),
        "target": lambda pose: runtime.loop.set_target(pose),
        "action": lambda pose, step, seq, t: runtime.loop.set_action(pose, step, seq, t),  # routers/learning.py
        "stats": lambda: {**runtime.loop.stats.summary(), "scheduler": _scheduler(runtime.loop)},
        "has_sensor": lambda: runtime.loop.driver.read_wrench() is not None,
        "sim": lambda op, *a: sim_call(runtime.loop.driver, op, *a),  # server/sim_ops.py
        "metrics": lambda: io.metrics.snapshot(runtime.loop.stats, runtime.loop.driver),
        "modules": lambda: sorted(sys.modules),  # what the loop process imported (tests/test_layering.py)
        "gc": lambda: {"frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects())},  # tests/test_paced.py
        "task": lambda op, *a: task_call(runtime, op, *a),  # server/taskspace.py
        "driver_call": lambda name: _driver_call(runtime.loop, name),  # recover / reconnect (robot errors)
        "params": lambda: runtime.params.model_dump(),  # with what reactions switched (server/runtime.py)
    }
    while True:
        try:
            cmd, args, *numbered = conn.recv()  # (the command's number, sent back with its reply)
        except (EOFError, OSError):
            break
        if cmd == "close":
            break
        try:
            if cmd == "update":
                params = runtime.update(args[0])
                attach()
                result: Any = params.model_dump()
            else:
                result = handlers[cmd](*args)
            conn.send(("ok", result, *numbered))
        except (ConflictError, SensorLoaded) as exc:  # SensorLoaded: zeroing under a load (409)
            conn.send(("conflict", str(exc), *numbered))
        except PolicyError as exc:
            conn.send(("invalid", str(exc), *numbered))
        except ValidationError as exc:
            errors = [{"loc": list(e["loc"]), "msg": error_message(e["msg"])} for e in exc.errors()]
            conn.send(("invalid", errors, *numbered))
        except ValueError as exc:  # a refused request: its reason is the reply (TypeError, KeyError… are bugs: printed)
            conn.send(("invalid", f"{type(exc).__name__}: {exc}", *numbered))
        except Exception as exc:  # unexpected: report, and one line in the log with where it was raised
            conn.send(("invalid", f"{type(exc).__name__}: {exc}", *numbered))
            print(refused_line(cmd, exc), file=sys.stderr, flush=True)
    beating.set()
    runtime.close()
    io.ring.close()
    channel.close()


def refused_line(cmd: str, exc: BaseException) -> str:
    """One line for the operator's log: the command, the exception and where it was raised (the innermost
    frame), instead of a traceback per refused request."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {tb[-1].filename}:{tb[-1].lineno} ({tb[-1].name})" if tb else ""
    text = " ".join(str(exc).split())[:300]
    return f"fdcontrol: the loop process refused {cmd!r}: {type(exc).__name__}: {text}{where}"


def _driver_call(loop: ControlLoop, name: str) -> None:
    """An optional driver capability (``recover``, ``reconnect``) by name; 409 without it."""
    from fdcontrol.server.runtime import ConflictError

    if name not in ("recover", "reconnect") or not loop.driver.can_recover:
        raise ConflictError(f"the {type(loop.driver).__name__} driver has no {name}")
    loop.driver.recover() if name == "recover" else loop.driver.reconnect()
