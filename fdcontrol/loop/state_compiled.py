"""The state's arrays into the shared-memory row, compiled: one call instead of a concatenate and a scatter.

:func:`pack_arrays` writes what :meth:`SharedLayout._pack <fdcontrol.loop.state.SharedLayout._pack>` writes for
the array fields of a state whose arrays have their declared shapes — every entry at its slot, in row-major
order, nothing else touched: the same float64 values copied, so the row is the same to the last bit
(tests/test_state.py packs random and edge-case states both ways and compares the bytes). Anything else (an
array off its declared shape, another dtype, not an array) is not this kernel's: the call does not match its
signature (numba raises TypeError before running it) or it returns False having written nothing, and the
caller writes the arrays as the Python code does. Compiled by numba once per process when first imported
(cached on disk): never in the loop thread.

The array fields are taken from the declaration (fdcontrol.loop.state): the 1-D ones as one tuple, the 2-D ones
as another, each with its slot starts and declared extents (−1: the joint count).
"""

from __future__ import annotations

import numpy as np

from fdcontrol.extras import missing
from fdcontrol.loop.state import FIELDS

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
_VEC = types.Array(types.float64, 1, "A")  # any layout: a view or a strided array is read entry by entry
_MAT = types.Array(types.float64, 2, "A")
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
