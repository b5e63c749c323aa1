"""Record the loop to MCAP: every cycle's state, every accepted command and config change.

File format: MCAP (https://mcap.dev), JSON-encoded messages with JSON-schema schemas, so
Foxglove and the ``mcap`` CLI read it without plugins. Topics:

* ``/fdcontrol/state`` — one message per control cycle (joint state, references, tip pose,
  f_c, f_measured, mode, watchdog, active limits, σmin(J), κ(H), cycle timing);
* ``/fdcontrol/tip`` — the tip pose as ``foxglove.PoseInFrame`` (every 10th cycle, for the 3-D panel);
* ``/fdcontrol/command`` — each accepted command (start, stop, hold, target, zero_sensor,
  streamed wrench);
* ``/fdcontrol/config`` — the parameters and robot (joint names, limits) at the start and
  after each change;
* the 3-D scene, the same channels and schemas as Foxglove live (:mod:`fdcontrol.viz.scene`):
  ``/robot_description`` (every 2 s), ``/tf`` and ``/joint_states``, ``/fdcontrol/wrench``,
  ``/fdcontrol/target`` and ``/fdcontrol/telemetry`` (every 10th cycle), ``/fdcontrol/volumes``
  (every 50th), so Foxglove replays the arm in 3-D.

Threads: producers only hand over references (:meth:`Recorder.push_state`, a bounded deque)
or are polled (``source``); a writer thread pairs each state with its cycle timing, encodes
JSON and writes. The writer closes a chunk every ``flush_interval`` seconds
(``Writer.flush``), so a file cut off by a crash or SIGKILL reads up to its last complete
chunk with :func:`read_recording`.

In the service the writer does not run in the loop's process at all: any Python thread
there delays the loop's wake-ups by up to the GIL switch interval (measured with a writer
thread in the loop process: p99 period error 65 → 350–450 µs). The loop copies each packed
state into a shared-memory ring (``fdcontrol.server.record_ring``) and the API process writes.

States lost because the writer fell behind are counted (``dropped`` in
:meth:`Recorder.status`); the loop never waits for the disk.

Units: SI (rad, rad/s, m, N, N·m, s); log times are UNIX time in ns; wrenches [F; τ] in the
base frame.
"""

from __future__ import annotations

import collections
import functools
import json
import math
import struct
import threading
import time
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from fdcontrol.extras import missing
from fdcontrol.model.spatial import quaternion

try:
    from mcap.exceptions import McapError
    from mcap.records import Channel, Message, Metadata, Schema
    from mcap.stream_reader import StreamReader
    from mcap.writer import CompressionType, Writer
except ImportError as exc:
    raise missing("record", "recording (MCAP)", exc) from exc

STATE_TOPIC, TIP_TOPIC = "/fdcontrol/state", "/fdcontrol/tip"
COMMAND_TOPIC, CONFIG_TOPIC = "/fdcontrol/command", "/fdcontrol/config"
EPISODE_TOPIC = "/fdcontrol/episode"
TIP_DECIMATION = 10
VOLUMES_DECIMATION = 50  # cycles between the volume entities in a recording
DESCRIPTION_DECIMATION = 1000  # cycles between copies of the robot description (a viewer seeking needs one)
PROFILE = "fdcontrol"

_VEC = {"type": "array", "items": {"type": ["number", "null"]}}  # null: a non-finite value (a fault)
_NUM_OR_NULL = {"type": ["number", "null"]}
#: what a recorded state carries beyond the LoopState fields: the cycle's timing from the loop's Stats
TIMING_SCHEMA: dict[str, Any] = {
    "compute_s": {**_NUM_OR_NULL, "description": "this cycle's compute time (s)"},
    "period_error_s": {**_NUM_OR_NULL, "description": "start time − scheduled start (s)"},
}


