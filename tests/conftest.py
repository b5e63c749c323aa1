from __future__ import annotations

import os

import numpy as np
import pytest

from fdcontrol import RobotModel

if os.environ.get("FDCONTROL_MUTATION"):  # set by scripts/mutation.py (make mutation)
    # a property test that fails has killed its mutant: no shrinking of the example (it can take minutes per
    # mutant) and no example database shared between mutants
    from hypothesis import Phase, settings

    settings.register_profile("mutation", phases=(Phase.explicit, Phase.reuse, Phase.generate), database=None)
    settings.load_profile("mutation")


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


#: what makes a test module slow: it starts the service, a simulator, another process or a browser, or
#: steps MuJoCo physics. `make test PYTEST_ARGS='-m "not slow"'` leaves those out (the inner loop's quick
#: subset); the full suite, which CI runs, has them all.
SLOW_SIGNS = ("from .service import", "from tests.service import", "subprocess", "franky", "browser",
              "mujoco", "MuJoCo", "ros2_peer", "rdt_peer", "ServiceEnv", "SimEnv", "experiments")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: starts the service, a simulator, a process or a browser, or "
                            "steps MuJoCo (left out by -m 'not slow')")
    config._fdcontrol_required = required()  # REQUIRE=...: skips that are failures (below)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow: dict[str, bool] = {}
    for item in items:
        path = str(item.path)
        if path not in slow:
            try:
                text = item.path.read_text()
            except OSError:
                text = ""
            slow[path] = any(sign in text for sign in SLOW_SIGNS)
        if slow[path]:
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """One line when the dashboard's browser tests did not run (no chromium), so a green run says so."""
    skipped = terminalreporter.stats.get("skipped", [])
    browser = [r for r in skipped if "chromium" in str(getattr(r, "longrepr", ""))]
    if browser:
        terminalreporter.write_line(f"{len(browser)} browser tests did not run: no chromium here "
                                    "(`make test` installs it where it runs as root with apt-get)", yellow=True)


# ---------------------------------------------------------------------- required skips (CI)
# A test that skips because the machine lacks something (a browser, SCHED_FIFO, an extra) is a
# pass that checked nothing. CI says what it made available: REQUIRE=browser,fifo,extras — and
# a skip for one of those reasons is then a failure (.ci/run sets it after installing chromium,
# probing SCHED_FIFO, installing every extra).
REQUIRE_REASONS = {
    "browser": ("chromium", "playwright"),
    "fifo": ("SCHED_FIFO", "CAP_SYS_NICE"),
    "extras": ("could not import", "is not installed", "needs pylibfranka", "needs franky-sim", "(test extra)"),
    "lerobot": ("needs LeRobot",),  # tests/lerobot: LeRobot in its own venv (make test-lerobot)
}


def required() -> set[str]:
    """The categories named in $REQUIRE (comma-separated); an unknown name is an error, not ignored."""
    import os

    names = {x.strip() for x in os.environ.get("REQUIRE", "").split(",") if x.strip()}
    unknown = names - set(REQUIRE_REASONS)
    if unknown:
        raise pytest.UsageError(f"REQUIRE: unknown {sorted(unknown)}; known: {sorted(REQUIRE_REASONS)}")
    return names


def required_category(reason: str, names: set[str]) -> str | None:
    """The required category a skip's reason belongs to, if any."""
    for name in sorted(names):
        if any(word.lower() in reason.lower() for word in REQUIRE_REASONS[name]):
            return name
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not hasattr(rep, "wasxfail"):
        _fail_if_required(rep, item.config, "required test skipped")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a whole module that skips at import (``pytest.importorskip`` at module level)."""
    outcome = yield
    rep = outcome.get_result()
    _fail_if_required(rep, collector.config, "required tests skipped")


def _fail_if_required(rep, config, what: str) -> None:
    """A skip whose reason is in a REQUIRE'd category becomes a failure that says so."""
    names = getattr(config, "_fdcontrol_required", set())
    if not names or not rep.skipped:
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    category = required_category(reason, names)
    if category is not None:
        rep.outcome = "failed"
        rep.longrepr = f"{what} (REQUIRE includes {category!r}): {reason}"
