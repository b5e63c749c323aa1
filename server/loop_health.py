"""The health rules: whether the loop process can be trusted right now, and if not, why
(exited, ending, heartbeat stale, loop cycles stale). The supervisor restarts on the answer,
``/health`` reports it, and every command route refuses (503) while there is one."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from fdcontrol.server.channel import Channel, TornRead


class Exiting:
    """True once the process's main thread has exited (Linux: state Z/X in /proc/<pid>/stat),
    before waitpid reports it: its other threads may take a while longer to end. The file is
    opened once and re-read at offset 0 (procfs regenerates it), a few µs per check."""

    def __init__(self, pid: int | None) -> None:
        try:
            self.fd: int | None = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        except OSError:
            self.fd = None  # not Linux: waitpid alone

    def __call__(self) -> bool:
        if self.fd is None:
            return False
        try:
            return os.pread(self.fd, 1024, 0).rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
        except (OSError, IndexError):
            return True  # the process is gone

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


def loop_problem(proc: Any, exiting: Exiting, channel: Channel, stale_after: float) -> str | None:
    """Why the loop process cannot be trusted right now, or None when it is healthy.

    ``stale_after`` (s): the loop process counts as stuck when its heartbeat — or, while the
    loop runs, its last cycle — is older than this.
    """
    if not proc.is_alive():
        return f"the loop process has exited (exit code {proc.exitcode})"
    if exiting():
        return "the loop process has exited (it is ending)"
    return stall_problem(channel, stale_after)


def stall_problem(channel: Channel, stale_after: float) -> str | None:
    """:func:`loop_problem`'s rules on the loop process's own record alone (its heartbeat, its last cycle): no
    system call, so cheap enough to run before every streamed wrench (LoopWorker.set_wrench)."""
    now = time.monotonic()
    beat = channel.heartbeat_at()
    if beat and now - beat > stale_after:
        return f"the loop process is not responding (heartbeat {now - beat:.3f} s old)"
    try:
        running, last = channel.read_running()
    except TornRead as exc:
        return str(exc)
    if running and last and now - last > stale_after:
        return f"the control loop is stalled (last cycle {now - last:.3f} s ago)"
    return None
