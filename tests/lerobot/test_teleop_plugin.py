"""The LeRobot teleoperator plugin (plugins/lerobot_teleoperator_fdcontrol): found by LeRobot's own factory;
a 3-D mouse's recorded HID reports (parsed by pyspacemouse) drive the robot plugin on the real service
(MuJoCo arm, loopback): a push on one axis moves the tip along that axis only, the deadband holds it still,
the button holds and releases the arm.

Runs where LeRobot is installed (`make test-lerobot`: its own venv); elsewhere the module skips.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("lerobot", reason="needs LeRobot (make test-lerobot installs it in its own venv)")
pytest.importorskip("lerobot_teleoperator_fdcontrol", reason="needs LeRobot and the fdcontrol teleoperator plugin "
                    "(make test-lerobot installs plugins/*)")
pytest.importorskip("pyspacemouse", reason="needs LeRobot and pyspacemouse (make test-lerobot installs them)")

from lerobot.teleoperators import TeleoperatorConfig, make_teleoperator_from_config
from lerobot.utils.import_utils import register_third_party_plugins

from fdcontrol.client import Client
from fdcontrol.env.features import action_names
from tests.service import Service
from tests.test_teleop import mouse, reports
from tests.waits import cycles_later, until

FPS = 20.0


def make_teleop(kind: str, **kw):
    """The teleoperator as LeRobot's command line makes it: plugins discovered, the config by its type name."""
    register_third_party_plugins()
    return make_teleoperator_from_config(TeleoperatorConfig.get_choice_class(kind)(**kw))


@pytest.fixture
def recorded(monkeypatch):
    """The plugin's 3-D mouse opens a recorded HID handle (pyspacemouse parses its reports)."""
    import lerobot_teleoperator_fdcontrol.fdcontrol_teleop as plugin

    m, hid = mouse()
    monkeypatch.setattr(plugin, "open_mouse", lambda name: m)
    return hid.queue


@pytest.mark.parametrize("action_type", ["delta_pose", "twist", "wrench"])
def test_found_by_lerobots_factory_with_the_robot_plugins_action_names(action_type):
    from lerobot_teleoperator_fdcontrol import FdcontrolKeyboard, FdcontrolSpacemouse

    for kind, cls in (("fdcontrol_spacemouse", FdcontrolSpacemouse), ("fdcontrol_keyboard", FdcontrolKeyboard)):
        t = make_teleop(kind, action_type=action_type, fps=FPS)
        assert type(t) is cls
        assert list(t.action_features) == list(action_names(action_type, 6))
    with pytest.raises(ValueError, match="action_type"):
        TeleoperatorConfig.get_choice_class("fdcontrol_spacemouse")(action_type="joint_delta")


def test_the_mouse_gives_one_axis_and_the_deadband_zero(recorded):
    t = make_teleop("fdcontrol_spacemouse", action_type="delta_pose", fps=FPS, linear=0.1, deadband=0.1)
    t.connect()
    try:
        recorded.extend(reports(x=0.5))  # push right
        a = t.get_action()
        expect = 0.1 * (0.5 - 0.1) / 0.9 / FPS  # m per frame
        assert a["delta_x"] == pytest.approx(expect, rel=1e-2)
        assert all(v == 0.0 for k, v in a.items() if k != "delta_x")
        recorded.extend(reports(x=0.08, y=-0.05, z=0.09, roll=0.05, pitch=-0.07, yaw=0.06))
        assert all(v == 0.0 for v in t.get_action().values())
    finally:
        t.disconnect()


def test_the_keyboard_keys_held_down():
    t = make_teleop("fdcontrol_keyboard", action_type="twist", linear=0.1, angular=0.5)
    t.listener = object()  # connected without a display: the key events are fed below as pynput gives them

    class Key:
        def __init__(self, ch: str) -> None:
            self.char = ch

    t.on_press(Key("w"))
    t.on_press(Key("q"))
    a = t.get_action()
    assert a["twist.vx"] == pytest.approx(0.1 * (1 - 0.1) / 0.9) and a["twist.vz"] == a["twist.vx"]
    t.on_release(Key("w"))
    assert t.get_action()["twist.vx"] == 0.0
    t.on_press(Key("h"))
    a = t.get_action()
    assert t.held and all(v == 0.0 for v in a.values())


# ---------------------------------------------------------------------- with the robot plugin, real service
@pytest.fixture(scope="module")
def service():
    svc = Service()
    yield svc
    svc.stop()


def position(s: dict) -> np.ndarray:
    return np.array(s["tip_pose"])[:3, 3]


def test_the_mouse_drives_the_robot_plugin(service, recorded):
    pytest.importorskip("lerobot_robot_fdcontrol", reason="needs LeRobot and the fdcontrol robot plugin "
                        "(make test-lerobot installs plugins/*)")
    from lerobot.robots import RobotConfig, make_robot_from_config

    robot = make_robot_from_config(RobotConfig.get_choice_class("fdcontrol")(url=service.url, fps=FPS,
                                                                            action_type="twist"))
    teleop = make_teleop("fdcontrol_spacemouse", action_type="twist", fps=FPS, linear=0.1, deadband=0.1,
                         url=service.url)
    robot.connect()
    teleop.connect()
    c = Client(service.url)

    def steps(n: int, first: list[bytes]) -> None:
        """n frames of the record loop (teleop → robot at FPS), the reports ``first`` arriving before the first."""
        recorded.extend(first)
        for _ in range(n):
            t0 = time.monotonic()
            robot.send_action(teleop.get_action())
            time.sleep(max(0.0, 1.0 / FPS - (time.monotonic() - t0)))

    def at_rest() -> dict:
        cycles_later(c.state, 100)
        return until(c.state, lambda s: np.linalg.norm(s["tip_twist"][:3]) < 1e-3, what="the arm at rest")

    try:
        s0 = at_rest()
        steps(20, reports(x=0.5))  # 1 s pushed right
        steps(10, reports())  # let go
        s1 = at_rest()
        d = position(s1) - position(s0)
        print(f"LeRobot loop, push right: tip moved {np.round(d * 1e3, 3)} mm")
        assert d[0] > 0.02 and np.linalg.norm(d[1:]) < 0.05 * d[0]

        steps(20, reports(x=0.08, y=-0.05, z=0.09, roll=0.05, pitch=-0.07, yaw=0.06))  # resting within the deadband
        s2 = at_rest()
        assert np.linalg.norm(position(s2) - position(s1)) < 1e-4

        steps(1, reports(buttons=(0,)) + reports())  # press: the service holds the arm
        assert teleop.held
        until(c.state, lambda s: s["holding"], what="the arm held")
        steps(10, reports(x=0.5))  # pushed while held: nothing moves
        s3 = cycles_later(c.state, 50)
        assert s3["holding"] and np.linalg.norm(position(s3) - position(s2)) < 1e-4
        steps(1, reports(buttons=(0,)) + reports(x=0.5))  # press again: released, and the push moves it
        assert not teleop.held
        steps(10, [])
        steps(5, reports())
        s4 = at_rest()
        assert not s4["holding"] and position(s4)[0] - position(s3)[0] > 0.005
    finally:
        teleop.disconnect()
        robot.disconnect()
        c.close()
