// The dashboard's 3-D arm view (three.js, vendored under vendor/three, MIT): the robot's link shapes from
// GET /robot/description (the URDF's shapes, or cylinders between joint origins where it has none: the
// same description Foxglove gets), posed by the live state's q; the tool frame at the tip; f_c and the
// measured force as arrows (1 cm per N); the workspace box and keep-out volumes from GET /config,
// coloured by the tip's distance to each; environment objects (GET /environment). Mouse: drag to orbit,
// wheel to zoom, right-drag to pan (three's OrbitControls). Base frame, z up, SI units.
//
// app.js calls window.arm3d.update(state, config, environment) every animation frame; the scene is drawn
// again only when one of them or the camera changed. window.arm3d also serves tests: linkPose(name),
// project([x, y, z]) (canvas pixels of a base-frame point) and drawn (the volumes shown).
import * as THREE from "three";
import { OrbitControls } from "./vendor/three/OrbitControls.js";

const ARROW_SCALE = 0.01; // m per N, as Foxglove's arrows
const MIN_INTERVAL_MS = 100; // between two drawings of the scene
const FC_COLOR = 0xae3ec9, FM_COLOR = 0xc92a2a;
const RED = 0xc92a2a, ORANGE = 0xe8590c, GREEN = 0x2f9e44, GREY = 0x868e96;

function matrix(rows) { // a row-major 4×4 (nested lists) → Matrix4
  return new THREE.Matrix4().set(...rows[0], ...rows[1], ...rows[2], ...rows[3]);
}

// signed distance of p to a volume (m; < 0 on the forbidden side), as fdcontrol.control.workspace defines it
function distance(kind, spec, p) {
  if (kind === "workspace") {
    return Math.min(...[0, 1, 2].flatMap((i) => [p[i] - spec.min[i], spec.max[i] - p[i]]));
  }
  if (spec.sphere) return Math.hypot(...p.map((v, i) => v - spec.sphere.center[i])) - spec.sphere.radius;
  if (spec.box) {
    const lo = spec.box.min, hi = spec.box.max;
    const out = [0, 1, 2].map((i) => Math.max(lo[i] - p[i], p[i] - hi[i], 0));
    const n = Math.hypot(...out);
    return n > 0 ? n : -Math.min(...[0, 1, 2].flatMap((i) => [p[i] - lo[i], hi[i] - p[i]]));
  }
  const n = spec.plane.normal, nn = Math.hypot(...n);
  return p.reduce((a, v, i) => a + (v - spec.plane.point[i]) * n[i] / nn, 0);
}

// red at or past the boundary, orange inside the margin, green beyond it (Foxglove's /fdcontrol/volumes too)
function distanceColor(d, margin) {
  if (d === null || !Number.isFinite(d)) return GREY;
  return d <= 0 ? RED : d < margin ? ORANGE : GREEN;
}

