"""The service's runtime (server/runtime.py): configuration changes against the loop's own actions.

A rule that fires between the build of a new configuration and the loop's swap of it must not be
undone by the swap: the change is refused whole, the rule's action stands, and GET /config (the
runtime's parameters) shows what the loop runs. The order is read from the loop's own record: the
cycle at which the change was built, the rule's firing (its event's cycle), the refusal's cycle."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fdcontrol.server import runtime as rt_module
from fdcontrol.server.runtime import ConflictError, Runtime
from fdcontrol.server.settings import load_settings
from fdcontrol.server.taskspace import set_rules

SWITCH = {"name": "soften", "signal": "force", "op": ">=", "value": 0.0, "action": "switch",
          "params": {"max_force": 100.0}}  # fires at the first cycle that evaluates it


@pytest.fixture()
def rt():
    r = Runtime(load_settings(driver="simulated", realtime=False))
    for _ in range(3):
        r.loop.step()
    yield r
    r.close()


def test_a_rule_that_fires_between_the_build_and_the_swap_refuses_the_change(rt, monkeypatch):
    loop = rt.loop
    set_rules(rt, [SWITCH])
    build = rt_module.build_parts

    def build_then_cycle(*a, **kw):  # the window: the parts are built, then a cycle runs before the swap
        parts = build(*a, **kw)
        loop.step()  # the rule fires in this cycle (its switch sets max_force in the loop)
        return parts

    monkeypatch.setattr(rt_module, "build_parts", build_then_cycle)
    before = rt.params.decay
    with pytest.raises(ConflictError, match="a rule fired while this change was being applied") as err:
        rt.update({"decay": before + 2.0})
    event = loop.task.reactions.last
    assert event is not None and event.rule == "soften"
    built, refused = (int(x) for x in re.search(r"built at cycle (\d+) and refused at cycle (\d+)",
                                                str(err.value)).groups())
    assert built <= event.cycle <= refused, (built, event.cycle, refused)  # the loop's own order
    # the rule's action stands, and the configuration says what the loop runs
    assert loop.max_force == 100.0
    assert rt.params.max_force == 100.0 and rt.params.decay == before
    monkeypatch.setattr(rt_module, "build_parts", build)
    # sent again: applied, on top of the rule's switch (never undoing it)
    rt.update({"decay": before + 2.0})
    loop.step()
    assert rt.params.decay == before + 2.0 and loop.max_force == 100.0 and rt.params.max_force == 100.0


def test_without_a_firing_in_between_the_change_applies(rt):
    set_rules(rt, [{**SWITCH, "value": 1e4}])  # armed, never fires
    rt.update({"decay": 12.0})
    rt.loop.step()
    assert rt.params.decay == 12.0 and rt.loop.task.reactions.count == 0
    assert np.isfinite(rt.loop.max_force) and rt.loop.max_force == rt.params.max_force
