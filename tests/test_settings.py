"""Settings layering, the Dockerfile's honesty and the serve command's bad-input path."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fdcontrol.server.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent


def test_yaml_then_env_then_flags(tmp_path, monkeypatch):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("robot: panda\ngamma: 200\nrate: 250\nstiffness: [1, 2, 3, 4, 5, 6]\n")
    s = load_settings(str(cfg))
    assert (s.robot, s.gamma, s.rate, s.stiffness) == ("panda", 200, 250, [1, 2, 3, 4, 5, 6])
    monkeypatch.setenv("FDCONTROL_GAMMA", "300")
    monkeypatch.setenv("FDCONTROL_STIFFNESS", "[9, 9, 9, 9, 9, 9]")
    s = load_settings(str(cfg))
    assert s.gamma == 300 and s.stiffness == [9] * 6 and s.rate == 250
    assert load_settings(str(cfg), gamma=400.0).gamma == 400
    monkeypatch.setenv("FDCONTROL_CONFIG", str(cfg))
    assert load_settings().robot == "panda"


@pytest.mark.parametrize("text,field", [
    ("gamma: -1\n", "gamma"), ("robot: ur5\n", "robot"), ("rate: 1e6\n", "rate"),
    ("mapping: svd\n", "mapping"), ("unknown_key: 1\n", "unknown_key"),
])
def test_invalid_settings_name_the_field(tmp_path, text, field):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    with pytest.raises(ValueError, match=field):  # pydantic's ValidationError, or the unknown-name error
        load_settings(str(cfg))


def test_serve_with_bad_config_exits_2(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("gamma: 0\n")
    p = subprocess.run([sys.executable, "-m", "fdcontrol.server", "serve", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "gamma" in p.stderr
    p = subprocess.run([sys.executable, "-m", "fdcontrol.server", "serve", "--config", str(tmp_path / "no.yaml")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "not found" in p.stderr


def test_dockerfile_is_honest():
    """Every path the Dockerfile copies exists; it runs the same entrypoint the tests run."""
    text = (ROOT / "Dockerfile").read_text()
    for line in re.findall(r"^COPY (.+)$", text, flags=re.M):
        if "--from=" in line:  # from an earlier build stage, not from the repository
            continue
        for src in line.split()[:-1]:
            assert (ROOT / src).exists(), f"Dockerfile copies missing {src}"
    assert 'CMD ["fdcontrol", "serve"]' in text and "HEALTHCHECK" in text and "USER fdcontrol" in text
    assert "EXPOSE 8000" in text
    compose = (ROOT / "compose.yaml").read_text()
    assert "network_mode: host" in compose
    for src in re.findall(r"- \./([^:\s]+):", compose):
        assert (ROOT / src).exists()
    assert load_settings(str(ROOT / "examples" / "config.yaml")).driver.endswith("UdpBridgeDriver")


def _start_box(robot: str):
    import numpy as np

    from fdcontrol.control.workspace import start_box
    from fdcontrol.model.robot import HOME, RobotModel

    return start_box(RobotModel.load(robot), np.array(HOME[robot]))


@pytest.mark.parametrize("driver", ["mujoco", "simulated"])
@pytest.mark.parametrize("robot", ["ur10", "panda"])
def test_a_simulated_arm_starts_with_its_workspace_box(robot, driver):
    box = load_settings(robot=robot, driver=driver).workspace_box
    assert box is not None and box.model_dump() == _start_box(robot)


def test_a_real_arm_gets_no_workspace_box_unless_configured(tmp_path):
    assert load_settings(driver="udp").workspace_box is None  # its cell is not known: the operator sizes one
    given = {"min": [-1.0, -1.0, 0.1], "max": [1.0, 1.0, 1.0]}
    assert load_settings(driver="udp", workspace_box=given).workspace_box.max == [1.0, 1.0, 1.0]
    assert load_settings(workspace_box=given).workspace_box.min == [-1.0, -1.0, 0.1]  # a given box wins
    cfg = tmp_path / "c.yaml"
    cfg.write_text("workspace_box: null\n")  # none at all on the simulated arm
    assert load_settings(str(cfg)).workspace_box is None


def test_null_in_the_environment_means_none_like_the_settings_file(monkeypatch):
    """``FDCONTROL_WORKSPACE_BOX=null`` starts the simulated arm without a box, as ``workspace_box: null``
    in a settings file does; a box given there is taken, and a null for a parameter that has no "none"
    is refused by its name."""
    monkeypatch.setenv("FDCONTROL_WORKSPACE_BOX", "null")
    assert load_settings().workspace_box is None
    assert load_settings(robot="panda").workspace_box is None  # null is a choice, not "derive one"
    monkeypatch.setenv("FDCONTROL_WORKSPACE_BOX", '{"min": [-1, -1, 0.1], "max": [1, 1, 1]}')
    assert load_settings().workspace_box.min == [-1.0, -1.0, 0.1]
    monkeypatch.delenv("FDCONTROL_WORKSPACE_BOX")
    monkeypatch.setenv("FDCONTROL_FOXGLOVE_PORT", "null")  # a plain nullable setting: null is None too
    assert load_settings().foxglove_port is None
    monkeypatch.setenv("FDCONTROL_GAMMA", "null")
    with pytest.raises(ValueError, match="gamma"):
        load_settings()


def test_the_start_box_is_the_chosen_robots_whatever_the_environment_says(monkeypatch):
    monkeypatch.setenv("FDCONTROL_ROBOT", "panda")
    assert load_settings().workspace_box.model_dump() == _start_box("panda")
    # a flag over the environment: the box is the UR10's, not the one derived from the environment's panda
    assert load_settings(robot="ur10").workspace_box.model_dump() == _start_box("ur10")


def test_the_start_box_follows_a_robot_change_and_a_given_box_stays():
    from fdcontrol.server.runtime import Runtime

    rt = Runtime(load_settings(driver="simulated"))  # the loop is not started: the robot may change
    try:
        rt.update({"robot": "panda"})
        assert rt.params.workspace_box.model_dump() == _start_box("panda")
        box = rt.loop.task.workspace.zones[0].volume
        assert np.allclose(box.hi, _start_box("panda")["max"])  # the loop runs with it
        given = {"min": [-1.0, -1.0, 0.1], "max": [1.0, 1.0, 1.2]}
        rt.update({"workspace_box": given})
        rt.update({"robot": "fr3"})
        assert rt.params.workspace_box.max == [1.0, 1.0, 1.2]  # the operator's box is never replaced
    finally:
        rt.close()


def test_an_arm_inside_the_margin_of_an_unchanged_box_may_change_other_parameters():
    """A change that leaves the workspace alone does not change what the box does to the arm: it is not
    refused because the arm is in the box's margin (pushed there by a hand); a new box still is."""
    from fdcontrol.server.runtime import Runtime

    rt = Runtime(load_settings(driver="simulated", realtime=False))
    try:
        loop, box = rt.loop, rt.params.workspace_box
        t, dt = 0.0, loop.period
        for _ in range(3000):  # a hand streams +x until the tip is inside the +x face's margin
            loop.set_wrench([30.0, 0, 0, 0, 0, 0])
            s = loop.step(now=t)
            t += dt
            if s.workspace_distance < box.margin / 2:
                break
        assert s.workspace_distance < box.margin / 2, s.workspace_distance
        rt.update({"decay": 12.0})  # refused before: "the workspace would move the arm by itself"
        assert rt.params.decay == 12.0
        with pytest.raises(ValueError, match="move the arm by itself"):
            rt.update({"workspace_box": {**box.model_dump(), "stiffness": 1000.0}})
    finally:
        rt.close()
