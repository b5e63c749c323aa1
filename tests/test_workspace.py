"""Workspace volumes: distances against closed forms and finite differences; on the MuJoCo arm, a
20 N push into a wall of the box and into a keep-out sphere. Ground truth for the arm is MuJoCo's
own position of the tip body (kinematics the code under test did not write)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fdcontrol.control.link_loads import Plane, Sphere
from fdcontrol.control.task import TaskSpace
from fdcontrol.control.workspace import KeepOutBox, WorkspaceBox, workspace_from_config
from fdcontrol.experiments import physics as P
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.limits.workspace import WorkspaceStop
from fdcontrol.model.robot import RobotModel

RNG = np.random.default_rng(7)


def fd_gradient(vol, p: np.ndarray, h: float = 1e-6) -> np.ndarray:
    return np.array([(vol.distance(p + h * e)[0] - vol.distance(p - h * e)[0]) / (2 * h) for e in np.eye(3)])


@pytest.mark.parametrize("vol", [KeepOutBox([-0.1, -0.2, 0.0], [0.3, 0.1, 0.2]),
                                 WorkspaceBox([-0.5, -0.4, 0.1], [0.6, 0.5, 0.9]),
                                 Sphere(np.array([0.1, 0.2, 0.3]), 0.15)])
def test_normal_is_the_gradient_of_the_distance(vol):
    for _ in range(200):
        p = RNG.uniform(-0.8, 1.0, 3)
        _, n = vol.distance(p)
        g = fd_gradient(vol, p)
        if abs(np.linalg.norm(g) - 1) > 1e-3:  # on a ridge (equidistant faces): no unique gradient
            continue
        assert np.allclose(n, g, atol=1e-4), (p, n, g)
        assert np.isclose(np.linalg.norm(n), 1.0)


def test_keep_out_box_distance_closed_form():
    b = KeepOutBox([0, 0, 0], [1, 1, 1])
    assert b.distance(np.array([2.0, 0.5, 0.5]))[0] == pytest.approx(1.0)
    assert b.distance(np.array([2.0, 2.0, 0.5]))[0] == pytest.approx(np.sqrt(2))
    assert b.distance(np.array([0.5, 0.5, 0.9]))[0] == pytest.approx(-0.1)
    w = WorkspaceBox([0, 0, 0], [1, 2, 3])
    assert w.distance(np.array([0.5, 1.9, 1.0]))[0] == pytest.approx(0.1)
    assert w.distance(np.array([0.5, 2.1, 1.0]))[0] == pytest.approx(-0.1)


@pytest.mark.parametrize("bad, reason", [
    ({"box": {"min": [1, 0, 0], "max": [0, 1, 1]}}, "min must be"),
    ({"sphere": {"center": [0, 0, 0], "radius": -0.1}}, "radius"),
    ({"sphere": {"center": [0, 0, 0], "radius": 0.1}, "plane": {"point": [0, 0, 0], "normal": [0, 0, 1]}},
     "exactly one"),
    ({"plane": {"point": [0, 0, 0], "normal": [0, 0, 0]}}, "non-zero"),
])
def test_bad_volumes_are_refused_with_the_reason(bad, reason):
    robot = RobotModel.load("ur10")
    with pytest.raises(ValueError, match=reason):
        workspace_from_config(robot, None, [bad])
    with pytest.raises(ValueError, match="min must be < max"):
        workspace_from_config(robot, {"min": [0, 0, 0], "max": [1, -1, 1]}, [])


def test_load_acts_along_the_normal_only_inside_the_margin():
    robot = RobotModel.load("ur10")
    ws = workspace_from_config(robot, None, [{"name": "floor", "plane": {"point": [0, 0, 0], "normal": [0, 0, 1]},
                                              "margin": 0.05, "stiffness": 1000, "damping": 10}])
    assert not ws.tip_wrench(np.array([0.3, 0.1, 0.06]), np.array([0, 0, -1.0])).any()
    f = ws.tip_wrench(np.array([0.3, 0.1, 0.02]), np.array([0.5, 0.2, -0.1]))
    # k (m − d) − b min(n·v, 0) = 1000·0.03 + 10·0.1, along +z only: the tangential velocity is free
    assert np.allclose(f, [0, 0, 31.0, 0, 0, 0])
    assert ws.distance == pytest.approx(0.02)


# ---------------------------------------------------------------------- on the MuJoCo arm
def mujoco_tip(drv) -> np.ndarray:
    """The tip body's position from MuJoCo, in the base frame."""
    Rb, pb = drv._base_pose()
    return Rb.T @ (drv.data.xpos[drv._tip_id] - pb)


