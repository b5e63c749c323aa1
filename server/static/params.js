// "All parameters": a form generated from the parameters' declarations (GET /params) — kind,
// bounds, unit, description and run-time policy — never from this file. It follows the live
// configuration (GET /config, polled), marks the fields the user edited, and sends only those.
"use strict";

const paramsForm = { decl: [], inputs: new Map(), edited: new Set(), live: null };

function paramInput(p) {
  let el;
  if (p.kind === "bool") {
    el = document.createElement("input"); el.type = "checkbox";
  } else if (p.kind === "choice") {
    el = document.createElement("select");
    el.replaceChildren(...p.choices.map((c) => { const o = document.createElement("option"); o.value = o.textContent = c; return o; }));
  } else if (p.kind === "float" || p.kind === "int") {
    el = document.createElement("input"); el.type = "number"; el.step = p.kind === "int" ? "1" : "any";
    if (p.ge !== undefined) el.min = p.ge;
    if (p.le !== undefined) el.max = p.le;
  } else if (p.kind === "spec") {
    el = document.createElement("textarea"); el.rows = 2;
  } else {  // str, vector, names: comma-separated text
    el = document.createElement("input"); el.type = "text";
  }
  el.id = `param-${p.name}`; el.dataset.param = p.name;
  el.disabled = p.policy === "startup";
  el.addEventListener(el.type === "checkbox" || el.tagName === "SELECT" ? "change" : "input", () => {
    paramsForm.edited.add(p.name); el.classList.add("edited");
  });
  return el;
}

function paramShow(p, el, v) {
  if (p.kind === "bool") el.checked = !!v;
  else if (p.kind === "spec") el.value = JSON.stringify(v);
  else if (Array.isArray(v)) el.value = v.join(", ");
  else el.value = v === null || v === undefined ? "" : v;
}

function paramRead(p, el) {
  if (p.kind === "bool") return el.checked;
  if (p.kind === "float" || p.kind === "int") return el.value === "" ? null : Number(el.value);
  if (p.kind === "spec") return JSON.parse(el.value);
  if (p.kind === "vector" || p.kind === "names") {
    const items = el.value.split(",").map((x) => x.trim()).filter((x) => x);
    if (!items.length && p.nullable) return null;
    return p.kind === "vector" ? items.map(Number) : items;
  }
  return el.value;
}

async function buildParamsForm() {
  const { params, policies } = await api("GET", "/params");
  paramsForm.decl = params.filter((p) => p.owner !== "service");
  const rows = paramsForm.decl.map((p) => {
    const tr = document.createElement("tr"), name = document.createElement("td"), val = document.createElement("td");
    const el = paramInput(p);
    paramsForm.inputs.set(p.name, el);
    name.textContent = p.name; name.title = `${p.description} — ${p.owner}; ${p.policy}: ${policies[p.policy]}`;
    const unit = document.createElement("span"); unit.className = "unit"; unit.textContent = p.unit ? ` ${p.unit}` : "";
    const pol = document.createElement("span"); pol.className = `policy policy-${p.policy}`; pol.textContent = p.policy;
    pol.title = policies[p.policy];
    val.append(el, unit, " ", pol);
    tr.append(name, val);
    return tr;
  });
  document.querySelector("#params-table tbody").replaceChildren(...rows);
  document.getElementById("params-apply").onclick = applyParams;
  await followParams();
  setInterval(() => followParams().catch(() => {}), 1000);
}

// the live configuration into every field the user has not edited
async function followParams() {
  const cfg = (paramsForm.live = await api("GET", "/config"));
  for (const p of paramsForm.decl) {
    const el = paramsForm.inputs.get(p.name);
    if (!paramsForm.edited.has(p.name) && document.activeElement !== el) paramShow(p, el, cfg[p.name]);
  }
}

async function applyParams() {
  const out = document.getElementById("params-msg"), body = {};
  try {
    for (const name of paramsForm.edited) {
      const p = paramsForm.decl.find((x) => x.name === name);
      body[name] = paramRead(p, paramsForm.inputs.get(name));
    }
  } catch (e) { out.textContent = `not sent: ${e.message}`; out.className = "msg"; return; }
  if (!Object.keys(body).length) { out.textContent = "nothing edited"; out.className = "msg"; return; }
  try {
    await api("PATCH", "/config", body);
    for (const name of Object.keys(body)) paramsForm.inputs.get(name).classList.remove("edited");
    paramsForm.edited.clear();
    out.textContent = `applied: ${Object.keys(body).join(", ")}`; out.className = "msg ok";
    await followParams();
  } catch (e) { out.textContent = e.message; out.className = "msg"; }
}

window.addEventListener("load", () => buildParamsForm().catch((e) => {
  const out = document.getElementById("params-msg"); if (out) out.textContent = `parameters: ${e.message}`;
}));
