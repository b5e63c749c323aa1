"""The embedded arm: fdcontrol's own service, started as a child process on a free loopback port.

The plugin then talks to it exactly as to any service (REST on 127.0.0.1), so the embedded MuJoCo
arm behaves as the service does: the same loop assembly, watchdog, holds and limits. A random
token (handed over in the child's environment, never on its command line) keeps other local
programs from commanding it.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedService:
    """``fdcontrol serve --host 127.0.0.1 --port <free> --robot <robot> <args>`` as a child process.

    ``startup_timeout`` bounds the wait for ``/health`` (importing pinocchio and MuJoCo and spawning
    the loop process takes seconds, up to a minute on a loaded machine). The service's output goes
    to a temporary log file (:meth:`output`), never to an undrained pipe."""

    def __init__(self, robot: str = "ur10", args: Sequence[str] = (), startup_timeout: float = 120.0) -> None:
        self.token = secrets.token_urlsafe(24)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "fdcontrol.server", "serve", "--host", "127.0.0.1", "--port", str(self.port),
               "--robot", robot, *args]
        self.log = tempfile.NamedTemporaryFile("w+", prefix="fdcontrol-embedded-", suffix=".log")
        env = {**os.environ, "FDCONTROL_TOKEN": self.token}
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True)
        headers = {"Authorization": f"Bearer {self.token}"}
        deadline = time.monotonic() + startup_timeout
        while True:
            if self.proc.poll() is not None:
                out = self.output()
                self.close()
                raise RuntimeError(f"the embedded fdcontrol service exited at startup:\n{out[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=1.0, headers=headers).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.close()
                raise TimeoutError(f"the embedded fdcontrol service did not answer /health in {startup_timeout:g} s")
            time.sleep(0.1)

    def output(self) -> str:
        """What the service printed so far."""
        return Path(self.log.name).read_text()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, timeout: float = 10.0) -> None:
        """Stop the service (SIGTERM: it stops its loop; SIGKILL after ``timeout`` s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self.log.close()
