from __future__ import annotations

import numpy as np
import pytest

from fdcontrol import RobotModel


@pytest.fixture(scope="session")
def ur10() -> RobotModel:
    return RobotModel.load("ur10")


@pytest.fixture(scope="session")
def panda() -> RobotModel:
    return RobotModel.load("panda")


@pytest.fixture(scope="session")
def planar2() -> RobotModel:
    return RobotModel.load("planar2")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


def nonsingular_q(robot: RobotModel, rng: np.random.Generator, min_sigma: float = 0.05):
    """A random configuration whose Jacobian's σmin exceeds `min_sigma`."""
    while True:
        q = robot.random_q(rng)
        if np.linalg.svd(robot.jacobian(q), compute_uv=False)[-1] > min_sigma:
            return q


@pytest.fixture(scope="module")
def browser():
    """A headless chromium (Playwright) for a module's browser tests (they skip without one)."""
    from .test_dashboard import CHROMIUM, FLAGS, sync_playwright

    if CHROMIUM is None or sync_playwright is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium; .ci/run installs it) and playwright")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()
