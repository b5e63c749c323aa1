"""A real service process on a free loopback port, for the end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
STARTUP = 120.0  # s, the bound on a service's startup in the tests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_state(pid: int) -> str | None:
    """The state letter of process `pid` as /proc/<pid>/stat gives it (R running, S sleeping, T stopped, t stopped
    by a tracer, Z a zombie: dead, not yet reaped, X dead, …), or None once it has no entry: ended and reaped."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # reaped before the open, or between the open and the read
        return None
    # "pid (command) state …": the command may hold spaces and parentheses, so the state follows the last ")"
    rest = text.rpartition(")")[2].split()
    return rest[0] if rest else None


class Service:
    def __init__(self, *args: str, env: dict[str, str] | None = None, token: str | None = None,
                 startup_timeout: float | None = None, python: str | None = None) -> None:
        """``python``: the interpreter that runs the service (default: this one), e.g. one of an
        environment that holds only what an install with some extras brings (tests/extras_env.py)."""
        self.token = token
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [python or sys.executable, "-m", "fdcontrol.server", "serve", "--host", "127.0.0.1",
               "--port", str(self.port), *args]
        # the output goes to a file, never an undrained pipe: a service that prints much (tracebacks of
        # refused requests) would block on a full pipe, its loop process with it
        self.log = tempfile.NamedTemporaryFile("w+", prefix="fdcontrol-service-", suffix=".log")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})},
                                     stdout=self.log, stderr=subprocess.STDOUT, text=True)
        # startup imports pinocchio and MuJoCo and spawns the loop process: seconds alone, but
        # up to a minute on a loaded 2-core machine (CI runs beside two CPU-bound processes)
        deadline = time.monotonic() + (startup_timeout or STARTUP)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited: {self.output()}")
            try:
                if httpx.get(self.url + "/health", timeout=1, headers=self.headers).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"service did not become healthy in {startup_timeout or STARTUP:g} s")

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def state(self) -> dict:
        """The loop's state now (GET /state)."""
        return httpx.get(self.url + "/state", timeout=5, headers=self.headers).json()

    def without_start_box(self) -> None:
        """Remove the simulated arm's start workspace box (for tests that reach past it). A 503 of a loop
        process not scheduled within its heartbeat period (a loaded machine) is asked again, bounded."""
        for _ in range(10):
            r = httpx.patch(self.url + "/config", json={"workspace_box": None}, headers=self.headers, timeout=60)
            if r.status_code != 503:
                break
            time.sleep(0.5)
        assert r.status_code == 200 and r.json()["workspace_box"] is None, r.text

    def output(self) -> str:
        """What the service printed so far."""
        return Path(self.log.name).read_text()

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def children(self) -> list[int]:
        """Child process ids (the loop process)."""
        out: list[int] = []
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            with_children = (task / "children").read_text().split()
            out += [int(x) for x in with_children]
        return out

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
