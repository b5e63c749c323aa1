"""ROS 2 message types on the DDS wire, declared for the ``cyclonedds`` Python package.

rmw_cyclonedds maps a ROS 2 message ``pkg/msg/Name`` to the DDS type
``pkg::msg::dds_::Name_`` (a FINAL struct: fields in order, no extensibility header) and a
topic ``/name`` to the DDS topic ``rt/name``. The field lists below follow the ``.msg``
definitions in ros2/common_interfaces and ros2/rcl_interfaces (builtin_interfaces/Time).
Units as in ROS (REP 103): m, rad, N, N·m, s.
"""

from dataclasses import dataclass, field

from fdcontrol.extras import missing

try:
    from cyclonedds.idl import IdlStruct
    from cyclonedds.idl.annotations import final
    from cyclonedds.idl.types import float64, int32, sequence, uint32
except ImportError as exc:
    raise missing("ros2", "the ROS 2 driver", exc) from exc


def topic_name(name: str) -> str:
    """The DDS topic for a ROS 2 topic name (``/a/b`` or ``a/b`` → ``rt/a/b``)."""
    return "rt/" + name.lstrip("/")


@final
@dataclass
class Time(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32 = 0
    nanosec: uint32 = 0

    @classmethod
    def from_seconds(cls, s: float) -> "Time":
        sec = int(s // 1)
        return cls(sec, min(round((s - sec) * 1e9), 999_999_999))

    def seconds(self) -> float:
        return self.sec + 1e-9 * self.nanosec


@final
@dataclass
class Header(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time = field(default_factory=Time)
    frame_id: str = ""


@final
@dataclass
class JointState(IdlStruct, typename="sensor_msgs::msg::dds_::JointState_"):
    header: Header = field(default_factory=Header)
    name: sequence[str] = field(default_factory=list)
    position: sequence[float64] = field(default_factory=list)
    velocity: sequence[float64] = field(default_factory=list)
    effort: sequence[float64] = field(default_factory=list)


@final
@dataclass
class Vector3(IdlStruct, typename="geometry_msgs::msg::dds_::Vector3_"):
    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0


@final
@dataclass
class Wrench(IdlStruct, typename="geometry_msgs::msg::dds_::Wrench_"):
    force: Vector3 = field(default_factory=Vector3)
    torque: Vector3 = field(default_factory=Vector3)


@final
@dataclass
class WrenchStamped(IdlStruct, typename="geometry_msgs::msg::dds_::WrenchStamped_"):
    header: Header = field(default_factory=Header)
    wrench: Wrench = field(default_factory=Wrench)


@final
@dataclass
class Point(IdlStruct, typename="geometry_msgs::msg::dds_::Point_"):
    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0


@final
@dataclass
class Quaternion(IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0
    w: float64 = 1.0


@final
@dataclass
class Pose(IdlStruct, typename="geometry_msgs::msg::dds_::Pose_"):
    position: Point = field(default_factory=Point)
    orientation: Quaternion = field(default_factory=Quaternion)


@final
@dataclass
class PoseStamped(IdlStruct, typename="geometry_msgs::msg::dds_::PoseStamped_"):
    header: Header = field(default_factory=Header)
    pose: Pose = field(default_factory=Pose)


@final
@dataclass
class MultiArrayDimension(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayDimension_"):
    label: str = ""
    size: uint32 = 0
    stride: uint32 = 0


@final
@dataclass
class MultiArrayLayout(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayLayout_"):
    dim: sequence[MultiArrayDimension] = field(default_factory=list)
    data_offset: uint32 = 0


@final
@dataclass
class Float64MultiArray(IdlStruct, typename="std_msgs::msg::dds_::Float64MultiArray_"):
    layout: MultiArrayLayout = field(default_factory=MultiArrayLayout)
    data: sequence[float64] = field(default_factory=list)


@final
@dataclass
class String(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str = ""
