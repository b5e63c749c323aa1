"""Access details an operator checks, against the real service on loopback: token quality at
startup, throttled guessing per client, server-side logout, replies that do not echo the
input, targets within reach, and no acknowledgement from a dead loop process."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from .service import Service
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


# ---------------------------------------------------------------------- throttling
def test_failed_authentication_is_throttled_per_client(secured):
    """5 failures at once, then 429 without checking the token (the right one too), for that
    client only; the bucket refills at RATE per second (the service's settings above)."""
    with client_from("127.0.0.2") as guesser, client_from("127.0.0.3") as bystander:
        codes = []
        t0 = time.monotonic()
        for i in range(200):  # bounded: 200 requests or 20 s
            r = guesser.get(secured.url + "/state", headers={"Authorization": f"Bearer guess-{i:04d}-xxxxxxxx"})
            codes.append(r.status_code)
            if time.monotonic() - t0 > 20:
                break
        elapsed = time.monotonic() - t0
        # at most the burst plus what the rate refilled meanwhile was checked at all
        assert codes.count(401) <= 5 + RATE * elapsed + 1, (codes.count(401), elapsed)
        assert codes.count(429) >= len(codes) - (5 + RATE * elapsed + 1)
        r = guesser.get(secured.url + "/state", headers=AUTH)
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert guesser.post(secured.url + "/auth/login", json={"token": TOKEN}).status_code == 429
        assert bystander.get(secured.url + "/state", headers=AUTH).status_code == 200  # per client
        time.sleep(int(r.headers["retry-after"]))  # the documented wait
        assert guesser.get(secured.url + "/state", headers=AUTH).status_code == 200


def test_requests_without_credentials_are_not_throttled(secured):
    with client_from("127.0.0.4") as c:
        assert all(c.get(secured.url + "/state").status_code == 401 for _ in range(20))
        assert c.get(secured.url + "/state", headers=AUTH).status_code == 200


# ---------------------------------------------------------------------- replies and ranges
def test_error_replies_do_not_echo_the_input(secured):
    url = secured.url
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
    for position in ([50.0, 0.0, 0.0], [0.0, 0.0, -3.0], [1e6, 1e6, 1e6]):
        r = httpx.put(url + "/control/target", json={"position": position}, headers=AUTH)
        assert r.status_code == 422 and "reach" in r.text, r.text
    tip = httpx.get(url + "/state", headers=AUTH).json()["tip_pose"]
    here = [tip[0][3], tip[1][3], tip[2][3]]
    assert httpx.put(url + "/control/target", json={"position": here}, headers=AUTH).status_code == 200


# ---------------------------------------------------------------------- a dead loop
def _dead(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


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
