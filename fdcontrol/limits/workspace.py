"""Hard Cartesian stop of the tool centre point (and chosen link origins) at the workspace boundary."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pinocchio as pin

from fdcontrol.limits.base import Cycle, Limit, LimitSettings
from fdcontrol.model.robot import RobotModel


class WorkspaceStop(Limit):
    """The last line at the boundary of every workspace volume: the tip never crosses it.

    For each boundary piece i (a face of the workspace box, a keep-out sphere, box or plane;
    :mod:`fdcontrol.control.workspace`) with signed distance d_i of the tip p (positive on the
    allowed side) and allowed-side normal n_i, and the predicted tip velocity v = (J q̇)[:3],
    the approach speed is a_i = −n_i·v. It may not exceed the braking curve of a stop at the
    deceleration ``deceleration`` (m/s²) on the room r_i = max(d_i, 0) left, nor that room in one step:

        a_i ≤ a_max,i = min(√(2 · deceleration · r_i), r_i / dt);   where not, s_i = a_max,i / a_i,

    and q̇ is scaled by s = min(1, min_i s_i): the tip brakes to a stop on the boundary (beyond
    it, it does not move further out), with the direction of q̇ kept. Motion away from the boundary or
    along it is not limited. It runs after the acceleration limit (``order`` 45) and wins over
    it, like the hard box of the position limit: the repulsive loads inside each volume's
    margin act first and keep the tip off the boundary; this limit acts only when they fail.

    The origins of the frames ``links`` (the workspace's ``workspace_links``) are held the same
    way, each with its own linear Jacobian J_l: v = (J_l q̇)[:3] against every boundary piece,
    and the smallest scale over the tip and the links wins.
    """

    name = "workspace"
    order = 45.0

    def __init__(self, robot: RobotModel | None = None, parts: list[Any] | None = None,
                 deceleration: float = 5.0, links: list[str] | tuple[str, ...] = ()) -> None:
        self.robot, self.deceleration = robot, float(deceleration)
        self.parts = list(parts or [])
        self.links = list(links)
        if self.links and robot is None:
            raise ValueError("the workspace stop of link origins needs the robot")
        for link in self.links:
            if robot is not None and not robot.model.existFrame(link):
                raise ValueError(f"workspace_links: unknown link frame {link!r}")
        self._link_ids = [robot.model.getFrameId(link) for link in self.links] if robot is not None else []
        from fdcontrol.control.workspace import Parts

        self._set = Parts(self.parts)
        self._data = robot.model.createData() if robot is not None else None

    @classmethod
    def from_settings(cls, robot: RobotModel, params: LimitSettings) -> WorkspaceStop:
        from fdcontrol.control.workspace import workspace_from_config

        ws = workspace_from_config(robot, _dump(getattr(params, "workspace_box", None)),
                                   [_dump(v) for v in getattr(params, "keep_out", None) or []])
        out = cls(robot, [part for z in ws.zones for part in z.parts()],
                  float(getattr(params, "workspace_stop_deceleration", 5.0)),
                  list(getattr(params, "workspace_links", None) or []))
        out.validate()
        return out

    def validate(self) -> None:
        if not (math.isfinite(self.deceleration) and self.deceleration > 0):
            raise ValueError("workspace stop deceleration must be finite and > 0")
        # (a part of another kind than a plane, a sphere or a keep-out box is refused on construction)

    def tip(self, q: list[float]) -> np.ndarray:
        r = self.robot
        assert r is not None and self._data is not None
        pin.forwardKinematics(r.model, self._data, np.asarray(q))  # the tip's frame alone: the same bits as
        oMt = pin.updateFramePlacement(r.model, self._data, r.tip_id)  # framesForwardKinematics gives it
        return r._oMb.actInv(oMt).translation

    def link_points(self, q: list[float]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(origin, 3×N linear Jacobian) of each link, base frame."""
        r, data = self.robot, self._data
        assert r is not None and data is not None
        pin.computeJointJacobians(r.model, data, np.asarray(q))
        out = []
        for fid in self._link_ids:
            oMf = pin.updateFramePlacement(r.model, data, fid)
            Jw = pin.getFrameJacobian(r.model, data, fid, pin.LOCAL_WORLD_ALIGNED)
            out.append((r._oMb.actInv(oMf).translation, r._R_base.T @ Jw[:3]))
        return out

    def _scale(self, p: np.ndarray, v: np.ndarray, dt: float) -> float:
        """The largest scale ≤ 1 of the velocity v (m/s) of the point p within every braking curve."""
        st = self._set
        v_ok = type(v) is np.ndarray and v.dtype == np.float64 and v.shape == (3,)
        if _stop is not None and v_ok and type(p) is np.ndarray and p.dtype == np.float64 and p.shape == (3,):
            return _stop(p, st._G, st._d, st._nrm, v, self.deceleration, float(dt))  # distances and scale, one call
        d, n = st.distances(p)
        if _scale is not None and v_ok:
            return _scale(d, n, v, self.deceleration, float(dt))
        a = -(n @ v)
        room = np.maximum(d, 0.0)
        amax = np.minimum(np.sqrt(2.0 * self.deceleration * room), room / dt)
        over = a > amax
        if not over.any():
            return 1.0
        return float(np.min(amax[over] / a[over]))

    def apply(self, c: Cycle, qd: list[float]) -> bool:
        if not self.parts or self.robot is None:
            return False
        if c.J is None:
            raise ValueError("the workspace stop needs the Jacobian J")
        s = self._velocity_scale(c.q, c.J, np.asarray(qd), c.dt)
        if s >= 1.0 or not math.isfinite(s):
            return False
        for j in range(c.n):
            qd[j] *= s
        return True

    def scale_velocity(self, q: np.ndarray, J: np.ndarray | None, qd: np.ndarray, dt: float,
                       at: Any = None) -> bool:
        """:meth:`apply` on the arrays of a caller that has them (SafetyLimits' compiled path): ``qd`` scaled in
        place by the same factor, the same float operations. ``at``: the caller's
        :class:`~fdcontrol.model.configuration.Configuration` of this robot at this very ``q`` (the loop's), whose
        tip position then stands for :meth:`tip`'s forward kinematics — the same position (pinocchio's same
        placement products; a coordinate's zero may carry the other sign, which no scale reads: the compiled scale
        counts a distance ≤ 0 as no room, +0), taken only where the compiled scale runs."""
        if not self.parts or self.robot is None:
            return False
        if J is None:
            raise ValueError("the workspace stop needs the Jacobian J")
        if at is not None and _stop is not None and at.q is q and at.robot is self.robot and not self._link_ids \
                and type(J) is np.ndarray and J.dtype == _F64:
            top = J[:3]  # ndarray.dot: numpy's same BLAS product as @ for a C-ordered J (not for an F-ordered one)
            st = self._set  # the tip's distances and the scale, one compiled call (what _scale calls for these)
            s = _stop(at.pose[:3, 3], st._G, st._d, st._nrm, top.dot(qd) if top.flags.c_contiguous else top @ qd,
                      self.deceleration, float(dt))
        else:
            s = self._velocity_scale(q, J, qd, float(dt))
        if s >= 1.0 or not math.isfinite(s):
            return False
        qd *= s
        return True

    def _velocity_scale(self, q: Any, J: np.ndarray, qdv: np.ndarray, dt: float) -> float:
        """The smallest scale of q̇ over the tip and the links (1: none needed)."""
        s = self._scale(self.tip(q), J[:3] @ qdv, dt)
        if self._link_ids:
            for p, Jp in self.link_points(q):
                s = min(s, self._scale(p, Jp @ qdv, dt))
        return s


def _scale_kernel(d: np.ndarray, nrm: np.ndarray, v: np.ndarray, deceleration: float,
                  dt: float) -> float:  # pragma: no mutate block
    """WorkspaceStop._scale per piece: the approach speed a = −n·v against min(√(2 · deceleration · r), r/dt),
    r = max(d, 0) (a NaN distance acts nowhere, as numpy's comparisons have it)."""
    s = 1.0
    for i in range(d.shape[0]):
        a = -(nrm[i, 0] * v[0] + nrm[i, 1] * v[1] + nrm[i, 2] * v[2])
        di = d[i]
        room = di if di > 0.0 else (0.0 if di <= 0.0 else di)
        x, y = math.sqrt(2.0 * deceleration * room), room / dt
        amax = x if x <= y else (y if y < x else math.nan)
        if a > amax:
            r = amax / a
            if r < s:
                s = r
    return s


_F64 = np.dtype(np.float64)


def _stop_kernel(p: np.ndarray, G: np.ndarray, d: np.ndarray, nrm: np.ndarray, v: np.ndarray, deceleration: float,
                 dt: float) -> float:  # pragma: no mutate block
    """Parts.distances of the point p (its compiled form, into d and nrm), then :func:`_scale_kernel`: one call."""
    _distances(p, G, d, nrm)
    return _scale(d, nrm, v, deceleration, dt)


try:  # compiled at import (cached on disk), never in the loop thread; without numba the numpy form
    import numba
    from numba import types as _t

    from fdcontrol.control.workspace import _distances

    _VA, _MA = _t.Array(_t.float64, 1, "A"), _t.Array(_t.float64, 2, "A")
    _scale: Any = numba.njit(_t.float64(_VA, _MA, _VA, _t.float64, _t.float64), cache=True,
                             boundscheck=True)(_scale_kernel)
    _stop: Any = numba.njit(_t.float64(_VA, _MA, _VA, _MA, _VA, _t.float64, _t.float64), cache=True,
                            boundscheck=True)(_stop_kernel)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    _scale = _stop = None


def _dump(v: Any) -> Any:
    return v.model_dump(exclude_none=True) if hasattr(v, "model_dump") else v
