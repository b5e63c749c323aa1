"""The physical sensor model (fdcontrol.control.sensing) against independent statics, the MJCF loader
and the γ-only virtual model."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol.control.law import WrenchFilter as CompatFilter
from fdcontrol.control.sensing import WrenchFilter, carry_bias, move_wrench, physical_reading, tool_weight
from fdcontrol.model.robot import ModelError, RobotModel
from fdcontrol.model.virtual import VirtualModel

G = np.array([0, 0, -9.81])


def rot(rng):
    return pin.exp3(rng.normal(size=3))


def test_compat_import():
    assert CompatFilter is WrenchFilter


def test_move_wrench_equals_the_moment_of_the_point_forces(rng):
    """Independent check: a set of point forces; moments summed directly about each origin."""
    R, p = rot(rng), rng.normal(size=3)  # sensor S at (R, p) in tip frame T
    pts, fs = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))  # in S
    w_s = np.concatenate((fs.sum(0), np.cross(pts, fs).sum(0)))
    pts_t, fs_t = pts @ R.T + p, fs @ R.T
    w_t = np.concatenate((fs_t.sum(0), np.cross(pts_t, fs_t).sum(0)))
    np.testing.assert_allclose(move_wrench(w_s, R, p), w_t, atol=1e-12)


@pytest.mark.parametrize("sign", ["robot_on_tool", "tool_on_robot"])
def test_statics_of_a_tool_with_contact(rng, sign):
    """Tool statics written out by hand: the robot holds the tool against gravity and a contact
    force c applied at point a (sensor frame); the filter must return the tool-on-environment
    wrench (−c at a) at the tip origin in the base frame, for any tip pose and sensor mount."""
    m, com = 0.9, np.array([0.02, -0.01, 0.07])
    R_ts, p_ts = rot(rng), np.array([0.0, 0.01, -0.04])
    filt = WrenchFilter(tool_mass=m, tool_com=com, sign=sign, sensor_rotation=R_ts, sensor_position=p_ts)
    for _ in range(5):
        R_tip = rot(rng)
        R_bs = R_tip @ R_ts
        c_base, a = rng.normal(size=3) * 5, rng.normal(size=3) * 0.05  # env-on-tool force, point (S)
        c = R_bs.T @ c_base
        weight = m * (R_bs.T @ G)
        # robot-on-tool balances weight and contact about the sensor origin
        robot_on_tool = -np.concatenate((weight + c, np.cross(com, weight) + np.cross(a, c)))
        raw = robot_on_tool if sign == "robot_on_tool" else -robot_on_tool
        out = filt.apply(raw, R_tip, 0.002)
        # expected: −c at point a, moved to the tip origin, in the base frame
        a_t = R_ts @ a + p_ts
        F_t = -(R_ts @ c)
        expect = np.concatenate((R_tip @ F_t, R_tip @ np.cross(a_t, F_t)))
        np.testing.assert_allclose(out, expect, atol=1e-10)
        # the simulators' reading is the inverse of the model
        np.testing.assert_allclose(physical_reading(-np.concatenate((c, np.cross(a, c))), m, com, R_bs, sign),
                                   raw, atol=1e-12)


def test_bias_zeroing_holds_in_other_orientations(rng):
    m, com = 0.6, np.array([0.0, 0.03, 0.05])
    filt = WrenchFilter(tool_mass=m, tool_com=com)
    bias = rng.normal(size=6)
    R0 = rot(rng)
    filt.zero(-tool_weight(m, com, R0) + bias, R0)
    for _ in range(5):
        R = rot(rng)
        np.testing.assert_allclose(filt.apply(-tool_weight(m, com, R) + bias, R, 0.002), 0, atol=1e-12)


def test_wrong_mass_shows_up_and_bad_options_are_refused():
    R = np.eye(3)
    filt = WrenchFilter(tool_mass=1.0)
    # an unmodelled 0.2 kg looks like the environment pulling the tool down: tool on env = +0.2 g up
    assert filt.apply(-tool_weight(1.2, np.zeros(3), R), R, 0.002)[2] == pytest.approx(0.2 * 9.81)
    with pytest.raises(ValueError, match="sign"):
        WrenchFilter(sign="up")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rotation"):
        WrenchFilter(sensor_rotation=2 * np.eye(3))
    with pytest.raises(ValueError, match="tool_mass"):
        WrenchFilter(tool_mass=-1)


MJCF = """<mujoco model="arm2">
  <worldbody>
    <body name="base">
      <body name="l1" pos="0 0 0.1">
        <joint name="j1" type="hinge" axis="0 0 1" range="-3 3" armature="0.1" damping="2" frictionloss="1"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="2"/>
        <body name="l2" pos="0.4 0 0">
          <joint name="j2" type="hinge" axis="0 1 0" range="-2 2" armature="0.1" damping="2"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
          <site name="tip" pos="0.3 0 0"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_from_mjcf_needs_velocity_limits_and_matches_mujoco(tmp_path):
    import mujoco

    f = tmp_path / "arm2.xml"
    f.write_text(MJCF)
    with pytest.raises(ModelError, match="velocity"):
        RobotModel.from_mjcf(f, "base", "tip")
    robot = RobotModel.from_mjcf(f, "base", "tip", velocity_limits=[2.0, 3.0])
    np.testing.assert_array_equal(robot.limits.velocity, [2.0, 3.0])
    with pytest.raises(ModelError):
        RobotModel.from_mjcf(f, "base", "tip", velocity_limits=[np.inf, 1])
    m = mujoco.MjModel.from_xml_path(str(f))
    d = mujoco.MjData(m)
    q = np.array([0.7, -0.4])
    d.qpos[:] = q
    mujoco.mj_kinematics(m, d)
    np.testing.assert_allclose(robot.pose(q)[:3, 3], d.site_xpos[0], atol=1e-12)
    assert np.any(robot.model.armature > 0)  # the source model keeps its armature ...
    vm = VirtualModel(robot, gamma=1e3)  # ... the virtual model is the γ masses only
    assert np.all(vm.model.armature == 0) and np.all(vm.model.damping == 0) and np.all(vm.model.friction == 0)
    J = robot.jacobian(q)
    H = vm.inertia(q)
    # H = JᵀJ + H_l/γ exactly (seed eq. 11–13) — armature would add 0.1 on the diagonal
    assert np.abs(H - J.T @ J).max() < 2e-3


