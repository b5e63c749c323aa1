"""Link geometry and clearances: the arm's collision capsules, their distances to volumes and to each other.

**Shapes.** The arm's collision shapes are read from the robot description through pinocchio's
geometry model (``pin.buildGeomFromUrdf``; the shipped arms carry one capsule per link, fitted to
the vendors' collision meshes, see ``scripts/fit_capsules.py``). A capsule (``coal.Capsule``) and a
sphere are used as they are; any other shape (a mesh, a box, a cylinder) is replaced by the sphere
around its bounding box — larger than the shape, never smaller. The self-collision pairs are all
pairs of links on different joints except those an SRDF's ``disable_collisions`` lists (adjacent
links and pairs that always touch); the shipped arms' SRDFs sit beside their URDFs.

**Distances.** Every capsule is a segment [a, b] with radius r. Its signed distance to a volume is
the distance of the segment to the volume minus r (negative: overlapping), with closed forms:
a plane (the nearer end point), a sphere (the segment point nearest the centre), an axis-aligned
box (the distance of a point moving along the segment to the box is convex and piecewise
quadratic between the parameters where it crosses a face plane: the minimum of each piece is
exact), another capsule (the closest points of two segments, Ericson, *Real-Time Collision
Detection*, section 5.1.9). With each distance come the unit normal n (pointing from the volume,
or the other link, towards the link: moving the link along n increases the distance), the
witness point on the link's surface, and the row g = nᵀ(J₁ − J₂) (J₁, J₂ the linear Jacobians of
the closest points on the two segments; J₂ = 0 for a fixed volume), so that ḋ = g q̇ — the
quantity the velocity damper of Faverjon & Tournassoud bounds (:mod:`fdcontrol.limits.collision`)
and along which the repulsive load acts (:mod:`fdcontrol.control.collision_loads`).

**Broad phase.** A pair whose lower bound — from the sphere around each capsule (centre the
segment's middle, radius half its length plus its radius); exact for a plane — is at least its
cut-off (its margin and the damper's d_min: no load, fault check or refusal reads it farther) is left
out: its d holds the bound, its row is zero. The nearest pair is always exact. The velocity damper
computes a left-out pair before it acts when the joint speeds could bring it nearer faster than its
bound (:func:`_promote`), so it gives what it gives with every pair computed.

Forward kinematics, distances and rows are one compiled call per cycle (numba, the ``fast``
extra; without it the same functions run as Python, slower), loaded from numba's cache when a
:class:`Clearance` is built, never in a cycle. All results are in the robot's base frame.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from fdcontrol.model.robot import ModelError, RobotModel

try:
    import numba

    _jit = numba.njit(cache=True, fastmath=False)
    # helpers called per pair with many arrays: inlined (a call passes each array with a reference count)
    _inline = numba.njit(cache=True, fastmath=False, inline="always")
    COMPILED = True
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    def _jit(f):  # type: ignore[no-redef]
        return f

    _inline = _jit

    COMPILED = False

PLANE, SPHERE, BOX, CAPSULE = 0, 1, 2, 3


# ---------------------------------------------------------------------------- kernels (numba)
@_jit
def _seg_box(a, b, lo, hi, ts, n):
    """Signed distance of the segment [a, b] to the box [lo, hi] and its parameter t; writes the unit
    normal (box → segment) into n. ``ts``: scratch of 8."""
    u0, u1, u2 = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    ts[0], ts[1] = 0.0, 1.0
    m = 2
    for i in range(3):
        ui = b[i] - a[i]
        if ui != 0.0:
            for bnd in (lo[i], hi[i]):
                t = (bnd - a[i]) / ui
                if 0.0 < t < 1.0:
                    ts[m] = t
                    m += 1
    for i in range(1, m):  # insertion sort of ≤ 8 values
        x, k = ts[i], i - 1
        while k >= 0 and ts[k] > x:
            ts[k + 1] = ts[k]
            k -= 1
        ts[k + 1] = x
    best, tbest = np.inf, 0.0
    for k in range(m):  # each piece's end point, then the piece's own minimum
        for c in range(2):
            t = ts[k]
            if c == 1:
                if k + 1 >= m:
                    break
                t0, t1 = ts[k], ts[k + 1]
                tm = 0.5 * (t0 + t1)
                num, den = 0.0, 0.0
                for i in range(3):
                    ui = b[i] - a[i]
                    x = a[i] + tm * ui
                    if x < lo[i]:
                        num += ui * (lo[i] - a[i])
                        den += ui * ui
                    elif x > hi[i]:
                        num += ui * (hi[i] - a[i])
                        den += ui * ui
                t = t0 if den == 0.0 else min(max(num / den, t0), t1)
            f = 0.0
            for i in range(3):
                x = a[i] + t * (b[i] - a[i])
                e = lo[i] - x if x < lo[i] else (x - hi[i] if x > hi[i] else 0.0)
                f += e * e
            if f < best:
                best, tbest = f, t
    s0, s1, s2 = a[0] + tbest * u0, a[1] + tbest * u1, a[2] + tbest * u2
    if best > 0.0:
        dist = math.sqrt(best)
        n[0] = (s0 - min(max(s0, lo[0]), hi[0])) / dist
        n[1] = (s1 - min(max(s1, lo[1]), hi[1])) / dist
        n[2] = (s2 - min(max(s2, lo[2]), hi[2])) / dist
        return dist, tbest
    # the segment meets the box: minus the depth of its point below the nearest face
    depth, face = np.inf, 0
    for i in range(3):
        si = s0 if i == 0 else (s1 if i == 1 else s2)
        if si - lo[i] < depth:
            depth, face = si - lo[i], -(i + 1)
        if hi[i] - si < depth:
            depth, face = hi[i] - si, i + 1
    n[0], n[1], n[2] = 0.0, 0.0, 0.0
    n[abs(face) - 1] = 1.0 if face > 0 else -1.0
    return -depth, tbest


@_jit
def _seg_seg(a1, b1, a2, b2):
    """Parameters (s, t) of the closest points of two segments (Ericson 5.1.9)."""
    A = E = F = C = B = 0.0
    for i in range(3):
        d1, d2, r = b1[i] - a1[i], b2[i] - a2[i], a1[i] - a2[i]
        A += d1 * d1
        E += d2 * d2
        F += d2 * r
        C += d1 * r
        B += d1 * d2
    eps = 1e-18
    if A <= eps and E <= eps:
        return 0.0, 0.0
    if A <= eps:
        return 0.0, min(max(F / E, 0.0), 1.0)
    if E <= eps:
        return min(max(-C / A, 0.0), 1.0), 0.0
    den = A * E - B * B
    s = min(max((B * F - C * E) / den, 0.0), 1.0) if den > 0.0 else 0.0
    t = (B * s + F) / E
    if t < 0.0:
        t, s = 0.0, min(max(-C / A, 0.0), 1.0)
    elif t > 1.0:
        t, s = 1.0, min(max((B - C) / A, 0.0), 1.0)
    return s, t


@_jit
def _kinematics(q, parents, Rpl, ppl, axis, prism, idx_v, R0, p0, cj, ca, cb, oR, op, oz, A, B):
    """Joint frames (oR, op), world axes oz and the capsules' end points A, B (base frame)."""
    oR[0], op[0] = R0, p0
    T = np.empty((3, 3))
    for j in range(1, parents.shape[0]):
        P, Rp = oR[parents[j]], Rpl[j]
        for i in range(3):
            op[j, i] = op[parents[j], i] + P[i, 0] * ppl[j, 0] + P[i, 1] * ppl[j, 1] + P[i, 2] * ppl[j, 2]
            for k in range(3):
                T[i, k] = P[i, 0] * Rp[0, k] + P[i, 1] * Rp[1, k] + P[i, 2] * Rp[2, k]
        x, y, z = axis[j, 0], axis[j, 1], axis[j, 2]
        for i in range(3):
            oz[j, i] = T[i, 0] * x + T[i, 1] * y + T[i, 2] * z
        th = q[idx_v[j]]
        if prism[j]:
            for i in range(3):
                op[j, i] += oz[j, i] * th
                for k in range(3):
                    oR[j, i, k] = T[i, k]
            continue
        c, s = math.cos(th), math.sin(th)
        C = 1.0 - c
        r00, r01, r02 = c + x * x * C, x * y * C - z * s, x * z * C + y * s
        r10, r11, r12 = y * x * C + z * s, c + y * y * C, y * z * C - x * s
        r20, r21, r22 = z * x * C - y * s, z * y * C + x * s, c + z * z * C
        for i in range(3):
            t0, t1, t2 = T[i, 0], T[i, 1], T[i, 2]
            oR[j, i, 0] = t0 * r00 + t1 * r10 + t2 * r20
            oR[j, i, 1] = t0 * r01 + t1 * r11 + t2 * r21
            oR[j, i, 2] = t0 * r02 + t1 * r12 + t2 * r22
    for c in range(cj.shape[0]):
        R, o = oR[cj[c]], op[cj[c]]
        for i in range(3):
            A[c, i] = o[i] + R[i, 0] * ca[c, 0] + R[i, 1] * ca[c, 1] + R[i, 2] * ca[c, 2]
            B[c, i] = o[i] + R[i, 0] * cb[c, 0] + R[i, 1] * cb[c, 1] + R[i, 2] * cb[c, 2]


