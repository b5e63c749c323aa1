"""What may move the arm: a live input now, and the check that the arm does what the loop asks.

**Live input** (:class:`Liveness`). The loop moves the arm only while one of these is live this cycle;
otherwise it brakes to rest with its braking profile (fdcontrol.limits.braking) — whatever the law,
its setpoints or a reaction's switch would ask:

* a streamed wrench or twist within its watchdog (``watchdog == "ok"``),
* a goal a request set — a target, a policy's actions, a move — on a law that tracks it (a law with
  the motion term, or a move in progress); every stop (hold, watchdog, fault, ``stop``, a change that
  waits for standstill) ends the goals, so only a new request moves the arm again,
* a hand on the sensor: a law that reads the force sensor, and the sensor reads a load now
  (|F| > ``LOAD_FORCE`` or |τ| > ``LOAD_TORQUE`` after the sensor model and its deadband) once the
  tool's own inertial wrench is taken out of the reading (:class:`~fdcontrol.control.sensing.WrenchFilter`
  ``contact``: the tool model's mass, centre of mass and inertia times the tool's acceleration, estimated
  from the measured joint velocities). A braking arm decelerates its tool, and the sensor reads the
  force that does it (0.5 kg at 2 m/s² is 1 N): that is the arm's own motion, no hand, and it never
  keeps the arm moving. A hand pushing while the arm brakes still reads as a hand.

So a force setpoint in free space, a reaction switching to force or motion, or a sensor bias smaller
than the load threshold never moves the arm by itself.

**Load.** The sensor reads a load when |F| > ``LOAD_FORCE`` or |τ| > ``LOAD_TORQUE``; zeroing the
sensor is refused while it does and for ``LOAD_QUIET`` s after the last load (the reading as the law sees
it, the tool's inertia included unless compensated: a bias is only taken at standstill anyway).

**Following** (:class:`Following`). The arm does not do what the loop asks when a joint's measured
velocity differs from the reference sent the cycle before by more than ``FOLLOW_SPEED`` for
``FOLLOW_TIME``: the state says so (``following`` false, the joint, the difference) and so does
``/health``. When the arm runs on — faster than asked, or against the reference — the loop also records
a fault (so it holds, and ``/health`` says why). A joint that moves toward the position its robot's
controller was last commanded (the driver's ``commanded_position``; a position interface's own reference
otherwise) does not run on: it catches up. A servoed arm lags behind its commanded positions — a joint
impedance controller's k_p (q_c − q) − k_d q̇ tracks a ramp a distance k_d q̇ / k_p behind — and covers
that gap after the reference has slowed or stopped, faster than the reference; it can only cover the gap
(once past the commanded position it moves away from it, and that counts again).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from fdcontrol.model.spatial import first_max

if TYPE_CHECKING:
    from fdcontrol.loop.cycle import ControlLoop

LOAD_FORCE = 1.0  # N
LOAD_TORQUE = 0.1  # N·m
LOAD_QUIET = 1.0  # s without a load before the sensor may be zeroed
FOLLOW_SPEED = 0.5  # rad/s between the measured velocity and the reference of the cycle before
FOLLOW_TIME = 0.25  # s
_NAN = math.nan


def loaded(f: np.ndarray) -> bool:
    """The wrench [F; τ] (N, N·m) is a load on the tool (‖F‖ > LOAD_FORCE or ‖τ‖ > LOAD_TORQUE; the norms as
    plain floats, np.linalg.norm's sum of squares without its wrapper; a NaN reads as no load, as there)."""
    a0, a1, a2, b0, b1, b2 = f.tolist() if type(f) is np.ndarray else np.asarray(f, dtype=float).tolist()
    return math.sqrt(a0 * a0 + a1 * a1 + a2 * a2) > LOAD_FORCE or math.sqrt(b0 * b0 + b1 * b1 + b2 * b2) > LOAD_TORQUE


class Liveness:
    """Whether an input that may move the arm is live this cycle, and when the sensor last read a load."""

    def __init__(self) -> None:
        self.loaded_at = -math.inf  # the loop's time of the newest cycle whose reading was a load
        self.loaded_now = False
        self.hand_now = False  # a load beyond the tool's own inertia: a hand (or a surface) on the sensor

    def sensed(self, f_meas: np.ndarray, now: float, contact: np.ndarray | None = None) -> None:
        """This cycle's reading ``f_meas`` and, on a law that reads the sensor, ``contact``: the reading
        without the tool's inertial wrench (None: ``f_meas`` itself)."""
        self.loaded_now = loaded(f_meas)
        if self.loaded_now:
            self.loaded_at = now
        self.hand_now = self.loaded_now if contact is None or contact is f_meas else loaded(contact)

    def loaded_reason(self, now: float) -> str | None:
        """Why the sensor may not be zeroed at ``now`` (the loop's clock), or None."""
        if self.loaded_now:
            return "it reads a load"
        if math.isfinite(now) and now - self.loaded_at < LOAD_QUIET:
            return f"it read a load {now - self.loaded_at:.2f} s ago"
        return None

    def live(self, loop: ControlLoop, watchdog: str, f_meas: np.ndarray, target: Any, now: float) -> bool:
        if watchdog == "ok":
            return True
        task = loop.task
        if task is not None and task.move is not None and task.move.status not in ("cancelled", "done"):
            return True  # a move a request started (its own goal, tracked on any law)
        terms = getattr(loop.law, "_law", None)
        terms = getattr(terms, "terms", ())
        if target is not None and "motion" in terms:
            return True
        return "force" in terms and self.hand_now


class Following:
    """Counts how long the measured joint velocity has been off the reference sent the cycle before.

    Two verdicts. **Following** (``ok``, ``joint``, ``error``): the arm does what the loop asks unless a
    joint's measured velocity has differed from the reference, either way, by more than ``FOLLOW_SPEED``
    for ``FOLLOW_TIME`` — a report (``/health`` ``following``), not a fault: an arm held back (a blocked
    joint, a driver that ignores commands, a wall) says so while the loop keeps braking and steering.
    **Runs on**: faster than asked, or against the reference, as long — a fault (the loop holds); a joint
    moving toward its commanded position (catching up with a servo's lag) does not run on."""

    def __init__(self) -> None:
        self.since = math.nan
        self.lag_since = math.nan
        self.ok, self.joint, self.error = True, -1, math.nan  # the last verdict: worst joint, |q̇ − q̇_ref| (rad/s)

    def reset(self) -> None:
        self.since = math.nan
        self.lag_since = math.nan
        self.ok, self.joint, self.error = True, -1, math.nan

    def _follows(self, off_j: float, j: int, now: float) -> None:
        if not off_j > FOLLOW_SPEED:  # (NaN: the driver's own fault path reports it)
            self.lag_since = math.nan
            self.ok, self.joint, self.error = True, -1, math.nan
            return
        if math.isnan(self.lag_since):
            self.lag_since = now
        if now - self.lag_since >= FOLLOW_TIME:
            self.ok, self.joint, self.error = False, j, off_j

    def check(self, qd: np.ndarray, qd_ref_prev: np.ndarray, now: float, q: np.ndarray | None = None,
              commanded: Callable[[], np.ndarray | None] | None = None) -> str | None:
        """A fault text once the arm ran on for ``FOLLOW_TIME``, else None; updates ``ok``/``joint``/``error``.

        ``commanded()`` (with ``q``, the measured joint positions) the positions the robot's controller was
        last commanded (None: unknown): a joint whose velocity points from q toward them catches up and does
        not run on. Asked only when a joint would run on (a cycle that follows pays nothing for it)."""
        a, b, j = qd, qd_ref_prev, -1
        if _worst_arrays is not None:
            try:  # the same scan compiled (one call, no lists) on the loop's float64 vectors as they are
                j, off_j, k, dev_k = _worst_arrays(a, b)  # (-1: lengths it does not take, or none)
            except TypeError:  # not float64 vectors: as float64
                a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
                try:
                    j, off_j, k, dev_k = _worst_arrays(a, b)
                except TypeError:  # not vectors
                    j = -1
        if j < 0:
            a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
            j, off_j, k, dev_k = worst_joints(a.tolist(), b.tolist())
        if not off_j > FOLLOW_SPEED:  # it follows (every cycle but a lag's): _follows' first branch, inline
            self.lag_since = _NAN
            self.ok, self.joint, self.error = True, -1, _NAN
        else:
            self._follows(off_j, j, now)
        # runs on: faster than asked, or against the reference (an arm held back — contact, a wall — moves
        # slower than asked along it, and that is no fault: the admittance is what lets it push)
        if dev_k > FOLLOW_SPEED and commanded is not None:
            q_c = commanded()
            if q_c is not None:  # a joint moving toward its commanded position catches up: it runs on nowhere
                catching = a * np.subtract(q_c, q) > 0.0
                if catching.any():  # (the joint that runs on, if any, is not one of them: its a[k] stays)
                    _, _, k, dev_k = worst_joints(np.where(catching, 0.0, a).tolist(), b.tolist())
        if not dev_k > FOLLOW_SPEED:  # (NaN: the driver's own fault path reports it)
            self.since = _NAN
            return None
        if math.isnan(self.since):
            self.since = now
        if now - self.since < FOLLOW_TIME:
            return None
        return (f"the arm does not follow the reference: joint {k} moves at {float(a[k]):.3f} rad/s, "
                f"the loop asked {float(b[k]):.3f} rad/s for {now - self.since:.2f} s; holding")


def worst_joints(qd: list[float], ref: list[float]) -> tuple[int, float, int, float]:
    """(j, |q̇_j − r_j|) of the joint whose velocity is furthest off the reference, and (k, dev_k) of the one
    that runs on most: dev = |q̇| − |r| where q̇ and r have the same sign, else |q̇| (against the reference, or
    moving where none was asked). The joint is numpy's ``argmax`` of the vector (first_max). Empty vectors:
    (0, nan, 0, nan). Plain floats: for N ≈ 6–7 a quarter of the cost of the same dozen numpy calls."""
    if not qd and not ref:
        return 0, math.nan, 0, math.nan
    off, dev = [], []
    for x, r in zip(qd, ref, strict=True):
        off.append(abs(x - r))
        # np.sign(x) == np.sign(r): the same sign (0 with 0), never with a NaN
        same = x == x and r == r and (x > 0) == (r > 0) and (x < 0) == (r < 0)
        dev.append(abs(x) - abs(r) if same else abs(x))
    return (*first_max(off), *first_max(dev))


def _scan(qd: np.ndarray, ref: np.ndarray) -> tuple[int, float, int, float]:  # pragma: no mutate block
    """:func:`worst_joints` on two float64 vectors of one length ≥ 1, compiled: the same float operations and
    comparisons in the same order, so the same joints and values (tests/test_loop.py); (-1, nan, -1, nan) for
    vectors of different lengths or none (:func:`worst_joints` then raises or answers)."""
    if qd.shape[0] == 0 or qd.shape[0] != ref.shape[0]:
        return -1, math.nan, -1, math.nan
    j, k = 0, 0
    m_off, m_dev = 0.0, 0.0
    for i in range(qd.shape[0]):
        x, r = qd[i], ref[i]
        off = abs(x - r)
        same = x == x and r == r and (x > 0) == (r > 0) and (x < 0) == (r < 0)
        dev = abs(x) - abs(r) if same else abs(x)
        if i == 0:
            m_off, m_dev = off, dev
            continue
        if off > m_off or (off != off and m_off == m_off):
            j, m_off = i, off
        if dev > m_dev or (dev != dev and m_dev == m_dev):
            k, m_dev = i, dev
    return j, m_off, k, m_dev


try:  # compiled at import (cached on disk), never in the loop thread; without numba the plain-float scan
    import numba
    from numba import types as _t

    _VEC = _t.Array(_t.float64, 1, "A")
    _worst_arrays: Any = numba.njit(_t.Tuple((_t.int64, _t.float64, _t.int64, _t.float64))(_VEC, _VEC),
                                    cache=True)(_scan)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    _worst_arrays = None