def test_virtual_model_ignores_armature_of_an_urdf_model(ur10):
    rng = np.random.default_rng(3)
    q = ur10.random_q(rng)
    ref = VirtualModel(ur10, 1e3).inertia(q)
    noisy = RobotModel.load("ur10")
    noisy.model.armature = np.full(noisy.dof, 0.1)
    noisy.model.damping = np.full(noisy.dof, 3.0)
    np.testing.assert_allclose(VirtualModel(noisy, 1e3).inertia(q), ref, atol=1e-12)


def _deadband_by_hand(v: np.ndarray, d: float) -> np.ndarray:
    """The documented deadband, written out: below d zero, above it the vector shortened by d."""
    n = float(np.sqrt(v @ v))
    return np.zeros(3) if n <= d else v / n * (n - d)


def test_deadband_zeroes_small_loads_and_shortens_larger_ones_by_its_width(rng):
    """Force and torque norms each against their own width, in any tip pose and sensor mount: the
    filter's output is the deadbanded tool-on-environment wrench at the tip, rotated to the base
    (a rotation keeps norms, so the band is the same in either frame), and continuous at the edge."""
    R_ts, p_ts = rot(rng), np.array([0.01, 0.0, -0.03])
    filt = WrenchFilter(deadband_force=2.0, deadband_torque=0.3, sensor_rotation=R_ts, sensor_position=p_ts)
    for scale in (0.5, 1.0, 3.0, 20.0):  # inside the band, near its edge, beyond it
        R_tip = rot(rng)
        f_s = rng.normal(size=6) * np.r_[np.full(3, scale), np.full(3, scale / 8)]
        raw = f_s  # robot_on_tool, no tool, no bias: f_S = r
        F_t = R_ts @ f_s[:3]
        tau_t = R_ts @ f_s[3:] + np.cross(p_ts, F_t)
        expect = np.r_[R_tip @ _deadband_by_hand(F_t, 2.0), R_tip @ _deadband_by_hand(tau_t, 0.3)]
        np.testing.assert_allclose(filt.apply(raw, R_tip, 0.002), expect, atol=1e-12)
    edge = np.array([2.0 + 1e-9, 0, 0, 0, 0, 0])  # just past the edge: close to zero, not a jump
    assert np.linalg.norm(filt.apply(edge, np.eye(3), 0.002)) < 1e-8