class ArmView {
  constructor(canvas) {
    this.canvas = canvas;
    this.renderer = new THREE.WebGLRenderer({ canvas, antialias: false, preserveDrawingBuffer: true });
    this.renderer.setPixelRatio(1);
    this.renderer.setSize(canvas.width, canvas.height, false);
    this.scene = new THREE.Scene();
    this.scene.background = new THREE.Color(0xffffff);
    this.camera = new THREE.PerspectiveCamera(45, canvas.width / canvas.height, 0.01, 100);
    this.camera.up.set(0, 0, 1);
    this.camera.position.set(2.2, -2.2, 1.6);
    this.controls = new OrbitControls(this.camera, canvas);
    this.controls.target.set(0, 0, 0.4);
    this.controls.addEventListener("change", () => { this.dirty = true; });
    this.controls.update();
    this.scene.add(new THREE.HemisphereLight(0xffffff, 0x8d949c, 2.2));
    const sun = new THREE.DirectionalLight(0xffffff, 1.4);
    sun.position.set(2, -3, 5);
    this.scene.add(sun);
    this.robot = new THREE.Group(); this.scene.add(this.robot);
    this.volumes = new THREE.Group(); this.scene.add(this.volumes);
    this.env = new THREE.Group(); this.scene.add(this.env);
    this.grid = new THREE.Group(); this.scene.add(this.grid);
    this.tool = new THREE.AxesHelper(0.12); this.tool.matrixAutoUpdate = false; this.scene.add(this.tool);
    this.arrows = {
      fc: new THREE.ArrowHelper(new THREE.Vector3(1, 0, 0), new THREE.Vector3(), 0.1, FC_COLOR, 0.04, 0.025),
      fm: new THREE.ArrowHelper(new THREE.Vector3(1, 0, 0), new THREE.Vector3(), 0.1, FM_COLOR, 0.04, 0.025),
    };
    Object.values(this.arrows).forEach((a) => { a.visible = false; this.scene.add(a); });
    this.scene.add(new THREE.AxesHelper(0.2)); // the base frame
    this.desc = null; this.key = null; this.links = {}; this.poses = {};
    this.drawn = []; this.renders = 0; this.dirty = true; this.renderMs = 0; this.lastRender = -Infinity;
    this._state = null; this._config = null; this._env = null; this._volumesKey = null; this._envKey = null;
  }

  async load(config, fetchJson) { // the description of the configured robot (again when it changes)
    const key = `${config.robot}|${config.base}|${config.tip}`;
    if (key === this.key || this._loading === key) return;
    this._loading = key;
    try {
      const desc = await fetchJson("/robot/description");
      this.build(desc); this.key = key;
    } finally { this._loading = null; }
  }

  build(desc) {
    this.desc = desc; this._chain = null; this._state = null; // the next update poses the new links
    this.robot.clear(); this.links = {};
    for (const name of desc.links) {
      const g = new THREE.Group(); g.matrixAutoUpdate = false; g.name = name;
      this.links[name] = g; this.robot.add(g);
    }
    for (const s of desc.shapes) {
      let geo;
      if (s.kind === "box") geo = new THREE.BoxGeometry(...s.size);
      else if (s.kind === "sphere") geo = new THREE.SphereGeometry(s.size[0], 24, 16);
      else if (s.kind === "capsule") geo = new THREE.CapsuleGeometry(s.size[0], s.size[1], 8, 20).rotateX(Math.PI / 2);
      else geo = new THREE.CylinderGeometry(s.size[0], s.size[0], s.size[1], 24).rotateX(Math.PI / 2); // URDF: along z
      const [r, g, b, a] = s.rgba;
      const mat = new THREE.MeshStandardMaterial({ color: new THREE.Color(r, g, b), metalness: 0.1, roughness: 0.6,
                                                   transparent: a < 1, opacity: a });
      const m = new THREE.Mesh(geo, mat);
      m.matrixAutoUpdate = false; m.matrix.copy(matrix(s.origin));
      (this.links[s.link] || this.robot).add(m);
    }
    // the reach: the grid and the camera's distance follow the robot's size
    const reach = Math.max(0.5, desc.joints.reduce((a, j) => a + Math.hypot(j.origin[0][3], j.origin[1][3], j.origin[2][3]), 0));
    this.reach = reach;
    this.grid.clear();
    const grid = new THREE.GridHelper(2 * reach, 8, 0xced4da, 0xe4e7eb); grid.rotateX(Math.PI / 2);
    this.grid.add(grid);
    this.camera.position.set(1.3 * reach, -1.3 * reach, 0.9 * reach);
    this.controls.target.set(0, 0, 0.3 * reach); this.controls.update();
    this.dirty = true;
  }

