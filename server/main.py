"""The ``fdcontrol`` command (console script; also ``python -m fdcontrol.server``): the library's
commands (fdcontrol/cli.py: analyze, experiments, plot) plus ``serve`` → uvicorn on the
settings' host/port. The service extends the library's parser, so the library never
imports the service.

Every configuration error (settings, YAML, paths, γ bounds, drivers, a non-loopback bind
without a token) ends in one line on stderr and exit code 2 — no traceback, no leaked
shared memory: the loop process is started (and its configuration checked) before uvicorn.
The service's modules are imported by ``serve`` only, so ``fdcontrol analyze`` stays light.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdcontrol import cli
from fdcontrol.extras import MissingExtra, require
from fdcontrol.loop.parameters import declared
from fdcontrol.params import Param, error_message

if TYPE_CHECKING:
    from pydantic import ValidationError

    from fdcontrol.server.settings import Settings

#: kernel send buffer per connection (bytes; Linux doubles it, inherited from the listening socket):
#: a client that stops reading blocks its sender after a few hundred kB, and its states are then
#: dropped and counted instead of queueing for seconds in an autotuned buffer of up to 4 MB
SEND_BUFFER = 1 << 16


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, with the small send buffer every accepted connection inherits."""
    # proto IPPROTO_TCP: asyncio sets TCP_NODELAY only on such sockets (else Nagle adds ~40 ms)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


#: service options with a flag of their own (the loop's parameters get theirs from their declarations)
SERVICE_FLAGS = ("host", "port", "token", "token_file", "record", "record_dir", "foxglove_port", "foxglove_host",
                 "foxglove_remote", "foxglove_rate")


def _flag_type(p: Param) -> Callable[[str], Any]:
    """argparse's parser of a declared parameter's value (checked again by the settings model)."""
    if p.kind in ("vector", "names"):
        def items(text: str) -> list[Any]:
            parts = [x for x in text.split(",") if x]
            return [float(x) for x in parts] if p.kind == "vector" else parts
        return items
    if p.kind == "bool":
        def boolean(text: str) -> bool:
            if text.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
            return text.lower() in ("true", "1", "yes", "on")
        return boolean
    return {"float": float, "int": int}.get(p.kind, str)


def fail(message: str) -> int:
    print(f"fdcontrol serve: {message}".replace("\n", " "), file=sys.stderr)
    return 2


def _settings(args: argparse.Namespace) -> Settings:
    from fdcontrol.server.settings import load_settings

    overrides = {k: getattr(args, k, None) for k in (*SERVICE_FLAGS, *declared())}
    return load_settings(getattr(args, "config", None), **overrides)


