"""Security and robustness against the real service (uvicorn on 127.0.0.1, its real loop process).

Token, Origin, Host; nothing executable or file-shaped from the network; tighten-only
safety settings; a dead loop process is noticed, refused and restarted into hold; bad
inputs get a clear, short error, the WebSocket stays open, and the arm still moves after.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from fdcontrol.recording import read_recording
from fdcontrol.server.errors import MAX_DETAIL, clip

from .service import ROOT, Service, process_state
from .waits import HUNG, cycles_later, until

TOKEN = "s3cret-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WRENCH = {"wrench": [20.0, 0, 0, 0, 0, 0]}
STATE_CHANGES = [
    ("POST", "/control/start", None), ("POST", "/control/stop", None), ("POST", "/control/hold", {"hold": True}),
    ("POST", "/control/zero-sensor", None), ("PUT", "/control/wrench", WRENCH),
    ("PUT", "/control/target", {"position": [0.5, 0.2, 0.5]}), ("PATCH", "/config", {"gamma": 500.0}),
    ("POST", "/analysis/singular-values", {"q": [0.3, -1.2, 1.6, -1.9, -1.4, 0.2]}),
]


@pytest.fixture(scope="module")
def secured():
    s = Service(env={"FDCONTROL_TOKEN": TOKEN}, token=TOKEN)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def open_service():
    s = Service()
    s.without_start_box()  # the pushes here add up past the simulated arm's start box
    yield s
    s.stop()


def ws_url(s: Service, path: str) -> str:
    return s.url.replace("http", "ws") + path


def tip_x(s: Service, headers: dict[str, str] | None = None) -> float:
    return httpx.get(s.url + "/state", headers=headers or {}).json()["tip_pose"][0][3]


# ---------------------------------------------------------------------- authentication
@pytest.mark.parametrize(("method", "path", "body"), STATE_CHANGES)
def test_no_token_is_refused_on_every_state_change(secured, method, path, body):
    r = httpx.request(method, secured.url + path, json=body)
    assert r.status_code == 401 and "Bearer" in r.headers["www-authenticate"]
    r = httpx.request(method, secured.url + path, json=body, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401


def test_reads_need_the_token_too_and_the_token_opens_everything(secured):
    for path in ("/state", "/config", "/stats", "/health", "/robots", "/openapi.json"):
        assert httpx.get(secured.url + path).status_code == 401, path
        assert httpx.get(secured.url + path, headers=AUTH).status_code == 200, path
    assert httpx.put(secured.url + "/control/wrench", json=WRENCH, headers=AUTH).status_code == 200
    assert httpx.get(secured.url + "/login.html").status_code == 200  # the way in is public


@pytest.mark.parametrize("path", ["/ws/control", "/ws/state"])
def test_websocket_handshake_without_token_is_refused(secured, path):
    with pytest.raises(InvalidStatus) as e:
        connect(ws_url(secured, path), open_timeout=5)
    assert e.value.response.status_code == 403
    with connect(ws_url(secured, path), additional_headers=AUTH, open_timeout=5) as ws:
        assert "q" in json.loads(ws.recv(timeout=5))


def test_dashboard_login_sets_a_strict_httponly_cookie_that_works(secured):
    assert httpx.post(secured.url + "/auth/login", json={"token": "nope"}).status_code == 401
    r = httpx.post(secured.url + "/auth/login", json={"token": TOKEN})
    assert r.status_code == 200
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and TOKEN.lower() not in cookie
    jar = dict(r.cookies)
    assert httpx.get(secured.url + "/state", cookies=jar).status_code == 200
    hdr = {"Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())}
    with connect(ws_url(secured, "/ws/state"), additional_headers=hdr, open_timeout=5) as ws:
        assert "q" in json.loads(ws.recv(timeout=5))


# ---------------------------------------------------------------------- origin and host
def test_foreign_origin_is_refused_for_handshakes_and_state_changes(secured):
    evil = {**AUTH, "Origin": "http://evil.example"}
    with pytest.raises(InvalidStatus) as e:
        connect(ws_url(secured, "/ws/control"), additional_headers=evil, open_timeout=5)
    assert e.value.response.status_code == 403
    assert httpx.post(secured.url + "/control/stop", json={}, headers=evil).status_code == 403
    own = {**AUTH, "Origin": secured.url}
    with connect(ws_url(secured, "/ws/control"), additional_headers=own, open_timeout=5) as ws:
        ws.recv(timeout=5)
    assert httpx.post(secured.url + "/control/hold", json={"hold": False}, headers=own).status_code == 200


def test_cross_site_form_posts_cannot_change_state(open_service):
    for ctype in ("application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x"):
        r = httpx.post(open_service.url + "/control/stop", content=b"a=1", headers={"Content-Type": ctype})
        assert r.status_code == 415, ctype
    assert httpx.get(open_service.url + "/state").json()["running"]


def test_foreign_host_is_refused(open_service):
    r = httpx.get(open_service.url + "/state", headers={"Host": f"rebind.evil.example:{open_service.port}"})
    assert r.status_code == 421
    assert httpx.get(open_service.url + "/state", headers={"Host": f"localhost:{open_service.port}"}).status_code == 200


# ---------------------------------------------------------------------- nothing from the network
@pytest.mark.parametrize("change", [
    {"driver": "os:system"}, {"driver_options": {"x": 1}}, {"robot": "/etc/passwd.urdf"},
    {"robot": "../urdf/ur10.urdf"}, {"base": "world"}, {"tip": "tool0"},
])
def test_patch_of_startup_only_fields_is_rejected(open_service, change):
    r = httpx.patch(open_service.url + "/config", json=change)
    if "robot" in change:  # no file path from the network
        assert r.status_code == 422 and "shipped" in r.text, r.text
    else:  # startup configuration: refused naming the policy
        assert r.status_code == 409 and "policy 'startup'" in r.text, r.text
    assert httpx.get(open_service.url + "/config").json()["driver"] == "mujoco"


def test_analysis_names_only_shipped_or_loaded_robots(open_service):
    for name in ("/etc/hostname.urdf", "/nonexistent.urdf"):
        r = httpx.post(open_service.url + "/analysis/singular-values", json={"q": [0.0] * 6, "robot": name})
        assert r.status_code == 422 and "hostname" not in r.text.replace(name, "")


def test_safety_limits_tighten_at_run_time_but_loosen_only_to_startup(open_service):
    url = open_service.url + "/config"
    start = httpx.get(url).json()
    for key, looser in (("max_force", start["max_force"] * 2), ("command_timeout", 5.0),
                        ("max_linear_speed", start["max_linear_speed"] + 0.1)):
        r = httpx.patch(url, json={key: looser})
        assert r.status_code == 422 and "loosened" in r.text, key
    assert httpx.patch(url, json={"max_force": 100.0}).json()["max_force"] == 100.0
    assert httpx.patch(url, json={"max_force": start["max_force"]}).json()["max_force"] == start["max_force"]


# ---------------------------------------------------------------------- input hygiene
@pytest.mark.parametrize(("path", "body"), [
    ("/control/hold", {"hold": "off"}), ("/control/hold", {"hold": 0}), ("/control/hold", {"hold": "no"}),
    ("/control/wrench", {"wrench": ["5", 0, 0, 0, 0, 0]}), ("/control/wrench", {"wrench": [True, 0, 0, 0, 0, 0]}),
    ("/control/wrench", {"wrench": [0.0] * 6, "seq": False}),
    ("/control/wrench", {"wrench": [0.0] * 6, "seq": 10 ** 400}),
    ("/control/wrench", {"wrench": [0.0] * 6, "seq": -1}),
])
def test_loose_safety_inputs_are_rejected(open_service, path, body):
    method = "POST" if path == "/control/hold" else "PUT"
    raw = json.dumps(body).encode()
    r = httpx.request(method, open_service.url + path, content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    _short_list(r.json()["detail"])


def test_after_every_bad_input_a_valid_wrench_still_moves_the_arm(open_service):
    url = open_service.url
    hdr = {"Content-Type": "application/json"}
    httpx.put(url + "/control/wrench", content=b'{"wrench": [0,0,0,0,0,0], "seq": 1' + b"0" * 400 + b"}",
              headers=hdr)
    assert httpx.put(url + "/control/wrench", content=b"[" * 2000 + b"]" * 2000, headers=hdr).status_code == 400
    big = b'{"wrench": [' + b"0," * (3 << 20) + b'0]}'
    assert httpx.put(url + "/control/wrench", content=big, headers=hdr).status_code == 413
    r = httpx.put(url + "/control/wrench", json={"wrench": [0] * 6, "x" * 200_000: 1})
    assert r.status_code == 422
    _short_list(r.json()["detail"])
    assert "x" * 33 not in r.text  # the unknown field's name is not echoed
    _pushes_the_arm(url)


def _short_list(detail: list) -> None:
    """A 422 list: at most 20 entries, each message ≤ MAX_DETAIL characters."""
    assert isinstance(detail, list) and 0 < len(detail) <= 20
    assert all(len(e["msg"]) <= MAX_DETAIL for e in detail), detail


def test_error_messages_are_clipped_to_300_characters_exactly():
    assert MAX_DETAIL == 300  # docs/security.md
    assert clip("a" * 300) == "a" * 300
    assert clip("a" * 301) == "a" * 299 + "…" and len(clip("b" * 10_000)) == 300


def test_a_long_websocket_error_is_300_characters_and_echoes_nothing(open_service):
    with connect(ws_url(open_service, "/ws/control?decimation=50"), open_timeout=5) as ws:
        ws.send(json.dumps({"k" * 1000: 1, **{f"key{i:03d}" + "z" * 60: 1 for i in range(20)}}))
        err = _next_error(ws)
        assert err is not None and "unknown keys" in err and len(err) <= MAX_DETAIL, err
        assert "k" * 33 not in err and "z" * 33 not in err  # long keys are input: not echoed
        ws.send(json.dumps({"torque": 1}))  # a short one is named: the typo to see
        err = _next_error(ws)
        assert err is not None and "unknown keys: torque" in err
    httpx.post(open_service.url + "/control/hold", json={"hold": False})


#: pydantic's text for a key a message may not have (the service names where it sits: ``target.<key>``)
EXTRA = ": Extra inputs are not permitted"


def _target_keys_error(ws, keys: list[str]) -> tuple[str, str]:
    """The service's error for a target with these extra keys, and the whole text it would be unclipped
    (docs/security.md: each error of the message as ``where: what``, joined by ``; ``)."""
    ws.send(json.dumps({"target": {"position": [0.0, 0.0, 0.0], **dict.fromkeys(keys, 1)}}))
    err = _next_error(ws)
    assert err is not None
    return err, "; ".join(f"target.{k}{EXTRA}" for k in keys)


def test_a_websocket_error_of_300_characters_is_sent_whole_and_one_of_301_is_clipped_to_300(open_service):
    """docs/security.md: error replies are at most 300 characters. On the real service, at the boundary:
    an error whose text is exactly 300 characters arrives whole, one of 301 arrives as its first 299 and
    "…" (300 in all), one far longer also as 300."""
    part = len(f"target.{EXTRA}")  # one error without its key

    def keys(total: int, n: int = 6) -> list[str]:  # n short distinct keys whose error text is `total` long
        letters = total - n * part - 2 * (n - 1)
        sizes = [letters // n + (1 if i < letters % n else 0) for i in range(n)]
        return [chr(ord("a") + i) * s for i, s in enumerate(sizes)]

    with connect(ws_url(open_service, "/ws/control?decimation=500"), open_timeout=5) as ws:
        err, whole = _target_keys_error(ws, keys(300))
        assert len(whole) == 300 and err == whole, (len(err), err)
        err, whole = _target_keys_error(ws, keys(301))
        assert len(whole) == 301 and err == whole[:299] + "…", (len(err), err)
        err, whole = _target_keys_error(ws, keys(2000, n=40))
        assert len(whole) == 2000 and err == whole[:299] + "…", (len(err), err)


def test_a_long_key_inside_a_websocket_message_is_not_echoed(open_service):
    """A key nested in a message (here in its target) is named when short — a typo to see — and never
    echoed when long (input), as at the message's top level."""
    with connect(ws_url(open_service, "/ws/control?decimation=500"), open_timeout=5) as ws:
        err, _ = _target_keys_error(ws, ["positon"])
        assert err == f"target.positon{EXTRA}", err
        err, _ = _target_keys_error(ws, ["Z" * 100])
        assert err == f"target.(a long key){EXTRA}" and "Z" * 33 not in err, err