def test_low_pass_follows_a_step_as_the_sampled_first_order_system():
    """y after n samples of a step from w0 to w1 (cut-off f_c, period dt) is the exact sampled
    response of a first-order lag: w1 + (w0 − w1) e^(−2π f_c dt n). The first sample after zeroing
    has no memory of the loads before."""
    fc, dt = 5.0, 0.002
    filt = WrenchFilter(cutoff=fc)
    w0, w1 = np.array([1.0, -2, 3, 0.1, 0, -0.2]), np.array([-4.0, 0, 1, 0, 0.3, 0])
    np.testing.assert_allclose(filt.apply(w0, np.eye(3), dt), w0, atol=1e-15)  # the first sample passes
    for n in range(1, 60):
        y = filt.apply(w1, np.eye(3), dt)
        np.testing.assert_allclose(y, w1 + (w0 - w1) * np.exp(-2 * np.pi * fc * dt * n), atol=1e-12)
    filt.zero(w1, np.eye(3))  # no tool: the bias is this reading, and the lag forgets
    np.testing.assert_allclose(filt.apply(w0, np.eye(3), dt), w0 - w1, atol=1e-12)


def test_inertia_compensation_leaves_the_contact_of_an_accelerating_tool(rng):
    """Newton–Euler for a tool accelerating with the flange (no rotation): robot + weight + contact
    = m a at the centre of mass. With the compensation on, the filter returns the contact alone
    (tool on environment, tip origin, base frame) in any tip pose and sensor mount; with it off,
    or without the tip twist, the reading keeps m a."""
    m, com = 1.5, np.array([0.01, -0.02, 0.06])
    R_ts, p_ts = rot(rng), np.array([0.0, 0.02, -0.05])
    dt = 0.004
    for comp in (True, False):
        filt = WrenchFilter(tool_mass=m, tool_com=com, sensor_rotation=R_ts, sensor_position=p_ts,
                            tool_inertia=np.array([0.01, 0.01, 0.01, 0, 0, 0]), inertia_compensation=comp)
        R_tip = rot(rng)
        R_bs = R_tip @ R_ts
        a = rng.normal(size=3) * 2  # m/s², base frame: every point of the tool (no rotation)
        e = rng.normal(size=3) * 3  # contact force env → tool at the sensor origin, base frame
        a_s, e_s, g_s = R_bs.T @ a, R_bs.T @ e, R_bs.T @ G
        # robot_on_tool r: r_F + m g + e = m a;  r_τ + c × m g = c × m a (about the sensor origin)
        raw = np.r_[m * a_s - m * g_s - e_s, np.cross(com, m * a_s) - np.cross(com, m * g_s)]
        filt.apply(raw, R_tip, dt, np.zeros(6))  # at rest in the cycle before
        out = filt.apply(raw, R_tip, dt, np.r_[a * dt, np.zeros(3)])  # the twist one period later
        F_t = R_ts @ (-e_s)  # the contact, tool on environment, moved to the tip origin
        contact = np.r_[R_tip @ F_t, R_tip @ np.cross(p_ts, F_t)]
        if comp:
            np.testing.assert_allclose(out, contact, atol=1e-9)
        else:
            assert np.linalg.norm(out[:3] - contact[:3]) == pytest.approx(m * np.linalg.norm(a), rel=1e-9)
        no_twist = filt.apply(raw, R_tip, dt)  # without a twist the cycle cannot compensate
        assert np.linalg.norm(no_twist[:3] - contact[:3]) == pytest.approx(m * np.linalg.norm(a), rel=1e-9)