def _one_line(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {error_message(e['msg'])}" for e in exc.errors())


def _robot_problem(settings: Settings) -> str | None:
    """A URDF robot: the file must exist and base/tip be named (settings, YAML or FDCONTROL_BASE/_TIP)."""
    if not settings.robot.endswith(".urdf"):
        return None
    if not Path(settings.robot).is_file():
        return f"robot file not found: {settings.robot}"
    if not (settings.base and settings.tip):
        return (f"robot {settings.robot} needs base and tip frame names (settings base/tip in the YAML "
                "config, or FDCONTROL_BASE / FDCONTROL_TIP)")
    return None


def port_problem(host: str, port: int, exc: OSError) -> str:
    """One line for a port that cannot be bound, with the way to choose another."""
    import errno

    if exc.errno == errno.EADDRINUSE:
        return (f"port {port} on {host} is already in use (another fdcontrol serve?): choose another port, "
                f"e.g. `make serve PORT={port + 1}` or `fdcontrol serve --port {port + 1}`")
    return f"could not listen on {host}:{port}: {exc}"


def url_of(settings: Settings) -> str:
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"http://{host}:{settings.port}/"


def ready_line(settings: Settings, token: bool) -> str:
    """What a person starting the service needs to see: what runs, where, and how to get in."""
    url = url_of(settings)
    access = "token required (Authorization: Bearer …; the dashboard asks for it)" if token else "no token (loopback)"
    return (f"fdcontrol serve: {settings.robot} on the {settings.driver} driver at {settings.rate:g} Hz — "
            f"dashboard {url}, API docs {url}docs; {access}; Ctrl-C stops")


def run(args: argparse.Namespace) -> int:
    """``fdcontrol serve``: check the configuration, start the loop process, then serve."""
    try:
        require("server", "the service")
    except MissingExtra as exc:
        return fail(str(exc))
    import uvicorn
    from pydantic import ValidationError

    from fdcontrol.server.auth import is_loopback

    try:
        settings = _settings(args)
        token = settings.api_token()
    except ValidationError as exc:
        return fail(f"invalid settings: {_one_line(exc)}")
    except (ValueError, OSError) as exc:
        return fail(f"invalid settings: {exc}")
    problem = _robot_problem(settings)
    if problem:
        return fail(problem)
    if token is None and not is_loopback(settings.host):
        return fail(f"refusing to bind {settings.host} without a token: set --token, FDCONTROL_TOKEN "
                    "or token_file (or bind 127.0.0.1)")
    if settings.foxglove_port is not None:
        try:
            require("foxglove", "Foxglove live (--foxglove)")
        except MissingExtra as exc:
            return fail(str(exc))
        if not is_loopback(settings.foxglove_host) and not settings.foxglove_remote:
            return fail(f"refusing to bind Foxglove to {settings.foxglove_host}: the Foxglove protocol has no "
                        "authentication (anyone reaching the port sees the arm); add --foxglove-remote to "
                        "accept that, or keep it on 127.0.0.1 and use an SSH tunnel")
    from fdcontrol.server.app import create_app
    from fdcontrol.server.worker import LoopWorker, WorkerError

    try:  # the port first: a taken port is said at once, before the loop process starts
        sock = listen(settings.host, settings.port)
    except OSError as exc:
        return fail(port_problem(settings.host, settings.port, exc))
    raise_priority(settings.api_nice)  # before the loop process starts: it (and any restart of it) inherits it
    try:
        worker = LoopWorker(settings, on_slow_start=lambda: print(
            "fdcontrol serve: the control loop is still starting: a first start compiles the numba kernels "
            "(a minute or more; `python -m fdcontrol.kernels` does it ahead, as `make install` does) …",
            file=sys.stderr, flush=True))
    except WorkerError as exc:
        sock.close()
        return fail(f"the control loop did not start: {exc.detail}")
    from fdcontrol import kernel_cache

    kernels = (kernel_cache.status(), worker.kernels)  # this process's and the loop process's
    if not kernel_cache.ok(*kernels):  # numba missing or broken, or a cache compiled afresh: said once, here
        print(f"fdcontrol serve: the numba kernels: {kernel_cache.summary(*kernels)}", file=sys.stderr, flush=True)
    try:
        config = uvicorn.Config(create_app(settings, worker), host=settings.host, port=settings.port,
                                log_level="warning", ws_max_queue=4,
                                # X-Forwarded-For names the client only when it comes from a trusted proxy
                                proxy_headers=bool(settings.trusted_proxies),
                                forwarded_allow_ips=",".join(settings.trusted_proxies) or None,
                                ws_max_size=max(settings.max_ws_message_bytes * 4, 1 << 20),
                                ws_per_message_deflate=False)  # zlib per message and client: ~0.1 ms each
        print(ready_line(settings, token is not None), file=sys.stderr, flush=True)
        if settings.foxglove_port is not None:
            print(f"fdcontrol serve: Foxglove on ws://{settings.foxglove_host}:{settings.foxglove_port} "
                  f"(read-only, no authentication; Foxglove layout: {url_of(settings)}foxglove-layout.json)",
                  file=sys.stderr, flush=True)
        # SIGTERM (a service manager's stop): uvicorn shuts down in order (the arm brakes, the loop process
        # closes), then raises the signal again, which this handler turns into a clean exit
        signal.signal(signal.SIGTERM, _terminated)
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # Ctrl-C: uvicorn shut down in order (the loop process closed), then re-raised it
        print("fdcontrol serve: stopped", file=sys.stderr, flush=True)
        return 130
    except Terminated:  # the loop process was closed by the shutdown (or ends on its own when this one exits)
        print("fdcontrol serve: stopped", file=sys.stderr, flush=True)
        return 0
    except (OSError, SystemExit) as exc:
        worker.close()
        return fail(f"could not serve on {settings.host}:{settings.port}: {exc}")
    return 0


def raise_priority(nice: int | None) -> bool:
    """The API process's niceness (``api_nice``), set before its threads start (they inherit it); True when set.

    The event loop of this process receives each wrench and sends each state: on a machine with CPU-bound
    neighbours it waits for a CPU at every hand-over, a few milliseconds each at nice 0. A lower niceness only
    where permitted (CAP_SYS_NICE or RLIMIT_NICE), as SCHED_FIFO for the loop thread; never raised above the
    niceness the service was started with."""
    if nice is None:
        return False
    try:
        if nice >= os.getpriority(os.PRIO_PROCESS, 0):
            return False
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except (AttributeError, PermissionError, OSError):  # not permitted here, or not POSIX
        return False
    # Linux sets the niceness per thread: also those started at import (the BLAS library's workers)
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, int(tid), nice)
    return True


