"""Cartesian teleoperation: a 3-D mouse (SpaceMouse) or the keyboard streams a tip twist or wrench.

Used by ``fdcontrol teleop spacemouse|keyboard`` (a client of the service: it streams over
``/ws/control`` and takes the control lease like any client) and by the LeRobot teleoperator
plugin (``plugins/lerobot_teleoperator_fdcontrol``). The device layer reads; the mapping here
turns six axes in [-1, 1] into a command:

* **deadband** ``d`` (fraction of full deflection, per axis): ``|a| ≤ d`` gives 0, above it the
  axis is rescaled to ``(|a| − d)/(1 − d)`` so the command starts from zero at the band's edge;
* **scaling**: full deflection is ``linear`` m/s and ``angular`` rad/s (twist) or ``force`` N and
  ``torque`` N·m (wrench);
* axes: the mouse in pyspacemouse's right-handed Z-up convention (``AxisConvention.HID_Z_UP``:
  x right, y away from the user, z up; roll, pitch, yaw about them) maps to the base frame's
  [vx, vy, vz, wx, wy, wz] (or the tool frame's, ``frame="tool"``);
* a **button** toggles hold: the first press holds the arm (``POST /control/hold``), the next
  releases it. While held nothing is streamed.

Reports are parsed by pyspacemouse itself (:class:`pyspacemouse.SpaceMouseDevice`); this module
only reads its state.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

#: the mouse's axes (pyspacemouse state attributes) in command order [vx, vy, vz, wx, wy, wz]
MOUSE_AXES: tuple[str, ...] = ("x", "y", "z", "roll", "pitch", "yaw")

#: the keyboard: key → (axis, sign); translation w/s x, a/d y, q/e z; rotation i/k about x,
#: j/l about y, u/o about z (base frame). Space stops, h toggles hold.
KEYS: dict[str, tuple[int, int]] = {
    "w": (0, 1), "s": (0, -1), "a": (1, 1), "d": (1, -1), "q": (2, 1), "e": (2, -1),
    "i": (3, 1), "k": (3, -1), "j": (4, 1), "l": (4, -1), "u": (5, 1), "o": (5, -1),
}
STOP_KEY, HOLD_KEY = " ", "h"


@dataclass(frozen=True)
class Mapping:
    """Six axes in [-1, 1] → a twist (m/s, rad/s) or a wrench (N, N·m); see the module docstring."""

    kind: Literal["twist", "wrench"] = "twist"
    deadband: float = 0.1
    linear: float = 0.1  # m/s at full deflection
    angular: float = 0.5  # rad/s
    force: float = 20.0  # N
    torque: float = 2.0  # N·m
    frame: Literal["base", "tool"] = "base"

    def __post_init__(self) -> None:
        if self.kind not in ("twist", "wrench"):
            raise ValueError(f"kind must be 'twist' or 'wrench', got {self.kind!r}")
        if self.frame not in ("base", "tool"):
            raise ValueError(f"frame must be 'base' or 'tool', got {self.frame!r}")
        if not (math.isfinite(self.deadband) and 0.0 <= self.deadband < 1.0):
            raise ValueError(f"deadband must be in [0, 1), got {self.deadband!r}")
        for name in ("linear", "angular", "force", "torque"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0.0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")

    @property
    def scale(self) -> np.ndarray:
        lin, ang = (self.linear, self.angular) if self.kind == "twist" else (self.force, self.torque)
        return np.array([lin] * 3 + [ang] * 3)

    def __call__(self, axes: Sequence[float] | np.ndarray) -> np.ndarray:
        a = np.asarray(axes, dtype=float)
        if a.shape != (6,) or not np.all(np.isfinite(a)):
            raise ValueError(f"axes must be 6 finite numbers, got {a.tolist()}")
        a = np.clip(a, -1.0, 1.0)
        mag = np.maximum(np.abs(a) - self.deadband, 0.0) / (1.0 - self.deadband)
        return np.sign(a) * mag * self.scale


def key_axes(pressed: Iterable[str]) -> np.ndarray:
    """The axes of the keys held down together (:data:`KEYS`; opposite keys cancel): for a keyboard that
    reports presses and releases (LeRobot's, through pynput)."""
    a = np.zeros(6)
    for ch in set(pressed):
        if ch in KEYS:
            axis, sign = KEYS[ch]
            a[axis] += sign
    return a


class TeleopError(RuntimeError):
    """The service refused the teleoperation stream (its reason in the message)."""


class Source(Protocol):
    """A device: ``read()`` → (six axes in [-1, 1], buttons pressed since the last read, by index)."""

    def read(self) -> tuple[np.ndarray, list[int]]: ...


class SpaceMouse:
    """A :class:`pyspacemouse.SpaceMouseDevice` (opened with ``AxisConvention.HID_Z_UP``) as a :class:`Source`.

    Each ``read()`` drains the reports waiting (at most ``drain``): the mouse sends translation and
    rotation in separate reports on some models, and a press and release between two reads still
    counts as a press.
    """

    def __init__(self, device: Any, drain: int = 64) -> None:
        self.device, self.drain = device, int(drain)
        self._buttons = list(device.read().buttons)

    @classmethod
    def open(cls, name: str | None = None) -> SpaceMouse:
        """The first connected SpaceMouse (or the one named, e.g. ``"SpaceMouse Wireless"``)."""
        try:
            import pyspacemouse
        except ImportError as exc:
            from fdcontrol.extras import missing

            raise missing("spacemouse", "the 3-D mouse", exc) from exc
        try:
            dev = pyspacemouse.open(device=name, axis_convention=pyspacemouse.AxisConvention.HID_Z_UP)
        except (RuntimeError, ValueError, OSError) as exc:  # no hidapi, no device, no access
            raise RuntimeError(f"no 3-D mouse: {exc} (hidapi is the Debian/Ubuntu package libhidapi-hidraw0; "
                               "the device needs read access for your user, e.g. a udev rule)") from exc
        return cls(dev)

    def read(self) -> tuple[np.ndarray, list[int]]:
        pressed: list[int] = []
        state = self.device.read()
        for _ in range(self.drain):
            now = list(state.buttons)
            pressed += [i for i, (b, was) in enumerate(zip(now, self._buttons, strict=False)) if b and not was]
            self._buttons = now
            t = state.t
            state = self.device.read()
            if state.t == t:  # nothing more waiting
                break
        return np.array([getattr(state, k) for k in MOUSE_AXES], dtype=float), pressed

    def close(self) -> None:
        self.device.close()


@dataclass
class Keyboard:
    """Keys as a :class:`Source` (:data:`KEYS`): a key moves along its axis at full scale until another
    key, Space, or ``timeout`` s without a repeat of it (a held key repeats); ``h`` is button 0 (hold).

    ``feed(chars)`` hands over the characters typed; ``fdcontrol teleop keyboard`` feeds the terminal's.
    """

    timeout: float = 0.6
    clock: Callable[[], float] = time.monotonic
    _axes: np.ndarray = field(default_factory=lambda: np.zeros(6))
    _last: float = -math.inf
    _pressed: list[int] = field(default_factory=list)

    def feed(self, chars: Iterable[str]) -> None:
        for ch in chars:
            ch = ch.lower()
            if ch == HOLD_KEY:
                self._pressed.append(0)
                self._axes[:] = 0.0
            elif ch == STOP_KEY:
                self._axes[:] = 0.0
            elif ch in KEYS:
                axis, sign = KEYS[ch]
                self._axes[:] = 0.0
                self._axes[axis] = sign
                self._last = self.clock()

    def read(self) -> tuple[np.ndarray, list[int]]:
        if self.clock() - self._last > self.timeout:
            self._axes[:] = 0.0
        pressed, self._pressed = self._pressed, []
        return self._axes.copy(), pressed


def toggles(pressed: Sequence[int], button: int) -> bool:
    """Whether the presses of ``button`` toggle the hold (an odd count)."""
    return sum(1 for b in pressed if b == button) % 2 == 1


def run(client: Any, source: Source, mapping: Mapping, rate: float = 100.0, duration: float = math.inf,
        hold_button: int = 0, on_state: Callable[[dict[str, Any]], None] | None = None,
        poll: Callable[[], Iterable[str]] | None = None) -> dict[str, int]:
    """Stream ``mapping(source.read())`` over ``/ws/control`` at ``rate`` Hz for ``duration`` s.

    ``client``: a :class:`fdcontrol.client.Client`. A press of ``hold_button`` holds the arm
    (``client.hold(True)``) and stops the stream; the next press releases the hold and streams again.
    ``poll``: characters for a :class:`Keyboard` source, read each tick. Returns counts of commands
    sent and hold toggles. When it ends (duration, Ctrl-C) the stream stops and the service's
    watchdog holds the arm.
    """
    if not (math.isfinite(rate) and 0 < rate <= 1000):
        raise ValueError("rate must be in (0, 1000] Hz")
    period, sent, toggled, held = 1.0 / rate, 0, 0, False
    send = "send_twist" if mapping.kind == "twist" else "send_wrench"
    with client.control_stream() as s:
        t0 = time.monotonic()
        tick = 0
        while time.monotonic() - t0 < duration:
            if poll is not None and isinstance(source, Keyboard):
                source.feed(poll())
            axes, pressed = source.read()
            if toggles(pressed, hold_button):
                held = not held
                toggled += 1
                client.hold(held)
            if not held:
                getattr(s, send)(mapping(axes).tolist(), mapping.frame)
                sent += 1
            while (msg := s.poll()) is not None:
                if "error" in msg:  # e.g. another client holds the control lease (409)
                    raise TeleopError(f"the service refused the stream: {msg['error']}")
                if on_state is not None:
                    on_state(msg)
            tick += 1
            time.sleep(max(0.0, t0 + tick * period - time.monotonic()))
    return {"sent": sent, "toggles": toggled}


__all__ = ["KEYS", "MOUSE_AXES", "Keyboard", "Mapping", "Source", "SpaceMouse",
           "TeleopError", "key_axes", "run", "toggles"]
