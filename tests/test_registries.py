"""Every registered mapping / control law / limit / integrator / driver is selectable through the
settings, the API (a real server on 127.0.0.1), the CLI and the dashboard's options — without further
code, including the parts an installed plugin registers (entry point group ``fdcontrol.plugins``)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

from fdcontrol.control.laws import LAWS
from fdcontrol.drivers.registry import DRIVERS
from fdcontrol.limits import LIMITS
from fdcontrol.limits.safety import DEFAULT_LIMITS, SafetyLimits, check_limit_names
from fdcontrol.loop.integrators import INTEGRATORS
from fdcontrol.mappings import MAPPING_NAMES, MAPPINGS
from fdcontrol.registry import Registry
from fdcontrol.server.main import build_parser
from fdcontrol.server.settings import Settings

from .service import ROOT, Service
from .waits import HUNG, until


def _choices(flag: str) -> tuple[str, ...]:
    serve = next(a for a in build_parser()._subparsers._group_actions[0].choices.values()
                 if a.prog.endswith("serve"))
    return tuple(next(a for a in serve._actions if f"--{flag}" in a.option_strings).choices)


@pytest.mark.parametrize("name", MAPPINGS.names())
def test_every_mapping_is_a_setting_and_a_cli_choice(name):
    assert Settings(mapping=name).mapping == name
    assert build_parser().parse_args(["serve", "--mapping", name]).mapping == name


@pytest.mark.parametrize("name", LAWS.names())
def test_every_law_is_a_setting_and_a_cli_choice(name):
    assert Settings(mode=name).mode == name
    assert build_parser().parse_args(["serve", "--mode", name]).mode == name


@pytest.mark.parametrize("name", DRIVERS.names())
def test_every_driver_is_a_setting_and_a_cli_value(name):
    assert Settings(driver=name).driver == name
    assert build_parser().parse_args(["serve", "--driver", name]).driver == name


def test_unregistered_names_are_rejected():
    with pytest.raises(ValueError):
        Settings(mode="nonsense")
    with pytest.raises(ValueError):
        Settings(mapping="nonsense")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--mode", "nonsense"])


def test_choices_equal_the_registries():
    assert set(_choices("mapping")) == set(MAPPINGS.names())
    assert _choices("mode") == LAWS.names()


@pytest.fixture(scope="module")
def service():
    svc = Service("--driver", "simulated")
    yield svc
    svc.stop()


def test_options_endpoint_lists_the_registries(service):
    opts = httpx.get(service.url + "/options").json()
    assert [o["name"] for o in opts["mapping"]] == list(MAPPING_NAMES)
    assert [o["name"] for o in opts["mode"]] == list(LAWS.names())
    assert [o["name"] for o in opts["limit"]] == list(LIMITS.names())
    assert [o["name"] for o in opts["driver"]] == list(DRIVERS.names())
    assert all(o["description"] for family in opts.values() for o in family)


def test_every_mapping_and_law_through_patch_config(service):
    http = httpx.Client(base_url=service.url)
    for name in MAPPINGS.names():
        r = http.patch("/config", json={"mapping": name})
        assert r.status_code == 200, r.text
        assert http.get("/config").json()["mapping"] == name
    for name in LAWS.names():
        r = http.patch("/config", json={"mode": name})
        assert r.status_code == 200, r.text
        assert http.get("/config").json()["mode"] == name
    assert http.patch("/config", json={"mode": "nonsense"}).status_code == 422


DUMMIES = """
import json
from fdcontrol.control.laws import LAWS, Law
from fdcontrol.mappings import MAPPINGS, JacobianTranspose

@MAPPINGS.register("dummy_mapping")
class DummyMapping(JacobianTranspose):
    '''A mapping registered by a test.'''

@LAWS.register("dummy_law")
class DummyLaw(Law):
    '''f_c = f_applied (a law registered by a test).'''
    terms = ()

from fastapi.testclient import TestClient
from fdcontrol.server.main import build_parser
from fdcontrol.server.app import create_app
from fdcontrol.server.settings import Settings