def test_allowed_hosts_and_allowed_origins(open_service):
    """docs/security.md: the Host must be a loopback name, the bound host or one of allowed_hosts
    (421 otherwise); a foreign Origin on a state change or handshake is refused (403) unless it is
    one of allowed_origins. Checked against a service that allows one of each, and the default one."""
    s = Service(env={"FDCONTROL_ALLOWED_HOSTS": '["cell.example"]',
                     "FDCONTROL_ALLOWED_ORIGINS": '["https://hmi.example"]'})
    plain = open_service
    try:
        for host, with_list, default in (("cell.example", 200, 421), (f"cell.example:{s.port}", 200, 421),
                                         ("CELL.example", 200, 421), ("evil.example", 421, 421),
                                         ("cell.example.evil", 421, 421), ("localhost", 200, 200),
                                         (f"127.0.0.1:{s.port}", 200, 200)):
            assert httpx.get(s.url + "/health", headers={"Host": host}).status_code == with_list, host
            assert httpx.get(plain.url + "/health", headers={"Host": host}).status_code == default, host
        hold = {"hold": False}
        for origin, with_list, default in (("https://hmi.example", 200, 403), ("https://hmi.example/", 200, 403),
                                           ("https://HMI.example", 200, 403), ("http://hmi.example", 403, 403),
                                           ("https://hmi.example:8443", 403, 403), ("https://evil.example", 403, 403)):
            r = httpx.post(s.url + "/control/hold", json=hold, headers={"Origin": origin})
            assert r.status_code == with_list, (origin, r.text)
            r = httpx.post(plain.url + "/control/hold", json=hold, headers={"Origin": origin})
            assert r.status_code == default, (origin, r.text)
        # the service's own origin is allowed; a GET is not a state change (no Origin check)
        own = f"http://127.0.0.1:{s.port}"
        assert httpx.post(s.url + "/control/hold", json=hold, headers={"Origin": own}).status_code == 200
        assert httpx.get(s.url + "/state", headers={"Origin": "https://evil.example"}).status_code == 200
        with connect(ws_url(s, "/ws/state"), open_timeout=5, origin="https://hmi.example") as ws:
            assert "q" in json.loads(ws.recv(timeout=5))
        for svc in (s, plain):
            with pytest.raises(InvalidStatus) as e:
                connect(ws_url(svc, "/ws/state"), open_timeout=5, origin="https://evil.example")
            assert e.value.response.status_code == 403
        with pytest.raises(InvalidStatus) as e:
            connect(ws_url(plain, "/ws/state"), open_timeout=5, origin="https://hmi.example")
        assert e.value.response.status_code == 403
    finally:
        s.stop()


