"""A refused request is answered with its reason and leaves no traceback in the service's output:
an operator reading the log sees errors, not the noise of every bad request a client sent."""

from __future__ import annotations

import httpx

from tests.service import Service


def test_refused_requests_leave_no_traceback_in_the_log():
    svc = Service()
    try:
        for body in ({"position": [5.0, 0.0, 0.0]}, {"q": [0.0, 0.0]}):
            r = httpx.post(svc.url + "/control/move", json=body, timeout=10)
            assert r.status_code == 422, r.text
        r = httpx.put(svc.url + "/control/rules", json={"rules": [{"signal": "fz", "op": ">", "value": 1,
                                                                    "action": "retract"}]}, timeout=10)
        assert r.status_code == 422, r.text
        assert httpx.get(svc.url + "/state", timeout=5).json()["fault"] is None
        assert "Traceback" not in svc.output(), svc.output()[-2000:]
    finally:
        svc.stop()
