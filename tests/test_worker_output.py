"""A refused request is answered with its reason and leaves no traceback in the service's output:
an operator reading the log sees errors, not the noise of every bad request a client sent."""

from __future__ import annotations

import httpx

from tests.service import Service


def test_refused_requests_leave_no_traceback_in_the_log():
    svc = Service()
    try:
        for body in ({"position": [5.0, 0.0, 0.0]}, {"q": [0.0, 0.0]}):
            r = httpx.post(svc.url + "/control/move", json=body, timeout=10)
            assert r.status_code == 422, r.text
        r = httpx.put(svc.url + "/control/rules", json={"rules": [{"signal": "fz", "op": ">", "value": 1,
                                                                    "action": "retract"}]}, timeout=10)
        assert r.status_code == 422, r.text
        assert httpx.get(svc.url + "/state", timeout=5).json()["fault"] is None
        assert "Traceback" not in svc.output(), svc.output()[-2000:]
    finally:
        svc.stop()


def test_an_unexpected_refusal_is_one_line_in_the_log_naming_where(capfd):
    """A command the loop process refuses with an exception of no known kind (here a push that is not a
    wrench, past the API's own validation): one line naming the command, the error and where it was raised;
    no traceback; the loop runs on and answers the next command."""
    import pytest

    from fdcontrol.server.settings import Settings
    from fdcontrol.server.worker import LoopWorker, WorkerError

    w = LoopWorker(Settings(realtime=False))  # the MuJoCo arm: a simulated world with a push
    try:
        with pytest.raises(WorkerError) as err:
            w.call("sim", "push", {"not": "a wrench"})
        assert err.value.kind == "invalid" and "TypeError" in str(err.value.detail)
        assert w.state()[0].fault is None
        assert isinstance(w.call("stats"), dict)  # the next command is answered
    finally:
        w.close()
    out = capfd.readouterr().err
    lines = [line for line in out.splitlines() if "refused 'sim'" in line]
    assert len(lines) == 1 and "TypeError" in lines[0] and "mujoco.py:" in lines[0], out[-2000:]
    assert "Traceback" not in out, out[-2000:]


def test_an_unknown_robot_gets_one_message_naming_the_shipped_ones_and_files(tmp_path):
    """`fdcontrol serve --robot nosuch`, and the same name from a config file: one line, exit 2; the shipped
    names and how to give a description file; none of pydantic's own words."""
    import subprocess
    import sys

    from fdcontrol.model.robot import SHIPPED
    from tests.service import ROOT

    cfg = tmp_path / "c.yaml"
    cfg.write_text("robot: nosuch\n")
    for args in (["--robot", "nosuch"], ["--config", str(cfg)]):
        p = subprocess.run([sys.executable, "-m", "fdcontrol.server", "serve", "--port", "0", *args], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 2, p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1, p.stderr
        assert "unknown robot 'nosuch'" in lines[0] and ".urdf" in lines[0] and "MJCF" in lines[0], lines
        assert all(name in lines[0] for name in SHIPPED), lines
        assert "Value error" not in lines[0] and lines[0].count("unknown robot") == 1, lines