def test_the_contact_reading_leaves_out_the_tools_inertia_whether_or_not_the_law_sees_it_compensated(rng):
    """``apply(…, contact=True)``: ``contact`` is the contact alone (Newton–Euler as above) through the same
    deadband and low-pass, with its own state, while the law's reading is the one without the flag, bit for
    bit. Without the flag ``contact`` is that reading, and an estimate resumed later starts afresh: its first
    cycle differentiates no old twist."""
    m, com = 0.8, np.array([0.0, 0.01, 0.05])
    R_ts, p_ts = rot(rng), np.array([0.01, 0.0, -0.03])
    dt, db = 0.002, 0.3
    R_tip = rot(rng)
    R_bs = R_tip @ R_ts
    a = np.array([1.5, -2.0, 0.5])  # m/s², base frame, no rotation
    e = np.array([0.4, 2.5, -1.0])  # contact force env → tool at the sensor origin, base frame
    a_s, e_s, g_s = R_bs.T @ a, R_bs.T @ e, R_bs.T @ G
    raw = np.r_[m * a_s - m * g_s - e_s, np.cross(com, m * a_s) - np.cross(com, m * g_s)]

    def tip(w_s):  # a sensor-frame wrench about the sensor origin → tip origin → deadband → base frame
        F = R_ts @ w_s[:3]
        tau = R_ts @ w_s[3:] + np.cross(p_ts, F)
        return np.r_[R_tip @ (F * (1 - db / np.linalg.norm(F))), R_tip @ tau]

    contact = tip(np.r_[-e_s, 0, 0, 0])
    seen = tip(np.r_[-e_s + m * a_s, np.cross(com, m * a_s)])  # the reading with the tool's inertia in it
    for comp, fc in ((False, 30.0), (True, 30.0), (False, 0.5)):  # (a cut-off below 1 Hz filters too)
        kw = dict(tool_mass=m, tool_com=com, sensor_rotation=R_ts, sensor_position=p_ts, deadband_force=db,
                  cutoff=fc, inertia_compensation=comp)
        filt, plain = WrenchFilter(**kw), WrenchFilter(**kw)
        y0 = None
        for k in range(40):
            tw = np.r_[a * k * dt, np.zeros(3)]
            out = filt.apply(raw, R_tip, dt, tw, contact=True)
            np.testing.assert_array_equal(out, plain.apply(raw, R_tip, dt, tw))  # the law's reading: unchanged
            if comp:
                assert filt.contact is out
                continue
            if k == 0:  # the first cycle has no acceleration yet: the contact channel starts from the reading
                np.testing.assert_allclose(filt.contact, seen, atol=1e-9)
                y0 = filt.contact.copy()
            else:  # the first-order step response from there to the contact alone
                decay = np.exp(-2 * np.pi * fc * dt * k)
                np.testing.assert_allclose(filt.contact, contact + (y0 - contact) * decay, atol=1e-9)
                np.testing.assert_allclose(out, seen + (y0 - seen) * decay, atol=1e-9)
    filt = WrenchFilter(tool_mass=m, tool_com=com, sensor_rotation=R_ts, sensor_position=p_ts)
    np.testing.assert_array_equal(filt.contact, np.zeros(6))  # before the first reading: no load
    filt.apply(raw, R_tip, dt, np.zeros(6), contact=True)
    out = filt.apply(raw, R_tip, dt, np.r_[a * dt, np.zeros(3)])  # no flag: contact is the reading
    assert filt.contact is out
    filt.apply(raw, R_tip, dt, np.r_[a * 50 * dt, np.zeros(3)], contact=True)  # resumed: no old twist
    np.testing.assert_allclose(filt.contact, out, atol=1e-9)  # (from the old twist it would read 49·m·a more)
    filt.apply(raw, R_tip, dt, np.r_[a * 51 * dt, np.zeros(3)], contact=True)
    np.testing.assert_allclose(filt.contact[:3], R_tip @ R_ts @ -e_s, atol=1e-9)


