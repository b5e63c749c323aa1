"""The teleoperators: six axes (a 3-D mouse's, or keys') → the robot plugin's Cartesian action.

The mapping (deadband, scaling, the mouse's axes in the base frame) is :class:`fdcontrol.teleop.Mapping`,
the one ``fdcontrol teleop`` streams with; the mouse's HID reports are parsed by pyspacemouse. The hold
button toggles: while held every action is zero (the arm keeps its goal), and with ``url`` set the arm
is held by the service itself (``POST /control/hold``) and released at the next press.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import numpy as np
from lerobot.teleoperators import Teleoperator

from fdcontrol.env.features import action_names
from fdcontrol.teleop import HOLD_KEY, Mapping, SpaceMouse, key_axes, toggles

from .config_fdcontrol_teleop import FdcontrolKeyboardConfig, FdcontrolSpacemouseConfig, FdcontrolTeleopConfig


def open_mouse(name: str | None) -> SpaceMouse:
    """The 3-D mouse (the first connected, or the one named), in pyspacemouse's Z-up convention."""
    return SpaceMouse.open(name)


class _Cartesian(Teleoperator):
    """Axes → a ``delta_pose``, ``twist`` or ``wrench`` action named as the robot plugin names it."""

    config_class: type[FdcontrolTeleopConfig] = FdcontrolTeleopConfig
    hold_button = 0

    def __init__(self, config: FdcontrolTeleopConfig) -> None:
        super().__init__(config)
        self.config = config
        kind = "wrench" if config.action_type == "wrench" else "twist"
        self.mapping = Mapping(kind, config.deadband, config.linear, config.angular, config.force, config.torque)
        self.names = action_names(config.action_type, 6)
        self.held = False
        self._client: Any = None

    @property
    def action_features(self) -> dict:
        return dict.fromkeys(self.names, float)

    @property
    def feedback_features(self) -> dict:
        return {}

    @property
    def is_calibrated(self) -> bool:
        return True

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        pass

    def send_feedback(self, feedback: dict[str, Any]) -> None:
        pass

    def _connect_service(self) -> None:
        if self.config.url:
            from fdcontrol.client import Client

            self._client = Client(self.config.url, token=self.config.token or os.environ.get("FDCONTROL_TOKEN"))

    def _read(self) -> tuple[np.ndarray, list[int]]:
        raise NotImplementedError

    def get_action(self) -> dict[str, float]:
        if not self.is_connected:
            raise RuntimeError(f"{self} is not connected")
        axes, pressed = self._read()
        if toggles(pressed, self.hold_button):
            self.held = not self.held
            if self._client is not None:
                self._client.hold(self.held)
        cmd = np.zeros(6) if self.held else self.mapping(axes)
        if self.config.action_type == "delta_pose":
            cmd = cmd / self.config.fps  # the twist held over one frame
        return dict(zip(self.names, (float(x) for x in cmd), strict=True))

    def _disconnect_service(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class FdcontrolSpacemouse(_Cartesian):
    """A 3-D mouse (3Dconnexion SpaceMouse and kin, through pyspacemouse) as a Cartesian teleoperator."""

    config_class = FdcontrolSpacemouseConfig
    name = "fdcontrol_spacemouse"

    def __init__(self, config: FdcontrolSpacemouseConfig) -> None:
        super().__init__(config)
        self.hold_button = config.hold_button
        self.mouse: SpaceMouse | None = None

    @property
    def is_connected(self) -> bool:
        return self.mouse is not None

    def connect(self, calibrate: bool = True) -> None:
        self.mouse = open_mouse(self.config.device)  # type: ignore[attr-defined]
        self._connect_service()

    def _read(self) -> tuple[np.ndarray, list[int]]:
        assert self.mouse is not None
        return self.mouse.read()

    def disconnect(self) -> None:
        if self.mouse is not None:
            self.mouse.close()
            self.mouse = None
        self._disconnect_service()


class FdcontrolKeyboard(_Cartesian):
    """The keyboard (pynput's listener: keys held down move, together they add; ``h`` holds/releases)."""

    config_class = FdcontrolKeyboardConfig
    name = "fdcontrol_keyboard"

    def __init__(self, config: FdcontrolKeyboardConfig) -> None:
        super().__init__(config)
        self._down: set[str] = set()
        self._presses: list[int] = []
        self._lock = threading.Lock()
        self.listener: Any = None

    @property
    def is_connected(self) -> bool:
        return self.listener is not None

    def connect(self, calibrate: bool = True) -> None:
        if "DISPLAY" not in os.environ and sys.platform.startswith("linux"):
            raise RuntimeError("the keyboard teleoperator reads keys through a display (pynput); without one use "
                               "`fdcontrol teleop keyboard` in a terminal")
        from pynput import keyboard

        self.listener = keyboard.Listener(on_press=self.on_press, on_release=self.on_release)
        self.listener.start()
        self._connect_service()

    @staticmethod
    def _char(key: Any) -> str | None:
        ch = getattr(key, "char", None)
        return ch.lower() if isinstance(ch, str) else None

    def on_press(self, key: Any) -> None:
        ch = self._char(key)
        with self._lock:
            if ch == HOLD_KEY and ch not in self._down:
                self._presses.append(0)
            if ch is not None:
                self._down.add(ch)

    def on_release(self, key: Any) -> None:
        ch = self._char(key)
        with self._lock:
            self._down.discard(ch)  # type: ignore[arg-type]

    def _read(self) -> tuple[np.ndarray, list[int]]:
        with self._lock:
            pressed, self._presses = self._presses, []
            return np.clip(key_axes(self._down), -1.0, 1.0), pressed

    def disconnect(self) -> None:
        if self.listener is not None:
            self.listener.stop()
            self.listener = None
        self._disconnect_service()
