"""A move's planned path against the workspace, checked before the move starts.

The loop generates a move's reference online with Ruckig, one cycle at a time
(:class:`fdcontrol.control.trajectory.Move`). Undisturbed, that reference follows the trajectory
Ruckig computes offline from the same input, so the references the loop will send are known at
planning time: :func:`planned_points` samples that trajectory at the loop's period (every
k-th sample for long moves) and maps each sample to the points the workspace governs — the tool
centre point, and for joint moves the origins of the workspace's links too.

:func:`path_violations` names the first sample where a point comes within a volume's margin (or
beyond its boundary). A point that is already inside a margin at the start (the arm was pushed
there) may move within it, but no deeper than it started.

:func:`link_path_violations` checks the whole arm: with link geometry (the workspace's
:class:`~fdcontrol.model.collision.Clearance`), every link's collision shape at every sample
against the volumes the links obey and, with self-collision, against the other links — by the same
rule (no pair within its margin, or deeper than it started). A joint move's samples are joint
configurations; a Cartesian move's are tip poses, followed by damped least squares from the arm's
configuration now, each sample from the last (how the loop follows a slow reference). A move
under way is still held off every volume by the velocity damper among the limits.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pinocchio as pin

from fdcontrol.control.workspace import TIP, Parts

if TYPE_CHECKING:
    from fdcontrol.control.trajectory import Move
    from fdcontrol.control.workspace import Workspace

MAX_SAMPLES = 4000


def planned_samples(move: Move, max_samples: int = MAX_SAMPLES) -> tuple[np.ndarray, np.ndarray]:
    """(times, positions) of the move's Ruckig trajectory at the loop's period (strided to at most
    ``max_samples``), including its start and its end."""
    import ruckig

    otg = ruckig.Ruckig(move.n)
    traj = ruckig.Trajectory(move.n)
    result = otg.calculate(move.inp, traj)
    if result not in (ruckig.Result.Working, ruckig.Result.Finished):
        raise ValueError(f"no trajectory to the goal ({result})")
    T = float(traj.duration)
    n = max(2, math.ceil(T / move.dt) + 1)
    stride = max(1, math.ceil(n / max_samples))
    times = np.append(np.arange(0, n, stride) * move.dt, T)
    times = np.minimum(times, T)
    return times, np.array([traj.at_time(float(t))[0] for t in times])


def planned_points(move: Move, links: list[str], max_samples: int = MAX_SAMPLES
                   ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The sample times and, per governed point (``tip``, the link names for joint moves), its
    positions (samples × 3, base frame) along the planned path."""
    times, xs = planned_samples(move, max_samples)
    if not move.joint:
        return times, {TIP: xs[:, :3]}
    r = move.robot
    model, data = r.model, r.model.createData()
    ids = [(TIP, r.tip_id), *((link, model.getFrameId(link)) for link in links)]
    out = {name: np.empty((len(xs), 3)) for name, _ in ids}
    for k, q in enumerate(xs):
        pin.framesForwardKinematics(model, data, q)
        for name, fid in ids:
            out[name][k] = r._oMb.actInv(data.oMf[fid]).translation
    return times, out


def path_violations(move: Move, ws: Workspace, max_samples: int = MAX_SAMPLES) -> list[str]:
    """Why the move's planned path is not allowed (empty when it is): for each governed point, the
    first sample inside a zone's margin (deeper than the point started)."""
    times, points = planned_points(move, ws.links if move.joint else [], max_samples)
    out = []
    margin = ws._margin
    zones = [z for _, z in ws._pairs]
    parts = Parts([part for part, _ in ws._pairs])  # its own buffers: the loop thread uses the workspace's
    for name, ps in points.items():
        if not zones:
            break
        d = np.array([parts.distances(p)[0].copy() for p in ps])  # samples × boundary pieces
        bad = d < np.minimum(margin, d[0]) - 1e-9
        for i in np.flatnonzero(bad.any(axis=0)):
            z, k = zones[i], int(np.argmax(bad[:, i]))
            if any(f"{z.name!r}" in o and _who(name) in o for o in out):
                continue  # one reason per point and zone (a box has six faces)
            closest = float(d[:, i].min())
            where = "through" if closest < 0 else "within the margin of"
            out.append(f"the path of the {_who(name)} passes {where} {z.name!r} (at {np.round(ps[k], 3).tolist()}, "
                       f"{times[k]:.2f} s into the move; closest {closest * 1e3:.1f} mm from its boundary, "
                       f"margin {z.margin * 1e3:.0f} mm)")
    return out


def link_path_violations(move: Move, ws: Workspace, q0: np.ndarray, max_samples: int = 1000) -> list[str]:
    """Why the move's planned path would bring a link's collision shape within a volume's margin or another
    link's (self-collision), deeper than it starts (empty when it would not, or without link geometry):
    the first sample for each (link, volume or link) pair, naming both. ``q0``: the arm's configuration now."""
    from fdcontrol.control.trajectory import solve_ik

    if ws.clearance is None:
        return []
    cl = ws.clearance.copy()  # its own buffers: the loop thread computes with the workspace's
    times, xs = planned_samples(move, max_samples)
    r, q = move.robot, np.asarray(q0, dtype=float).copy()
    d = np.full((len(xs), len(cl.d)), np.inf)
    for k, x in enumerate(xs):
        if move.joint:
            q = np.asarray(x, dtype=float)
        else:
            T = np.eye(4)
            T[:3, 3] = x[:3]
            T[:3, :3] = pin.exp3(x[3] * move.axis) @ move.start[:3, :3]
            qk = solve_ik(r, q, T, iterations=50)
            if qk is None:
                continue  # a pose not followed here: the loop's limits and damper act as it moves
            q = qk
        cl.compute(q)
        d[k] = cl.d
    cl.compute(np.asarray(q0, dtype=float))  # the start: the arm as it is
    bad = d < np.minimum(cl.margins, cl.d) - 1e-9
    out, seen = [], set()
    for i in np.flatnonzero(bad.any(axis=0)):
        link, other = cl.names[i]
        if (link, other) in seen:
            continue  # one reason per link and volume (a box has six faces)
        seen.add((link, other))
        k = int(np.argmax(bad[:, i]))
        closest = float(d[:, i].min())
        where = "through" if closest < 0 else "within the margin of"
        what = f"link {other!r}" if i >= cl.n_volume_pairs else repr(other)
        out.append(f"the path of link {link} passes {where} {what} ({times[k]:.2f} s into the move; closest "
                   f"{closest * 1e3:.1f} mm, margin {cl.margins[i] * 1e3:.0f} mm)")
    return out


def _who(name: str) -> str:
    return "tool centre point" if name == TIP else f"link {name}"