def test_a_tool_given_only_its_rotational_inertia_is_compensated_too():
    """tool_mass 0 with a rotational inertia (a light tool whose spin is what loads the sensor): the
    torque I α that turns it is taken out, for the law (compensated) and for the contact reading."""
    izz, alpha, dt = 0.02, 3.0, 0.004
    for comp in (True, False):
        filt = WrenchFilter(tool_mass=0.0, tool_inertia=np.array([0.01, 0.01, izz, 0, 0, 0]),
                            inertia_compensation=comp)
        raw = np.array([0, 0, 0, 0, 0, izz * alpha])  # robot on tool: what spins it up about z
        filt.apply(raw, np.eye(3), dt, np.zeros(6), contact=True)
        out = filt.apply(raw, np.eye(3), dt, np.array([0, 0, 0, 0, 0, alpha * dt]), contact=True)
        np.testing.assert_allclose(filt.contact, np.zeros(6), atol=1e-12)
        np.testing.assert_allclose(out, np.zeros(6) if comp else raw, atol=1e-12)


def test_the_sensor_model_refuses_what_is_not_a_mount_or_a_mass():
    for bad in (np.diag([1.0, 1.0, -1.0]),  # a reflection: orthogonal, but det −1
                np.eye(3) + 1e-3,  # not orthogonal
                np.eye(4)):  # not 3×3
        with pytest.raises(ValueError, match=r"^sensor_rotation must be a 3×3 rotation matrix$"):
            WrenchFilter(sensor_rotation=bad)
    for mass in (float("nan"), float("inf"), -1e-9):
        with pytest.raises(ValueError, match=r"^tool_mass must be finite and ≥ 0 \(kg\)$"):
            WrenchFilter(tool_mass=mass)
    WrenchFilter(sensor_rotation=pin.exp3(np.array([0.3, -0.2, 1.0])), tool_mass=0.0)  # a rotation, no tool


def test_the_simulators_reading_defaults_to_robot_on_tool(rng):
    c, com, R = rng.normal(size=6), np.array([0.0, 0.0, 0.05]), rot(rng)
    np.testing.assert_allclose(physical_reading(c, 0.7, com, R), physical_reading(c, 0.7, com, R, "robot_on_tool"))
    np.testing.assert_allclose(physical_reading(c, 0.7, com, R), -physical_reading(c, 0.7, com, R, "tool_on_robot"))


def test_a_mount_given_to_six_decimals_is_a_rotation_and_a_slow_low_pass_still_filters(rng):
    """A sensor rotation typed from a drawing (six decimals: R Rᵀ off by ~1e-6) is accepted, and a
    cut-off below 1 Hz filters like any other (the first-order step response)."""
    R = np.round(pin.exp3(np.array([0.4, -1.1, 0.7])), 6)
    assert not np.allclose(R @ R.T, np.eye(3), atol=1e-8)  # really off by more than float noise
    WrenchFilter(sensor_rotation=R)
    fc, dt = 0.5, 0.01
    filt = WrenchFilter(cutoff=fc)
    filt.apply(np.zeros(6), np.eye(3), dt)
    step = np.array([10.0, 0, 0, 0, 0, 0])
    y = [filt.apply(step, np.eye(3), dt)[0] for _ in range(3)]
    np.testing.assert_allclose(y, 10.0 * (1 - np.exp(-2 * np.pi * fc * dt * np.arange(1, 4))), atol=1e-12)