@_jit
def _row(g, n, w, j, sign, sup, prism, idx_v, op, oz):
    """g += sign · nᵀ J_w (J_w: the linear Jacobian of the point w fixed to joint j)."""
    for k in range(1, sup.shape[1]):
        if sup[j, k]:
            z = oz[k]
            if prism[k]:
                g[idx_v[k]] += sign * (n[0] * z[0] + n[1] * z[1] + n[2] * z[2])
            else:  # n · (z × (w − o)) = (w − o) · (n × z), without temporaries
                rx, ry, rz = w[0] - op[k, 0], w[1] - op[k, 1], w[2] - op[k, 2]
                g[idx_v[k]] += sign * (rx * (n[1] * z[2] - n[2] * z[1]) + ry * (n[2] * z[0] - n[0] * z[2])
                                       + rz * (n[0] * z[1] - n[1] * z[0]))


@_inline
def _unpack(ints, F, S, out, dims):
    """The named arrays of the flat buffers :class:`Clearance` writes (see :func:`clearances_flat`)."""
    nj, nc, m, nv = dims[0], dims[1], dims[2], dims[3]
    parents, prism, idx_v = ints[:nj], ints[nj:2 * nj], ints[2 * nj:3 * nj]
    o = 3 * nj
    sup = ints[o:o + nj * nj].reshape((nj, nj))
    o += nj * nj
    cj, kind = ints[o:o + nc], ints[o + nc:o + nc + m]
    cap, other = ints[o + nc + m:o + nc + 2 * m], ints[o + nc + 2 * m:o + nc + 3 * m]
    Rpl = F[:9 * nj].reshape((nj, 3, 3))
    ppl = F[9 * nj:12 * nj].reshape((nj, 3))
    axis = F[12 * nj:15 * nj].reshape((nj, 3))
    f = 15 * nj
    ca = F[f:f + 3 * nc].reshape((nc, 3))
    cb = F[f + 3 * nc:f + 6 * nc].reshape((nc, 3))
    cr = F[f + 6 * nc:f + 7 * nc]
    f += 7 * nc
    oa = F[f:f + 3 * m].reshape((m, 3))
    ob = F[f + 3 * m:f + 6 * m].reshape((m, 3))
    orad = F[f + 6 * m:f + 7 * m]
    cut = F[f + 7 * m:f + 8 * m]
    oR = S[:9 * nj].reshape((nj, 3, 3))
    op = S[9 * nj:12 * nj].reshape((nj, 3))
    oz = S[12 * nj:15 * nj].reshape((nj, 3))
    s = 15 * nj
    A = S[s:s + 3 * nc].reshape((nc, 3))
    B = S[s + 3 * nc:s + 6 * nc].reshape((nc, 3))
    M = S[s + 6 * nc:s + 9 * nc].reshape((nc, 3))
    H = S[s + 9 * nc:s + 10 * nc]
    d = out[:m]
    N = out[m:4 * m].reshape((m, 3))
    W = out[4 * m:7 * m].reshape((m, 3))
    G = out[7 * m:7 * m + m * nv].reshape((m, nv))
    X = out[7 * m + m * nv:8 * m + m * nv]
    return (parents, prism, idx_v, sup, cj, kind, cap, other, Rpl, ppl, axis, ca, cb, cr, oa, ob, orad, cut,
            oR, op, oz, A, B, M, H, d, N, W, G, X)


