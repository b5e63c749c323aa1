"""The loop state, declared once: every field with its kind, shape, description and unit.

:class:`LoopState` is the immutable state one control cycle publishes. Its fields carry their
declaration in ``dataclasses.field(metadata=...)``; everything else is derived from it:

* :class:`SharedLayout` — the float64 slots of the shared-memory state slot (for up to
  ``max_dof`` joints; the fault text as bytes inside the same block, so one seqlock covers it),
* :func:`to_dict` / :func:`from_dict` (and the JSON / MessagePack helpers) — the wire encoding,
* :func:`state_model` — the pydantic model for the OpenAPI schema,
* :func:`describe` — a Markdown table of the fields for the documentation.

Shape rules are tuples of ints and the symbol ``"dof"`` (the robot's joint count).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Annotated, Any, Literal

import numpy as np

from fdcontrol.control.laws import LAWS
from fdcontrol.limits import LIMITS

#: sensor_stale: a law that reads the force sensor got no reading for ``sensor_timeout``
WATCHDOG: tuple[str, ...] = ("idle", "ok", "tripped", "sensor_stale")
MOVE_STATUS: tuple[str, ...] = ("idle", "moving", "paused", "done", "cancelled")  # fdcontrol.control.trajectory
#: the keys of ``limits_active``: every registered limit, then the solver's virtual joint limit
LIMIT_KEYS: tuple[str, ...] = (*LIMITS.names(), "virtual_joint_limit")

Shape = tuple[int | str, ...]


def _decl(kind: str, description: str, unit: str = "", shape: Shape = (), choices: tuple[str, ...] = (),
          nullable: bool = False) -> dict[str, Any]:
    return {"kind": kind, "description": description, "unit": unit, "shape": shape, "choices": choices,
            "nullable": nullable}


def scalar(kind: Literal["float", "int", "bool"], description: str, unit: str = "",
           nullable: bool = False) -> dict[str, Any]:
    """A number or flag; ``nullable`` floats encode NaN as null."""
    return _decl(kind, description, unit, nullable=nullable)


def array(shape: Shape, description: str, unit: str = "") -> dict[str, Any]:
    """A float64 array of the given shape rule."""
    return _decl("array", description, unit, shape)


def choice(choices: tuple[str, ...], description: str) -> dict[str, Any]:
    """One of a fixed set of names (stored by index in shared memory)."""
    return _decl("choice", description, choices=choices)


def text(description: str) -> dict[str, Any]:
    """Free text or None."""
    return _decl("text", description, nullable=True)


def flags(keys: tuple[str, ...], description: str) -> dict[str, Any]:
    """A dict name → bool over fixed keys."""
    return _decl("flags", description, choices=keys)


@dataclass(frozen=True)
class LoopState:
    """What one control cycle publishes (base frame; SI units as declared per field)."""

    t: float = field(metadata=scalar("float", "time of the joint measurement (driver clock)", "s"))
    cycle: int = field(metadata=scalar("int", "cycles since the loop started"))
    q: np.ndarray = field(metadata=array(("dof",), "measured joint positions", "rad"))
    qd: np.ndarray = field(metadata=array(("dof",), "measured joint velocities", "rad/s"))
    q_ref: np.ndarray = field(metadata=array(("dof",), "joint position reference sent to the driver", "rad"))
    qd_ref: np.ndarray = field(metadata=array(("dof",), "joint velocity reference sent to the driver", "rad/s"))
    tip_pose: np.ndarray = field(metadata=array((4, 4), "tip pose in the base frame, homogeneous 4×4", "m"))
    wrench: np.ndarray = field(metadata=array((6,), "control signal f_c [F; τ] to the solver, base frame", "N, N·m"))
    f_measured: np.ndarray = field(metadata=array((6,), "filtered measured wrench [F; τ], base frame", "N, N·m"))
    mode: str = field(metadata=choice(LAWS.names(), "control law mode"))
    running: bool = field(metadata=scalar("bool", "the fixed-rate loop is running"))
    holding: bool = field(metadata=scalar("bool", "braking to / holding standstill (hold, watchdog or fault)"))
    watchdog: str = field(metadata=choice(WATCHDOG, "input watchdog: idle, ok, tripped (stale stream) or sensor_stale"))
    seq_ack: int = field(metadata=scalar("int", "sequence number of the last streamed wrench used"))
    fault: str | None = field(metadata=text("why the loop holds after a fault; null when none"))
    sigma_min_j: float = field(metadata=scalar("float", "σmin of the Jacobian (singularity telemetry)"))
    limits_active: dict[str, bool] = field(
        default_factory=dict, metadata=flags(LIMIT_KEYS, "which safety limits shaped the last reference"))
    kappa_h: float = field(
        default=math.nan, metadata=scalar("float", "κ(H) of the FD virtual model; null otherwise", nullable=True))
    posture_distance: float = field(default=math.nan, metadata=scalar(
        "float", "‖q − q_preferred‖ of the null-space posture task; null without it", "rad", nullable=True))
    link_clearance: float = field(default=math.nan, metadata=scalar(
        "float", "min over link loads of distance − margin (< 0 inside a margin); null without link loads", "m",
        nullable=True))
    speed_scaling: float = field(default=math.nan, metadata=scalar(
        "float", "the robot controller's speed scaling, fraction 0–1 (UR: speed slider × trajectory limiter); "
        "null when the driver has none", nullable=True))
    safety_mode: str | None = field(default=None, metadata=text(
        "the robot controller's safety mode (UR: NORMAL, REDUCED, PROTECTIVE_STOP, …); null when the driver has none"))
    tip_twist: np.ndarray = field(default_factory=lambda: np.zeros(6), metadata=array(
        (6,), "measured tip twist J q̇ [v; ω], base frame", "m/s, rad/s"))
    stamp: float = field(default=math.nan, metadata=scalar(
        "float", "the loop's time.monotonic() at this cycle's start (compare on the same host only)", "s",
        nullable=True))
    action_seq: int = field(default=0, metadata=scalar(
        "int", "sequence number of the newest policy action the motion law uses (0: none)"))
    action_used_at: float = field(default=math.nan, metadata=scalar(
        "float", "the loop's time.monotonic() of the first cycle that used action_seq; null before any", "s",
        nullable=True))
    workspace_distance: float = field(default=math.nan, metadata=scalar(
        "float", "signed distance of the tip to the nearest workspace boundary (< 0 beyond it); null without "
        "a workspace", "m", nullable=True))
    move_status: str = field(default="idle", metadata=choice(
        MOVE_STATUS, "the move (POST /control/move): idle, moving, paused (yielding to a push), done or cancelled"))
    move_progress: float = field(default=math.nan, metadata=scalar(
        "float", "fraction of the move's path covered, 0–1; null without a move", nullable=True))
    reaction_count: int = field(default=0, metadata=scalar("int", "reaction rules fired since the loop was built"))
    reaction_event: str | None = field(default=None, metadata=text(
        "the last reaction that fired: cycle, rule, the signal's value, the action; null before the first"))
    fault_at: float = field(default=math.nan, metadata=scalar(
        "float", "the loop's time.monotonic() when the current fault was recorded (compare with stamp, the last "
        "cycle before it); null without a fault", "s", nullable=True))
    link_distance: float = field(default=math.nan, metadata=scalar(
        "float", "the smallest signed distance between a link's collision shape and a volume or another link "
        "(< 0: overlapping); null without link geometry checks", "m", nullable=True))
    link_pair: str | None = field(default=None, metadata=text(
        "the link and the volume (or the other link) of link_distance, as 'link ↔ volume'; null without"))
    gamma: float = field(default=math.nan, metadata=scalar(
        "float", "γ of the FD virtual model at this cycle (the value of its conditioning schedule now); null for "
        "the other mappings", nullable=True))
    following: bool = field(default=True, metadata=scalar(
        "bool", "the arm does what the loop asks: false once a joint's measured velocity has differed from the "
        "reference by more than 0.5 rad/s for 0.25 s (not a fault by itself)"))
    follow_joint: int = field(default=-1, metadata=scalar(
        "int", "the joint (0-based) that does not follow; -1 while the arm follows"))
    follow_error: float = field(default=math.nan, metadata=scalar(
        "float", "|measured − reference| joint velocity of follow_joint; null while the arm follows", "rad/s",
        nullable=True))
    sensor_status: str | None = field(default=None, metadata=text(
        "the force–torque sensor's own error report (e.g. a Net F/T's non-zero status word); null while it "
        "reports none or without such a sensor"))


FIELDS = fields(LoopState)
NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)


def state_of(values: dict[str, Any]) -> LoopState:
    """The LoopState whose dict is ``values`` — every field by name, in declaration order; the dict becomes the
    state's own. A per-cycle constructor (:meth:`SharedLayout.unpack`; the loop's ``_publish`` does the same two
    steps inline): the frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (~1.7 µs
    for 22 fields). The object is the dataclass's: frozen, equal field by field (tests/test_state.py checks the
    loop's state has every field)."""
    s = object.__new__(LoopState)
    object.__setattr__(s, "__dict__", values)
    return s