def test_a_corrected_tool_model_keeps_a_load_that_load_and_then_reads_the_physics(rng):
    """carry_bias while a hand pushes: the tool really mounted is heavier than the model said. The
    corrected model reads the same wrench as the old one for that raw reading (not a zeroing), and
    with the hand gone it reads zero in every orientation (the sensor's own offset o stays in the
    bias, the old model's error does not)."""
    m_old, com_old = 0.5, np.array([0.0, 0.0, 0.04])
    m, com = 1.2, np.array([0.01, 0.0, 0.08])  # the tool that is really mounted
    o = rng.normal(size=6)  # the sensor's offset
    R_s = rot(rng)
    old = WrenchFilter(tool_mass=m_old, tool_com=com_old)
    old.zero(physical_reading(np.zeros(6), m, com, R_s) + o, R_s)  # zeroed at rest with the old model
    hand = np.array([3.0, -1.0, 2.0, 0.1, 0.0, -0.2])  # tool on environment, sensor frame
    raw = physical_reading(hand, m, com, R_s) + o
    old_reads = old.apply(raw, R_s, 0.002)
    new = WrenchFilter(tool_mass=m, tool_com=com, cutoff=3.0)
    new.apply(raw + 5.0, R_s, 0.002)  # a low-pass with a memory: the change starts it afresh
    carry_bias(old, new, raw, R_s)
    np.testing.assert_allclose(new.apply(raw, R_s, 0.002), old_reads, atol=1e-12)  # a load stays that load
    new = WrenchFilter(tool_mass=m, tool_com=com)
    carry_bias(old, new, raw, R_s)
    for _ in range(3):
        R = rot(rng)
        np.testing.assert_allclose(new.apply(physical_reading(np.zeros(6), m, com, R) + o, R, 0.002), 0,
                                   atol=1e-12)


def test_a_corrected_sign_at_rest_reads_zero_in_every_orientation(rng):
    """The sensor's convention was set wrong and is corrected at rest: no load stays no load, in
    every orientation (the weight now compensated with the right sign)."""
    m, com = 0.8, np.array([0.0, 0.02, 0.05])
    o = rng.normal(size=6)
    R_s = rot(rng)
    old = WrenchFilter(tool_mass=m, tool_com=com, sign="robot_on_tool")
    rest = physical_reading(np.zeros(6), m, com, R_s, "tool_on_robot") + o
    old.zero(rest, R_s)
    new = WrenchFilter(tool_mass=m, tool_com=com, sign="tool_on_robot")
    carry_bias(old, new, rest, R_s)
    for _ in range(3):
        R = rot(rng)
        np.testing.assert_allclose(new.apply(physical_reading(np.zeros(6), m, com, R, "tool_on_robot") + o, R,
                                             0.002), 0, atol=1e-12)


def test_the_compiled_steps_and_the_plain_tool_weight_equal_numpys(rng):
    """The sensor model's steps 3–4 and the rotation to the base (one compiled call) against numpy's calls
    (move_wrench, the deadbands, rotate6) on random mounts, poses and readings, loads below and above the
    deadbands: the same wrench to rounding; the tool's weight in plain floats is ``R.T @ g``'s to the bit."""
    pytest.importorskip("numba")
    from fdcontrol.control import sensing
    from fdcontrol.model.spatial import cross

    assert sensing._steps is not None
    zeroed = 0
    for _ in range(500):
        Rs, R = pin.exp3(rng.normal(size=3)), pin.exp3(rng.normal(size=3))
        f = WrenchFilter(deadband_force=float(rng.uniform(0, 3)), deadband_torque=float(rng.uniform(0, 0.3)),
                         sensor_rotation=Rs, sensor_position=rng.normal(scale=0.1, size=3))
        w = rng.normal(scale=rng.choice([0.5, 5.0]), size=6)
        want = f._steps_numpy(w, R)
        np.testing.assert_allclose(f._steps(w, R), want, rtol=1e-12, atol=1e-12)
        zeroed += int(not want[:3].any()) + int(not want[3:].any())
        m, com = float(rng.uniform(0, 3)), rng.normal(scale=0.1, size=3)
        F = m * (R.T @ sensing.GRAVITY)
        np.testing.assert_array_equal(sensing.tool_weight(m, com, R), np.concatenate((F, cross(com, F))))
    assert 50 < zeroed < 950  # the deadbands do act, and not always


def _reading_by_hand(contact: np.ndarray, m: float, com: np.ndarray, R_s: np.ndarray) -> np.ndarray:
    """robot_on_tool: r = f_S − W with W = [m R_sᵀ g; c × m R_sᵀ g], written out with numpy's cross."""
    F = m * (R_s.T @ G)
    return contact - np.r_[F, np.cross(com, F)]


