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
order (a network packet's ``'>f8'``: numba could read its bytes as native ones).
Numba says "not mine" with a TypeError that costs ~0.3 ms: after the first, the arrays are checked in Python before
each call (:func:`takes`), and a TypeError despite the check turns the kernel off for that packer.
:func:`pack_arrays` is compiled by numba once per process when this module is first imported (cached on disk):
never in the loop thread.

The array fields are taken from the declaration (fdcontrol.loop.state), each an argument of the kernel's own — the
1-D ones, then the 2-D ones (:data:`N_VECS`, :data:`N_MATS`: the declaration's seven and one) — with one plan of
their slot starts and declared extents (−1: the joint count).
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
#: the declared array fields' names, 1-D and 2-D
VECS = tuple(f.name for f in FIELDS if f.metadata["kind"] == "array" and len(f.metadata["shape"]) == 1)
MATS = tuple(f.name for f in FIELDS if f.metadata["kind"] == "array" and len(f.metadata["shape"]) == 2)
#: the kernel takes each array as an argument of its own, and their slots in one plan (numba's dispatch types a
#: tuple element by element, an array argument from a cache: the call 1.1 → 0.8 µs with the plan's four index
#: arrays in one) — written for the declaration's seven vectors and one matrix; another declaration packs by
#: numpy's calls until the kernel is written for it (tests/test_state.py asserts the compiled path is in use)
N_VECS, N_MATS = 7, 1
SUPPORTED = len(VECS) == N_VECS and len(MATS) == N_MATS and len(_SHAPES) == N_VECS + N_MATS

_OUT = types.Array(types.float64, 1, "A")
# any layout (a view, a strided array: read entry by entry), read-only or not (a driver's np.frombuffer)
_VEC = types.Array(types.float64, 1, "A", readonly=True)
_MAT = types.Array(types.float64, 2, "A", readonly=True)
_IDX = types.Array(types.int64, 1, "A", readonly=True)
_SIG = types.boolean(_OUT, types.int64, *([_VEC] * N_VECS), *([_MAT] * N_MATS), _IDX)


@numba.njit(_SIG, cache=True, boundscheck=True)  # a slot past the row's end raises, never writes past it
def pack_arrays(out: np.ndarray, dof: int, v0: np.ndarray, v1: np.ndarray, v2: np.ndarray, v3: np.ndarray,
                v4: np.ndarray, v5: np.ndarray, v6: np.ndarray, m0: np.ndarray,
                plan: np.ndarray) -> bool:  # pragma: no cover
    """Write every array at its slot start, row-major, if each has its declared extents; else write nothing and
    return False. ``plan`` (:func:`plan_of`): the vectors' slot starts, their lengths, the matrix's slot start,
    its rows and columns (−1: ``dof``)."""
    vecs = (v0, v1, v2, v3, v4, v5, v6)
    mats = (m0,)
    nv = len(vecs)
    nm = len(mats)
    mat_at = 2 * nv
    mat_rc = mat_at + nm
    for i in range(nv):
        n = plan[nv + i] if plan[nv + i] >= 0 else dof
        if vecs[i].shape[0] != n:
            return False
    for i in range(nm):
        r = plan[mat_rc + 2 * i] if plan[mat_rc + 2 * i] >= 0 else dof
        c = plan[mat_rc + 2 * i + 1] if plan[mat_rc + 2 * i + 1] >= 0 else dof
        if mats[i].shape[0] != r or mats[i].shape[1] != c:
            return False
    for i in range(nv):
        v = vecs[i]
        o = plan[i]
        for k in range(v.shape[0]):
            out[o + k] = v[k]
    for i in range(nm):
        m = mats[i]
        o = plan[mat_at + i]
        cols = m.shape[1]
        for r in range(m.shape[0]):
            for c in range(cols):
                out[o + r * cols + c] = m[r, c]
    return True


def plan_of(layout: SharedLayout) -> np.ndarray:
    """:func:`pack_arrays`'s ``plan`` for ``layout``: the vectors' slot starts, their declared lengths, the
    matrices' slot starts, their declared rows and columns (−1: the joint count)."""
    shapes = {f.name: f.metadata["shape"] for f in FIELDS}

    def extent(e: int | str) -> int:
        return -1 if e == "dof" else int(e)

    plan = [layout.slots[n].start for n in VECS] + [extent(shapes[n][0]) for n in VECS]
    plan += [layout.slots[n].start for n in MATS] + [extent(e) for n in MATS for e in shapes[n]]
    out = np.array(plan, dtype=np.int64)
    out.setflags(write=False)
    return out


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
    it whole (it may have written part of it). None when the declaration's arrays are not the ones
    :func:`pack_arrays` is written for (:data:`SUPPORTED`). The extra slots are written by struct too (numpy's
    store for a value struct does not take)."""
    if not SUPPORTED:
        return None
    env: dict[str, Any] = {
        "LoopState": LoopState, "MAX_DOF": layout.max_dof, "KERNEL": pack_arrays, "OFF": OFF, "F8": _F8,
        # the joint count (slot 0) and the scalars (the slots after it) in one run
        "SCALARS": struct.Struct(f"={1 + len(layout._scalars)}d"), "EXTRA": struct.Struct("=d").pack_into,
        "PLAN": plan_of(layout), "FLAGS": layout._write_flags, "TEXTS": layout._write_texts,
        "EXTRA_AT": layout._extra_at, "EXTRA_OFF": {k: 8 * at for k, at in layout._extra_at.items()},
        "MODE": [OPTIMISTIC], "TAKES": takes}
    if layout._scalar_run.start != 1:  # pragma: no cover - the layout puts the scalars right after the joint count
        return None  # (one struct writes the two)
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
    arrays = [f"a{i}" for i in range(len(VECS) + len(MATS))]  # the arrays' locals: VECS, then MATS
    vecs = "(" + "".join(f"{a}, " for a in arrays[:len(VECS)]) + ")"
    mats = "(" + "".join(f"{a}, " for a in arrays[len(VECS):]) + ")"
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
        "    try:",
        f"        SCALARS.pack_into(out, 0, dof, {', '.join(scalars)})",
        "    except Exception:  # a value struct does not take (None: numpy stores NaN): numpy's path",
        "        return False",
        f"    {', '.join(arrays)} = {', '.join(f'd[{n!r}]' for n in VECS + MATS)}",
        "    if MODE[0] and (MODE[0] == OFF or not TAKES(" + vecs + ", " + mats + ")):",
        "        return False",
        "    if not MODE[0]:  # float64 of the other byte order: numpy's path (numba would read its bytes as native)",
        "        try:",
        f"            if not ({' and '.join(f'({a}.dtype is F8 or {a}.dtype.isnative)' for a in arrays)}):",
        "                return False",
        "        except AttributeError:  # not an ndarray: numpy's path",
        "            return False",
        "    try:",
        f"        if not KERNEL(out, dof, {', '.join(arrays)}, PLAN):",
        "            return False",
        "    except TypeError:  # an array not float64 (numba's answer costs ~0.3 ms): check first from now on",
        "        MODE[0] += 1",
        "        return False",
        *([f"    if {' or '.join(flags)}:", "        FLAGS(s, out, last)"] if flags else []),
        *([f"    if {texts} != last[1]:", "        TEXTS(s, out, last)"] if layout._texts else []),
        "    for name, value in extra.items():",
        "        try:",
        "            EXTRA(out, EXTRA_OFF[name], value)  # (the float64 numpy stores)",
        "        except Exception:  # a value struct does not take (None, an array…): numpy's store (or its error)",
        "            out[EXTRA_AT[name]] = value",
        "    return True",
    ]
    code = compile("\n".join(lines) + "\n", f"<straight_pack of {len(layout._scalars)} scalars>", "exec")
    exec(code, env)  # the source generated above from the declaration, no outside input
    fn: Callable[[LoopState, np.ndarray, dict[str, float], list[Any]], bool] = env["pack"]
    fn.source = "\n".join(lines)  # type: ignore[attr-defined]  # for a reader (and tests)
    fn.mode = env["MODE"]  # type: ignore[attr-defined]
    return fn