def shape_of(f: Any, dof: int) -> tuple[int, ...]:
    """A field's concrete shape for ``dof`` joints."""
    return tuple(dof if s == "dof" else int(s) for s in f.metadata["shape"])


# ---------------------------------------------------------------------- shared memory
class SharedLayout:
    """Float64 slots of every field for up to ``max_dof`` joints, and named ``extra`` slots.

    Slot 0 holds the joint count, then every scalar (choices as an index) in one run, then the
    arrays at their maximal size, the flags (one slot per key) and the texts (a length, −1 for
    None, then ``text_bytes`` bytes of UTF-8, truncated). The caller owns the seqlock around
    :meth:`pack` / :meth:`unpack`.
    """

    def __init__(self, max_dof: int = 16, text_bytes: int = 512, extra: tuple[str, ...] = ()) -> None:
        self.max_dof, self.text_bytes = max_dof, text_bytes
        self.slots: dict[str, slice] = {}
        order = {"float": 0, "int": 0, "bool": 0, "choice": 0, "array": 1, "flags": 2, "text": 3}
        o = 1  # slot 0: dof
        for f in sorted(FIELDS, key=lambda f: order[f.metadata["kind"]]):
            kind = f.metadata["kind"]
            if kind == "array":
                n = int(np.prod(shape_of(f, max_dof)))
            elif kind == "flags":
                n = len(f.metadata["choices"])
            elif kind == "text":
                n = 1 + -(-text_bytes // 8)
            else:
                n = 1
            self.slots[f.name] = slice(o, o + n)
            o += n
        for name in extra:
            self.slots[name] = slice(o, o + 1)
            o += 1
        self.size = o
        self.nbytes = 8 * o
        by_kind = {k: [f for f in FIELDS if f.metadata["kind"] == k] for k in order}
        self._scalars = [f.name for f in FIELDS if order[f.metadata["kind"]] == 0]
        self._scalars.sort(key=lambda n: self.slots[n].start)
        self._choices = {f.name: {c: i for i, c in enumerate(f.metadata["choices"])} for f in by_kind["choice"]}
        self._arrays = [(f.name, self.slots[f.name].start) for f in by_kind["array"]]
        self._flags = [(f.name, self.slots[f.name], f.metadata["choices"]) for f in by_kind["flags"]]
        self._texts = [(f.name, self.slots[f.name]) for f in by_kind["text"]]
        self._scalar_run = slice(1, 1 + len(self._scalars))
        # pack's getters (one call per kind instead of one getattr per field) and the choices' places in the row
        self._get_scalars = _getter(self._scalars)
        self._choice_at = [(i, n, self._choices[n]) for i, n in enumerate(self._scalars) if n in self._choices]
        self._get_arrays = _getter([n for n, _ in self._arrays])
        self._array_starts = [start for _, start in self._arrays]
        self._get_texts = _getter([n for n, _ in self._texts])
        self._text_spans = [(sl.start, sl.stop) for _, sl in self._texts]
        kinds = {f.name: f.metadata["kind"] for f in FIELDS}
        self._casts = [(n, {"int": int, "bool": bool}[kinds[n]]) for n in self._scalars if kinds[n] in ("int", "bool")]
        self._casts += [(n, lambda i, c=f.metadata["choices"]: c[int(i)]) for f in by_kind["choice"] for n in [f.name]]
        self._array_shapes = [(f.name, f.metadata["shape"], self.slots[f.name].start) for f in by_kind["array"]]
        self._extra = [(name, self.slots[name]) for name in extra]
        self._extra_at = {name: sl.start for name, sl in self._extra}
        self._names = tuple(f.name for f in FIELDS)
        self._plans: dict[int, tuple[int, int, list[tuple[str, int, int, tuple[int, ...]]]]] = {}
        self._scatters: dict[int, tuple[np.ndarray, list[int]]] = {}
        self._wire_fns: dict[int, Any] = {}  # wire's function per joint count
        self._wire_stop = min((sl.start for _, sl in self._texts), default=self.size)  # wire reads up to the texts

    def empty(self) -> np.ndarray:
        return np.zeros(self.size)

    def pack(self, s: LoopState, out: np.ndarray, **extra: float) -> None:
        """Write ``s`` (and the ``extra`` slots) into ``out`` (float64, length ``size``)."""
        self._pack(s, out, extra, None)

    def packer(self, out: np.ndarray) -> Packer:
        """A :class:`Packer` into ``out``, a buffer that nothing else writes (the state slot's private row)."""
        return Packer(self, out)

    def _pack(self, s: LoopState, out: np.ndarray, extra: dict[str, float], last: list[Any] | None) -> None:
        """:meth:`pack`; ``last`` (a :class:`Packer`'s memory of what it wrote into ``out`` before: the flags'
        dicts, the texts) skips a field equal to the one already there — the buffer ends the same."""
        dof = len(s.q)
        if dof > self.max_dof:
            raise ValueError(f"{dof} joints exceed the layout's max_dof = {self.max_dof}")
        out[0] = dof
        row = list(self._get_scalars(s))  # one attrgetter call for all scalars, in slot order
        for i, name, codes in self._choice_at:
            v = row[i]
            if v not in codes:
                raise ValueError(f"{name} = {v!r} is not one of {', '.join(codes)}")
            row[i] = codes[v]
        out[self._scalar_run] = row
        arrays = self._get_arrays(s)
        dst, sizes = self._scatter_plan(dof)
        if [v.size for v in arrays] == sizes:  # the declared sizes: one scatter
            out[dst] = np.concatenate(arrays, axis=None)  # every array flattened, in slot order
        else:  # a value off its declared shape: each written as before, as many entries as it has
            for v, start in zip(arrays, self._array_starts, strict=True):
                out[start:start + v.size] = v.reshape(-1)
        self._write_flags(s, out, last)
        self._write_texts(s, out, last)
        for name, value in extra.items():
            out[self._extra_at[name]] = value

    def _write_flags(self, s: LoopState, out: np.ndarray, last: list[Any] | None) -> None:
        for i, (name, sl, keys) in enumerate(self._flags):
            v = getattr(s, name)
            if last is not None:
                if last[0][i] is not None and v == last[0][i]:
                    continue  # the same flags as the ones in out already
                last[0][i] = dict(v)
            out[sl] = [bool(v.get(k)) for k in keys]

    def _write_texts(self, s: LoopState, out: np.ndarray, last: list[Any] | None) -> None:
        texts = self._get_texts(s)
        if last is not None:
            if texts == last[1]:  # the same texts as the ones in out already (the usual cycle: no new fault)
                return
            last[1] = texts
        for v, (start, stop) in zip(texts, self._text_spans, strict=False):
            if v is None:
                out[start] = -1
            else:
                raw = v.encode()[: self.text_bytes]
                out[start] = len(raw)
                out[start + 1:stop].view(np.uint8)[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)

    def _scatter_plan(self, dof: int) -> tuple[np.ndarray, list[int]]:
        """For ``dof`` joints: the slot of every entry of the arrays flattened one after the other (pack's one
        scatter), and each array's declared size."""
        plan = self._scatters.get(dof)
        if plan is None:
            sizes = [math.prod(shape_of_rule(shape, dof)) for _, shape, _ in self._array_shapes]
            dst = np.concatenate([np.arange(start, start + n) for (_, _, start), n
                                  in zip(self._array_shapes, sizes, strict=True)])
            plan = self._scatters[dof] = (dst, sizes)
        return plan

    def _array_plan(self, dof: int) -> tuple[int, int, list[tuple[str, int, int, tuple[int, ...]]]]:
        """For ``dof`` joints: the span of the array slots, and per array its offset in that span and shape."""
        plan = self._plans.get(dof)
        if plan is None:
            lo = min(start for _, _, start in self._array_shapes)
            hi = max(start + math.prod(shape_of_rule(shape, dof)) for _, shape, start in self._array_shapes)
            rows = [(name, start - lo, start - lo + math.prod(shape_of_rule(shape, dof)), shape_of_rule(shape, dof))
                    for name, shape, start in self._array_shapes]
            plan = self._plans[dof] = (lo, hi, rows)
        return plan

    def unpack(self, arr: np.ndarray) -> tuple[LoopState, dict[str, float]]:
        """Read a state written by :meth:`pack` (from a consistent copy) and the extra slots.

        The arrays are views of one private copy of their slots (one copy, not one per array), so
        the state owns its data whatever the caller does with ``arr`` afterwards."""
        dof = int(arr[0])
        values: dict[str, Any] = dict(zip(self._scalars, arr[self._scalar_run].tolist(), strict=True))
        for name, cast in self._casts:
            values[name] = cast(values[name])
        lo, hi, rows = self._array_plan(dof)
        block = arr[lo:hi].copy()
        for name, a, b, shape in rows:
            values[name] = block[a:b].reshape(shape)
        for name, sl, keys in self._flags:
            values[name] = dict(zip(keys, (arr[sl] != 0).tolist(), strict=True))
        for name, sl in self._texts:
            values[name] = _text_at(arr, sl.start, sl.stop)
        state = state_of({n: values[n] for n in self._names})  # the instance's dict in one fill, field order
        return state, {k: float(arr[sl.start]) for k, sl in self._extra}

    def wire(self, arr: np.ndarray) -> dict[str, Any]:
        """:func:`to_dict` of the state written by :meth:`pack` into ``arr``, read straight from its slots: the same
        dict, key for key and value for value, as ``to_dict(self.unpack(arr)[0])``, without building the state and
        its arrays on the way (the service encodes every published state for its streams this way). One function
        per joint count, generated from the declaration (:meth:`_wire_function`)."""
        dof = int(arr[0])
        fn = self._wire_fns.get(dof)
        if fn is None:
            fn = self._wire_fns[dof] = self._wire_function(dof)
        return fn(arr[:self._wire_stop].tolist(), arr)  # every number before the texts, as Python floats

    def _wire_function(self, dof: int) -> Any:
        """``wire(v, arr)`` for ``dof`` joints: one dict display, field by field in declaration order (to_dict's),
        each value read from ``v`` (the slots before the texts as a list) at its slot; texts from ``arr``."""
        env: dict[str, Any] = {"isfinite": math.isfinite, "text": _text_at}
        items = []
        for f in FIELDS:
            kind, meta, at = f.metadata["kind"], f.metadata, self.slots[f.name].start
            if kind == "array":
                shape = shape_of_rule(meta["shape"], dof)
                if len(shape) == 1:
                    e = f"v[{at}:{at + shape[0]}]"
                elif len(shape) == 2:
                    rows, cols = shape
                    e = "[" + ", ".join(f"v[{at + r * cols}:{at + (r + 1) * cols}]" for r in range(rows)) + "]"
                else:  # pragma: no cover - no field is declared with more than two axes
                    raise NotImplementedError(f"{f.name}: arrays of {len(shape)} axes")
            elif kind == "float":
                e = f"(v[{at}] if isfinite(v[{at}]) else None)" if meta["nullable"] else f"v[{at}]"
            elif kind == "int":
                e = f"int(v[{at}])"
            elif kind == "bool":
                e = f"v[{at}] != 0"
            elif kind == "choice":
                env[f"CHOICES_{at}"] = meta["choices"]
                e = f"CHOICES_{at}[int(v[{at}])]"
            elif kind == "flags":
                e = "{" + ", ".join(f"{k!r}: v[{at + j}] != 0" for j, k in enumerate(meta["choices"])) + "}"
            else:
                e = f"text(arr, {at}, {self.slots[f.name].stop})"
            items.append(f"        {f.name!r}: {e},")
        lines = ["def wire(v, arr):", "    return {", *items, "    }"]
        code = compile("\n".join(lines) + "\n", f"<SharedLayout.wire of {dof} joints>", "exec")
        exec(code, env)  # the source generated above from the declaration, no outside input
        fn = env["wire"]
        fn.source = "\n".join(lines)  # for a reader (and tests)
        return fn


def _text_at(arr: np.ndarray, start: int, stop: int) -> str | None:
    """A text field of the packed state ``arr`` at slots [start, stop) (its length, −1 for None, then its UTF-8
    bytes): what :meth:`SharedLayout.unpack` and :meth:`SharedLayout.wire` read."""
    n = int(arr[start])
    return None if n < 0 else bytes(arr[start + 1:stop].view(np.uint8)[:n]).decode(errors="ignore")


class Packer:
    """:meth:`SharedLayout.pack` into one buffer that only this packer writes, every cycle: the fields that
    rarely change (the flags, the texts: a fault, the robot's mode) are written only when they differ from
    the ones it wrote last — the buffer ends exactly as ``pack`` would leave it, for a fraction of the work.
    Nothing else may write into the buffer (a write elsewhere would not be seen)."""

    def __init__(self, layout: SharedLayout, out: np.ndarray) -> None:
        self.layout, self.out = layout, out
        self._last: list[Any] = [[None] * len(layout._flags), None]  # the flags' dicts, the texts, as written
        whole = (isinstance(out, np.ndarray) and out.dtype == np.float64 and out.ndim == 1
                 and out.flags.c_contiguous and out.flags.writeable and len(out) >= layout.size)
        self._fast = _straight_pack(layout) if whole else None

    @property
    def texts_written(self) -> object:
        """A token for the texts in the buffer: the same object as long as the packer has not written them again
        (then a new one); None while it does not know what is there (before the first pack, after one that
        failed)."""
        return self._last[1]

    def pack(self, s: LoopState, **extra: float) -> None:
        """Write ``s`` (and the ``extra`` slots) into the buffer: by the compiled packing where it takes the
        state (fdcontrol.loop.state_compiled), else — or where numba is missing — by :meth:`SharedLayout.pack`'s
        numpy calls; the same bytes either way (tests/test_state.py)."""
        self.pack_extra(s, extra)

    def pack_extra(self, s: LoopState, extra: dict[str, float]) -> None:
        """:meth:`pack` with the extra slots' values in a dict (the state slot's writer keeps one: no keywords'
        dict per write); the dict is read, never kept."""
        try:
            fast = self._fast
            if fast is None or not fast(s, self.out, extra, self._last):
                self.layout._pack(s, self.out, extra, self._last)
        except BaseException:
            self._last = [[None] * len(self.layout._flags), None]  # a write cut short: forget what is there
            raise


def _straight_pack(layout: SharedLayout) -> Any:
    """fdcontrol.loop.state_compiled's packing of this layout (its kernel compiled when first imported: as the
    packer is built, never in the loop thread), or None where numba is missing."""
    try:
        from fdcontrol.loop import state_compiled
    except ImportError:
        return None
    return state_compiled.straight_pack(layout)


def _getter(names: list[str]) -> Any:
    """A callable returning the tuple of those attributes (attrgetter returns a bare value for one name)."""
    if len(names) == 1:
        return lambda s, n=names[0]: (getattr(s, n),)
    if not names:
        return lambda s: ()
    return attrgetter(*names)


def shape_of_rule(shape: Shape, dof: int) -> tuple[int, ...]:
    """A shape rule's concrete shape for ``dof`` joints."""
    return tuple(dof if s == "dof" else int(s) for s in shape)


# ---------------------------------------------------------------------- wire encoding
def to_dict(s: LoopState) -> dict[str, Any]:
    """JSON- and MessagePack-ready dict: arrays as (nested) lists, NaN of nullable floats as None."""
    d: dict[str, Any] = {}
    for f in FIELDS:
        v = getattr(s, f.name)
        kind = f.metadata["kind"]
        if kind == "array":
            d[f.name] = np.asarray(v).tolist()
        elif kind == "flags":
            d[f.name] = {k: bool(x) for k, x in v.items()}
        elif kind == "float":
            d[f.name] = None if (f.metadata["nullable"] and not math.isfinite(v)) else float(v)
        elif kind == "int":
            d[f.name] = int(v)
        elif kind == "bool":
            d[f.name] = bool(v)
        else:
            d[f.name] = v
    return d


def from_dict(d: dict[str, Any]) -> LoopState:
    """Inverse of :func:`to_dict`."""
    values: dict[str, Any] = {}
    for f in FIELDS:
        v = d[f.name]
        kind = f.metadata["kind"]
        if kind == "array":
            v = np.asarray(v, dtype=float)
        elif kind == "float":
            v = math.nan if v is None else float(v)
        elif kind == "flags":
            v = dict(v)
        values[f.name] = v
    return LoopState(**values)


def to_json(s: LoopState) -> str:
    return json.dumps(to_dict(s))


def from_json(raw: str | bytes) -> LoopState:
    return from_dict(json.loads(raw))


def to_msgpack(s: LoopState) -> bytes:
    import msgpack  # the server extra's: the library's state needs it only on the wire

    return msgpack.packb(to_dict(s))


def from_msgpack(raw: bytes) -> LoopState:
    import msgpack

    return from_dict(msgpack.unpackb(raw))


# ---------------------------------------------------------------------- OpenAPI
def _annotation(f: Any) -> Any:
    from pydantic import Field

    finite = Annotated[float, Field(allow_inf_nan=False)]
    kind, meta = f.metadata["kind"], f.metadata
    if kind == "array":
        t: Any = finite
        for _ in meta["shape"]:
            t = list[t]
        return t
    if kind == "choice":
        return Literal[meta["choices"]]
    if kind == "text":
        return str | None
    if kind == "flags":
        return dict[str, bool]
    base = {"float": float, "int": int, "bool": bool}[kind]
    return base | None if meta["nullable"] else base


def state_model(name: str = "State", **extra: Any) -> Any:
    """The pydantic model of the encoded state (field descriptions carry the units).

    ``extra``: further fields after the declared ones, as ``create_model`` takes them
    (e.g. the API's ``stale`` flag).
    """
    from pydantic import Field, create_model

    spec: dict[str, Any] = {}
    for f in FIELDS:
        meta = f.metadata
        desc = meta["description"] + (f" ({meta['unit']})" if meta["unit"] else "")
        if meta["kind"] == "flags":
            desc += f"; keys: {', '.join(meta['choices'])}"
        spec[f.name] = (_annotation(f), Field(description=desc))
    return create_model(name, **spec, **extra)


def describe() -> str:
    """The fields as a Markdown table (name, kind, shape, unit, description)."""
    rows = ["| field | kind | shape | unit | description |", "|---|---|---|---|---|"]
    for f in FIELDS:
        m = f.metadata
        shape = "×".join(str(s) for s in m["shape"]) or "scalar"
        kind = m["kind"] + (f" ({' / '.join(m['choices'])})" if m["choices"] else "")
        rows.append(f"| `{f.name}` | {kind} | {shape} | {m['unit']} | {m['description']} |")
    return "\n".join(rows)