def _pushes_the_arm(url: str) -> None:
    """A released arm follows a 30 N push: pushed until the loop reports the tip 1 cm further along x."""
    httpx.post(url + "/control/hold", json={"hold": False})
    x0 = tip_x_url(url)
    deadline = time.monotonic() + 30  # ends a hung test only (a held or stopped arm never gets there)
    while tip_x_url(url) - x0 <= 0.01:
        assert time.monotonic() < deadline, tip_x_url(url) - x0
        r = httpx.put(url + "/control/wrench", json={"wrench": [30.0, 0, 0, 0, 0, 0]})
        assert r.status_code == 200, r.text


def tip_x_url(url: str) -> float:
    return httpx.get(url + "/state").json()["tip_pose"][0][3]


def test_websocket_bad_inputs_get_errors_and_the_socket_stays_open(open_service):
    httpx.post(open_service.url + "/control/hold", json={"hold": False})
    with connect(ws_url(open_service, "/ws/control?decimation=50"), open_timeout=5, max_size=None) as ws:
        bad = ["[" * 1000 + "]" * 1000, '{"wrench": ' + "[" * 1000 + "]" * 1000 + "}",
               json.dumps({"wrench": ["5", 0, 0, 0, 0, 0]}), json.dumps({"wrench": [True, 0, 0, 0, 0, 0]}),
               json.dumps({"wrench": [0] * 6, "seq": False}), json.dumps({"wrench": [0] * 6, "seq": 10 ** 400}),
               json.dumps({"k" * 100_000: 1}), "x" * 200_000]
        for msg in bad:
            ws.send(msg)
            err = _next_error(ws)
            assert err is not None and len(err) <= MAX_DETAIL, msg[:40]
        x0 = tip_x(open_service)

        def push() -> None:
            ws.send(json.dumps({"wrench": [30.0, 0, 0, 0, 0, 0]}))
            while True:  # drain
                try:
                    ws.recv(timeout=0)
                except TimeoutError:
                    break

        _cycles_later(open_service.url, _one_loop_second(open_service.url), push)  # 1 s of the loop's cycles
        assert tip_x(open_service) - x0 > 0.01