  // forward kinematics of the URDF tree at q (joint name → value), every link in the base frame
  pose(q) {
    const d = this.desc, root = new THREE.Matrix4(), P = { [d.root]: root };
    const axis = new THREE.Vector3(), M = new THREE.Matrix4();
    for (const j of d.joints) {
      const T = matrix(j.origin), v = q[j.name] || 0;
      if (v !== 0 && (j.type === "revolute" || j.type === "continuous")) {
        T.multiply(M.makeRotationAxis(axis.set(...j.axis).normalize(), v));
      } else if (v !== 0 && j.type === "prismatic") {
        axis.set(...j.axis).normalize().multiplyScalar(v); T.multiply(M.makeTranslation(axis.x, axis.y, axis.z));
      }
      P[j.child] = (P[j.parent] || root).clone().multiply(T);
    }
    const toBase = (P[d.base] || root).clone().invert();
    for (const k of Object.keys(P)) P[k] = toBase.clone().multiply(P[k]);
    return P;
  }

  update(state, config, environment) {
    if (state !== this._state && state && this.desc) this.follow(state);
    if (config !== this._config || state !== this._state) this.showVolumes(config, state);
    if (environment !== this._env) this.showEnvironment(environment);
    this._state = state; this._config = config; this._env = environment;
    // at most 10 drawings a second, fewer when drawing is slow (a software WebGL on a busy machine): the page's
    // other panels keep their share of the main thread
    const now = performance.now();
    if (this.dirty && now - this.lastRender >= Math.max(MIN_INTERVAL_MS, 4 * this.renderMs)) {
      this.renderer.render(this.scene, this.camera);
      this.renderMs = performance.now() - now; this.lastRender = now;
      this.renders += 1; this.dirty = false;
    }
  }

  follow(s) {
    const chain = this._chain || this.chainJoints();
    if (!chain.length || s.q.length !== chain.length) return; // another robot: its description is on its way
    const q = {};
    chain.forEach((n, i) => { q[n] = s.q[i]; }); // the state's q: the chain's joints from base to tip
    this.poses = this.pose(q);
    for (const [name, g] of Object.entries(this.links)) if (this.poses[name]) g.matrix.copy(this.poses[name]);
    const T = matrix(s.tip_pose);
    this.tool.matrix.copy(T);
    const tip = new THREE.Vector3().setFromMatrixPosition(T);
    const show = (a, F) => {
      const f = new THREE.Vector3(F[0], F[1], F[2]), n = f.length();
      a.visible = n > 1e-6;
      if (!a.visible) return;
      a.position.copy(tip); a.setDirection(f.divideScalar(n));
      const len = Math.max(ARROW_SCALE * n, 0.02); a.setLength(len, Math.min(0.04, 0.4 * len), Math.min(0.025, 0.25 * len));
    };
    show(this.arrows.fc, s.wrench); show(this.arrows.fm, s.f_measured);
    this.dirty = true;
  }

  chainJoints() { // the moving joints from the base to the tip, in order: the state's q
    const d = this.desc, parent = {};
    d.joints.forEach((j) => { parent[j.child] = j; });
    const out = []; let link = d.tip;
    while (parent[link] && link !== d.base) { const j = parent[link]; if (j.type !== "fixed") out.unshift(j.name); link = j.parent; }
    this._chain = out;
    return out;
  }

