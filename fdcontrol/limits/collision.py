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
    velocity limit. Motion away from the surfaces is left as it is; motion along one only where the step's
    re-check below scales the whole of q̇ down.

    The inequalities are first order at the witness points. When the step could reach d_min at all (no point of
    a link moves farther in dt than :func:`reach` · max_k |q̇_k| · dt), the distances at q + dt q̇ are computed on
    buffers of the limit's own and q̇ is scaled down until no pair ends the step more than ``slack`` (0.05 mm)
    inside d_min (:meth:`_recheck`): a link turning against a face it is parallel to has its witness point at one
    end, sliding along the face, while its other end approaches (the UR10's forearm went 1.3 mm inside in one
    step at its elbow's velocity limit).

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
        # the step's re-check: distances at q + dt q̇ on buffers of their own (the cycle's stay the loop's), and the
        # bound of how far a step of dt moves any point of a link per rad/s (see reach)
        self._probe: Clearance | None = None
        self._probe_of: Clearance | None = None
        self._reach = math.inf
        if clearance is not None:
            self._follow(clearance)

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
        near = cl.compute(c.q)  # the loop's distances of this cycle (computed once: the same q reuses them)
        if self._probe_of is not cl:  # (the loop may hand the limit its own clearance: its pairs' bound, its copy)
            self._follow(cl)
        P, gain_dt = cl.damper, self.gain / c.dt
        fast = max(map(abs, qd))
        if P[0] != self.distance or P[1] != gain_dt or P[2] != self.deceleration or P[3] != 1.0:
            P[:] = (self.distance, gain_dt, self.deceleration, 1.0, -1.0)  # v_free from the next compute on
        elif fast <= P[4]:  # no joint fast enough for any inequality to act: what the damper would return
            step = fast * self._reach * c.dt  # (no point of a link moves farther in this step)
            if step > self.slack and near >= 0 and step > self.slack + cl.d[near] - self.distance:
                return self._recheck(c, qd)  # it may still cross: see _recheck
            return False
        m = cl.d.shape[0]
        if self._b.shape[0] != m:
            self._b, self._idx = np.empty(m), np.empty(m, dtype=np.int64)
        v = np.array(qd)
        changed = damp(v, self.distance, gain_dt, self.deceleration, self._vmax, self._b, self._idx,
                       cl._I, cl._F, cl._S, cl._O, cl._dims)
        if changed:
            for j in range(c.n):
                qd[j] = float(v[j])
            fast = max(map(abs, qd))
        step = fast * self._reach * c.dt
        if step > self.slack and near >= 0 and step > self.slack + cl.d[near] - self.distance:
            return self._recheck(c, qd) or changed
        return changed

    def _follow(self, cl: Clearance) -> None:
        """The re-check's copy of the clearance's buffers and its bound of the pairs' rate, for ``cl``."""
        self._probe = cl.copy()
        self._probe.damper[3], self._probe_of, self._reach = 0.0, cl, reach(cl)

    #: how far (m) the re-checked step may still go below d_min (or below a pair's own distance under d_min)
    slack = 5e-5

    def _recheck(self, c: Cycle, qd: list[float]) -> bool:
        """The step's distances themselves: the inequalities bound ḋ = g q̇ at the witness points, which over a
        step of dt can miss a curved path or another point of a link (a link rotating against a face it is
        parallel to: its witness point moves along the face while its other end approaches). Where some pair
        at q + dt q̇ would be nearer than d_min − ``slack`` (a pair already nearer than d_min: its own distance
        − ``slack``), q̇ is scaled down uniformly — every inequality and velocity limit still holds — to the
        factor where it would not, interpolated and checked again (four times at most, then q̇ = 0)."""
        cl, pr = self.clearance, self._probe
        assert cl is not None and pr is not None and self._probe_of is cl  # (apply follows the clearance first)
        d0, least = cl.d, self.distance - self.slack
        floor: np.ndarray | None = None
        q, dt, n = c.q, c.dt, c.n
        s = 1.0
        for _ in range(4):
            i = pr.compute([q[j] + s * dt * qd[j] for j in range(n)])
            if i < 0 or pr.d[i] >= least:
                break  # (every pair at d_min − slack or farther: none below its floor)
            if floor is None:
                floor = np.minimum(d0, self.distance) - self.slack
            low = pr.d < floor
            if not low.any():
                break
            s *= 0.9 * float(np.min((d0[low] - floor[low]) / (d0[low] - pr.d[low])))
        else:
            s = 0.0
        if s == 1.0:
            return False
        for j in range(n):
            qd[j] *= s
        return True


def levers(cl: Clearance) -> np.ndarray:
    """L (pairs × joint velocities): an upper bound, at any configuration, of how fast each pair's distance changes
    per rad/s of each joint — for each of the pair's capsules that the joint moves, the largest distance of a point
    of the capsule from the joint's origin (bounded by the lengths along the chain, which no configuration changes);
    ∞ for every joint with a prismatic joint in the arm (its travel lengthens the chain)."""
    m, nv = cl.kind.shape[0], int(cl._dims[3])
    if cl.prism.any():
        return np.full((m, nv), math.inf)
    par, idx_v = cl.parents, cl.idx_v
    link = np.linalg.norm(cl.ppl, axis=1)  # joint j's origin from its parent's
    per_cap = np.zeros((cl.cj.shape[0], nv))
    for c in range(per_cap.shape[0]):
        j = int(cl.cj[c])
        along = max(float(np.linalg.norm(cl.ca[c])), float(np.linalg.norm(cl.cb[c])))  # from joint j's origin
        while j > 0:
            per_cap[c, idx_v[j]] = along
            along += float(link[j])  # from the parent's origin: at most this much farther
            j = int(par[j])
    out = per_cap[cl.cap].copy()
    own = cl.other >= 0
    out[own] += per_cap[cl.other[own]]
    return out


def reach(cl: Clearance) -> float:
    """An upper bound, at any configuration, of how fast any pair's distance changes per unit of max_k |q̇_k|
    (m per rad): the largest row sum of :func:`levers` (0 without pairs)."""
    L = levers(cl)
    return float(L.sum(axis=1).max()) if L.shape[0] else 0.0