def push_run(box, keep_out, push, seconds=3.0, with_stop=True):
    robot = RobotModel.load("ur10")
    r = P.rig(robot, law=P.force_law())  # hand guiding: the push moves the arm
    ws = workspace_from_config(robot, box, keep_out)
    r.loop.task = TaskSpace(ws)
    if with_stop:
        r.loop.limits = SafetyLimits.compose([*SafetyLimits.from_robot(robot).limits,
                                              WorkspaceStop(robot, [p for z in ws.zones for p in z.parts()])])
    r.drv.set_push(np.asarray(push, dtype=float))
    tips = []
    for i in range(round(seconds / P.DT)):
        r.loop.step(now=i * P.DT)
        tips.append(mujoco_tip(r.drv))
    return np.array(tips), r.loop


def start_tip() -> np.ndarray:
    r = P.rig(RobotModel.load("ur10"))
    return mujoco_tip(r.drv)


def test_pushed_into_a_wall_of_the_box_the_tip_stays_inside_and_slides_along_it():
    p0 = start_tip()
    wall = p0[0] + 0.08
    box = {"min": (p0 - 1.0).tolist(), "max": [wall, p0[1] + 1.5, p0[2] + 1.0]}
    tips, loop = push_run(box, [], [20.0, 10.0, 0, 0, 0, 0])  # 20 N into the wall, 10 N along it
    beyond = float(np.max(tips[:, 0] - wall))
    y = tips[:, 1] - p0[1]
    n = len(tips)
    print(f"max beyond the wall {beyond * 1e3:.2f} mm; travel along it at 1/2/3 s: "
          f"{y[n // 3 - 1]:.3f} {y[2 * n // 3 - 1]:.3f} {y[-1]:.3f} m")
    assert loop.fault is None
    assert np.max(tips[:, 0]) > wall - 0.05  # it did reach the margin
    assert beyond < 0.002
    assert y[n // 3 - 1] > 0.05 and y[-1] - y[n // 3 - 1] > 0.05  # still sliding in the last 2 s
    # and without the workspace the same push goes far beyond the wall (the test can fail)
    free, _ = push_run(None, [], [20.0, 10.0, 0, 0, 0, 0], seconds=1.0, with_stop=False)
    assert np.max(free[:, 0]) > wall + 0.05


def test_a_keep_out_sphere_in_the_path_is_never_entered():
    p0 = start_tip()
    c, radius = p0 + [0.15, 0.0, 0.0], 0.05
    keep = [{"name": "ball", "sphere": {"center": c.tolist(), "radius": radius}}]
    tips, loop = push_run(None, keep, [20.0, 0, 0, 0, 0, 0])
    clearance = float(np.min(np.linalg.norm(tips - c, axis=1) - radius))
    print(f"closest approach to the sphere surface {clearance * 1e3:.2f} mm")
    assert loop.fault is None
    assert clearance > 0


def test_the_hard_stop_alone_holds_the_boundary():
    """Without repulsive loads (stiffness 0) the limit alone stops the tip at the wall."""
    p0 = start_tip()
    wall = p0[0] + 0.08
    box = {"min": (p0 - 1.0).tolist(), "max": [wall, p0[1] + 1.5, p0[2] + 1.0], "stiffness": 0, "damping": 0}
    tips, loop = push_run(box, [], [20.0, 0, 0, 0, 0, 0], seconds=1.5)
    beyond = float(np.max(tips[:, 0] - wall))
    print(f"hard stop only: max beyond the wall {beyond * 1e3:.2f} mm")
    assert loop.fault is None
    assert np.max(tips[:, 0]) > wall - 0.01
    assert beyond < 0.002


def test_the_vectorised_pieces_agree_with_each_piece():
    from fdcontrol.control.workspace import Parts

    parts = [Plane(np.array([0, 0, 0.1]), np.array([0.2, 0, 1.0])), Sphere(np.array([0.3, 0, 0.2]), 0.1),
             KeepOutBox([-0.2, -0.1, 0.0], [0.0, 0.3, 0.4]), Sphere(np.array([0.0, 0.0, 0.0]), 0.0),
             *WorkspaceBox([-1, -1, -1], [1, 1, 1]).faces, KeepOutBox([0.0, 0.0, 0.0], [1.0, 1.0, 2.0])]
    ps = Parts(parts)
    # (the last two: inside the last box, nearest two faces at once; the first of them is the nearest)
    for p in [*RNG.uniform(-1.2, 1.2, (300, 3)), np.zeros(3), np.array([-0.1, 0.1, 0.2]),
              np.array([0.25, 0.25, 1.0]), np.array([0.75, 0.75, 1.0])]:
        d, n = ps.distances(p)
        for i, part in enumerate(parts):
            di, ni = part.distance(p)
            assert d[i] == pytest.approx(di, abs=1e-12) and np.allclose(n[i], ni), (p, part)


# ---------------------------------------------------------------------- link origins
LINK = "forearm_link"  # the UR10's elbow


def mujoco_body(drv, name: str) -> np.ndarray:
    """A body's origin from MuJoCo, in the base frame."""
    Rb, pb = drv._base_pose()
    return Rb.T @ (drv.data.xpos[drv.model.body(name).id] - pb)


def elbow_push(links_in_stop: list[str], seconds: float = 2.0) -> tuple[np.ndarray, float, np.ndarray, object]:
    """The tip pushed with 20 N along +y swings the elbow out along +x (about 9 cm in 1 s) while
    the tip's x stays put. A box wall 3 cm beyond the elbow in x, the elbow listed among the
    workspace's links, its repulsive load off (stiffness 0): only the hard stop can hold it.
    Returns the elbow positions (MuJoCo), the wall, the tips, the loop."""
    robot = RobotModel.load("ur10")
    r = P.rig(robot, law=P.force_law())
    e0, t0 = mujoco_body(r.drv, LINK), mujoco_tip(r.drv)
    wall = e0[0] + 0.03
    assert t0[0] < wall - 0.2  # the tip is far from this wall: the elbow meets it first
    box = {"min": (np.minimum(e0, t0) - 1.0).tolist(), "max": [wall, e0[1] + 1.5, e0[2] + 1.0],
           "stiffness": 0, "damping": 0}
    ws = workspace_from_config(robot, box, [], [LINK])
    r.loop.task = TaskSpace(ws)
    r.loop.limits = SafetyLimits.compose([*SafetyLimits.from_robot(robot).limits,
                                          WorkspaceStop(robot, [p for z in ws.zones for p in z.parts()],
                                                        links=links_in_stop)])
    r.drv.set_push(np.array([0, 20.0, 0, 0, 0, 0]))
    elbows, tips = [], []
    for i in range(round(seconds / P.DT)):
        r.loop.step(now=i * P.DT)
        elbows.append(mujoco_body(r.drv, LINK))
        tips.append(mujoco_tip(r.drv))
    return np.array(elbows), wall, np.array(tips), r.loop


def test_the_hard_stop_holds_a_chosen_link_origin_at_the_wall():
    elbows, wall, tips, loop = elbow_push([LINK])
    beyond = float(np.max(elbows[:, 0] - wall))
    print(f"elbow: max beyond the wall {beyond * 1e3:.2f} mm (tip {np.max(tips[:, 0]) - wall:.3f} m from it)")
    assert loop.fault is None
    assert np.max(elbows[:, 0]) > wall - 0.01  # it did reach the wall
    assert beyond < 0.002
    # without the link in the hard stop the same push takes the elbow through the wall
    free, _, _, _ = elbow_push([], seconds=1.0)
    assert np.max(free[:, 0]) > wall + 0.02


def test_the_workspace_stop_from_the_settings_holds_the_links():
    from fdcontrol.server.settings import ControlParams

    robot = RobotModel.load("ur10")
    p = ControlParams(workspace_box={"min": [-2, -2, -2], "max": [2, 2, 2]}, workspace_links=[LINK])
    stop = WorkspaceStop.from_settings(robot, p)
    assert stop.links == [LINK]
    with pytest.raises(ValueError, match="unknown link frame"):
        WorkspaceStop(robot, [], links=["nope"])
    # the link's Jacobian against finite differences of its origin
    q = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
    (_, J), = stop.link_points(q.tolist())
    h = 1e-6
    fd = np.column_stack([(stop.link_points((q + h * e).tolist())[0][0] - stop.link_points((q - h * e).tolist())[0][0])
                          / (2 * h) for e in np.eye(6)])
    assert np.allclose(J, fd, atol=1e-6) and np.abs(J).max() > 0.1
    # and the origin where MuJoCo puts the link's body (kinematics the limit did not write)
    from fdcontrol.drivers.mujoco import MujocoRobot

    assert np.allclose(stop.link_points(q.tolist())[0][0], mujoco_body(MujocoRobot(robot, dt=P.DT, q0=q), LINK),
                       atol=1e-9)


# ---------------------------------------------------------------------- a simulated arm's start box
def _reached(robot: RobotModel, q0: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    """An independent inverse kinematics (SciPy's bounded least squares on the forward kinematics):
    the position error left and the position Jacobian's smallest singular value where it ends."""
    from scipy.optimize import least_squares

    lim = robot.limits
    lo, hi = np.maximum(lim.lower, -10.0), np.minimum(lim.upper, 10.0)
    sol = least_squares(lambda q: robot.pose(q)[:3, 3] - p, np.clip(q0, lo, hi), bounds=(lo, hi), xtol=1e-12,
                        ftol=1e-12, gtol=1e-12)
    return float(np.linalg.norm(sol.fun)), float(np.linalg.svd(robot.jacobian(sol.x)[:3], compute_uv=False).min())


@pytest.mark.parametrize("name", ["ur10", "panda", "fr3"])
def test_the_start_box_keeps_the_tool_in_reach_around_the_start_pose(name):
    from fdcontrol.control.workspace import start_box
    from fdcontrol.model.robot import HOME

    robot, q0 = RobotModel.load(name), np.array(HOME[name])
    box = start_box(robot, q0)
    assert box is not None
    lo, hi, tip = np.array(box["min"]), np.array(box["max"]), robot.pose(q0)[:3, 3]
    # the start tip lies inside, outside the margin: the box does not move the arm by itself
    assert np.all(tip - lo > box["margin"]) and np.all(hi - tip > box["margin"])
    ws = workspace_from_config(robot, box, [])
    assert ws.violations(ws.points(q0)) == []
    # room to work: at least 15 cm across on every axis beyond the margins
    assert np.all(hi - lo - 2 * box["margin"] >= 0.15), hi - lo
    sigma0 = float(np.linalg.svd(robot.jacobian(q0)[:3], compute_uv=False).min())
    for corner in np.stack(np.meshgrid(*zip(lo, hi, strict=True), indexing="ij"), -1).reshape(-1, 3):
        err, sigma = _reached(robot, q0, corner)
        assert err < 1e-4, (corner, err)  # every corner is reachable …
        assert sigma > 0.3 * sigma0, (corner, sigma, sigma0)  # … without stretching the arm


def test_no_start_box_where_the_tip_cannot_move_in_3d_or_starts_stretched():
    from fdcontrol.control.workspace import start_box
    from fdcontrol.model.robot import HOME

    assert start_box(RobotModel.load("planar2"), np.array(HOME["planar2"])) is None  # a planar arm
    assert start_box(RobotModel.load("ur10"), np.zeros(6)) is None  # q = 0: the UR10 stretched out


# ---------------------------------------------------------------------- the hard stop in closed form
# One cycle of the limit alone, with a Jacobian chosen by the test (J[:3] = [I 0]: the tip's velocity is
# q̇[:3]) and planes placed at a known distance from the tip where MuJoCo puts it (kinematics the limit
# did not write): every scale is the closed form min(1, a_max / a), a_max = min(√(2·a_stop·r), r/dt).
@pytest.fixture(scope="module")
def ur10_at_rest():
    from fdcontrol.drivers.mujoco import MujocoRobot
    from fdcontrol.model.robot import HOME

    robot = RobotModel.load("ur10")
    q = np.array(HOME["ur10"], dtype=float) + [0.1, -0.05, 0.08, 0.02, -0.1, 0.3]  # not a special pose
    return robot, q, mujoco_tip(MujocoRobot(robot, dt=P.DT, q0=q))


def one_cycle(stop: WorkspaceStop, q: np.ndarray, qd: list[float], dt: float = 0.002,
              J: np.ndarray | None = None) -> tuple[bool, list[float]]:
    """One cycle of the stop on the limits' list (apply) and on an array (scale_velocity, the compiled limits'
    path): the same verdict and the same q̇ from both."""
    from fdcontrol.limits.base import Cycle

    if J is None:
        J = np.zeros((6, 6))
        J[:3, :3] = np.eye(3)
    out = list(qd)
    acted = stop.apply(Cycle(q, np.zeros(6), J, dt), out)
    arr = np.array(qd, dtype=float)  # the same stop on the arrays of the compiled limits (scale_velocity)
    assert stop.scale_velocity(q, J, arr, dt) is acted
    assert arr.tolist() == out  # the same factor, the same float operations: the same bits
    return acted, out


def braking_bound(r: float, deceleration: float, dt: float) -> float:
    r = max(r, 0.0)
    return min(np.sqrt(2.0 * deceleration * r), r / dt)


@pytest.mark.parametrize("deceleration, dt", [(5.0, 0.002), (0.5, 0.008), (20.0, 0.001)])
def test_the_hard_stop_scales_the_approach_onto_the_braking_curve_in_closed_form(ur10_at_rest, deceleration, dt):
    """A plane r in front of the tip (normal −x: the tip approaches at q̇_x): an approach faster than
    a_max is scaled onto a_max exactly, the direction of q̇ kept; one at or below it is left alone."""
    robot, q, tip = ur10_at_rest
    qd_dir = np.array([1.0, 0.4, -0.7, 0.3, -0.2, 0.5])  # approach speed = q̇_x
    for r in (1e-5, 3e-5, 1e-4, 1e-3, 0.02, 0.3):  # r/dt binds below 2·a_stop·dt², the braking curve above
        stop = WorkspaceStop(robot, [Plane(tip + [r, 0, 0], np.array([-1.0, 0, 0]))], deceleration)
        amax = braking_bound(r, deceleration, dt)
        for speed in (0.5 * amax, amax * (1 - 1e-6), 1.5 * amax, 10 * amax, 1e3 * amax):
            acted, out = one_cycle(stop, q, (speed * qd_dir).tolist(), dt)
            s = min(1.0, amax / speed)
            assert acted == (s < 1.0), (r, speed)
            assert np.allclose(out, s * speed * qd_dir, rtol=1e-9, atol=0), (r, speed, out)  # (the tip's rounding)
            assert out[0] <= amax * (1 + 1e-9)  # never faster than the braking curve allows


def test_the_hard_stop_brakes_on_the_nearest_bound_of_several_and_stops_at_or_beyond_the_boundary(ur10_at_rest):
    robot, q, tip = ur10_at_rest
    walls = [Plane(tip + [0.01, 0, 0], np.array([-1.0, 0, 0])),  # 1 cm ahead in x
             Plane(tip + [0, 0.001, 0], np.array([0, -1.0, 0])),  # 1 mm ahead in y
             Sphere(tip - [0, 0, 0.5], 0.3)]  # 20 cm below
    stop = WorkspaceStop(robot, walls, 5.0)
    qd = [1.0, 1.0, -1.0, 0.2, 0.0, 0.1]
    acted, out = one_cycle(stop, q, qd)
    s = min(braking_bound(0.01, 5.0, 0.002) / 1.0, braking_bound(0.001, 5.0, 0.002) / 1.0,
            braking_bound(0.2, 5.0, 0.002) / 1.0)
    assert acted and np.allclose(out, np.multiply(qd, s), rtol=1e-9, atol=0)
    # on the boundary or beyond it, no approach at all: every joint stops; away and along are free
    for d in (0.0, -0.003):
        stop = WorkspaceStop(robot, [Plane(tip + [d, 0, 0], np.array([-1.0, 0, 0]))], 5.0)
        acted, out = one_cycle(stop, q, [1e-6, 0.3, 0.0, 0.2, 0.1, 0.0])
        assert acted and out == [0.0] * 6
        for free in ([-0.2, 0.3, 0.1, 0.2, 0.1, 0.0], [0.0, 0.3, -0.1, 0.2, 0.1, 0.0]):
            acted, out = one_cycle(stop, q, free)
            assert not acted and out == free


@pytest.mark.parametrize("form", ["compiled", "numpy"])
def test_a_bound_resting_on_the_tip_does_not_switch_off_the_other_bounds(ur10_at_rest, form, monkeypatch):
    """The tip on one face (or beyond it) and still along its normal, the next face rushing at it: the
    next face's bound acts, as it does with the first face away — by the compiled scale and by its numpy form
    (without numba), where that face's approach speed and room are both zero."""
    if form == "numpy":
        from fdcontrol.limits import workspace as stop_mod

        monkeypatch.setattr(stop_mod, "_scale", None)
    robot, q, tip = ur10_at_rest
    ahead = Plane(tip + [0, 0.002, 0], np.array([0, -1.0, 0]))
    qd = [0.0, 0.5, 0.1, 0.0, 0.0, 0.0]
    s = braking_bound(0.002, 5.0, 0.002) / 0.5
    for d in (0.0, -0.001):
        stop = WorkspaceStop(robot, [Plane(tip + [d, 0, 0], np.array([-1.0, 0, 0])), ahead], 5.0)
        acted, out = one_cycle(stop, q, qd)
        assert acted and np.allclose(out, np.multiply(qd, s), rtol=1e-9, atol=0), (d, out)


def test_the_hard_stop_reads_the_tip_velocity_through_the_cycles_jacobian(ur10_at_rest):
    """With the arm's own Jacobian, the approach speed is (J q̇)_x: the scale matches the closed form on
    it, and the tip after one step of the scaled q̇ (MuJoCo's kinematics) is no nearer than the bound."""
    from fdcontrol.drivers.mujoco import MujocoRobot

    robot, q, tip = ur10_at_rest
    J = robot.jacobian(q)
    r, dt = 0.004, 0.002
    stop = WorkspaceStop(robot, [Plane(tip + [r, 0, 0], np.array([-1.0, 0, 0]))], 5.0)
    qd = np.linalg.pinv(J[:3]) @ np.array([0.8, 0.1, 0.0])
    acted, out = one_cycle(stop, q, qd.tolist(), dt, J)
    assert acted and np.allclose(out, qd * braking_bound(r, 5.0, dt) / (J[0] @ qd), rtol=1e-9, atol=0)
    after = mujoco_tip(MujocoRobot(robot, dt=dt, q0=q + dt * np.asarray(out)))
    assert after[0] - tip[0] <= braking_bound(r, 5.0, dt) * dt * (1 + 1e-3)


def test_the_hard_stop_without_volumes_or_robot_does_nothing_and_needs_the_jacobian(ur10_at_rest):
    robot, q, tip = ur10_at_rest
    qd = [0.5, -0.2, 0.1, 0.3, 0.0, 0.1]
    wall = [Plane(tip + [0.001, 0, 0], np.array([-1.0, 0, 0]))]
    for stop in (WorkspaceStop(robot, []), WorkspaceStop(None, wall)):
        assert one_cycle(stop, q, qd) == (False, qd)
    from fdcontrol.limits.base import Cycle

    for stop in (WorkspaceStop(robot, []), WorkspaceStop(None, wall)):  # nothing to hold: no Jacobian needed
        assert stop.apply(Cycle(q, np.zeros(6), None, 0.002), list(qd)) is False
        assert stop.scale_velocity(q, None, np.array(qd), 0.002) is False
    with pytest.raises(ValueError, match=r"^the workspace stop needs the Jacobian J$"):
        WorkspaceStop(robot, wall).apply(Cycle(q, np.zeros(6), None, 0.002), list(qd))
    with pytest.raises(ValueError, match=r"^the workspace stop needs the Jacobian J$"):
        WorkspaceStop(robot, wall).scale_velocity(q, None, np.array(qd), 0.002)
    with pytest.raises(ValueError, match=r"^the workspace stop of link origins needs the robot$"):
        WorkspaceStop(None, wall, links=[LINK])


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
def test_a_deceleration_that_is_not_finite_and_positive_is_refused(bad):
    with pytest.raises(ValueError, match=r"^workspace stop deceleration must be finite and > 0$"):
        WorkspaceStop(None, [], bad).validate()


def test_an_unknown_part_is_refused_and_a_small_deceleration_is_accepted():
    with pytest.raises(ValueError, match="unsupported workspace piece object"):
        WorkspaceStop(None, [object()])
    WorkspaceStop(None, [Plane(np.zeros(3), np.array([0, 0, 1.0]))], 0.25).validate()


def test_the_workspace_stop_from_the_settings_is_the_one_built_by_hand(ur10_at_rest):
    """From the service's settings (pydantic models) and from plain data alike: the box's faces, every
    keep-out volume, the deceleration and the links; from settings that name none of them (the library's
    LimitParams), an empty stop with the service's default deceleration that never acts."""
    from fdcontrol.limits.safety import LimitParams
    from fdcontrol.server.settings import ControlParams

    robot, q, tip = ur10_at_rest
    box = {"min": (tip - [0.3, 0.3, 0.3]).tolist(), "max": (tip + [0.004, 0.3, 0.3]).tolist()}
    keep = [{"name": "ball", "sphere": {"center": (tip + [0, 0.05, 0]).tolist(), "radius": 0.045}},
            {"plane": {"point": (tip - [0, 0, 0.002]).tolist(), "normal": [0, 0, 1.0]}}]
    ws = workspace_from_config(robot, box, keep)
    by_hand = WorkspaceStop(robot, [p for z in ws.zones for p in z.parts()], 2.0, [LINK])
    params = ControlParams(workspace_box=box, keep_out=keep, workspace_stop_deceleration=2.0, workspace_links=[LINK])

    class Plain:  # the same settings as plain data
        workspace_box, keep_out, workspace_stop_deceleration, workspace_links = box, keep, 2.0, [LINK]

    rng = np.random.default_rng(3)
    J = robot.jacobian(q)
    for stop in (WorkspaceStop.from_settings(robot, params), WorkspaceStop.from_settings(robot, Plain())):
        assert len(stop.parts) == 6 + 2 and stop.deceleration == 2.0 and stop.links == [LINK]
        acted_any = False
        for _ in range(30):
            qd = rng.normal(0, 0.5, 6).tolist()
            got, want = one_cycle(stop, q, qd, J=J), one_cycle(by_hand, q, qd, J=J)
            assert got == want
            acted_any |= got[0]
        assert acted_any
    empty = WorkspaceStop.from_settings(robot, LimitParams())  # type: ignore[arg-type]
    assert empty.parts == [] and empty.links == []
    assert empty.deceleration == ControlParams().workspace_stop_deceleration == WorkspaceStop().deceleration
    assert one_cycle(empty, q, [3.0] * 6) == (False, [3.0] * 6)
    for only in ({"workspace_box": box}, {"keep_out": keep}):  # each alone
        stop = WorkspaceStop.from_settings(robot, ControlParams(**only))
        ws = workspace_from_config(robot, only.get("workspace_box"), only.get("keep_out", []))
        assert len(stop.parts) == len([p for z in ws.zones for p in z.parts()])


def test_the_compiled_tip_load_and_hard_stop_equal_their_numpy_forms(monkeypatch, ur10):
    """The workspace's tip load and the hard stop's scale, compiled (one call each), against their numpy forms
    (the module's compiled kernels switched off) on random tips and velocities around boxes, spheres and
    planes, inside and beyond their margins: the same force, nearest volume and distance, and the same scale,
    to rounding."""
    pytest.importorskip("numba")
    from fdcontrol.control import workspace as ws_mod
    from fdcontrol.limits import workspace as stop_mod

    ws = workspace_from_config(ur10, {"min": [-0.5, -0.4, 0.0], "max": [0.6, 0.5, 0.9], "margin": 0.1},
                               [{"name": "ball", "sphere": {"center": [0.3, 0.1, 0.4], "radius": 0.12},
                                 "margin": 0.08},
                                {"name": "crate", "box": {"min": [-0.3, -0.2, 0.1], "max": [-0.1, 0.1, 0.3]}},
                                {"name": "wall", "plane": {"point": [0, 0, 0.05], "normal": [0.1, 0.0, 1.0]}}])
    stop = WorkspaceStop(ur10, [part for z in ws.zones for part in z.parts()], 4.0)
    assert ws_mod._tip_force is not None and stop_mod._scale is not None
    acted = 0
    inside = np.array([0.55, 0.0, 0.5])  # 5 cm from the box's +x wall: inside its 10 cm margin
    bad = [(inside, np.array([x, 0.0, 0.0])) for x in (math.nan, math.inf, -math.inf)]
    bad += [(np.array([math.nan, 0.0, 0.5]), np.zeros(3)), (inside, np.array([0.1, math.nan, 0.0]))]
    cases = [(RNG.uniform(-0.7, 1.0, 3), RNG.normal(scale=0.5, size=3)) for _ in range(400)] + bad
    for p, v in cases:
        dt = float(RNG.choice([1e-3, 2e-3]))
        with np.errstate(invalid="ignore"):
            got = (ws.tip_wrench(p, v).copy(), ws.distance, ws.nearest, stop._scale(p, v, dt))
            with monkeypatch.context() as m:  # every compiled kernel off: the module's numpy forms
                m.setattr(ws_mod, "_tip_force", None)
                m.setattr(ws_mod, "_distances", None)
                m.setattr(stop_mod, "_scale", None)
                want = (ws.tip_wrench(p, v).copy(), ws.distance, ws.nearest, stop._scale(p, v, dt))
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-9)  # NaN where numpy has NaN
        assert got[1] == pytest.approx(want[1], abs=1e-15, nan_ok=True) and got[2] == want[2]
        assert got[3] == pytest.approx(want[3], rel=1e-12, abs=1e-15, nan_ok=True)
        acted += bool(np.any(want[0])) + (want[3] < 1.0)
    assert acted > 100  # the points do fall inside margins and the stop does scale
    assert not np.all(np.isfinite(ws.tip_wrench(*bad[0])))  # a NaN velocity inside a margin is no zero load


@pytest.mark.parametrize("name", ["fr3", "ur10"])
def test_the_stop_on_the_loops_configuration_equals_its_own_forward_kinematics(name):
    """The limits stage hands the stop the loop's Configuration at this q (its tip position instead of the stop's
    own forward kinematics): the same verdict and the same bits as without it, on random poses with planes,
    spheres and keep-out boxes around the tip (approached, crossed, left); a Configuration at another q, or of
    another robot, is not read."""
    from fdcontrol.model.configuration import Configuration
    from fdcontrol.model.virtual import VirtualModel

    robot = RobotModel.load(name)
    other = RobotModel.load(name)
    rng = np.random.default_rng(7)
    n = robot.dof
    confs = [Configuration(robot), Configuration(robot, virtual=VirtualModel(robot, 0.05))]
    acted = 0
    for k in range(300):
        q = robot.limits.lower + rng.random(n) * (robot.limits.upper - robot.limits.lower)
        conf = confs[k % 2].update(q)
        tip = WorkspaceStop(robot).tip(q)
        assert conf.position.tolist() == tip.tolist()  # the same position (== counts the zeros alike)
        near = tip + rng.normal(0.0, 0.02, 3)
        parts = [Plane(near, rng.normal(size=3) / 1.7), Sphere(near + [0.0, 0.0, 0.05], 0.04),
                 KeepOutBox(near - 0.03, near + 0.01)]
        stop = WorkspaceStop(robot, parts, deceleration=float(rng.uniform(0.5, 20.0)))
        J = conf.jacobian if k % 3 else np.asfortranarray(conf.jacobian)  # (numpy's products of the two orders differ)
        qd = rng.normal(0.0, 0.6, n)
        a, b, c = qd.copy(), qd.copy(), qd.copy()
        hit = stop.scale_velocity(conf.q, J, a, 0.001, conf)
        assert stop.scale_velocity(conf.q, J, b, 0.001) is hit
        assert a.tobytes() == b.tobytes(), k
        acted += hit
        confs[(k + 1) % 2].update(q + 0.01)  # another q: not read
        assert stop.scale_velocity(q.copy(), J, c, 0.001, confs[(k + 1) % 2]) is hit
        assert c.tobytes() == b.tobytes(), k
        d = qd.copy()
        assert WorkspaceStop(other, parts, stop.deceleration).scale_velocity(conf.q, J, d, 0.001, conf) is hit
        assert d.tobytes() == b.tobytes(), k
    assert 30 < acted < 270  # both verdicts, many times
