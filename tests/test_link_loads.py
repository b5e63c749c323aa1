"""Link loads (fdcontrol.control.link_loads): repulsive springs on links, projected or physical.

The closed-loop tests here run on the kinematic SimulatedRobot; test_link_loads_mujoco.py
repeats the elbow-and-wall case on the MuJoCo arm.
"""

from __future__ import annotations

import numpy as np
import pytest

from fdcontrol import ModelError, make_mapping
from fdcontrol.control.link_loads import LinkLoad, LinkLoads, Plane, Sphere, link_loads_from_config
from fdcontrol.control.posture import nullspace_transpose
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME

from .conftest import nonsingular_q
from .test_posture import self_motion

DT = 0.002


def test_plane_and_sphere_force_law():
    ld = LinkLoad("x", Plane([0, 0, 1.0], [0, 0, -2.0]), margin=0.1, stiffness=200.0, damping=10.0)
    F, d = ld.force(np.array([0.3, 0.0, 0.95]), np.zeros(3))  # 5 cm below the ceiling
    assert d == pytest.approx(0.05)
    np.testing.assert_allclose(F, [0, 0, -200.0 * 0.05])
    assert not np.any(ld.force(np.array([0, 0, 0.85]), np.zeros(3))[0])  # outside the margin
    F_app, _ = ld.force(np.array([0.3, 0.0, 0.95]), np.array([0, 0, 0.2]))  # approaching at 0.2 m/s
    np.testing.assert_allclose(F_app, [0, 0, -(10.0 + 10.0 * 0.2)])
    F_lv, _ = ld.force(np.array([0.3, 0.0, 0.95]), np.array([0, 0, -0.2]))  # leaving: no damping
    np.testing.assert_allclose(F_lv, [0, 0, -10.0])
    s = LinkLoad("x", Sphere([1.0, 0, 0], 0.2), margin=0.05, stiffness=100.0)
    F, d = s.force(np.array([1.0, 0.22, 0.0]), np.zeros(3))
    assert d == pytest.approx(0.02)
    np.testing.assert_allclose(F, [0, 100.0 * 0.03, 0], atol=1e-12)


def test_point_jacobian_by_finite_differences(panda, rng):
    ll = LinkLoads(panda, [LinkLoad("panda_link4", Plane([0, 0, 0], [0, 0, 1]))])
    q = panda.random_q(rng)
    (p, Jp), = ll.points(q)
    h = 1e-7
    for j in range(7):
        dq = np.zeros(7)
        dq[j] = h
        (pp, _), = ll.points(q + dq)
        (pm, _), = ll.points(q - dq)
        np.testing.assert_allclose((pp - pm) / (2 * h), Jp[:, j], atol=1e-6)
    np.testing.assert_allclose(p, panda.joint_origins(q)[3], atol=1e-12)  # link4 = joint 4 origin


def test_joint_torque_equals_aba_with_fext(panda, ur10, rng):
    """H⁻¹ J_pᵀ F (CRBA + Jacobian) equals ABA with the force as fext on the link body."""
    for robot, link in ((panda, "panda_link4"), (ur10, "forearm_link")):
        solver = make_solver(make_mapping("fd", robot))
        vm = solver.virtual
        for _ in range(5):
            q = nonsingular_q(robot, rng)
            p = robot.joint_origins(q)[0] + rng.normal(size=3)  # a plane the link is inside the margin of
            ll = LinkLoads(robot, [LinkLoad(link, Plane(p, rng.normal(size=3)), margin=10.0, stiffness=3.0)],
                           "physical")
            tau = ll.torque(q, np.zeros(robot.dof))
            forces = ll.spatial_forces(q, np.zeros(robot.dof))
            assert len(forces) == 1 and np.linalg.norm(tau) > 0
            a_aba = vm.acceleration_fext(q, forces)
            a_crba = np.linalg.solve(vm.inertia(q), tau)
            np.testing.assert_allclose(a_aba, a_crba, rtol=1e-8, atol=1e-8 * np.linalg.norm(a_crba))


def test_projected_load_does_not_reach_the_tip(panda, rng):
    solver = make_solver(make_mapping("fd", panda))
    for _ in range(5):
        q = nonsingular_q(panda, rng)
        ll = LinkLoads(panda, [LinkLoad("panda_link4", Sphere(panda.joint_origins(q)[3] + [0, 0, 0.02], 0.0),
                                        margin=0.2, stiffness=100.0)])
        H, J = solver.virtual.inertia(q), panda.jacobian(q)
        Nt = nullspace_transpose(H, J)
        tau = ll.torque(q, np.zeros(7), Nt)
        assert np.linalg.norm(tau) > 0
        qdd = np.linalg.solve(H, tau)
        assert np.linalg.norm(J @ qdd) < 1e-9 * np.linalg.norm(qdd)


