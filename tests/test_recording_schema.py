"""The recording's state schema is generated from the LoopState declaration (fdcontrol/loop/state.py):
every field under the same name, kind and shape, the mode's choices from the registry of laws — also
with a plugin law installed (entry point group ``fdcontrol.plugins``), without edits to fdcontrol."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import jsonschema
import numpy as np
import pytest

from fdcontrol.control.laws import LAWS
from fdcontrol.loop.state import FIELDS, NAMES, LoopState
from fdcontrol.recording import STATE_SCHEMA, STATE_TOPIC, TIMING_SCHEMA, Published, Recorder, read_recording

from .service import ROOT


def _state(mode: str = "admittance", dof: int = 6, **kw) -> LoopState:
    rng = np.random.default_rng(3)
    pose = np.eye(4)
    pose[:3, 3] = rng.normal(size=3)
    values = dict(t=0.25, cycle=7, q=rng.normal(size=dof), qd=rng.normal(size=dof), q_ref=rng.normal(size=dof),
                  qd_ref=rng.normal(size=dof), tip_pose=pose, wrench=rng.normal(size=6), f_measured=rng.normal(size=6),
                  mode=mode, running=True, holding=False, watchdog="ok", seq_ack=3, fault=None, sigma_min_j=0.4,
                  limits_active={"velocity": True}, kappa_h=12.0, posture_distance=0.1, link_clearance=math.nan,
                  speed_scaling=0.5, safety_mode="NORMAL")
    values.update(kw)
    return LoopState(**values)


def test_every_loopstate_field_under_its_own_name():
    props = STATE_SCHEMA["properties"]
    assert list(props) == [*NAMES, *TIMING_SCHEMA]
    assert STATE_SCHEMA["required"] == list(props)
    for f in FIELDS:
        assert f.metadata["description"] in props[f.name]["description"], f.name
    assert props["mode"]["enum"] == list(LAWS.names())
    assert props["tip_pose"]["minItems"] == props["tip_pose"]["items"]["minItems"] == 4
    assert set(props["limits_active"]["properties"]) == set(next(f for f in FIELDS
                                                                 if f.name == "limits_active").metadata["choices"])
    jsonschema.Draft202012Validator.check_schema(STATE_SCHEMA)


def test_the_schema_refuses_what_a_state_cannot_be():
    v = jsonschema.Draft202012Validator(STATE_SCHEMA)
    from fdcontrol.recording import state_message

    good = state_message(_state(), 1e-4, 2e-6)
    v.validate(good)
    for name in NAMES:  # every field is required
        assert not v.is_valid({k: x for k, x in good.items() if k != name}), name
    assert not v.is_valid({**good, "tip_pose": good["tip_pose"][:3]})  # 3×4 is not a pose
    assert not v.is_valid({**good, "wrench": good["wrench"][:5]})
    assert not v.is_valid({**good, "mode": "no_such_law"})
    assert not v.is_valid({**good, "cycle": 1.5})
    assert not v.is_valid({**good, "limits_active": {"velocity": "yes"}})


def test_a_recorded_state_round_trips_every_field(tmp_path):
    rec = Recorder()
    rec.start(tmp_path / "s.mcap", {"robot": "ur10"}, {"joint_names": list("abcdef")})
    st = _state(kappa_h=math.nan, fault="x")
    rec.push_state(Published(st, time.monotonic(), 0, -1, 1e-4, 1e-5))
    assert rec.stop()["states"] == 1
    got = read_recording(tmp_path / "s.mcap")
    (msg,) = got.states()
    assert set(msg) == {*NAMES, *TIMING_SCHEMA}
    jsonschema.Draft202012Validator(got.schemas[STATE_TOPIC]).validate(msg)
    assert np.array_equal(np.array(msg["tip_pose"]), st.tip_pose) and np.array_equal(msg["q"], st.q)
    assert msg["wrench"] == st.wrench.tolist() and msg["kappa_h"] is None and msg["fault"] == "x"
    assert msg["speed_scaling"] == 0.5 and msg["safety_mode"] == "NORMAL" and msg["link_clearance"] is None


PLUGIN = '''
from fdcontrol.control.laws import LAWS, Law


@LAWS.register("schema_plugin_law")
class SchemaPluginLaw(Law):
    """f_c = f_applied, registered by a plugin."""

    terms = ()
'''

CHECK = """
import json, sys, time
import jsonschema, numpy as np
from fdcontrol.loop.state import NAMES, LoopState, SharedLayout
from fdcontrol.recording import STATE_SCHEMA, STATE_TOPIC, Published, Recorder, read_recording, state_schema
from tests.test_recording_schema import _state

st = _state(mode="schema_plugin_law")
SharedLayout().pack(st, SharedLayout().empty())  # the shared-memory slot takes the plugin's mode
rec = Recorder()
rec.start(sys.argv[1], {"robot": "ur10"}, {})
rec.push_state(Published(st, time.monotonic(), 0, -1, 1e-4, 1e-5))
rec.stop()
r = read_recording(sys.argv[1])
jsonschema.Draft202012Validator(r.schemas[STATE_TOPIC]).validate(r.states()[0])
print(json.dumps({"enum": STATE_SCHEMA["properties"]["mode"]["enum"], "same": state_schema() == STATE_SCHEMA,
                  "recorded": r.states()[0]["mode"], "names": list(NAMES)}))
"""


@pytest.fixture()
def plugin_dir(tmp_path):
    d = tmp_path / "plugin"
    d.mkdir()
    (d / "fdcontrol_schemaplugin.py").write_text(PLUGIN)
    info = d / "fdcontrol_schemaplugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fdcontrol-schemaplugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[fdcontrol.plugins]\nschemaplugin = fdcontrol_schemaplugin\n")
    return d


def test_a_plugin_law_appears_in_the_recording_schema(plugin_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(plugin_dir)}
    out = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path / "p.mcap")], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["enum"] == [*LAWS.names(), "schema_plugin_law"]
    assert got["recorded"] == "schema_plugin_law" and got["same"] and got["names"] == list(NAMES)
    # without the plugin, the same program fails: the mode is checked against the registry
    plain = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path / "q.mcap")], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode != 0 and "schema_plugin_law" in plain.stderr
