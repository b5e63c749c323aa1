// fdcontrol dashboard: plain JavaScript, no build step; uPlot (vendor/uplot, MIT) draws the time plots.
// Live data: /ws/state (decimated state; arm3d.js draws the arm in 3-D from it); pushes: /ws/control;
// singular values: POST /analysis/singular-values at the current q (4 Hz); stats: GET /stats (1 Hz);
// recording: /recording, /recordings (1 Hz); environment: GET /environment (drawn only when it answers 200).
// Every fetch is same-origin with credentials (a login cookie, where the service asks for one).
"use strict";

const $ = (id) => document.getElementById(id);
const HISTORY = 300; // states kept per plot (15 s at the 20 Hz stream)
const COLORS = ["#1c7ed6", "#e8590c", "#2f9e44", "#ae3ec9", "#f08c00", "#0ca678", "#c92a2a", "#5f3dc4"];
const XYZ = [["x", "#c92a2a"], ["y", "#2f9e44"], ["z", "#1c7ed6"]];
const SIGMA_MIN_WARN = 0.01, SIGMA_MAX_WARN = 50; // the warning thresholds explained on the page
const NEAR_LIMIT = 0.05; // gauges turn red within 5 % of a limit
const dash = (window.dashboard = {
  state: null, config: null, robot: null, received: 0, sigma: null, environment: null,
  recording: { active: false }, plots: {},
});
const hist = { t: [], f: [[], [], [], [], [], []], fm: [[], [], [], [], [], []], q: [], qd: [], posActive: [], velActive: [], sj: [] };
const SIGMA_J_WARN = 0.05;

