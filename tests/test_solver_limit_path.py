"""The FD solver's step at a virtual joint limit (the loop's case: the cycle's Configuration, one Euler step,
Cholesky) gives bit for bit what its general path (before_substep, the integrator, accel, after_substep) gives.

The step reuses work the general path repeats — the Coriolis load when zeroing the locked q̇ leaves its bits as
they were, and the active-set decision's last solve — so the states drawn here cover each case: a locked q̇ of
+0.0 (reused), of −0.0 or nonzero (recomputed at the zeroed q̇), and no joint locked (moving inward)."""

from __future__ import annotations

import numpy as np
import pytest

from fdcontrol import RobotModel, make_mapping
from fdcontrol.loop.solvers import _AccelerationSolver, make_solver
from fdcontrol.model.configuration import Configuration

DT = 1e-3


@pytest.mark.parametrize("name", ["ur10", "fr3"])
def test_fd_step_at_a_limit_equals_the_general_path_bit_for_bit(name: str) -> None:
    robot = RobotModel.load(name)
    rng = np.random.default_rng(5)
    fast, general = (make_solver(make_mapping("fd", robot)) for _ in range(2))
    conf_fast = Configuration(robot, virtual=fast.virtual)  # each solver its own: γ is scheduled on it
    conf_general = Configuration(robot, virtual=general.virtual)
    lo, up = fast.constraints.lower, fast.constraints.upper
    used = {"reused": 0, "zeroed": 0, "free": 0}
    for k in range(600):
        q = rng.uniform(lo, up)
        j = k % robot.dof
        q[j] = (up[j] + 1e-3, lo[j] - 1e-3, up[j], lo[j])[k % 4]  # past or at a virtual limit
        qd, f = rng.normal(scale=1.0, size=robot.dof), rng.normal(scale=30.0, size=6)
        qd[j] = (0.0, -0.0, qd[j], 0.0, 1e-300)[(k // 4) % 5]
        if k % 7 == 0:
            qd[:] = 0.0
        conf_fast.update(q)
        conf_general.update(q.copy())
        got = fast.step(conf_fast.q, qd, f, DT, config=conf_fast)
        want = _AccelerationSolver.step(general, conf_general.q, qd, f, DT, config=conf_general)
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes(), k
        locked = general.constraints.active
        assert np.array_equal(fast.constraints.active, locked), k
        if not locked.any():
            used["free"] += 1
        elif np.where(locked, 0.0, qd).tobytes() == qd.tobytes():
            used["reused"] += 1
        else:
            used["zeroed"] += 1
    assert min(used.values()) > 50, used