app = create_app(Settings(driver="simulated"))
props = Settings.model_json_schema()["properties"]
openapi = json.dumps(app.openapi())
args = build_parser().parse_args(["serve", "--mapping", "dummy_mapping", "--mode", "dummy_law"])
client = TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 50000))
options = client.get("/options").json()  # no lifespan: the loop is not started
print(json.dumps({
    "settings": [Settings(mapping="dummy_mapping", mode="dummy_law").mapping, props["mode"]],
    "openapi": ["dummy_mapping" in openapi, "dummy_law" in openapi],
    "cli": [args.mapping, args.mode],
    "options": [[o["name"] for o in options["mapping"]], [o["name"] for o in options["mode"]]],
}))
"""


def test_registered_dummies_reach_settings_openapi_cli_and_options():
    out = subprocess.run([sys.executable, "-c", DUMMIES], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["settings"][0] == "dummy_mapping"
    assert "dummy_law" in json.dumps(got["settings"][1])
    assert got["openapi"] == [True, True]
    assert got["cli"] == ["dummy_mapping", "dummy_law"]
    assert "dummy_mapping" in got["options"][0]
    assert "dummy_law" in got["options"][1]


@pytest.mark.parametrize("name", sorted(INTEGRATORS))
def test_every_integrator_is_a_setting(name):
    assert Settings(integrator=name).integrator == name


# ---------------------------------------------------------------------------------- plugins
PLUGIN = '''"""A plugin: one mapping, one control law, one limit and one integrator, registered on import."""
from __future__ import annotations

from dataclasses import dataclass

from fdcontrol.loop.integrators import INTEGRATORS, SemiImplicitEuler
from fdcontrol.control.laws import LAWS, Law
from fdcontrol.limits import LIMITS, Limit
from fdcontrol.mappings import MAPPINGS, JacobianTranspose


@MAPPINGS.register("plugin_jt")
class PluginTranspose(JacobianTranspose):
    """The Jacobian transpose, registered by a plugin."""


@LAWS.register("plugin_admittance")
class PluginAdmittance(Law):
    """f_c = f_applied, registered by a plugin."""

    terms = ()


@INTEGRATORS.register("plugin_euler")
class PluginEuler(SemiImplicitEuler):
    """Semi-implicit Euler, registered by a plugin."""

    name = "plugin_euler"


@LIMITS.register("joint0_cap")
@dataclass
class Joint0Cap(Limit):
    """|q̇_0| ≤ 0.05 rad/s: the first joint's envelope and hard box (a plugin limit)."""

    cap: float = 0.05  # rad/s
    name = "joint0_cap"

    def validate(self) -> None:
        if not self.cap > 0:
            raise ValueError("cap must be > 0")

    def apply(self, c, qd):
        cap = self.cap
        c.lo[0], c.hi[0] = max(c.lo[0], -cap), min(c.hi[0], cap)
        c.hard_lo[0], c.hard_hi[0] = max(c.hard_lo[0], -cap), min(c.hard_hi[0], cap)
        hit = abs(qd[0]) > cap
        qd[0] = min(max(qd[0], -cap), cap)
        return hit
