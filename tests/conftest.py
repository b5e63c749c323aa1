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