async function api(method, path, body) {
  const r = await fetch(path, {
    method, credentials: "same-origin", headers: body ? { "content-type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  if (r.status === 401) { location.href = "/login.html"; throw new Error("sign in required"); }
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    const err = new Error(typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail));
    err.status = r.status; throw err;
  }
  return data;
}

// ------------------------------------------------------------------ state stream
function connectState() {
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/state?decimation=25`);
  ws.onopen = () => setBadge("conn", "connected", "on");
  ws.onclose = () => { setBadge("conn", "disconnected", "off"); setTimeout(connectState, 1000); };
  ws.onmessage = (ev) => { const m = JSON.parse(ev.data); if (m.event) onEvent(m.event); else onState(m); };
}

function push(buf, v) { buf.push(v); if (buf.length > HISTORY) buf.shift(); }

function onState(s) {
  dash.state = s; dash.received += 1;
  if (hist.t.length && s.t < hist.t[hist.t.length - 1]) clearHistory(); // the loop restarted its clock
  push(hist.t, s.t);
  for (let i = 0; i < 6; i++) { push(hist.f[i], s.wrench[i]); push(hist.fm[i], s.f_measured[i]); }
  push(hist.q, s.q); push(hist.qd, s.qd_ref); push(hist.sj, s.sigma_min_j);
  const la = s.limits_active || {};
  push(hist.posActive, !!(la.position || la.virtual_joint_limit));
  push(hist.velActive, !!(la.velocity || la.acceleration || la.cartesian));
  setBadge("run", s.running ? (s.holding ? "holding" : "running") : "stopped", s.running ? (s.holding ? "warn" : "on") : "off");
  setBadge("watchdog", `watchdog ${s.watchdog}`, s.watchdog === "tripped" ? "warn" : s.watchdog === "ok" ? "on" : "");
  const active = Object.entries(la).filter(([, v]) => v).map(([k]) => k.replace(/_/g, " "));
  setBadge("limits", active.length ? `limit: ${active.join(", ")}` : "no limit active", active.length ? "warn" : "on");
  const f = $("fault"); f.textContent = s.fault || ""; f.classList.toggle("hidden", !s.fault);
  const p = [s.tip_pose[0][3], s.tip_pose[1][3], s.tip_pose[2][3]];
  $("tip").textContent = p.map((x) => x.toFixed(3)).join(", ");
  $("fmeas").textContent = Math.hypot(...s.f_measured.slice(0, 3)).toFixed(1);
  $("sigmaj").textContent = s.sigma_min_j.toFixed(3);
  $("sigmaj").style.color = s.sigma_min_j < SIGMA_J_WARN ? "#c92a2a" : "";
  $("gammanow").textContent = s.gamma == null ? "–" : s.gamma.toPrecision(3);
  taskBadge(s); // task.js
  singularBadge(s);
  leaseBadge(s.lease);
}

// who controls: the control lease (GET /state's "lease"); the holder's label, "free" when nobody does
function leaseBadge(lease) {
  if (!lease) return;
  const holder = lease.holder;
  setBadge("lease", holder ? `control: ${holder}` : "control: free", holder ? "on" : "");
  $("lease").title = holder
    ? `${holder} controls the arm since cycle ${lease.since_cycle} (idle ${lease.idle} s; the lease ends ${lease.timeout} s after its last command); anyone may hold or stop`
    : "nobody controls the arm: the first client to command takes control";
}

function clearHistory() {
  hist.t.length = 0; hist.sj.length = 0; hist.q.length = 0; hist.qd.length = 0; hist.posActive.length = 0; hist.velActive.length = 0;
  hist.f.forEach((a) => (a.length = 0)); hist.fm.forEach((a) => (a.length = 0));
}

function setBadge(id, text, cls) { const b = $(id); b.textContent = text; b.className = `badge ${cls || ""}`; }

// ------------------------------------------------------------------ time plots (uPlot)
// shade the x ranges where flags[i] is true (a limit was active), behind the series
function shadeHook(flagsOf) {
  return (u) => {
    const flags = flagsOf(), xs = u.data[0], g = u.ctx;
    if (!flags || !flags.length) return;
    g.save(); g.fillStyle = "rgba(232, 89, 12, 0.16)";
    const top = u.bbox.top, h = u.bbox.height;
    let start = -1;
    for (let i = 0; i <= xs.length; i++) {
      const on = i < xs.length && flags[i];
      if (on && start < 0) start = i;
      if (!on && start >= 0) {
        const x0 = u.valToPos(xs[start], "x", true), x1 = u.valToPos(xs[Math.min(i, xs.length - 1)], "x", true);
        g.fillRect(x0, top, Math.max(2, x1 - x0), h); start = -1;
      }
    }
    g.restore();
  };
}

// dashed horizontal lines per series (limits), in the series colour, only where inside the y range
function limitHook(linesOf) {
  return (u) => {
    const lines = linesOf(); if (!lines) return;
    const g = u.ctx, { min, max } = u.scales.y;
    g.save(); g.setLineDash([6, 4]); g.lineWidth = 1.5;
    lines.forEach(([v, color]) => {
      if (v < min || v > max) return;
      const y = u.valToPos(v, "y", true);
      g.strokeStyle = color; g.beginPath(); g.moveTo(u.bbox.left, y); g.lineTo(u.bbox.left + u.bbox.width, y); g.stroke();
    });
    g.restore();
  };
}

// y range: the data with 5 % margin, at least ±0.5 around it (a flat zero line stays readable)
function minSpan(u, lo, hi) {
  if (lo == null || hi == null) return [-1, 1];
  const mid = (lo + hi) / 2, half = Math.max((hi - lo) * 0.55, 0.5);
  return [mid - half, mid + half];
}

function makePlot(id, series, unit, hooks = {}, range) {
  const el = $(id);
  const opts = {
    width: Math.max(300, el.clientWidth), height: 170,
    scales: { x: { time: false }, y: { range: range || minSpan } },
    axes: [{ label: "loop time (s)", size: 36 }, { label: unit, size: 58, space: 22 }],
    series: [{ label: "t (s)", value: (u, v) => (v == null ? "–" : v.toFixed(2)) }, ...series.map((s) => ({
      label: s.label, stroke: s.color, width: s.width || 1.5, dash: s.dash, points: { show: false },
      value: (u, v) => (v == null ? "–" : `${v.toFixed(3)} ${unit}`),
    }))],
    legend: { live: true },
    hooks: { drawClear: hooks.shade ? [shadeHook(hooks.shade)] : [], draw: hooks.limits ? [limitHook(hooks.limits)] : [] },
  };
  const u = new uPlot(opts, [[], ...series.map(() => [])], el);
  dash.plots[id] = u;
  return u;
}

function wrenchSeries(kind, unit) {
  const sym = kind === "force" ? "F" : "τ", off = kind === "force" ? 0 : 3;
  const out = [];
  XYZ.forEach(([a, c], i) => out.push({ label: `${sym}c ${a}`, color: c, idx: off + i, src: "f" }));
  XYZ.forEach(([a, c], i) => out.push({ label: `${sym}meas ${a}`, color: c, dash: [5, 4], width: 1, idx: off + i, src: "fm" }));
  return out;
}

function buildPlots() {
  const names = (dash.robot && dash.robot.names) || [];
  const joints = names.map((n, j) => ({ label: n, color: COLORS[j % COLORS.length] }));
  ["plot-force", "plot-torque", "plot-q", "plot-qd", "plot-sigma"].forEach((id) => { if (dash.plots[id]) { dash.plots[id].destroy(); $(id).innerHTML = ""; } });
  dash.wrenchSeries = { "plot-force": wrenchSeries("force"), "plot-torque": wrenchSeries("torque") };
  makePlot("plot-force", dash.wrenchSeries["plot-force"], "N");
  makePlot("plot-torque", dash.wrenchSeries["plot-torque"], "N·m");
  const r = dash.robot;
  makePlot("plot-q", joints, "rad", {
    shade: () => hist.posActive,
    limits: () => r && r.lower.flatMap((lo, j) => [[lo, COLORS[j % COLORS.length]], [r.upper[j], COLORS[j % COLORS.length]]]),
  });
  const vmax = r ? Math.max(...r.vlim) * 1.1 : 1;
  makePlot("plot-qd", joints, "rad/s", {
    shade: () => hist.velActive,
    limits: () => r && r.vlim.flatMap((v, j) => [[v, COLORS[j % COLORS.length]], [-v, COLORS[j % COLORS.length]]]),
  }, () => [-vmax, vmax]);
  makePlot("plot-sigma", [{ label: "σmin(J)", color: "#1f2933" }], "σmin(J)",
    { limits: () => [[SIGMA_J_WARN, "#c92a2a"]] }, (u, lo, hi) => [0, Math.max(0.2, (hi || 0) * 1.1)]);
  buildGauges();
}

function updatePlots() {
  const t = hist.t.slice();
  Object.entries(dash.wrenchSeries || {}).forEach(([id, ser]) => {
    dash.plots[id].setData([t, ...ser.map((s) => hist[s.src][s.idx].slice())]);
  });
  const n = dash.robot ? dash.robot.names.length : 0;
  if (dash.plots["plot-q"] && n) {
    const col = (rows, j) => rows.map((r) => (r.length > j ? r[j] : null));
    dash.plots["plot-q"].setData([t, ...Array.from({ length: n }, (_, j) => col(hist.q, j))]);
    dash.plots["plot-qd"].setData([t, ...Array.from({ length: n }, (_, j) => col(hist.qd, j))]);
  }
  if (dash.plots["plot-sigma"]) dash.plots["plot-sigma"].setData([t, hist.sj.slice()]);
  showLatest();
}

// legend values: the newest sample unless the pointer is over the plot
function showLatest() {
  Object.values(dash.plots).forEach((u) => {
    const n = u.data[0].length;
    if (n && (u.cursor.left == null || u.cursor.left < 0)) u.setLegend({ idx: n - 1 });
  });
}

function resizePlots() {
  Object.entries(dash.plots).forEach(([id, u]) => u.setSize({ width: Math.max(300, $(id).clientWidth), height: 170 }));
}

// ------------------------------------------------------------------ joint limit gauges
function buildGauges() {
  const r = dash.robot, box = $("gauges"); box.innerHTML = "";
  if (!r) return;
  r.names.forEach((n, j) => {
    const row = document.createElement("div"); row.className = "gauge"; row.id = `gauge-${j}`;
    row.innerHTML = `<span class="gname" style="color:${COLORS[j % COLORS.length]}">${n}</span>
      <span class="gbar"><span class="gfill"></span><span class="gtick"></span></span>
      <span class="gval"></span>`;
    box.appendChild(row);
  });
}

function updateGauges() {
  const r = dash.robot, s = dash.state; if (!r || !s) return;
  r.names.forEach((n, j) => {
    const row = $(`gauge-${j}`); if (!row) return;
    const lo = r.lower[j], up = r.upper[j], q = s.q[j], qd = s.qd_ref[j], v = r.vlim[j];
    const frac = (q - lo) / (up - lo), vfrac = Math.abs(qd) / v;
    const nearPos = frac < NEAR_LIMIT || frac > 1 - NEAR_LIMIT, nearVel = vfrac > 1 - NEAR_LIMIT;
    row.querySelector(".gfill").style.width = `${Math.max(0, Math.min(1, frac)) * 100}%`;
    row.querySelector(".gtick").style.left = `${(0.5 + 0.5 * Math.max(-1, Math.min(1, qd / v))) * 100}%`;
    row.classList.toggle("near", nearPos || nearVel);
    row.querySelector(".gval").textContent =
      `q ${q.toFixed(3)} rad in [${lo.toFixed(2)}, ${up.toFixed(2)}] · q̇ref ${qd.toFixed(3)} of ±${v.toFixed(2)} rad/s`;
  });
}

// ------------------------------------------------------------------ arm, environment, forces
// the 3-D view (arm3d.js, a module: window.arm3d once loaded) follows the state, config and environment
function drawArm() {
  if (window.arm3d) window.arm3d.update(dash.state, dash.config, dash.environment);
}

function line(g, a, b) { g.beginPath(); g.moveTo(...a); g.lineTo(...b); g.stroke(); }
function arrow(g, a, b) {
  line(g, a, b);
  const ang = Math.atan2(b[1] - a[1], b[0] - a[0]);
  [0.5, -0.5].forEach((d) => line(g, b, [b[0] - 10 * Math.cos(ang + d), b[1] - 10 * Math.sin(ang + d)]));
}

// ------------------------------------------------------------------ singular values per mapping
function drawSigma() {
  const c = $("sigma"), g = c.getContext("2d"), w = c.width, h = c.height;
  g.clearRect(0, 0, w, h);
  const r = dash.sigma; if (!r) return;
  const lo = -3, hi = 4, y = (v) => h - 22 - ((Math.log10(Math.min(Math.max(v, 10 ** lo), 10 ** hi)) - lo) / (hi - lo)) * (h - 40);
  g.font = "11px sans-serif"; g.fillStyle = "#52606d";
  for (let e = lo; e <= hi; e++) { g.fillStyle = "#52606d"; g.fillText(`1e${e}`, 2, y(10 ** e) + 4); g.strokeStyle = "#eef0f2"; line(g, [36, y(10 ** e)], [w, y(10 ** e)]); }
  g.setLineDash([6, 4]); g.strokeStyle = "#e8590c"; g.lineWidth = 1.2;
  line(g, [36, y(SIGMA_MIN_WARN)], [w, y(SIGMA_MIN_WARN)]); line(g, [36, y(SIGMA_MAX_WARN)], [w, y(SIGMA_MAX_WARN)]);
  g.setLineDash([]); g.fillStyle = "#e8590c";
  g.fillText(`σmax warn > ${SIGMA_MAX_WARN}`, w - 110, y(SIGMA_MAX_WARN) - 3);
  g.fillText(`σmin warn < ${SIGMA_MIN_WARN}`, w - 110, y(SIGMA_MIN_WARN) + 12);
  const bw = (w - 50) / r.results.length;
  r.results.forEach((m, i) => {
    const x0 = 44 + i * bw, danger = isDanger(m);
    g.fillStyle = danger ? "#e8590c" : "#1c7ed6";
    const top = y(m.sigma_max ?? 1e4), bot = y(Math.max(m.sigma_min, 1e-3));
    g.fillRect(x0 + 6, top, bw - 12, Math.max(2, bot - top));
    g.fillStyle = "#1f2933"; g.fillText(m.mapping.toUpperCase(), x0 + 8, h - 6);
  });
  $("kappah").textContent = r.kappa_h == null ? "∞ (singular)" : r.kappa_h.toPrecision(4);
}

function isDanger(m) { return m.singular || (m.sigma_max ?? Infinity) > SIGMA_MAX_WARN || m.sigma_min < SIGMA_MIN_WARN; }

function sigmaTable() {
  const r = dash.sigma; if (!r) return;
  const fmt = (v) => (v == null ? "∞" : v.toPrecision(3));
  $("sigma-table").tBodies[0].innerHTML = r.results.map((m) =>
    `<tr class="${isDanger(m) ? "warn-row" : ""}"><td>${m.mapping.toUpperCase()}</td><td>${fmt(m.sigma_min)}</td>` +
    `<td>${fmt(m.sigma_max)}</td><td>${m.condition == null ? "∞" : m.condition.toPrecision(3)}</td></tr>`).join("");
}

function frame() {
  drawArm(); updatePlots(); updateGauges(); drawSigma();
  requestAnimationFrame(frame);
}

// ------------------------------------------------------------------ polling
async function pollSigma() {
  try {
    if (dash.state && dash.config) {
      const cfg = dash.config;
      const out = await api("POST", "/analysis/singular-values", {
        q: dash.state.q, type: "joint",
        mappings: ["ji", "jt", { name: "dls", alpha: cfg.alpha }, { name: "fd", gamma: cfg.gamma }],
      });
      dash.sigma = { results: out.points[0].results, kappa_h: out.points[0].kappa_h };
      sigmaTable();
    }
  } catch (e) { /* transient: next poll */ }
  setTimeout(pollSigma, 250);
}

async function pollStats() {
  try {
    const s = await api("GET", "/stats");
    const rows = [["rate", `${s.rate} Hz`], ["cycles", s.cycles], ["overruns", s.overruns],
      ["period error p50 / p99 / max", `${s.period_error_p50_us.toFixed(0)} / ${s.period_error_p99_us.toFixed(0)} / ${s.period_error_max_us.toFixed(0)} µs`],
      ["compute p50 / p99", `${s.compute_p50_us.toFixed(0)} / ${s.compute_p99_us.toFixed(0)} µs`],
      ["WebSocket clients / drops", `${s.ws_clients} / ${s.ws_dropped}`],
      ["watchdog", dash.state ? dash.state.watchdog : "–"]];
    $("stats").tBodies[0].innerHTML = rows.map(([k, v]) => `<tr><td>${k}</td><td>${v}</td></tr>`).join("");
  } catch (e) { /* next poll */ }
  setTimeout(pollStats, 1000);
}

async function pollEnvironment() {
  let again = 2000;
  try {
    dash.environment = await api("GET", "/environment");
    const o = dash.environment.objects || [];
    $("env-info").textContent = o.length ? `environment: ${o.map((x) => x.name || x.kind).join(", ")}` : "";
  } catch (e) {
    dash.environment = null; $("env-info").textContent = "";
    again = 10000; // 404: this service has no environment; look again rarely
  }
  setTimeout(pollEnvironment, again);
}

function fmtBytes(n) {
  if (n == null) return "";
  return n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(2)} MiB`;
}

function showRecording(r) {
  dash.recording = r;
  const b = $("btn-record");
  b.textContent = r.active ? "■ Stop recording" : "● Record";
  b.classList.toggle("recording", !!r.active);
  $("rec-name").textContent = r.active ? r.name : "not recording";
  $("rec-size").textContent = r.active ? `${fmtBytes(r.bytes)} · ${(r.duration_s || 0).toFixed(0)} s${r.dropped ? ` · ${r.dropped} dropped` : ""}` : "";
}

async function pollRecording() {
  try {
    showRecording(await api("GET", "/recording"));
    await listRecordings();
  } catch (e) { /* next poll */ }
  setTimeout(pollRecording, 1000);
}

async function listRecordings() {
  const files = await api("GET", "/recordings");
  $("rec-list").innerHTML = files.slice(0, 8).map((f) =>
    `<li><a href="recordings/${encodeURIComponent(f.name)}" download>${f.name}</a> <span>${fmtBytes(f.bytes)}</span>` +
    `${f.active ? " <b class=\"warn-text\">recording</b>" : ""}</li>`).join("") || "<li>none yet</li>";
}

async function toggleRecording() {
  try {
    showRecording(await api("POST", dash.recording.active ? "/recording/stop" : "/recording/start", dash.recording.active ? undefined : {}));
    listRecordings();
  } catch (e) { msg(`recording: ${e.message}`); }
}

// the select options come from the registries (GET /options), never from this file
async function loadOptions() {
  const opts = await api("GET", "/options");
  for (const id of ["mapping", "mode", "integrator"]) {
    $(id).replaceChildren(...opts[id].map(({ name, description }) => {
      const o = document.createElement("option");
      o.value = name; o.textContent = name; o.title = description;
      return o;
    }));
  }
  // one checkbox per registered limit; a required one is always on (its reason as the tooltip)
  $("limit-set").replaceChildren(document.createTextNode("limits "), ...opts.limit.map(({ name, description, required }) => {
    const label = document.createElement("label"), box = document.createElement("input");
    box.type = "checkbox"; box.value = name; box.checked = !!required; box.disabled = !!required;
    label.title = required ? `${description} — required: ${required}` : description;
    label.append(box, ` ${name}`);
    return label;
  }));
}

const limitBoxes = () => [...document.querySelectorAll("#limit-set input")];

async function loadConfig() {
  await loadOptions();
  const cfg = (dash.config = await api("GET", "/config"));
  followConfig(cfg);
  const robots = await api("GET", "/robots");
  const r = robots.find((x) => x.name === cfg.robot);
  if (r) {
    dash.robot = {
      names: r.joints.map((j) => j.name), lower: r.joints.map((j) => j.lower), upper: r.joints.map((j) => j.upper),
      vlim: r.joints.map((j) => j.max_velocity * cfg.velocity_scale),
    };
  } else { // a URDF path: names from the state's size
    const n = dash.state ? dash.state.q.length : 0;
    dash.robot = n ? { names: Array.from({ length: n }, (_, j) => `joint ${j + 1}`), lower: Array(n).fill(-Infinity), upper: Array(n).fill(Infinity), vlim: Array(n).fill(Infinity) } : null;
  }
  buildPlots();
}

// ------------------------------------------------------------------ controls
function wireButtons() {
  const act = (id, path, body) => ($(id).onclick = () => api("POST", path, body).catch((e) => msg(e.message)));
  act("btn-start", "/control/start"); act("btn-stop", "/control/stop");
  act("btn-hold", "/control/hold", { hold: true }); act("btn-release", "/control/hold", { hold: false });
  act("btn-take", "/control/lease", { take: true });
  $("btn-apply").onclick = async () => {
    try {
      const changes = editedFields();
      if (!Object.keys(changes).length) { msg("nothing changed", true); return; }
      dash.config = await api("PATCH", "/config", changes);
      followConfig(dash.config, true);
      msg(`applied: ${dash.config.mapping}, γ=${dash.config.gamma}, α=${dash.config.alpha}, ${dash.config.mode}, ` +
        `${dash.config.integrator}; limits ${dash.config.limits.join(", ")}`, true);
    } catch (e) { msg(e.message); }
  };
  document.querySelectorAll(".nudge button").forEach((b) => (b.onclick = async () => {
    if (!dash.state) return;
    const T = dash.state.tip_pose, axis = "xyz".indexOf(b.dataset.d[0]), sign = b.dataset.d[1] === "+" ? 1 : -1;
    const pos = [T[0][3], T[1][3], T[2][3]]; pos[axis] += 0.01 * sign;
    try { await api("PUT", "/control/target", { position: pos }); msg(`target ${pos.map((v) => v.toFixed(3))}`, true); } catch (e) { msg(e.message); }
  }));
}

// ------------------------------------------------------------------ the form follows the live configuration
// Every form field is named after its configuration key; `dash.shown` holds the live values the form
// last showed. A field the user changed since (its value differs from the shown one) is "edited":
// a poll keeps the user's value there and refreshes every other field; Apply sends edited fields only.
const FORM_FIELDS = {
  mapping: { get: () => $("mapping").value, set: (v) => ($("mapping").value = v) },
  gamma: { get: () => Number($("gamma").value), set: (v) => ($("gamma").value = v) },
  alpha: { get: () => Number($("alpha").value), set: (v) => ($("alpha").value = v) },
  mode: { get: () => $("mode").value, set: (v) => ($("mode").value = v) },
  integrator: { get: () => $("integrator").value, set: (v) => ($("integrator").value = v) },
  limits: {
    get: () => limitBoxes().filter((b) => b.checked).map((b) => b.value).sort(),
    set: (v) => { for (const box of limitBoxes()) box.checked = v.includes(box.value); },
  },
};
const same = (a, b) => JSON.stringify(Array.isArray(a) ? [...a].sort() : a) === JSON.stringify(Array.isArray(b) ? [...b].sort() : b);
dash.shown = {};

function editedFields() {
  const out = {};
  for (const [k, f] of Object.entries(FORM_FIELDS)) if (k in dash.shown && !same(f.get(), dash.shown[k])) out[k] = f.get();
  return out;
}

function followConfig(cfg, all = false) {
  const edited = all ? {} : editedFields();
  for (const [k, f] of Object.entries(FORM_FIELDS)) {
    if (!(k in cfg) || k in edited) continue; // the user's edit stays until Apply
    f.set(cfg[k]); dash.shown[k] = f.get(); // as the control shows it (e.g. a number input's value)
  }
  $("mode-badge").textContent = `mode ${cfg.mode}`;
  document.querySelectorAll("#config-panel [data-edited]").forEach((e) => e.removeAttribute("data-edited"));
}

async function pollConfig() {
  try {
    if (dash.shown.mode !== undefined) { dash.config = await api("GET", "/config"); followConfig(dash.config); }
  } catch (e) { /* next poll */ }
  setTimeout(pollConfig, 1000);
}

function singularBadge(s) {
  const b = $("singular-badge"), near = s.sigma_min_j < SIGMA_J_WARN;
  b.classList.toggle("hidden", !near);
  if (near) b.textContent = `near singular: σmin(J) = ${s.sigma_min_j.toFixed(3)}`;
}

function msg(text, ok) { const m = $("config-msg"); m.textContent = text; m.className = ok ? "msg ok" : "msg"; }

// the push pad: drag → stream a wrench on /ws/control at 50 Hz; release → stop (the watchdog holds)
function wirePad() {
  const pad = $("pad"), g = pad.getContext("2d");
  let ws = null, vec = null, timer = null;
  const draw = () => {
    const w = pad.width, h = pad.height; g.clearRect(0, 0, w, h);
    g.strokeStyle = "#cbd2d9"; line(g, [w / 2, 0], [w / 2, h]); line(g, [0, h / 2], [w, h / 2]);
    g.fillStyle = "#52606d"; g.font = "11px sans-serif"; g.fillText("+x", w - 18, h / 2 - 4); g.fillText("+y", w / 2 + 4, 12);
    if (vec) { g.strokeStyle = "#ae3ec9"; g.lineWidth = 3; arrow(g, [w / 2, h / 2], [w / 2 + vec[0] * w / 2, h / 2 - vec[1] * h / 2]); g.lineWidth = 1; }
  };
  const send = () => {
    if (!ws || ws.readyState !== 1 || !vec) return;
    const fmax = Number($("fmax").value) || 0, fz = Number($("fz").value) || 0;
    const wrench = [vec[0] * fmax, vec[1] * fmax, fz, 0, 0, 0];
    ws.send(JSON.stringify({ wrench, frame: "base" }));
    $("push").textContent = wrench.slice(0, 3).map((v) => v.toFixed(1)).join(", ") + " N";
  };
  const at = (ev) => {
    const r = pad.getBoundingClientRect();
    const x = ((ev.clientX - r.left) / r.width) * 2 - 1, y = -(((ev.clientY - r.top) / r.height) * 2 - 1);
    const n = Math.hypot(x, y); return n > 1 ? [x / n, y / n] : [x, y];
  };
  pad.onpointerdown = (ev) => {
    pad.setPointerCapture(ev.pointerId); vec = at(ev);
    if (!ws || ws.readyState > 1) ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/control?decimation=500`);
    ws.onmessage = (e) => { const m = JSON.parse(e.data); if (m.error) msg(m.error); };
    clearInterval(timer); timer = setInterval(send, 20); draw();
  };
  pad.onpointermove = (ev) => { if (vec) { vec = at(ev); draw(); } };
  pad.onpointerup = pad.onpointercancel = () => { vec = null; clearInterval(timer); $("push").textContent = "–"; draw(); };
  draw();
}

$("btn-record").onclick = toggleRecording;
window.addEventListener("resize", resizePlots);
wireButtons(); wirePad();
loadConfig().catch((e) => msg(e.message));
connectState(); pollConfig(); pollSigma(); pollStats(); pollEnvironment(); pollRecording(); requestAnimationFrame(frame);
