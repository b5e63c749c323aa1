"""Cartesian teleoperation (fdcontrol.teleop): a 3-D mouse's HID reports, parsed by pyspacemouse itself,
stream a tip twist to the real service (MuJoCo arm, loopback); the keyboard's mapping.

No hardware: the reports are byte strings laid out as the device spec table that pyspacemouse ships
(devices.toml) says the device sends them (report id, little-endian int16 per axis, button bits), fed to
``pyspacemouse.SpaceMouseDevice`` through a stand-in for the HID handle. Which axis is which is read
from the table in raw HID terms (USB HID usage tables: +X right, +Y toward the user, +Z down), so a
"push right" and a "lift" are physical gestures, and the test checks where the arm goes.
"""

from __future__ import annotations

import collections
import math
import struct

import numpy as np
import pytest

pyspacemouse = pytest.importorskip("pyspacemouse")
from pyspacemouse.config_helpers import apply_axis_convention  # noqa: E402

from fdcontrol.teleop import KEYS, Keyboard, Mapping, SpaceMouse, run, toggles  # noqa: E402

from .service import Service  # noqa: E402
from .waits import cycles_later, until  # noqa: E402

DEVICE = "SpaceNavigator"  # translation and rotation in two reports, two buttons
FULL = 350  # raw counts of full deflection (the table's axis_scale)


class RecordedHID:
    """The HID handle pyspacemouse reads (``read(n)``): hands out queued reports, b"" when none waits."""

    def __init__(self) -> None:
        self.queue: collections.deque[bytes] = collections.deque()

    def read(self, n: int) -> bytes:
        return self.queue.popleft()[:n] if self.queue else b""

    def close(self) -> None:
        pass


def raw_spec(name: str = DEVICE):
    """The device's table entry in raw HID axes (pyspacemouse's own conversion from its table)."""
    return apply_axis_convention(pyspacemouse.get_device_specs()[name], pyspacemouse.AxisConvention.HID)


def reports(name: str = DEVICE, buttons: tuple[int, ...] = (), **hid: float) -> list[bytes]:
    """The reports of the mouse held at raw HID deflections ``hid`` (x, y, z, roll=Rx, pitch=Ry, yaw=Rz,
    as fractions of full scale) with ``buttons`` down: one report per channel the table names."""
    spec = raw_spec(name)
    size = 1 + max(max(s.byte1, s.byte2) for s in spec.mappings.values())
    out: dict[int, bytearray] = {}
    for axis, s in spec.mappings.items():
        buf = out.setdefault(s.channel, bytearray([s.channel] + [0] * (size - 1)))
        lo, hi = struct.pack("<h", round(hid.get(axis, 0.0) * FULL))
        buf[s.byte1], buf[s.byte2] = lo, hi
    bspecs = spec.button_specs
    for b in bspecs:
        need = b.byte + 1
        buf = out.setdefault(b.channel, bytearray([b.channel] + [0] * (max(size, need) - 1)))
        if len(buf) < need:
            buf.extend([0] * (need - len(buf)))
    for i in buttons:
        b = bspecs[i]
        out[b.channel][b.byte] |= 1 << b.bit
    return [bytes(v) for v in out.values()]


def mouse(name: str = DEVICE) -> tuple[SpaceMouse, RecordedHID]:
    hid = RecordedHID()
    info = apply_axis_convention(pyspacemouse.get_device_specs()[name], pyspacemouse.AxisConvention.HID_Z_UP)
    return SpaceMouse(pyspacemouse.SpaceMouseDevice(info, device=hid)), hid


# ---------------------------------------------------------------------- the device path alone
@pytest.mark.parametrize("name", [DEVICE, "SpaceMouseWireless", "SpaceMouseCompact"])
@pytest.mark.parametrize(("gesture", "axis", "sign"), [
    ({"x": 0.6}, 0, 1),  # push right: +x
    ({"y": -0.6}, 1, 1),  # push away from the user (HID +Y is toward): +y
    ({"z": -0.6}, 2, 1),  # lift (HID +Z is down): +z
    ({"yaw": -0.6}, 5, 1),  # twist counter-clockwise seen from above (HID +Rz is clockwise): +wz
])
def test_a_push_on_one_axis_commands_that_axis_only(name, gesture, axis, sign):
    m, hid = mouse(name)
    hid.queue.extend(reports(name, **gesture))
    axes, pressed = m.read()
    cmd = Mapping(deadband=0.1, linear=0.1, angular=0.5)(axes)
    assert pressed == []
    assert np.sign(cmd[axis]) == sign
    full = 0.1 if axis < 3 else 0.5
    assert cmd[axis] == pytest.approx(sign * full * (0.6 - 0.1) / 0.9, rel=1e-2)
    assert np.count_nonzero(cmd) == 1