def _next_error(ws, timeout: float = HUNG) -> str | None:  # the deadline only ends a hung test
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = json.loads(ws.recv(timeout=timeout))
        if "error" in m:
            return m["error"]
    return None


def test_acknowledgements_report_the_state_after_the_command(open_service):
    url = open_service.url
    try:
        r = httpx.post(url + "/control/stop").json()
        assert r["running"] is False
        r = httpx.post(url + "/control/start").json()
        assert r["running"] is True
        assert httpx.post(url + "/control/hold", json={"hold": True}).json()["holding"] is True
        assert httpx.post(url + "/control/hold", json={"hold": False}).json()["holding"] is False
    finally:
        httpx.post(url + "/control/start")


# ---------------------------------------------------------------------- a dead loop
def _loop_pid(s: Service) -> int:
    for pid in s.children():
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"spawn_main" in cmd:
            return pid
    raise AssertionError("no loop process found")


def _dockerfile_healthcheck() -> list[str]:
    """The Dockerfile's own HEALTHCHECK command (python -c "..."), so the test checks what ships."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    line = next(ln for ln in text.splitlines() if ln.startswith("HEALTHCHECK"))
    code = line.split('CMD python -c "', 1)[1].rsplit('"', 1)[0]
    return ["-c", code]


HEALTHCHECK = _dockerfile_healthcheck()


def test_killed_loop_is_noticed_within_one_watchdog_period_and_refused(tmp_path):
    """Bounds from the service's own clock: while the loop is stopped, every /health that still
    answers 200 reports a last cycle at most one watchdog period old (the age the verdict saw),
    so a fault is declared within one period however slowly the HTTP polls arrive on a loaded
    machine; a service whose threshold were two periods would answer 200 with an older cycle."""
    s = Service(env={"FDCONTROL_SUPERVISE": "false"})
    try:
        hc = subprocess.run([sys.executable, *HEALTHCHECK], env={**os.environ, "FDCONTROL_PORT": str(s.port)},
                            capture_output=True, timeout=10)
        assert hc.returncode == 0
        timeout = httpx.get(s.url + "/config").json()["command_timeout"]
        period = max(timeout, 0.05)  # LoopWorker.stale_after
        pid = _loop_pid(s)
        os.kill(pid, signal.SIGSTOP)  # stuck, not dead
        try:
            t0 = time.monotonic()
            ok_ages = []
            while (r := httpx.get(s.url + "/health")).status_code != 503:
                assert r.status_code == 200 and time.monotonic() - t0 < 10
                if r.json()["loop_running"]:
                    ok_ages.append(r.json()["last_cycle_age_s"])
            stuck = time.monotonic() - t0
            assert "not responding" in r.json()["fault"] or "stalled" in r.json()["fault"]
            assert httpx.put(s.url + "/control/wrench", json=WRENCH).status_code == 503
        finally:
            os.kill(pid, signal.SIGCONT)
        print(f"stuck loop noticed after {stuck * 1e3:.1f} ms by HTTP polls; oldest cycle answered ok: "
              f"{max(ok_ages, default=0) * 1e3:.1f} ms (watchdog period {period * 1e3:.0f} ms)")
        assert max(ok_ages, default=0.0) <= period + 0.002
        t0 = time.monotonic()
        while httpx.get(s.url + "/health").status_code != 200:
            assert time.monotonic() - t0 < 10
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        while httpx.get(s.url + "/health").status_code != 503:  # ("at once": the "exited" below, not this bound)
            assert time.monotonic() - t0 < HUNG
        noticed = time.monotonic() - t0
        print(f"dead loop noticed after {noticed * 1e3:.1f} ms (watchdog period {timeout * 1e3:.0f} ms)")
        h = httpx.get(s.url + "/health").json()
        # "exited": noticed from the process table (at once), not from the heartbeat going stale
        assert h["status"] == "fault" and "exited" in h["fault"]
        assert httpx.get(s.url + "/state").json()["stale"] is True
        r = httpx.put(s.url + "/control/wrench", json=WRENCH)
        assert r.status_code == 503 and "loop process" in r.json()["detail"]
        assert httpx.post(s.url + "/control/start").status_code == 503
        with connect(ws_url(s, "/ws/control"), open_timeout=HUNG) as ws:
            ws.send(json.dumps(WRENCH))
            assert "loop process" in (_next_error(ws) or "")
        with connect(ws_url(s, "/ws/state"), open_timeout=HUNG) as ws:  # the feed goes on, with stale states
            until(lambda: json.loads(ws.recv(timeout=HUNG)), lambda m: m["stale"] is True, HUNG,
                  "a stale state on /ws/state")
        hc = subprocess.run([sys.executable, *HEALTHCHECK], env={**os.environ, "FDCONTROL_PORT": str(s.port)},
                            capture_output=True, timeout=10)
        assert hc.returncode != 0
    finally:
        s.stop()


def _restarted(s: Service, n: int) -> dict:
    """/health once the supervisor reports `n` restarts and the new loop process is healthy."""
    deadline = time.monotonic() + 60  # ends a hung test only (a restart spawns a process: seconds under load)
    while True:
        r = httpx.get(s.url + "/health")
        if r.status_code == 200 and r.json()["restarts"] == n:
            return r.json()
        assert time.monotonic() < deadline, r.text
        assert "giving up" not in s.output(), s.output()[-2000:]  # it never comes
        time.sleep(0.05)


def _cycles_later(url: str, n: int, each=None) -> dict:
    """The state once the loop has run `n` more cycles (its own count), calling `each()` meanwhile."""
    return cycles_later(lambda: httpx.get(url + "/state").json(), n, each)


def _one_loop_second(url: str) -> int:
    """One second of the loop's own cycles (its rate)."""
    return int(httpx.get(url + "/config").json()["rate"])


