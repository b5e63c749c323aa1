"""Every registered mapping / control law / limit / driver is selectable through the settings,
the API (a real server on 127.0.0.1), the CLI and the dashboard's options — without further code."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from fdcontrol.drivers.registry import DRIVERS
from fdcontrol.integrators import INTEGRATORS
from fdcontrol.laws import LAWS
from fdcontrol.limits import LIMITS
from fdcontrol.mappings import MAPPING_NAMES, MAPPINGS
from fdcontrol.server.main import build_parser
from fdcontrol.server.settings import Settings

from .service import ROOT, Service


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
from fdcontrol.laws import LAWS, Law
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