@_jit
def _exact(todo, nt, kind, cap, other, cj, oa, ob, orad, cr, sup, prism, idx_v, op, oz, A, B, d, N, W, G, X, sc):
    """The pairs ``todo[:nt]`` exactly: each one's distance d, normal N, witness W and row G; marks them
    exact (X = 1). ``sc``: scratch of 14. One call for all (a call passes each array with a reference count)."""
    s1, s2, ts = sc[:3], sc[3:6], sc[6:14]
    for it in range(nt):
        i = todo[it]
        c = cap[i]
        a, b, r = A[c], B[c], cr[c]
        k = kind[i]
        n = N[i]
        for j in range(G.shape[1]):
            G[i, j] = 0.0
        if k == PLANE:
            sa = sb = 0.0
            for x in range(3):
                sa += (a[x] - oa[i, x]) * ob[i, x]
                sb += (b[x] - oa[i, x]) * ob[i, x]
            t, dd = (0.5, 0.5 * (sa + sb)) if abs(sa - sb) <= 1e-12 else ((0.0, sa) if sa < sb else (1.0, sb))
            for x in range(3):
                s1[x] = a[x] + t * (b[x] - a[x])
                n[x] = ob[i, x]
            dist = dd - r
        elif k == SPHERE or k == CAPSULE:
            if k == SPHERE:
                for x in range(3):
                    s2[x] = oa[i, x]
                uu = uc = 0.0
                for x in range(3):
                    u = b[x] - a[x]
                    uu += u * u
                    uc += (s2[x] - a[x]) * u
                t = 0.0 if uu <= 0.0 else min(max(uc / uu, 0.0), 1.0)
                r2 = orad[i]
            else:  # another capsule of the arm
                o = other[i]
                t, t2 = _seg_seg(a, b, A[o], B[o])
                for x in range(3):
                    s2[x] = A[o, x] + t2 * (B[o, x] - A[o, x])
                r2 = cr[o]
            nv = 0.0
            for x in range(3):
                s1[x] = a[x] + t * (b[x] - a[x])
                n[x] = s1[x] - s2[x]
                nv += n[x] * n[x]
            nv = math.sqrt(nv)
            if nv > 0.0:
                for x in range(3):
                    n[x] /= nv
            else:
                n[0], n[1], n[2] = 0.0, 0.0, 1.0
            dist = nv - r - r2
            if k == CAPSULE:
                _row(G[i], n, s2, cj[other[i]], -1.0, sup, prism, idx_v, op, oz)
        else:  # BOX
            dd, t = _seg_box(a, b, oa[i], ob[i], ts, n)
            for x in range(3):
                s1[x] = a[x] + t * (b[x] - a[x])
            dist = dd - r
        _row(G[i], n, s1, cj[c], 1.0, sup, prism, idx_v, op, oz)
        for x in range(3):
            W[i, x] = s1[x] - r * n[x]
        d[i] = dist
        X[i] = 1.0


