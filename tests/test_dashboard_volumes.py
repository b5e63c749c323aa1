"""The dashboard's arm view shows the workspace volumes the service has (a real headless chromium
via Playwright against the real server): volumes set through the API by another client appear,
change and disappear; a sphere is found in the canvas's own pixels on the circle where the page's
projection puts the configured centre and radius (not only in the page's record of what it drew)."""

from __future__ import annotations

import httpx
import pytest

from .service import Service
from .test_dashboard import CHROMIUM, sync_playwright

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or sync_playwright is None,
    reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it) and playwright",
)

#: red stroke of keep-out volumes (#c92a2a), anti-aliased: not the joints' orange, not the grey arm
RED_ON_CIRCLE = """([center, radius, n]) => {
  const c = document.getElementById('arm'), g = c.getContext('2d');
  const P = (p) => project(p, c.width, c.height, drawWorkspace.scale);
  const o = P(center), r = radius * drawWorkspace.scale;
  let hit = 0;
  for (let k = 0; k < n; k++) {
    const a = 2 * Math.PI * k / n;
    const x = Math.round(o[0] + r * Math.cos(a)), y = Math.round(o[1] + r * Math.sin(a));
    const d = g.getImageData(x - 1, y - 1, 3, 3).data;
    let red = false;
    for (let i = 0; i < d.length; i += 4) {
      const [R, G, B, A] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
      if (R > 150 && G < 80 && B > 25 && Math.abs(G - B) < 25 && A > 150) red = true;
    }
    if (red) hit++;
  }
  return [hit, o, r];
}"""
N = 24


@pytest.fixture(scope="module")
def service():
    svc = Service()
    yield svc
    svc.stop()


def drawn(page) -> list[dict]:
    return page.evaluate("(drawWorkspace.drawn || []).map(d => ({name: d.name, kind: d.kind, color: d.color}))")


def wait_drawn(page, names: list[str]) -> None:
    page.wait_for_function("(names) => JSON.stringify((drawWorkspace.drawn || []).map(d => d.name).sort()) === "
                           "JSON.stringify(names.slice().sort())", arg=names, timeout=15_000)


def test_volumes_set_by_another_client_appear_change_and_disappear(service, browser):
    http = httpx.Client(base_url=service.url, timeout=10)
    tip = http.get("/state").json()["tip_pose"]
    p = [tip[0][3], tip[1][3], tip[2][3]]
    ball = {"name": "ball", "sphere": {"center": [p[0], p[1], p[2] + 0.3], "radius": 0.1}}
    post = {"name": "post", "sphere": {"center": [p[0], p[1] - 0.35, p[2] + 0.1], "radius": 0.07}}
    wall = {"name": "wall", "plane": {"point": [p[0], p[1] + 0.4, p[2]], "normal": [0, -1, 0]}}
    box = {"min": [p[0] - 1, p[1] - 1, p[2] - 1], "max": [p[0] + 1, p[1] + 1, p[2] + 1]}
    page = browser.new_page()
    try:
        page.goto(service.url + "/")
        page.wait_for_function("window.dashboard.config !== null && window.dashboard.shown.mode !== undefined "
                               "&& drawWorkspace.scale > 0", timeout=15_000)
        assert drawn(page) == []
        before = page.evaluate(RED_ON_CIRCLE, [ball["sphere"]["center"], 0.1, N])[0]
        assert before < N // 4, before  # nothing red there yet: the check below can fail

        r = http.patch("/config", json={"workspace_box": box, "keep_out": [ball, wall]})
        assert r.status_code == 200, r.text
        wait_drawn(page, ["workspace", "ball", "wall"])
        kinds = {d["name"]: (d["kind"], d["color"]) for d in drawn(page)}
        assert kinds == {"workspace": ("workspace", "#2f9e44"), "ball": ("sphere", "#c92a2a"),
                         "wall": ("plane", "#c92a2a")}
        hit, _, radius_px = page.evaluate(RED_ON_CIRCLE, [ball["sphere"]["center"], 0.1, N])
        assert radius_px > 8 and hit >= 3 * N // 4, (hit, radius_px)

        # another client replaces the ball by a post: the view follows
        assert http.patch("/config", json={"keep_out": [post]}).status_code == 200
        wait_drawn(page, ["workspace", "post"])
        assert page.evaluate(RED_ON_CIRCLE, [post["sphere"]["center"], 0.07, N])[0] >= 3 * N // 4
        assert page.evaluate(RED_ON_CIRCLE, [ball["sphere"]["center"], 0.1, N])[0] < N // 4  # the ball is gone

        assert http.patch("/config", json={"workspace_box": None, "keep_out": []}).status_code == 200
        wait_drawn(page, [])
    finally:
        page.close()
        http.patch("/config", json={"workspace_box": None, "keep_out": []})
