"""The franka driver's command, compiled: one call instead of the Python loops over seven joints.

:func:`next_command` computes what :meth:`FrankaDriver._command <fdcontrol.drivers.franka.FrankaDriver._command>`
computes in Python — the robot's constant-acceleration fill of each missed tick, then
:meth:`~fdcontrol.drivers.franka.FrankaDriver._guard` (the robot's published acceleration and jerk limits and the
model's velocity limits), then, for the position interface, the commanded positions — with the same
floating-point operations in the same order, so the command is the same to the last bit
(tests/test_franka_command.py compares both on random inputs: missed ticks, limits crossed, NaN). The driver's
Python code stays the definition and the readable form; this is its twin for the hot path, compiled by numba
once per process when first imported (cached on disk), never in the loop thread.
"""

from __future__ import annotations

import numpy as np

from fdcontrol.extras import missing

try:
    import numba
    from numba import types
except ImportError as exc:  # the driver then computes the same command in Python
    raise missing("fast", "the compiled franka command", exc) from exc

H = 1e-3  # s: the robot's tick (fdcontrol.drivers.franka.CLOCK_PERIOD)

_VEC = types.Array(types.float64, 1, "C")
_MAT = types.Array(types.float64, 2, "C")
_ANY = types.Array(types.float64, 1, "A", readonly=True)  # the velocities as they come (any layout, read only)
_SIG = types.void(_ANY, _MAT, types.int64, _VEC, types.boolean, _MAT, _MAT)


@numba.njit(_SIG, cache=True, boundscheck=True)  # a too short vector raises, never reads past
def next_command(des: np.ndarray, sent: np.ndarray, n: int, q: np.ndarray, guard: bool, L: np.ndarray,
                 new: np.ndarray) -> None:  # pragma: no cover - compiled (its Python twin: FrankaDriver._command)
    """The command after ``n`` robot ticks (1: none missed) since the last one.

    ``des`` the loop's joint velocities (rad/s, NaN allowed: held at the robot's); ``sent`` (2×N) the velocities
    of the robot's last two ticks (the tick before, the last commanded); ``q`` the last commanded positions
    (position interface; empty otherwise), advanced in place by the filled ticks and the command; ``guard``
    the rate limiting, ``L`` (3×N) its per-joint acceleration limit, jerk limit × tick, velocity limit. Written
    into ``new`` (2×N): the velocity the robot filled up to, and the velocity commanded (the next ``sent``)."""
    with_q = q.shape[0] > 0
    for i in range(des.shape[0]):
        v = sent[1, i]
        a = (v - sent[0, i]) / H  # the last tick's acceleration, held by the fill
        qi = q[i] if with_q else 0.0
        for _ in range(n - 1):  # the ticks the robot filled
            v = v + a * H
            if with_q:
                qi = qi + v * H
        x = des[i]
        if guard:
            if x != x:  # NaN: hold the velocity the robot is at
                x = v
            a_raw = (x - v) / H
            amax, jh, vmax = L[0, i], L[1, i], L[2, i]
            b = amax if a_raw > amax else (-amax if a_raw < -amax else a_raw)
            b = a + jh if b > a + jh else (a - jh if b < a - jh else b)
            y = x if b == a_raw else v + b * H  # untouched where within the limits
            x = vmax if y > vmax else (-vmax if y < -vmax else y)
        new[0, i] = v
        new[1, i] = x
        if with_q:
            q[i] = qi + x * H
