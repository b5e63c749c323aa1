"""Velocity damper of every link against the workspace volumes and (optionally) the arm's other links."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fdcontrol.limits.base import Cycle, Limit, LimitSettings
from fdcontrol.model.collision import Clearance, damp  # damp: compiled beside the distances it reads (one cache)
from fdcontrol.model.robot import RobotModel


class CollisionAvoidance(Limit):
    """The links' last line: no pair (link–volume, link–link) ever comes nearer than ``distance`` d_min.

    For each pair i with signed distance d_i and row g_i (ḋ_i = g_i q̇, g_i = n_iᵀ(J₁ − J₂) with n_i the
    unit normal and J₁, J₂ the Jacobians of the closest points; :class:`fdcontrol.model.collision.Clearance`),
    the velocity damper of Faverjon &
    Tournassoud ("A local based approach for path planning of manipulators with a high number of degrees
    of freedom", ICRA 1987), as mink's ``CollisionAvoidanceLimit`` writes it in discrete time, bounds the
    approach speed:

        −g_i q̇ ≤ b_i = min(k (d_i − d_min)/dt, √(2 · a_stop · (d_i − d_min)))   (b_i = 0 below d_min: no
                                                                                   approach, away is free)

    so that after one step of dt the distance is still ≥ d_min (to first order; the braking curve
    √(2 a_stop r) of :class:`~fdcontrol.limits.workspace.WorkspaceStop` brakes the approach before).
    The loop's limits act on q̇, not in a QP: each violated inequality is met by projecting q̇ onto its
    half-space, q̇ ← q̇ + (−b_i − g_i q̇)/‖g_i‖² g_i (the least change of q̇), nearest pair first, in two
    sweeps; a projection can undo an earlier one, so a final uniform scaling s ∈ [0, 1] of q̇ makes every
    inequality hold (q̇ = 0 always satisfies them, as every b_i ≥ 0) and keeps every joint within its
    velocity limit. Motion along a surface and away from it is left as it is.

    Below d_min no approach is left (b_i = 0): a pair that is already nearer — a volume moved onto the
    arm — may only move apart. The loop's own check (:meth:`Clearance.crossed
    <fdcontrol.model.collision.Clearance.crossed>`, its ``link_fault`` stage) holds the arm with a fault
    naming the link and the volume when a pair is nearer than d_min/2 and the motion asked for brings it
    nearer still.

    The distances are the loop's, computed once per cycle (its ``link_distances`` stage, shared with the
    repulsive loads: :func:`fdcontrol.loop.build.build_parts` gives the limit the workspace's
    :class:`~fdcontrol.model.collision.Clearance`); alone, the limit computes them itself at the cycle's q.
    """

    name = "collision"
    order = 46.0  # after the workspace stop of the tip (45): the last word on q̇ before the hard box
    gain = 0.5  # k: the share of the room above d_min one step may use

    def __init__(self, clearance: Clearance | None = None, distance: float = 0.01, deceleration: float = 5.0,
                 velocity: np.ndarray | None = None) -> None:
        self.clearance, self.distance, self.deceleration = clearance, float(distance), float(deceleration)
        self.velocity = None if velocity is None else np.asarray(velocity, dtype=float)
        self._vmax = np.zeros(0) if self.velocity is None else self.velocity
        self._b, self._idx = np.empty(0), np.empty(0, dtype=np.int64)  # scratch of the compiled damper

    @classmethod
    def from_settings(cls, robot: RobotModel, params: LimitSettings) -> CollisionAvoidance:
        from fdcontrol.control.workspace import clearance_for, workspace_from_config
        from fdcontrol.limits.workspace import _dump

        ws = workspace_from_config(robot, _dump(getattr(params, "workspace_box", None)),
                                   [_dump(v) for v in getattr(params, "keep_out", None) or []])
        p: Any = params
        distance = float(getattr(p, "collision_distance", 0.01))
        cl = clearance_for(robot, ws.zones, str(getattr(p, "collision_links", "keep_out")),
                           bool(getattr(p, "self_collision", False)), float(getattr(p, "self_collision_margin", 0.04)),
                           distance)
        out = cls(cl, distance,
                  float(getattr(p, "workspace_stop_deceleration", 5.0)),
                  float(params.velocity_scale) * robot.limits.velocity)  # (every LimitSettings has it)
        out.validate()
        return out

    def validate(self) -> None:
        if not (math.isfinite(self.distance) and self.distance > 0):
            raise ValueError("collision distance must be finite and > 0 (m)")
        if not (math.isfinite(self.deceleration) and self.deceleration > 0):
            raise ValueError("collision deceleration must be finite and > 0 (m/s²)")

    def bounds(self, dt: float) -> np.ndarray:
        """b_i (m/s) of every pair at the last computed distances."""
        cl = self.clearance
        assert cl is not None
        room = np.maximum(cl.d - self.distance, 0.0)
        return np.minimum(self.gain * room / dt, np.sqrt(2.0 * self.deceleration * room))

    def apply(self, c: Cycle, qd: list[float]) -> bool:
        cl = self.clearance
        if cl is None:
            return False
        cl.compute(c.q)  # the loop's distances of this cycle (computed once: the same q reuses them)
        P, gain_dt = cl.damper, self.gain / c.dt
        if P[0] != self.distance or P[1] != gain_dt or P[2] != self.deceleration or P[3] != 1.0:
            P[:] = (self.distance, gain_dt, self.deceleration, 1.0, -1.0)  # v_free from the next compute on
        elif max(map(abs, qd)) <= P[4]:
            return False  # no joint fast enough for any inequality to act: what the damper would return
        m = cl.d.shape[0]
        if self._b.shape[0] != m:
            self._b, self._idx = np.empty(m), np.empty(m, dtype=np.int64)
        v = np.array(qd)
        if not damp(v, self.distance, gain_dt, self.deceleration, self._vmax, self._b, self._idx,
                    cl._I, cl._F, cl._S, cl._O, cl._dims):
            return False
        for j in range(c.n):
            qd[j] = float(v[j])
        return True