@_jit
def clearances_flat(q, ints, F, S, out, dims, broad, P):
    """Every pair's distance, normal, witness point and row at q (see the module doc), with its inputs in
    flat buffers (the layout :class:`Clearance` writes and :func:`_unpack` reads): ``ints`` (parents, prism,
    idx_v, sup, cj, kind, cap, other), floats F (joint placements — joint 0's the base's pose —, axes,
    capsules, obstacles, each pair's cut-off distance), scratch S (oR, op, oz, A, B, the capsules' centres M
    and half lengths H) and results ``out`` (d, N, W, G, X: 1 where the pair is exact).

    ``broad``: a pair whose lower bound (from the capsules' bounding spheres; exact for a plane) is at or
    beyond its cut-off is left out — d holds the bound, its row is zero and X = 0 — and the nearest pair is
    always exact (a left-out pair whose bound is below the nearest exact distance is computed).

    ``P``: the velocity damper's (d_min, k/dt, a_stop, set, v_free); with ``set`` 1, v_free gets the
    largest joint speed max_k |q̇_k| no pair's damper inequality can act on: min_i b_i / L_i, with L_i
    ‖g_i‖₁ for a computed pair and, for one left out, the sum over its capsules' joints of the distance of
    the capsule's farthest point to the joint's axis (|g_i q̇| ≤ L_i max_k |q̇_k|). Returns the index of
    the smallest d."""
    (parents, prism, idx_v, sup, cj, kind, cap, other, Rpl, ppl, axis, ca, cb, cr, oa, ob, orad, cut,
     oR, op, oz, A, B, M, H, d, N, W, G, X) = _unpack(ints, F, S, out, dims)
    _kinematics(q, parents, Rpl, ppl, axis, prism, idx_v, Rpl[0], ppl[0], cj, ca, cb, oR, op, oz, A, B)
    for c in range(A.shape[0]):
        h = 0.0
        for x in range(3):
            M[c, x] = 0.5 * (A[c, x] + B[c, x])
            h += (B[c, x] - A[c, x]) ** 2
        H[c] = 0.5 * math.sqrt(h)
    m = kind.shape[0]
    sc, todo = np.empty(14), np.empty(m, dtype=np.int64)
    nt = 0
    for i in range(m):
        if broad:  # a lower bound from the capsule's bounding sphere (exact for a plane: the nearer end)
            c, k = cap[i], kind[i]
            e = 0.0
            if k == PLANE:
                sa = sb = 0.0
                for x in range(3):
                    sa += (A[c, x] - oa[i, x]) * ob[i, x]
                    sb += (B[c, x] - oa[i, x]) * ob[i, x]
                lb = min(sa, sb) - cr[c]
            elif k == BOX:
                for x in range(3):
                    y = M[c, x]
                    g = oa[i, x] - y if y < oa[i, x] else (y - ob[i, x] if y > ob[i, x] else 0.0)
                    e += g * g
                lb = math.sqrt(e) - H[c] - cr[c]
            elif k == SPHERE:
                for x in range(3):
                    e += (M[c, x] - oa[i, x]) ** 2
                lb = math.sqrt(e) - H[c] - cr[c] - orad[i]
            else:
                o = other[i]
                for x in range(3):
                    e += (M[c, x] - M[o, x]) ** 2
                lb = math.sqrt(e) - H[c] - cr[c] - H[o] - cr[o]
            if lb >= cut[i]:
                d[i] = lb
                X[i] = 0.0
                for j in range(G.shape[1]):
                    G[i, j] = 0.0
                continue
        todo[nt] = i
        nt += 1
    _exact(todo, nt, kind, cap, other, cj, oa, ob, orad, cr, sup, prism, idx_v, op, oz, A, B, d, N, W, G, X, sc)
    while True:  # the nearest is exact: a left-out pair's bound below it is computed, until none is
        imin, dmin = -1, np.inf
        for i in range(m):
            if d[i] < dmin:
                imin, dmin = i, d[i]
        if imin < 0 or X[imin] == 1.0:
            break
        todo[0] = imin
        _exact(todo, 1, kind, cap, other, cj, oa, ob, orad, cr, sup, prism, idx_v, op, oz, A, B, d, N, W, G, X, sc)
    if P[3] == 1.0:
        P[4] = _free_speed(P[0], P[1], P[2], parents, prism, sup, cj, kind, cap, other, op, M, H, d, G, X)
    return imin