def test_the_deadband_and_the_scaling():
    mp = Mapping(deadband=0.2, linear=0.1, angular=0.5)
    np.testing.assert_array_equal(mp([0.19, -0.2, 0.0, 0.1, -0.15, 0.2]), np.zeros(6))
    np.testing.assert_allclose(mp([1.0, -1.0, 0.6, 1.5, 0, 0]), [0.1, -0.1, 0.05, 0.5, 0, 0])
    w = Mapping("wrench", deadband=0.0, force=20.0, torque=2.0)([0.5, 0, 0, 0, 0, -0.25])
    np.testing.assert_allclose(w, [10.0, 0, 0, 0, 0, -0.5])
    for bad in ({"deadband": 1.0}, {"linear": math.nan}, {"kind": "pose"}, {"frame": "world"}):
        with pytest.raises(ValueError):
            Mapping(**bad)
    with pytest.raises(ValueError):
        mp([math.nan, 0, 0, 0, 0, 0])


def test_a_button_press_and_release_between_reads_is_one_press():
    m, hid = mouse()
    for buttons in ((0,), (), (0,), ()):
        hid.queue.extend(reports(buttons=buttons))
    _, pressed = m.read()
    assert pressed == [0, 0]  # two presses: an even count leaves the hold as it was
    assert not toggles(pressed, 0)
    hid.queue.extend(reports(buttons=(1,)))
    assert m.read()[1] == [1]


def test_the_keyboard_mapping():
    now = [0.0]
    kb = Keyboard(timeout=0.5, clock=lambda: now[0])
    for key, (axis, sign) in KEYS.items():
        kb.feed(key)
        axes, _ = kb.read()
        assert axes[axis] == sign and np.count_nonzero(axes) == 1, key
    kb.feed("w")
    now[0] = 0.4
    assert kb.read()[0][0] == 1  # a held key repeats within the timeout
    now[0] = 1.0
    assert not kb.read()[0].any()  # released: no repeat for longer than the timeout
    kb.feed("w ")
    assert not kb.read()[0].any()  # space stops
    kb.feed("h")
    assert kb.read()[1] == [0]  # h is the hold button


# ---------------------------------------------------------------------- the real service
@pytest.fixture(scope="module")
def service():
    svc = Service(env={"FDCONTROL_COMMAND_TIMEOUT": "0.25"})
    yield svc
    svc.stop()


class Script:
    """A :class:`SpaceMouse` whose HID handle receives the reports of ``ticks[k]`` before its k-th read."""

    def __init__(self, ticks: list[list[bytes]]) -> None:
        self.mouse, self.hid = mouse()
        self.ticks = collections.deque(ticks)

    def read(self):
        if self.ticks:
            self.hid.queue.extend(self.ticks.popleft())
        return self.mouse.read()


def position(s: dict) -> np.ndarray:
    return np.array(s["tip_pose"])[:3, 3]


def settle(c) -> dict:
    """The arm held and at rest by the loop's own count (the stream has ended)."""
    until(c.state, lambda s: s["holding"] and not any(s["qd_ref"]), what="the arm held at rest")
    return cycles_later(c.state, 100)


@pytest.mark.parametrize(("gesture", "axis"), [({"x": 0.5}, 0), ({"z": -0.5}, 2)])
def test_service_a_push_moves_the_tip_along_that_axis_only(service, gesture, axis):
    from fdcontrol.client import Client

    with Client(service.url) as c:
        c.hold(False)
        s0 = cycles_later(c.state, 10)
        push = [reports(**gesture)] + [[]] * 99 + [reports()]  # 1 s pushed, then let go
        out = run(c, Script(push), Mapping(deadband=0.1, linear=0.1), rate=100.0, duration=1.5)
        assert out["sent"] > 100
        s1 = settle(c)
    d = position(s1) - position(s0)
    print(f"push {gesture}: tip moved {np.round(d * 1e3, 3)} mm")
    assert d[axis] > 0.01  # ~44 mm/s for ~1 s; at least 10 mm (a loaded machine streams late)
    off = np.delete(d, axis)
    assert np.linalg.norm(off) < 0.05 * d[axis]
    R0, R1 = np.array(s0["tip_pose"])[:3, :3], np.array(s1["tip_pose"])[:3, :3]
    assert np.arccos(np.clip((np.trace(R0.T @ R1) - 1) / 2, -1, 1)) < 0.01  # no turn (rad)


