(function () {
"use strict";
var SVGNS = "http://www.w3.org/2000/svg";
var DATA = JSON.parse(document.getElementById("podsim-data").textContent);
var META = DATA.meta, PARTS = DATA.parts;
var ALL_DIMS = [["gpus", "GPUs"], ["tp", "TP"], ["pp", "PP"], ["vpp", "VPP"], ["cp", "CP"], ["ep", "EP"], ["etp", "expert TP"], ["dp", "DP"],
            ["micro_batch", "micro-batch"], ["recompute", "recompute"], ["sequence_parallel", "sequence parallel"],
            ["distributed_optimizer", "distributed optimizer"], ["zero", "ZeRO stage"], ["tp_overlap", "TP comm. overlap"],
            ["overlap_grad_reduce", "overlap grad. reduce"], ["overlap_param_gather", "overlap param. gather"]];
var ONOFF = {sequence_parallel: 1, distributed_optimizer: 1, overlap_grad_reduce: 1, overlap_param_gather: 1};
var BD = [["compute", "compute", "#4c78a8"], ["exposed_comm", "exposed communication", "#f58518"],
          ["bubble", "pipeline bubble", "#e45756"], ["other", "other", "#9d9d9d"]];
var MEM = [["weights", "weights", "#4c78a8"], ["gradients", "gradients", "#72b7b2"], ["optimizer", "optimizer states", "#54a24b"],
           ["activations", "activations", "#eeca3b"], ["buffers", "buffers", "#b279a2"]];
var PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#ff9da6", "#9d755d", "#79706e"];
var TOP_BARS = 10, TOP_PANELS = 6, TABLE_STEP = 50;

// rows as objects, rank = position (best first)
var ROWS = DATA.rows.map(function (a, i) {
  var r = {i: i, rank: i + 1};
  for (var c = 0; c < DATA.cols.length; c++) r[DATA.cols[c]] = a[c];
  r.cmd = r.command ? r.command.map(function (k) { return PARTS[k]; }).join(" --") : "";
  r.bdOk = Array.isArray(r.breakdown) && r.breakdown.every(function (v) { return typeof v === "number"; });
  r.sim = r.simulated !== 0;   // older pages' rows carry no method: simulated
  return r;
});
// documents from before ZeRO and the overlaps lack those: no filter, no column
var OPTIONAL = {etp: 1, zero: 1, tp_overlap: 1, overlap_grad_reduce: 1, overlap_param_gather: 1};
function carried(k) { return !OPTIONAL[k] || ROWS.some(function (r) { return r[k] !== null && r[k] !== undefined; }); }
var DIMS = ALL_DIMS.filter(function (d) { return carried(d[0]); });
var N_SIM = ROWS.filter(function (r) { return r.sim; }).length, N_EST = ROWS.length - N_SIM;
function methodText(r) { return r.sim ? "simulated" : "estimated"; }
var HAS_COST = ROWS.some(function (r) { return typeof r.cost_per_mtok_usd === "number"; });
var HAS_GOODPUT = ROWS.some(function (r) { return typeof r.goodput === "number"; });
var HAS_FLOW = ROWS.some(function (r) { return Array.isArray(r.flow) && typeof r.flow[1] === "number"; });

var state = {filters: {}, x: "memory", color: "tp", tableRows: TABLE_STEP, sortKey: "rank", sortDir: 1, picked: null};

function el(tag, attrs, parent, text) {
  var e = document.createElementNS(SVGNS, tag);
  if (attrs) for (var k in attrs) if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function h(tag, attrs, parent, text) {
  var e = document.createElement(tag);
  if (attrs) for (var k in attrs) if (attrs[k] !== undefined && attrs[k] !== null) {
    if (k === "class") e.className = attrs[k]; else e.setAttribute(k, attrs[k]);
  }
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function fin(v) { return typeof v === "number" && isFinite(v); }
function vkey(v) { return v === null || v === undefined ? "?" : String(v); }
function cmpVals(a, b) {
  var na = Number(a), nb = Number(b);
  if (a !== "?" && b !== "?" && !isNaN(na) && !isNaN(nb) && a !== "true" && a !== "false") return na - nb;
  var order = {te: -2, async: -1, none: 0, selective: 1, full: 2, "false": 0, "true": 1};
  if (a in order && b in order) return order[a] - order[b];
  return a < b ? -1 : a > b ? 1 : 0;
}
function showVal(d, v) {
  if (ONOFF[d]) return v === "true" ? "on" : v === "false" ? "off" : v;
  return v;
}

// ---- number formatting ----
function fmtSI(v) {
  var a = Math.abs(v);
  if (a >= 1e9) return trim(v / 1e9, 3) + "G";
  if (a >= 1e6) return trim(v / 1e6, 3) + "M";
  if (a >= 1e3) return trim(v / 1e3, 3) + "k";
  return trim(v, 3);
}
function trim(v, sig) {
  if (v === 0) return "0";
  var s = Number(v.toPrecision(sig)).toString();
  return s;
}
function fmtTick(v, step, si) {
  if (si && Math.abs(v) >= 1e3) {
    var div = Math.abs(v) >= 1e9 ? 1e9 : Math.abs(v) >= 1e6 ? 1e6 : 1e3;
    var suf = div === 1e9 ? "G" : div === 1e6 ? "M" : "k";
    var d = Math.max(0, -Math.floor(Math.log10(step / div) + 1e-9));
    return (v / div).toFixed(Math.min(d, 6)) + suf;
  }
  var dec = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  return v.toFixed(Math.min(dec, 8));
}
function fmtSec(v) { return (v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(3) : Number(v.toPrecision(3)).toString()) + " s"; }
function fmtInt(v) { return fin(v) ? Math.round(v).toLocaleString("en-US") : "n/a"; }
function fmtF(v, d) { return fin(v) ? v.toFixed(d) : "n/a"; }

// ---- scales ----
function extent(vals, zeroBased) {
  var lo = Infinity, hi = -Infinity;
  vals.forEach(function (v) { if (fin(v)) { if (v < lo) lo = v; if (v > hi) hi = v; } });
  if (lo === Infinity) { lo = 0; hi = 1; }
  if (zeroBased) lo = Math.min(0, lo);
  if (hi - lo <= Math.abs(hi) * 1e-12) {
    var pad = hi === 0 ? 1 : Math.abs(hi) * 0.1;
    lo = zeroBased ? Math.min(0, lo) : lo - pad; hi = hi + pad;
  } else if (!zeroBased) {
    var p = (hi - lo) * 0.05; lo -= p; hi += p;
  }
  return [lo, hi];
}
function ticks(lo, hi, n) {
  var span = hi - lo;
  if (!(span > 0) || !isFinite(span)) return {step: 1, vals: [lo]};
  var raw = span / Math.max(1, n), mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
  var step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  var vals = [], start = Math.ceil(lo / step - 1e-9) * step;
  for (var v = start; v <= hi + step * 1e-9 && vals.length < 50; v += step) vals.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return {step: step, vals: vals};
}
function linear(d0, d1, r0, r1) {
  var k = (r1 - r0) / (d1 - d0 || 1);
  return function (v) { return r0 + (v - d0) * k; };
}

// ---- axes ----
function axisX(g, sx, dom, y, x0, x1, title, si, grid, gy0) {
  var t = ticks(dom[0], dom[1], Math.max(2, Math.floor((x1 - x0) / 90)));
  var ax = el("g", {"class": "axis"}, g);
  el("line", {x1: x0, x2: x1, y1: y, y2: y}, ax);
  t.vals.forEach(function (v) {
    var x = sx(v);
    if (grid) el("line", {x1: x, x2: x, y1: gy0, y2: y, stroke: "#e7eaee"}, g);
    el("line", {x1: x, x2: x, y1: y, y2: y + 5}, ax);
    el("text", {x: x, y: y + 18, "text-anchor": "middle", "class": "tick"}, ax, fmtTick(v, t.step, si));
  });
  el("text", {x: (x0 + x1) / 2, y: y + 38, "text-anchor": "middle", "class": "title"}, ax, title);
}
function axisY(g, sy, dom, x, y0, y1, title, si, grid, gx1) {
  var t = ticks(dom[0], dom[1], Math.max(2, Math.floor((y0 - y1) / 50)));
  var ax = el("g", {"class": "axis"}, g);
  el("line", {x1: x, x2: x, y1: y0, y2: y1}, ax);
  t.vals.forEach(function (v) {
    var y = sy(v);
    if (grid) el("line", {x1: x, x2: gx1, y1: y, y2: y, stroke: "#e7eaee"}, g);
    el("line", {x1: x - 5, x2: x, y1: y, y2: y}, ax);
    el("text", {x: x - 8, y: y + 4, "text-anchor": "end", "class": "tick"}, ax, fmtTick(v, t.step, si));
  });
  el("text", {transform: "translate(" + (x - 54) + "," + ((y0 + y1) / 2) + ") rotate(-90)", "text-anchor": "middle",
              "class": "title"}, ax, title);
}
function width(id, fallback) {
  var w = document.getElementById(id).clientWidth;
  return w > 200 ? w : fallback;
}

// ---- filters ----
function values(d) {
  var seen = {};
  ROWS.forEach(function (r) { seen[vkey(r[d])] = true; });
  return Object.keys(seen).sort(cmpVals);
}
var DIM_VALUES = {};   // the values of each dimension the rows carry
DIMS.forEach(function (d) { DIM_VALUES[d[0]] = values(d[0]); });

function readHash() {
  var hsh = (location.hash || "").replace(/^#/, "");
  if (!hsh) return;
  hsh.split("&").forEach(function (kv) {
    var i = kv.indexOf("="); if (i < 0) return;
    var k = decodeURIComponent(kv.slice(0, i)), v = decodeURIComponent(kv.slice(i + 1));
    if (k === "x") state.x = v === "cost" ? "cost" : "memory";
    else if (k === "color") state.color = v;
    else if (k === "sort") { state.sortDir = v.charAt(0) === "-" ? -1 : 1; state.sortKey = v.replace(/^-/, ""); }
    else if (DIM_VALUES[k]) {
      var want = {}; v.split(",").forEach(function (s) { want[s] = true; });
      state.filters[k] = want;
    }
  });
}
function writeHash() {
  var parts = [];
  DIMS.forEach(function (d) {
    var f = state.filters[d[0]]; if (!f) return;
    var on = DIM_VALUES[d[0]].filter(function (v) { return f[v]; });
    if (on.length === DIM_VALUES[d[0]].length) return;
    parts.push(d[0] + "=" + on.map(encodeURIComponent).join(","));
  });
  if (state.x !== "memory") parts.push("x=" + state.x);
  if (state.color !== "tp") parts.push("color=" + encodeURIComponent(state.color));
  if (state.sortKey !== "rank" || state.sortDir !== 1) parts.push("sort=" + (state.sortDir < 0 ? "-" : "") + state.sortKey);
  try { history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname + location.search); }
  catch (e) { /* file:// in some browsers */ }
}
function passes(r) {
  for (var k in state.filters) {
    var f = state.filters[k];
    if (f && !f[vkey(r[k])]) return false;
  }
  return true;
}
function buildFilters() {
  var grid = document.getElementById("filter-grid");
  grid.textContent = "";
  DIMS.forEach(function (d) {
    var vals = DIM_VALUES[d[0]];
    var fs = h("fieldset", {"data-dim": d[0]}, grid);
    h("legend", null, fs, d[1]);
    if (!state.filters[d[0]]) { state.filters[d[0]] = {}; vals.forEach(function (v) { state.filters[d[0]][v] = true; }); }
    vals.forEach(function (v) {
      var lab = h("label", null, fs);
      var cb = h("input", {type: "checkbox", "data-dim": d[0], "data-value": v}, lab);
      cb.defaultChecked = cb.checked = !!state.filters[d[0]][v];
      if (vals.length === 1) cb.disabled = true;
      cb.addEventListener("change", function () { state.filters[d[0]][v] = cb.checked; state.tableRows = TABLE_STEP; redraw(); });
      lab.appendChild(document.createTextNode(" " + showVal(d[0], v)));
    });
    if (vals.length > 2) {
      var all = h("button", {type: "button", title: "tick every value"}, fs, "all");
      all.addEventListener("click", function () { vals.forEach(function (v) { state.filters[d[0]][v] = true; }); buildFilters(); redraw(); });
    }
  });
}

// ---- header ----
function buildHeader() {
  var head = document.getElementById("head");
  h("h1", null, head, "podsim search: " + (META.model || "model") + " on " + (META.gpu || "GPU"));
  var facts = h("div", {"class": "facts"}, head);
  function fact(k, v) { var s = h("span", null, facts, k + ": "); h("b", null, s, v); }
  var gp = values("gpus").map(showVal.bind(null, "gpus"));
  var rej = META.rejected.reduce(function (a, kv) { return a + kv[1]; }, 0);
  var obj = {tokens: "tokens per second (highest first)", mfu: "MFU (highest first)", time: "iteration time (lowest first)",
             cost: "$ per million tokens (lowest first)"}[META.objective] || META.objective;
  fact("model", META.model || "?");
  fact("GPU", META.gpu || "?");
  fact("GPUs", gp.join(", "));
  fact("ranked by", obj);
  if (fin(META.global_batch)) fact("global batch", fmtInt(META.global_batch) + (fin(META.seq_len) ? " \u00d7 " + fmtInt(META.seq_len) + " tokens" : ""));
  var nf = ROWS.filter(function (r) { return Array.isArray(r.flow); }).length;
  var m = h("span", {id: "methods", "data-estimated": N_EST, "data-simulated": N_SIM, "data-flow": nf,
                     title: "estimated: iteration time in closed form (within a few per cent of the simulation); " +
                     "simulated: exactly, with the time breakdown and memory per stage; flow: simulated again with the flow backend (congestion)"},
            facts, "layouts evaluated: ");
  h("b", null, m, fmtInt(META.evaluated) + " (" + fmtInt(N_EST) + " estimated, " + fmtInt(N_SIM) + " simulated" +
    (nf ? ", " + fmtInt(nf) + " also with the flow backend" : "") + ")");
  if (META.reused) fact("taken from the store", fmtInt(META.reused));
  fact("in this report", fmtInt(ROWS.length));
  fact("rejected", fmtInt(rej));
  if (META.rejected.length) {
    var det = h("details", {open: ""}, head);
    h("summary", null, det, "rejected layouts, by reason");
    var ul = h("ul", null, det);
    META.rejected.forEach(function (kv) { h("li", null, ul, fmtInt(kv[1]) + " \u00d7 " + kv[0]); });
  }
}

// ---- description of a layout ----
function layoutText(r) {
  var s = "TP" + vkey(r.tp) + " PP" + vkey(r.pp);
  if (r.vpp > 1) s += " VPP" + r.vpp;
  if (r.cp > 1) s += " CP" + r.cp;
  if (r.ep > 1) s += " EP" + r.ep;
  if (r.etp !== undefined && r.etp !== null && r.etp !== r.tp) s += " ETP" + r.etp;
  s += " DP" + vkey(r.dp) + " mb" + vkey(r.micro_batch);
  if (r.recompute && r.recompute !== "none") s += " rc:" + r.recompute;
  if (r.sequence_parallel) s += " SP";
  if (r.zero) s += " ZeRO" + r.zero;
  if (r.tp > 1 && r.tp_overlap && r.tp_overlap !== "te") s += " ovl:" + r.tp_overlap;
  if (r.overlap_grad_reduce === false) s += " no-OGR";
  if (r.overlap_param_gather === false) s += " no-OPG";
  return s;
}
function tipHtml(r) {
  var esc = function (s) { return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); };
  var lines = ["<b>#" + r.rank + "</b> " + esc(layoutText(r)) + (r.best ? " (top)" : "") + " \u00b7 <b>" +
      (r.sim ? "simulated</b> exactly" : "estimated</b> in closed form") +
      (Array.isArray(r.flow) && fin(r.flow[1]) ? " \u00b7 flow backend: " + fmtInt(r.flow[1]) + " tokens/s" : ""),
    fmtInt(r.tokens_per_s) + " tokens/s \u00b7 MFU " + fmtF(r.mfu * 100, 1) + " % \u00b7 " + fmtF(r.iteration_time_s, 3) +
      " s per iteration \u00b7 " + fmtF(r.memory_peak_gib, 1) + " GiB peak per GPU" +
      (fin(r.cost_per_mtok_usd) ? " \u00b7 $" + fmtF(r.cost_per_mtok_usd, 4) + " per Mtok" : ""),
    "GPUs " + vkey(r.gpus) + " \u00b7 TP " + vkey(r.tp) + " \u00b7 PP " + vkey(r.pp) + " \u00b7 VPP " + vkey(r.vpp) + " \u00b7 CP " +
      vkey(r.cp) + " \u00b7 EP " + vkey(r.ep) + (r.etp !== undefined && r.etp !== null && r.etp !== r.tp ? " \u00b7 expert TP " + vkey(r.etp) : "") + " \u00b7 DP " + vkey(r.dp) + " \u00b7 micro-batch " + vkey(r.micro_batch) + " \u00d7 " +
      vkey(r.num_microbatches) + " \u00b7 recompute " + esc(vkey(r.recompute)) + " \u00b7 sequence parallel " +
      (r.sequence_parallel ? "on" : "off") + " \u00b7 distributed optimizer " + (r.distributed_optimizer ? "on" : "off") +
      (r.zero !== null && r.zero !== undefined ? " \u00b7 ZeRO " + vkey(r.zero) : "") +
      (r.tp_overlap ? " \u00b7 TP comm. overlap " + esc(r.tp_overlap) : "") +
      (typeof r.overlap_grad_reduce === "boolean" ? " \u00b7 overlap grad. reduce " + (r.overlap_grad_reduce ? "on" : "off") : "") +
      (typeof r.overlap_param_gather === "boolean" ? " \u00b7 overlap param. gather " + (r.overlap_param_gather ? "on" : "off") : "")];
  return lines.join("<br>") + (r.cmd ? "<code>" + r.cmd.split(" --").map(function (p, k) {
    return "<span class=\"opt\">" + (k ? "--" : "") + esc(p) + "</span>"; }).join(" ") + "</code>" : "");
}
var tip = document.getElementById("tip");
function showTip(r, ev) {
  tip.innerHTML = tipHtml(r);
  tip.hidden = false;
  var x = ev.clientX + 14, y = ev.clientY + 14;
  var w = tip.offsetWidth, hh = tip.offsetHeight;
  if (x + w > window.innerWidth - 8) x = Math.max(8, ev.clientX - w - 14);
  if (y + hh > window.innerHeight - 8) y = Math.max(8, ev.clientY - hh - 14);
  tip.style.left = x + "px"; tip.style.top = y + "px";
}
function hideTip() { tip.hidden = true; }

function cmdCode(parent, cmd) {
  // the command, with each "--option value" kept on one line when it wraps
  var code = h("code", null, parent);
  cmd.split(" --").forEach(function (p, k) {
    if (k) code.appendChild(document.createTextNode(" "));
    h("span", {"class": "opt"}, code, (k ? "--" : "") + p);
  });
  return code;
}
function copyText(text, btn) {
  function done() { if (btn) { var o = btn.textContent; btn.textContent = "copied"; setTimeout(function () { btn.textContent = o; }, 1200); } }
  function fallback() {
    var ta = document.createElement("textarea"); ta.value = text; document.body.appendChild(ta); ta.select();
    try { document.execCommand("copy"); done(); } catch (e) { /* nothing to do */ }
    document.body.removeChild(ta);
  }
  try {
    if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).then(done, fallback);
    else fallback();
  } catch (e) { fallback(); }
}
function showPicked() {
  var box = document.getElementById("picked");
  box.textContent = "";
  var r = state.picked;
  if (!r) { box.textContent = "Hover over a point for its layout; click it to keep its command here."; return; }
  h("b", null, box, "#" + r.rank + " " + layoutText(r) + ": ");
  box.appendChild(document.createTextNode(fmtInt(r.tokens_per_s) + " tokens/s, " + fmtF(r.memory_peak_gib, 1) + " GiB per GPU (" +
                                          methodText(r) + ") "));
  var b = h("button", {type: "button"}, box, "copy command");
  b.addEventListener("click", function () { copyText(r.cmd, b); });
  h("br", null, box);
  cmdCode(box, r.cmd);
}

// ---- (1) Pareto front ----
function front(rows, xf) {
  var pts = rows.filter(function (r) { return fin(xf(r)) && fin(r.tokens_per_s); });
  pts.sort(function (a, b) { return xf(a) - xf(b) || b.tokens_per_s - a.tokens_per_s; });
  var out = [], best = -Infinity, last = null;
  pts.forEach(function (r) {
    if (r.tokens_per_s > best) { out.push(r); best = r.tokens_per_s; last = r; }
    else if (last && r.tokens_per_s === last.tokens_per_s && xf(r) === xf(last)) out.push(r);
  });
  return out;
}
function colorOf(rows) {
  var d = state.color, vals = DIM_VALUES[d] || values(d), map = {};
  vals.forEach(function (v, i) { map[v] = PALETTE[i % PALETTE.length]; });
  return {vals: vals, fn: function (r) { return map[vkey(r[d])] || "#888"; }};
}
function drawPareto(rows) {
  var box = document.getElementById("pareto");
  box.textContent = "";
  var cost = state.x === "cost" && HAS_COST;
  var xf = cost ? function (r) { return r.cost_per_mtok_usd; } : function (r) { return r.memory_peak_gib; };
  var xTitle = cost ? "cost ($ per million tokens; lower is better)" : "peak memory per GPU (GiB; lower is better)";
  document.getElementById("pareto-title").textContent = "Pareto front: throughput vs " + (cost ? "cost" : "peak memory per GPU");
  var W = width("pareto", 1100), H = 440, L = 78, R = 20, T = 12, B = 54;
  var svg = el("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, id: "pareto-svg", role: "img",
                       "aria-label": "throughput against " + (cost ? "cost" : "memory")}, box);
  var pts = rows.filter(function (r) { return fin(xf(r)) && fin(r.tokens_per_s); });
  var fr = front(pts, xf), onFront = {};
  fr.forEach(function (r) { onFront[r.i] = true; });
  var note = document.getElementById("pareto-note");
  var nSim = pts.filter(function (r) { return r.sim; }).length;
  note.textContent = fmtInt(pts.length) + " layout" + (pts.length === 1 ? "" : "s") + " plotted" +
    (nSim < pts.length ? " (" + fmtInt(nSim) + " simulated exactly: filled; " + fmtInt(pts.length - nSim) +
     " estimated in closed form: hollow)" : "") + "; " + fr.length +
    " on the Pareto front (no other layout has more tokens/s for no more " + (cost ? "cost" : "memory per GPU") +
    "), ringed and joined." + (state.x === "cost" && !HAS_COST ? " The rows carry no cost (run the search with --gpu-hour-price)." : "");
  svg.dataset.points = pts.length; svg.dataset.front = fr.length; svg.dataset.simulated = nSim;
  var dx = extent(pts.map(xf), false), dy = extent(pts.map(function (r) { return r.tokens_per_s; }), false);
  var sx = linear(dx[0], dx[1], L, W - R), sy = linear(dy[0], dy[1], H - B, T);
  var g = el("g", null, svg);
  axisY(g, sy, dy, L, H - B, T, "throughput (tokens/s)", true, true, W - R);
  axisX(g, sx, dx, H - B, L, W - R, xTitle, false, true, T);
  if (!pts.length) {
    el("text", {x: (L + W - R) / 2, y: (T + H - B) / 2, "text-anchor": "middle", "class": "empty"}, svg,
       rows.length ? "no layout has both values" : "no layout matches the filters");
    return;
  }
  var col = colorOf(rows);
  var leg = document.getElementById("pareto-legend");
  leg.textContent = "";
  var lab = (DIMS.filter(function (d) { return d[0] === state.color; })[0] || [0, state.color])[1];
  h("span", null, leg, lab + ":");
  col.vals.forEach(function (v, i) {
    var s = h("span", null, leg); var ii = h("i", {"class": "dot"}, s); ii.style.background = PALETTE[i % PALETTE.length];
    s.appendChild(document.createTextNode(showVal(state.color, v)));
  });
  var s2 = h("span", {"class": "sep"}, leg); var i2 = h("i", {"class": "dot"}, s2); i2.style.border = "2px solid #111";
  s2.appendChild(document.createTextNode("Pareto-optimal"));
  if (nSim) {
    var s3 = h("span", {"class": "method-sim"}, leg); var i3 = h("i", {"class": "dot"}, s3); i3.style.background = "#5b6573";
    s3.appendChild(document.createTextNode("simulated"));
  }
  if (nSim < pts.length) {
    var s4 = h("span", {"class": "method-est"}, leg); var i4 = h("i", {"class": "dot"}, s4);
    i4.style.border = "1.5px solid #5b6573";
    s4.appendChild(document.createTextNode("estimated (closed form)"));
  }
  // estimated points hollow and below, simulated ones filled and on top
  var gp = el("g", {"class": "points"}, svg);
  var frag = document.createDocumentFragment();
  pts.forEach(function (r) {
    if (onFront[r.i] || r.sim) return;
    var c = col.fn(r);
    frag.appendChild(el("circle", {cx: sx(xf(r)).toFixed(1), cy: sy(r.tokens_per_s).toFixed(1), r: 3, fill: "none",
                                   "pointer-events": "visible", stroke: c, "stroke-opacity": 0.8, "stroke-width": 1,
                                   "class": "pt est", "data-i": r.i}));
  });
  pts.forEach(function (r) {
    if (onFront[r.i] || !r.sim) return;
    frag.appendChild(el("circle", {cx: sx(xf(r)).toFixed(1), cy: sy(r.tokens_per_s).toFixed(1), r: 4, fill: col.fn(r),
                                   stroke: "#fff", "stroke-width": 0.8, "class": "pt sim", "data-i": r.i}));
  });
  gp.appendChild(frag);
  // the front: a staircase (what the best throughput is at each memory or cost)
  var d = "";
  fr.forEach(function (r, k) {
    var x = sx(xf(r)).toFixed(1), y = sy(r.tokens_per_s).toFixed(1);
    d += k === 0 ? "M" + x + "," + y : "H" + x + "V" + y;
  });
  if (fr.length > 1) el("path", {d: d, fill: "none", stroke: "#111", "stroke-width": 1.5, "class": "front-line"}, svg);
  var gf = el("g", {"class": "front"}, svg);
  fr.forEach(function (r) {
    el("circle", {cx: sx(xf(r)).toFixed(1), cy: sy(r.tokens_per_s).toFixed(1), r: 5.5, fill: r.sim ? col.fn(r) : "#fff",
                  stroke: "#111", "stroke-width": 2, "class": "pt front " + (r.sim ? "sim" : "est"), "data-i": r.i}, gf);
    if (!r.sim) el("circle", {cx: sx(xf(r)).toFixed(1), cy: sy(r.tokens_per_s).toFixed(1), r: 3, fill: "none",
                              stroke: col.fn(r), "stroke-width": 1.5, "pointer-events": "none"}, gf);
  });
  svg.addEventListener("mousemove", function (ev) {
    var t = ev.target;
    if (t && t.classList && t.classList.contains("pt")) showTip(ROWS[+t.getAttribute("data-i")], ev); else hideTip();
  });
  svg.addEventListener("mouseleave", hideTip);
  svg.addEventListener("click", function (ev) {
    var t = ev.target;
    if (t && t.classList && t.classList.contains("pt")) { state.picked = ROWS[+t.getAttribute("data-i")]; showPicked(); }
  });
}

// ---- (2) time breakdown ----
function legend(id, items) {
  var leg = document.getElementById(id);
  leg.textContent = "";
  items.forEach(function (it) { var s = h("span", null, leg); var i = h("i", null, s); i.style.background = it[2]; s.appendChild(document.createTextNode(it[1])); });
}
function drawBreakdown(rows) {
  var box = document.getElementById("breakdown");
  box.textContent = "";
  legend("breakdown-legend", BD);
  var top = rows.filter(function (r) { return r.bdOk; }).slice(0, TOP_BARS);
  var lacking = 0;
  for (var k = 0; k < rows.length && k < TOP_BARS + 50; k++) if (!rows[k].bdOk) lacking++;
  document.getElementById("breakdown-note").textContent = top.length ?
    "The best " + top.length + " layout" + (top.length === 1 ? "" : "s") + " in the filter that carry a time breakdown; seconds per iteration." +
    (lacking ? " Rows without one (estimated in closed form, or not re-run with a timeline) are left out." : "") :
    "No layout in the filter carries a time breakdown (only the layouts the search simulated exactly do).";
  var W = width("breakdown", 1100), bh = 24, gap = 8, L = 250, R = 74, T = 8, B = 52;
  var H = T + B + Math.max(1, top.length) * (bh + gap);
  var svg = el("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, id: "breakdown-svg"}, box);
  svg.dataset.bars = top.length;
  // the labels' room: as wide as the longest (up to 45 % of the chart), longer ones cut with an ellipsis
  var labels = top.map(function (r) { return "#" + r.rank + "  " + layoutText(r); });
  var probe = el("text", {"font-size": 12}, svg), cap = Math.floor(W * 0.45);
  var textW = function (t) { probe.textContent = t; return probe.getComputedTextLength(); };
  var widest = 0;
  labels = labels.map(function (t) {
    var w = textW(t);
    if (w > cap - 16) { while (t.length > 8 && textW(t + "\u2026") > cap - 16) t = t.slice(0, -1); t += "\u2026"; w = textW(t); }
    widest = Math.max(widest, w);
    return t;
  });
  svg.removeChild(probe);
  L = Math.max(L, Math.min(cap, Math.ceil(widest) + 16));
  var tot = top.map(function (r) { return r.breakdown.reduce(function (a, v) { return a + Math.max(0, v); }, 0); });
  var dom = extent(tot, true);
  var sx = linear(dom[0], dom[1], L, W - R);
  var g = el("g", null, svg);
  axisX(g, sx, dom, H - B, L, W - R, "time per iteration (s)", false, true, T);
  if (!top.length) {
    el("text", {x: (L + W - R) / 2, y: T + 16, "text-anchor": "middle", "class": "empty"}, svg, "no time breakdown to show");
    return;
  }
  top.forEach(function (r, j) {
    var y = T + j * (bh + gap) + gap / 2, x = sx(0);
    var bar = el("g", {"class": "bar bd-bar", "data-i": r.i}, svg);
    el("text", {x: L - 8, y: y + bh / 2 + 4, "text-anchor": "end", "font-size": 12}, bar, labels[j]);
    r.breakdown.forEach(function (v, c) {
      var w = Math.max(0, sx(Math.max(0, v)) - sx(0));
      var rect = el("rect", {x: x.toFixed(1), y: y, width: w.toFixed(1), height: bh, fill: BD[c][2], "class": "seg"}, bar);
      el("title", null, rect, BD[c][1] + ": " + v.toFixed(4) + " s");
      x += w;
    });
    el("text", {x: (x + 6).toFixed(1), y: y + bh / 2 + 4, "font-size": 11, "class": "tick"}, bar, fmtSec(tot[j]));
    bar.addEventListener("mousemove", function (ev) { showTip(r, ev); });
    bar.addEventListener("mouseleave", hideTip);
  });
}

// ---- (3) memory per stage ----
function drawMemory(rows) {
  var box = document.getElementById("memory");
  box.textContent = "";
  legend("memory-legend", MEM);
  var top = rows.filter(function (r) { return Array.isArray(r.memory_per_stage) && r.memory_per_stage.length; }).slice(0, TOP_PANELS);
  document.getElementById("memory-note").textContent = top.length ?
    "The best " + top.length + " layout" + (top.length === 1 ? "" : "s") + " in the filter that carry memory per stage; one bar per pipeline stage, GiB per GPU, on a common scale." :
    "No layout in the filter carries memory per stage (only the layouts the search simulated exactly do).";
  box.dataset.panels = top.length;
  if (!top.length) return;
  var ymax = [];
  top.forEach(function (r) { r.memory_per_stage.forEach(function (s) {
    var sum = 0; for (var c = 0; c < 5; c++) sum += fin(s[c]) ? Math.max(0, s[c]) : 0;
    ymax.push(Math.max(sum, fin(s[5]) ? s[5] : 0));
  }); });
  var dom = extent(ymax, true);
  var bw = box.clientWidth > 200 ? box.clientWidth : 1100;
  var cols = Math.max(1, Math.floor((bw + 10) / 410));
  var W = Math.floor((bw - (cols - 1) * 10) / cols) - 10, H = 236, L = 66, R = 10, T = 12, B = 48;
  top.forEach(function (r) {
    var panel = h("div", {"class": "panel", "data-i": r.i}, box);
    var ttl = "#" + r.rank + " (peak " + fmtF(r.memory_peak_gib, 1) + " GiB): " + layoutText(r);
    h("div", {"class": "ptitle", title: ttl}, panel, ttl);
    var svg = el("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, "class": "memory-svg"}, panel);
    var st = r.memory_per_stage, n = st.length;
    svg.dataset.stages = n;
    var sy = linear(dom[0], dom[1], H - B, T);
    var g = el("g", null, svg);
    axisY(g, sy, dom, L, H - B, T, "memory per GPU (GiB)", false, true, W - R);
    var slot = (W - R - L) / n, barw = Math.max(2, Math.min(48, slot * 0.7));
    var ax = el("g", {"class": "axis"}, svg);
    el("line", {x1: L, x2: W - R, y1: H - B, y2: H - B}, ax);
    var every = Math.max(1, Math.ceil(n / Math.max(1, Math.floor((W - R - L) / 22))));
    st.forEach(function (s, j) {
      var x = L + slot * j + (slot - barw) / 2, y = sy(0);
      var bar = el("g", {"class": "bar mem-bar"}, svg);
      for (var c = 0; c < 5; c++) {
        var v = fin(s[c]) ? Math.max(0, s[c]) : 0;
        var hgt = sy(0) - sy(v);
        var rect = el("rect", {x: x.toFixed(1), y: (y - hgt).toFixed(1), width: barw.toFixed(1), height: Math.max(0, hgt).toFixed(1),
                               fill: MEM[c][2], "class": "seg"}, bar);
        el("title", null, rect, "stage " + s[6] + ", " + MEM[c][1] + ": " + fmtF(s[c], 2) + " GiB");
        y -= hgt;
      }
      if (j % every === 0) el("text", {x: (x + barw / 2).toFixed(1), y: H - B + 16, "text-anchor": "middle", "class": "tick"}, ax, String(s[6]));
    });
    el("text", {x: (L + W - R) / 2, y: H - B + 36, "text-anchor": "middle", "class": "title"}, ax, "pipeline stage");
  });
}

// ---- (4) table ----
var COLUMNS = [
  ["rank", "#", function (r) { return r.rank; }, function (r) { return String(r.rank); }],
  ["method", "method", function (r) { return r.sim ? 0 : 1; }, methodText],
  ["tokens_per_s", "tokens/s", function (r) { return r.tokens_per_s; }, function (r) { return fmtInt(r.tokens_per_s); }],
  ["mfu", "MFU %", function (r) { return r.mfu; }, function (r) { return fin(r.mfu) ? (r.mfu * 100).toFixed(1) : "n/a"; }],
  ["iteration_time_s", "s/iter.", function (r) { return r.iteration_time_s; }, function (r) { return fmtF(r.iteration_time_s, 3); }],
  ["memory_peak_gib", "GiB/GPU", function (r) { return r.memory_peak_gib; }, function (r) { return fmtF(r.memory_peak_gib, 1); }]];
if (HAS_COST) COLUMNS.push(["cost_per_mtok_usd", "$/Mtok", function (r) { return r.cost_per_mtok_usd; }, function (r) { return fmtF(r.cost_per_mtok_usd, 4); }]);
if (HAS_GOODPUT) {
  COLUMNS.push(["goodput", "goodput %", function (r) { return r.goodput; }, function (r) { return fin(r.goodput) ? (r.goodput * 100).toFixed(1) : "n/a"; }]);
  COLUMNS.push(["time_to_train_h", "train (h)", function (r) { return r.time_to_train_h; }, function (r) { return fmtF(r.time_to_train_h, 1); }]);
}
if (HAS_FLOW) COLUMNS.push(["flow", "flow tok/s", function (r) { return r.flow ? r.flow[1] : null; },
                            function (r) { return r.flow && fin(r.flow[1]) ? fmtInt(r.flow[1]) : ""; }]);
[["gpus", "GPUs"], ["tp", "TP"], ["pp", "PP"], ["vpp", "VPP"], ["cp", "CP"], ["ep", "EP"], ["etp", "ETP"], ["dp", "DP"], ["micro_batch", "mb"],
 ["num_microbatches", "#mb"], ["recompute", "recompute"], ["sequence_parallel", "SP"], ["distributed_optimizer", "DO"],
 ["zero", "ZeRO"], ["tp_overlap", "TP ovl."], ["overlap_grad_reduce", "OGR"], ["overlap_param_gather", "OPG"]]
  .filter(function (c) { return !OPTIONAL[c[0]] || DIM_VALUES[c[0]] && DIM_VALUES[c[0]].length > 1; })   // the new ones where they vary
  .forEach(function (c) {
    COLUMNS.push([c[0], c[1], function (r) { var v = r[c[0]]; return typeof v === "boolean" ? (v ? 1 : 0) : v; },
                  function (r) { var v = r[c[0]]; return typeof v === "boolean" ? (v ? "on" : "off") : vkey(v); }]);
  });
COLUMNS.push(["cmd", "podsim llm command", function (r) { return r.cmd; }, null]);

var TXT = {method: 1, recompute: 1, tp_overlap: 1, cmd: 1};
var HEAD_TITLES = {rank: "rank by the search's objective: the simulated layouts first (exact), then the estimated ones",
  method: "simulated exactly, or estimated in closed form (within a few per cent)", tokens_per_s: "throughput (tokens/s)", mfu: "model FLOPs utilisation (%)",
  iteration_time_s: "time per iteration (s)", memory_peak_gib: "peak memory per GPU (GiB)",
  cost_per_mtok_usd: "cost (US $ per million tokens)", flow: "throughput with the flow backend (tokens/s)",
  micro_batch: "micro-batch size", num_microbatches: "micro-batches per iteration", sequence_parallel: "sequence parallelism",
  distributed_optimizer: "distributed optimizer", zero: "ZeRO stage", tp_overlap: "TP communication overlap",
  overlap_grad_reduce: "gradient reduce overlapped with the backward pass",
  overlap_param_gather: "parameter all-gather overlapped with the forward pass", cmd: "the command that simulates this layout alone"};
function drawTable(rows) {
  var t = document.getElementById("table");
  t.textContent = "";
  var col = COLUMNS.filter(function (c) { return c[0] === state.sortKey; })[0] || COLUMNS[0];
  var sorted = rows.slice();
  if (col[0] !== "rank" || state.sortDir !== 1) {
    sorted.sort(function (a, b) {
      var va = col[2](a), vb = col[2](b);
      var na = va === null || va === undefined, nb = vb === null || vb === undefined;
      if (na || nb) return na === nb ? a.rank - b.rank : na ? 1 : -1;
      var c = typeof va === "number" && typeof vb === "number" ? va - vb : String(va) < String(vb) ? -1 : String(va) > String(vb) ? 1 : 0;
      return c * state.sortDir || a.rank - b.rank;
    });
  }
  var shown = sorted.slice(0, state.tableRows);
  var thead = h("thead", null, t), tr = h("tr", null, thead);
  COLUMNS.forEach(function (c) {
    var th = h("th", {"class": (TXT[c[0]] ? "txt " : "") +
                       (c[0] === state.sortKey ? (state.sortDir === 1 ? "sorted-asc" : "sorted-desc") : ""),
                      "data-key": c[0], title: (HEAD_TITLES[c[0]] || c[1]) + " (click to sort)"}, tr, c[1]);
    th.addEventListener("click", function () {
      if (state.sortKey === c[0]) state.sortDir = -state.sortDir;
      else { state.sortKey = c[0]; state.sortDir = (c[0] === "tokens_per_s" || c[0] === "mfu" || c[0] === "flow") ? -1 : 1; }
      drawTable(current);
      writeHash();
    });
  });
  var tb = h("tbody", null, t);
  var byRank = col[0] === "rank" && state.sortDir === 1;
  shown.forEach(function (r, k) {
    // ranked as the search ranks: the simulated rows, then a rule, then the estimated ones
    var cls = (r.best ? "best " : "") + (r.sim ? "sim" : "est") +
      (byRank && k > 0 && !r.sim && shown[k - 1].sim ? " first-est" : "");
    var row = h("tr", {"class": cls, "data-i": r.i, "data-method": methodText(r)}, tb);
    COLUMNS.forEach(function (c) {
      if (c[0] === "cmd") {
        var td = h("td", {"class": "cmd"}, row);
        if (r.cmd) {
          var b = h("button", {type: "button", title: "copy the command"}, td, "copy");
          b.addEventListener("click", function () { copyText(r.cmd, b); });
          cmdCode(td, r.cmd);
        }
      } else h("td", {"class": TXT[c[0]] ? "txt" : ""}, row, c[3](r));
    });
  });
  t.dataset.rows = shown.length;
  var nSim = rows.filter(function (r) { return r.sim; }).length;
  document.getElementById("table-note").textContent = "Showing " + shown.length + " of " + rows.length +
    " layouts in the filter; click a column to sort (bold rank: a top layout of the search)." +
    (nSim && nSim < rows.length ? " Ranked as the search ranks them: the " + fmtInt(nSim) + " simulated exactly first, then the " +
     fmtInt(rows.length - nSim) + " estimated in closed form (grey; within a few per cent)." :
     !nSim && rows.length ? " All estimated in closed form (within a few per cent)." : "");
  var more = document.getElementById("more");
  more.hidden = shown.length >= rows.length;
}
document.getElementById("more").addEventListener("click", function () { state.tableRows += TABLE_STEP * 4; drawTable(current); });

// ---- everything ----
var current = [];
function redraw() {
  current = ROWS.filter(passes);
  document.getElementById("shown").textContent = fmtInt(current.length) + " of " + fmtInt(ROWS.length) + " layouts match the filters.";
  document.body.dataset.shown = current.length;
  hideTip();
  drawPareto(current);
  drawBreakdown(current);
  drawMemory(current);
  drawTable(current);
  showPicked();
  writeHash();
}
function setup() {
  readHash();
  buildHeader();
  buildFilters();
  var xs = document.getElementById("xaxis");
  if (!HAS_COST) { xs.options[1].disabled = true; xs.options[1].textContent += " (no cost in the rows)"; }
  xs.value = state.x === "cost" && HAS_COST ? "cost" : "memory";
  xs.addEventListener("change", function () { state.x = xs.value; redraw(); });
  var cs = document.getElementById("colorby");
  DIMS.forEach(function (d) { h("option", {value: d[0]}, cs, d[1]); });
  if (!DIM_VALUES[state.color]) state.color = "tp";
  cs.value = state.color;
  cs.addEventListener("change", function () { state.color = cs.value; redraw(); });
  redraw();
  var t = null;
  window.addEventListener("resize", function () { clearTimeout(t); t = setTimeout(redraw, 150); });
}
try {
  setup();
} catch (e) {
  window.__errors.push(String(e && e.stack || e));
  document.body.dataset.errors = window.__errors.join("\n");
}
document.body.dataset.ready = "1";
})();
