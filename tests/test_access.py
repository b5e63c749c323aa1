"""Access details an operator checks, against the real service on loopback: token quality at
startup (no empty token), throttled guessing per client that never locks out the right token
nor trusts X-Forwarded-For, failures counted and logged by the service, server-side logout that
closes that session's WebSockets, token rotation without a restart, replies that do not echo
the input, targets within reach, and no acknowledgement from a dead loop process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from fdcontrol.server.auth import COOKIE

from .service import Service, process_state
from .test_security import _loop_pid, _one_line_exit_2, serve

TOKEN = "a-long-enough-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MARK = "zq7MARKzq7"
RATE = 0.5  # failed attempts per second regained: slow enough that a loaded machine's slow requests
#             do not refill the bucket between two of them  # appears in no reply unless the reply echoes the input


@pytest.fixture(scope="module")
def secured():
    s = Service(env={"FDCONTROL_TOKEN": TOKEN, "FDCONTROL_AUTH_BURST": "5", "FDCONTROL_AUTH_RATE": str(RATE)},
                token=TOKEN)
    yield s
    s.stop()


def client_from(addr: str) -> httpx.Client:
    """An HTTP client whose connections come from `addr` (another loopback address: another client)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=addr), timeout=10)


# ---------------------------------------------------------------------- tokens at startup
def test_blank_token_file_is_refused_at_startup(tmp_path):
    f = tmp_path / "token"
    f.write_text("\n" + TOKEN + "\n")  # the token on the second line: the first is blank
    _one_line_exit_2(serve("--token-file", str(f), "--port", "1"), "blank")
    f.write_text("")
    _one_line_exit_2(serve("--token-file", str(f), "--port", "1"), "blank")


def test_an_empty_token_is_refused_at_startup():
    _one_line_exit_2(serve("--token", "", "--port", "1"), "empty")
    _one_line_exit_2(serve("--port", "1", env={"FDCONTROL_TOKEN": ""}), "empty")
    _one_line_exit_2(serve("--port", "1", env={"FDCONTROL_TOKEN": "   "}), "empty")


@pytest.mark.parametrize("token", ["a", "short-token"])
def test_short_tokens_are_refused_at_startup(tmp_path, token):
    _one_line_exit_2(serve("--token", token, "--port", "1"), "at least 16 characters")
    f = tmp_path / "token"
    f.write_text(token + "\n")
    _one_line_exit_2(serve("--token-file", str(f), "--port", "1"), "at least 16 characters")


def test_a_token_file_is_used(tmp_path):
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    s = Service("--token-file", str(f), token=TOKEN)
    try:
        assert httpx.get(s.url + "/state").status_code == 401
        assert httpx.get(s.url + "/state", headers=AUTH).status_code == 200
    finally:
        s.stop()


# ---------------------------------------------------------------------- sessions
def test_logout_makes_the_old_cookie_fail(secured):
    r = httpx.post(secured.url + "/auth/login", json={"token": TOKEN})
    assert r.status_code == 200
    jar = dict(r.cookies)
    assert httpx.get(secured.url + "/state", cookies=jar).status_code == 200
    other = dict(httpx.post(secured.url + "/auth/login", json={"token": TOKEN}).cookies)
    assert other != jar  # each login its own session
    assert httpx.post(secured.url + "/auth/logout", cookies=jar).status_code == 200
    assert httpx.get(secured.url + "/state", cookies=jar).status_code == 401  # the same cookie, replayed
    assert httpx.get(secured.url + "/state", cookies=other).status_code == 200  # other sessions live on


def test_logout_closes_the_websockets_of_that_session(secured):
    """A /ws/control opened with a session cookie is closed by that session's logout (so it cannot
    move the arm afterwards); another session's socket stays open."""
    ws_url = secured.url.replace("http", "ws") + "/ws/control?decimation=50"
    jar = dict(httpx.post(secured.url + "/auth/login", json={"token": TOKEN}).cookies)
    other = dict(httpx.post(secured.url + "/auth/login", json={"token": TOKEN}).cookies)
    with connect(ws_url, additional_headers={"Cookie": f"{COOKIE}={jar[COOKIE]}"}, open_timeout=10) as mine, \
            connect(ws_url, additional_headers={"Cookie": f"{COOKIE}={other[COOKIE]}"}, open_timeout=10) as theirs:
        assert "cycle" in json.loads(mine.recv(timeout=10))
        assert httpx.post(secured.url + "/auth/logout", cookies=jar).status_code == 200
        with pytest.raises(ConnectionClosed) as closed:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # (states come until the close; none for 1 s is not the close)
                with contextlib.suppress(TimeoutError):
                    mine.recv(timeout=1)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        assert "logged out" in closed.value.rcvd.reason
        assert "cycle" in json.loads(theirs.recv(timeout=10))  # the other session's socket lives on