@_jit
def _free_speed(dmin, gain_dt, decel, parents, prism, sup, cj, kind, cap, other, op, M, H, d, G, X):
    """The largest max_k |q̇_k| no damper inequality can act on (see :func:`clearances_flat`)."""
    nj, nc, m = parents.shape[0], M.shape[0], kind.shape[0]
    lever = np.full(nc, -1.0)  # Σ over a capsule's joints of its farthest point's distance to the joint
    out = np.inf
    for i in range(m):
        room = d[i] - dmin
        if room <= 0.0:
            return 0.0
        bi = min(gain_dt * room, math.sqrt(2.0 * decel * room))
        L = 0.0
        if X[i] == 1.0:
            for j in range(G.shape[1]):
                L += abs(G[i, j])
        else:
            for side in range(2):
                c = cap[i] if side == 0 else other[i]
                if side == 1 and kind[i] != CAPSULE:
                    break
                if lever[c] < 0.0:
                    s, jc = 0.0, cj[c]
                    for k in range(1, nj):
                        if sup[jc, k]:
                            s += 1.0 if prism[k] else math.sqrt((M[c, 0] - op[k, 0]) ** 2 + (M[c, 1] - op[k, 1]) ** 2
                                                                + (M[c, 2] - op[k, 2]) ** 2) + H[c]
                    lever[c] = s
                L += lever[c]
        if L > 0.0 and bi < out * L:
            out = bi / L
    return out


@_jit
def _promote(v, b, dmin, gain_dt, decel, parents, prism, idx_v, sup, cj, kind, cap, other, cr, oa, ob, orad, op, oz,
             A, B, M, H, d, N, W, G, X, sc, todo, V):
    """Compute exactly every left-out pair whose approach speed under q̇ = ``v`` might exceed its bound b
    (the velocity damper's, from the pair's lower bound; updated for the pairs computed): the speed of a
    point of a capsule is at most Σ_k |q̇_k| (‖M − o_k‖ + H) over the joints k that move it (|q̇_k| for a
    prismatic joint), and of a pair's distance at most the sum over its two capsules. ``sc``, ``todo``,
    ``V``: scratch of 14, m and nc. Returns how many pairs it computed."""
    m, nj = kind.shape[0], parents.shape[0]
    V[:] = -1.0  # each capsule's speed bound, computed when first needed
    count = 0
    for i in range(m):
        if X[i] == 1.0:
            continue
        speed = 0.0
        for side in range(2):
            c = cap[i] if side == 0 else other[i]
            if side == 1 and kind[i] != CAPSULE:
                break
            if V[c] < 0.0:
                s, j = 0.0, cj[c]
                for k in range(1, nj):
                    if sup[j, k]:
                        w = abs(v[idx_v[k]])
                        if prism[k]:
                            s += w
                        else:
                            s += w * (math.sqrt((M[c, 0] - op[k, 0]) ** 2 + (M[c, 1] - op[k, 1]) ** 2
                                                + (M[c, 2] - op[k, 2]) ** 2) + H[c])
                V[c] = s
            speed += V[c]
        if speed > b[i]:
            todo[count] = i
            count += 1
    if count:
        _exact(todo, count, kind, cap, other, cj, oa, ob, orad, cr, sup, prism, idx_v, op, oz, A, B, d, N, W, G, X,
               sc)
        for t in range(count):
            room = max(d[todo[t]] - dmin, 0.0)
            b[todo[t]] = min(gain_dt * room, math.sqrt(2.0 * decel * room))
    return count


@_jit
def damp(v, dmin, gain_dt, decel, vmax, b, idx, ints, F, S, out, dims):
    """The velocity damper on q̇ = ``v`` (in place; see :class:`fdcontrol.limits.collision.CollisionAvoidance`)
    for the pairs of a :class:`Clearance` (its flat buffers, after its compute): b_i into ``b``,
    the violated pairs nearest first, projected in two sweeps, then the uniform scaling that makes every
    inequality and the velocity limits ``vmax`` (empty: none) hold. Returns whether it changed v.

    A pair the broad phase left out (its row zero, d a lower bound, so b_i a lower bound of its own) is
    computed exactly first when the joint speeds of ``v`` could bring it nearer faster than b_i, and again
    after the projections changed v (:func:`_promote`); the final scaling only
    slows every joint, so a pair still left out stays within its bound."""
    (parents, prism, idx_v, sup, cj, kind, cap, other, _Rpl, _ppl, _axis, _ca, _cb, cr, oa, ob, orad, _cut,
     _oR, op, oz, A, B, M, H, d, N, W, G, X) = _unpack(ints, F, S, out, dims)
    m, n = G.shape
    sc, todo, V = np.empty(14), np.empty(m, dtype=np.int64), np.empty(A.shape[0])
    for i in range(m):
        room = d[i] - dmin
        if room < 0.0:
            room = 0.0
        b[i] = min(gain_dt * room, math.sqrt(2.0 * decel * room))
    _promote(v, b, dmin, gain_dt, decel, parents, prism, idx_v, sup, cj, kind, cap, other, cr, oa, ob, orad, op, oz,
             A, B, M, H, d, N, W, G, X, sc, todo, V)
    nv = 0
    for i in range(m):
        bi = b[i]
        r = 0.0
        for j in range(n):
            r += G[i, j] * v[j]
        if r < -bi:
            idx[nv] = i
            nv += 1
    if nv == 0:
        return False
    for a in range(1, nv):  # nearest first (insertion sort: few pairs)
        x, k = idx[a], a - 1
        while k >= 0 and d[idx[k]] > d[x]:
            idx[k + 1] = idx[k]
            k -= 1
        idx[k + 1] = x
    for _ in range(2):
        for t in range(nv):
            i = idx[t]
            r, gg = 0.0, 0.0
            for j in range(n):
                r += G[i, j] * v[j]
                gg += G[i, j] * G[i, j]
            gap = -b[i] - r
            if gap > 0.0 and gg > 0.0:
                f = gap / gg
                for j in range(n):
                    v[j] += f * G[i, j]
    _promote(v, b, dmin, gain_dt, decel, parents, prism, idx_v, sup, cj, kind, cap, other, cr, oa, ob, orad, op, oz,
             A, B, M, H, d, N, W, G, X, sc, todo, V)
    s = 1.0
    for i in range(m):
        r = 0.0
        for j in range(n):
            r += G[i, j] * v[j]
        if r < -b[i]:
            s = min(s, b[i] / -r)
    for j in range(vmax.shape[0]):
        if abs(v[j]) > vmax[j]:
            s = min(s, vmax[j] / abs(v[j]))
    for j in range(n):
        v[j] *= s
    return True


