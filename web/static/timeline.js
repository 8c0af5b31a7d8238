// Run page timeline: GPU streams, then per host thread a flame chart (annotation ranges,
// operators by depth, runtime/driver calls, Python frames on request), on a canvas.
// Data comes from /api/runs/{id}/timeline at the current window and width; the server
// aggregates dense lanes per pixel, so the browser never holds more than about
// lanes x pixels items. Times are ns since the trace start.
//
// Navigation: wheel or + / - / W / S zoom, A / D / arrows / horizontal swipe pan, drag on
// the time axis pans, drag in the plot selects a stretch (its length, kernel time and busy
// share), click selects an event (details, flows to its launch), double-click zooms to it,
// Escape clears. The window, the selected event and finding are kept in the address.
//
// Lanes come in collapsible groups (timeline_groups.js): per process and thread, and on a
// job's page with several ranks (page.aligned) one group per rank, every rank's times on
// the reference rank's clock as the server shifted them; an event's details are then
// asked of its own rank and shifted the same way.
"use strict";
(function () {
  const page = JSON.parse(document.getElementById("page-data").textContent);
  const canvas = document.getElementById("tl-canvas");
  if (!canvas || page.span_ns === undefined) return;
  const $ = (id) => document.getElementById(id);
  const box = $("timeline");
  const tooltip = $("tl-tooltip");
  const windowLabel = $("tl-window");
  const rangeLabel = $("tl-range");
  const details = $("tl-details");
  const ctx = canvas.getContext("2d");
  const api = "/api/runs/" + encodeURIComponent(page.run_id) + "/timeline";
  const Groups = window.TimelineGroups;
  // A job's ranks on one clock: each rank's shift (its own time = aligned + shift_ns).
  const aligned = page.aligned || null;
  const LANE_STRIDE = 1000000;  // an aligned lane's id: rank * LANE_STRIDE + its own id
  const rankClock = {};
  if (aligned) for (const r of aligned.ranks) rankClock[r.rank] = r;

  const LABEL_W = 200, AXIS_H = 22, GPU_H = 20, ROW_H = 16, HEAD_H = 18, COUNTER_H = 26, MIN_WINDOW_NS = 1000;
  const GROUP_COLORS = { gpu: 210, thread: 140, range: 28, api: 290, python: 180 };
  const span = Math.max(1, page.span_ns);
  const findings = page.findings || {};
  const view = page.view_ns ? padded(page.view_ns[0], page.view_ns[1], 0.02) : { start: 0, end: span };
  let data = null;          // last answer from the API
  let rows = [];            // drawn rows: {y, h, lane} or {y, h, header: group key, ...}
  let laneY = {};           // lane id -> {y, h}
  let rankY = {};           // an aligned view's rank -> {y0, y1}: its group's rows
  const collapsed = new Set();
  // the ranks whose host lanes are asked for (an aligned view): few ranks open, many closed
  const maxHostRanks = aligned ? aligned.max_host_ranks : 0;
  const hostRanks = new Set(aligned && aligned.ranks.length <= 2 ? aligned.ranks.map((r) => r.rank) : []);
  let showPython = false;
  let selected = null;      // {kind, ref, lane, start_ns, end_ns, name}
  let detail = null;        // the details answer of the selected event
  let range = null;         // {start, end} selected by dragging
  let search = null;        // {query, regex, count, matches, i}
  let finding = null;       // {id, ranges, i}
  let pending = null, timer = null, urlTimer = null, loads = 0;
  // when the view last changed: the page reports how long new data took to be drawn
  let changedAt = 0;
  let urlLive = false;      // the address follows the view once the page has opened

  function padded(s, e, frac) {
    const pad = Math.max((e - s) * frac, MIN_WINDOW_NS / 2);
    return { start: s - pad, end: e + pad };
  }

  function fmt(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toPrecision(4) + " s";
    if (a >= 1e6) return (ns / 1e6).toPrecision(4) + " ms";
    if (a >= 1e3) return (ns / 1e3).toPrecision(4) + " µs";
    return Math.round(ns) + " ns";
  }

  // An axis tick: as many decimals as the tick step needs, so neighbours never read alike.
  function fmtTick(ns, step) {
    const units = [[1e9, " s"], [1e6, " ms"], [1e3, " µs"], [1, " ns"]];
    const [u, name] = units.find(([v]) => Math.abs(ns) >= v || v === 1);
    const decimals = Math.max(0, Math.min(9, Math.ceil(-Math.log10(step / u) - 1e-9)));
    return (ns / u).toFixed(decimals) + name;
  }

  function fmtBytes(b) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = b, i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(1) : String(v)) + " " + units[i];
  }

  // Reading clientWidth forces a layout, and xOf() asks for the width once per rectangle:
  // it was half of a redraw. Read once per task (a resize is always a later task).
  let plotW = null;
  function plotWidth() {
    if (plotW === null) {
      plotW = Math.max(50, box.clientWidth - LABEL_W);
      queueMicrotask(() => { plotW = null; });
    }
    return plotW;
  }

  // A redraw paints thousands of rectangles; hashing each name and building (and the
  // canvas parsing) a colour string for each one was a large part of a frame. Both are
  // cached: hues per name index and group of an answer, fill styles per hue and alpha step.
  const styleCache = new Map();
  function hue(name, group) {
    let h = 0;
    for (let i = 0; i < name.length && i < 64; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
    const base = GROUP_COLORS[group] || 260;
    return (base + (Math.abs(h) % 50) - 25 + 360) % 360;
  }
  function hueAt(nameIx, group) {
    const byGroup = data.hues || (data.hues = {});
    const hues = byGroup[group] || (byGroup[group] = []);
    let v = hues[nameIx];
    if (v === undefined) v = hues[nameIx] = hue(data.names[nameIx], group);
    return v;
  }
  // a bucket's colour: its hue, more opaque the busier (in 1/32 steps); an event's: solid
  function fillStyle(h, busy) {
    const step = busy === null ? -1 : Math.round(32 * busy);
    const key = h * 64 + step;
    let v = styleCache.get(key);
    if (v === undefined) {
      v = step < 0 ? "hsl(" + h + ",60%,52%)" : "hsla(" + h + ",62%,48%," + (0.25 + 0.75 * step / 32).toFixed(3) + ")";
      styleCache.set(key, v);
    }
    return v;
  }

  function clampView() {
    let w = Math.max(MIN_WINDOW_NS, view.end - view.start);
    if (w > span) w = span;
    if (view.start < 0) view.start = 0;
    if (view.start + w > span) view.start = span - w;
    view.end = view.start + w;
  }

  // --- the address: window, event and finding, so a view can be pasted into a ticket ---
  function readUrl() {
    const q = new URLSearchParams(window.location.search);
    const tl = (q.get("tl") || "").split("_").map(Number);
    if (tl.length === 2 && tl.every(Number.isFinite) && tl[1] > tl[0]) {
      view.start = tl[0];
      view.end = tl[1];
    }
    for (const k of Groups.readList(q, "tlg")) collapsed.add(k);
    if (aligned && q.has("tlh")) {
      hostRanks.clear();
      for (const r of Groups.readList(q, "tlh")) {
        if (Number(r) in rankClock && hostRanks.size < maxHostRanks) hostRanks.add(Number(r));
      }
    }
    return { event: q.get("event"), finding: q.get("finding"), fr: Number(q.get("fr") || 1) };
  }

  function writeUrl() {
    if (!urlLive) return;
    clearTimeout(urlTimer);
    urlTimer = setTimeout(() => {
      const q = new URLSearchParams(window.location.search);
      q.set("tl", Math.floor(view.start) + "_" + Math.ceil(view.end));
      if (selected) q.set("event", selected.kind + ":" + selected.ref + (aligned ? "@" + selected.rank : ""));
      else q.delete("event");
      if (collapsed.size) q.set("tlg", Array.from(collapsed).join(",")); else q.delete("tlg");
      if (aligned) q.set("tlh", Array.from(hostRanks).sort((a, b) => a - b).join(","));
      if (finding) { q.set("finding", finding.id); q.set("fr", String(finding.i + 1)); }
      else { q.delete("finding"); q.delete("fr"); }
      history.replaceState(null, "", window.location.pathname + "?" + q.toString() + window.location.hash);
    }, 150);
  }

  function publishState() {
    canvas.dataset.startNs = String(Math.round(view.start));
    canvas.dataset.endNs = String(Math.round(view.end));
    canvas.dataset.loads = String(loads);
    canvas.dataset.highlights = String(finding ? finding.ranges.length : 0);
    canvas.dataset.selected = selected ? selected.kind + ":" + selected.ref : "";
    canvas.dataset.labelW = String(LABEL_W);
    const step = (view.end - view.start) / 10;
    windowLabel.textContent = fmtTick(view.start, step) + " – " + fmtTick(view.end, step) + " (" + fmt(view.end - view.start) + ")";
  }

  function schedule() {
    changedAt = performance.now();
    clampView();
    publishState();
    draw();
    writeUrl();
    clearTimeout(timer);
    timer = setTimeout(load, 60);
  }

  // a job's page may show another rank than the reference one: every answer is that rank's;
  // or several ranks (an event's details are then its own rank's: `rank` given)
  const rankQuery = page.rank !== undefined && page.rank !== null ? "&rank=" + page.rank : "";
  const ranksQuery = aligned ? "&ranks=" + aligned.ranks.map((r) => r.rank).join(",") : "";

  function getJson(url, signal, rank) {
    const which = rank !== undefined && rank !== null ? "&rank=" + rank : aligned ? ranksQuery : rankQuery;
    return fetch(url + which, { signal: signal, headers: { Accept: "application/json" } })
      .then((r) => r.json().then((d) => {
        if (!r.ok) throw new Error(d.error || ("HTTP " + r.status));
        return d;
      }));
  }

  function load() {
    if (pending) pending.abort();
    pending = new AbortController();
    const url = api + "?start_ns=" + Math.floor(view.start) + "&end_ns=" + Math.ceil(view.end) +
      "&width_px=" + Math.round(plotWidth()) +
      (aligned && hostRanks.size ? "&host_ranks=" + Array.from(hostRanks).join(",") : "");
    getJson(url, pending.signal)
      .then((d) => {
        data = d;
        data.busy = gpuBusy(d);
        loads += 1;
        layout();
        publishState();
        draw();
        canvas.dataset.dataMs = String(Math.round(performance.now() - changedAt));
      })
      .catch((err) => { if (err.name !== "AbortError") windowLabel.textContent = "timeline: " + err.message; });
  }

  // Each device's busy share per pixel of the answer: its streams' busy time summed
  // (buckets as served, events clipped to the pixels they cover), at most 1.
  function gpuBusy(d) {
    const out = {};
    const npp = d.ns_per_px;
    for (const lane of d.lanes) {
      if (lane.row !== "gpu") continue;
      // an aligned view's devices are its ranks': the same GPU number on two ranks is two
      const device = (lane.rank !== undefined ? lane.rank + "/" : "") + lane.key.split(":")[1];
      const acc = out[device] || (out[device] = new Float32Array(d.width_px));
      if (lane.buckets) for (const [px, , busy] of lane.buckets) acc[px] += busy;
      for (const [s, e] of lane.events) {
        const a = Math.max(s, d.start_ns), b = Math.min(e, d.end_ns);
        for (let px = Math.floor((a - d.start_ns) / npp); px < d.width_px && d.start_ns + px * npp < b; px++) {
          const p0 = d.start_ns + px * npp;
          acc[px] += Math.max(0, Math.min(b, p0 + npp) - Math.max(a, p0)) / npp;
        }
      }
    }
    for (const acc of Object.values(out)) for (let i = 0; i < acc.length; i++) acc[i] = Math.min(1, acc[i]);
    return out;
  }

  function drawCounter(row) {
    const top = row.y + 2, hh = row.h - 4;
    ctx.fillStyle = "#fbfcfe";
    ctx.fillRect(LABEL_W, row.y, plotWidth(), row.h);
    const pxW = Math.max(1, data.ns_per_px * plotWidth() / (view.end - view.start));
    const xPx = (px) => xOf(data.start_ns + px * data.ns_per_px);
    if (row.counter === "busy") {
      const acc = data.busy[row.device];
      ctx.fillStyle = "hsla(210, 70%, 45%, 0.85)";
      for (let px = 0; px < acc.length; px++) {
        if (acc[px] > 0) ctx.fillRect(xPx(px), top + hh * (1 - acc[px]), pxW, hh * acc[px]);
      }
      return;
    }
    const pts = row.c.points, max = Math.max(1, row.c.max_bytes);
    const end = xPx(data.width_px);
    ctx.fillStyle = "hsla(350, 60%, 55%, 0.45)";
    ctx.strokeStyle = "hsl(350, 60%, 40%)";
    ctx.beginPath();
    pts.forEach(([px, alloc, reserved], i) => {
      const x0 = xPx(px), x1 = i + 1 < pts.length ? xPx(pts[i + 1][0]) : end;
      ctx.fillRect(x0, top + hh * (1 - alloc / max), Math.max(1, x1 - x0), hh * alloc / max);
      const yr = top + hh * (1 - reserved / max);
      if (i === 0) ctx.moveTo(x0, yr); else ctx.lineTo(x0, yr);
      ctx.lineTo(x1, yr);
    });
    ctx.stroke();
  }

  // --- layout: the groups' header rows, their lanes (none when closed), the counters ---
  function rankLabel(r) {
    const c = rankClock[r.rank] || {};
    const off = c.method === "reference" ? "reference clock" : c.method === "none" ? "own clock (no offset found)" : "offset " + fmt(c.offset_ns || 0);
    return "rank " + r.rank + " · " + off;
  }

  function layout() {
    rows = [];
    laneY = {};
    rankY = {};
    let y = AXIS_H;
    const hasPython = data.lanes.some((l) => l.row === "py");
    $("tl-python-label").hidden = !hasPython;
    const place = (row, rank) => {
      rows.push(row);
      if (rank !== undefined && rank !== null) {
        const r = rankY[rank] || (rankY[rank] = { y0: y, y1: y });
        r.y1 = y + row.h;
      }
      y += row.h;
    };
    const counterRows = (rank, level) => {
      for (const device of Object.keys(data.busy)) {
        const [owner, gpu] = device.includes("/") ? device.split("/") : [null, device];
        if (rank !== null && Number(owner) !== rank) continue;
        place({ y: y, h: COUNTER_H, counter: "busy", device: device, level: level, label: "GPU " + gpu + " busy %" }, rank);
      }
      for (const c of data.counters) {
        if (rank !== null && c.rank !== rank) continue;
        const label = (rank !== null ? "GPU " + c.device_id + " memory" : c.label) + " (≤ " + fmtBytes(c.max_bytes) + ")";
        place({ y: y, h: COUNTER_H, counter: "memory", c: c, level: level, label: label }, rank);
      }
    };
    const items = Groups.rows(data, { collapsed: collapsed, hostRanks: hostRanks, showPython: showPython, rankLabel: rankLabel });
    for (const it of items) {
      if (it.kind === "counters") { counterRows(it.rank, it.rank === null ? 0 : 1); continue; }
      if (it.kind === "header") {
        place({ y: y, h: HEAD_H, header: it.key, label: it.label, level: it.level, open: it.open, host: it.host ? it.rank : undefined, rankGroup: !!it.rankGroup }, it.rank);
        continue;
      }
      const lane = it.lane;
      const h = lane.thread ? ROW_H : GPU_H;
      laneY[lane.id] = { y: y, h: h };
      place({ y: y, h: h, lane: lane, level: it.level }, lane.rank);
    }
    canvas.dataset.rows = String(rows.length);
    canvas.dataset.counters = rows.filter((r) => r.counter).map((r) => r.counter + ":" + (r.device || r.c.device_id)).join(",");
    canvas.dataset.lanes = JSON.stringify(Object.entries(laneY).map(([id, r]) => [Number(id), r.y, r.h]));
    canvas.dataset.groups = JSON.stringify(rows.filter((r) => r.header).map((r) => [r.header, r.open, r.y]));
    if (aligned) {
      const shown = {};
      for (const r of aligned.ranks) shown[r.rank] = 0;
      for (const r of rows) if (r.lane) shown[r.lane.rank] += 1;
      canvas.dataset.rankLanes = JSON.stringify(shown);
    }
  }

  // A header row's click: a group opens or closes; a rank's host group is fetched when opened.
  function toggle(row) {
    if (row.host !== undefined) {
      if (hostRanks.has(row.host)) hostRanks.delete(row.host);
      else {
        // the server sends a few ranks' host lanes at once: the longest-open group closes
        if (hostRanks.size >= maxHostRanks) hostRanks.delete(hostRanks.values().next().value);
        hostRanks.add(row.host);
      }
      layout();
      schedule();
      return;
    }
    if (collapsed.has(row.header)) collapsed.delete(row.header); else collapsed.add(row.header);
    layout();
    draw();
    writeUrl();
  }

  function contentHeight() { return rows.length ? rows[rows.length - 1].y + rows[rows.length - 1].h + 4 : AXIS_H + 24; }

  // Setting a canvas's size reallocates its pixels even when the size is the same: only
  // on a change (the draw clears what is there anyway).
  function resize() {
    const ratio = window.devicePixelRatio || 1;
    const cssH = contentHeight();
    const w = Math.round(box.clientWidth * ratio);
    const h = Math.round(cssH * ratio);
    if (canvas.style.height !== cssH + "px") canvas.style.height = cssH + "px";
    if (canvas.width !== w || canvas.height !== h) {
      canvas.width = w;
      canvas.height = h;
    }
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  }

  function xOf(ns) { return LABEL_W + ((ns - view.start) / (view.end - view.start)) * plotWidth(); }

  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  function drawAxis(width, height) {
    ctx.fillStyle = "#f0f2f6";
    ctx.fillRect(0, 0, width, AXIS_H);
    const step = niceStep((view.end - view.start) / 8);
    ctx.fillStyle = "#5b6475";
    ctx.strokeStyle = "#e1e4ea";
    ctx.font = "11px system-ui, sans-serif";
    for (let t = Math.ceil(view.start / step) * step; t <= view.end; t += step) {
      const x = xOf(t);
      ctx.beginPath();
      ctx.moveTo(x + 0.5, AXIS_H - 6);
      ctx.lineTo(x + 0.5, height);
      ctx.stroke();
      ctx.fillText(fmtTick(t, step), x + 3, 14);
    }
  }

  function matches(name) { return search && search.names && search.names.has(name); }

  function drawLane(lane, y, h, width, scale) {
    if (lane.buckets) {
      for (const [px, , busy, nameIx] of lane.buckets) {
        const x = xOf(data.start_ns + px * data.ns_per_px);
        const w = Math.max(1, data.ns_per_px * scale);
        ctx.fillStyle = fillStyle(hueAt(nameIx, lane.group), busy);
        ctx.fillRect(x, y + 1, w, h - 2);
      }
    }
    ctx.font = (h < GPU_H ? "10px" : "11px") + " system-ui, sans-serif";
    for (const ev of lane.events) {
      const [s, e, nameIx] = ev;
      const x = xOf(s);
      const w = Math.max(1, (e - s) * scale);
      if (x > width || x + w < LABEL_W) continue;
      const name = data.names[nameIx];
      ctx.fillStyle = fillStyle(hueAt(nameIx, lane.group), null);
      ctx.fillRect(x, y + 1, w, h - 2);
      if (matches(name)) {
        ctx.strokeStyle = "#f5c400";
        ctx.lineWidth = 2;
        ctx.strokeRect(x, y + 1, Math.max(2, w), h - 2);
        ctx.lineWidth = 1;
      }
      if (w > 40) {
        ctx.fillStyle = "#fff";
        const left = Math.max(x, LABEL_W) + 3;
        ctx.save();
        ctx.beginPath();
        ctx.rect(left, y, Math.min(x + w, width) - left - 2, h);
        ctx.clip();
        ctx.fillText(name, left, y + h - 4);
        ctx.restore();
      }
    }
  }

  function center(laneId, s) {
    const r = laneY[laneId];
    return r ? { x: xOf(s), y: r.y + r.h / 2 } : null;
  }

  function drawFlows() {
    if (!selected || !detail || detail.ref !== selected.ref || detail.kind !== selected.kind) return 0;
    const from = center(selected.lane, selected.start_ns);
    if (!from) return 0;
    let n = 0;
    ctx.strokeStyle = "rgba(112, 48, 160, 0.9)";
    ctx.fillStyle = "rgba(112, 48, 160, 0.9)";
    ctx.lineWidth = 1.5;
    for (const f of detail.flows) {
      const to = center(f.lane, f.start_ns);
      if (!to) continue;
      n++;
      const midY = (from.y + to.y) / 2;
      ctx.beginPath();
      ctx.moveTo(from.x, from.y);
      ctx.bezierCurveTo(from.x, midY, to.x, midY, to.x, to.y);
      ctx.stroke();
      const dir = to.y >= from.y ? -1 : 1;
      ctx.beginPath();
      ctx.moveTo(to.x, to.y);
      ctx.lineTo(to.x - 4, to.y + dir * 7);
      ctx.lineTo(to.x + 4, to.y + dir * 7);
      ctx.closePath();
      ctx.fill();
    }
    ctx.lineWidth = 1;
    return n;
  }

  // Each redraw's time is kept on the canvas (benchmarks/bench_timeline_browser.py reads
  // it, with dataMs and detailsMs): the targets are a frame (16 ms) and 150 ms.
  function draw() {
    const t = performance.now();
    drawFrame();
    canvas.dataset.drawMs = (performance.now() - t).toFixed(2);
  }

  function drawFrame() {
    refreshMatchNames();
    resize();
    const width = box.clientWidth;
    const height = canvas.height / (window.devicePixelRatio || 1);
    ctx.clearRect(0, 0, width, height);
    drawAxis(width, height);
    if (!data) return;
    const scale = plotWidth() / (view.end - view.start);
    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL_W, AXIS_H, plotWidth(), height - AXIS_H);
    ctx.clip();
    rows.forEach((row, i) => {
      if (row.header) {
        ctx.fillStyle = row.rankGroup ? "#dbe2ee" : "#e9edf4";
        ctx.fillRect(LABEL_W, row.y, plotWidth(), row.h);
        return;
      }
      if (row.counter) { drawCounter(row); return; }
      if (i % 2) { ctx.fillStyle = "#f7f8fa"; ctx.fillRect(LABEL_W, row.y, plotWidth(), row.h); }
      drawLane(row.lane, row.y, row.h, width, scale);
    });
    if (finding) {
      const drawn = { own: new Set(), wait: new Set() };
      finding.ranges.forEach((r, i) => {
        const [s, e, rank, role] = r;
        const x = xOf(s);
        const w = Math.max(2, (e - s) * scale);
        if (x > width || x + w < LABEL_W) return;
        // on an aligned view a range lies on its rank's rows only, styled by whose it is
        let y0 = AXIS_H, y1 = height;
        if (rank !== undefined) {
          const ry = rankY[rank];
          if (!ry) return;
          y0 = ry.y0;
          y1 = ry.y1;
        }
        const current = i === finding.i;
        const wait = role === "wait";
        if (rank !== undefined) drawn[wait ? "wait" : "own"].add(rank);
        if (wait) {
          ctx.fillStyle = current ? "rgba(96, 64, 200, 0.30)" : "rgba(96, 64, 200, 0.14)";
          ctx.strokeStyle = current ? "rgba(70, 40, 170, 1)" : "rgba(96, 64, 200, 0.6)";
        } else {
          ctx.fillStyle = current ? "rgba(255, 153, 0, 0.30)" : "rgba(255, 153, 0, 0.14)";
          ctx.strokeStyle = current ? "rgba(200, 90, 0, 1)" : "rgba(230, 110, 0, 0.6)";
        }
        ctx.fillRect(x, y0, w, y1 - y0);
        if (wait) ctx.setLineDash([4, 3]);
        ctx.strokeRect(x + 0.5, y0 + 0.5, w - 1, y1 - y0 - 1);
        ctx.setLineDash([]);
      });
      canvas.dataset.highlightRanks = JSON.stringify({
        own: Array.from(drawn.own).sort((a, b) => a - b),
        wait: Array.from(drawn.wait).sort((a, b) => a - b),
      });
    } else canvas.dataset.highlightRanks = "";
    if (range) {
      const x = xOf(range.start);
      const w = Math.max(1, (range.end - range.start) * scale);
      ctx.fillStyle = "rgba(47, 111, 219, 0.16)";
      ctx.fillRect(x, AXIS_H, w, height - AXIS_H);
      ctx.strokeStyle = "rgba(47, 111, 219, 0.9)";
      ctx.strokeRect(x + 0.5, AXIS_H + 0.5, w - 1, height - AXIS_H - 1);
    }
    if (selected && laneY[selected.lane]) {
      const r = laneY[selected.lane];
      const x = xOf(selected.start_ns);
      const w = Math.max(3, (selected.end_ns - selected.start_ns) * scale);
      ctx.strokeStyle = "#111";
      ctx.lineWidth = 2;
      ctx.strokeRect(x, r.y + 0.5, w, r.h - 1);
      ctx.lineWidth = 1;
    }
    canvas.dataset.flows = String(drawFlows());
    ctx.restore();
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, AXIS_H, LABEL_W, height - AXIS_H);
    for (const row of rows) {
      const indent = 10 * (row.level || 0);
      if (row.header) {
        ctx.fillStyle = row.rankGroup ? "#dbe2ee" : "#e9edf4";
        ctx.fillRect(0, row.y, LABEL_W, row.h);
        ctx.fillStyle = "#1d2330";
        ctx.font = (row.rankGroup ? "700" : "600") + " 12px system-ui, sans-serif";
        ctx.fillText((row.open ? "▾ " : "▸ ") + row.label.slice(0, 28 - indent / 8), 6 + indent, row.y + 13);
      } else if (row.counter) {
        ctx.fillStyle = "#39414f";
        ctx.font = "11px system-ui, sans-serif";
        ctx.fillText(row.label.slice(0, 34 - indent / 6), 8 + indent, row.y + row.h - 8);
      } else {
        ctx.fillStyle = "#39414f";
        ctx.font = (row.lane.thread ? "11px" : "12px") + " system-ui, sans-serif";
        ctx.fillText(row.lane.label.slice(0, 30 - indent / 6), 8 + indent, row.y + row.h - 5);
      }
    }
    ctx.strokeStyle = "#d5d9e0";
    ctx.beginPath();
    ctx.moveTo(LABEL_W + 0.5, 0);
    ctx.lineTo(LABEL_W + 0.5, height);
    ctx.stroke();
  }

  // --- hit testing ---
  function nsAt(clientX) {
    const r = canvas.getBoundingClientRect();
    return view.start + ((clientX - r.left - LABEL_W) / plotWidth()) * (view.end - view.start);
  }

  function rowAt(clientY) {
    const y = clientY - canvas.getBoundingClientRect().top;
    return rows.find((row) => y >= row.y && y < row.y + row.h) || null;
  }

  function eventAt(e) {
    const row = rowAt(e.clientY);
    if (!row || row.header || row.counter || !data) return null;
    const t = nsAt(e.clientX);
    const slack = (2 * (view.end - view.start)) / plotWidth();
    let best = null;
    for (const ev of row.lane.events) {
      if (ev[0] - slack <= t && t <= ev[1] + slack) {
        const exact = ev[0] <= t && t <= ev[1];
        if (!best || (exact && !best.exact)) best = { ev: ev, exact: exact };
        if (exact) break;
      }
    }
    if (!best) return null;
    const [s, en, nameIx, kindIx, ref] = best.ev;
    return { lane: row.lane.id, start_ns: s, end_ns: en, name: data.names[nameIx], kind: data.kinds[kindIx], ref: ref, laneLabel: row.lane.label, rank: row.lane.rank };
  }

  // --- selection and the details panel ---
  function el(tag, text, cls) {
    const n = document.createElement(tag);
    if (text !== undefined && text !== null) n.textContent = text;
    if (cls) n.className = cls;
    return n;
  }

  function argText(key, v) {
    if (Array.isArray(v)) return "(" + v.map((x) => (x === null ? "?" : x)).join(", ") + ")";
    if (typeof v === "number" && /bytes/.test(key)) return fmtBytes(v);
    if (typeof v === "number") return v.toLocaleString("en-US");
    return String(v);
  }

  function findingsOf(s, e, rank) {
    const out = [];
    for (const [id, ranges] of Object.entries(page.highlights || {})) {
      if (ranges.some((r) => r[0] < e && r[1] > s && (r.length < 3 || r[2] === rank))) out.push(id);
    }
    return out;
  }

  // An event's details from its own rank's clock and lanes onto the aligned view's.
  function onAligned(ev, rank) {
    const shift = rankClock[rank].shift_ns;
    const out = Object.assign({}, ev, { start_ns: ev.start_ns - shift, end_ns: ev.end_ns - shift, rank: rank });
    if (ev.lane !== null && ev.lane !== undefined) out.lane = rank * LANE_STRIDE + ev.lane;
    if (ev.stack) out.stack = ev.stack.map((x) => onAligned(x, rank));
    if (ev.flows) out.flows = ev.flows.map((x) => onAligned(x, rank));
    return out;
  }

  function eventLink(ev, relation) {
    const li = el("li");
    const a = el("button", ev.name, "linklike");
    a.type = "button";
    a.addEventListener("click", () => selectEvent(ev, true));
    if (relation) li.appendChild(el("span", relation + ": ", "muted"));
    li.appendChild(a);
    li.appendChild(el("span", " " + fmt(ev.end_ns - ev.start_ns) + " at " + fmt(ev.start_ns), "muted num"));
    return li;
  }

  function showDetails(d) {
    details.replaceChildren();
    const head = el("div", null, "tl-details-head");
    head.appendChild(el("h3", d.name || "(unnamed)"));
    const close = el("button", "×", "tl-close");
    close.type = "button";
    close.title = "close (Escape)";
    close.addEventListener("click", clearSelection);
    head.appendChild(close);
    details.appendChild(head);
    const dl = el("dl", null, "tl-args");
    const add = (k, v) => { dl.appendChild(el("dt", k)); dl.appendChild(el("dd", v, "num")); };
    if (aligned) add("rank", String(d.rank));
    add("kind", d.kind);
    add("start", fmt(d.start_ns));
    add("duration", fmt(d.dur_ns));
    for (const [k, v] of Object.entries(d.args)) add(k.replace(/_/g, " "), argText(k, v));
    details.appendChild(dl);
    if (d.stack.length) {
      details.appendChild(el("h4", d.kind === "kernel" || d.kind === "memcpy" || d.kind === "memset" ? "Launched inside" : "Stack"));
      const ul = el("ul", null, "tl-stack");
      d.stack.forEach((s) => ul.appendChild(eventLink(s)));
      details.appendChild(ul);
    }
    if (d.flows.length) {
      details.appendChild(el("h4", "Flows"));
      const ul = el("ul", null, "tl-flows");
      d.flows.forEach((f) => ul.appendChild(eventLink(f, f.relation)));
      details.appendChild(ul);
    }
    const fs = findingsOf(d.start_ns, d.end_ns, d.rank);
    if (fs.length) {
      details.appendChild(el("h4", "Findings"));
      const ul = el("ul", null, "tl-findings");
      fs.forEach((id) => {
        const li = el("li");
        const b = el("button", (findings[id] || {}).title || id, "linklike");
        b.type = "button";
        b.addEventListener("click", () => selectFinding(id, 0, true));
        li.appendChild(b);
        ul.appendChild(li);
      });
      details.appendChild(ul);
    }
    details.hidden = false;
  }

  function selectEvent(ev, reveal) {
    selected = { kind: ev.kind, ref: ev.ref, lane: ev.lane, start_ns: ev.start_ns, end_ns: ev.end_ns, name: ev.name, rank: ev.rank };
    detail = null;
    if (reveal && (ev.start_ns > view.end || ev.end_ns < view.start)) {
      const w = Math.max(view.end - view.start, (ev.end_ns - ev.start_ns) * 1.2);
      view.start = (ev.start_ns + ev.end_ns) / 2 - w / 2;
      view.end = view.start + w;
    }
    schedule();
    const t = performance.now();
    const rank = aligned ? ev.rank : undefined;
    getJson(api + "/event?kind=" + encodeURIComponent(ev.kind) + "&ref=" + ev.ref, undefined, rank)
      .then((answer) => {
        const d = aligned ? onAligned(answer, rank) : answer;
        if (!selected || selected.ref !== d.ref || selected.kind !== d.kind || selected.rank !== d.rank) return;
        detail = d;
        selected.lane = d.lane;
        selected.start_ns = d.start_ns;
        selected.end_ns = d.end_ns;
        canvas.dataset.detailsMs = String(Math.round(performance.now() - t));
        showDetails(d);
        draw();
      })
      .catch((err) => { details.hidden = false; details.textContent = "details: " + err.message; });
  }

  function clearSelection() {
    selected = null;
    detail = null;
    range = null;
    details.hidden = true;
    rangeLabel.textContent = "";
    schedule();
  }

  function zoomTo(s, e) {
    const v = padded(s, e, 0.1);
    // whole nanoseconds, as the address carries them: the view a shared link opens is
    // this one, not one a rounding away
    view.start = Math.floor(v.start);
    view.end = Math.ceil(v.end);
    schedule();
  }

  function showRange() {
    const r = { start: range.start, end: range.end };
    rangeLabel.textContent = "selected " + fmt(r.end - r.start) + " …";
    getJson(api + "/range?start_ns=" + Math.max(0, Math.floor(r.start)) + "&end_ns=" + Math.ceil(r.end))
      .then((d) => {
        if (!range || range.start !== r.start || range.end !== r.end) return;
        const named = d.devices.map((x) => (x.rank !== undefined ? "rank " + x.rank + " " : "") + "GPU " + x.device_id + " busy " + x.busy_pct.toFixed(1) + "%");
        const busy = named.slice(0, 8).join(", ") + (named.length > 8 ? ", …" : "");
        rangeLabel.textContent = "selected " + fmt(d.length_ns) + " · " + d.kernels.toLocaleString("en-US") +
          " kernels, " + fmt(d.kernel_ns) + " kernel time" + (busy ? " · " + busy : "");
        rangeLabel.dataset.kernelNs = String(d.kernel_ns);
      })
      .catch((err) => { rangeLabel.textContent = "selection: " + err.message; });
  }

  // --- zoom and pan ---
  function zoom(factor, centerNs) {
    const c = centerNs === undefined ? (view.start + view.end) / 2 : centerNs;
    const w = Math.min(span, Math.max(MIN_WINDOW_NS, (view.end - view.start) * factor));
    const frac = (c - view.start) / (view.end - view.start);
    view.start = c - frac * w;
    view.end = view.start + w;
    schedule();
  }

  function pan(fraction) {
    const d = (view.end - view.start) * fraction;
    view.start += d;
    view.end += d;
    schedule();
  }

  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    // A horizontal trackpad swipe (or shift + wheel) pans; vertical scroll and pinch zoom.
    const dx = e.shiftKey && !e.deltaX ? e.deltaY : e.deltaX;
    if (Math.abs(dx) > Math.abs(e.deltaY) || (e.shiftKey && dx)) {
      pan(dx / plotWidth());
      return;
    }
    if (!e.deltaY) return;
    zoom(Math.min(2, Math.max(0.5, Math.exp(e.deltaY * 0.002))), nsAt(e.clientX));
  }, { passive: false });

  let drag = null;
  canvas.addEventListener("pointerdown", (e) => {
    box.focus({ preventScroll: true });
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    if (x < LABEL_W) {
      const row = rowAt(e.clientY);
      if (row && row.header) toggle(row);
      return;
    }
    drag = { x: e.clientX, t: nsAt(e.clientX), start: view.start, end: view.end, pan: y < AXIS_H, moved: false };
    canvas.setPointerCapture(e.pointerId);
    if (drag.pan) canvas.classList.add("dragging");
  });
  canvas.addEventListener("pointermove", (e) => {
    if (!drag) { showTooltip(e); return; }
    if (Math.abs(e.clientX - drag.x) > 3) drag.moved = true;
    if (!drag.moved) return;
    if (drag.pan) {
      const dns = ((e.clientX - drag.x) / plotWidth()) * (drag.end - drag.start);
      view.start = drag.start - dns;
      view.end = drag.end - dns;
      schedule();
    } else {
      const t = Math.min(span, Math.max(0, nsAt(e.clientX)));
      range = { start: Math.min(drag.t, t), end: Math.max(drag.t, t) };
      rangeLabel.textContent = "selected " + fmt(range.end - range.start);
      draw();
    }
  });
  canvas.addEventListener("pointerup", (e) => {
    const d = drag;
    drag = null;
    canvas.classList.remove("dragging");
    if (!d || d.pan) return;
    if (d.moved && range) { showRange(); return; }
    const ev = eventAt(e);
    if (ev) selectEvent(ev, false);
  });
  canvas.addEventListener("pointercancel", () => { drag = null; canvas.classList.remove("dragging"); });
  canvas.addEventListener("pointerleave", () => { tooltip.hidden = true; });
  canvas.addEventListener("dblclick", (e) => {
    const ev = eventAt(e);
    if (ev) zoomTo(ev.start_ns, ev.end_ns);
  });

  document.addEventListener("keydown", (e) => {
    const t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) return;
    const focused = document.activeElement === box;
    const k = e.key;
    let done = true;
    if (k === "w" || k === "W" || k === "+" || k === "=" || (focused && k === "ArrowUp")) zoom(0.7);
    else if (k === "s" || k === "S" || k === "-" || k === "_" || (focused && k === "ArrowDown")) zoom(1 / 0.7);
    else if (k === "a" || k === "A" || k === "ArrowLeft") pan(-0.2);
    else if (k === "d" || k === "D" || k === "ArrowRight") pan(0.2);
    else if (k === "Escape") { clearSelection(); if (finding) selectFinding(null); }
    else done = false;
    if (done) e.preventDefault();
  });

  function showTooltip(e) {
    if (!data) return;
    const r = canvas.getBoundingClientRect();
    const row = rowAt(e.clientY);
    let text = null;
    if (row && row.counter && e.clientX - r.left > LABEL_W) {
      const px = Math.floor((nsAt(e.clientX) - data.start_ns) / data.ns_per_px);
      if (row.counter === "busy") {
        const v = data.busy[row.device][px];
        const [owner, gpu] = row.device.includes("/") ? row.device.split("/") : [null, row.device];
        if (v !== undefined) text = (owner !== null ? "rank " + owner + " · " : "") + "GPU " + gpu + " busy " + Math.round(100 * v) + "% at " + fmt(nsAt(e.clientX));
      } else {
        const p = row.c.points.filter((q) => q[0] <= px).pop();
        if (p) text = row.c.label + "\nallocated " + fmtBytes(p[1]) + ", reserved " + fmtBytes(p[2]);
      }
      if (text) {
        tooltip.textContent = text;
        tooltip.hidden = false;
        tooltip.style.left = Math.max(0, Math.min(e.clientX - r.left + 12, box.clientWidth - tooltip.offsetWidth - 4)) + "px";
        tooltip.style.top = (e.clientY - r.top + 14) + "px";
        return;
      }
    }
    if (row && !row.header && !row.counter && e.clientX - r.left > LABEL_W) {
      const ev = eventAt(e);
      if (ev) text = ev.name + "\n" + fmt(ev.end_ns - ev.start_ns) + " at " + fmt(ev.start_ns);
      else if (row.lane.buckets) {
        const px = Math.floor((nsAt(e.clientX) - data.start_ns) / data.ns_per_px);
        const b = row.lane.buckets.find((x) => x[0] === px);
        if (b) text = b[1] + " events, busy " + Math.round(b[2] * 100) + "%\nlongest: " + data.names[b[3]];
      }
    }
    if (!text) { tooltip.hidden = true; return; }
    tooltip.textContent = (row.lane.rank !== undefined ? "rank " + row.lane.rank + " · " : "") +
      (row.lane.thread ? row.lane.thread_label + " · " : "") + row.lane.label + "\n" + text;
    tooltip.hidden = false;
    // Placed after it is shown, so its width is known: it stays inside the timeline.
    const left = Math.max(0, Math.min(e.clientX - r.left + 12, box.clientWidth - tooltip.offsetWidth - 4));
    tooltip.style.left = left + "px";
    tooltip.style.top = (e.clientY - r.top + 14) + "px";
  }

  $("tl-zoom-in").addEventListener("click", () => zoom(0.5));
  $("tl-zoom-out").addEventListener("click", () => zoom(2));
  $("tl-reset").addEventListener("click", () => { view.start = 0; view.end = span; schedule(); });
  $("tl-python").addEventListener("change", (e) => { showPython = e.target.checked; if (data) { layout(); draw(); } });

  // --- search by name ---
  const searchForm = $("tl-search-form");
  const searchCount = $("tl-search-count");
  function stepSearch(delta) {
    if (!search || !search.matches.length) return;
    search.i = (search.i + delta + search.matches.length) % search.matches.length;
    const [s, e, lane, kind, ref, rank] = search.matches[search.i];
    searchCount.textContent = (search.i + 1) + " of " + search.count.toLocaleString("en-US");
    searchCount.dataset.count = String(search.count);
    selectEvent({ kind: kind, ref: ref, lane: lane, start_ns: s, end_ns: e, name: search.query, rank: rank }, true);
  }
  searchForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = $("tl-search").value.trim();
    const regex = $("tl-regex").checked;
    if (!q) { search = null; searchCount.textContent = ""; draw(); return; }
    getJson(api + "/search?q=" + encodeURIComponent(q) + "&regex=" + regex)
      .then((d) => {
        let test;
        try { test = regex ? ((n) => new RegExp(q).test(n)) : ((n) => n.toLowerCase().includes(q.toLowerCase())); }
        catch (err) { test = () => false; }
        search = { query: q, regex: regex, count: d.count, matches: d.matches, i: -1, test: test, names: null };
        refreshMatchNames();
        searchCount.dataset.count = String(d.count);
        if (!d.count) { searchCount.textContent = "no match"; draw(); return; }
        stepSearch(1);
      })
      .catch((err) => { searchCount.textContent = err.message; searchCount.dataset.count = "error"; });
  });
  $("tl-search-next").addEventListener("click", () => stepSearch(1));
  $("tl-search-prev").addEventListener("click", () => stepSearch(-1));
  function refreshMatchNames() {
    if (!search || !data) return;
    search.names = new Set(data.names.filter((n) => search.test(n)));
  }

  // --- findings: highlight all ranges, step through them ---
  const fnav = $("tl-finding-nav");
  function reRegex(text) { return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  function selectFinding(id, i, zoomIn) {
    document.querySelectorAll(".finding.selected").forEach((x) => x.classList.remove("selected"));
    // the card opens whether or not this timeline holds its ranges (a job's page shows one
    // rank: another rank's finding has none here)
    const card = id ? document.querySelector(".finding[data-finding-id='" + CSS.escape(id) + "']") : null;
    if (card) card.classList.add("selected");
    if (!id || !(id in (page.highlights || {}))) {
      finding = null;
      fnav.hidden = true;
      schedule();
      return;
    }
    const info = findings[id] || {};
    const ranges = page.highlights[id].slice().sort((a, b) => a[0] - b[0]);
    finding = { id: id, ranges: ranges, i: Math.max(0, i || 0), word: "range", total: ranges.length };
    $("tl-finding-title").textContent = info.title || id;
    if (!ranges.length && info.subject && info.subject.length) {
      // No time ranges: its subject's instances (a hot operator's calls, the kernels
      // named), found by exact name.
      const q = "^(" + info.subject.map(reRegex).join("|") + ")$";
      const mine = finding;
      getJson(api + "/search?regex=true&q=" + encodeURIComponent(q)).then((d) => {
        if (finding !== mine) return;
        // on an aligned view each instance lies on its own rank's rows
        mine.ranges = d.matches.map((m) => (m.length > 5 ? [m[0], m[1], m[5], "own"] : [m[0], m[1]]));
        mine.word = "instance";
        mine.total = d.count;
        fnav.hidden = !mine.ranges.length;
        if (mine.ranges.length) stepFinding(0, zoomIn); else schedule();
      }).catch(() => { fnav.hidden = true; });
      return;
    }
    fnav.hidden = !ranges.length;
    if (ranges.length) stepFinding(0, zoomIn); else schedule();
  }
  function stepFinding(delta, zoomIn) {
    if (!finding || !finding.ranges.length) return;
    const n = finding.ranges.length;
    finding.i = Math.min(n - 1, (finding.i + delta + n) % n);
    const [, , rank, role] = finding.ranges[finding.i];
    $("tl-finding-pos").textContent = finding.word + " " + (finding.i + 1) + " of " + finding.total.toLocaleString("en-US") +
      (finding.total > n ? " (first " + n.toLocaleString("en-US") + ")" : "") +
      (rank !== undefined ? " · rank " + rank + (role === "wait" ? " waiting" : "") : "");
    canvas.dataset.highlights = String(n);
    if (zoomIn !== false) {
      const [s, e] = finding.ranges[finding.i];
      zoomTo(s, e);
    } else schedule();
  }
  $("tl-finding-prev").addEventListener("click", () => stepFinding(-1));
  $("tl-finding-next").addEventListener("click", () => stepFinding(1));
  $("tl-finding-all").addEventListener("click", () => {
    if (!finding || !finding.ranges.length) return;
    zoomTo(Math.min(...finding.ranges.map((r) => r[0])), Math.max(...finding.ranges.map((r) => r[1])));
  });
  document.querySelectorAll(".finding").forEach((card) => {
    const select = (e) => {
      if (e.target.closest("a")) return;
      selectFinding(card.dataset.findingId, 0, true);
    };
    card.addEventListener("click", select);
    card.addEventListener("keydown", (e) => { if (e.key === "Enter") select(e); });
  });

  window.addEventListener("resize", schedule);
  const initial = readUrl();
  if (initial.finding) {
    const keep = { start: view.start, end: view.end };
    selectFinding(initial.finding, initial.fr - 1, false);
    view.start = keep.start;
    view.end = keep.end;
  }
  const named = initial.event && /^([a-z]+):(\d+)(?:@(\d+))?$/.exec(initial.event);
  if (named && (!aligned || (named[3] !== undefined && Number(named[3]) in rankClock))) {
    const rank = named[3] === undefined ? undefined : Number(named[3]);
    selectEvent({ kind: named[1], ref: Number(named[2]), lane: null, start_ns: 0, end_ns: 0, name: "", rank: rank }, false);
  }
  schedule();
  urlLive = true;
})();