def test_the_token_is_rotated_without_a_restart(tmp_path):
    """POST /auth/token with the current token, then SIGHUP re-reading the token file: each time the
    old token stops working at once, the new one works, sessions end and WebSockets opened with
    the old credentials are closed."""
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    s = Service("--token-file", str(f), token=TOKEN)
    second, third = TOKEN + "-two", TOKEN + "-three"
    try:
        url = s.url
        cookie = dict(httpx.post(url + "/auth/login", json={"token": TOKEN}).cookies)
        with connect(url.replace("http", "ws") + "/ws/state?decimation=50", open_timeout=10,
                     additional_headers=AUTH) as ws:
            assert "cycle" in json.loads(ws.recv(timeout=10))
            assert httpx.post(url + "/auth/token", json={"token": "short"}, headers=AUTH).status_code == 422
            assert httpx.post(url + "/auth/token", json={"token": second}, cookies=cookie).status_code == 401
            assert httpx.post(url + "/auth/token", json={"token": second}, headers=AUTH).status_code == 200
            with pytest.raises(ConnectionClosed):
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:  # (none for 1 s on a loaded machine is not the close)
                    with contextlib.suppress(TimeoutError):
                        ws.recv(timeout=1)
        assert httpx.get(url + "/state", headers=AUTH).status_code == 401
        assert httpx.get(url + "/state", cookies=cookie).status_code == 401
        assert httpx.get(url + "/state", headers={"Authorization": f"Bearer {second}"}).status_code == 200
        f.write_text(third + "\n")  # the operator edits the file and signals the service
        os.kill(s.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while httpx.get(url + "/state", headers={"Authorization": f"Bearer {third}"}).status_code != 200:
            assert time.monotonic() < deadline, s.output()[-2000:]
            time.sleep(0.05)
        assert httpx.get(url + "/state", headers={"Authorization": f"Bearer {second}"}).status_code == 401
        assert s.proc.poll() is None and "API token replaced" in s.output()
    finally:
        s.stop()


# ---------------------------------------------------------------------- throttling
def _guess(c: httpx.Client, url: str, n: int = 200, headers: dict[str, str] | None = None) -> tuple[list[int], float]:
    """`n` wrong bearer tokens (bounded: n requests or 20 s); their status codes and the time taken."""
    codes = []
    t0 = time.monotonic()
    for i in range(n):
        r = c.get(url + "/state", headers={"Authorization": f"Bearer guess-{i:04d}-xxxxxxxx", **(headers or {})})
        codes.append(r.status_code)
        if time.monotonic() - t0 > 20:
            break
    return codes, time.monotonic() - t0


def test_failed_authentication_is_throttled_but_the_right_token_gets_through(secured):
    """200 wrong tokens from one address: after the burst, wrong tokens get 429 (at most the burst
    plus what the rate refilled was answered 401); the right token still works at once from that
    very address — on a read, on POST /control/stop and on the login."""
    with client_from("127.0.0.2") as guesser, client_from("127.0.0.3") as bystander:
        codes, elapsed = _guess(guesser, secured.url)
        assert codes.count(401) <= 5 + RATE * elapsed + 1, (codes.count(401), elapsed)
        assert codes.count(429) >= len(codes) - (5 + RATE * elapsed + 1)
        r = guesser.get(secured.url + "/state", headers={"Authorization": "Bearer still-wrong-xxxxxxxxxx"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1  # still throttled for wrong ones
        assert guesser.get(secured.url + "/state", headers=AUTH).status_code == 200
        r = guesser.post(secured.url + "/control/stop", headers=AUTH)
        assert r.status_code == 200 and r.json()["running"] is False, r.text
        assert guesser.post(secured.url + "/control/start", headers=AUTH).json()["running"] is True
        assert guesser.post(secured.url + "/auth/login", json={"token": TOKEN}).status_code == 200
        assert guesser.post(secured.url + "/auth/login", json={"token": "wrong-" + TOKEN}).status_code == 429
        assert bystander.get(secured.url + "/state", headers=AUTH).status_code == 200


def test_x_forwarded_for_does_not_escape_the_throttle(secured):
    """A fresh X-Forwarded-For per request is ignored (no trusted proxy configured): the guesses
    still count against the connection's own address — 127.0.0.1, the address a proxy on the same
    host would have (the one uvicorn would trust by default)."""
    with client_from("127.0.0.1") as guesser:
        codes = []
        for i in range(30):
            r = guesser.get(secured.url + "/state", headers={"Authorization": f"Bearer guess-{i:04d}-xxxxxxxx",
                                                             "X-Forwarded-For": f"10.1.{i}.{i}"})
            codes.append(r.status_code)
        assert codes.count(401) <= 5 + 2 and codes[-1] == 429, codes


def test_auth_failures_are_counted_in_the_service_and_logged(secured):
    """3 wrong bearer tokens and a wrong login raise fdcontrol_auth_failures_total (scraped from the
    running service) by exactly 4, and each is logged."""
    def scraped() -> float:
        text = httpx.get(secured.url + "/metrics", headers=AUTH).text
        line = next(ln for ln in text.splitlines() if ln.startswith("fdcontrol_auth_failures_total "))
        return float(line.split()[1])

    before = scraped()
    logged = secured.output().count("authentication failed")
    with client_from("127.0.0.8") as c:
        for i in range(3):
            assert c.get(secured.url + "/state", headers={"Authorization": f"Bearer wrong-{i}-xxxxxxxxxxxx"}
                         ).status_code == 401
        assert c.post(secured.url + "/auth/login", json={"token": "wrong-login-xxxxxxxxxxxx"}).status_code == 401
        assert c.get(secured.url + "/state").status_code == 401  # no credential at all: not a failed attempt
    assert scraped() - before == 4
    deadline = time.monotonic() + 10  # the log is written by the service process: read it until it shows
    while secured.output().count("authentication failed") < logged + 4:
        assert time.monotonic() < deadline, secured.output()[-2000:]
        time.sleep(0.05)
    assert "127.0.0.8" in secured.output() and "wrong login token" in secured.output()


def test_requests_without_credentials_are_not_throttled(secured):
    with client_from("127.0.0.4") as c:
        assert all(c.get(secured.url + "/state").status_code == 401 for _ in range(20))
        assert c.get(secured.url + "/state", headers=AUTH).status_code == 200


# ---------------------------------------------------------------------- replies and ranges
def take_lease(url: str) -> None:
    """This client commands from here on (a test before may have left another client's lease running)."""
    assert httpx.post(url + "/control/lease", json={"take": True}, headers=AUTH).status_code == 200


def test_error_replies_do_not_echo_the_input(secured):
    url = secured.url
    take_lease(url)
    bad = [("PUT", "/control/wrench", {"wrench": [0.0] * 6, MARK: 1}),
           ("PUT", "/control/wrench", {"wrench": [0.0] * 6, "frame": MARK}),
           ("PUT", "/control/target", {"position": [0.5, 0.2, 0.5], "frame": MARK}),
           ("PATCH", "/config", {MARK: 1}),
           ("PATCH", "/config", {"mapping": MARK}),
           ("POST", "/analysis/singular-values", {"q": [0.0] * 6, "robot": MARK})]
    for method, path, body in bad:
        r = httpx.request(method, url + path, json=body, headers=AUTH)
        assert r.status_code == 422, (path, r.text)
        assert MARK not in r.text, (path, r.text)
    r = httpx.get(url + "/state", headers={"Authorization": f"Bearer {MARK}"})
    assert r.status_code in (401, 429) and MARK not in r.text


def test_targets_beyond_the_reach_are_refused(secured):
    url = secured.url
    take_lease(url)
    for position in ([50.0, 0.0, 0.0], [0.0, 0.0, -3.0], [1e6, 1e6, 1e6]):
        r = httpx.put(url + "/control/target", json={"position": position}, headers=AUTH)
        assert r.status_code == 422 and "reach" in r.text, r.text
    tip = httpx.get(url + "/state", headers=AUTH).json()["tip_pose"]
    here = [tip[0][3], tip[1][3], tip[2][3]]
    assert httpx.put(url + "/control/target", json={"position": here}, headers=AUTH).status_code == 200


# ---------------------------------------------------------------------- a dead loop
def _dead(pid: int) -> bool:
    return process_state(pid) in (None, "Z", "X")


def test_a_wrench_right_after_the_loop_died_is_refused():
    s = Service(env={"FDCONTROL_SUPERVISE": "false"})
    try:
        with httpx.Client(timeout=10) as c:
            assert c.put(s.url + "/control/wrench", json={"wrench": [1.0, 0, 0, 0, 0, 0]}).status_code == 200
            pid = _loop_pid(s)
            os.kill(pid, signal.SIGKILL)
            t0 = time.monotonic()
            while not _dead(pid):
                assert time.monotonic() - t0 < 5
            r = c.put(s.url + "/control/wrench", json={"wrench": [1.0, 0, 0, 0, 0, 0]})
            assert r.status_code == 503 and "loop process" in r.json()["detail"], r.text
    finally:
        s.stop()