# ---------------------------------------------------------------------------- link geometry
@dataclass(frozen=True)
class Capsule:
    """A link's capsule: segment [a, b] (m, in the frame of its parent joint ``joint``), radius (m)."""

    link: str
    joint: int
    a: np.ndarray
    b: np.ndarray
    radius: float


def _capsule(model: pin.Model, obj: pin.GeometryObject) -> Capsule:
    g, X = obj.geometry, obj.placement
    link = model.frames[obj.parentFrame].name if obj.parentFrame < len(model.frames) else obj.name
    if type(g).__name__ == "Capsule":
        h = float(g.halfLength)
        return Capsule(link, int(obj.parentJoint), X.act(np.array([0.0, 0.0, -h])), X.act(np.array([0.0, 0.0, h])),
                       float(g.radius))
    if type(g).__name__ == "Sphere":
        c = X.translation.copy()
        return Capsule(link, int(obj.parentJoint), c, c.copy(), float(g.radius))
    g.computeLocalAABB()  # any other shape: the sphere around its bounding box
    lo, hi = np.asarray(g.aabb_local.min_) * obj.meshScale, np.asarray(g.aabb_local.max_) * obj.meshScale
    c = X.act((lo + hi) / 2)
    return Capsule(link, int(obj.parentJoint), c, c.copy(), float(np.linalg.norm(hi - lo) / 2))


@dataclass
class LinkGeometry:
    """The arm's collision capsules (one or more per link) and the self-collision pairs checked."""

    capsules: list[Capsule]
    self_pairs: list[tuple[int, int]]

    @property
    def links(self) -> list[str]:
        return list(dict.fromkeys(c.link for c in self.capsules))

    @classmethod
    def from_geometry(cls, model: pin.Model, geom: pin.GeometryModel, srdf: str | Path | None = None) -> LinkGeometry:
        """From pinocchio's collision model; ``srdf``: its ``disable_collisions`` are not checked."""
        caps = [_capsule(model, o) for o in geom.geometryObjects]
        disabled: set[frozenset[str]] = set()
        if srdf is not None and Path(srdf).is_file():
            import xml.etree.ElementTree as ET

            for e in ET.parse(srdf).getroot().iter("disable_collisions"):
                disabled.add(frozenset((e.get("link1"), e.get("link2"))))
        pairs = []
        for i, ci in enumerate(caps):
            for j in range(i + 1, len(caps)):
                cj = caps[j]
                if ci.joint == cj.joint or frozenset((ci.link, cj.link)) in disabled:
                    continue
                hi, lo = max(ci.joint, cj.joint), min(ci.joint, cj.joint)
                if model.parents[hi] == lo:
                    continue  # adjacent links always touch at their joint
                pairs.append((i, j))
        return cls(caps, pairs)


def load_geometry(model: pin.Model, urdf: str | Path, srdf: str | Path | None = None) -> LinkGeometry | None:
    """The collision geometry of ``urdf`` for ``model`` (None when it has no ``<collision>``)."""
    urdf = Path(urdf)
    try:
        geom = pin.buildGeomFromUrdf(model, str(urdf), pin.GeometryType.COLLISION, package_dirs=[str(urdf.parent)])
    except Exception as exc:
        raise ModelError(f"cannot read the collision geometry of {urdf}: {exc}") from exc
    if geom.ngeoms == 0:
        return None
    srdf = srdf if srdf is not None else urdf.with_suffix(".srdf")
    return LinkGeometry.from_geometry(model, geom, srdf)


# ---------------------------------------------------------------------------- the per-cycle computer
@dataclass(frozen=True)
class Obstacle:
    """One piece of a volume a link keeps out of: kind PLANE (point, allowed-side normal), SPHERE
    (centre, radius), BOX (min, max; the outside allowed), with the volume's name and margin (m)."""

    name: str
    kind: int
    a: np.ndarray
    b: np.ndarray = field(default_factory=lambda: np.zeros(3))
    radius: float = 0.0
    margin: float = 0.05