def test_supervision_restarts_a_killed_loop_into_hold_with_the_parameters_in_force(tmp_path):
    """docs/security.md, supervision: a running loop comes back holding, with the bounds PATCHed
    before the crash (not their startup values); a stopped loop comes back stopped."""
    s = Service()
    try:
        start = httpx.get(s.url + "/config").json()
        tight = {"max_force": start["max_force"] / 2, "max_linear_speed": start["max_linear_speed"] / 2}
        assert httpx.patch(s.url + "/config", json=tight).status_code == 200
        _pushes_the_arm(s.url)
        os.kill(_loop_pid(s), signal.SIGKILL)
        _restarted(s, 1)
        cfg = httpx.get(s.url + "/config").json()
        assert {k: cfg[k] for k in tight} == tight
        assert cfg["workspace_box"] == start["workspace_box"]  # the simulated arm's start box came along
        # its settings reached the new process as models (a plain-data box once made pydantic warn here)
        assert "serializer warnings" not in s.output(), s.output()
        r = httpx.put(s.url + "/control/wrench", json={"wrench": [start["max_force"] * 0.75, 0, 0, 0, 0, 0]})
        assert r.status_code == 422  # the tightened max_force is the one in force in the new process
        st = httpx.get(s.url + "/state").json()
        assert st["running"] and st["holding"] and not st["stale"]
        q0 = np.array(st["q"])
        push = lambda: httpx.put(s.url + "/control/wrench", json={"wrench": [30.0, 0, 0, 0, 0, 0]})  # noqa: E731
        st = _cycles_later(s.url, 200, push)  # 200 cycles of wrenches do not move a held arm
        np.testing.assert_allclose(st["q"], q0, atol=1e-9)
        _pushes_the_arm(s.url)  # an explicit release moves it again
        # stopped, then killed: it comes back stopped
        assert httpx.post(s.url + "/control/stop").json()["running"] is False
        os.kill(_loop_pid(s), signal.SIGKILL)
        _restarted(s, 2)
        st = httpx.get(s.url + "/state").json()
        assert st["running"] is False and not st["stale"]
        cfg = httpx.get(s.url + "/config").json()
        assert {k: cfg[k] for k in tight} == tight
    finally:
        s.stop()


