"""Control laws, wrench conditioning and the solver interface, checked by hand-derived values."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol import make_mapping
from fdcontrol.control.law import ControlInput, ControlLaw, ForceTerm, WrenchFilter, pose_error
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.spatial import cross, finite

from .conftest import nonsingular_q


def rot(axis, angle):
    return pin.exp3(np.asarray(axis, float) * angle)


def inp(**kw):
    base = dict(pose=np.eye(4), twist=np.zeros(6), f_measured=np.zeros(6), f_applied=np.zeros(6),
                target=None)
    base.update(kw)
    return ControlInput(**base)


def test_force_sign_convention():
    """f_measured is the robot's wrench ON the environment: a push towards +x on the tool
    reads −x, and force control with f_target = 0 moves the tool towards +x."""
    law = ControlLaw(mode="force")
    fc = law(inp(f_measured=np.array([-5.0, 0, 0, 0, 0, 0])))
    np.testing.assert_allclose(fc, [5, 0, 0, 0, 0, 0])
    law.force = ForceTerm(gain=np.full(6, 2.0), target=np.array([10.0, 0, 0, 0, 0, 0]))
    np.testing.assert_allclose(law(inp(f_measured=np.array([4.0, 0, 0, 0, 0, 0])))[0], 12.0)


def test_every_law_adds_its_terms_and_a_law_without_terms_is_not_called(rng, monkeypatch):
    """f_c = f_applied + the law's terms (+ twist tracking), in either frame; a law without terms (Law.add not
    overridden: admittance) skips the call and returns a fresh copy of f_applied — the same numbers bit for bit
    as the call it skips would leave."""
    from fdcontrol.control.laws import LAWS, Law

    pose = np.eye(4)
    pose[:3, :3] = rot([0.3, -0.5, 0.8], 0.7)
    pose[:3, 3] = [0.4, 0.1, 0.6]
    target = pose.copy()
    target[:3, 3] += [0.02, -0.01, 0.03]
    calls = []
    real = Law.add
    monkeypatch.setattr(Law, "add", lambda self, *a: calls.append(type(self)) or real(self, *a))
    for name in LAWS.names():
        for frame in ("base", "tool"):
            for twist_cmd in (None, rng.normal(size=6)):
                law = ControlLaw(mode=name, frame=frame)
                x = inp(pose=pose, twist=rng.normal(size=6), f_measured=rng.normal(size=6),
                        f_applied=rng.normal(size=6), target=target, twist_cmd=twist_cmd)
                R = pose[:3, :3] if frame == "tool" else np.eye(3)
                want = x.f_applied.copy()
                law._law.add(law, x, R, want)  # the law's terms, by the call itself
                if twist_cmd is not None:
                    want += law.twist(twist_cmd, x.twist, R)
                calls.clear()
                got = law(x)
                assert got is not x.f_applied and got.tobytes() == want.tobytes(), (name, frame)
                assert law._adds == (type(law._law).add is not Law.add), name
                if not law._adds:  # admittance: the base Law.add is not called
                    assert calls == [] and (twist_cmd is not None or got.tobytes() == x.f_applied.tobytes())
    assert "admittance" in LAWS.names() and not ControlLaw(mode="admittance")._adds


def test_tool_frame_gains():
    """Gains along tool axes: tool rotated 90° about z, stiffness only along tool x."""
    T = np.eye(4)
    T[:3, :3] = rot([0, 0, 1], np.pi / 2)
    target = np.eye(4)
    target[:3, :3] = T[:3, :3]
    target[:3, 3] = [0.01, 0.02, 0.0]  # error in base: +x 1 cm, +y 2 cm
    law = ControlLaw(mode="motion", frame="tool")
    law.set_gains(stiffness=[100, 0, 0, 0, 0, 0], damping=0)
    fc = law(inp(pose=T, target=target))
    # tool x = base y: only the base-y error is stiff
    np.testing.assert_allclose(fc, [0, 2.0, 0, 0, 0, 0], atol=1e-12)
    law.frame = "base"
    np.testing.assert_allclose(law(inp(pose=T, target=target)), [1.0, 0, 0, 0, 0, 0], atol=1e-12)


def test_pose_error_axis_angle_and_clamps():
    T = np.eye(4)
    T[:3, :3] = rot([1, 0, 0], 0.4)
    target = T.copy()
    target[:3, :3] = rot([0, 0, 1], 0.3) @ T[:3, :3]
    target[:3, 3] = [0.3, 0, 0]
    e = pose_error(T, target, max_position=0.1, max_rotation=1.0)
    np.testing.assert_allclose(e, [0.1, 0, 0, 0, 0, 0.3], atol=1e-12)
    e = pose_error(T, target, max_position=1.0, max_rotation=0.1)
    np.testing.assert_allclose(e, [0.3, 0, 0, 0, 0, 0.1], atol=1e-12)


def test_gravity_compensation_hand_derived():
    """2 kg tool, centre of mass 0.1 m along tool z, tool rotated 90° about base x."""
    filt = WrenchFilter(tool_mass=2.0, tool_com=np.array([0, 0, 0.1]))
    R = rot([1, 0, 0], np.pi / 2)
    # in the sensor frame gravity points along −y: F = (0, −19.62, 0), τ = c × F = (1.962, 0, 0)
    np.testing.assert_allclose(filt.gravity_wrench(R), [0, -19.62, 0, 1.962, 0, 0], atol=1e-12)
    # a sensor between flange and tool reads robot-on-tool = −weight at rest (fdcontrol.control.sensing)
    np.testing.assert_allclose(filt.apply(-filt.gravity_wrench(R), R, 0.002), np.zeros(6), atol=1e-12)
    assert np.linalg.norm(filt.apply(filt.gravity_wrench(R), R, 0.002)[:3]) == pytest.approx(2 * 19.62)


def test_bias_zeroing_then_compensation_at_other_orientations(rng):
    filt = WrenchFilter(tool_mass=1.3, tool_com=np.array([0.01, -0.02, 0.08]))
    bias = rng.normal(size=6)
    def reading(R, contact=None):
        # physical reading (robot on tool): contact (tool on environment) − weight, plus bias
        return (np.zeros(6) if contact is None else contact) - filt.gravity_wrench(R) + bias

    R0 = rot([0, 1, 0], 0.3)
    filt.zero(reading(R0), R0)
    for _ in range(5):
        R = rot(rng.normal(size=3), rng.uniform(0, np.pi))
        np.testing.assert_allclose(filt.apply(reading(R), R, 0.002), np.zeros(6), atol=1e-10)
    contact = np.array([1.0, 2.0, 3.0, 0.1, 0.2, 0.3])  # in the tool frame
    R = rot([0, 0, 1], 0.5)
    out = filt.apply(reading(R, contact), R, 0.002)
    np.testing.assert_allclose(out, np.concatenate((R @ contact[:3], R @ contact[3:])), atol=1e-10)


def test_deadband_and_low_pass():
    filt = WrenchFilter(deadband_force=1.0, deadband_torque=0.5)
    np.testing.assert_allclose(filt.apply(np.array([0.6, 0.6, 0, 0.3, 0, 0]), np.eye(3), 0.01), 0)
    out = filt.apply(np.array([3.0, 0, 0, 0, 0, 1.5]), np.eye(3), 0.01)
    np.testing.assert_allclose(out, [2.0, 0, 0, 0, 0, 1.0])  # continuous at the threshold
    lp = WrenchFilter(cutoff=5.0)
    dt, step = 0.002, np.array([1.0, 0, 0, 0, 0, 0])
    lp.apply(np.zeros(6), np.eye(3), dt)
    for _ in range(10):
        y = lp.apply(step, np.eye(3), dt)
    alpha = 1 - np.exp(-2 * np.pi * 5.0 * dt)
    assert y[0] == pytest.approx(1 - (1 - alpha) ** 10, rel=1e-12)


def test_gain_validation():
    law = ControlLaw()
    with pytest.raises(ValueError, match="stiffness must be 6"):
        law.set_gains(stiffness=[1, 2, 3])
    with pytest.raises(ValueError, match="damping"):
        law.set_gains(damping=-1.0)


def test_solver_first_step_matches_the_mappings(ur10, rng):
    """From rest, one Euler step of each solver is the mapping applied to f."""
    q, f, dt, c = nonsingular_q(ur10, rng), rng.normal(size=6), 0.002, 10.0
    zero = np.zeros(6)
    fd = make_solver(make_mapping("fd", ur10, gamma=1e3), decay=c)
    _, v = fd.step(q, zero, f, dt)
    np.testing.assert_allclose(v, dt * make_mapping("fd", ur10, gamma=1e3).joint_space(q) @ f,
                               atol=1e-12)
    jt = make_solver(make_mapping("jt", ur10), decay=c)
    np.testing.assert_allclose(jt.step(q, zero, f, dt)[1], dt * ur10.jacobian(q).T @ f, atol=1e-12)
    ji = make_solver(make_mapping("ji", ur10), decay=c)
    qn, v = ji.step(q, zero, f, dt)
    np.testing.assert_allclose(ur10.jacobian(q) @ v, f / c, atol=1e-9)
    np.testing.assert_allclose(qn, q + dt * v)
    dls = make_solver(make_mapping("dls", ur10, alpha=0.05), decay=c)
    np.testing.assert_allclose(dls.step(q, zero, f, dt)[1],
                               make_mapping("dls", ur10, alpha=0.05).joint_space(q) @ f / c)


def test_solver_damping_settles_on_the_fd_map(ur10, rng):
    """Constant f, fixed q: q̇ → H⁻¹Jᵀf / c (mass-proportional damping keeps FD's map)."""
    q, f, c = nonsingular_q(ur10, rng), rng.normal(size=6), 10.0
    s = make_solver(make_mapping("fd", ur10, gamma=1e3), decay=c, coriolis=False)
    v = np.zeros(6)
    for _ in range(3000):
        _, v = s.step(q, v, f, 0.002)  # q held: the virtual model integrates from it each cycle
    np.testing.assert_allclose(v, make_mapping("fd", ur10, gamma=1e3).joint_space(q) @ f / c, rtol=1e-6)


def test_helpers():
    a, b = np.array([1.0, 2, 3]), np.array([-2.0, 0.5, 4])
    np.testing.assert_allclose(cross(a, b), np.cross(a, b))
    assert finite(a) and not finite(np.array([1.0, np.nan])) and not finite(np.array([np.inf]))


def test_solver_parameter_validation(ur10):
    with pytest.raises(ValueError, match="decay"):
        make_solver(make_mapping("fd", ur10), decay=-1.0)
    with pytest.raises(ValueError, match="substeps"):
        make_solver(make_mapping("jt", ur10), substeps=0)
