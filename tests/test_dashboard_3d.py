"""The dashboard's 3-D arm view (three.js) in a real headless chromium (Playwright) against the real service:
the link shapes are drawn where the page's own camera puts the links (pixels read back from the WebGL
canvas), the links follow the live state (the page's forward kinematics of the description equals the
state's tip pose to 1e-9), a screenshot differs after the arm moved and after an orbit, no console
errors, and no request leaves the host."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
from websockets.sync.client import connect

from .service import Service
from .test_dashboard import CHROMIUM, sync_playwright

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or sync_playwright is None,
    reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it) and playwright",
)
DEADLINE_MS = 120_000  # only ends a hung test (a loaded 2-core machine)

#: RGBA of canvas pixels (the WebGL canvas copied onto a 2-D one: its drawing buffer is preserved)
PIXELS = """(pts) => {
  const c = document.getElementById('arm'), g = document.createElement('canvas');
  g.width = c.width; g.height = c.height;
  const x = g.getContext('2d'); x.drawImage(c, 0, 0);
  return pts.map(([px, py]) => Array.from(x.getImageData(Math.round(px), Math.round(py), 1, 1).data));
}"""

#: canvas pixels of the middle of each link cylinder (the description's own, e.g. the shipped arms' collision
#: capsules, or one generated between a link's origin and its child's)
MIDPOINTS = """() => {
  const a = window.arm3d, out = [];
  for (const s of a.desc.shapes) {
    if (s.kind !== 'cylinder') continue;
    const L = a.linkPose(s.link), o = s.origin;  // row-major 4×4: link in base, shape in link
    const p = [0, 1, 2].map((i) => L[4 * i] * o[0][3] + L[4 * i + 1] * o[1][3] + L[4 * i + 2] * o[2][3] + L[4 * i + 3]);
    out.push([s.link, a.project(p)]);
  }
  return out;
}"""


@pytest.fixture(scope="module")
def service():
    svc = Service()
    yield svc
    svc.stop()


def push(url: str, stop: threading.Event, seconds: float = 60.0) -> None:
    """Stream a 20 N push along base y at 100 Hz on /ws/control until `stop` (at most `seconds`)."""
    t0 = time.monotonic()
    with connect(url.replace("http", "ws") + "/ws/control?decimation=500") as ws:
        while not stop.is_set() and time.monotonic() - t0 < seconds:
            ws.send(json.dumps({"wrench": [0.0, 20.0, 0.0, 0.0, 0.0, 0.0]}))
            time.sleep(0.01)


def canvas(page) -> str:
    return page.evaluate("document.getElementById('arm').toDataURL()")


def test_the_arm_is_drawn_in_3d_and_follows_the_live_state(service, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    errors, external = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    host = service.url.split("//", 1)[1]
    page.on("request", lambda r: None if r.url.startswith("data:") or r.url.split("//", 1)[-1].startswith(host)
            else external.append(r.url))
    try:
        page.set_default_timeout(DEADLINE_MS)
        page.goto(service.url + "/", wait_until="domcontentloaded")  # three.js (2 MB) loads on a busy machine
        page.wait_for_function("window.arm3d && window.arm3d.desc && window.arm3d.renders > 1 && "
                               "window.dashboard.received > 3 && Object.keys(window.arm3d.poses).length > 0",
                               timeout=DEADLINE_MS)
        assert page.evaluate("document.getElementById('arm').getContext('webgl2') !== null")  # three's WebGL canvas

        # the page's forward kinematics of the description, at the state it shows, is the loop's tip pose
        tip, pose = page.evaluate("() => { const a = window.arm3d, s = a._state; a.follow(s); "
                                  "return [a.linkPose(a.desc.tip), s.tip_pose]; }")
        np.testing.assert_allclose(np.reshape(tip, (4, 4)), pose, atol=1e-9, rtol=0)

        # the link shapes are where the camera puts the links: arm-coloured pixels at each cylinder's middle,
        # the white background in the canvas's top corner
        mids = page.evaluate(MIDPOINTS)
        assert len(mids) >= 4, mids
        px = page.evaluate(PIXELS, [p for _, p in mids] + [[3, 3]])
        for (link, at), rgba in zip(mids, px, strict=False):
            assert 0 <= at[0] < 460 and 0 <= at[1] < 380, (link, at)
            assert rgba[3] == 255 and min(rgba[:3]) < 230, (link, at, rgba)  # a link's colour, not the white
        assert min(px[-1]) > 245, px[-1]  # the background: the check above can fail

        # the arm moves (a wrench streamed on /ws/control): the view follows and the picture changes
        before, q0 = canvas(page), np.array(page.evaluate("window.arm3d._state.q"))
        stop = threading.Event()
        pusher = threading.Thread(target=push, args=(service.url, stop), daemon=True)
        pusher.start()
        try:
            page.wait_for_function("(q0) => { const q = window.arm3d._state.q; "
                                   "return Math.hypot(...q.map((v, i) => v - q0[i])) > 0.05; }",
                                   arg=q0.tolist(), timeout=DEADLINE_MS)
        finally:
            stop.set()
            pusher.join(10)
        n = page.evaluate("window.arm3d.renders")
        page.wait_for_function("(n) => window.arm3d.renders > n", arg=n, timeout=DEADLINE_MS)
        assert canvas(page) != before
        tip, pose = page.evaluate("() => { const a = window.arm3d, s = a._state; a.follow(s); "
                                  "return [a.linkPose(a.desc.tip), s.tip_pose]; }")
        np.testing.assert_allclose(np.reshape(tip, (4, 4)), pose, atol=1e-9, rtol=0)

        # orbit with the mouse (OrbitControls): the camera turns, the picture changes
        box = page.locator("#arm").bounding_box()
        cam0 = page.evaluate("window.arm3d.camera.position.toArray()")
        cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(cx, cy)
        page.mouse.down()
        for k in range(1, 11):
            page.mouse.move(cx + 12 * k, cy + 3 * k)
        page.mouse.up()
        cam1 = page.evaluate("window.arm3d.camera.position.toArray()")
        assert np.linalg.norm(np.subtract(cam1, cam0)) > 0.1, (cam0, cam1)
        # zoom with the wheel: the camera comes closer to its target
        d0 = page.evaluate("window.arm3d.camera.position.distanceTo(window.arm3d.controls.target)")
        page.mouse.wheel(0, -400)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and page.evaluate(
                "window.arm3d.camera.position.distanceTo(window.arm3d.controls.target)") >= d0 - 1e-6:
            page.wait_for_timeout(50)
        assert page.evaluate("window.arm3d.camera.position.distanceTo(window.arm3d.controls.target)") < d0
        page.locator("#arm-panel").screenshot(path=str(_artifacts() / "dashboard-3d.png"))
    finally:
        page.close()
    assert errors == [], errors
    assert external == [], external


def _artifacts():
    from .test_dashboard import ARTIFACTS

    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
