"""Loopback-only Cyclone DDS settings for tests and benchmarks (no DDS traffic leaves 127.0.0.1).

Set the returned environment BEFORE the cyclonedds library creates a participant, in every
process that takes part (pass it to subprocesses, and set it in os.environ of this one).
"""

from __future__ import annotations

import os

LOOPBACK_URI = (
    "<CycloneDDS><Domain Id=\"any\"><General>"
    "<Interfaces><NetworkInterface name=\"lo\"/></Interfaces>"
    "<AllowMulticast>false</AllowMulticast></General>"
    "<Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>40</MaxAutoParticipantIndex>"
    "<Peers><Peer address=\"127.0.0.1\"/></Peers></Discovery>"
    "</Domain></CycloneDDS>"
)


def dds_domain() -> int:
    """A domain id per test process (0..232 are valid): avoids cross-talk between parallel runs."""
    return 100 + os.getpid() % 100


def loopback_env() -> dict[str, str]:
    """The environment that pins Cyclone DDS to loopback, unicast, peer 127.0.0.1."""
    return {"CYCLONEDDS_URI": LOOPBACK_URI}


def pin_loopback() -> None:
    """Put the loopback settings into this process's environment (before any participant)."""
    os.environ.update(loopback_env())
