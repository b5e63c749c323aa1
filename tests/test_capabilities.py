"""Solvers and laws are registries; every mapping reads J (and H) from the cycle's Configuration; the
optional parts of drivers, solvers and integrators are typed base-class attributes with defaults,
which the loop reads without getattr/hasattr probes."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from fdcontrol import RobotModel, make_mapping
from fdcontrol.control.law import ControlLaw
from fdcontrol.control.laws import LAWS, ControlInput, ForceTerm, Law, MotionTerm
from fdcontrol.drivers import JointState, RobotDriver, SimulatedRobot
from fdcontrol.drivers.registry import DRIVERS
from fdcontrol.loop import cycle, solvers
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.integrators import INTEGRATORS, Integrator
from fdcontrol.loop.solvers import SOLVERS, ForwardDynamicsSolver, Solver, VelocitySolver, make_solver
from fdcontrol.mappings import MAPPINGS, JacobianTranspose, Mapping
from fdcontrol.model.configuration import Configuration

Q0 = np.array([0.3, -1.2, 1.6, -1.9, -1.4, 0.2])
DT = 0.002


@pytest.fixture(scope="module")
def ur10():
    return RobotModel.resolve("ur10")


def _qs(robot, n=5, seed=4):
    rng = np.random.default_rng(seed)
    lo, hi = robot.limits.lower, robot.limits.upper
    return [np.clip(Q0 + rng.normal(scale=0.4, size=robot.dof), lo + 0.1, hi - 0.1) for _ in range(n)]


# ---------------------------------------------------------------------- solvers: a registry
def test_every_mapping_has_a_registered_solver(ur10):
    assert set(SOLVERS.names()) >= {"forward_dynamics", "transpose", "velocity"}
    for name in MAPPINGS.names():
        m = make_mapping(name, ur10)
        s = make_solver(m)
        assert type(s) is SOLVERS.get(m.solver) and isinstance(s, Solver) and s.mapping is m


def test_a_registered_solver_family_is_dispatched_with_the_options(ur10):
    built = {}

    @SOLVERS.register("test_family")
    class Recorder(VelocitySolver):
        @classmethod
        def build(cls, mapping, integrator=None, *, decay, joint_damping, **rest):
            built.update(decay=decay, joint_damping=joint_damping, **rest)
            return cls(mapping, decay)

    class Custom(JacobianTranspose):
        solver = "test_family"

    try:
        s = make_solver(Custom(ur10), decay=7.0, joint_damping=0.5, substeps=3)
        assert type(s) is Recorder and s.decay == 7.0
        assert built["decay"] == 7.0 and built["joint_damping"] == 0.5 and built["substeps"] == 3
    finally:
        del SOLVERS._entries["test_family"]

    class Orphan(JacobianTranspose):
        solver = "no_such_family"

    with pytest.raises(ValueError, match="forward_dynamics, transpose, velocity"):
        make_solver(Orphan(ur10))
    with pytest.raises(ValueError, match="FD mapping"):
        ForwardDynamicsSolver.build(JacobianTranspose(ur10))


# ---------------------------------------------------------------------- mappings read the Configuration
@pytest.mark.parametrize("name", ["ji", "jt", "dls", "sdls", "fd"])
def test_the_mapping_from_the_configuration_equals_its_own_pass(ur10, name, monkeypatch):
    m = make_mapping(name, ur10)
    for q in _qs(ur10):
        own = m.joint_space(q)
        conf = Configuration(ur10, q, virtual=getattr(m, "virtual", None))
        # from the configuration: no second kinematics (or dynamics) pass of the mapping's own
        with monkeypatch.context() as mp:
            mp.setattr(RobotModel, "jacobian", lambda *a, **k: pytest.fail("recomputed J"))
            if name == "fd":
                mp.setattr(type(m.virtual), "joint_space", lambda *a, **k: pytest.fail("recomputed H"))
            got = m.joint_space_at(conf)
        assert np.allclose(got, own, rtol=1e-9, atol=1e-12 * np.abs(own).max()), name


def test_fd_from_the_configuration_is_h_inverse_j_transpose(ur10):
    """Independent of both code paths: numpy's inverse of the CRBA inertia times Jᵀ."""
    import pinocchio as pin

    m = make_mapping("fd", ur10, gamma=1e3)
    for q in _qs(ur10, 3):
        conf = Configuration(ur10, q, virtual=m.virtual)
        vm = m.virtual
        d = vm.model.createData()
        H = pin.crba(vm.model, d, q)
        H = np.triu(H) + np.triu(H, 1).T
        assert np.allclose(m.joint_space_at(conf), np.linalg.solve(H, conf.jacobian.T), rtol=1e-8)