  showVolumes(cfg, s) {
    const tip = s ? [s.tip_pose[0][3], s.tip_pose[1][3], s.tip_pose[2][3]] : null;
    const items = [];
    if (cfg && cfg.workspace_box) items.push({ name: "workspace", kind: "workspace", spec: cfg.workspace_box });
    ((cfg && cfg.keep_out) || []).forEach((k, i) => {
      items.push({ name: k.name || `keep-out ${i}`, kind: k.sphere ? "sphere" : k.box ? "box" : "plane", spec: k });
    });
    const colors = items.map((it) => distanceColor(tip ? distance(it.kind, it.spec, tip) : null, it.spec.margin ?? 0.05));
    const key = JSON.stringify([items, colors]);
    if (key === this._volumesKey) return;
    this._volumesKey = key;
    this.volumes.clear();
    this.drawn = [];
    items.forEach((it, i) => {
      const color = colors[i], sp = it.spec;
      const d = tip ? distance(it.kind, sp, tip) : null;
      const fill = new THREE.MeshBasicMaterial({ color, transparent: true, opacity: 0.35, depthWrite: false,
                                                 side: THREE.DoubleSide });
      const line = new THREE.LineBasicMaterial({ color });
      if (it.kind === "workspace" || it.kind === "box") {
        const b = it.kind === "workspace" ? sp : sp.box;
        const size = b.max.map((M, j) => M - b.min[j]), c = b.min.map((m, j) => (m + b.max[j]) / 2);
        const geo = new THREE.BoxGeometry(...size);
        const edges = new THREE.LineSegments(new THREE.EdgesGeometry(geo), line); edges.position.set(...c);
        this.volumes.add(edges);
        if (it.kind === "box") { const m = new THREE.Mesh(geo, fill); m.position.set(...c); this.volumes.add(m); }
      } else if (it.kind === "sphere") {
        const m = new THREE.Mesh(new THREE.SphereGeometry(sp.sphere.radius, 32, 16), fill);
        m.position.set(...sp.sphere.center); this.volumes.add(m);
      } else { // a 1 m square of the plane, nearest the base, and its normal (the allowed side)
        const n = new THREE.Vector3(...sp.plane.normal).normalize();
        const o = n.clone().multiplyScalar(n.dot(new THREE.Vector3(...sp.plane.point)));
        const m = new THREE.Mesh(new THREE.PlaneGeometry(1, 1), fill);
        m.quaternion.setFromUnitVectors(new THREE.Vector3(0, 0, 1), n); m.position.copy(o);
        this.volumes.add(m);
        this.volumes.add(new THREE.ArrowHelper(n, o, 0.15, color, 0.04, 0.025));
      }
      this.drawn.push({ name: it.name, kind: it.kind, color: `#${color.toString(16).padStart(6, "0")}`, distance: d });
    });
    const info = document.getElementById("volumes-info");
    if (info) {
      info.textContent = this.drawn.length ? "tip to: " + this.drawn.map((v) => `${v.name} ${v.distance === null
        ? "–" : `${v.distance.toFixed(3)} m`}`).join(" · ") : "";
    }
    this.dirty = true;
  }

  showEnvironment(env) {
    const key = JSON.stringify(env && env.objects ? env.objects : null);
    if (key === this._envKey) return;
    this._envKey = key;
    this.env.clear();
    ((env && env.objects) || []).forEach((o) => {
      if (!o.size || !o.position) return;
      const geo = new THREE.BoxGeometry(...o.size);
      const m = new THREE.Mesh(geo, new THREE.MeshStandardMaterial({ color: GREY, transparent: true, opacity: 0.35 }));
      const e = new THREE.LineSegments(new THREE.EdgesGeometry(geo), new THREE.LineBasicMaterial({ color: 0x495057 }));
      for (const x of [m, e]) {
        x.position.set(...o.position);
        if (o.quaternion) x.quaternion.set(...o.quaternion);
        this.env.add(x);
      }
    });
    this.dirty = true;
  }

  linkPose(name) { const P = this.poses[name]; return P ? P.clone().transpose().toArray() : null; } // row-major

  project(p) { // canvas pixels of a base-frame point
    const v = new THREE.Vector3(...p).project(this.camera);
    return [(v.x + 1) / 2 * this.canvas.width, (1 - v.y) / 2 * this.canvas.height];
  }
}

const canvas = document.getElementById("arm");
if (canvas) {
  const view = new ArmView(canvas);
  window.arm3d = view;
  const fetchJson = async (path) => {
    const r = await fetch(path, { credentials: "same-origin" });
    if (!r.ok) throw new Error(`${path}: ${r.status}`);
    return r.json();
  };
  const loadLoop = async () => { // the description, and again after a robot change
    try { if (window.dashboard && window.dashboard.config) await view.load(window.dashboard.config, fetchJson); } catch (e) { /* next time */ }
    setTimeout(loadLoop, view.desc ? 2000 : 250);
  };
  loadLoop();
}
