// The ffpf daemon's page: compose a request from the class library, see it
// checked and placed as you type, submit it, watch its counters. It speaks
// the daemon's HTTP API (/api/v1/...), the same operations as the CLI.
"use strict";

const api = "/api/v1/";
let classes = {};      // by name
let steps = [];        // a chain: each step is a list of functions side by side
let hier = null;       // the daemon's hierarchy
let events = null;     // the live counters' stream
let checkTimer = null;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

async function call(op, args, write) {
  const opts = { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(args || {}) };
  const tok = $("token").value.trim();
  if (write && tok) opts.headers.Authorization = "Bearer " + tok;
  const r = await fetch(api + op, opts);
  const rep = await r.json();
  if (!rep.ok) throw new Error(rep.error || ("HTTP " + r.status));
  return rep.result;
}

// ---- the palette

async function loadClasses() {
  const list = await call("classes");
  const pal = $("palette");
  pal.textContent = "";
  for (const c of list) {
    classes[c.name] = c;
    pal.append(el("button", { class: c.source ? "source" : "", "data-class": c.name, title: c.summary, onclick: () => addFunction(c.name) },
      c.name, el("small", {}, c.summary)));
  }
}

function addFunction(name) {
  const fn = { class: name, params: {} };
  if ($("beside").checked && steps.length > 0) steps[steps.length - 1].push(fn);
  else steps.push([fn]);
  render();
  changed();
}

// ---- the chain and its forms

function render() {
  const box = $("chain");
  box.textContent = "";
  if (steps.length === 0) {
    box.append(el("p", { class: "hint" }, "No function yet."));
    return;
  }
  steps.forEach((step, i) => {
    const s = el("div", { class: "step" });
    if (i > 0) s.append(el("div", { class: "arrow" }, step.length > 1 ? "▼ each of these gets the packets from above" : "▼"));
    step.forEach((fn, j) => s.append(fnForm(fn, i, j)));
    box.append(s);
  });
}

function fnForm(fn, i, j) {
  const c = classes[fn.class];
  const f = el("div", { class: "fn", "data-fn": fn.class });
  f.append(el("button", { class: "remove", title: "remove", onclick: () => { steps[i].splice(j, 1); if (!steps[i].length) steps.splice(i, 1); render(); changed(); } }, "✕"));
  f.append(el("div", { class: "title", title: c.summary }, fn.class));
  for (const p of c.params) {
    let input;
    if (p.enum && p.enum.length) {
      input = el("select", { name: p.name }, el("option", { value: "" }, p.default ? "(" + p.default + ")" : "—"));
      for (const v of p.enum) input.append(el("option", { value: v }, v));
    } else if (p.type === "bool") {
      input = el("select", { name: p.name }, el("option", { value: "" }, "(" + (p.default || "false") + ")"),
        el("option", { value: "true" }, "true"), el("option", { value: "false" }, "false"));
    } else {
      input = el("input", { name: p.name, placeholder: p.default || (p.required ? "required" : ""), size: 18 });
      if (p.required) input.classList.add("required");
    }
    input.value = fn.params[p.name] || "";
    input.addEventListener("input", () => { fn.params[p.name] = input.value; changed(); });
    input.addEventListener("change", () => { fn.params[p.name] = input.value; changed(); });
    const unit = p.unit ? " (" + p.unit + ")" : "";
    f.append(el("label", { title: p.summary + unit }, el("span", {}, p.name + (p.required ? "*" : "")), input));
  }
  return f;
}

// ---- the expression

function quote(s) {
  return '"' + s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") + '"';
}

function term(fn) {
  const c = classes[fn.class];
  const args = [];
  c.params.forEach((p, k) => {
    const v = (fn.params[p.name] || "").trim();
    if (v === "") return;
    const val = p.type === "string" ? quote(v) : v;
    args.push(k === 0 ? val : p.name + "=" + val);
  });
  return "(" + [fn.class, ...args].join(",") + ")";
}

function expression() {
  return steps.map((step) => step.length === 1 ? term(step[0]) : "[" + step.map(term).join(" | ") + "]").join(" > ");
}

function sourceArgs() {
  const kind = $("source-kind").value, arg = $("source-arg").value.trim();
  switch (kind) {
    case "gen": return { source: "(gen,packets=0)" };
    case "file": return { file: arg };
    case "iface": return { iface: arg };
  }
  return {};
}

// ---- check and placement

function changed() {
  $("expr").textContent = expression();
  $("submit").disabled = true;
  clearTimeout(checkTimer);
  checkTimer = setTimeout(check, 200);
}

