"""Link geometry, clearances and the velocity damper (fdcontrol.model.collision, fdcontrol.limits.collision).

Distances are checked against MuJoCo's own mj_geomDistance on the same shapes, the rows g (ḋ = g q̇)
against finite differences, the capsules against the vendors' meshes they were fitted to."""

from __future__ import annotations

import logging
import re

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol.control.workspace import clearance_for, workspace_from_config
from fdcontrol.limits.base import Cycle
from fdcontrol.limits.collision import CollisionAvoidance, damp
from fdcontrol.loop import build_loop
from fdcontrol.model.collision import BOX, CAPSULE, PLANE, SPHERE, Clearance, Obstacle
from fdcontrol.model.robot import HOME, RobotModel

mujoco = pytest.importorskip("mujoco")

ARMS = ("ur10", "panda", "fr3")


def _random_obstacles(rng: np.random.Generator, n: int) -> list[Obstacle]:
    out = []
    for k in range(n):
        c = rng.uniform([-0.8, -0.8, -0.2], [0.8, 0.8, 1.2])
        kind = (PLANE, SPHERE, BOX)[k % 3]
        if kind == PLANE:
            nrm = rng.normal(size=3)
            out.append(Obstacle(f"plane{k}", PLANE, c, nrm / np.linalg.norm(nrm)))
        elif kind == SPHERE:
            out.append(Obstacle(f"sphere{k}", SPHERE, c, radius=float(rng.uniform(0.02, 0.3))))
        else:
            h = rng.uniform(0.02, 0.3, 3)
            out.append(Obstacle(f"box{k}", BOX, c - h, c + h))
    return out


def _mujoco_scene(cl: Clearance, obstacles: list[Obstacle]) -> tuple[object, object, list[int], list[int]]:
    """The capsules at the last compute and the obstacles as MuJoCo geoms (world frame = base frame)."""
    spec = mujoco.MjSpec()
    world = spec.worldbody
    A, B, r = cl.segments()
    caps = []
    for i in range(len(r)):
        if np.linalg.norm(B[i] - A[i]) < 1e-9:
            g = world.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[r[i], 0, 0], pos=A[i].tolist())
        else:
            g = world.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[r[i], 0, 0],
                               fromto=[*A[i].tolist(), *B[i].tolist()])
        caps.append(g)
    obs = []
    for o in obstacles:
        if o.kind == PLANE:
            z = o.b
            x = np.cross([0.0, 1.0, 0.0] if abs(z[1]) < 0.9 else [1.0, 0.0, 0.0], z)
            x /= np.linalg.norm(x)
            R = np.column_stack((x, np.cross(z, x), z))
            quat = np.zeros(4)
            mujoco.mju_mat2Quat(quat, R.flatten())
            g = world.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1], pos=o.a.tolist(), quat=quat.tolist())
        elif o.kind == SPHERE:
            g = world.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[o.radius, 0, 0], pos=o.a.tolist())
        else:
            g = world.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=((o.b - o.a) / 2).tolist(),
                               pos=((o.a + o.b) / 2).tolist())
        obs.append(g)
    m = spec.compile()
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    return m, d, list(range(len(caps))), list(range(len(caps), len(caps) + len(obs)))


@pytest.mark.parametrize("arm", ARMS)
def test_distances_match_mujoco(arm: str) -> None:
    """Every capsule–plane/sphere/box and capsule–capsule distance equals MuJoCo's mj_geomDistance on the
    same shapes to 1e-6 m (separated pairs; overlapping ones agree in sign)."""
    robot = RobotModel.load(arm)
    rng = np.random.default_rng(7)
    checked = {PLANE: 0, SPHERE: 0, BOX: 0, CAPSULE: 0}
    for _ in range(6):
        obstacles = _random_obstacles(rng, 12)
        cl = Clearance(robot, robot.geometry, obstacles, self_collision=True, broad=False)  # every pair exact
        cl.compute(robot.random_q(rng))
        m, d, caps, obs = _mujoco_scene(cl, obstacles)
        ft = np.zeros(6)
        for i in range(len(cl.d)):
            g1 = caps[cl.cap[i]]
            g2 = caps[cl.other[i]] if cl.kind[i] == CAPSULE else obs[i % len(obstacles)]
            ref = mujoco.mj_geomDistance(m, d, g1, g2, 10.0, ft)
            if cl.d[i] > 1e-4 and ref > 1e-4:
                assert cl.d[i] == pytest.approx(ref, abs=1e-6), (cl.names[i], cl.kind[i])
                # the witness point on the link is MuJoCo's nearest point on geom1 (unique for a capsule
                # against a convex volume unless the segment is parallel to a face)
                checked[int(cl.kind[i])] += 1
            else:
                assert (cl.d[i] < 1e-4) == (ref < 1e-4) or abs(cl.d[i] - ref) < 1e-4, cl.names[i]
    assert min(checked.values()) >= 10, checked


@pytest.mark.parametrize("arm", ARMS)
def test_rows_are_the_distance_derivative(arm: str) -> None:
    """ḋ = g q̇: each pair's row against central differences of its distance."""
    robot = RobotModel.load(arm)
    rng = np.random.default_rng(3)
    obstacles = _random_obstacles(rng, 9)
    cl = Clearance(robot, robot.geometry, obstacles, self_collision=True, broad=False)
    for _ in range(5):
        q = robot.random_q(rng)
        cl.compute(q)
        G, d0 = cl.rows.copy(), cl.d.copy()
        fd = np.zeros_like(G)
        eps = 1e-6
        for j in range(robot.dof):
            dq = np.zeros(robot.dof)
            dq[j] = eps
            cl.compute(q + dq)
            dp = cl.d.copy()
            cl.compute(q - dq)
            fd[:, j] = (dp - cl.d) / (2 * eps)
        smooth = d0 > 1e-3  # a kink only where shapes touch
        assert np.abs(fd[smooth] - G[smooth]).max() < 1e-5


@pytest.mark.parametrize("arm", ARMS)
def test_broad_phase_is_exact_wherever_it_is_read(arm: str) -> None:
    """The broad phase against every pair computed exactly (checked against MuJoCo above): the nearest pair
    and every pair computed are the same to the bit; a pair left out holds a lower bound of its distance,
    and its distance is beyond its cut-off (max of its margin and d_min: no load, no fault, no refusal reads
    it). The velocity damper in the loop's form (broad phase, and its early return when no joint is fast
    enough for any inequality to act) gives the joint velocity the compiled damper gives on every pair
    computed exactly, to 1e-12, for random joint velocities from 0.001 to 5× the limits."""
    robot = RobotModel.load(arm)
    rng = np.random.default_rng(11)
    left = promoted = early = acted = tight = 0
    dt, vmax = 0.002, robot.limits.velocity
    for k in range(30):
        obstacles = _random_obstacles(rng, 1 + k % 10)
        if k % 5 == 4:  # far from the arm: the damper's early return for slow joints
            obstacles = [Obstacle("far", SPHERE, np.array([4.0, 0.0, 0.5]), radius=0.3),
                         Obstacle("far box", BOX, np.array([-4.0, -1.0, 0.0]), np.array([-3.5, 1.0, 1.0]))]
        q = robot.random_q(rng)
        broad = Clearance(robot, robot.geometry, obstacles, self_collision=k % 2 == 0)
        full = Clearance(robot, robot.geometry, obstacles, self_collision=k % 2 == 0, broad=False)
        lim = CollisionAvoidance(broad, 0.01, 5.0, vmax)
        lim.apply(Cycle(robot.random_q(rng), np.zeros(robot.dof), None, dt), [0.0] * robot.dof)  # its parameters
        assert broad.compute(q) == full.compute(q)
        assert broad.smallest() == full.smallest()
        ex = broad.exact == 1.0
        assert full.exact.all() and ex[broad.nearest]
        for a, b in ((broad.d, full.d), (broad.rows, full.rows), (broad.normal, full.normal),
                     (broad.witness, full.witness)):
            assert np.array_equal(a[ex], b[ex])
        assert np.all(broad.d[~ex] <= full.d[~ex]) and np.all(full.d[~ex] >= broad.cutoff[~ex])
        left += int((~ex).sum())
        for s in (0.001, 0.01, 0.1, 1.0, 5.0):
            v = rng.normal(size=robot.dof) * s * vmax
            out = v.tolist()
            early += bool(np.abs(v).max() <= broad.damper[4])
            changed = lim.apply(Cycle(q, np.zeros(robot.dof), None, dt), out)
            ref, m = v.copy(), len(full.d)
            assert changed == damp(ref, 0.01, lim.gain / dt, 5.0, vmax, np.empty(m), np.empty(m, dtype=np.int64),
                                   full._I, full._F, full._S, full._O, full._dims)
            assert np.allclose(out, ref, rtol=0, atol=1e-12), (out, ref)
            acted += changed
        promoted += int((broad.exact == 1.0).sum() - ex.sum())
        # every joint at the same speed t, each in the direction that brings pair i nearer, just fast enough
        # for its inequality (t ‖g_i‖₁ = 1.01 b_i): the damper acts, the early return may not skip it
        for i in np.argsort(full.d)[:4]:
            g = full.rows[i]
            room = full.d[i] - 0.01
            if room <= 0 or not g.any():
                continue
            t = 1.01 * min(lim.gain / dt * room, np.sqrt(2 * 5.0 * room)) / np.abs(g).sum()
            v = -t * np.sign(g)
            out, ref, m = v.tolist(), v.copy(), len(full.d)
            assert damp(ref, 0.01, lim.gain / dt, 5.0, vmax, np.empty(m), np.empty(m, dtype=np.int64),
                        full._I, full._F, full._S, full._O, full._dims)
            assert lim.apply(Cycle(q, np.zeros(robot.dof), None, dt), out)
            assert np.allclose(out, ref, rtol=0, atol=1e-12), (out, ref)
            tight += 1
    assert left > 500 and promoted > 20 and early >= 8 and acted > 10 and tight > 20, (
        left, promoted, early, acted, tight)  # all paths