def test_null_space_part_at_gamma0_is_the_fixed_gammas(panda, rng):
    """at_gamma0 against two virtual models built independently (pinocchio's CRBA at γ₀ = 1e3 and at
    γ = 1e6): N̄ᵀ is the same at both γ, the scaled load's null-space acceleration at γ equals the
    unscaled one's at γ₀, and its tip acceleration J H⁻¹τ is the unscaled load's at γ."""
    from fdcontrol.control.posture import at_gamma0
    from fdcontrol.model.virtual import VirtualModel

    lo, hi = VirtualModel(panda, 1e3), VirtualModel(panda, 1e6)
    for _ in range(10):
        q = nonsingular_q(panda, rng)
        J = panda.jacobian(q)
        H0, H = lo.inertia(q), hi.inertia(q)
        Nt0, Nt = nullspace_transpose(H0, J), nullspace_transpose(H, J)
        np.testing.assert_allclose(Nt, Nt0, atol=1e-6 * np.abs(Nt0).max())
        tau = rng.normal(size=7)
        scaled = at_gamma0(tau, Nt, 1e3 / 1e6)
        # null-space acceleration: the part of q̈ with no tip acceleration, H⁻¹N̄ᵀτ
        null0 = np.linalg.solve(H0, Nt0 @ tau)
        null = np.linalg.solve(H, Nt @ scaled)
        np.testing.assert_allclose(null, null0, rtol=1e-5, atol=1e-6 * np.linalg.norm(null0))
        assert np.linalg.norm(np.linalg.solve(H, Nt @ tau)) > 500 * np.linalg.norm(null0)  # unscaled: γ/γ₀ × faster
        np.testing.assert_allclose(J @ np.linalg.solve(H, scaled), J @ np.linalg.solve(H, tau), rtol=1e-6,
                                   atol=1e-8 * np.linalg.norm(J @ np.linalg.solve(H, tau)))


@pytest.mark.parametrize("mode", ["projected", "physical"])
def test_link_load_under_the_schedule_moves_the_null_space_as_the_fixed_gamma(mode):
    """The Panda elbow and wall, the loop's default mapping (γ 1e6 away from singularities) against the
    fixed γ = 1e3: the elbow's smallest clearance is the same within 0.3 mm, and the tip yields to the load
    (its travel without the load minus with it) by the same amount within 0.3 mm — the load acts as at
    1e3 (without the γ₀/γ scaling the default's null space answers a thousand times faster, the
    velocity limits cap it and the projected load changes the tip's travel by 8 %)."""
    robot, q0, wall, s = panda_wall()
    push_y = [0, 1.0 * s, 0, 0, 0, 0]
    out = {}
    for label, kw in (("default", {}), ("fixed", {"gamma": 1e3, "gamma_schedule": "fixed"})):
        ll = LinkLoads(robot, [LinkLoad("panda_link4", wall, margin=0.05, stiffness=100.0)], mode)
        tip, _, clear = push(robot, q0, ll, push_y, 1.5, **kw)
        free, _, _ = push(robot, q0, None, push_y, 1.5, **kw)
        out[label] = (clear, (free[1] - tip[1]) * s)
    print(f"{mode}: clearance default {out['default'][0] * 1e3:.2f} mm, fixed {out['fixed'][0] * 1e3:.2f} mm; "
          f"the tip yields {out['default'][1] * 1e3:.3f} mm, {out['fixed'][1] * 1e3:.3f} mm")
    assert abs(out["default"][0] - out["fixed"][0]) < 3e-4
    assert abs(out["default"][1] - out["fixed"][1]) < 3e-4


def push(robot, q0, link_loads, wrench, seconds, **mapping):
    sim = SimulatedRobot(robot, dt=DT, q0=q0)
    # the default mapping (γ scheduled up to 1e6 away from singularities): the loads' null-space part acts
    # as at the regularizing γ = 1e3 (fdcontrol.control.posture.at_gamma0)
    loop = ControlLoop(robot, sim, make_solver(make_mapping("fd", robot, **mapping)), rate=1 / DT,
                       link_loads=link_loads)
    probe = link_loads
    tip0 = robot.pose(q0)[:3, 3]
    clearance = np.inf
    for i in range(round(seconds / DT)):
        loop.set_wrench(wrench, t=i * DT)
        loop.step(now=i * DT)
        if probe is not None:
            probe.joint_forces(sim.q, np.zeros(robot.dof))  # distances at the measured q
            clearance = min(clearance, probe.clearance())
    return robot.pose(sim.q)[:3, 3] - tip0, sim.q, clearance


def panda_wall():
    """Panda with the elbow swung sideways; a wall 6 cm beside the elbow, 5 cm margin."""
    from fdcontrol import RobotModel

    robot = RobotModel.load("panda")
    q0 = self_motion(robot, np.array(HOME["panda"]), 0.5)
    ey = robot.joint_origins(q0)[3][1]
    s = np.sign(ey)
    wall = Plane([0, ey + 0.06 * s, 0], [0, -s, 0])
    return robot, q0, wall, s