def test_a_stuck_loop_is_replaced_after_2_s_and_only_crashes_spend_the_restart_budget():
    """docs/security.md, supervision, on the real service with ``max_restarts: 1``: a stuck loop process
    (SIGSTOP: alive and silent) is left alone for 2 s, then killed and replaced — holding, with the bounds
    PATCHed before — without spending the budget; the first crash after it is replaced, the second is
    one crash too many: the supervisor gives up and /health stays 503 with the dead process's reason."""
    s = Service(env={"FDCONTROL_MAX_RESTARTS": "1"})
    try:
        start = httpx.get(s.url + "/config").json()
        tight = {"max_force": start["max_force"] / 2, "max_linear_speed": start["max_linear_speed"] / 2}
        assert httpx.patch(s.url + "/config", json=tight).status_code == 200
        _pushes_the_arm(s.url)  # running, released
        pid = _loop_pid(s)
        os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        # the supervisor first sees it stuck after t0, so before t0 + 2 s it must still be alive
        # (a lower bound: a loaded machine only makes the kill later)
        while (waited := time.monotonic() - t0) < 1.9:
            assert process_state(pid) not in (None, "Z", "X"), (
                f"the stuck process ended {waited:.3f} s after it stopped")
            time.sleep(0.01)
        _restarted(s, 1)  # killed and replaced (the wait's deadline: 60 s)
        print(f"stuck loop process replaced {time.monotonic() - t0:.2f} s after it stopped")
        assert process_state(pid) is None and _loop_pid(s) != pid
        out = s.output()
        assert ("is not responding" in out or "is stalled" in out) and "restarting it into hold" in out, out[-2000:]
        cfg = httpx.get(s.url + "/config").json()
        assert {k: cfg[k] for k in tight} == tight  # the bounds in force before, not the startup values
        st = _cycles_later(s.url, 50)
        assert st["running"] and st["holding"] and not st["stale"]  # it was running: back holding
        # the kill spent nothing: one crash is still replaced …
        os.kill(_loop_pid(s), signal.SIGKILL)
        _restarted(s, 2)
        cfg = httpx.get(s.url + "/config").json()
        assert {k: cfg[k] for k in tight} == tight
        # … and the next one is beyond the budget of 1
        os.kill(_loop_pid(s), signal.SIGKILL)
        deadline = time.monotonic() + 60  # ends a hung test only
        while "giving up" not in s.output():
            assert time.monotonic() < deadline, s.output()[-2000:]
            time.sleep(0.05)
        assert "loop process restarted 1 times in 300 s; giving up" in s.output()
        for _ in range(5):  # given up: the dead process stays the one /health reports on
            r = httpx.get(s.url + "/health")
            assert r.status_code == 503 and r.json()["restarts"] == 2 and "exited" in r.json()["fault"], r.text
            assert httpx.put(s.url + "/control/wrench", json=WRENCH).status_code == 503
    finally:
        s.stop()


