"""Configuration against independent computations: RobotModel, finite differences, the
closed form H = JᵀJ + AᵀA/γ (seed 004 eq. 14), pinocchio's ABA and the QR algorithm."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from fdcontrol import RobotModel
from fdcontrol.model.configuration import Configuration
from fdcontrol.model.robot import URDF_DIR, ModelError
from fdcontrol.model.virtual import VirtualModel


@pytest.fixture(scope="module")
def tilted():
    """A chain whose base frame is not the world: UR10 from the shoulder (base rotated and offset)."""
    return RobotModel.from_urdf(URDF_DIR / "ur10.urdf", "upper_arm_link", "tool0")


@pytest.fixture(params=["ur10", "panda", "planar2", "tilted"])
def robot(request):
    return request.getfixturevalue(request.param)


def test_pose_and_jacobian_match_the_robot_model(robot, rng):
    conf = Configuration(robot)
    for _ in range(5):
        q = robot.random_q(rng)
        conf.update(q)
        np.testing.assert_allclose(conf.pose, robot.pose(q), atol=1e-12)
        np.testing.assert_allclose(conf.jacobian, robot.jacobian(q), atol=1e-12)
        np.testing.assert_allclose(conf.position, robot.pose(q)[:3, 3], atol=1e-12)


def test_tilted_base_is_really_tilted(tilted):
    conf = Configuration(tilted)
    assert not np.allclose(conf.base_placement.rotation, np.eye(3))
    assert np.any(conf.base_placement.translation)


def test_jacobian_is_the_derivative_of_the_pose(robot, rng):
    """Central differences of g(q) (seed eq. 2): v = ∂p/∂q, ω from log(R(q+h) R(q−h)ᵀ)/2h."""
    conf = Configuration(robot, robot.random_q(rng))
    h = 1e-6
    for i in range(robot.dof):
        e = np.zeros(robot.dof)
        e[i] = h
        Tp, Tm = robot.pose(conf.q + e), robot.pose(conf.q - e)
        v = (Tp[:3, 3] - Tm[:3, 3]) / (2 * h)
        w = pin.log3(Tp[:3, :3] @ Tm[:3, :3].T) / (2 * h)
        np.testing.assert_allclose(conf.jacobian[:, i], np.r_[v, w], atol=1e-7)
    qd = rng.normal(size=robot.dof)
    np.testing.assert_allclose(conf.twist(qd), conf.jacobian @ qd)


@pytest.mark.parametrize("gamma", [1.0, 1e3, 1e6])
def test_inertia_is_the_closed_form_and_inverts(robot, rng, gamma):
    vm = VirtualModel(robot, gamma)
    conf = Configuration(robot, virtual=vm)
    for _ in range(3):
        q = robot.random_q(rng)
        conf.update(q)
        J, A = robot.jacobian(q), vm.link_jacobians(q)
        H = J.T @ J + A.T @ A / gamma  # seed 004 eq. 14, no CRBA involved
        np.testing.assert_allclose(conf.inertia, H, rtol=1e-9, atol=1e-12 * np.abs(H).max())
        np.testing.assert_allclose(conf.inertia_inverse @ conf.inertia, np.eye(robot.dof), atol=1e-6)
        np.testing.assert_allclose(conf.pose, robot.pose(q), atol=1e-12)
        np.testing.assert_allclose(conf.jacobian, J, atol=1e-12)


def test_refactor_after_a_new_gamma_gives_a_new_updates_bits(robot, rng):
    """γ moved (the schedule's set_gamma): refactor() keeps the kinematics and their decompositions and
    redoes H and its factor — every output the same bits as a full update at the new γ, and H the closed form."""
    vm = VirtualModel(robot, 1e3)
    conf = Configuration(robot, virtual=vm)
    for gamma in (5e4, 1e6, 2e3):
        q = robot.random_q(rng)
        conf.update(q)
        J, pose, s, sv = conf.jacobian, conf.pose, conf.svd, conf.singular_values
        old_H, old_kappa = conf.inertia, conf.kappa_h
        vm.set_gamma(gamma)
        assert conf.refactor() is conf
        assert conf.jacobian is J and conf.pose is pose and conf.svd is s and conf.singular_values is sv
        fresh = Configuration(robot, q, virtual=vm)
        for a, b in ((conf.pose, fresh.pose), (conf.jacobian, fresh.jacobian), (conf.inertia, fresh.inertia),
                     (conf.inertia_inverse, fresh.inertia_inverse), (conf.solve(J[0]), fresh.solve(J[0])),
                     (conf.singular_values, fresh.singular_values), *zip(conf.svd, fresh.svd, strict=True)):
            assert a.tobytes() == b.tobytes()
        assert conf.kappa_h == fresh.kappa_h != old_kappa
        A = vm.link_jacobians(q)
        H = J.T @ J + A.T @ A / gamma  # seed 004 eq. 14, no CRBA involved
        np.testing.assert_allclose(conf.inertia, H, rtol=1e-9, atol=1e-12 * np.abs(H).max())
        assert not np.allclose(conf.inertia, old_H, rtol=1e-12, atol=0)


def test_acceleration_matches_qr_and_aba(robot, rng):
    vm = VirtualModel(robot, 1e3, coriolis=True)
    conf = Configuration(robot, robot.random_q(rng), virtual=vm)
    f = rng.normal(size=6) * [10, 10, 10, 1, 1, 1]
    qd, tau = rng.normal(size=robot.dof), rng.normal(size=robot.dof)
    a_qr = vm.acceleration(conf.q, f, algorithm="qr")
    np.testing.assert_allclose(conf.acceleration(f), a_qr, rtol=1e-7, atol=1e-9)
    a_aba = vm.acceleration(conf.q, f, qd, tau, algorithm="aba")
    got = conf.acceleration(f, tau, conf.bias(qd))
    np.testing.assert_allclose(got, a_aba, rtol=1e-7, atol=1e-9)
    # the stored quantities survive the RNEA call
    np.testing.assert_allclose(conf.jacobian, robot.jacobian(conf.q), atol=1e-12)


def test_telemetry_is_lazy_and_refreshed_by_update(ur10, rng):
    vm = VirtualModel(ur10, 1e3)
    conf = Configuration(ur10, ur10.random_q(rng), virtual=vm)
    assert conf._sv is None and conf._kappa is None  # nothing computed until asked
    q1 = conf.q
    sv = np.linalg.svd(ur10.jacobian(q1), compute_uv=False)
    assert conf.sigma_min == pytest.approx(sv[-1], rel=1e-12)
    assert conf.manipulability == pytest.approx(ur10.manipulability(q1), rel=1e-10)
    assert conf.kappa_h == pytest.approx(np.linalg.cond(vm.inertia(q1)), rel=1e-8)
    q2 = ur10.random_q(rng)
    conf.update(q2)
    assert conf.sigma_min == pytest.approx(np.linalg.svd(ur10.jacobian(q2), compute_uv=False)[-1], rel=1e-12)
    assert conf.kappa_h == pytest.approx(np.linalg.cond(vm.inertia(q2)), rel=1e-8)


def test_errors_name_the_problem(ur10, panda):
    conf = Configuration(ur10)
    with pytest.raises(ModelError, match="virtual"):
        conf.acceleration(np.zeros(6))
    assert np.isnan(conf.kappa_h)
    with pytest.raises(ModelError, match="6 entries"):
        conf.update(np.zeros(7))
    with pytest.raises(ModelError, match="NaN"):
        conf.update(np.full(6, np.nan))
    with pytest.raises(ModelError, match="another robot"):
        Configuration(ur10, virtual=VirtualModel(panda))


def test_update_checks_q_whatever_its_dtypes_identity(ur10, rng):
    """update's fast test takes numpy's own float64 dtype by identity: a q of an equal dtype of another identity
    (one with metadata), a list, an int vector go through the robot's check_q — the same pose and Jacobian —
    and a non-finite q of each kind is refused."""
    a, b = Configuration(ur10), Configuration(ur10)
    q = rng.uniform(-1, 1, 6)
    other = np.dtype(np.float64, metadata={"unit": "rad"})
    assert other == np.float64 and other is not np.dtype(np.float64)
    for given in (q.astype(other), q.tolist(), np.arange(6) - 3):
        a.update(given)
        b.update(np.asarray(given, dtype=float))
        assert np.array_equal(a.pose, b.pose) and np.array_equal(a.jacobian, b.jacobian)
    for bad in (np.full(6, np.nan).astype(other), [0.0] * 5 + [np.inf], np.array([0.0, -np.inf, 0, 0, 0, 0])):
        with pytest.raises(ModelError, match="NaN"):
            a.update(bad)


def test_the_compiled_q_test_is_finites_verdict(ur10, rng, monkeypatch):
    """update's compiled test of q gives spatial.finite's verdict (a finite sum, left to right) on random vectors
    with NaN, ±Inf and sums that overflow, and false for another length; a big-endian float64 q, another
    dtype or a list take check_q. Without numba the plain test answers the same."""
    from fdcontrol.model import configuration as cm
    from fdcontrol.model.spatial import finite

    special = [np.nan, np.inf, -np.inf, 1e308, -1e308, 0.0, -0.0]
    for k in range(3000):
        q = rng.normal(size=6) * 10.0 ** rng.integers(-3, 3, 6)
        for i in rng.integers(0, 6, k % 3):
            q[i] = special[rng.integers(len(special))]
        assert cm._q_ok(q, 6) == cm._q_ok_plain(q, 6) == finite(q), q
        assert not cm._q_ok(q, 7) and not cm._q_ok_plain(q, 7)
    conf, ref = Configuration(ur10), Configuration(ur10)
    q = rng.uniform(-1, 1, 6)
    for given in (q.astype(">f8"), q.astype(np.float32), q[::-1].copy()[::-1]):
        conf.update(given)
        ref.update(np.asarray(given, dtype=float))
        assert np.array_equal(conf.pose, ref.pose) and np.array_equal(conf.jacobian, ref.jacobian)
    monkeypatch.setattr(cm, "_q_ok", cm._q_ok_plain)
    assert np.array_equal(conf.update(q).jacobian, ref.update(q).jacobian)
    with pytest.raises(ModelError, match="NaN"):
        conf.update(np.array([0.0, 0, 0, 0, 0, np.nan]))
    with pytest.raises(ModelError, match="6 entries"):
        conf.update(np.zeros(7))