'''
CAP = 0.05
PLUGIN_NAMES = {"mapping": "plugin_jt", "mode": "plugin_admittance", "limit": "joint0_cap",
                "integrator": "plugin_euler"}


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory):
    """A directory for PYTHONPATH holding the plugin module and its distribution's metadata
    (what ``pip install`` of a package with a ``fdcontrol.plugins`` entry point leaves)."""
    d = tmp_path_factory.mktemp("plugin")
    (d / "fdcontrol_testplugin.py").write_text(PLUGIN)
    info = d / "fdcontrol_testplugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fdcontrol-testplugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[fdcontrol.plugins]\ntestplugin = fdcontrol_testplugin\n")
    return d


def _plugin_env(plugin_dir, **extra: str) -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(plugin_dir), **extra}


PLUGIN_SETTINGS = """
import json, os, sys
import yaml
from fdcontrol.server.main import build_parser
from fdcontrol.server.settings import Settings, load_settings

names = json.loads(sys.argv[1])
limits = ["joint0_cap", "position", "velocity", "acceleration"]  # any order; composed in the limits' order
direct = Settings(mapping=names["mapping"], mode=names["mode"], integrator=names["integrator"], limits=limits)
env = Settings()  # FDCONTROL_INTEGRATOR and FDCONTROL_LIMITS from the environment
path = sys.argv[2]
with open(path, "w") as f:
    yaml.safe_dump({"mapping": names["mapping"], "mode": names["mode"], "integrator": names["integrator"],
                    "limits": limits}, f)
for k in ("FDCONTROL_INTEGRATOR", "FDCONTROL_LIMITS"):  # the environment would override the YAML
    del os.environ[k]
from_yaml = load_settings(path)
args = build_parser().parse_args(["serve", "--mapping", names["mapping"], "--mode", names["mode"],
                                  "--integrator", names["integrator"], "--limits", ",".join(limits)])
analyze = build_parser().parse_args(["analyze", "--q=0,0,0,0,0,0", "--mapping", names["mapping"]])
print(json.dumps({
    "direct": [direct.mapping, direct.mode, direct.integrator, direct.limits],
    "env": [env.integrator, env.limits],
    "yaml": [from_yaml.mapping, from_yaml.mode, from_yaml.integrator, from_yaml.limits],
    "cli": [args.mapping, args.mode, analyze.mapping, args.integrator, args.limits],
}))
"""


def test_plugin_parts_reach_the_settings_env_yaml_and_the_cli(plugin_dir, tmp_path):
    """An installed plugin (entry point group fdcontrol.plugins) registers a mapping, a law, a limit and an
    integrator; the settings (direct, environment, YAML) and the CLI accept them — no change to fdcontrol."""
    env = _plugin_env(plugin_dir, FDCONTROL_INTEGRATOR="plugin_euler",
                      FDCONTROL_LIMITS='["position", "velocity", "acceleration", "joint0_cap", "cartesian"]')
    out = subprocess.run([sys.executable, "-c", PLUGIN_SETTINGS, json.dumps(PLUGIN_NAMES), str(tmp_path / "c.yaml")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    ordered = ["position", "velocity", "joint0_cap", "acceleration"]  # order 35: before the acceleration limit
    assert got["direct"] == ["plugin_jt", "plugin_admittance", "plugin_euler", ordered]
    assert got["env"] == ["plugin_euler", ["cartesian", *ordered]]
    assert got["yaml"] == got["direct"]
    assert got["cli"] == ["plugin_jt", "plugin_admittance", "plugin_jt", "plugin_euler",
                          ["joint0_cap", "position", "velocity", "acceleration"]]
    helped = subprocess.run([sys.executable, "-m", "fdcontrol.server", "serve", "--help"], cwd=ROOT,
                            env=_plugin_env(plugin_dir), capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0, helped.stderr
    assert all(n in helped.stdout for n in ("plugin_jt", "plugin_admittance", "plugin_euler", "joint0_cap"))
    plain = subprocess.run([sys.executable, "-m", "fdcontrol.server", "serve", "--help"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert "plugin_jt" not in plain.stdout  # the plugin, not the test, brought the names


def _push_joint0(http: httpx.Client, fy: float, seconds: float) -> tuple[float, bool]:
    """Stream a tip force along base y (turns the first joint) for `seconds` of the loop's own clock (its
    state's stamp); the largest |q̇_ref,0| seen in the published state and whether the plugin limit reported
    acting. The deadline only ends a hung test."""
    peak, acted = 0.0, False
    t0 = http.get("/state").json()["stamp"]
    deadline = time.monotonic() + HUNG
    while True:
        assert http.put("/control/wrench", json={"wrench": [0, fy, 0, 0, 0, 0]}).status_code == 200
        s = http.get("/state").json()
        assert s["fault"] is None, s["fault"]
        peak = max(peak, abs(s["qd_ref"][0]))
        acted |= s["limits_active"].get("joint0_cap", False)
        if s["stamp"] - t0 >= seconds:
            return peak, acted
        assert time.monotonic() < deadline, s["stamp"] - t0
        time.sleep(0.02)


def _rest(http: httpx.Client) -> None:
    until(lambda: http.get("/state").json(), lambda s: max(map(abs, s["qd_ref"])) <= 1e-6, what="at rest")


def test_plugin_parts_through_the_real_service(plugin_dir, tmp_path):
    """The real service (uvicorn on 127.0.0.1, loop process) with the plugin installed: GET /options,
    the OpenAPI schema and PATCH /config offer and accept its parts; the loop runs with each, and the
    plugin limit, added at run time, caps the first joint's velocity reference in the published state."""
    config = tmp_path / "plugin.yaml"
    config.write_text("mode: plugin_admittance\nintegrator: plugin_euler\n")
    svc = Service("--driver", "simulated", "--config", str(config), env={"PYTHONPATH": str(plugin_dir)})
    try:
        http = httpx.Client(base_url=svc.url, timeout=10)
        opts = http.get("/options").json()
        for family, name in PLUGIN_NAMES.items():
            assert name in [o["name"] for o in opts[family]], family
        assert {o["name"]: o["required"] for o in opts["limit"]}["joint0_cap"] == ""
        params = http.get("/openapi.json").json()["components"]["schemas"]["ControlParams"]["properties"]
        enums = {k: json.dumps(params[k]) for k in ("mapping", "mode", "integrator", "limits")}
        assert "plugin_jt" in enums["mapping"] and "plugin_admittance" in enums["mode"]
        assert "plugin_euler" in enums["integrator"] and "joint0_cap" in enums["limits"]
        cfg = http.get("/config").json()
        assert (cfg["mode"], cfg["integrator"], cfg["limits"]) == (
            "plugin_admittance", "plugin_euler", list(check_limit_names(DEFAULT_LIMITS)))

        # without the plugin limit the push turns the first joint faster than the cap
        free, acted = _push_joint0(http, 30.0, 1.0)
        assert free > 3 * CAP and not acted, free
        _rest(http)
        r = http.patch("/config", json={"limits": [*cfg["limits"], "joint0_cap"]})
        assert r.status_code == 200, r.text
        got = r.json()["limits"]  # composed in the limits' order: the cap (order 35) before the acceleration limit
        assert sorted(got) == sorted([*cfg["limits"], "joint0_cap"])
        assert got.index("velocity") < got.index("joint0_cap") < got.index("acceleration")
        capped, acted = _push_joint0(http, -30.0, 1.0)
        assert acted and CAP * 0.9 <= capped <= CAP + 1e-12, capped
        _rest(http)

        # the plugin mapping runs the loop too; the plugin limit, added at run time, may go again
        r = http.patch("/config", json={"mapping": "plugin_jt", "limits": cfg["limits"]})
        assert r.status_code == 200, r.text
        cycle = http.get("/state").json()["cycle"]
        deadline = time.monotonic() + 5
        while http.get("/state").json()["cycle"] < cycle + 50 and time.monotonic() < deadline:
            time.sleep(0.02)
        s = http.get("/state").json()
        assert s["cycle"] >= cycle + 50 and s["fault"] is None and s["mode"] == "plugin_admittance"
    finally:
        svc.stop()


def _msgs(r: httpx.Response) -> str:
    assert r.status_code == 422, r.text
    return " ".join(e["msg"] for e in r.json()["detail"])


def test_unknown_names_get_a_422_listing_the_registered_ones(service):
    http = httpx.Client(base_url=service.url)
    for field, registry in (("mapping", MAPPINGS), ("mode", LAWS), ("integrator", INTEGRATORS)):
        msg = _msgs(http.patch("/config", json={field: "nonsense"}))
        assert all(repr(n) in msg for n in registry.names()), (field, msg)
    msg = _msgs(http.patch("/config", json={"limits": ["position", "velocity", "acceleration", "nonsense"]}))
    assert all(repr(n) in msg for n in LIMITS.names()), msg


def test_limits_may_be_added_at_run_time_never_removed(service):
    """The startup set (the four) may grow; required limits say why they stay; others: removing loosens."""
    http = httpx.Client(base_url=service.url)
    start = http.get("/config").json()["limits"]
    assert start == list(check_limit_names(DEFAULT_LIMITS))  # the defaults, in their composition order
    for name in ("position", "velocity", "acceleration"):
        msg = _msgs(http.patch("/config", json={"limits": [n for n in start if n != name]}))
        assert f"'{name}' limit may not be left out" in msg and LIMITS.get(name).required in msg, msg
    msg = _msgs(http.patch("/config", json={"limits": [n for n in start if n != "cartesian"]}))
    assert "may not remove cartesian at run time" in msg, msg
    assert _msgs(http.patch("/config", json={"limits": [*start, "velocity"]}))  # twice
    assert http.get("/config").json()["limits"] == start
    r = http.patch("/config", json={"limits": list(reversed(start))})  # any order: the composition order
    assert r.status_code == 200 and r.json()["limits"] == start


def test_required_limits_in_settings_and_library(ur10):
    for name in ("position", "velocity", "acceleration"):
        rest = [n for n in ("cartesian", "position", "velocity", "acceleration") if n != name]
        with pytest.raises(ValueError, match=f"'{name}' limit may not be left out"):
            Settings(limits=rest)
        with pytest.raises(ValueError, match="may not be left out"):
            SafetyLimits.from_robot(ur10, limits=rest)
    assert Settings(limits=["position", "velocity", "acceleration"]).limits == ["position", "velocity",
                                                                               "acceleration"]


def test_the_cartesian_limit_may_be_left_out(ur10):
    """Without it the tip may exceed max_linear_speed (independent check: ‖J q̇‖), with it not."""
    q = np.array([0.1, -1.2, 1.5, -0.3, 1.2, 0.4])
    J = ur10.jacobian(q)
    qd = 0.3 * ur10.limits.velocity  # inside the velocity limit (half of the URDF's)
    both = [SafetyLimits.from_robot(ur10, limits=names, max_acceleration=1e6)
            for names in (("position", "velocity", "acceleration"), DEFAULT_LIMITS)]
    assert both[0].names == ("position", "velocity", "acceleration") and both[0].max_linear_speed == math.inf
    speeds = [np.linalg.norm((J @ lim.apply(q, qd, qd, J, 0.002))[:3]) for lim in both]
    assert speeds[0] == pytest.approx(np.linalg.norm((J @ qd)[:3])) and speeds[0] > 0.5
    assert speeds[1] <= 0.5 + 1e-9
    with pytest.raises(ValueError, match="not composed"):
        both[0].max_linear_speed = 0.3


def test_integrators_are_a_registry_listed_in_options(service):
    assert isinstance(INTEGRATORS, Registry) and set(INTEGRATORS.names()) >= {"euler", "rk4", "bs32"}
    opts = httpx.get(service.url + "/options").json()
    assert [o["name"] for o in opts["integrator"]] == list(INTEGRATORS.names())
    assert [o["name"] for o in opts["limit"]] == list(LIMITS.names())


BROKEN = """
import warnings, json
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from fdcontrol.registry import load_plugins
    from fdcontrol.server.settings import Settings
    Settings(mode="admittance")
print(json.dumps({"plugins": load_plugins(), "warnings": [str(w.message) for w in caught]}))
"""


def test_a_broken_plugin_is_reported_and_the_rest_starts(tmp_path):
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('boom')\n")
    info = tmp_path / "broken_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[fdcontrol.plugins]\nbroken = broken_plugin\n")
    out = subprocess.run([sys.executable, "-c", BROKEN], cwd=ROOT, env=_plugin_env(tmp_path), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["plugins"] == {"broken": "RuntimeError: boom"}
    assert any("'broken'" in w and "boom" in w for w in got["warnings"]), got


def test_dashboard_offers_the_integrators_and_limits(service):
    """In a real headless browser: the integrator select and one checkbox per limit come from
    GET /options (required ones fixed on); Apply adds a limit, and removing a startup one is refused."""
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    if chromium is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium; .ci/run installs it)")
    http = httpx.Client(base_url=service.url)
    start = http.get("/config").json()["limits"]
    assert start == list(check_limit_names(DEFAULT_LIMITS))  # the defaults, in their composition order
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--headless=new", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(service.url + "/")
        page.wait_for_function("window.dashboard.config !== null")
        options = page.evaluate("[...document.querySelectorAll('#integrator option')].map(o => o.value)")
        assert options == list(INTEGRATORS.names())
        boxes = page.evaluate("[...document.querySelectorAll('#limit-set input')].map("
                              "b => [b.value, b.checked, b.disabled])")
        assert [b[0] for b in boxes] == list(LIMITS.names())
        # the started set checked (an optional limit, e.g. jerk, is not on by default)
        assert all(checked == (n in start) and disabled == bool(LIMITS.get(n).required)
                   for n, checked, disabled in boxes)
        page.select_option("#integrator", "rk4")
        page.click("#btn-apply")
        page.wait_for_function("document.getElementById('config-msg').textContent.startsWith('applied')")
        assert http.get("/config").json()["integrator"] == "rk4"
        page.uncheck("#limit-set input[value=cartesian]")
        page.click("#btn-apply")
        page.wait_for_function("document.getElementById('config-msg').textContent.includes('may not remove')")
        browser.close()
    cfg = http.get("/config").json()
    assert cfg["limits"] == start
    assert http.patch("/config", json={"integrator": "euler"}).status_code == 200