def elbow_clearance(robot, q, wall, margin=0.05):
    return wall.distance(robot.joint_origins(q)[3])[0] - margin


@pytest.mark.parametrize("mode", ["projected", "physical"])
def test_panda_link_load_keeps_elbow_out_of_the_margin(mode):
    robot, q0, wall, s = panda_wall()
    push_y = [0, 1.0 * s, 0, 0, 0, 0]  # the tip is pushed towards the wall
    tip_free, q_free, _ = push(robot, q0, None, push_y, 1.5)
    ll = LinkLoads(robot, [LinkLoad("panda_link4", wall, margin=0.05, stiffness=100.0)], mode)
    tip, _, clearance = push(robot, q0, ll, push_y, 1.5)
    free_in = elbow_clearance(robot, q_free, wall)
    print(f"{mode}: elbow clearance without load {free_in * 1e3:.1f} mm, with {clearance * 1e3:.2f} mm (min); "
          f"tip along the push {tip_free[1] * s * 1e3:.2f} mm free, {tip[1] * s * 1e3:.2f} mm with the load")
    assert free_in < -0.01  # without the load the elbow goes 1 cm+ into the margin
    assert clearance > -0.005  # with it, at most 5 mm into the 50 mm margin, never through the plane
    if mode == "projected":
        assert np.linalg.norm(tip - tip_free) < 0.002 * np.linalg.norm(tip_free)  # tip motion unchanged
    else:
        assert tip[1] * s < tip_free[1] * s - 1e-4  # the tip yields (a little: the light null space takes most)


def test_ur10_physical_tip_yields_projected_cannot_act(ur10):
    """No null space on a 6-DoF arm: a projected load does nothing; a physical one stops the tip."""
    q0 = np.array(HOME["ur10"])
    ez = ur10.joint_origins(q0)[2][2]  # elbow (forearm_link origin) height
    ceiling = Plane([0, 0, ez + 0.06], [0, 0, -1])
    tip = ur10.pose(q0)[:3, 3]
    inward = -tip / np.linalg.norm(tip)  # pulling the tip towards the base folds the elbow up
    up = [*(1.0 * inward), 0, 0, 0]
    tip_free, q_free, _ = push(ur10, q0, None, up, 1.5)
    loads = {m: LinkLoads(ur10, [LinkLoad("forearm_link", ceiling, margin=0.05, stiffness=1000.0)], m)
             for m in ("projected", "physical")}
    tip_p, _, _ = push(ur10, q0, loads["projected"], up, 1.5)
    tip_f, _, clear_f = push(ur10, q0, loads["physical"], up, 1.5)
    tip_free, tip_p, tip_f = tip_free @ inward, tip_p @ inward, tip_f @ inward
    free_clear = ceiling.distance(ur10.joint_origins(q_free)[2])[0] - 0.05
    print(f"UR10 tip along the pull: free {tip_free * 1e3:.1f} mm, projected {tip_p * 1e3:.1f} mm, "
          f"physical {tip_f * 1e3:.1f} mm; elbow clearance free {free_clear * 1e3:.1f} mm, "
          f"physical {clear_f * 1e3:.1f} mm")
    np.testing.assert_allclose(tip_p, tip_free, atol=1e-9)
    assert free_clear < -0.01  # free: the elbow enters the margin
    assert tip_f < 0.8 * tip_free  # physical: the tip yields
    assert clear_f > -0.02  # and the elbow stays near the margin's edge


def test_config_and_errors(panda):
    ll = link_loads_from_config(panda, [
        {"link": "panda_link4", "plane": {"point": [0, 0, 1], "normal": [0, 0, -1]}, "margin": 0.1},
        {"link": "panda_link6", "sphere": {"center": [0.5, 0, 0.5], "radius": 0.1}, "stiffness": 20.0}],
        "physical")
    assert len(ll.loads) == 2 and ll.mode == "physical"
    assert np.isnan(ll.clearance())  # not evaluated yet
    with pytest.raises(ModelError, match="unknown link frame"):
        LinkLoads(panda, [LinkLoad("elbow", Plane([0, 0, 0], [0, 0, 1]))])
    with pytest.raises(ValueError, match="normal"):
        Plane([0, 0, 0], [0, 0, 0])
    with pytest.raises(ValueError, match="link_loads\\[0\\]"):
        link_loads_from_config(panda, [{"link": "panda_link4"}])
    with pytest.raises(ValueError, match="mode"):
        LinkLoads(panda, [], "sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="projector"):
        LinkLoads(panda, [LinkLoad("panda_link4", Plane([0, 0, 0], [0, 0, 1]), margin=10)]).torque(
            np.zeros(7), np.zeros(7))