def test_a_recording_goes_on_in_the_same_file_across_a_loop_restart(tmp_path):
    """A recording running when the supervisor replaces the loop process continues in the same file with
    the new process's states (before, it ended silently at the restart: the states after it were lost)."""
    path = tmp_path / "across.mcap"
    s = Service("--record", str(path))
    try:
        _pushes_the_arm(s.url)
        before = httpx.get(s.url + "/recording").json()
        assert before["active"], before
        os.kill(_loop_pid(s), signal.SIGKILL)
        _restarted(s, 1)
        assert httpx.get(s.url + "/recording").json()["active"]  # still recording, into the same file
        st = _cycles_later(s.url, 100)  # the new process: holding (a running loop comes back holding)
        assert st["holding"] and st["running"]
        done = httpx.post(s.url + "/recording/stop").json()
        assert done["name"] == path.name and done["states"] > before["states"], done
    finally:
        s.stop()
    states = read_recording(path).states()
    cycles = np.array([x["cycle"] for x in states])
    back = np.flatnonzero(np.diff(cycles) < 0)  # the new process counts its cycles from the start again
    assert len(back) == 1, cycles[:: max(1, len(cycles) // 50)]
    after = states[back[0] + 1:]
    assert len(after) >= 100 and all(x["holding"] for x in after)  # what the new process did is in the file


# ---------------------------------------------------------------------- startup
def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fdcontrol.server", "serve", *args], cwd=ROOT, timeout=120,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True)


def _one_line_exit_2(p: subprocess.CompletedProcess, fragment: str) -> None:
    err = p.stderr.strip()
    assert p.returncode == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and fragment in err, err
    assert "leaked shared_memory" not in p.stderr


def test_non_loopback_without_token_refuses_to_start():
    _one_line_exit_2(serve("--host", "0.0.0.0", "--port", "1"), "without a token")


def test_configuration_errors_are_one_line_exit_2(tmp_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("gamma: [1, 2\nrate: : :\n")
    _one_line_exit_2(serve("--config", str(bad_yaml), "--port", "1"), "YAML")
    _one_line_exit_2(serve("--robot", str(tmp_path / "missing.urdf"), "--port", "1"), "missing.urdf")
    _one_line_exit_2(serve("--gamma", "1e12", "--port", "1"), "gamma")
    _one_line_exit_2(serve("--driver", "nonexistent_driver", "--port", "1"), "nonexistent_driver")


# ---------------------------------------------------------------------- the OpenAPI contract
ST_CONFIG = """
# Semantic rules the schema cannot state (|F| ≤ max_force, a unit quaternion, q of the robot's
# dof, tighten-only safety settings) answer a documented 422 to schema-valid input.
[checks.positive_data_acceptance]
expected-statuses = ["2XX", "401", "403", "404", "409", "422"]
"""


def test_schemathesis_all_checks_find_nothing(tmp_path):
    """Every check schemathesis has (status codes, response schemas, headers, negative data,
    Allow on 405, …) over the examples, coverage and fuzzing phases against the real server."""
    cfg = tmp_path / "schemathesis.toml"
    cfg.write_text(ST_CONFIG)
    exe = Path(sys.executable).with_name("schemathesis")
    s = Service()  # its own: the fuzzer stops, holds and reconfigures the arm
    try:
        p = subprocess.run([str(exe), "--config-file", str(cfg), "run", s.url + "/openapi.json",
                            "--checks", "all", "--max-examples", "40", "--phases", "examples,coverage,fuzzing",
                            "--seed", "12", "--workers", "1"], capture_output=True, text=True, timeout=900)
    finally:
        s.stop()
    tail = "\n".join(p.stdout.splitlines()[-25:])
    print(tail)
    assert p.returncode == 0, p.stdout[-6000:]  # with the failing operation, its request and the response
    assert " passed" in tail and "failures" not in tail.lower().replace("0 failures", "")


def test_public_read_opens_monitoring_only():
    s = Service(env={"FDCONTROL_TOKEN": TOKEN, "FDCONTROL_PUBLIC_READ": "true"})
    try:
        assert httpx.get(s.url + "/state").status_code == 200
        with connect(ws_url(s, "/ws/state"), open_timeout=5) as ws:
            assert "q" in json.loads(ws.recv(timeout=5))
        with pytest.raises(InvalidStatus):
            connect(ws_url(s, "/ws/control"), open_timeout=5)
        assert httpx.post(s.url + "/control/stop").status_code == 401
        assert httpx.put(s.url + "/control/wrench", json=WRENCH).status_code == 401
    finally:
        s.stop()


def test_msgpack_deep_nesting_gets_an_error_and_the_socket_stays_open(open_service):
    import msgpack

    with connect(ws_url(open_service, "/ws/control?decimation=50"), subprotocols=["msgpack"],
                 open_timeout=5) as ws:
        nested: object = 0
        for _ in range(40):
            nested = [nested]
        for raw in (b"\x91" * 1000 + b"\xc0", msgpack.packb({"wrench": nested})):
            ws.send(raw)
            end = time.monotonic() + HUNG  # (the deadlines only end a hung test)
            err = None
            while err is None and time.monotonic() < end:
                m = msgpack.unpackb(ws.recv(timeout=HUNG))
                err = m.get("error")
            assert err is not None and len(err) <= MAX_DETAIL
        ws.send(msgpack.packb({"wrench": [1.0, 0, 0, 0, 0, 0], "seq": 777}))
        end = time.monotonic() + HUNG
        while time.monotonic() < end:  # the valid wrench is taken: acknowledged, no error
            m = msgpack.unpackb(ws.recv(timeout=HUNG))
            assert "error" not in m
            if m.get("seq_ack") == 777:
                break
        else:
            raise AssertionError("the valid wrench was not acknowledged")


@pytest.mark.parametrize(("method", "path", "body"), [
    ("PUT", "/sim/push", {"wrench": [False, 0, 0, 0, 0, 0]}),  # a boolean is not a force
    ("PUT", "/sim/push", {"wrench": [501.0, 0, 0, 0, 0, 0]}),  # |F| > 500 N
    ("PUT", "/sim/push", {"wrench": [0, 0, 0, 30.0, 0, 40.01]}),  # |τ| = 50.008 N·m > 50
    ("PUT", "/control/twist", {"twist": [True, 0, 0, 0, 0, 0]}),
    ("PUT", "/control/twist", {"twist": [0.0] * 6, "seq": -1}),
    ("PUT", "/control/twist", None),
    ("POST", "/analysis/singular-values", {"q": [8.8e307, 0, 0, 0, 0, 0]}),  # |q| > 1e3
    ("POST", "/analysis/singular-values", {"q": [0.1] * 6, "mappings": [{"name": "fd", "gamma": 5e-324}]}),
])
def test_invalid_input_is_a_422_with_the_declared_field_list(open_service, method, path, body):
    """The body is {"detail": [{"loc", "msg"}]}, the 422 every route declares (schemas.ValidationErrorOut)."""
    r = httpx.request(method, open_service.url + path, json=body, timeout=HUNG)  # a loaded machine: not 5 s
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, list) and detail and all(set(e) == {"loc", "msg"} for e in detail), detail
    spec = httpx.get(open_service.url + "/openapi.json").json()
    assert spec["paths"][path][method.lower()]["responses"]["422"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ValidationErrorOut"}


def test_push_at_the_bounds_is_accepted_by_the_schema(open_service):
    """|F| = 500 N and |τ| = 50 N·m exactly pass validation (the kinematic driver then answers 409)."""
    r = httpx.put(open_service.url + "/sim/push", json={"wrench": [300.0, 400.0, 0, 0, 30.0, 40.0]})
    assert r.status_code in (200, 409), r.text
