"""The ROS 2 message types fdcontrol declares for cyclonedds against an independent implementation
of ROS 2's wire format (rosbags: the message definitions of ROS 2 Humble and its own CDR codec).

No ROS installation exists here; this checks what interoperability with rmw_cyclonedds rests on:
the DDS type name ``pkg::msg::dds_::Name_``, the field names and order of each ``.msg``, and the
bytes on the wire (final structs, XCDR1 little endian with its 4-byte encapsulation header).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fdcontrol.drivers import ros2_msgs as m

rosbags = pytest.importorskip("rosbags.typesys", reason="rosbags (test extra) is the independent CDR codec")
STORE = rosbags.get_typestore(rosbags.Stores.ROS2_HUMBLE)

MESSAGES = {  # ROS 2 name → our cyclonedds type
    "sensor_msgs/msg/JointState": m.JointState,
    "geometry_msgs/msg/WrenchStamped": m.WrenchStamped,
    "geometry_msgs/msg/PoseStamped": m.PoseStamped,
    "std_msgs/msg/Float64MultiArray": m.Float64MultiArray,
    "std_msgs/msg/String": m.String,
}


def dds_name(ros: str) -> str:
    pkg, kind, name = ros.split("/")
    return f"{pkg}::{kind}::dds_::{name}_"


def fields_of(obj) -> list[str]:
    return [f.name for f in dataclasses.fields(obj) if f.name != "__msgtype__"]


def sample(cls, rng: np.random.Generator):
    """Our message filled with varied values (odd-length strings and sequences exercise padding)."""
    s = m.Time(int(rng.integers(0, 2**31 - 1)), int(rng.integers(0, 999_999_999)))
    h = m.Header(s, "tool0_ft")
    if cls is m.JointState:
        names = ["shoulder_pan_joint", "elbow_joint", "wrist_3_joint"]
        return m.JointState(h, names, *(list(rng.normal(size=3)) for _ in range(3)))
    if cls is m.WrenchStamped:
        return m.WrenchStamped(h, m.Wrench(m.Vector3(*rng.normal(size=3)), m.Vector3(*rng.normal(size=3))))
    if cls is m.PoseStamped:
        qv = rng.normal(size=4)
        return m.PoseStamped(h, m.Pose(m.Point(*rng.normal(size=3)), m.Quaternion(*(qv / np.linalg.norm(qv)))))
    if cls is m.Float64MultiArray:
        dim = [m.MultiArrayDimension("joints", 6, 6)]
        return m.Float64MultiArray(m.MultiArrayLayout(dim, 1), list(rng.normal(size=7)))
    return m.String("fdcontrol state ✓")


def same(ours, theirs) -> None:
    """Recursive equality of our message and rosbags' decoding of our bytes."""
    if dataclasses.is_dataclass(ours):
        assert fields_of(ours) == fields_of(theirs)
        for name in fields_of(ours):
            same(getattr(ours, name), getattr(theirs, name))
    elif isinstance(ours, list) and ours and dataclasses.is_dataclass(ours[0]):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            same(a, b)
    elif isinstance(ours, list) and ours and isinstance(ours[0], float):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    else:
        assert ours == theirs


@pytest.mark.parametrize("ros", sorted(MESSAGES))
def test_type_name_fields_and_bytes_match_ros2(ros):
    cls = MESSAGES[ros]
    assert cls.__idl_typename__.replace(".", "::") == dds_name(ros)
    assert [f.name for f in dataclasses.fields(cls)] == fields_of(STORE.types[ros])
    rng = np.random.default_rng(7)
    for _ in range(5):
        ours = sample(cls, rng)
        wire = ours.serialize()
        assert wire[:4] == b"\x00\x01\x00\x00"  # CDR little endian, final (no XTypes header)
        theirs = STORE.deserialize_cdr(wire, ros)
        same(ours, theirs)
        assert STORE.serialize_cdr(theirs, ros) == wire  # byte for byte, both ways
        assert cls.deserialize(STORE.serialize_cdr(theirs, ros)) == ours


def test_the_connect_guide_lives_in_one_place():
    """docs/connect.md is the guide; README links to it and does not repeat its table."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme, guide = (root / "README.md").read_text(), (root / "docs" / "connect.md").read_text()
    section = readme[readme.index("## Connect your robot\n"):]
    assert "(docs/connect.md)" in section and "| Stack |" in guide and "| Stack |" not in readme
