"""The packed state's layout in shared memory, shared by the state slot (server/channel.py) and
the recording ring (server/record_ring.py) without either importing the other."""

from __future__ import annotations

from fdcontrol.loop.state import SharedLayout

MAX_DOF = 16
FAULT_BYTES = 512  # UTF-8 bytes of each text field kept in shared memory (longer texts are cut)
# the packed state — every LoopState field, laid out by fdcontrol.loop.state.SharedLayout from the
# declaration, plus last_cycle_at (time.monotonic(), s)
LAYOUT = SharedLayout(max_dof=MAX_DOF, text_bytes=FAULT_BYTES, extra=("last_cycle_at",))
OUT_SIZE = LAYOUT.size  # the packed state's length (float64), also a row of the recording ring

__all__ = ["FAULT_BYTES", "LAYOUT", "MAX_DOF", "OUT_SIZE"]
