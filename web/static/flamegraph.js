// Run page flame graph: operators by call path from /api/runs/{id}/flamegraph, drawn on a
// canvas as an icicle (the outermost operators on top). A frame's width is its share of
// the chosen metric: GPU time (kernel time launched from it and below) or CPU time
// (inclusive host time). Hover shows the path and its time; a click zooms into a frame
// (its ancestors stay above it, full width), a click on an ancestor, the path above the
// canvas, "reset zoom" or Escape zooms back out.
//
// Linked with the report's hot operators table: clicking a row highlights the frames of
// that operator (a click on the marked row clears it); clicking a frame marks its row.
// The canvas carries its state in data attributes (loads, metric, focus, highlight) for
// the page's tests.
"use strict";
(function () {
  const canvas = document.getElementById("fg-canvas");
  if (!canvas) return;
  const page = JSON.parse(document.getElementById("page-data").textContent);
  const $ = (id) => document.getElementById(id);
  const box = $("fg-box");
  const tooltip = $("fg-tooltip");
  const status = $("fg-status");
  const crumbs = $("fg-crumbs");
  const buttons = { gpu: $("fg-gpu"), cpu: $("fg-cpu") };
  const ctx = canvas.getContext("2d");
  const api = "/api/runs/" + encodeURIComponent(page.run_id) + "/flamegraph";
  const rankQuery = page.rank !== undefined && page.rank !== null ? "&rank=" + page.rank : "";
  const ROW_H = 18, MIN_ROWS = 3, MIN_LABEL_PX = 36;
  const OTHER = "(other)";

  let metric = "gpu";
  let data = null;          // the last answer
  let kids = [];            // frame id -> child ids, in the answer's order
  let depth = [];           // frame id -> depth (root 0)
  let x0 = [];              // frame id -> left edge as a fraction of the root
  let focus = 0;            // the frame zoomed into
  let highlight = null;     // an operator name whose frames are highlighted
  let loads = 0, request = null;
  const hotTable = findHotTable();

  function fmt(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toPrecision(4) + " s";
    if (a >= 1e6) return (ns / 1e6).toPrecision(4) + " ms";
    if (a >= 1e3) return (ns / 1e3).toPrecision(4) + " µs";
    return Math.round(ns) + " ns";
  }

  function pct(part, whole) {
    if (!whole) return "0%";
    const p = 100 * part / whole;
    return (p >= 10 ? p.toFixed(1) : p.toPrecision(2)) + "%";
  }

  function hue(name) {
    let h = 0;
    for (let i = 0; i < name.length && i < 64; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
    return (Math.abs(h) % 50) + (metric === "gpu" ? 0 : 190);  // warm for GPU, cool for CPU
  }

  function pathOf(id) {
    const names = [];
    for (let f = id; f > 0; f = data.frames[f].parent) names.unshift(data.frames[f].name);
    return names;
  }

  function isAncestor(a, b) {  // a is b or above it
    for (let f = b; f >= 0; f = data.frames[f].parent) if (f === a) return true;
    return false;
  }

  // -- data --------------------------------------------------------------------------------

  function load(keepPath) {
    if (request) request.abort();
    request = new AbortController();
    status.textContent = "loading…";
    fetch(api + "?metric=" + metric + rankQuery,
          { signal: request.signal, headers: { Accept: "application/json" } })
      .then((r) => r.ok ? r.json() : r.json().then((b) => { throw new Error(b.error || r.statusText); }))
      .then((answer) => {
        request = null;
        // A trace without kernels has no GPU time to show: its CPU time is the graph.
        if (answer.metric === "gpu" && answer.total_ns === 0 && answer.cpu_total_ns > 0 && loads === 0) {
          setMetric("cpu");
          return;
        }
        take(answer);
        focus = keepPath ? findPath(keepPath) : 0;
        loads += 1;
        canvas.dataset.loads = String(loads);
        draw();
      })
      .catch((e) => {
        if (e.name === "AbortError") return;
        status.textContent = "The flame graph could not be loaded: " + e.message;
      });
  }

  function take(answer) {
    data = answer;
    const n = answer.frames.length;
    kids = Array.from({ length: n }, () => []);
    depth = new Array(n).fill(0);
    x0 = new Array(n).fill(0);
    const next = new Array(n).fill(0);  // where the next child of a frame starts
    for (const f of answer.frames) {
      if (f.parent < 0) continue;
      kids[f.parent].push(f.id);
      depth[f.id] = depth[f.parent] + 1;
      x0[f.id] = x0[f.parent] + next[f.parent];
      next[f.parent] += answer.total_ns ? f.value_ns / answer.total_ns : 0;
    }
  }

  function findPath(names) {
    let f = 0;
    for (const name of names) {
      const c = kids[f].find((k) => data.frames[k].name === name);
      if (c === undefined) break;
      f = c;
    }
    return f;
  }

  // -- drawing -----------------------------------------------------------------------------

  // The frames drawn at the current zoom: the focus's ancestors, full width, then the
  // focus's subtree scaled to the width; each with its box in CSS pixels.
  function layout(width) {
    const out = [];
    if (!data || !data.total_ns) return out;
    const fw = data.frames[focus].value_ns / data.total_ns;
    for (let f = data.frames[focus].parent; f >= 0; f = data.frames[f].parent) {
      out.push({ id: f, x: 0, w: width, y: depth[f] * ROW_H, above: true });
    }
    const stack = [focus];
    while (stack.length) {
      const id = stack.pop();
      const w = (data.frames[id].value_ns / data.total_ns) / fw * width;
      if (w < 0.5) continue;  // narrower than half a pixel: it and its children vanish
      out.push({ id: id, x: (x0[id] - x0[focus]) / fw * width, w: w, y: depth[id] * ROW_H, above: false });
      for (const k of kids[id]) stack.push(k);
    }
    return out;
  }

  function draw() {
    const width = Math.max(50, box.clientWidth);
    const boxes = layout(width);
    const rows = boxes.reduce((m, b) => Math.max(m, b.y / ROW_H + 1), MIN_ROWS);
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(rows * ROW_H * ratio);
    canvas.style.height = rows * ROW_H + "px";
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, rows * ROW_H);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    let marked = 0;
    for (const b of boxes) {
      const f = data.frames[b.id];
      const lit = highlight !== null && f.name === highlight;
      if (lit) marked += 1;
      if (f.parent < 0) ctx.fillStyle = "#c9d1de";
      else if (f.name === OTHER) ctx.fillStyle = "#dde1e8";
      else if (f.name.startsWith("(") || f.calls === 0) ctx.fillStyle = "#b8bfcc";
      else {
        const light = b.above ? 82 : highlight !== null && !lit ? 84 : 68;
        const sat = highlight !== null && !lit ? 25 : 70;
        ctx.fillStyle = "hsl(" + hue(f.name) + "," + sat + "%," + light + "%)";
      }
      if (lit) ctx.fillStyle = "#f2b705";
      ctx.fillRect(b.x, b.y, Math.max(b.w - 1, 0.5), ROW_H - 1);
      if (lit) {
        ctx.strokeStyle = "#8a5a00";
        ctx.lineWidth = 1.5;
        ctx.strokeRect(b.x + 0.75, b.y + 0.75, Math.max(b.w - 2.5, 0.5), ROW_H - 2.5);
      }
      if (b.w >= MIN_LABEL_PX) {
        ctx.fillStyle = b.above ? "#4a5263" : "#1d2330";
        const label = f.parent < 0 ? "all: " + fmt(f.value_ns) : f.name;
        ctx.fillText(fit(label, b.w - 8), b.x + 4, b.y + ROW_H / 2);
      }
    }
    canvas._boxes = boxes;
    canvas.dataset.metric = metric;
    canvas.dataset.focus = pathOf(focus).join(" › ");
    canvas.dataset.highlight = highlight || "";
    canvas.dataset.highlighted = String(marked);
    drawCrumbs();
    drawStatus(marked);
  }

  function fit(text, px) {
    if (ctx.measureText(text).width <= px) return text;
    let lo = 0, hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (ctx.measureText(text.slice(0, mid) + "…").width <= px) lo = mid; else hi = mid - 1;
    }
    return lo > 0 ? text.slice(0, lo) + "…" : "";
  }

  function drawCrumbs() {
    crumbs.replaceChildren();
    if (focus === 0) return;
    const chain = [];
    for (let f = focus; f >= 0; f = data.frames[f].parent) chain.unshift(f);
    chain.forEach((id, i) => {
      if (i) {
        const sep = document.createElement("span");
        sep.className = "sep";
        sep.textContent = "›";
        crumbs.append(sep);
      }
      const b = document.createElement("button");
      b.type = "button";
      b.className = "linklike";
      b.textContent = id === 0 ? "all" : data.frames[id].name;
      b.dataset.frame = String(id);
      if (id === focus) b.setAttribute("aria-current", "true");
      b.addEventListener("click", () => zoom(id));
      crumbs.append(b);
    });
  }

  function drawStatus(marked) {
    const what = metric === "gpu" ? "GPU time" : "CPU time";
    let text = what + " " + fmt(data.total_ns) + " in all";
    if (data.metric === "gpu" && data.total_ns === 0) text = "No kernel time in this trace";
    if (focus !== 0) {
      const f = data.frames[focus];
      text += "; zoomed into " + f.name + ": " + fmt(f.value_ns) + " (" + pct(f.value_ns, data.total_ns) + ")";
    }
    const shown = data.frames.filter((f) => f.parent >= 0 && f.name !== OTHER).length;
    if (shown < data.frames_total) {
      text += " · " + shown + " frames of " + data.frames_total +
        " (the smallest summed as " + OTHER + ")";
    }
    if (highlight !== null) {
      const all = data.frames.filter((f) => f.name === highlight);
      const ns = all.reduce((s, f) => s + ownNs(f), 0);
      text += " · " + highlight + ": " + all.length + " frame" + (all.length === 1 ? "" : "s") +
        (all.length ? ", " + fmt(ns) + " own " + what + " (" + pct(ns, data.total_ns) + ")" : " at this size") +
        (marked < all.length ? ", " + marked + " in view" : "");
    }
    status.textContent = text;
  }

  // A frame's time outside its children (what the hot operators table counts for a leaf).
  function ownNs(f) {
    return kids[f.id].reduce((s, k) => s - data.frames[k].value_ns, f.value_ns);
  }

  // -- interaction -------------------------------------------------------------------------

  function frameAt(e) {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    for (const b of canvas._boxes || []) {
      if (x >= b.x && x < b.x + b.w && y >= b.y && y < b.y + ROW_H) return b.id;
    }
    return null;
  }

  function zoom(id) {
    focus = id;
    draw();
  }

  function setMetric(m) {
    if (m === metric && data) return;
    const keep = data ? pathOf(focus) : null;
    metric = m;
    for (const [k, b] of Object.entries(buttons)) b.setAttribute("aria-pressed", String(k === m));
    load(keep);
  }

  function setHighlight(name) {
    highlight = name;
    markRow(name);
    if (data && name !== null) {
      // zoomed where none of its frames is: show the whole graph
      const inView = data.frames.some((f) => f.name === name && (isAncestor(focus, f.id) || isAncestor(f.id, focus)));
      if (!inView) focus = 0;
    }
    if (data) draw();
  }

  function markRow(name) {
    if (!hotTable) return;
    for (const tr of hotTable.tBodies[0].rows) {
      tr.classList.toggle("fg-marked", name !== null && rowName(tr) === name);
      tr.setAttribute("aria-selected", String(name !== null && rowName(tr) === name));
    }
  }

  function findHotTable() {
    const section = document.getElementById("hot-ops");
    const table = section && section.querySelector("table");
    if (!table || !table.tBodies.length) return null;
    table.classList.add("fg-linked");
    for (const tr of table.tBodies[0].rows) {
      tr.tabIndex = 0;
      tr.title = "highlight " + rowName(tr) + " in the flame graph";
    }
    return table;
  }

  function rowName(tr) {
    const cell = tr.querySelector("td.name");
    return cell ? cell.getAttribute("title") || cell.textContent.trim() : "";
  }

  function rowClicked(tr) {
    const name = rowName(tr);
    setHighlight(highlight === name ? null : name);
    if (highlight !== null) {
      $("flame-graph").scrollIntoView({ block: "nearest", behavior: "smooth" });
    }
  }

  if (hotTable) {
    hotTable.tBodies[0].addEventListener("click", (e) => {
      const tr = e.target.closest("tr");
      if (tr) rowClicked(tr);
    });
    hotTable.tBodies[0].addEventListener("keydown", (e) => {
      const tr = e.target.closest("tr");
      if (tr && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); rowClicked(tr); }
    });
  }

  canvas.addEventListener("click", (e) => {
    const id = frameAt(e);
    if (id === null) return;
    const f = data.frames[id];
    // the table's row of this operator, if it has one, is marked (the highlight stays)
    if (hotTable && f.parent >= 0) {
      const has = Array.from(hotTable.tBodies[0].rows).some((tr) => rowName(tr) === f.name);
      if (has) { highlight = f.name; markRow(f.name); }
    }
    zoom(id);
  });

  canvas.addEventListener("pointermove", (e) => {
    const id = frameAt(e);
    if (id === null) { tooltip.hidden = true; return; }
    const f = data.frames[id];
    const path = f.parent < 0 ? "all call paths" : pathOf(id).join(" › ");
    const lines = [path];
    const main = metric === "gpu" ? f.gpu_ns : f.cpu_ns;
    lines.push((metric === "gpu" ? "GPU time " : "CPU time ") + fmt(main) + " · " +
      pct(main, data.total_ns) + " of all" +
      (focus !== 0 && isAncestor(focus, id) && id !== focus
        ? " · " + pct(main, data.frames[focus].value_ns) + " of " + data.frames[focus].name : ""));
    lines.push(metric === "gpu" ? "CPU time " + fmt(f.cpu_ns) : "GPU time launched " + fmt(f.gpu_ns));
    if (f.calls) lines.push(f.calls.toLocaleString() + " call" + (f.calls === 1 ? "" : "s"));
    if (f.name === OTHER) lines.push("frames smaller than " + pct(data.min_fraction * data.total_ns, data.total_ns) + " of all, summed");
    tooltip.textContent = lines.join("\n");
    tooltip.hidden = false;
    const r = box.getBoundingClientRect();
    tooltip.style.left = Math.max(0, Math.min(e.clientX - r.left + 12, box.clientWidth - tooltip.offsetWidth - 4)) + "px";
    tooltip.style.top = (e.clientY - r.top + 14) + "px";
  });
  canvas.addEventListener("pointerleave", () => { tooltip.hidden = true; });
  canvas.addEventListener("keydown", (e) => {
    if (e.key === "Escape") { zoom(0); setHighlight(null); }
  });

  buttons.gpu.addEventListener("click", () => setMetric("gpu"));
  buttons.cpu.addEventListener("click", () => setMetric("cpu"));
  $("fg-reset").addEventListener("click", () => zoom(0));
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (data) draw(); }, 100);
  });

  load(null);
})();