class Terminated(Exception):
    """SIGTERM reached ``fdcontrol serve`` (after uvicorn's orderly shutdown, or before it began)."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated


def add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("serve", help="run the control service (REST + WebSocket)")
    s.add_argument("--config", default=None, help="YAML file with the service settings")
    s.add_argument("--host", default=None, help="address to bind (settings.host)")
    s.add_argument("--port", type=int, default=None, help="port to bind (settings.port)")
    # one flag per declared parameter (fdcontrol.params), its help from the declaration; choices are the
    # registries' names, read when the parser is built (plugins included)
    for name, p in declared().items():
        if p.kind == "spec":
            continue  # structured: the YAML file or the environment
        unit = f" ({p.unit})" if p.unit else ""
        many = p.kind in ("vector", "names")
        s.add_argument(f"--{name.replace('_', '-')}", dest=name, type=_flag_type(p), default=None,
                       choices=p.options() if p.kind == "choice" else None,
                       metavar="A,B,..." if many else None,
                       help=f"{p.description}{unit}{'; comma-separated' if many else ''}"
                       f"{' of ' + ', '.join(p.options()) if p.kind == 'names' else ''} [{p.policy}]")
    s.add_argument("--record", default=None, metavar="FILE",
                   help="record to this MCAP file from startup (a bare name goes into --record-dir)")
    s.add_argument("--record-dir", default=None, help="directory of recordings (settings.record_dir)")
    s.add_argument("--foxglove", dest="foxglove_port", type=int, default=None, metavar="PORT",
                   help="also serve Foxglove's WebSocket protocol on PORT: the arm in 3-D (off by default)")
    s.add_argument("--foxglove-host", dest="foxglove_host", default=None,
                   help="address of the Foxglove server (default 127.0.0.1)")
    s.add_argument("--foxglove-remote", dest="foxglove_remote", action="store_const", const=True, default=None,
                   help="allow a non-loopback --foxglove-host (the Foxglove protocol has no authentication)")
    s.add_argument("--foxglove-rate", dest="foxglove_rate", type=float, default=None,
                   help="messages per second to Foxglove (Hz, default 50)")
    s.add_argument("--token", default=None, help="API token (or FDCONTROL_TOKEN); required off loopback")
    s.add_argument("--token-file", dest="token_file", default=None, help="file holding the API token")
    s.set_defaults(func=run)


def build_parser() -> argparse.ArgumentParser:
    """The library's parser with ``serve``."""
    return cli.build_parser(add_serve)


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, build_parser())


if __name__ == "__main__":
    sys.exit(main())
