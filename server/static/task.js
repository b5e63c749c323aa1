// Task space on the dashboard: workspace volumes in the arm view (from GET /config), the move and
// the last reaction in a header badge, reaction events from /ws/state. Loaded before app.js, which
// calls drawWorkspace() from drawArm(), taskBadge() from onState() and onEvent() for event messages.
"use strict";

function drawWorkspace(g, P, scale, cfg, state) {
  if (!cfg) return;
  const near = state && state.workspace_distance !== null && state.workspace_distance !== undefined &&
    state.workspace_distance < 0.05;
  const edges = (min, max, color, name) => {
    const o = { position: min.map((m, i) => (m + max[i]) / 2), size: max.map((M, i) => M - min[i]) };
    const C = boxCorners(o).map(P);
    g.strokeStyle = color; g.lineWidth = 1.5;
    BOX_EDGES.forEach(([a, b]) => line(g, C[a], C[b]));
    g.fillStyle = color; g.font = "11px sans-serif"; g.fillText(name, C[7][0] + 3, C[7][1]);
  };
  const box = cfg.workspace_box;
  if (box) edges(box.min, box.max, near ? "#e8590c" : "#2f9e44", "workspace");
  (cfg.keep_out || []).forEach((k, i) => {
    const name = k.name || `keep-out ${i}`;
    if (k.box) edges(k.box.min, k.box.max, "#c92a2a", name);
    if (k.sphere) {
      const c = P(k.sphere.center);
      g.strokeStyle = "#c92a2a"; g.lineWidth = 1.5;
      g.beginPath(); g.arc(c[0], c[1], k.sphere.radius * scale, 0, 7); g.stroke();
      g.fillStyle = "#c92a2a"; g.font = "11px sans-serif"; g.fillText(name, c[0] + 4, c[1]);
    }
  });
}

function taskBadge(s) {
  const parts = [];
  if (s.workspace_distance !== null && s.workspace_distance !== undefined) {
    parts.push(`boundary ${(1000 * s.workspace_distance).toFixed(0)} mm`);
  }
  if (s.move_status && s.move_status !== "idle") {
    const pct = s.move_progress === null || s.move_progress === undefined ? "" : ` ${(100 * s.move_progress).toFixed(0)} %`;
    parts.push(`move ${s.move_status}${pct}`);
  }
  if (s.reaction_count) parts.push(`reactions ${s.reaction_count}`);
  const b = document.getElementById("task");
  if (!b) return;
  b.textContent = parts.length ? parts.join(" · ") : "task –";
  b.title = s.reaction_event || "";
  b.className = `badge ${s.move_status === "paused" || (s.workspace_distance !== null && s.workspace_distance < 0.05) ? "warn" : ""}`;
}

function onEvent(e) {
  const b = document.getElementById("task");
  if (b && e && e.text) { b.title = e.text; b.className = "badge warn"; }
}