async function check() {
  const expr = expression();
  const status = $("check-status"), err = $("check-error");
  if (!expr) {
    status.textContent = ""; err.hidden = true; $("placement").textContent = "";
    return;
  }
  let res;
  try {
    res = await call("check", Object.assign({ expr }, sourceArgs()));
  } catch (e) {
    res = { ok: false, error: e.message };
  }
  if (expr !== expression()) return; // typed on since
  if (!res.ok) {
    status.className = "bad";
    status.textContent = "✗ not valid";
    err.hidden = false;
    err.textContent = (res.line ? "line " + res.line + ", column " + res.col + ": " : "") + res.error + (res.caret ? "\n" + res.caret : "");
    $("placement").textContent = "";
    return;
  }
  status.className = "ok";
  status.textContent = "✓ valid: " + res.canonical;
  err.hidden = true;
  err.textContent = "";
  drawPlacement(res.plan);
  $("submit").disabled = false;
}

function drawPlacement(plan) {
  const by = {};
  for (const f of plan.functions) (by[f.flowspace] = by[f.flowspace] || []).push(f);
  const box = $("placement");
  box.textContent = "";
  const draw = (node, root) => {
    const d = el("div", { class: "fs" + (root ? " root" : ""), "data-flowspace": node.name });
    d.append(el("div", { class: "fsname" }, node.name, el("small", {}, " " + node.kind + (node.barrier ? ", across " + node.barrier : ""))));
    for (const f of by[node.name] || []) {
      d.append(el("div", {}, el("span", { class: "placed", title: f.reason }, f.id), el("span", { class: "reason" }, f.reason)));
    }
    for (const c of node.children || []) d.append(draw(c, false));
    return d;
  };
  if (hier) box.append(draw(hier, true));
}

// ---- submit and watch

async function submit() {
  const st = $("submit-status");
  st.textContent = "submitting…";
  try {
    const r = await call("submit", Object.assign({ expr: expression(), name: $("name").value.trim() }, sourceArgs()), true);
    st.textContent = "submitted as " + r.id + " (active in " + (r.active_ns / 1e6).toFixed(1) + " ms)";
    watch(r.id);
    listRequests();
  } catch (e) {
    st.textContent = "refused: " + e.message;
  }
}

function watch(id) {
  if (events) events.close();
  events = new EventSource(api + "events?id=" + encodeURIComponent(id));
  events.onmessage = (m) => showStat(JSON.parse(m.data));
  events.addEventListener("gone", () => { events.close(); events = null; listRequests(); });
}

function fmtState(s) {
  return Object.entries(s || {}).filter(([, v]) => typeof v !== "object").map(([k, v]) => k + "=" + v).join(" ");
}

function showStat(st) {
  const body = $("counters").querySelector("tbody");
  for (const f of st.functions) {
    let row = body.querySelector('tr[data-fn="' + f.id + '"]');
    if (!row) {
      row = el("tr", { "data-fn": f.id }, el("td", {}, f.id), el("td", {}, f.flowspace));
      for (const k of ["in", "out", "filtered", "dropped"]) row.append(el("td", { class: "num", "data-k": k }));
      row.append(el("td", { "data-k": "state" }));
      body.append(row);
    }
    for (const k of ["in", "out", "filtered", "dropped"]) row.querySelector('[data-k="' + k + '"]').textContent = f[k];
    row.querySelector('[data-k="state"]').textContent = fmtState(f.state);
  }
}

async function listRequests() {
  const box = $("requests");
  let l;
  try { l = await call("ls"); } catch (e) { box.textContent = e.message; return; }
  box.textContent = "";
  for (const r of l.requests) {
    box.append(el("div", { class: "req", "data-id": r.id },
      el("button", { onclick: async () => { try { await call("rm", { id: r.id }, true); } catch (e) { alert(e.message); } $("counters").querySelector("tbody").textContent = ""; listRequests(); } }, "remove"),
      el("b", {}, r.id + (r.name ? " (" + r.name + ")" : "")), " " + r.state + " ",
      el("code", {}, r.canonical), " ",
      el("a", { href: "#", onclick: (e) => { e.preventDefault(); $("counters").querySelector("tbody").textContent = ""; watch(r.id); } }, "watch")));
  }
}

async function init() {
  $("token").value = localStorage.getItem("ffpf-token") || "";
  $("token").addEventListener("change", () => localStorage.setItem("ffpf-token", $("token").value));
  $("source-kind").addEventListener("change", changed);
  $("source-arg").addEventListener("input", changed);
  $("submit").addEventListener("click", submit);
  try {
    hier = await call("hierarchy");
  } catch (e) { /* drawn without */ }
  await loadClasses();
  listRequests();
  document.body.dataset.ready = "1";
}

init();
