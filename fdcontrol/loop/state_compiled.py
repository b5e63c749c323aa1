"""The state slot's packing, compiled: one straight run of code and one compiled call instead of numpy's.

:func:`straight_pack` returns, for a :class:`~fdcontrol.loop.state.SharedLayout`, a function that writes what
:meth:`SharedLayout._pack <fdcontrol.loop.state.SharedLayout._pack>` writes — the joint count, the scalars (the
choices by their index), the arrays at their slots in row-major order, the flags and texts where they changed,
the extra slots — to the last bit (tests/test_state.py packs random and edge-case states both ways and compares
the bytes). It is generated from the layout when the packer is built (as :mod:`dataclasses` writes a class's
``__init__``): the fields by name from the state's dict, the scalars by one ``struct.pack_into`` (float64 in the
machine's byte order: the bytes numpy stores for the same numbers), the arrays by one call of the compiled
:func:`pack_arrays`. What it does not take it leaves to numpy's path, which then writes the whole state (and
raises what it raises): a state that is not a LoopState, too many joints, a choice not declared, a scalar struct
does not take (None: numpy stores NaN), an array off its declared shape, not float64, or float64 of the other byte
order (a network packet's ``'>f8'``: numba would take it inside a tuple and read its bytes as native ones).
Numba says "not mine" with a TypeError that costs ~0.3 ms: after the first, the arrays are checked in Python before
each call (:func:`takes`), and a TypeError despite the check turns the kernel off for that packer.
:func:`pack_arrays` is compiled by numba once per process when this module is first imported (cached on disk):
never in the loop thread.

The array fields are taken from the declaration (fdcontrol.loop.state): the 1-D ones as one tuple, the 2-D ones
as another, each with its slot starts and declared extents (−1: the joint count).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from fdcontrol.extras import missing
from fdcontrol.loop.state import FIELDS, LoopState, SharedLayout

try:
    import numba
    from numba import types
except ImportError as exc:  # the state is then packed by numpy calls alone
    raise missing("fast", "the compiled state packing", exc) from exc

_SHAPES = [f.metadata["shape"] for f in FIELDS if f.metadata["kind"] == "array"]
#: the declared array fields' names, 1-D and 2-D (a field of another rank: no compiled packing at all)
VECS = tuple(f.name for f in FIELDS if f.metadata["kind"] == "array" and len(f.metadata["shape"]) == 1)
MATS = tuple(f.name for f in FIELDS if f.metadata["kind"] == "array" and len(f.metadata["shape"]) == 2)
SUPPORTED = len(VECS) + len(MATS) == len(_SHAPES) and bool(VECS) and bool(MATS)

_OUT = types.Array(types.float64, 1, "A")
# any layout (a view, a strided array: read entry by entry), read-only or not (a driver's np.frombuffer)
_VEC = types.Array(types.float64, 1, "A", readonly=True)
_MAT = types.Array(types.float64, 2, "A", readonly=True)
_IDX = types.Array(types.int64, 1, "A")
_SIG = types.boolean(_OUT, types.int64, types.UniTuple(_VEC, max(len(VECS), 1)), _IDX, _IDX,
                     types.UniTuple(_MAT, max(len(MATS), 1)), _IDX, _IDX)


@numba.njit(_SIG, cache=True, boundscheck=True)  # a slot past the row's end raises, never writes past it
def pack_arrays(out: np.ndarray, dof: int, vecs: tuple[np.ndarray, ...], vec_at: np.ndarray, vec_n: np.ndarray,
                mats: tuple[np.ndarray, ...], mat_at: np.ndarray, mat_rc: np.ndarray) -> bool:  # pragma: no cover
    """Write every array at its slot start (``vec_at``, ``mat_at``), row-major, if each has its declared
    extents (``vec_n``: length per 1-D array; ``mat_rc``: rows, columns per 2-D array, two entries each; −1 is
    ``dof``); else write nothing and return False."""
    for i in range(len(vecs)):
        n = vec_n[i] if vec_n[i] >= 0 else dof
        if vecs[i].shape[0] != n:
            return False
    for i in range(len(mats)):
        r = mat_rc[2 * i] if mat_rc[2 * i] >= 0 else dof
        c = mat_rc[2 * i + 1] if mat_rc[2 * i + 1] >= 0 else dof
        if mats[i].shape[0] != r or mats[i].shape[1] != c:
            return False
    for i in range(len(vecs)):
        v = vecs[i]
        o = vec_at[i]
        for k in range(v.shape[0]):
            out[o + k] = v[k]
    for i in range(len(mats)):
        m = mats[i]
        o = mat_at[i]
        cols = m.shape[1]
        for r in range(m.shape[0]):
            for c in range(cols):
                out[o + r * cols + c] = m[r, c]
    return True


#: straight_pack's use of the kernel: call it (a TypeError says the arrays are not its own), call it after a check
#: in Python that they are (after the first TypeError: numba's answer to a type it has no code for costs ~0.3 ms,
#: too much for a cycle to pay again), not at all (a TypeError despite the check)
OPTIMISTIC, CHECKED, OFF = 0, 1, 2
_F8 = np.dtype(np.float64)


def takes(vecs: tuple[Any, ...], mats: tuple[Any, ...]) -> bool:
    """Whether :func:`pack_arrays` has code for these arrays: numpy arrays of native float64, of their
    rank (any memory layout, read-only or not; one it still has no code for, unaligned, raises TypeError)."""
    for a in vecs:
        if type(a) is not np.ndarray or a.dtype != _F8 or a.ndim != 1:
            return False
    for a in mats:
        if type(a) is not np.ndarray or a.dtype != _F8 or a.ndim != 2:
            return False
    return True


def straight_pack(layout: SharedLayout) -> Callable[[LoopState, np.ndarray, dict[str, float], list[Any]], bool] | None:
    """``pack(s, out, extra, last) -> bool`` for ``layout`` (``last``: a Packer's memory of the flags and texts in
    ``out``): True when it wrote ``s``; False when the state is not one it takes — then numpy's path must write
    it whole (it may have written part of it). None when the declaration has arrays :func:`pack_arrays` does not
    take (of another rank)."""
    if not SUPPORTED:
        return None
    shapes = {f.name: f.metadata["shape"] for f in FIELDS}

    def extent(e: int | str) -> int:
        return -1 if e == "dof" else int(e)

    env: dict[str, Any] = {
        "LoopState": LoopState, "MAX_DOF": layout.max_dof, "KERNEL": pack_arrays, "OFF": OFF,
        "SCALARS": struct.Struct(f"={len(layout._scalars)}d"), "AT": 8 * layout._scalar_run.start,
        "VEC_AT": np.array([layout.slots[n].start for n in VECS], dtype=np.int64),
        "VEC_N": np.array([extent(shapes[n][0]) for n in VECS], dtype=np.int64),
        "MAT_AT": np.array([layout.slots[n].start for n in MATS], dtype=np.int64),
        "MAT_RC": np.array([extent(e) for n in MATS for e in shapes[n]], dtype=np.int64),
        "FLAGS": layout._write_flags, "TEXTS": layout._write_texts, "EXTRA_AT": layout._extra_at,
        "MODE": [OPTIMISTIC], "TAKES": takes}
    choices, scalars = [], []
    for i, name in enumerate(layout._scalars):
        if name in layout._choices:
            env[f"CODES_{i}"] = layout._choices[name]
            choices.append(f"        c{i} = CODES_{i}[d[{name!r}]]")
            scalars.append(f"c{i}")
        else:
            scalars.append(f"d[{name!r}]")
    flags = [f"(last[0][{i}] is None or d[{name!r}] != last[0][{i}])" for i, (name, _, _) in enumerate(layout._flags)]
    texts = "(" + "".join(f"d[{name!r}], " for name, _ in layout._texts) + ")"
    lines = [
        "def pack(s, out, extra, last):",
        "    if type(s) is not LoopState:",
        "        return False",
        "    d = s.__dict__",
        "    dof = len(d['q'])",
        "    if dof > MAX_DOF:",
        "        return False",
        "    try:",
        *(choices or ["        pass"]),
        "    except (KeyError, TypeError):  # not a declared choice (or no field of that name): numpy's path raises",
        "        return False",
        "    out[0] = dof",
        "    try:",
        f"        SCALARS.pack_into(out, AT, {', '.join(scalars)})",
        "    except Exception:  # a value struct does not take (None: numpy stores NaN): numpy's path",
        "        return False",
        f"    vecs = ({''.join(f'd[{n!r}], ' for n in VECS)})",
        f"    mats = ({''.join(f'd[{n!r}], ' for n in MATS)})",
        "    if MODE[0] and (MODE[0] == OFF or not TAKES(vecs, mats)):",
        "        return False",
        "    if not MODE[0]:  # numba takes another byte order's float64 inside a tuple, reading its bytes as native",
        "        try:",
        f"            if not ({' and '.join(f'd[{n!r}].dtype.isnative' for n in VECS + MATS)}):",
        "                return False",
        "        except AttributeError:  # not an ndarray: numpy's path",
        "            return False",
        "    try:",
        "        if not KERNEL(out, dof, vecs, VEC_AT, VEC_N, mats, MAT_AT, MAT_RC):",
        "            return False",
        "    except TypeError:  # an array not float64 (numba's answer costs ~0.3 ms): check first from now on",
        "        MODE[0] += 1",
        "        return False",
        *([f"    if {' or '.join(flags)}:", "        FLAGS(s, out, last)"] if flags else []),
        *([f"    if {texts} != last[1]:", "        TEXTS(s, out, last)"] if layout._texts else []),
        "    for name, value in extra.items():",
        "        out[EXTRA_AT[name]] = value",
        "    return True",
    ]
    code = compile("\n".join(lines) + "\n", f"<straight_pack of {len(layout._scalars)} scalars>", "exec")
    exec(code, env)  # the source generated above from the declaration, no outside input
    fn: Callable[[LoopState, np.ndarray, dict[str, float], list[Any]], bool] = env["pack"]
    fn.source = "\n".join(lines)  # type: ignore[attr-defined]  # for a reader (and tests)
    fn.mode = env["MODE"]  # type: ignore[attr-defined]
    return fn
