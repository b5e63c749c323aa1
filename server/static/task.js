// Task space on the dashboard: the move and the last reaction in a header badge, reaction events from
// /ws/state (the workspace volumes are drawn by the 3-D view, arm3d.js). Loaded before app.js, which
// calls taskBadge() from onState() and onEvent() for event messages.
"use strict";

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
