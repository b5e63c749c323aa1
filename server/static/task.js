// Task space on the dashboard: workspace volumes in the arm view (from GET /config), the move and
// the last reaction in a header badge, reaction events from /ws/state. Loaded before app.js, which
// calls drawWorkspace() from drawArm(), taskBadge() from onState() and onEvent() for event messages.
"use strict";

function drawWorkspace(g, P, scale, cfg, state) {
  const drawn = []; // what this frame shows (name, kind, where on the canvas): drawWorkspace.drawn
  drawWorkspace.drawn = drawn; drawWorkspace.scale = scale;
  if (!cfg) return;
  const near = state && state.workspace_distance !== null && state.workspace_distance !== undefined &&
    state.workspace_distance < 0.05;
  const edges = (min, max, color, name, kind) => {
    const o = { position: min.map((m, i) => (m + max[i]) / 2), size: max.map((M, i) => M - min[i]) };
    const C = boxCorners(o).map(P);
    g.strokeStyle = color; g.lineWidth = 1.5;
    BOX_EDGES.forEach(([a, b]) => line(g, C[a], C[b]));
    g.fillStyle = color; g.font = "11px sans-serif"; g.fillText(name, C[7][0] + 3, C[7][1]);
    drawn.push({ name, kind, color, corners: C });
  };
  const box = cfg.workspace_box;
  if (box) edges(box.min, box.max, near ? "#e8590c" : "#2f9e44", "workspace", "workspace");
  (cfg.keep_out || []).forEach((k, i) => {
    const name = k.name || `keep-out ${i}`;
    if (k.box) edges(k.box.min, k.box.max, "#c92a2a", name, "box");
    if (k.sphere) {
      const c = P(k.sphere.center), r = k.sphere.radius * scale;
      g.strokeStyle = "#c92a2a"; g.lineWidth = 1.5;
      g.beginPath(); g.arc(c[0], c[1], r, 0, 7); g.stroke();
      g.fillStyle = "#c92a2a"; g.font = "11px sans-serif"; g.fillText(name, c[0] + 4, c[1]);
      drawn.push({ name, kind: "sphere", color: "#c92a2a", center: c, radius: r });
    }
    if (k.plane) { // a 1 m square of the plane nearest the base, dashed, and its normal (the allowed side)
      const n0 = k.plane.normal, nn = Math.hypot(...n0), n = n0.map((v) => v / nn);
      const d = k.plane.point.reduce((a, v, j) => a + v * n[j], 0), o = n.map((v) => v * d);
      const t = Math.abs(n[2]) < 0.9 ? [0, 0, 1] : [1, 0, 0];
      const u = [n[1] * t[2] - n[2] * t[1], n[2] * t[0] - n[0] * t[2], n[0] * t[1] - n[1] * t[0]];
      const un = Math.hypot(...u), uu = u.map((v) => v / un);
      const v = [n[1] * uu[2] - n[2] * uu[1], n[2] * uu[0] - n[0] * uu[2], n[0] * uu[1] - n[1] * uu[0]];
      const at = (a, b) => P(o.map((x, j) => x + 0.5 * a * uu[j] + 0.5 * b * v[j]));
      const C = [at(-1, -1), at(1, -1), at(1, 1), at(-1, 1)];
      g.strokeStyle = "#c92a2a"; g.lineWidth = 1.5; g.setLineDash([6, 4]);
      C.forEach((p, j) => line(g, p, C[(j + 1) % 4]));
      g.setLineDash([]);
      line(g, P(o), P(o.map((x, j) => x + 0.15 * n[j])));
      g.fillStyle = "#c92a2a"; g.font = "11px sans-serif"; g.fillText(name, C[2][0] + 3, C[2][1]);
      drawn.push({ name, kind: "plane", color: "#c92a2a", corners: C });
    }
  });
}

function taskBadge(s) {
  const parts = [];
  if (s.workspace_distance !== null && s.workspace_distance !== undefined) {
    parts.push(`boundary ${(1000 * s.workspace_distance).toFixed(0)} mm`);
  }
  const linkNear = s.link_distance !== null && s.link_distance !== undefined && s.link_pair;
  if (linkNear) parts.push(`links ${(1000 * s.link_distance).toFixed(0)} mm (${s.link_pair})`);
  if (s.move_status && s.move_status !== "idle") {
    const pct = s.move_progress === null || s.move_progress === undefined ? "" : ` ${(100 * s.move_progress).toFixed(0)} %`;
    parts.push(`move ${s.move_status}${pct}`);
  }
  if (s.reaction_count) parts.push(`reactions ${s.reaction_count}`);
  const b = document.getElementById("task");
  if (!b) return;
  b.textContent = parts.length ? parts.join(" · ") : "task –";
  b.title = s.reaction_event || "";
  b.className = `badge ${s.move_status === "paused" || (s.workspace_distance !== null && s.workspace_distance < 0.05) ||
    (linkNear && s.link_distance < 0.05) ? "warn" : ""}`;
}

function onEvent(e) {
  const b = document.getElementById("task");
  if (b && e && e.text) { b.title = e.text; b.className = "badge warn"; }
}
