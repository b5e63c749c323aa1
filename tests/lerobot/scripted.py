"""A keyboard-free teleoperator for the LeRobot command-line tests, and a runner of LeRobot's own commands.

``python -m tests.lerobot.scripted lerobot-record --robot.type=fdcontrol --teleop.type=fdcontrol_test_script …``
registers the teleoperator, then runs LeRobot's own ``main()`` of that command (which discovers the
robot plugin as the installed ``lerobot-record`` does) with the remaining arguments.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from lerobot.teleoperators import Teleoperator, TeleoperatorConfig

NAMES = ("delta_x", "delta_y", "delta_z", "delta_rx", "delta_ry", "delta_rz")


@TeleoperatorConfig.register_subclass("fdcontrol_test_script")
@dataclass
class ScriptedTeleopConfig(TeleoperatorConfig):
    """``steps`` actions of ``dx`` (m) along x, ``dz`` along z, then zeros."""

    steps: int = 10
    dx: float = 0.01
    dz: float = 0.0


class ScriptedTeleop(Teleoperator):
    config_class = ScriptedTeleopConfig
    name = "fdcontrol_test_script"

    def __init__(self, config: ScriptedTeleopConfig) -> None:
        super().__init__(config)
        self.config = config
        self.calls = 0
        self._connected = False

    @property
    def action_features(self) -> dict:
        return dict.fromkeys(NAMES, float)

    @property
    def feedback_features(self) -> dict:
        return {}

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self, calibrate: bool = True) -> None:
        self._connected = True

    @property
    def is_calibrated(self) -> bool:
        return True

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        pass

    def get_action(self) -> dict[str, Any]:
        on = self.calls < self.config.steps
        self.calls += 1
        a = dict.fromkeys(NAMES, 0.0)
        if on:
            a["delta_x"], a["delta_z"] = self.config.dx, self.config.dz
        return a

    def send_feedback(self, feedback: dict[str, Any]) -> None:
        pass

    def disconnect(self) -> None:
        self._connected = False


def main() -> None:
    command, *args = sys.argv[1:]
    module = {"lerobot-record": "lerobot_record", "lerobot-replay": "lerobot_replay",
              "lerobot-teleoperate": "lerobot_teleoperate"}[command]
    import importlib

    sys.argv = [command, *args]
    importlib.import_module(f"lerobot.scripts.{module}").main()


if __name__ == "__main__":
    main()
