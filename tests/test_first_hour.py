"""What a new user meets in the first hour, each point a defect that once misled someone: a bad WebSocket
query parameter said as such (not a bare 403 that reads like an access failure), a wrench's reply
that says what the arm does once the wrench arrived, and Ctrl-C (the way `make serve` says to stop) or SIGTERM
ending the service in order, without tracebacks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from .service import ROOT, STARTUP, Service, free_port, process_state


@pytest.fixture(scope="module")
def svc():
    s = Service("--driver", "simulated")
    yield s
    s.stop()


@pytest.mark.parametrize("value", ["0", "abc", "10001", "-3"])
def test_a_bad_decimation_is_said_on_the_socket(svc, value):
    url = svc.url.replace("http", "ws") + f"/ws/state?decimation={value}"
    with connect(url, open_timeout=30) as ws:  # the handshake succeeds: this is no access failure
        reply = json.loads(ws.recv(timeout=30))
        assert "decimation must be an integer in [1, 10000]" in reply["error"]
        assert repr(value) in reply["error"]
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


def test_the_wrench_reply_says_the_arm_moves(svc):
    """After the watchdog tripped (the loop holds), a new wrench moves the arm again: its reply says
    holding false — the state once the loop took it — not the hold of the stream before it."""
    c = httpx.Client(base_url=svc.url, timeout=30)
    c.post("/control/hold", json={"hold": False})
    assert c.put("/control/wrench", json={"wrench": [2, 0, 0, 0, 0, 0]}).status_code == 200
    deadline = time.monotonic() + 60  # only ends a hung test: the trip is read from the loop's record
    while time.monotonic() < deadline:
        s = c.get("/state").json()
        if s["watchdog"] == "tripped" and s["holding"]:
            break
    else:
        pytest.fail("the watchdog never tripped")
    r = c.put("/control/wrench", json={"wrench": [2, 0, 0, 0, 0, 0]}).json()
    assert r["holding"] is False, r
    after = c.get("/state").json()
    assert after["seq_ack"] >= 2


@contextlib.contextmanager
def _serving(log) -> Iterator[tuple[subprocess.Popen, list[int]]]:
    """`fdcontrol serve` in a process group of its own (as a terminal's job), once healthy, with its
    children (the loop process and multiprocessing's resource tracker); whatever is left is killed after."""
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "fdcontrol.server", "serve", "--host", "127.0.0.1",
                          "--port", str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
    loop: list[int] = []
    try:
        deadline = time.monotonic() + STARTUP  # only ends a hung test
        while time.monotonic() < deadline:
            assert p.poll() is None, Path(log.name).read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            pytest.fail("the service did not become healthy")
        loop += [int(c) for t in Path(f"/proc/{p.pid}/task").iterdir() for c in (t / "children").read_text().split()]
        assert loop, "the loop process (and the resource tracker)"
        yield p, loop
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
        for pid in loop:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _gone(pid: int) -> bool:
    """The process has ended (an orphan's zombie, until whoever adopted it reaps it, counts as ended)."""
    return process_state(pid) in (None, "Z")


def _all_gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + 30  # only ends a hung test (the resource tracker may take a moment)
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return all(_gone(pid) for pid in pids)


@pytest.mark.parametrize(("sig", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_stops_the_service_in_order_without_a_traceback(sig, exit_code):
    """A terminal's Ctrl-C sends SIGINT to the whole process group, and a service manager's stop (systemd's
    default) SIGTERM to the whole control group: the API process and the loop process alike. The loop
    process leaves its ending to the API process (no KeyboardInterrupt or death by the signal in it, so no
    restart by the supervisor while the service shuts down); the service says it stopped, in one line,
    exits with 130 after Ctrl-C and 0 after SIGTERM, and leaves no process behind."""
    with tempfile.NamedTemporaryFile("w+", prefix="fdcontrol-stop-", suffix=".log") as log:
        with _serving(log) as (p, loop):
            os.killpg(p.pid, sig)  # Ctrl-C, or a service manager's stop
            code = p.wait(60)  # only ends a hung test
            out = Path(log.name).read_text()
            assert code == exit_code, out
            assert "Traceback" not in out and "KeyboardInterrupt" not in out and "restarting" not in out, out
            assert out.strip().splitlines()[-1] == "fdcontrol serve: stopped", out
            assert _all_gone(loop), "a child outlived the service"


def test_a_killed_api_process_leaves_no_loop_process_behind():
    """The loop process ignores SIGINT and SIGTERM (the API process ends it in order); should the API
    process itself be killed (SIGKILL: nothing of it runs any more), the loop process sees its command
    pipe close and ends on its own instead of holding the robot's connection forever."""
    with tempfile.NamedTemporaryFile("w+", prefix="fdcontrol-kill-", suffix=".log") as log:
        with _serving(log) as (p, loop):
            os.kill(p.pid, signal.SIGKILL)  # the API process only
            p.wait(10)
            assert _all_gone(loop), "the loop process outlived the killed API process"


def test_a_run_without_chromium_says_in_one_line_that_the_browser_tests_did_not_run(tmp_path):
    """Where no chromium can be installed the dashboard's browser tests skip, and the summary says so in
    one line (a green run must not read as if they passed). Run on a test that needs the browser, with a
    PATH that has no chromium and no REQUIRE (which would turn the skip into a failure)."""
    (tmp_path / "test_needs_a_browser.py").write_text("def test_needs_a_browser(browser):\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "REQUIRE"}
    env["PATH"] = str(Path(sys.executable).parent)  # no chromium on it
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                        str(tmp_path / "test_needs_a_browser.py")], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [line for line in r.stdout.splitlines() if "browser tests did not run" in line]
    assert lines == ["1 browser tests did not run: no chromium here (`make test` installs it where it runs as root "
                     "with apt-get)"], r.stdout