@pytest.mark.parametrize("arm", ARMS)
def test_damper_computes_a_far_pair_the_arm_rushes_at(arm: str) -> None:
    """A box beside the elbow, beyond its 5 cm margin by more than the elbow capsule's half length (the broad
    phase leaves the pair out), and the elbow driven at it twice as fast as the damper's braking curve
    allows there (√(2 a (d − d_min))): the damper computes the pair and slows the approach to its bound,
    giving what it gives with every pair computed exactly."""
    robot = RobotModel.load(arm)
    q0 = np.asarray(HOME[arm])
    cl0 = Clearance(robot, robot.geometry, [])
    cl0.compute(q0)
    elbow = 3 if arm == "ur10" else 4
    u = cl0.B[elbow] - cl0.A[elbow]
    e = np.cross(u, [0.0, 0.0, 1.0])
    e /= np.linalg.norm(e)
    gap = np.linalg.norm(u) / 2 + 0.1
    c = (cl0.A[elbow] + cl0.B[elbow]) / 2 + (cl0.cr[elbow] + gap + 0.1) * e
    box = Obstacle("fixture", BOX, c - 0.1, c + 0.1, margin=0.05)
    # and a floor 7 cm below the lowest moving link: a nearer pair (the nearest is always computed)
    low = min(min(cl0.A[k, 2], cl0.B[k, 2]) - cl0.cr[k] for k in range(len(cl0.cr)) if cl0.cj[k] > 0)
    floor = Obstacle("floor", PLANE, np.array([0.0, 0.0, low - 0.07]), np.array([0.0, 0.0, 1.0]), margin=0.05)
    broad = Clearance(robot, robot.geometry, [box, floor])
    full = Clearance(robot, robot.geometry, [box, floor], broad=False)
    lim = CollisionAvoidance(broad, 0.01, 5.0, robot.limits.velocity)
    broad.compute(q0)
    full.compute(q0)
    j = next(k for k, (link, _) in enumerate(full.names) if link == robot.geometry.capsules[elbow].link)
    assert broad.exact[j] == 0.0 and full.d[j] > 0.1, (broad.smallest(), full.d[j])  # left out
    g = full.rows[j]
    bound = np.sqrt(2 * 5.0 * (full.d[j] - 0.01))
    v = -2 * bound * g / (g @ g)  # its distance shrinks at twice the bound
    out = v.tolist()
    assert lim.apply(Cycle(q0, np.zeros(robot.dof), None, 0.002), out)
    assert -(g @ np.asarray(out)) <= bound + 1e-9 and broad.exact[j] == 1.0
    m = len(full.d)
    ref = v.copy()
    damp(ref, 0.01, lim.gain / 0.002, 5.0, robot.limits.velocity, np.empty(m), np.empty(m, dtype=np.int64),
         full._I, full._F, full._S, full._O, full._dims)
    assert np.allclose(out, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("arm", ARMS)
def test_capsule_placement_matches_pinocchio(arm: str) -> None:
    """The compiled forward kinematics puts each capsule where pinocchio's geometry placement puts it."""
    robot = RobotModel.load(arm)
    geom = pin.buildGeomFromUrdf(robot.model, str(robot.source), pin.GeometryType.COLLISION)
    gdata = pin.GeometryData(geom)
    data = robot.model.createData()
    cl = Clearance(robot, robot.geometry, [], self_collision=True)
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = robot.random_q(rng)
        cl.compute(q)
        pin.updateGeometryPlacements(robot.model, data, geom, gdata, q)
        for i, o in enumerate(geom.geometryObjects):
            X = robot._oMb.actInv(gdata.oMg[i])
            h = o.geometry.halfLength if hasattr(o.geometry, "halfLength") else 0.0
            assert np.allclose(cl.A[i], X.act(np.array([0, 0, -h])), atol=1e-12)
            assert np.allclose(cl.B[i], X.act(np.array([0, 0, h])), atol=1e-12)
            assert cl.cr[i] == o.geometry.radius


def test_capsules_enclose_the_vendor_meshes() -> None:
    """Every vertex of the vendors' collision meshes lies inside its link's fitted capsule (conservative)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "fit_capsules.py"
    spec = importlib.util.spec_from_file_location("fit_capsules", path)
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)  # type: ignore[union-attr]  # (a defect in the script fails, not skips)
    if not fit.ERD.is_dir():  # the vendors' URDFs and meshes: the example-robot-data wheel
        pytest.skip(f"example-robot-data (test extra) is not installed: no {fit.ERD}")
    rng = np.random.default_rng(0)
    for name, (src, links, flange, vflange) in fit.ARMS.items():
        robot = RobotModel.load(name)
        vendor, verts = fit.vendor_vertices(fit.ERD / src)
        qs = [rng.uniform(-2, 2, robot.dof) for _ in range(8)]
        po = np.array([fit.frames(robot.model, q, [flange])[flange].translation for q in qs])
        pv = np.array([fit.frames(vendor, q, [vflange])[vflange].translation for q in qs])
        A = fit.kabsch(pv, po)
        caps = {c.link: c for c in robot.geometry.capsules}
        for ln, vn in links.items():
            q = qs[0]
            X = fit.frames(robot.model, q, [ln])[ln].inverse() * A * fit.frames(vendor, q, [vn])[vn]
            P = verts[vn] @ X.rotation.T + X.translation  # vertices in our link frame
            c = caps[ln]
            fr = robot.model.frames[robot.model.getFrameId(ln)]
            a, b = fr.placement.actInv(c.a), fr.placement.actInv(c.b)  # capsule: joint frame → link frame
            u = b - a
            s = np.clip((P - a) @ u / max(u @ u, 1e-300), 0, 1)
            dist = np.linalg.norm(P - (a + s[:, None] * u), axis=1)
            assert dist.max() <= c.radius + 1e-9, (name, ln, dist.max() - c.radius)


def test_shipped_arms_have_geometry_and_planar2_says_it_has_none(caplog: pytest.LogCaptureFixture) -> None:
    for arm in ARMS:
        robot = RobotModel.load(arm)
        g = robot.geometry
        assert g is not None and len(g.links) >= robot.dof
        assert g.self_pairs  # non-adjacent pairs are checked
        # the base link is never checked against a volume (it cannot move), nor a link against a neighbour
        cl = Clearance(robot, g, [Obstacle("wall", PLANE, np.zeros(3), np.array([0.0, 0.0, 1.0]))],
                       self_collision=True)
        base = {c.link for c in g.capsules if c.joint == 0}
        assert base and not base & {link for link, _ in cl.names[:cl.n_volume_pairs]}
        assert {link for link, _ in cl.names[:cl.n_volume_pairs]} == {c.link for c in g.capsules} - base
        for link, other in cl.names[cl.n_volume_pairs:]:
            j1, j2 = (next(c.joint for c in g.capsules if c.link == n) for n in (link, other))
            assert j1 != j2 and robot.model.parents[max(j1, j2)] != min(j1, j2)
    with caplog.at_level(logging.INFO, logger="fdcontrol"):
        r = RobotModel.load("planar2")
    assert r.geometry is None
    said = [m for m in caplog.messages if "no <collision> geometry" in m and "planar2" in m]
    assert len(said) == 1 and "\n" not in said[0], said  # one line
    # and keeps working with tip-only checks
    ws = workspace_from_config(r, None, [{"name": "ball", "sphere": {"center": [5, 0, 0], "radius": 0.1}}],
                               collision_links="all", self_collision=True)
    assert ws.clearance is None and not ws.empty


@pytest.mark.parametrize("arm", ARMS)
def test_the_srdf_beside_the_urdf_lists_the_pairs_never_checked(arm: str, tmp_path) -> None:
    """The self-collision pairs: every pair of links on different, non-adjacent joints except those the SRDF
    beside the URDF disables (read here with ElementTree on its own); another SRDF given disables its pairs."""
    import xml.etree.ElementTree as ET

    from fdcontrol.model.collision import LinkGeometry, load_geometry

    robot = RobotModel.load(arm)
    srdf = robot.source.with_suffix(".srdf")
    listed = {frozenset((e.get("link1"), e.get("link2"))) for e in ET.parse(srdf).getroot().iter("disable_collisions")}
    geom = pin.buildGeomFromUrdf(robot.model, str(robot.source), pin.GeometryType.COLLISION)
    bare = LinkGeometry.from_geometry(robot.model, geom)  # no SRDF: every non-adjacent pair
    caps = bare.capsules

    def names(g: LinkGeometry) -> set[frozenset]:
        return {frozenset((caps[i].link, caps[j].link)) for i, j in g.self_pairs}

    assert names(robot.geometry) == names(bare) - listed and names(bare) & listed  # the SRDF removed some
    pair = sorted(names(robot.geometry), key=sorted)[0]
    own = tmp_path / "own.srdf"
    a, b = sorted(pair)
    own.write_text(f'<robot name="x"><disable_collisions link1="{a}" link2="{b}" reason="test"/></robot>')
    assert names(load_geometry(robot.model, robot.source, own)) == names(bare) - {pair}


def test_nothing_computed_when_nothing_is_configured() -> None:
    """No volume and no self-collision: no distance computer anywhere, nothing computed per cycle."""
    robot = RobotModel.load("panda")
    assert clearance_for(robot, [], collision_links="all", self_collision=False) is None
    ws = workspace_from_config(robot, None, [], collision_links="all", self_collision=False)
    assert ws.clearance is None and ws.empty

    class P:
        velocity_scale, collision_links, self_collision = 0.5, "all", False

    lim = CollisionAvoidance.from_settings(robot, P())  # type: ignore[arg-type]
    assert lim.clearance is None
    q = np.asarray(HOME["panda"])
    qd = [0.1] * robot.dof
    assert lim.apply(Cycle(q, np.zeros(robot.dof), None, 0.002), qd) is False
    # configured, it computes once per call
    cl = clearance_for(robot, [], collision_links="all", self_collision=True)
    assert cl is not None and cl.count == 0
    lim = CollisionAvoidance(cl, 0.01)
    lim.apply(Cycle(q, np.zeros(robot.dof), None, 0.002), qd)
    assert cl.count == 1


def _run(robot: RobotModel, cl: Clearance, lim: CollisionAvoidance | None, q: np.ndarray, i: int,
         speed: float, steps: int, dt: float = 0.002) -> float:
    """q integrated under q̇ (a perfect velocity servo) that drives pair i's distance down at ``speed``
    m/s (least squares, re-aimed every step), limited by ``lim``; the smallest distance seen."""
    dmin = np.inf
    for _ in range(steps):
        cl.compute(q)
        g = cl.rows[i]
        out = (-speed * g / (g @ g)).tolist()
        if lim is not None:
            lim.apply(Cycle(q, np.zeros(robot.dof), None, dt), out)
        q = q + dt * np.asarray(out)
        cl.compute(q)
        dmin = min(dmin, float(cl.d.min()))
    return dmin


@pytest.mark.parametrize("arm", ARMS)
def test_damper_never_crosses_the_hard_margin(arm: str) -> None:
    """Driven into a box beside the elbow at 0.5 m/s for 2 s, no link comes nearer than d_min (to 0.1 mm);
    without the damper the same motion goes into the box."""
    robot = RobotModel.load(arm)
    q0 = np.asarray(HOME[arm])
    cl0 = Clearance(robot, robot.geometry, [])
    cl0.compute(q0)
    elbow = 3 if arm == "ur10" else 4  # forearm / panda_link4 capsule index
    u = cl0.B[elbow] - cl0.A[elbow]
    e = np.cross(u, [0.0, 0.0, 1.0])
    e /= np.linalg.norm(e)
    c = (cl0.A[elbow] + cl0.B[elbow]) / 2 + (cl0.cr[elbow] + 0.15 + 0.1) * e  # 15 cm beside the elbow
    box = Obstacle("fixture", BOX, c - 0.1, c + 0.1, margin=0.05)
    cl = Clearance(robot, robot.geometry, [box])
    lim = CollisionAvoidance(cl, 0.01, 5.0, robot.limits.velocity)
    cl.compute(q0)
    i = int(np.argmin(cl.d))
    assert cl.d[i] > 0.05
    dmin = _run(robot, cl, lim, q0, i, 0.5, 1000)
    assert 0.01 - 1e-4 <= dmin < 0.012  # it got there, and no nearer than d_min
    assert _run(robot, cl, None, q0, i, 0.5, 1000) < 0.0  # without the damper the same motion goes in


def test_crossed_names_link_and_volume_only_when_moving_in() -> None:
    """A volume moved onto the arm: the fault check names the link and the volume when the motion brings the
    link nearer, not when it moves the link out; the damper lets every overlapping link move out only."""
    robot = RobotModel.load("panda")
    q = np.asarray(HOME["panda"])
    cl0 = Clearance(robot, robot.geometry, [])
    cl0.compute(q)
    c = cl0.A[4]
    box = Obstacle("fixture", BOX, c - 0.02, c + 0.02)  # moved onto the arm
    cl = Clearance(robot, robot.geometry, [box], hard_margin=0.01)
    lim = CollisionAvoidance(cl, 0.01)
    cl.compute(q)
    i = int(np.argmin(cl.d))
    g = cl.rows[i]
    inward = -0.5 * g / np.linalg.norm(g)
    assert re.match(r"link panda_link[34] is -\d+\.\d mm from volume 'fixture', inside half the hard margin "
                    r"of 10\.0 mm", cl.crossed(inward) or ""), cl.crossed(inward)
    out = inward.tolist()
    assert lim.apply(Cycle(q, np.zeros(7), None, 0.002), out)
    assert cl.rows[cl.d < 0.01] @ np.asarray(out) == pytest.approx(0, abs=1e-9) or \
        np.all(cl.rows[cl.d < 0.01] @ np.asarray(out) >= -1e-9)  # the damper: no approach below d_min
    deep = cl.d < 0.005
    away = np.linalg.pinv(cl.rows[deep]) @ np.full(int(deep.sum()), 0.05)  # every overlapping link moves out
    assert cl.crossed(away) is None
    out = away.tolist()
    lim.apply(Cycle(q, np.zeros(7), None, 0.002), out)
    assert np.all(cl.rows[deep] @ np.asarray(out) > 0)
    # two links of the arm: named as a link
    far = Clearance(robot, robot.geometry, [], self_collision=True, hard_margin=10.0)  # every pair "crossed"
    far.compute(q)
    j = int(np.argmin(far.d))
    assert "from link" in (far.crossed(-far.rows[j]) or "")


def test_the_loop_computes_the_distances_once_per_cycle_and_none_without_volumes() -> None:
    """The assembled loop: nothing configured, no link stage and no distance computer at all; volumes and
    self-collision configured, one Clearance shared by the loads, the damper and the fault check, computed
    exactly once per cycle (a counter, not timing)."""
    robot = RobotModel.load("panda")
    loop = build_loop(driver="simulated", robot=robot)
    names = [s.name for s in loop.stages]
    assert "link_distances" not in names and "link_fault" not in names
    assert not [lim for lim in loop.limits.limits if isinstance(lim, CollisionAvoidance)]
    assert loop.task.workspace is None
    far = {"name": "far", "sphere": {"center": [3.0, 0.0, 0.3], "radius": 0.2}}
    loop = build_loop(driver="simulated", robot=robot, keep_out=[far], self_collision=True)
    names = [s.name for s in loop.stages]
    assert "link_distances" in names and "link_fault" in names
    cl = loop.task.workspace.clearance
    (damper,) = [lim for lim in loop.limits.limits if isinstance(lim, CollisionAvoidance)]
    assert damper.clearance is cl and cl.hard_margin == 0.01
    loop.set_wrench(np.array([5.0, 0, 0, 0, 0, 0]), t=1e12)  # the arm moves: a new q every cycle
    distinct, last = 0, None
    for k in range(20):
        loop.step(now=k * 0.002)
        q = loop.state.q.tolist()
        distinct, last = distinct + (q != last), q
    assert loop.fault is None and loop.cycle == 20
    assert cl.count == distinct >= 18  # one computation per cycle at a new q (activation: the first q twice)
    assert np.abs(np.asarray(loop.state.q) - HOME["panda"]).max() > 1e-6  # it did move


def link_motion(robot: RobotModel, q0: np.ndarray, wrench: np.ndarray, link: str, cycles: int = 25
                ) -> np.ndarray:
    """The unit direction a link's capsule middle moves in when ``wrench`` is streamed to the assembled loop
    from rest at q0 (a replica on the kinematic simulator)."""
    from fdcontrol.drivers import SimulatedRobot

    loop = build_loop(driver=SimulatedRobot(robot, dt=0.002, q0=q0), robot=robot)
    cl = Clearance(robot, robot.geometry, [])
    i = [c.link for c in robot.geometry.capsules].index(link)
    cl.compute(q0)
    m0 = (cl.A[i] + cl.B[i]) / 2
    for k in range(cycles):
        loop.set_wrench(wrench, t=k * 0.002)
        loop.step(now=k * 0.002)
    cl.compute(np.asarray(loop.state.q))
    u = (cl.A[i] + cl.B[i]) / 2 - m0
    assert np.linalg.norm(u) > 1e-5, "the link must move under the wrench"
    return u / np.linalg.norm(u)


def box_ahead(robot: RobotModel, q: np.ndarray, link: str, u: np.ndarray, gap: float, h: float = 0.05,
              name: str = "fixture") -> tuple[dict, float]:
    """A keep-out box (API form, margin 0) with its face across the axis nearest ``u`` at ``gap`` (m, signed)
    from the link's capsule at q, ahead of the link moving along u; and that distance by brute force (20001
    points along the segment, independent of the module's closed forms)."""
    cl = Clearance(robot, robot.geometry, [])
    cl.compute(q)
    i = [c.link for c in robot.geometry.capsules].index(link)
    a, b, r = cl.A[i].copy(), cl.B[i].copy(), float(cl.cr[i])
    k = int(np.argmax(np.abs(u)))
    e = np.zeros(3)
    e[k] = np.sign(u[k])
    p = a + np.linspace(0, 1, 20001)[:, None] * (b - a)

    def dist(c: np.ndarray) -> float:
        return float(np.linalg.norm(np.maximum(np.maximum(c - h - p, p - c - h), 0), axis=1).min()) - r

    c = (a + b) / 2 + (r + h + gap) * e
    for _ in range(3):  # the nearest segment point may not be the middle: shift the box along e onto the gap
        c = c + (gap - dist(c)) * e
    spec = {"name": name, "box": {"min": (c - h).tolist(), "max": (c + h).tolist()}, "margin": 0.0}
    return spec, dist(c)


def test_a_volume_moved_onto_a_running_arm_holds_it_with_a_fault_naming_link_and_volume() -> None:
    """In-process, through the assembled loop: the arm moves under a streamed wrench; a keep-out box is moved
    onto its forearm (2 mm into it, ahead of its motion) by a run-time change of the loop's parts. The next
    cycle holds with a fault naming the link and the volume, the reference brakes to zero and the fault's
    time is the cycle's; released after the volume is removed, the arm moves again without a fault."""
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop.build import build_parts, loop_params

    robot = RobotModel.load("ur10")
    q0 = np.asarray(HOME["ur10"], dtype=float)
    wrench = np.array([0.0, 0.0, 15.0, 0.0, 0.0, 0.0])
    u = link_motion(robot, q0, wrench, "forearm_link")
    loop = build_loop(driver=SimulatedRobot(robot, dt=0.002, q0=q0), robot=robot)
    k = 0

    def cycle() -> None:
        nonlocal k
        loop.set_wrench(wrench, t=k * 0.002)
        loop.step(now=k * 0.002)
        k += 1

    for _ in range(10):
        cycle()
    assert loop.fault is None and np.abs(loop.qd_ref).max() > 0  # moving
    spec, d = box_ahead(robot, np.asarray(loop.state.q), "forearm_link", u, -0.002)
    assert d == pytest.approx(-0.002, abs=1e-4)
    loop.reconfigure(**build_parts(robot, loop_params(keep_out=[spec]), loop=loop))
    at = k
    cycle()
    assert loop.fault is not None and loop.state.holding, loop.fault
    assert re.match(r"link forearm_link is -\d\.\d mm from volume 'fixture', inside half the hard margin of "
                    r"10\.0 mm", loop.fault), loop.fault
    assert loop.fault_at == pytest.approx(at * 0.002)
    for _ in range(200):  # held: the reference brakes to standstill (within the acceleration limit)
        cycle()
        if not loop.qd_ref.any():
            break
    assert not loop.qd_ref.any() and loop.state.fault == loop.fault
    cl = loop.task.workspace.clearance
    assert cl.smallest()[1:] == ("forearm_link", "fixture") and cl.smallest()[0] > -0.01  # braked, not far in
    # the volume removed and the hold released: the arm follows the wrench again, no fault
    loop.reconfigure(**build_parts(robot, loop_params(), loop=loop))
    loop.hold(False)
    q = loop.state.q.copy()
    for _ in range(20):
        cycle()
    assert loop.fault is None and not loop.state.holding
    assert np.abs(loop.state.q - q).max() > 1e-5


def _capsule_box(robot: RobotModel, q: np.ndarray, link: str, lo: np.ndarray, hi: np.ndarray) -> float:
    """Brute force: the distance of a link's capsule at q from a box (20001 points along its segment)."""
    cl = Clearance(robot, robot.geometry, [])
    cl.compute(q)
    i = [c.link for c in robot.geometry.capsules].index(link)
    p = cl.A[i] + np.linspace(0, 1, 20001)[:, None] * (cl.B[i] - cl.A[i])
    return float(np.linalg.norm(np.maximum(np.maximum(lo - p, p - hi), 0), axis=1).min()) - float(cl.cr[i])


def _forearm_box(robot: RobotModel, q: np.ndarray, h: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    cl = Clearance(robot, robot.geometry, [])
    cl.compute(q)
    i = [c.link for c in robot.geometry.capsules].index("forearm_link")
    c = (cl.A[i] + cl.B[i]) / 2
    return c - h, c + h


def test_a_move_that_drives_a_link_into_a_volume_is_refused_naming_both() -> None:
    """Joint and Cartesian moves whose tool centre point stays clear but whose forearm would pass through a
    keep-out box (brute-force capsule–box distances along the planned path say it would) are refused by the
    whole-arm path check naming the link and the volume; the moves the other way pass; self-collision is
    checked the same way."""
    from fdcontrol.control.path_check import link_path_violations, path_violations, planned_samples
    from fdcontrol.control.trajectory import Move, MoveLimits, solve_ik

    robot = RobotModel.load("ur10")
    q0 = np.asarray(HOME["ur10"], dtype=float)
    T0 = robot.pose(q0)
    lim = MoveLimits(joint_velocity=np.full(6, 1.0), joint_acceleration=np.full(6, 2.0), joint_jerk=np.full(6, 20.0))
    # a joint move: the shoulder pans 1.2 rad; the box sits on the forearm's place halfway
    q_mid, q_goal = q0.copy(), q0.copy()
    q_mid[0] += 0.6
    q_goal[0] += 1.2
    lo, hi = _forearm_box(robot, q_mid)
    keep = [{"name": "fixture", "box": {"min": lo.tolist(), "max": hi.tolist()}}]
    ws = workspace_from_config(robot, None, keep, collision_links="keep_out")
    mv = Move(robot, T0, 0.002, lim, goal_q=q_goal, start_q=q0)
    _, qs = planned_samples(mv)
    assert min(_capsule_box(robot, q, "forearm_link", lo, hi) for q in qs[::10]) < 0  # it would go through
    assert _capsule_box(robot, q0, "forearm_link", lo, hi) > 0.05  # clear at the start
    assert path_violations(mv, ws) == []  # the tool centre point passes clear: the tip check alone allows it
    bad = link_path_violations(mv, ws, q0)
    assert any(re.match(r"the path of link forearm_link passes through 'fixture' \(\d\.\d\d s into the move; "
                        r"closest -\d+\.\d mm, margin 50 mm\)", b) for b in bad), bad
    back = q0.copy()
    back[0] -= 1.2
    assert link_path_violations(Move(robot, T0, 0.002, lim, goal_q=back, start_q=q0), ws, q0) == []
    # a Cartesian move: 0.3 m sideways; the box on the forearm's place at the goal (the arm followed by IK)
    goal = T0.copy()
    goal[:3, 3] += [0.0, 0.3, 0.0]
    qg = solve_ik(robot, q0, goal)
    assert qg is not None
    lo, hi = _forearm_box(robot, qg, 0.04)
    keep = [{"name": "fixture", "box": {"min": lo.tolist(), "max": hi.tolist()}}]
    ws = workspace_from_config(robot, None, keep, collision_links="keep_out")
    mv = Move(robot, T0, 0.002, lim, goal_pose=goal)
    assert path_violations(mv, ws) == []
    bad = link_path_violations(mv, ws, q0)
    assert any(b.startswith("the path of link forearm_link passes through 'fixture'") for b in bad), bad
    away = T0.copy()
    away[:3, 3] += [0.0, -0.3, 0.0]
    assert link_path_violations(Move(robot, T0, 0.002, lim, goal_pose=away), ws, q0) == []
    # self-collision: folding the elbow shut brings the wrist onto the upper arm
    folded = q0.copy()
    folded[2] = np.sign(q0[2] or 1.0) * 3.0
    ws = workspace_from_config(robot, None, [], collision_links="keep_out", self_collision=True)
    bad = link_path_violations(Move(robot, T0, 0.002, lim, goal_q=folded, start_q=q0), ws, q0)
    assert any("link '" in b for b in bad), bad


def test_a_move_under_way_still_gets_the_damper() -> None:
    """A joint move that sweeps the forearm through a keep-out box (margin 0: no repulsive load), started
    in-process without the path check: the velocity damper holds every link off the box — at the hard margin of
    10 mm, less what the simulated arm's 10 ms velocity lag carries it past its braking reference, never past
    half of it (the fault threshold) — the loop does not fault, and the move does not reach its goal."""
    from fdcontrol.control.trajectory import Move
    from fdcontrol.drivers import SimulatedRobot

    robot = RobotModel.load("ur10")
    q0 = np.asarray(HOME["ur10"], dtype=float)
    q_mid, q_goal = q0.copy(), q0.copy()
    q_mid[0] += 0.6
    q_goal[0] += 1.2
    lo, hi = _forearm_box(robot, q_mid)
    # margin 0: no repulsive load, the damper alone holds the arm off
    keep = [{"name": "fixture", "box": {"min": lo.tolist(), "max": hi.tolist()}, "margin": 0.0}]
    loop = build_loop(driver=SimulatedRobot(robot, dt=0.002, q0=q0), robot=robot, keep_out=keep)
    loop.step(now=0.0)
    task = loop.task
    task.request(Move(robot, loop.state.tip_pose, loop.period, task.move_limits, goal_q=q_goal, start_q=q0,
                      pause_error=task.pause_error))
    dmin, k = np.inf, 1
    cl = task.workspace.clearance
    while k < 3000 and (task.move is None or task.move.status in ("moving", "paused")):
        loop.step(now=k * 0.002)
        dmin = min(dmin, cl.d.min(), _capsule_box(robot, loop.state.q, "forearm_link", lo, hi) if k % 50 == 0
                   else np.inf)
        k += 1
    q = np.asarray(loop.state.q)
    print(f"{k} cycles, move {task.move.status}, q[0] moved {q[0] - q0[0]:.3f} rad of 1.2, closest {dmin * 1e3:.1f} mm")
    assert loop.fault is None
    assert q[0] - q0[0] > 0.05  # it moved towards the box
    assert abs(q[0] - q_goal[0]) > 0.2  # and was held off it
    assert 0.005 < dmin < 0.015  # the damper held it at the hard margin (the lag: about 1 mm past it)


# ---------------------------------------------------------------------- the damper's own arithmetic, one pair
def _ball_beside_the_forearm(robot: RobotModel, q: np.ndarray, gap: float, radius: float = 0.05) -> Obstacle:
    """A sphere whose surface is ``gap`` from the UR10 forearm capsule at q: its centre on the perpendicular
    through the capsule's middle (whose nearest segment point is that middle: the distance in closed form)."""
    cl = Clearance(robot, robot.geometry, [])
    cl.compute(q)
    i = [c.link for c in robot.geometry.capsules].index("forearm_link")
    u = cl.B[i] - cl.A[i]
    e = np.cross(u, [0.0, 0.0, 1.0])
    e /= np.linalg.norm(e)
    return Obstacle("ball", SPHERE, (cl.A[i] + cl.B[i]) / 2 + (cl.cr[i] + radius + gap) * e, radius=radius)


def _b(d: np.ndarray, dmin: float, gain: float, dt: float, decel: float) -> np.ndarray:
    room = np.maximum(d - dmin, 0.0)
    return np.minimum(gain * room / dt, np.sqrt(2.0 * decel * room))


@pytest.mark.parametrize("room, dmin, dt, decel", [(1e-4, 0.01, 0.002, 5.0),  # k·room/dt binds
                                                   (0.02, 0.01, 0.002, 5.0),  # the braking curve binds
                                                   (0.004, 0.03, 0.008, 0.7)])
def test_the_damper_projects_the_one_violated_pair_onto_its_bound_in_closed_form(room, dmin, dt, decel) -> None:
    """One pair driven in faster than b = min(k·(d − d_min)/dt, √(2·a_stop·(d − d_min))): q̇ becomes its least
    change onto g q̇ = −b, q̇ + (−b − g q̇)/‖g‖² g, then scaled uniformly into the joint velocity limits; every
    other pair stays within its bound; moving away or along is left alone and reported as not acted."""
    robot = RobotModel.load("ur10")
    q = np.asarray(HOME["ur10"], dtype=float)
    # every pair exact (no broad phase: no pair computed only when the damper needs it, so every b is exact)
    cl = Clearance(robot, robot.geometry, [_ball_beside_the_forearm(robot, q, dmin + room)], broad=False)
    vmax = robot.limits.velocity.copy()
    lim = CollisionAvoidance(cl, dmin, decel, vmax)
    lim.apply(Cycle(q + 1e-3, np.zeros(6), None, dt), [0.0] * 6)  # a cycle before, at another q
    cl.compute(q)
    i = int(np.argmin(cl.d))
    assert cl.d[i] == pytest.approx(dmin + room, abs=1e-12)
    g, b = cl.rows[i].copy(), _b(cl.d, dmin, CollisionAvoidance.gain, dt, decel)
    qd = -(1.5 * b[i] + 0.005) * g / (g @ g)
    assert set(np.flatnonzero(cl.rows @ qd < -b)) == {i}  # this pair only is violated
    want = qd + (-b[i] - g @ qd) / (g @ g) * g
    for cap in (vmax, 0.5 * float(np.max(np.abs(want) / vmax)) * vmax):  # within the joint velocity limits, beyond
        lim = CollisionAvoidance(cl, dmin, decel, cap)
        s = min(1.0, 1.0 / float(np.max(np.abs(want) / cap)))
        assert (s < 1.0) == (cap is not vmax)
        out = qd.tolist()
        assert lim.apply(Cycle(q, np.zeros(6), None, dt), out)
        assert np.allclose(out, s * want, rtol=1e-9, atol=1e-15), (out, s * want)
        assert np.all(cl.rows @ np.asarray(out) >= -b * (1 + 1e-9) - 1e-15)
        assert np.all(np.abs(out) <= cap * (1 + 1e-12))
        assert np.allclose(lim.bounds(dt), b, rtol=1e-12, atol=0)  # the bounds, as the damper used them
    t = np.linalg.svd(g[None, :])[2][-1]  # along the surface: g t = 0
    for free in (0.5 * g / (g @ g), 0.1 * t / np.abs(t).max(), (b[i] * 0.99) * -g / (g @ g)):
        out = free.tolist()
        assert not lim.apply(Cycle(q, np.zeros(6), None, dt), out) and out == free.tolist()


def test_a_changed_damper_on_the_same_distances_never_reads_the_old_ones_free_speed() -> None:
    """The distances' computer keeps the joint speed below which the damper cannot act, for the damper's
    parameters. A damper with a tighter d_min, a longer step or a softer stop on the same computer, at the
    same q: a slow approach the old parameters left free is damped under the new ones, every cycle."""
    robot = RobotModel.load("ur10")
    q = np.asarray(HOME["ur10"], dtype=float)
    for tight, dt in (({"distance": 0.05}, 0.002), ({}, 10.0), ({"deceleration": 1e-4}, 0.002)):
        cl = Clearance(robot, robot.geometry, [_ball_beside_the_forearm(robot, q, 0.03)])
        old = CollisionAvoidance(cl, 0.01, 5.0, robot.limits.velocity)
        old.apply(Cycle(q + 1e-3, np.zeros(6), None, 0.002), [0.0] * 6)
        cl.compute(q)
        i = int(np.argmin(cl.d))
        g = cl.rows[i].copy()
        qd = -0.004 * g / (g @ g)  # 4 mm/s towards the ball
        assert not old.apply(Cycle(q, np.zeros(6), None, 0.002), qd.tolist())
        assert np.abs(qd).max() <= cl.damper[4]  # below the old parameters' free speed
        new = CollisionAvoidance(cl, **{"distance": 0.01, "deceleration": 5.0, **tight},
                                 velocity=robot.limits.velocity)
        for _ in range(2):
            out = qd.tolist()
            assert new.apply(Cycle(q, np.zeros(6), None, dt), out), tight
            assert g @ np.asarray(out) >= -_b(cl.d, new.distance, new.gain, dt, new.deceleration)[i] * (1 + 1e-9)


@pytest.mark.parametrize("field, bad", [("distance", 0.0), ("distance", -0.01), ("distance", float("inf")),
                                        ("distance", float("nan")), ("deceleration", 0.0),
                                        ("deceleration", float("inf")), ("deceleration", float("nan"))])
def test_a_damper_distance_or_deceleration_not_finite_and_positive_is_refused(field, bad) -> None:
    what = {"distance": r"^collision distance must be finite and > 0 \(m\)$",
            "deceleration": r"^collision deceleration must be finite and > 0 \(m/s²\)$"}[field]
    with pytest.raises(ValueError, match=what):
        CollisionAvoidance(None, **{field: bad}).validate()


def test_small_positive_damper_parameters_are_accepted_and_the_defaults_are_the_settings() -> None:
    from fdcontrol.control.workspace import PARAMS

    CollisionAvoidance(None, 0.0005, 0.2).validate()
    default = {p.name: p.default for p in PARAMS}
    lim = CollisionAvoidance()
    assert (lim.clearance, lim.velocity) == (None, None)
    assert (lim.distance, lim.deceleration) == (default["collision_distance"], default["workspace_stop_deceleration"])


def test_the_damper_from_the_settings_is_the_one_built_by_hand() -> None:
    """From the service's settings: the volumes, which links obey them, self-collision and its margin, d_min,
    the deceleration and the velocity limits; from settings that name none of the workspace's (the library's
    LimitParams), the declared defaults."""
    from fdcontrol.control.workspace import PARAMS
    from fdcontrol.limits.safety import LimitParams
    from fdcontrol.server.settings import ControlParams

    robot = RobotModel.load("ur10")
    q = np.asarray(HOME["ur10"], dtype=float)
    ball = _ball_beside_the_forearm(robot, q, 0.03)
    keep = [{"name": "ball", "sphere": {"center": ball.a.tolist(), "radius": ball.radius}, "margin": 0.02}]
    box = {"min": [-3.0, -3.0, -3.0], "max": [3.0, 3.0, 3.0]}
    chosen = {"keep_out": keep, "workspace_box": box, "collision_links": "all", "self_collision": True,
              "self_collision_margin": 0.07, "collision_distance": 0.02, "workspace_stop_deceleration": 3.0,
              "velocity_scale": 0.4}
    lim = CollisionAvoidance.from_settings(robot, ControlParams(**chosen))
    ws = workspace_from_config(robot, box, keep)
    cl = clearance_for(robot, ws.zones, "all", True, 0.07, 0.02)
    assert (lim.distance, lim.deceleration) == (0.02, 3.0)
    assert np.array_equal(lim.velocity, 0.4 * robot.limits.velocity)
    assert lim.clearance.names == cl.names and lim.clearance.hard_margin == 0.02
    assert np.array_equal(lim.clearance.margins, cl.margins)
    lim.clearance.compute(q)
    cl.compute(q)
    assert np.array_equal(lim.clearance.d, cl.d)
    # the library's parameters name none of these: the declared defaults (keep-out volumes only, no
    # self-collision: nothing to compute)
    default = {p.name: p.default for p in PARAMS}
    lim = CollisionAvoidance.from_settings(robot, LimitParams())  # type: ignore[arg-type]
    assert lim.clearance is None
    assert (lim.distance, lim.deceleration) == (default["collision_distance"], default["workspace_stop_deceleration"])
    assert np.array_equal(lim.velocity, LimitParams().velocity_scale * robot.limits.velocity)

    class Some(LimitParams):  # a keep-out volume, the rest left to the defaults
        keep_out = keep

    lim = CollisionAvoidance.from_settings(robot, Some())  # type: ignore[arg-type]
    want = clearance_for(robot, workspace_from_config(robot, None, keep).zones, default["collision_links"],
                         default["self_collision"], default["self_collision_margin"], default["collision_distance"])
    assert lim.clearance.names == want.names and lim.clearance.hard_margin == want.hard_margin
    selfish = type("Selfish", (LimitParams,), {"self_collision": True})()
    lim = CollisionAvoidance.from_settings(robot, selfish)  # type: ignore[arg-type]
    want = clearance_for(robot, [], default["collision_links"], True, default["self_collision_margin"],
                         default["collision_distance"])
    assert lim.clearance.names == want.names and np.array_equal(lim.clearance.margins, want.margins)


def test_a_damper_without_velocity_limits_only_projects_and_one_pair_alone_is_exact() -> None:
    """The forearm's capsule alone against a ball (one pair): without velocity limits the damper's q̇ is the
    projection onto g q̇ = −b, whatever its size, cycle after cycle at new q; a fast approach is not stopped
    dead, only slowed to b."""
    from fdcontrol.model.collision import LinkGeometry

    robot = RobotModel.load("ur10")
    q = np.asarray(HOME["ur10"], dtype=float)
    forearm = [c for c in robot.geometry.capsules if c.link == "forearm_link"]
    cl = Clearance(robot, LinkGeometry(forearm, []), [_ball_beside_the_forearm(robot, q, 0.012)])
    lim = CollisionAvoidance(cl, 0.01, 5.0)  # no velocity limits
    assert lim.velocity is None
    for k in range(3):
        qk = q + k * 1e-4
        cl.compute(qk)
        assert cl.d.shape == (1,)
        g, b = cl.rows[0].copy(), _b(cl.d, 0.01, CollisionAvoidance.gain, 0.002, 5.0)[0]
        qd = -(5.0 + b) * g / (g @ g)  # 5 m/s beyond the bound, several rad/s at the joints
        out = qd.tolist()
        assert lim.apply(Cycle(qk, np.zeros(6), None, 0.002), out)
        want = qd + (-b - g @ qd) / (g @ g) * g
        assert np.allclose(out, want, rtol=1e-9, atol=1e-15) and g @ np.asarray(out) == pytest.approx(-b, rel=1e-9)


# ---------------------------------------------------------------------------- the damper's promise, checked apart
_GOLD = (np.sqrt(5.0) - 1.0) / 2.0


def _golden_min(f, k: int) -> np.ndarray:
    """min over t ∈ [0, 1] of k convex functions f(t) (vectorized golden section, to ~1e-13)."""
    a, b = np.zeros(k), np.ones(k)
    c, d = b - _GOLD * (b - a), a + _GOLD * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(64):
        m = fc < fd
        b, a = np.where(m, d, b), np.where(m, a, c)
        nc, nd = b - _GOLD * (b - a), a + _GOLD * (b - a)
        c, d, fc, fd = np.where(m, nc, d), np.where(m, c, nd), np.where(m, f(nc), fd), np.where(m, fc, f(nd))
    return np.minimum.reduce([f(np.zeros(k)), f(np.ones(k)), fc, fd])


class _Apart:
    """The smallest distance of the arm's capsules to boxes, spheres and each other, computed apart from the code
    under test: pinocchio's forward kinematics, the distance along each segment minimized numerically (it is
    convex in the segment's parameter: the distance of a point moving on a line to a convex set)."""

    def __init__(self, robot: RobotModel, boxes=(), spheres=(), self_pairs: bool = True) -> None:
        self.model, self.data, self.bMo = robot.model, robot.model.createData(), robot._oMb.inverse()
        self.caps = robot.geometry.capsules
        self.r = np.array([c.radius for c in self.caps])
        moving = [i for i, c in enumerate(self.caps) if c.joint != 0]
        self.boxes = [(i, np.asarray(lo), np.asarray(hi)) for i in moving for lo, hi in boxes]
        self.spheres = [(i, np.asarray(c), float(r)) for i in moving for c, r in spheres]
        self.pairs = list(robot.geometry.self_pairs) if self_pairs else []

    def __call__(self, q: np.ndarray, above: float = np.inf) -> float:
        """The smallest distance at q; pairs whose bounding spheres are ``above`` apart or more are left out
        (inf if all are)."""
        pin.forwardKinematics(self.model, self.data, q)
        X = [self.bMo * self.data.oMi[c.joint] for c in self.caps]
        A = np.array([x.act(c.a) for x, c in zip(X, self.caps, strict=True)])
        B = np.array([x.act(c.b) for x, c in zip(X, self.caps, strict=True)])
        M, H = (A + B) / 2, np.linalg.norm(B - A, axis=1) / 2 + self.r  # the capsules' bounding spheres
        out = np.inf
        if self.boxes:
            i = np.array([k for k, _, _ in self.boxes])
            lo, hi = np.array([x for _, x, _ in self.boxes]), np.array([x for _, _, x in self.boxes])
            keep = np.linalg.norm(M[i] - np.clip(M[i], lo, hi), axis=1) - H[i] < above
            i, lo, hi = i[keep], lo[keep], hi[keep]
            a, u = A[i], B[i] - A[i]

            def to_box(t: np.ndarray) -> np.ndarray:
                p = a + t[:, None] * u
                return np.linalg.norm(p - np.clip(p, lo, hi), axis=1)
            if len(i):
                out = min(out, float((_golden_min(to_box, len(i)) - self.r[i]).min()))
        for i, c, r in self.spheres:
            u = B[i] - A[i]
            t = min(max(float((c - A[i]) @ u / (u @ u)), 0.0), 1.0) if u @ u > 0 else 0.0
            out = min(out, float(np.linalg.norm(c - A[i] - t * u)) - self.r[i] - r)
        if self.pairs:
            i, j = np.array([p for p, _ in self.pairs]), np.array([p for _, p in self.pairs])
            keep = np.linalg.norm(M[i] - M[j], axis=1) - H[i] - H[j] < above
            i, j = i[keep], j[keep]
            a, u, a2, u2 = A[i], B[i] - A[i], A[j], B[j] - A[j]
            uu = np.maximum(np.einsum("ij,ij->i", u2, u2), 1e-300)

            def to_segment(t: np.ndarray) -> np.ndarray:
                p = a + t[:, None] * u
                s = np.clip(np.einsum("ij,ij->i", p - a2, u2) / uu, 0.0, 1.0)
                return np.linalg.norm(p - a2 - s[:, None] * u2, axis=1)
            if len(i):
                out = min(out, float((_golden_min(to_segment, len(i)) - self.r[i] - self.r[j]).min()))
        return out


def test_the_apart_distance_is_the_clearances() -> None:
    """The check's own distances agree with Clearance's closed forms (every pair exact) at random poses."""
    rng = np.random.default_rng(5)
    for arm in ("ur10", "panda"):
        robot = RobotModel.load(arm)
        for _ in range(20):
            q = np.asarray(HOME[arm]) + rng.uniform(-1.0, 1.0, robot.dof)
            lo, c = rng.uniform(-0.8, 0.8, 3), rng.uniform(-0.8, 0.8, 3)
            hi, r = lo + rng.uniform(0.02, 0.3, 3), float(rng.uniform(0.02, 0.2))
            cl = Clearance(robot, robot.geometry, [Obstacle("b", BOX, lo, hi), Obstacle("s", SPHERE, c, radius=r)],
                           self_collision=True, broad=False)
            cl.compute(q)
            if cl.d.min() > 0:
                assert _Apart(robot, [(lo, hi)], [(c, r)])(q) == pytest.approx(cl.d.min(), abs=1e-9)


def _approach(robot: RobotModel, obstacles: list[Obstacle], apart: _Apart, q: np.ndarray, drive, steps: int,
              dt: float = 0.002) -> float:
    """q under a perfect velocity servo following the damper's reference (self-collision on); drive(cl, k) the
    joint velocity asked for at step k; the smallest distance of the references, computed apart."""
    cl = Clearance(robot, robot.geometry, obstacles, self_collision=True, self_margin=0.04)
    lim = CollisionAvoidance(cl, 0.01, 5.0, robot.limits.velocity)
    low = np.inf
    for k in range(steps):
        cl.compute(q)
        out = np.asarray(drive(cl, k), dtype=float).tolist()
        lim.apply(Cycle(q, np.zeros(robot.dof), None, dt), out)
        q = q + dt * np.asarray(out)
        low = min(low, apart(q, 0.015))
    return low


@pytest.mark.parametrize("arm", ["ur10", "panda"])
def test_the_damper_keeps_every_reference_off_d_min_in_random_approaches(arm: str) -> None:
    """Random approaches — a box, a sphere or only the arm's own links, placed 1.5–12 cm from a random link in a
    random direction; the nearest pair driven in at up to 3 m/s, or a random joint velocity up to the velocity
    limits, or first one then the other — never bring a reference nearer than d_min − 0.1 mm, by distances
    computed apart from the code under test."""
    robot = RobotModel.load(arm)
    rng = np.random.default_rng(11)
    vmax, movers = robot.limits.velocity, [k for k, c in enumerate(robot.geometry.capsules) if c.joint != 0]
    lows, trials = [], 0
    while trials < 40:
        q0 = np.asarray(HOME[arm]) + rng.uniform(-0.3, 0.3, robot.dof)
        cl0 = Clearance(robot, robot.geometry, [])
        cl0.compute(q0)
        c = int(rng.choice(movers))
        e = rng.normal(size=3)
        e /= np.linalg.norm(e)
        p = cl0.A[c] + rng.uniform(0.0, 1.0) * (cl0.B[c] - cl0.A[c])
        gap, kind = rng.uniform(0.015, 0.12), int(rng.integers(3))
        obstacles, boxes, spheres = [], [], []
        if kind == 0:
            h = rng.uniform(0.02, 0.15, 3)
            ctr = p + (cl0.cr[c] + gap + float(h @ np.abs(e))) * e
            obstacles, boxes = [Obstacle("box", BOX, ctr - h, ctr + h)], [(ctr - h, ctr + h)]
        elif kind == 1:
            r = float(rng.uniform(0.02, 0.15))
            ctr = p + (cl0.cr[c] + gap + r) * e
            obstacles, spheres = [Obstacle("ball", SPHERE, ctr, radius=r)], [(ctr, r)]
        apart = _Apart(robot, boxes, spheres)
        if apart(q0) < 0.012:
            continue
        trials += 1
        mode, speed = int(rng.integers(3)), float(rng.uniform(0.05, 3.0))
        u = rng.uniform(-1.0, 1.0, robot.dof) * vmax * rng.uniform(0.1, 1.0)

        def drive(cl: Clearance, k: int, mode: int = mode, speed: float = speed, u: np.ndarray = u,
                  kind: int = kind) -> np.ndarray:
            if kind == 2 or mode == 1 or (mode == 2 and k >= 75):
                return u
            g = cl.rows[int(np.argmin(cl.d[:cl.n_volume_pairs]))]
            qd = -speed * g / max(float(g @ g), 1e-12)
            return qd * min(1.0, float(np.min(vmax / np.maximum(np.abs(qd), 1e-12))))
        lows.append(_approach(robot, obstacles, apart, q0, drive, 150))
    assert min(lows) >= 0.01 - 1e-4, sorted(lows)[:5]
    assert sum(low < 0.0105 for low in lows) >= 5  # (many did come to d_min)


@pytest.mark.parametrize("arm", ["ur10", "panda"])
def test_the_damper_keeps_a_link_rotating_against_a_parallel_face_off_d_min(arm: str) -> None:
    """A link held parallel to a box's face 0.02 mm above d_min, each joint turned at its velocity limit either
    way: the distance's witness point on a parallel link is one end while the other end may approach — the
    inequality at the witness alone let the UR10's forearm in by 1.3 mm in one step. By distances computed apart."""
    robot = RobotModel.load(arm)
    ci = 3 if arm == "ur10" else 4  # the forearm / panda_link4
    jv = robot.geometry.capsules[ci].joint - 2  # the joint before the link's own: levels it
    q = np.asarray(HOME[arm], dtype=float).copy()
    cl0 = Clearance(robot, robot.geometry, [])
    for _ in range(30):  # Newton on the link's tilt
        cl0.compute(q)
        tilt = (cl0.B[ci] - cl0.A[ci])[2]
        q2 = q.copy()
        q2[jv] += 1e-6
        cl0.compute(q2)
        q[jv] -= tilt / (((cl0.B[ci] - cl0.A[ci])[2] - tilt) / 1e-6)
    cl0.compute(q)
    A, B = cl0.A[ci], cl0.B[ci]
    for side in (1.0, -1.0):
        lo, hi = np.minimum(A, B) - 0.01, np.maximum(A, B) + 0.01
        z = A[2] + side * 0.05
        for _ in range(30):  # the face placed where the nearest link is 0.02 mm above d_min, by the apart distance
            lo[2], hi[2] = (z, z + 0.2) if side > 0 else (z - 0.2, z)
            dz = 0.01002 - _Apart(robot, [(lo, hi)], self_pairs=False)(q)
            z += side * dz
        apart = _Apart(robot, [(lo.copy(), hi.copy())])
        for j in range(robot.dof):
            for sign in (1.0, -1.0):
                v = np.zeros(robot.dof)
                v[j] = sign * robot.limits.velocity[j]
                low = _approach(robot, [Obstacle("slab", BOX, lo.copy(), hi.copy())], apart, q,
                                lambda cl, k, v=v: v, 60)
                assert low >= 0.01 - 1e-4, (side, j, sign, low)


def test_levers_bound_how_fast_each_pairs_distance_changes_under_each_joint() -> None:
    """The re-check's gate (reach, the largest row sum of levers): no pair's distance changes faster under one joint
    turning than its lever for that joint (finite differences over random poses, every pair exact, self pairs
    included), and for some pair and joint the bound is nearly met (a link's far end turning about a joint)."""
    from fdcontrol.limits.collision import levers, reach
    rng = np.random.default_rng(2)
    for arm in ("ur10", "panda"):
        robot = RobotModel.load(arm)
        obstacles = [Obstacle("b", BOX, np.array([0.3, -0.2, 0.1]), np.array([0.5, 0.2, 0.4])),
                     Obstacle("s", SPHERE, np.array([-0.3, 0.3, 0.5]), radius=0.1)]
        cl = Clearance(robot, robot.geometry, obstacles, self_collision=True, broad=False)
        L = levers(cl)
        assert reach(cl) == pytest.approx(L.sum(axis=1).max()) and np.isfinite(L).all()
        tight = 0.0
        for _ in range(60):
            q = np.asarray(HOME[arm]) + rng.uniform(-2.0, 2.0, robot.dof)
            cl.compute(q)
            d0 = cl.d.copy()
            for k in range(robot.dof):
                dq = np.zeros(robot.dof)
                dq[k] = 1e-7
                cl.compute(q + dq)
                rate = np.abs(cl.d - d0) / 1e-7
                assert np.all(rate <= L[:, k] * (1 + 1e-6) + 1e-6), (arm, k)
                tight = max(tight, float(np.max(rate / np.where(L[:, k] > 0, L[:, k], np.inf))))
        assert tight > 0.8


def test_the_recheck_follows_a_clearance_handed_to_the_limit() -> None:
    """The loop hands the limit the workspace's clearance: the step's re-check computes with a copy of the one the
    limit holds when it runs, not of the one it was built with, and its gate bounds the step with that clearance's
    pairs (here more of them: self-collision, a larger bound of their rate)."""
    from fdcontrol.limits.collision import reach

    robot = RobotModel.load("ur10")
    box = Obstacle("b", BOX, np.array([0.3, -0.2, 0.1]), np.array([0.5, 0.2, 0.4]))
    lim = CollisionAvoidance(Clearance(robot, robot.geometry, [box]), 0.01, 5.0, robot.limits.velocity)
    built = lim._reach
    lim.clearance = cl = Clearance(robot, robot.geometry, [box], self_collision=True)
    assert reach(cl) > built  # (the handed clearance's bound differs: the gate must take it)
    q = np.asarray(HOME["ur10"])
    lim.apply(Cycle(q, np.zeros(6), None, 0.002), [0.1] * 6)
    assert lim._probe_of is cl and lim._probe is not None and lim._probe._F is cl._F
    assert lim._reach == reach(cl)
