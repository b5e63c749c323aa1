"""The dashboard's 3-D arm view shows the workspace volumes the service has (a real headless chromium
via Playwright against the real server): volumes set through the API by another client appear,
change and disappear, coloured by the tip's distance to each; a sphere is found in the WebGL canvas's
own pixels inside the disc where the page's camera puts the configured centre and radius (not only in
the page's record of what it drew)."""

from __future__ import annotations

import httpx
import pytest

from .service import Service
from .test_dashboard import CHROMIUM, sync_playwright

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or sync_playwright is None,
    reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it) and playwright",
)

#: how many pixels inside the disc where the page's camera projects a sphere are green (#2f9e44, the colour of a
#: volume the tip is beyond the margin of; translucent over the white background or the grey arm: green clearly
#: above red and blue), of n sampled
GREEN_IN_DISC = """([center, radius, n]) => {
  const a = window.arm3d, c = document.getElementById('arm'), g = document.createElement('canvas');
  g.width = c.width; g.height = c.height;
  const x = g.getContext('2d'); x.drawImage(c, 0, 0);
  const o = a.project(center);
  // the sphere's apparent radius: the projection of a point one radius away across the line of sight
  const right = a.camera.matrixWorld.elements.slice(0, 3);
  const r = Math.hypot(...a.project(center.map((v, i) => v + radius * right[i])).map((v, i) => v - o[i]));
  let hit = 0;
  for (let k = 0; k < n; k++) {
    const t = 2 * Math.PI * k / n, rho = 0.6 * r * ((k % 3) + 1) / 3;
    const d = x.getImageData(Math.round(o[0] + rho * Math.cos(t)), Math.round(o[1] + rho * Math.sin(t)), 1, 1).data;
    if (d[1] > d[0] + 30 && d[1] > d[2] + 20 && d[3] > 200) hit++;
  }
  return [hit, o, r];
}"""
N = 24


@pytest.fixture(scope="module")
def service():
    svc = Service()
    # the volumes here are another client's: none to begin with (not the simulated arm's start box)
    svc.without_start_box()
    yield svc
    svc.stop()


def drawn(page) -> list[dict]:
    return page.evaluate("window.arm3d.drawn.map(d => ({name: d.name, kind: d.kind, color: d.color}))")


def wait_drawn(page, names: list[str]) -> None:
    page.wait_for_function("(names) => window.arm3d && JSON.stringify(window.arm3d.drawn.map(d => d.name).sort()) "
                           "=== JSON.stringify(names.slice().sort())", arg=names, timeout=60_000)


def settle(page) -> None:
    """Wait for a render after the volumes changed (the canvas then shows them)."""
    n = page.evaluate("window.arm3d.renders")
    page.wait_for_function("(n) => window.arm3d.renders > n", arg=n, timeout=60_000)


def test_volumes_set_by_another_client_appear_change_and_disappear(service, browser):
    http = httpx.Client(base_url=service.url, timeout=10)
    tip = http.get("/state").json()["tip_pose"]
    p = [tip[0][3], tip[1][3], tip[2][3]]
    # clear of every link's shape by more than the margins (a change that would move the arm is refused)
    ball = {"name": "ball", "sphere": {"center": [p[0], p[1], p[2] + 0.7], "radius": 0.1}}
    post = {"name": "post", "sphere": {"center": [p[0], p[1] - 0.5, p[2] + 0.6], "radius": 0.07}}
    wall = {"name": "wall", "plane": {"point": [0.0, 0.0, -0.3], "normal": [0, 0, 1]}}
    box = {"min": [p[0] - 1, p[1] - 1, p[2] - 1], "max": [p[0] + 1, p[1] + 1, p[2] + 1]}
    page = browser.new_page()
    try:
        page.set_default_timeout(120_000)
        page.goto(service.url + "/", wait_until="domcontentloaded")  # three.js (2 MB) on a busy machine
        page.wait_for_function("window.dashboard.config !== null && window.dashboard.shown.mode !== undefined "
                               "&& window.arm3d && window.arm3d.desc && window.arm3d.renders > 1")
        assert drawn(page) == []
        before = page.evaluate(GREEN_IN_DISC, [ball["sphere"]["center"], 0.1, N])[0]
        assert before < N // 4, before  # nothing green there yet: the check below can fail

        # volumes for the tool only (collision_links off): the wall's far side holds the arm's base
        r = http.patch("/config", json={"workspace_box": box, "keep_out": [ball, wall], "collision_links": "off"})
        assert r.status_code == 200, r.text
        wait_drawn(page, ["workspace", "ball", "wall"])
        settle(page)
        # the tip is 0.6 m from the ball's surface, 0.68 m above the floor plane and 1 m inside the box: all beyond
        # their 0.05 m margins, so green (a change that would put the arm inside a margin is refused by the service)
        kinds = {d["name"]: (d["kind"], d["color"]) for d in drawn(page)}
        assert kinds == {"workspace": ("workspace", "#2f9e44"), "ball": ("sphere", "#2f9e44"),
                         "wall": ("plane", "#2f9e44")}
        # the readout: the tip's distance to each, as the page computes it, is the tip's distance to the surface
        state = http.get("/state").json()["tip_pose"]
        tip_now = [state[0][3], state[1][3], state[2][3]]
        shown = {d["name"]: d["distance"] for d in page.evaluate("window.arm3d.drawn")}
        ball_d = sum((a - b) ** 2 for a, b in zip(tip_now, ball["sphere"]["center"], strict=True)) ** 0.5 - 0.1
        assert abs(shown["ball"] - ball_d) < 2e-3 and abs(shown["wall"] - (tip_now[2] + 0.3)) < 2e-3, shown
        assert f"ball {shown['ball']:.3f} m" in page.inner_text("#volumes-info")
        hit, _, radius_px = page.evaluate(GREEN_IN_DISC, [ball["sphere"]["center"], 0.1, N])
        assert radius_px > 8 and hit >= 3 * N // 4, (hit, radius_px)

        # another client replaces the ball by a post: the view follows
        assert http.patch("/config", json={"keep_out": [post]}).status_code == 200
        wait_drawn(page, ["workspace", "post"])
        settle(page)
        assert page.evaluate(GREEN_IN_DISC, [post["sphere"]["center"], 0.07, N])[0] >= 3 * N // 4
        assert page.evaluate(GREEN_IN_DISC, [ball["sphere"]["center"], 0.1, N])[0] < N // 4  # the ball is gone

        assert http.patch("/config", json={"workspace_box": None, "keep_out": []}).status_code == 200
        wait_drawn(page, [])
    finally:
        page.close()
        http.patch("/config", json={"workspace_box": None, "keep_out": [], "collision_links": "keep_out"})