def test_a_rotation_or_centre_of_mass_given_as_lists_or_in_single_precision_reads_the_same_physics(rng):
    """The sensor model takes any array-like: a tip rotation handed in as nested lists or as float32 (a driver in
    single precision), a centre of mass as a list or a tuple. Each reads the statics written out by hand — the tool's
    weight, the mount, the deadbands, the rotation to the base — like float64 arrays do (to float32's rounding
    where the rotation is float32); the tool's weight with a centre of mass as a list is the same closed form."""
    R_ts, p_ts = rot(rng), np.array([0.01, 0.0, -0.03])
    m, com = 1.3, [0.02, -0.01, 0.05]
    filt = WrenchFilter(tool_mass=m, tool_com=com, deadband_force=0.5, deadband_torque=0.05,
                        sensor_rotation=R_ts, sensor_position=p_ts)
    for _ in range(5):
        R_tip = rot(rng)
        R_s = R_tip @ R_ts
        contact = rng.normal(size=6) * np.r_[np.full(3, 5.0), np.full(3, 0.5)]
        raw = _reading_by_hand(contact, m, np.array(com), R_s)
        F_t = R_ts @ contact[:3]
        tau_t = R_ts @ contact[3:] + np.cross(p_ts, F_t)
        expect = np.r_[R_tip @ _deadband_by_hand(F_t, 0.5), R_tip @ _deadband_by_hand(tau_t, 0.05)]
        np.testing.assert_allclose(filt.apply(raw, R_tip, 0.002), expect, atol=1e-12)
        np.testing.assert_allclose(filt.apply(raw, R_tip.tolist(), 0.002), expect, atol=1e-12)
        np.testing.assert_allclose(filt.apply(raw, R_tip.astype(np.float32), 0.002), expect, atol=1e-5)
        W = m * (R_s.T @ G)
        for c in (com, tuple(com), np.array(com)):
            np.testing.assert_allclose(tool_weight(m, c, R_s), np.r_[W, np.cross(com, W)], atol=1e-12)
            np.testing.assert_allclose(physical_reading(contact, m, c, R_s), raw, atol=1e-12)


def test_the_loops_float64_readings_take_the_one_compiled_call_and_other_inputs_numpys(rng, monkeypatch):
    """As the sensor model documents: float64 arrays of their shapes (what the loop hands in every cycle) take
    the one compiled call for the mount, the deadbands and the rotation to the base, whatever the mount's
    numbers; a rotation given otherwise (lists, float32) takes numpy's calls. Both read the same statics."""
    pytest.importorskip("numba")
    from fdcontrol.control import sensing

    kernel, calls = sensing._steps, []
    assert kernel is not None

    def spy(*args):
        calls.append(1)
        return kernel(*args)

    monkeypatch.setattr(sensing, "_steps", spy)
    for mount in (np.eye(3), rot(rng), [[1, 0, 0], [0, 0, -1], [0, 1, 0]]):  # the last typed as integers
        filt = WrenchFilter(deadband_force=1.0, deadband_torque=0.1, sensor_rotation=mount,
                            sensor_position=[0, 0, 0.05])
        R_ts = np.asarray(mount, dtype=float)
        for _ in range(3):
            R_tip, raw = rot(rng), rng.normal(size=6) * 3
            F_t = R_ts @ raw[:3]
            tau_t = R_ts @ raw[3:] + np.cross([0, 0, 0.05], F_t)
            expect = np.r_[R_tip @ _deadband_by_hand(F_t, 1.0), R_tip @ _deadband_by_hand(tau_t, 0.1)]
            calls.clear()
            np.testing.assert_allclose(filt.apply(raw, R_tip, 0.002), expect, atol=1e-12)
            assert len(calls) == 1
            calls.clear()
            np.testing.assert_allclose(filt.apply(raw, R_tip.tolist(), 0.002), expect, atol=1e-12)
            np.testing.assert_allclose(filt.apply(raw, R_tip.astype(np.float32), 0.002), expect, atol=1e-5)
            assert not calls