def test_service_the_deadband_holds_the_arm_still(service):
    from fdcontrol.client import Client

    with Client(service.url) as c:
        c.hold(False)
        s0 = cycles_later(c.state, 10)
        states: list[dict] = []
        drift = reports(x=0.08, y=-0.05, z=0.09, roll=0.05, pitch=-0.07, yaw=0.06)  # a hand resting on it
        out = run(c, Script([drift]), Mapping(deadband=0.1), rate=100.0, duration=1.0, on_state=states.append)
        assert out["sent"] > 50
        live = [s for s in states if s["watchdog"] == "ok"]
        assert live, "the stream was live (zero twists, not silence)"
        s1 = cycles_later(c.state, 10)
    assert np.linalg.norm(position(s1) - position(s0)) < 1e-4


def test_service_the_button_toggles_hold(service):
    from fdcontrol.client import Client

    with Client(service.url) as c:
        c.hold(False)
        press = reports(buttons=(0,)) + reports()  # press and release
        s0 = cycles_later(c.state, 10)
        # press (hold), push for 0.5 s while held, press again (release), push for 0.8 s, let go
        ticks = [press] + [reports(x=0.5)] + [[]] * 49 + [press] + [reports(x=0.5)] + [[]] * 79 + [reports()]
        seen: list[dict] = []
        out = run(c, Script(ticks), Mapping(deadband=0.1, linear=0.1), rate=100.0, duration=1.6, on_state=seen.append)
        assert out["toggles"] == 2
        s1 = settle(c)
    held = [s for s in seen if s["holding"]]
    assert held, "the first press held the arm"
    released = next(s["cycle"] for s in seen if s["cycle"] > held[0]["cycle"] and not s["holding"])
    at_rest = [s for s in held if s["cycle"] < released and not any(s["qd_ref"])]  # braked, then held
    assert len(at_rest) >= 2
    assert np.linalg.norm(position(at_rest[-1]) - position(at_rest[0])) < 1e-4  # the push while held moved nothing
    assert position(s1)[0] - position(s0)[0] > 0.01  # released: the next push moves the arm


def test_service_keyboard_command_line(service):
    """`fdcontrol teleop keyboard` as a user runs it, its keys from a pipe: a held `w` moves the tip along +x."""
    import subprocess
    import sys
    import time

    from fdcontrol.client import Client

    with Client(service.url) as c:
        c.hold(False)
        s0 = cycles_later(c.state, 10)
        p = subprocess.Popen([sys.executable, "-m", "fdcontrol.cli", "teleop", "keyboard", "--url", service.url,
                              "--linear", "0.05", "--duration", "2.5"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            end = time.monotonic() + 1.0
            while time.monotonic() < end:  # a held key repeats
                p.stdin.write(b"w")
                p.stdin.flush()
                time.sleep(0.03)
            out, err = p.communicate(timeout=60)
        finally:
            p.kill()
        assert p.returncode == 0, err.decode()
        assert '"sent"' in out.decode()
        s1 = settle(c)
    d = position(s1) - position(s0)
    assert d[0] > 0.01 and np.linalg.norm(d[1:]) < 0.05 * d[0]


def test_service_another_clients_stream_is_refused(service):
    """The teleoperation stream takes the lease like any client: while another holds it, run() says so."""
    import json

    from websockets.sync.client import connect

    from fdcontrol.client import Client
    from fdcontrol.teleop import TeleopError

    with Client(service.url) as c, connect(service.url.replace("http", "ws") + "/ws/control?client=other") as ws:
        ws.send(json.dumps({"twist": [0, 0, 0, 0, 0, 0]}))  # the other client commands: it holds the lease
        until(lambda: c.http.get("/control/lease").json(), lambda d: d.get("holder") is not None,
              what="the other client holding the lease")
        with pytest.raises(TeleopError, match=r"lease|control"):
            run(c, Script([reports(x=0.5)]), Mapping(), rate=100.0, duration=2.0)