class Clearance:
    """Distances of the arm's capsules to obstacles and to each other, one compiled call per cycle.

    ``pairs`` are (capsule, obstacle) for every capsule and obstacle, then the self-collision
    pairs; after :meth:`compute` (q), ``d``, ``normal``, ``witness``, ``rows`` hold each pair's signed
    distance (m), unit normal, witness point on the link (base frame) and row g with ḋ = g q̇;
    ``names`` the (link, volume or link) of each pair and ``margins`` their margins (m).
    """

    def __init__(self, robot: RobotModel, geometry: LinkGeometry, obstacles: list[Obstacle],
                 self_collision: bool = False, self_margin: float = 0.02, hard_margin: float = 0.01,
                 broad: bool = True) -> None:
        model = robot.model
        nj = model.njoints
        kinds = {"JointModelRX": (0, 0), "JointModelRY": (1, 0), "JointModelRZ": (2, 0),
                 "JointModelPX": (0, 1), "JointModelPY": (1, 1), "JointModelPZ": (2, 1)}
        self.parents = np.array(model.parents, dtype=np.int64)
        self.Rpl = np.array([model.jointPlacements[j].rotation for j in range(nj)])
        self.ppl = np.array([model.jointPlacements[j].translation for j in range(nj)])
        self.axis, self.prism = np.zeros((nj, 3)), np.zeros(nj, dtype=np.bool_)
        for j in range(1, nj):
            jm = model.joints[j]
            name = jm.shortname()
            if name in kinds:
                self.axis[j, kinds[name][0]], self.prism[j] = 1.0, bool(kinds[name][1])
            elif name in ("JointModelRevoluteUnaligned", "JointModelPrismaticUnaligned"):
                self.axis[j], self.prism[j] = np.asarray(jm.axis), name.startswith("JointModelPrismatic")
            else:
                raise ModelError(f"link geometry: joint {model.names[j]!r} of type {name} is not supported")
        self.idx_v = np.array(model.idx_vs, dtype=np.int64)
        self.sup = np.zeros((nj, nj), dtype=np.bool_)
        for j in range(1, nj):
            for k in model.supports[j]:
                if k != 0:
                    self.sup[j, k] = True
        bMo = robot._oMb.inverse()  # everything in the base frame
        self.R0, self.p0 = bMo.rotation.copy(), bMo.translation.copy()
        caps = geometry.capsules
        self.cj = np.array([c.joint for c in caps], dtype=np.int64)
        self.ca = np.array([c.a for c in caps]).reshape(-1, 3)
        self.cb = np.array([c.b for c in caps]).reshape(-1, 3)
        self.cr = np.array([c.radius for c in caps], dtype=float)
        kind, cap, other, oa, ob, orad, names, margins = [], [], [], [], [], [], [], []
        for ci, c in enumerate(caps):
            if c.joint == 0:
                continue  # the base never moves: its distance to a volume cannot change
            for o in obstacles:
                kind.append(o.kind)
                cap.append(ci)
                other.append(-1)
                oa.append(o.a)
                ob.append(o.b)
                orad.append(o.radius)
                names.append((c.link, o.name))
                margins.append(o.margin)
        self.n_volume_pairs = len(kind)
        if self_collision:
            for i, j in geometry.self_pairs:
                kind.append(CAPSULE)
                cap.append(i)
                other.append(j)
                oa.append(np.zeros(3))
                ob.append(np.zeros(3))
                orad.append(0.0)
                names.append((caps[i].link, caps[j].link))
                margins.append(self_margin)
        self.kind = np.array(kind, dtype=np.int64)
        self.cap = np.array(cap, dtype=np.int64)
        self.other = np.array(other, dtype=np.int64)
        self.oa = np.array(oa, dtype=float).reshape(-1, 3)
        self.ob = np.array(ob, dtype=float).reshape(-1, 3)
        self.orad = np.array(orad, dtype=float)
        self.names: list[tuple[str, str]] = names
        self.margins = np.array(margins, dtype=float)
        m, nv, nc = len(kind), model.nv, len(caps)
        # the compiled call's inputs in two flat buffers (one argument each: fewer to pass, fewer cache lines)
        self._dims = np.array([nj, nc, m, nv], dtype=np.int64)
        self._I = np.concatenate([self.parents, self.prism.astype(np.int64), self.idx_v,
                                  self.sup.astype(np.int64).ravel(), self.cj, self.kind, self.cap, self.other])
        Rpl = self.Rpl.copy()
        Rpl[0], ppl = self.R0, self.ppl.copy()  # joint 0's placement is never read: the base's pose there
        ppl[0] = self.p0
        self.hard_margin = float(hard_margin)  # d_min (m): the velocity damper's; half of it crossed is a fault
        # the broad phase: a pair is computed exactly while its lower bound is below its margin and d_min (the
        # loads, the fault check and a volume's refusal read no farther); farther, only the velocity damper may
        # need it, and it computes those the joint speeds could bring within its bound (:func:`promote`)
        self.cutoff = np.maximum(self.margins, self.hard_margin)
        self.broad = bool(broad)
        self._F = np.concatenate([Rpl.ravel(), ppl.ravel(), self.axis.ravel(), self.ca.ravel(), self.cb.ravel(),
                                  self.cr, self.oa.ravel(), self.ob.ravel(), self.orad, self.cutoff])
        self._S = np.zeros(15 * nj + 10 * nc)  # scratch: oR, op, oz, capsule ends A, B, centres M, half lengths H
        self._O = np.zeros(8 * m + m * nv)  # results: d, normal, witness, rows, exact
        # the velocity damper's parameters and the joint speed it cannot act below (see clearances_flat)
        self.damper = np.array([0.0, 0.0, 0.0, 0.0, -1.0])
        self._views()
        self.d[:] = np.inf
        self.nearest = -1
        self._key: list[float] | None = None  # q of the last compute, as a list (a cheap comparison)
        self.count = 0  # how many times the distances were computed (tests: none when nothing is configured)
        self._load_kernels()

    def _load_kernels(self) -> None:
        """The compiled forms of the distances and of the velocity damper for the argument types :meth:`compute`
        and :class:`~fdcontrol.limits.collision.CollisionAvoidance` pass them, loaded from numba's cache (compiled
        and cached where it has none) here, where the loop's checker is built: numba would otherwise load them at
        their first call, inside the first cycle with a volume (about 0.2 s; a compilation, without the cache,
        takes tens of seconds on a loaded machine). Loaded once per process: later calls find them loaded."""
        if not COMPILED or not hasattr(clearances_flat, "compile"):  # (NUMBA_DISABLE_JIT: the Python functions)
            return
        typeof = numba.typeof
        vec, ivec, real = typeof(self.damper), typeof(self._dims), numba.float64  # float64, int64 arrays (C)
        flat = (typeof(self._I), typeof(self._F), typeof(self._S), typeof(self._O), typeof(self._dims))
        clearances_flat.compile((vec, *flat, typeof(self.broad), vec))  # q, the buffers, broad, P
        damp.compile((vec, real, real, real, vec, vec, ivec, *flat))  # v, d_min, k/dt, a_stop, v_max, b, idx, …

    @property
    def empty(self) -> bool:
        return self.kind.shape[0] == 0

    def _views(self) -> None:
        """The named arrays: views of the flat scratch and result buffers."""
        nj, nc, m, nv = (int(x) for x in self._dims)
        S, out = self._S, self._O
        self.oR = S[:9 * nj].reshape(nj, 3, 3)
        self.op = S[9 * nj:12 * nj].reshape(nj, 3)
        self.oz = S[12 * nj:15 * nj].reshape(nj, 3)
        self.A = S[15 * nj:15 * nj + 3 * nc].reshape(nc, 3)
        self.B = S[15 * nj + 3 * nc:15 * nj + 6 * nc].reshape(nc, 3)
        self.d = out[:m]
        self.normal = out[m:4 * m].reshape(m, 3)
        self.witness = out[4 * m:7 * m].reshape(m, 3)
        self.rows = out[7 * m:7 * m + m * nv].reshape(m, nv)
        self.exact = out[7 * m + m * nv:]

    def copy(self) -> Clearance:
        """The same pairs with buffers of their own (another thread may compute with it: a move's path check
        while the loop thread computes with this one)."""
        out = copy.copy(self)
        out._S, out._O, out.damper = self._S.copy(), self._O.copy(), self.damper.copy()
        out._views()
        out._key, out.nearest, out.count = None, -1, 0
        return out

    def compute(self, q: np.ndarray | list[float]) -> int:
        """All distances at q; returns the index of the smallest (−1 without pairs). The same q as the
        last call reuses its results: the loop computes them once per cycle (its ``link_distances`` stage)
        and the loads, the damper, the fault check and the state read them."""
        key = q if isinstance(q, list) else q.tolist()
        if key == self._key:
            return self.nearest
        self._key = list(key) if key is q else key  # a copy of a caller's list
        q = np.asarray(q, dtype=float)
        self.count += 1
        self.nearest = int(clearances_flat(q, self._I, self._F, self._S, self._O, self._dims, self.broad,
                                              self.damper))
        return self.nearest



    def crossed(self, qd: np.ndarray) -> str | None:
        """Why the loop must hold, or None: a pair nearer than half the hard margin that the joint velocity
        ``qd`` (rad/s) brings nearer still (a volume moved onto the arm, or an arm pushed past the damper).
        Moving away stays allowed. Reads the last compute."""
        if self.nearest < 0 or self.d[self.nearest] >= 0.5 * self.hard_margin:
            return None
        deep = self.d < 0.5 * self.hard_margin
        if not deep.any():
            return None
        rate = self.rows[deep] @ qd
        inward = rate < 0.0
        if not inward.any():
            return None
        idx = np.flatnonzero(deep)[inward]
        i = int(idx[np.argmin(self.d[idx])])
        link, other = self.names[i]
        kind = "link" if i >= self.n_volume_pairs else "volume"
        return (f"link {link} is {self.d[i] * 1e3:.1f} mm from {kind} {other!r}, inside half the hard margin of "
                f"{self.hard_margin * 1e3:.1f} mm, and the motion brought it nearer: holding (move it away, or "
                "remove the volume)")

    def smallest(self) -> tuple[float, str | None, str | None]:
        """(distance, link, volume or other link) of the nearest pair at the last compute."""
        i = self.nearest
        if i < 0:
            return math.nan, None, None
        return float(self.d[i]), self.names[i][0], self.names[i][1]

    def segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(A, B, r): the capsules' end points (base frame) and radii at the last compute."""
        return self.A, self.B, self.cr
