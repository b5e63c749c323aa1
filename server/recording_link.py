"""The recorder hand-off: the MCAP recorder of the API process, fed from the loop process's
state ring (fdcontrol.server.record_ring), with the accepted commands and configuration changes
beside the states."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from fdcontrol.server.record_ring import StateRing

RECORDED = ("start", "stop", "hold", "zero_sensor", "target", "task")  # accepted commands that go into a recording


class RecordingLink:
    """The ring (created here; the loop process attaches to it by ``name``) and the recorder reading it.

    ``recorder`` is the :class:`fdcontrol.recording.Recorder` the recording routes drive.
    """

    def __init__(self, name: str, cycle: Callable[[], int]) -> None:
        from fdcontrol.recording import Recorder

        self.name = name
        self._cycle = cycle
        self.ring = StateRing(name, create=True)
        # written here, in the API process, from the ring (see server/record_ring.py)
        self.recorder = Recorder(cycle=cycle, on_start=self.ring.set_active, source=self.ring.read)

    def command(self, cmd: str, *args: Any) -> None:
        """An accepted command: into the recording when it is one that is recorded."""
        if cmd in RECORDED:
            self.recorder.push_command(cmd, *args)

    def start(self, path: Any, params: dict[str, Any]) -> dict[str, Any]:
        from fdcontrol.recording import robot_info_from_params

        return self.recorder.start(path, params, robot_info_from_params(params))

    def config(self, params: dict[str, Any], changes: dict[str, Any]) -> None:
        """An accepted configuration change, while recording."""
        if self.recorder.active:
            from fdcontrol.recording import robot_info_from_params

            self.recorder.push_config(params, changes, robot_info_from_params(params))

    def take_over(self, old: RecordingLink) -> bool:
        """A restarted loop process: a recording running on ``old`` (the replaced process's link) goes on
        in the same file from this link's ring. True when there was one to take over."""
        from fdcontrol.recording import Recorder

        rec = old.recorder
        if not rec.active:
            return False
        old.recorder = Recorder()  # the old link's close and finish leave the recording alone
        self.recorder = rec
        rec.switch_source(self.ring.read, self.ring.set_active, self._cycle)
        return True

    def finish(self) -> None:
        """A clean shutdown finishes the file (summary and index)."""
        if self.recorder.active:
            with contextlib.suppress(Exception):
                self.recorder.stop()

    def close(self) -> None:
        self.ring.close(unlink=True)
