"""RobotDriver: what the control loop needs from a robot (real or simulated), and the optional
capabilities as typed attributes and methods with their defaults."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from fdcontrol.model.robot import RobotModel


@dataclass(frozen=True)
class JointState:
    """Measured joint positions (rad) and velocities (rad/s) at time t (s, driver clock)."""

    q: np.ndarray
    qd: np.ndarray
    t: float


Interface = Literal["velocity", "position"]


class ToolPayload(Protocol):
    """The payload of a simulated tool: mass (kg) and centre of mass in the tip frame (m)."""

    mass: float
    com: tuple[float, float, float] | np.ndarray


class RobotDriver(ABC):
    """A velocity- or position-actuated arm. The contract:

    Units and frames: SI (rad, rad/s, s; N, N·m); joint order is the RobotModel's chain order.

    ``read()`` returns the measured joint state.

    ``read_wrench()`` returns the raw 6-axis force–torque reading [F; τ] of a sensor mounted
    between flange and tool, in the SENSOR frame with the torque about the sensor origin, or
    None without a sensor. Its sign is the sensor's convention (``sensor_sign`` in the settings,
    :mod:`fdcontrol.control.sensing`): ``robot_on_tool`` = the wrench the robot exerts on the tool
    (at rest without contact: minus the tool's weight), ``tool_on_robot`` the negative. The
    sensor's pose relative to the tip frame (``sensor_position`` / ``sensor_rpy``), the tool's
    mass and centre of mass and the bias are the WrenchFilter's business, not the driver's:
    a driver passes the reading through unchanged (units converted to N, N·m).

    ``send(q_ref, qd_ref)`` is called once per control cycle (period dt) with the reference
    at the END of the cycle: q̇_ref (rad/s) and q_ref (rad). A driver uses what its interface
    takes:

    * ``interface = "velocity"`` (the default; UR speedj): command
      q̇_ref; q_ref = q + dt·q̇_ref is informative only,
    * ``interface = "position"`` (UR servoj, KUKA RSI, Franka joint position): command q_ref.
      The loop integrates it from its previous reference, q_ref,k = q_ref,k−1 + dt·q̇_ref (so
      a servoed arm does not sag under load), with |q_ref − q| bounded per joint by
      ``ControlLoop.max_tracking_error`` (rad).

    ``send(None, qd)`` is a stop request from a failing cycle (after an exception): velocity
    interfaces command qd (zeros: stop); position interfaces hold their last reference
    (advanced by dt·qd when qd is non-zero). A driver never receives NaN or Inf from the loop.

    ``close()`` releases the hardware; the robot must be left stopped.

    Optional capabilities, each with its default here (a driver overrides what it has):
    ``interface``; ``simulated`` (no hardware behind it: the service may start the loop by
    itself); ``tool`` (the payload of a simulated tool, :class:`ToolPayload`, or None);
    ``speed_scaling`` and ``safety_mode`` (the robot controller's, published in the loop state);
    :meth:`read_wrench` (no sensor: None); :meth:`zero_sensor` (a sensor that zeroes itself);
    :meth:`exchange` (the driver's own inputs and outputs, once per cycle after publishing);
    :meth:`between_cycles` (work the next read would otherwise do, run while the loop waits for its next cycle);
    ``owns_clock`` (``read()`` blocks until the robot's next state: the robot paces the loop,
    fdcontrol.loop.paced) with ``clock_period`` (s), ``read_at`` (time.perf_counter() of the newest
    state's arrival), ``clock_step`` (s, the robot's time from the state before to the newest, as
    libfranka hands its control callback; None: the loop takes it from the states' ``t``) and
    :meth:`clock_stats` (the robot's view: success rate, missed cycles);
    :meth:`recover` and :meth:`reconnect` (a robot's error recovery; ``can_recover``);
    :meth:`robot_errors` (the robot's error names, for the metrics); :meth:`commanded_position` (where the
    robot's own controller drives the joints now, when it is not the loop's position reference).
    A simulated world (objects, a push on the tool) is the :class:`SimulatedWorld` protocol.
    """

    dof: int
    interface: Interface = "velocity"
    simulated: bool = False
    tool: ToolPayload | None = None
    speed_scaling: float = math.nan  # fraction 0–1; NaN: the driver has none
    safety_mode: str | None = None  # e.g. UR's NORMAL, REDUCED, PROTECTIVE_STOP; None: the driver has none
    sensor_status: str | None = None  # a force–torque sensor's own error report; None: fine, or no sensor
    owns_clock: bool = False  # read() is the loop's tick (a robot with a clock of its own)
    clock_period: float | None = None  # s, the robot's period when it owns the clock
    read_at: float | None = None  # time.perf_counter() when the newest state arrived (clock-owning drivers)
    clock_step: float | None = None  # s, the robot's time since the state before the newest (clock-owning drivers)
    can_recover: bool = False  # recover() and reconnect() do something

    def clock_stats(self) -> dict[str, float | int] | None:
        """The robot's own view of the exchange (success rate, missed cycles), or None."""
        return None

    def commanded_position(self) -> np.ndarray | None:
        """The joint positions (rad) the robot's own controller drives toward now — the position it was
        last commanded, as the robot holds it — or None: the loop's own position reference on a position
        interface (what :meth:`send` was given), nothing on a velocity interface. A joint moving toward it
        catches up with its servo's lag and does not count as running on (fdcontrol.loop.liveness)."""
        return None

    def robot_errors(self) -> dict[str, Any] | None:
        """The robot's errors by name (the franka driver: libfranka's): ``{"active": [names of the
        current error], "counts": {name: occurrences since the driver started}}``, or None."""
        return None

    def recover(self) -> None:
        """The robot's automatic error recovery (a driver with ``can_recover``)."""
        raise NotImplementedError(f"the {type(self).__name__} driver has no error recovery")

    def reconnect(self) -> None:
        """Connect to the robot again (a driver with ``can_recover``)."""
        raise NotImplementedError(f"the {type(self).__name__} driver does not reconnect")

    @classmethod
    def from_options(cls, robot: RobotModel, dt: float, options: dict[str, Any]) -> RobotDriver:
        """The driver from the settings' ``driver_options`` (default: ``cls(robot=, dt=, **options)``)."""
        return cls(robot=robot, dt=dt, **options)  # type: ignore[call-arg]

    @abstractmethod
    def read(self) -> JointState: ...

    @abstractmethod
    def send(self, q_ref: np.ndarray | None, qd_ref: np.ndarray | None) -> None: ...

    def read_wrench(self) -> np.ndarray | None:
        """The raw sensor reading (see above); None: no sensor."""
        return None

    def zero_sensor(self) -> None:
        """Zero a sensor that zeroes itself (UR's zeroFtSensor), in the loop thread; by default
        nothing (the loop's WrenchFilter takes the bias either way)."""
        return None

    def exchange(self, loop: Any, state: Any) -> None:
        """Once per cycle after the state is published: the driver's own inputs and outputs
        (e.g. ROS 2 topics); by default nothing. The loop calls it only where overridden."""
        return None

    def between_cycles(self) -> None:
        """In a loop thread that keeps its own clock, once per cycle after the cycle has ended (its state
        published) and before the next one starts — in the wait between them, half a period before the next
        cycle (sooner when this work lately took over a sixth of a period or the cycle ran long; at once the first
        time), so that whoever the published state woke is not kept waiting for a CPU by it: work the driver would
        otherwise do in the next :meth:`read` — a simulator's physics of the period just sent, which a real arm
        runs on its own. By default nothing; the loop calls it only where overridden (:attr:`has_between_cycles`),
        never from ``ControlLoop.step`` (an in-process caller stepping the loop sees the driver as before)."""
        return None

    def close(self) -> None:
        """Release the hardware, leaving the robot stopped."""
        return None

    @property
    def has_exchange(self) -> bool:
        """:meth:`exchange` is overridden (the loop skips the call otherwise)."""
        return type(self).exchange is not RobotDriver.exchange

    @property
    def has_between_cycles(self) -> bool:
        """:meth:`between_cycles` is overridden (the loop skips the call otherwise)."""
        return type(self).between_cycles is not RobotDriver.between_cycles


@runtime_checkable
class SimulatedWorld(Protocol):
    """A driver with a simulated world: objects and a push on the tool (``GET /environment``,
    ``PUT /sim/push``)."""

    def environment(self) -> dict[str, Any]: ...

    def set_push(self, wrench: np.ndarray | list[float]) -> None: ...