@pytest.mark.parametrize("name", ["ji", "dls", "sdls"])
def test_the_velocity_solver_uses_the_cycle_jacobian(ur10, name, monkeypatch):
    s = make_solver(make_mapping(name, ur10))
    f = np.array([3.0, -2.0, 1.0, 0.2, -0.1, 0.05])
    for q in _qs(ur10, 3):
        plain = s.step(q, np.zeros(ur10.dof), f, DT)
        conf = Configuration(ur10, q)
        with monkeypatch.context() as mp:
            mp.setattr(RobotModel, "jacobian", lambda *a, **k: pytest.fail("recomputed J"))
            shared = s.step(conf.q, np.zeros(ur10.dof), f, DT, config=conf)
        assert np.allclose(shared[1], plain[1], rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------- optional parts: typed defaults
class Minimal(RobotDriver):
    """Only what a driver must have: read and send."""

    def __init__(self, robot: RobotModel) -> None:
        self.dof, self.q, self.sent = robot.dof, Q0.copy(), 0

    def read(self) -> JointState:
        return JointState(self.q.copy(), np.zeros(self.dof), 0.0)

    def send(self, q_ref, qd_ref) -> None:
        self.sent += 1
        self.q = self.q + DT * qd_ref


def test_a_driver_has_every_optional_part_by_default(ur10):
    d = Minimal(ur10)
    assert d.interface == "velocity" and not d.simulated and d.tool is None
    assert math.isnan(d.speed_scaling) and d.safety_mode is None
    assert d.read_wrench() is None and d.zero_sensor() is None and not d.has_exchange
    loop = ControlLoop(ur10, d, make_solver(make_mapping("fd", ur10)), rate=1 / DT)
    loop.zero_sensor()
    for i in range(5):
        s = loop.step(now=i * DT)
    assert d.sent == 5 and s.fault is None and math.isnan(s.speed_scaling) and s.safety_mode is None
    assert loop.exchange is None


def test_the_loop_reads_overridden_parts(ur10):
    class Servo(Minimal):
        interface = "position"
        speed_scaling = 0.25
        safety_mode = "REDUCED"

        def __init__(self, robot):
            super().__init__(robot)
            self.exchanged, self.zeroed = 0, 0

        def exchange(self, loop, state):
            self.exchanged += 1

        def zero_sensor(self):
            self.zeroed += 1

        def read_wrench(self):
            return np.zeros(6)

    d = Servo(ur10)
    loop = ControlLoop(ur10, d, make_solver(make_mapping("fd", ur10)), rate=1 / DT)
    loop.zero_sensor()
    for i in range(3):
        s = loop.step(now=i * DT)
    assert d.has_exchange and d.exchanged == 3 and d.zeroed == 1  # zeroed once: the filter took the bias
    assert s.speed_scaling == 0.25 and s.safety_mode == "REDUCED"
    # the position interface integrates its own reference: where the robot's controller drives the joints
    # is the reference the loop sent last (the driver reports none of its own)
    np.testing.assert_array_equal(loop.commanded_position(), s.q_ref)


def test_parts_that_are_not_of_the_base_classes_are_refused(ur10):
    class Duck:
        dof = 6

        def read(self):
            return JointState(Q0, np.zeros(6), 0.0)

        def send(self, q_ref, qd_ref):
            pass

    solver = make_solver(make_mapping("fd", ur10))
    with pytest.raises(TypeError, match="RobotDriver"):
        ControlLoop(ur10, Duck(), solver)

    class DuckSolver:
        mapping = None

        def step(self, q, qd, f, dt):
            return q, qd

    loop = ControlLoop(ur10, SimulatedRobot(ur10, dt=DT, q0=Q0), solver, rate=1 / DT)
    with pytest.raises(TypeError, match="Solver"):
        loop.reconfigure(solver=DuckSolver())
    with pytest.raises(TypeError, match="Solver"):
        ControlLoop(ur10, SimulatedRobot(ur10, dt=DT, q0=Q0), DuckSolver())


def test_registered_drivers_and_integrators_are_of_the_base_classes():
    for name in DRIVERS.names():
        try:
            cls = DRIVERS.get(name)
        except ValueError:  # an optional dependency missing here
            continue
        assert issubclass(cls, RobotDriver), name
    for name in INTEGRATORS.names():
        integ = INTEGRATORS.get(name)()
        assert isinstance(integ, Integrator) and isinstance(integ.last_converged, bool), name


@pytest.mark.parametrize("module", [cycle, solvers])
def test_the_loop_and_the_solvers_probe_nothing(module):
    """No getattr/hasattr in the loop's cycle or the solvers: every optional part is declared."""
    tree = ast.parse(Path(module.__file__).read_text())
    probes = [f"line {n.lineno}: {n.func.id}" for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr")]
    assert probes == []


# ---------------------------------------------------------------------- laws: registered classes
def test_a_law_adds_its_terms(ur10):
    rng = np.random.default_rng(1)
    pose, target = ur10.pose(Q0), ur10.pose(Q0 + 0.05)
    x = ControlInput(pose, rng.normal(size=6), rng.normal(size=6), rng.normal(size=6), target)
    force, motion = ForceTerm(), MotionTerm()
    R = np.eye(3)
    expected = {"admittance": x.f_applied, "force": x.f_applied + force(x, R),
                "motion": x.f_applied + motion(x, R), "compliance": x.f_applied + motion(x, R) + force(x, R)}
    for mode, f in expected.items():
        assert np.allclose(ControlLaw(mode=mode, force=ForceTerm(), motion=MotionTerm())(x), f), mode


def test_a_registered_law_runs_and_a_law_naming_terms_must_add_them():
    @LAWS.register("test_offset")
    class Offset(Law):
        """f_c = f_applied + 2 N along z (a law registered by a test)."""

        terms = ("offset",)

        def add(self, terms, x, R, f):
            f[2] += 2.0

    try:
        x = ControlInput(np.eye(4), np.zeros(6), np.zeros(6), np.ones(6), None)
        assert ControlLaw(mode="test_offset")(x).tolist() == [1, 1, 3, 1, 1, 1]
    finally:
        del LAWS._entries["test_offset"]
    with pytest.raises(TypeError, match="add"):
        class Forgot(Law):
            terms = ("force",)


def test_mapping_base_defaults(ur10):
    assert not Mapping.solves_displacement and MAPPINGS.get("sdls").solves_displacement

    class OwnPass(Mapping):  # a mapping that only says M(q): still usable by the velocity solver
        def joint_space(self, q):
            return 2.0 * self.robot.jacobian(q).T

    m = OwnPass(ur10)
    conf = Configuration(ur10, Q0)
    assert np.allclose(m.joint_space_at(conf), 2.0 * conf.jacobian.T)
    f = np.array([1.0, 0, 0, 0, 0, 0])
    assert np.allclose(VelocitySolver(m, decay=10.0).step(conf.q, np.zeros(6), f, DT, config=conf)[1],
                       2.0 * conf.jacobian.T @ f / 10.0)
