// fdcontrol dashboard: plain JavaScript, no build step, no external libraries.
// Live data: /ws/state?frames=1 (decimated state + joint origins); pushes: /ws/control;
// singular values: POST /analysis/singular-values at the current q (4 Hz); stats: GET /stats (1 Hz).
"use strict";

const $ = (id) => document.getElementById(id);
const HISTORY = 300;
const COLORS = ["#1c7ed6", "#e8590c", "#2f9e44", "#ae3ec9", "#f08c00", "#0ca678", "#c92a2a", "#5f3dc4"];
const dash = (window.dashboard = { state: null, frames: null, config: null, robot: null, received: 0, sigma: null });
const hist = { wrench: [], q: [], qd: [] };

async function api(method, path, body) {
  const r = await fetch(path, {
    method, headers: body ? { "content-type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  if (r.status === 401) { location.href = "/login.html"; throw new Error("sign in required"); }
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail));
  return data;
}

// ------------------------------------------------------------------ state stream
function connectState() {
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/state?decimation=25&frames=true`);
  ws.onopen = () => setBadge("conn", "connected", "on");
  ws.onclose = () => { setBadge("conn", "disconnected", "off"); setTimeout(connectState, 1000); };
  ws.onmessage = (ev) => onState(JSON.parse(ev.data));
}

function push(buf, v) { buf.push(v); if (buf.length > HISTORY) buf.shift(); }

function onState(s) {
  dash.state = s; dash.frames = s.frames; dash.received += 1;
  push(hist.wrench, s.wrench); push(hist.q, s.q_ref); push(hist.qd, s.qd_ref);
  setBadge("run", s.running ? (s.holding ? "holding" : "running") : "stopped", s.running ? (s.holding ? "warn" : "on") : "off");
  setBadge("watchdog", `watchdog ${s.watchdog}`, s.watchdog === "tripped" ? "warn" : s.watchdog === "ok" ? "on" : "");
  const f = $("fault"); f.textContent = s.fault || ""; f.classList.toggle("hidden", !s.fault);
  const p = [s.tip_pose[0][3], s.tip_pose[1][3], s.tip_pose[2][3]];
  $("tip").textContent = p.map((x) => x.toFixed(3)).join(", ");
  $("sigmaj").textContent = s.sigma_min_j.toFixed(3);
  $("sigmaj").style.color = s.sigma_min_j < 0.05 ? "#c92a2a" : "";
}

function setBadge(id, text, cls) { const b = $(id); b.textContent = text; b.className = `badge ${cls || ""}`; }

// ------------------------------------------------------------------ drawing
let view = { az: -0.7, el: 0.45 };
function project(p, w, h, scale) {
  const [x, y, z] = p, ca = Math.cos(view.az), sa = Math.sin(view.az), ce = Math.cos(view.el), se = Math.sin(view.el);
  const xr = ca * x - sa * y, yr = sa * x + ca * y;
  return [w / 2 + scale * xr, h * 0.72 - scale * (ce * z - se * yr)];
}

function drawArm() {
  const c = $("arm"), g = c.getContext("2d"), w = c.width, h = c.height;
  g.clearRect(0, 0, w, h);
  const pts = dash.frames; if (!pts) return;
  const reach = Math.max(0.5, ...pts.map((p) => Math.hypot(p[0], p[1], p[2])));
  const scale = (0.42 * Math.min(w, h)) / reach;
  // floor grid and axes
  g.strokeStyle = "#e4e7eb"; g.lineWidth = 1;
  for (let i = -2; i <= 2; i++) {
    line(g, project([i * reach / 2, -reach, 0], w, h, scale), project([i * reach / 2, reach, 0], w, h, scale));
    line(g, project([-reach, i * reach / 2, 0], w, h, scale), project([reach, i * reach / 2, 0], w, h, scale));
  }
  [[1, 0, 0, "#c92a2a"], [0, 1, 0, "#2f9e44"], [0, 0, 1, "#1c7ed6"]].forEach(([x, y, z, col]) => {
    g.strokeStyle = col; line(g, project([0, 0, 0], w, h, scale), project([0.2 * x, 0.2 * y, 0.2 * z], w, h, scale));
  });
  // links
  g.strokeStyle = "#1f2933"; g.lineWidth = 5; g.lineCap = "round";
  const P = [[0, 0, 0], ...pts].map((p) => project(p, w, h, scale));
  g.beginPath(); g.moveTo(...P[0]); P.slice(1).forEach((p) => g.lineTo(...p)); g.stroke();
  g.fillStyle = "#e8590c"; P.slice(1, -1).forEach((p) => { g.beginPath(); g.arc(p[0], p[1], 5, 0, 7); g.fill(); });
  // wrench arrow at the tip (force part, 2 cm per N)
  const s = dash.state; if (!s) return;
  const tip = pts[pts.length - 1], F = s.wrench.slice(0, 3), n = Math.hypot(...F);
  if (n > 1e-6) {
    const end = tip.map((t, i) => t + 0.02 * F[i]);
    g.strokeStyle = "#ae3ec9"; g.lineWidth = 3; arrow(g, project(tip, w, h, scale), project(end, w, h, scale));
  }
}

function line(g, a, b) { g.beginPath(); g.moveTo(...a); g.lineTo(...b); g.stroke(); }
function arrow(g, a, b) {
  line(g, a, b);
  const ang = Math.atan2(b[1] - a[1], b[0] - a[0]);
  [0.5, -0.5].forEach((d) => line(g, b, [b[0] - 10 * Math.cos(ang + d), b[1] - 10 * Math.sin(ang + d)]));
}

function drawPlot(id, rows, limits) {
  const c = $(id), g = c.getContext("2d"), w = c.width, h = c.height;
  g.clearRect(0, 0, w, h);
  if (!rows.length) return;
  const n = rows[0].length;
  let lo = Infinity, hi = -Infinity;
  rows.forEach((r) => r.forEach((v) => { lo = Math.min(lo, v); hi = Math.max(hi, v); }));
  if (limits) limits.forEach((l) => { lo = Math.min(lo, -l); hi = Math.max(hi, l); });
  if (hi - lo < 1e-9) { hi += 1; lo -= 1; }
  const y = (v) => h - 6 - ((v - lo) / (hi - lo)) * (h - 12), x = (i) => (i / (HISTORY - 1)) * (w - 40);
  g.strokeStyle = "#cbd2d9"; g.lineWidth = 1; line(g, [0, y(0)], [w - 40, y(0)]);
  g.fillStyle = "#52606d"; g.font = "11px sans-serif";
  g.fillText(hi.toPrecision(3), w - 38, 12); g.fillText(lo.toPrecision(3), w - 38, h - 4);
  for (let j = 0; j < n; j++) {
    g.strokeStyle = COLORS[j % COLORS.length]; g.lineWidth = 1.5; g.beginPath();
    rows.forEach((r, i) => (i ? g.lineTo(x(i), y(r[j])) : g.moveTo(x(i), y(r[j]))));
    g.stroke();
    if (limits) {
      g.setLineDash([4, 4]); g.lineWidth = 1;
      line(g, [0, y(limits[j])], [w - 40, y(limits[j])]); line(g, [0, y(-limits[j])], [w - 40, y(-limits[j])]);
      g.setLineDash([]);
    }
  }
}

function drawSigma() {
  const c = $("sigma"), g = c.getContext("2d"), w = c.width, h = c.height;
  g.clearRect(0, 0, w, h);
  const r = dash.sigma; if (!r) return;
  const lo = -3, hi = 3, y = (v) => h - 20 - ((Math.log10(Math.max(v, 1e-3)) - lo) / (hi - lo)) * (h - 40);
  g.font = "11px sans-serif"; g.fillStyle = "#52606d";
  for (let e = lo; e <= hi; e++) { g.fillText(`1e${e}`, 2, y(10 ** e) + 4); g.strokeStyle = "#eef0f2"; line(g, [36, y(10 ** e)], [w, y(10 ** e)]); }
  const bw = (w - 50) / r.results.length;
  r.results.forEach((m, i) => {
    const x0 = 44 + i * bw, danger = m.singular || (m.sigma_max || 0) > 50 || m.sigma_min < 1e-2;
    g.fillStyle = danger ? "#e8590c" : "#1c7ed6";
    const top = y(m.sigma_max || 1e3), bot = y(Math.max(m.sigma_min, 1e-3));
    g.fillRect(x0 + 6, top, bw - 12, Math.max(2, bot - top));
    g.fillStyle = "#1f2933"; g.fillText(m.mapping.toUpperCase(), x0 + 8, h - 6);
    g.fillText((m.sigma_max ?? Infinity).toPrecision(3), x0 + 6, top - 3);
  });
  $("kappah").textContent = r.kappa_h == null ? "∞" : r.kappa_h.toPrecision(4);
}

function frame() {
  drawArm();
  drawPlot("plot-wrench", hist.wrench);
  drawPlot("plot-q", hist.q);
  drawPlot("plot-qd", hist.qd, dash.robot && dash.robot.vlim);
  drawSigma();
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

async function loadConfig() {
  const cfg = (dash.config = await api("GET", "/config"));
  $("mapping").value = cfg.mapping; $("gamma").value = cfg.gamma; $("alpha").value = cfg.alpha; $("mode").value = cfg.mode;
  const robots = await api("GET", "/robots");
  const r = robots.find((x) => x.name === cfg.robot);
  if (r) dash.robot = { vlim: r.joints.map((j) => j.max_velocity * cfg.velocity_scale) };
}

// ------------------------------------------------------------------ controls
function wireButtons() {
  const act = (id, path, body) => ($(id).onclick = () => api("POST", path, body).catch((e) => msg(e.message)));
  act("btn-start", "/control/start"); act("btn-stop", "/control/stop");
  act("btn-hold", "/control/hold", { hold: true }); act("btn-release", "/control/hold", { hold: false });
  $("btn-apply").onclick = async () => {
    try {
      dash.config = await api("PATCH", "/config", {
        mapping: $("mapping").value, gamma: Number($("gamma").value), alpha: Number($("alpha").value), mode: $("mode").value,
      });
      msg(`applied: ${dash.config.mapping}, γ=${dash.config.gamma}, α=${dash.config.alpha}, ${dash.config.mode}`, true);
    } catch (e) { msg(e.message); }
  };
  document.querySelectorAll(".nudge button").forEach((b) => (b.onclick = async () => {
    if (!dash.state) return;
    const T = dash.state.tip_pose, axis = "xyz".indexOf(b.dataset.d[0]), sign = b.dataset.d[1] === "+" ? 1 : -1;
    const pos = [T[0][3], T[1][3], T[2][3]]; pos[axis] += 0.01 * sign;
    try { await api("PUT", "/control/target", { position: pos }); msg(`target ${pos.map((v) => v.toFixed(3))}`, true); } catch (e) { msg(e.message); }
  }));
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

function wireArmRotate() {
  const c = $("arm"); let last = null;
  c.onpointerdown = (e) => { last = [e.clientX, e.clientY]; c.setPointerCapture(e.pointerId); };
  c.onpointermove = (e) => {
    if (!last) return;
    view.az += (e.clientX - last[0]) * 0.01; view.el = Math.max(-1.4, Math.min(1.4, view.el + (e.clientY - last[1]) * 0.01));
    last = [e.clientX, e.clientY];
  };
  c.onpointerup = () => (last = null);
}

wireButtons(); wirePad(); wireArmRotate();
loadConfig().catch((e) => msg(e.message));
connectState(); pollSigma(); pollStats(); requestAnimationFrame(frame);