def _field_schema(meta: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of one LoopState field, from its declaration in :mod:`fdcontrol.loop.state`."""
    kind = meta["kind"]
    out: dict[str, Any]
    if kind == "array":
        out = {"type": ["number", "null"]}  # null: a non-finite value (a fault)
        for dim in reversed(meta["shape"]):
            out = {"type": "array", "items": out}
            if dim != "dof":
                out["minItems"] = out["maxItems"] = int(dim)
    elif kind == "choice":
        out = {"type": "string", "enum": list(meta["choices"])}
    elif kind == "text":
        out = {"type": ["string", "null"]}
    elif kind == "flags":
        out = {"type": "object", "properties": {k: {"type": "boolean"} for k in meta["choices"]},
               "additionalProperties": {"type": "boolean"}}
    else:
        base = {"float": "number", "int": "integer", "bool": "boolean"}[kind]
        # a float can be non-finite in a faulted cycle; JSON carries it as null
        out = {"type": [base, "null"] if kind == "float" else base}
    desc = meta["description"] + (f" ({meta['unit']})" if meta["unit"] else "")
    return {**out, "description": desc}


def state_schema() -> dict[str, Any]:
    """The ``/fdcontrol/state`` JSON schema, generated from the LoopState declaration.

    Every field under its own name, kind, shape and unit (``fdcontrol/loop/state.py``), the mode's
    choices as the registry of laws holds them (plugins included), and the cycle's timing.
    """
    from fdcontrol.loop import state

    props = {f.name: _field_schema(dict(f.metadata)) for f in state.FIELDS}
    props.update(TIMING_SCHEMA)
    return {"title": "fdcontrol.LoopState",
            "description": "One control cycle (fdcontrol.loop.state.LoopState and its timing). SI units; "
                          "wrenches [F; τ] (N, N·m) and the tip pose in the base frame.",
            "type": "object", "properties": props, "required": list(props)}


STATE_SCHEMA: dict[str, Any] = state_schema()
STATE_FIELDS: tuple[str, ...] = tuple(STATE_SCHEMA["required"])

COMMAND_SCHEMA: dict[str, Any] = {
    "title": "fdcontrol.Command",
    "description": "An accepted command; 'args' as given (wrench [N, N·m], target 4×4 pose in m).",
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "start | stop | hold | zero_sensor | target | wrench"},
        "args": {"type": "array"},
        "monotonic_s": {"type": "number", "description": "arrival, time.monotonic() of the loop process (s)"},
    },
    "required": ["command", "args", "monotonic_s"],
}

CONFIG_SCHEMA: dict[str, Any] = {
    "title": "fdcontrol.Config",
    "description": "Control parameters in force from this time on, what changed, and the robot.",
    "type": "object",
    "properties": {
        "params": {"type": "object"},
        "changes": {"type": "object"},
        "robot": {"type": "object", "properties": {
            "name": {"type": "string"}, "joint_names": {"type": "array", "items": {"type": "string"}},
            "lower": _VEC, "upper": _VEC, "max_velocity": {**_VEC, "description": "URDF limit (rad/s)"},
            "velocity_limit": {**_VEC, "description": "limit the loop enforces (rad/s)"}}},
    },
    "required": ["params", "changes", "robot"],
}

# Foxglove's well-known pose message (JSON encoding), so the 3-D panel shows the tip
POSE_SCHEMA: dict[str, Any] = {
    "title": "foxglove.PoseInFrame",
    "type": "object",
    "properties": {
        "timestamp": {"type": "object", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}},
        "frame_id": {"type": "string"},
        "pose": {"type": "object", "properties": {
            "position": {"type": "object", "properties": {k: {"type": "number"} for k in "xyz"}},
            "orientation": {"type": "object", "properties": {k: {"type": "number"} for k in "xyzw"}}}},
    },
}

EPISODE_SCHEMA: dict[str, Any] = {
    "title": "fdcontrol.Episode",
    "description": "An episode opened or closed (docs/learning.md); 'params' is the full parameter set at its start.",
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["start", "stop"]},
        "episode": {"type": "integer", "description": "episode number within the recording, from 0"},
        "task": {"type": ["string", "null"]},
        "policy_id": {"type": ["string", "null"]},
        "success": {"type": ["boolean", "null"], "description": "on stop; null: not judged"},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
        "params": {"type": "object"},
        "monotonic_s": {"type": "number", "description": "time.monotonic() of the API process (s)"},
    },
    "required": ["event", "episode", "monotonic_s"],
}

SCHEMAS = {STATE_TOPIC: STATE_SCHEMA, TIP_TOPIC: POSE_SCHEMA, COMMAND_TOPIC: COMMAND_SCHEMA,
           CONFIG_TOPIC: CONFIG_SCHEMA, EPISODE_TOPIC: EPISODE_SCHEMA}


def state_message(s: Any, compute: float | None, period_error: float | None) -> dict[str, Any]:
    """The ``/fdcontrol/state`` message of a :class:`~fdcontrol.loop.state.LoopState`: its wire
    encoding (:func:`fdcontrol.loop.state.to_dict`, every field by its own name) and the cycle's timing."""
    from fdcontrol.loop.state import to_dict

    return {**to_dict(s), "compute_s": compute, "period_error_s": period_error}


def _json_default(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return str(o)


def _finite(obj: Any) -> Any:
    """NaN/inf → None, recursively (JSON has no NaN; a faulted cycle can carry one)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.ndarray | np.generic):
        return _finite(obj.tolist())
    return obj


def _dumps(obj: Any) -> bytes:
    try:
        return json.dumps(obj, default=_json_default, allow_nan=False).encode()
    except ValueError:  # rare: a non-finite number somewhere
        return json.dumps(_finite(obj), default=_json_default, allow_nan=False).encode()


@dataclass
class Published:
    """One published state as a producer hands it over.

    The loop records a cycle's timing in its Stats ring just *after* publishing the state, so a
    producer sends with each state the newest timing it can see (``timing_index``: its Stats
    index) and where this state's own timing will go (``own_index``); the writer pairs them.
    """

    state: Any
    t_mono: float  # time.monotonic() of the cycle
    own_index: int
    timing_index: int
    compute: float
    period_error: float


@dataclass
class _Item:
    state: Any
    t_mono: float
    index: int
    compute: float | None = None
    period_error: float | None = None


@dataclass
class _Session:
    path: Path
    file: IO[bytes]
    writer: Writer
    channels: dict[str, int]
    offset: float  # wall − monotonic, to stamp log times from the loop's monotonic clock
    started: float
    states: int = 0
    messages: int = 0
    dropped: int = 0
    errors: int = 0
    pending: _Item | None = None
    last_flush: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    cycles: tuple[int | None, int | None] = (None, None)  # the loop's cycle counter at start and stop
    scene: Any = None  # fdcontrol.viz.scene.Scene: the 3-D channels (None: a robot without a URDF)
    target: Any = None  # the last recorded tip target (4×4)
    last_description: int | None = None  # the cycle of the last robot description written


Source = Callable[[], tuple[list[Published], int]]


def _declarations() -> dict[str, str]:
    """Every parameter's declaration (fdcontrol.params: unit, bounds, policy…), one JSON text per name:
    a recording says what its configuration's values mean."""
    from fdcontrol.loop.parameters import declared

    return {name: json.dumps(p.describe()) for name, p in declared().items()}


class Recorder:
    """MCAP recorder, one file at a time, fed by a bounded queue or a polled ``source``.

    Producers: :meth:`push_state` (an in-process loop, see :class:`LoopTap`) or ``source``, a
    callable the writer thread polls that returns (new states, how many were lost), e.g. the
    shared-memory ring of ``fdcontrol.server.record_ring``. ``maxlen`` states may wait in the queue; older
    ones are dropped and counted. ``flush_interval`` (s) bounds what a crash loses.
    """

    def __init__(self, maxlen: int = 10_000, flush_interval: float = 0.5, chunk_size: int = 4 << 20,
                 compression: CompressionType = CompressionType.ZSTD, cycle: Callable[[], int] | None = None,
                 source: Source | None = None, on_start: Callable[[bool], None] | None = None) -> None:
        self.maxlen, self.flush_interval = maxlen, flush_interval
        self._cycle = cycle  # optional: the loop's cycle counter, read as recording starts and stops
        self._source, self._on_start = source, on_start
        self.chunk_size, self.compression = chunk_size, compression
        self._states: collections.deque[Published] = collections.deque(maxlen=maxlen)
        self._other: collections.deque[tuple[str, float, Any]] = collections.deque(maxlen=maxlen)
        self.active = False  # read by producers without a lock: a bool swap is atomic
        self.pushed = 0
        self._session: _Session | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()  # start/stop/status
        # a new source handed over while recording (switch_source), taken up by the writer thread
        self._switch: tuple[Source, Callable[[bool], None] | None, Callable[[], int] | None,
                            threading.Event] | None = None

    # ------------------------------------------------------------------ producers (cheap)
    def push_state(self, item: Published) -> None:
        """Producer thread: queue a published state. O(1), no I/O, no encoding."""
        if self.active:
            self._states.append(item)
            self.pushed += 1

    def push_command(self, command: str, *args: Any) -> None:
        """Any thread: queue an accepted command (encoded later by the writer)."""
        if self.active:
            self._other.append((COMMAND_TOPIC, time.monotonic(),
                                {"command": command, "args": list(args), "monotonic_s": time.monotonic()}))

    def push_episode(self, message: dict[str, Any]) -> None:
        """Any thread: queue an episode event (EPISODE_SCHEMA)."""
        if self.active:
            self._other.append((EPISODE_TOPIC, time.monotonic(), message))

    def push_config(self, params: dict[str, Any], changes: dict[str, Any], robot: dict[str, Any]) -> None:
        if self.active:
            self._other.append((CONFIG_TOPIC, time.monotonic(),
                                {"params": params, "changes": changes, "robot": robot}))

    # ------------------------------------------------------------------ control
    def start(self, path: str | Path, params: dict[str, Any], robot: dict[str, Any],
              metadata: dict[str, str] | None = None) -> dict[str, Any]:
        """Create ``path`` (must not exist) and start recording; the config is its first message."""
        with self._lock:
            if self._session is not None:
                raise RuntimeError(f"already recording to {self._session.path.name}")
            p = Path(path)
            f = open(p, "xb")  # closed in stop(); "x": never overwrite a recording
            try:
                w = Writer(f, chunk_size=self.chunk_size, compression=self.compression)
                w.start(profile=PROFILE, library="fdcontrol")
                channels = {}
                for topic, schema in SCHEMAS.items():
                    sid = w.register_schema(schema["title"], "jsonschema", json.dumps(schema).encode())
                    channels[topic] = w.register_channel(topic, "json", sid)
                scene = _scene(params)
                if scene is not None:  # the 3-D channels, as Foxglove live advertises them
                    from fdcontrol.viz.scene import schemas as viz_schemas

                    for topic, (name, schema) in viz_schemas().items():
                        sid = w.register_schema(name, "jsonschema", json.dumps(schema).encode())
                        channels[topic] = w.register_channel(topic, "json", sid)
                w.add_metadata("fdcontrol", {"robot": json.dumps(robot), "params": _dumps(params).decode(),
                                             **(metadata or {})})
                w.add_metadata("fdcontrol.parameters", _declarations())  # what each value means
                now = time.monotonic()
                s = _Session(p, f, w, channels, time.time() - now, now, last_flush=now, scene=scene)
                self._write(s, CONFIG_TOPIC, now, {"params": params, "changes": {}, "robot": robot})
                w.flush()
            except Exception:
                f.close()
                p.unlink(missing_ok=True)
                raise
            self._states.clear()
            self._other.clear()
            self.pushed = 0
            self._session = s
            self._stop.clear()
            if self._on_start is not None:
                self._on_start(True)
            self.active = True
            s.cycles = (self._cycle(), None) if self._cycle else (None, None)
            self._thread = threading.Thread(target=self._run, name="fdcontrol-recorder", daemon=True)
            self._thread.start()
            return self._status(s)

    def switch_source(self, source: Source, on_start: Callable[[bool], None] | None = None,
                      cycle: Callable[[], int] | None = None, timeout: float = 5.0) -> bool:
        """Go on reading states from ``source`` (a restarted loop process's ring) into the same file:
        the writer thread reads the old source a last time, then only the new one. Returns once it
        switched (False after ``timeout`` s: the old source is then not read again)."""
        with self._lock:
            if self._session is None or self._thread is None:  # not recording: the next start uses it
                self._source, self._on_start = source, on_start
                self._cycle = cycle or self._cycle
                return True
            if on_start is not None:
                on_start(True)  # the new source keeps what it publishes from now on
            done = threading.Event()
            self._switch = (source, on_start, cycle, done)
        if done.wait(timeout):
            return True
        self._switch = None  # taken up late or never: the old source may be gone
        with self._lock:
            self._source, self._on_start = source, on_start
        return False

    def _take_switch(self, s: _Session) -> None:
        sw = self._switch
        if sw is None:
            return
        source, on_start, cycle, done = sw
        if self._source is not None:
            try:
                items, lost = self._source()  # the old source's last states
                s.dropped += lost
                for it in items:
                    self._pair(s, it)
            except Exception:  # a source already closed: what it held is lost
                s.errors += 1
        self._source, self._on_start = source, on_start
        self._cycle = cycle or self._cycle
        self._switch = None
        done.set()

    def stop(self) -> dict[str, Any]:
        """Stop, write everything queued, finish the file (summary, index); return its status."""
        with self._lock:
            s = self._session
            if s is None:
                raise RuntimeError("not recording")
            self.active = False
            if self._on_start is not None:
                self._on_start(False)
            s.cycles = (s.cycles[0], self._cycle() if self._cycle else None)
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            self._drain(s, final=True)
            s.writer.finish()
            s.file.close()
            out = self._status(s)
            self._session, self._thread = None, None
            return out

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {"active": False} if self._session is None else self._status(self._session)

    def _status(self, s: _Session) -> dict[str, Any]:
        size = s.path.stat().st_size if s.path.exists() else 0
        dropped = s.dropped + max(0, self.pushed - s.states - len(self._states) - (s.pending is not None))
        return {"active": self.active, "name": s.path.name, "bytes": size, "states": s.states,
                "messages": s.messages, "dropped": dropped, "errors": s.errors, "queued": len(self._states),
                "duration_s": time.monotonic() - s.started, "counts": dict(s.counts),
                "loop_cycles": None if None in s.cycles else s.cycles[1] - s.cycles[0]}  # type: ignore[operator]

    # ------------------------------------------------------------------ writer thread
    def _run(self) -> None:
        s = self._session
        assert s is not None
        while not self._stop.is_set():
            try:
                self._drain(s)
            except Exception:  # keep recording; say why once per failure
                s.errors += 1
                traceback.print_exc()
            now = time.monotonic()
            if now - s.last_flush >= self.flush_interval:
                s.writer.flush()  # close the chunk: what a kill can lose is bounded by flush_interval
                s.last_flush = now
            self._stop.wait(0.02)

    def _drain(self, s: _Session, final: bool = False) -> None:
        self._take_switch(s)
        while self._other:
            topic, t, msg = self._other.popleft()
            self._write(s, topic, t, msg)
            if s.scene is not None and topic == CONFIG_TOPIC:
                s.scene.update(msg["params"])  # the volumes may have changed
            elif topic == COMMAND_TOPIC and msg["command"] == "target" and msg["args"]:
                s.target = np.asarray(msg["args"][0], dtype=float)
        if self._source is not None:
            items, lost = self._source()
            s.dropped += lost
            for it in items:
                self._pair(s, it)
        while self._states:
            self._pair(s, self._states.popleft())
        if final and s.pending is not None:
            self._write_state(s, s.pending)
            s.pending = None

    def _pair(self, s: _Session, it: Published) -> None:
        """Write the previous state with the timing this one brought (if it is that state's)."""
        p = s.pending
        if p is not None:
            if it.timing_index == p.index and it.state.cycle != p.state.cycle:
                p.compute, p.period_error = float(it.compute), float(it.period_error)
            self._write_state(s, p)
        s.pending = _Item(it.state, it.t_mono, it.own_index)

    def _write_state(self, s: _Session, item: _Item) -> None:
        st = item.state
        self._write(s, STATE_TOPIC, item.t_mono, state_message(st, item.compute, item.period_error))
        s.states += 1
        if st.cycle % TIP_DECIMATION == 0 and s.scene is not None and len(st.q) == s.scene.robot.dof:
            self._write_scene(s, item)
        if st.cycle % TIP_DECIMATION == 0:
            ns = int((item.t_mono + s.offset) * 1e9)
            p, qx = st.tip_pose[:3, 3], quaternion(st.tip_pose[:3, :3])
            self._write(s, TIP_TOPIC, item.t_mono, {
                "timestamp": {"sec": ns // 1_000_000_000, "nsec": ns % 1_000_000_000},
                "frame_id": s.scene.base if s.scene is not None else "base",
                "pose": {"position": dict(zip("xyz", p.tolist(), strict=True)),
                         "orientation": dict(zip("xyzw", qx, strict=True))}})

    def _write_scene(self, s: _Session, item: _Item) -> None:
        from fdcontrol.viz.scene import DESCRIPTION_TOPIC

        st, ns = item.state, int((item.t_mono + s.offset) * 1e9)
        if s.last_description is None or st.cycle - s.last_description >= DESCRIPTION_DECIMATION:
            self._write(s, DESCRIPTION_TOPIC, item.t_mono, s.scene.robot_description())
            s.last_description = st.cycle
        msgs = s.scene.messages(st, ns, s.target, volumes=st.cycle % VOLUMES_DECIMATION == 0)
        for topic, msg in msgs.items():
            self._write(s, topic, item.t_mono, msg)

    def _write(self, s: _Session, topic: str, t_mono: float, msg: dict[str, Any]) -> None:
        ns = int((t_mono + s.offset) * 1e9)
        s.writer.add_message(s.channels[topic], log_time=ns, publish_time=ns, data=_dumps(msg),
                             sequence=s.messages)
        s.messages += 1
        s.counts[topic] = s.counts.get(topic, 0) + 1


def _scene(params: dict[str, Any]) -> Any:
    """The 3-D scene of a recording (fdcontrol.viz.scene.Scene), or None for a robot without a URDF."""
    if "robot" not in params:
        return None
    from fdcontrol.model.robot import ModelError
    from fdcontrol.viz.scene import Scene

    try:
        return Scene(params)
    except (ModelError, ValueError, OSError):
        return None


class LoopTap:
    """A :class:`~fdcontrol.loop.cycle.LoopIO` that feeds a Recorder from a loop in this process.

    Use where recording may share the loop's process (simulations, tests): the writer thread
    competes with the loop for the GIL. The service records from the loop's process through
    shared memory instead (``fdcontrol.server.record_ring``).
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._last: Any = None

    def poll(self, loop: Any) -> None:
        pass

    def publish(self, loop: Any, state: Any) -> None:
        if self.recorder.active and state is not self._last:  # a re-publish of the same state is skipped
            st, c = loop.stats, loop.stats.count
            j = (c - 1) % st.n
            self.recorder.push_state(Published(state, loop.last_cycle_at or time.monotonic(), c, c - 1,
                                               st.compute[j], st.period_error[j]))
        self._last = state


# ---------------------------------------------------------------------- reading
def _pose_from_position(p: list[float]) -> np.ndarray:
    """A 4×4 pose from a position alone (old recordings stored no orientation: its entries are NaN)."""
    T = np.full((4, 4), np.nan)
    T[:3, 3], T[3] = p, (0.0, 0.0, 0.0, 1.0)
    return T


#: new field name → (old name, conversion) for recordings written by earlier versions
LEGACY_FIELDS: dict[str, tuple[str, Any]] = {
    "wrench": ("f_c", lambda v: v),
    "tip_pose": ("tip_position", _pose_from_position),
}


@dataclass
class Recording:
    """A recording read back: messages per topic (log time ns, decoded JSON), schemas, metadata."""

    path: Path
    messages: dict[str, list[tuple[int, dict[str, Any]]]]
    schemas: dict[str, dict[str, Any]]
    metadata: dict[str, dict[str, str]]
    complete: bool  # False: cut off (crash/kill); read up to the last complete chunk

    def states(self) -> list[dict[str, Any]]:
        return [m for _, m in self.messages.get(STATE_TOPIC, [])]

    def log_times(self, topic: str = STATE_TOPIC) -> np.ndarray:
        return np.array([t for t, _ in self.messages.get(topic, [])], dtype=np.int64)

    def array(self, key: str) -> np.ndarray:
        """A state field over time as a float array (rows = cycles); None → NaN.

        Recordings made by earlier versions name two fields differently (``f_c`` for ``wrench``,
        ``tip_position`` for the translation of ``tip_pose``); they are read under the new names."""
        states = self.states()
        if states and key not in states[0] and key in LEGACY_FIELDS and LEGACY_FIELDS[key][0] in states[0]:
            old, convert = LEGACY_FIELDS[key]
            return np.array([convert(m[old]) for m in states], dtype=float)
        vals = [m[key] for m in states]
        return np.array([np.nan if v is None else v for v in vals] if vals and not isinstance(vals[0], list)
                        else vals, dtype=float)

    def robot(self) -> dict[str, Any]:
        cfg = self.messages.get(CONFIG_TOPIC, [])
        return cfg[0][1]["robot"] if cfg else {}


def read_recording(path: str | Path, topics: Collection[str] | None = None) -> Recording:
    """Read every message of an fdcontrol MCAP file with mcap's stream reader (``topics``: only those
    topics' messages are decoded and kept).

    A file without a footer (cut off) is read up to its last complete record; chunks are
    CRC-checked, so a half-written chunk is never decoded into garbage.
    """
    p = Path(path)
    schemas: dict[int, Schema] = {}
    channels: dict[int, Channel] = {}
    messages: dict[str, list[tuple[int, dict[str, Any]]]] = collections.defaultdict(list)
    metadata: dict[str, dict[str, str]] = {}
    complete = False
    with open(p, "rb") as f:
        reader = StreamReader(f, validate_crcs=True)
        try:
            for rec in reader.records:
                if isinstance(rec, Schema):
                    schemas[rec.id] = rec
                elif isinstance(rec, Channel):
                    channels[rec.id] = rec
                elif isinstance(rec, Message):
                    ch = channels[rec.channel_id]
                    if topics is None or ch.topic in topics:
                        messages[ch.topic].append((rec.log_time, json.loads(rec.data)))
                elif isinstance(rec, Metadata):
                    metadata[rec.name] = dict(rec.metadata)
            complete = reader._footer is not None
        except (McapError, ValueError, EOFError, KeyError, OSError, struct.error):  # the cut-off tail
            complete = False
    by_topic = {ch.topic: json.loads(schemas[ch.schema_id].data) for ch in channels.values()
                if ch.schema_id in schemas}
    return Recording(p, dict(messages), by_topic, metadata, complete)


def robot_info(loop: Any) -> dict[str, Any]:
    """Joint names and limits of a running :class:`~fdcontrol.loop.cycle.ControlLoop` (for the config message)."""
    r, lim = loop.robot, loop.robot.limits
    return {"name": r.name, "joint_names": list(r.joint_names), "lower": lim.lower.tolist(),
            "upper": lim.upper.tolist(), "max_velocity": lim.velocity.tolist(),
            "velocity_limit": np.asarray(loop.limits.max_velocity).tolist(), "rate": loop.rate}


@functools.lru_cache(maxsize=8)
def _resolve(name: str, base: str | None, tip: str | None) -> Any:
    from fdcontrol.model.robot import RobotModel

    return RobotModel.resolve(name, base, tip)


def robot_info_from_params(params: dict[str, Any]) -> dict[str, Any]:
    """The same as :func:`robot_info` from the service's control parameters (velocity limit =
    velocity_scale × the URDF's, as ``SafetyLimits.from_robot``)."""
    r = _resolve(params["robot"], params.get("base"), params.get("tip"))
    lim = r.limits
    return {"name": r.name, "joint_names": list(r.joint_names), "lower": lim.lower.tolist(),
            "upper": lim.upper.tolist(), "max_velocity": lim.velocity.tolist(),
            "velocity_limit": (params["velocity_scale"] * lim.velocity).tolist(), "rate": params["rate"]}


__all__ = ["COMMAND_TOPIC", "CONFIG_TOPIC", "EPISODE_TOPIC", "SCHEMAS", "STATE_FIELDS", "STATE_SCHEMA", "STATE_TOPIC",
           "TIMING_SCHEMA", "TIP_TOPIC", "LoopTap", "Published", "Recorder", "Recording", "quaternion",
           "read_recording", "robot_info", "robot_info_from_params", "state_message", "state_schema"]
