// Run page timeline: GPU streams, host threads and annotation ranges on a canvas, with
// zoom (wheel, buttons) and pan (drag). Data comes from /api/runs/{id}/timeline at the
// current window and width; the server aggregates dense lanes per pixel, so the browser
// never holds more than about lanes x pixels items. Times are ns since the trace start.
"use strict";
(function () {
  const page = JSON.parse(document.getElementById("page-data").textContent);
  const canvas = document.getElementById("tl-canvas");
  if (!canvas || page.span_ns === undefined) return;
  const box = document.getElementById("timeline");
  const tooltip = document.getElementById("tl-tooltip");
  const windowLabel = document.getElementById("tl-window");
  const ctx = canvas.getContext("2d");

  const LABEL_W = 190, AXIS_H = 22, LANE_H = 20, MIN_WINDOW_NS = 1000;
  const GROUP_COLORS = { gpu: 210, thread: 140, range: 28 };
  const span = Math.max(1, page.span_ns);
  // A restricted page opens on the part analysed (the rest of the trace stays a zoom away).
  const view = page.view_ns ? { start: page.view_ns[0], end: page.view_ns[1] } : { start: 0, end: span };
  let data = null;          // last answer from the API
  let highlights = [];      // [[start, end], ...] of the selected finding
  let pending = null;       // AbortController of the request in flight
  let timer = null;
  let loads = 0;

  function fmt(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toPrecision(4) + " s";
    if (a >= 1e6) return (ns / 1e6).toPrecision(4) + " ms";
    if (a >= 1e3) return (ns / 1e3).toPrecision(4) + " µs";
    return Math.round(ns) + " ns";
  }

  function plotWidth() { return Math.max(50, box.clientWidth - LABEL_W); }

  function hue(name, group) {
    let h = 0;
    for (let i = 0; i < name.length && i < 64; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
    const base = GROUP_COLORS[group] || 260;
    return (base + (Math.abs(h) % 50) - 25 + 360) % 360;
  }

  function clampView() {
    let w = Math.max(MIN_WINDOW_NS, view.end - view.start);
    if (w > span) w = span;
    if (view.start < 0) view.start = 0;
    if (view.start + w > span) view.start = span - w;
    view.end = view.start + w;
  }

  function publishState() {
    canvas.dataset.startNs = String(Math.round(view.start));
    canvas.dataset.endNs = String(Math.round(view.end));
    canvas.dataset.loads = String(loads);
    canvas.dataset.highlights = String(highlights.length);
    windowLabel.textContent = fmt(view.start) + " – " + fmt(view.end) + " (" + fmt(view.end - view.start) + ")";
  }

  function schedule() {
    clampView();
    publishState();
    draw();
    clearTimeout(timer);
    timer = setTimeout(load, 60);
  }

  function load() {
    if (pending) pending.abort();
    pending = new AbortController();
    const w = plotWidth();
    const url = "/api/runs/" + encodeURIComponent(page.run_id) + "/timeline?start_ns=" +
      Math.floor(view.start) + "&end_ns=" + Math.ceil(view.end) + "&width_px=" + Math.round(w);
    fetch(url, { signal: pending.signal, headers: { Accept: "application/json" } })
      .then((r) => r.json())
      .then((d) => {
        if (d.error) throw new Error(d.error);
        data = d;
        loads += 1;
        publishState();
        draw();
      })
      .catch((err) => { if (err.name !== "AbortError") windowLabel.textContent = "timeline: " + err.message; });
  }

  function resize() {
    const lanes = data ? data.lanes.length : 1;
    const ratio = window.devicePixelRatio || 1;
    const cssH = AXIS_H + Math.max(1, lanes) * LANE_H + 4;
    canvas.style.height = cssH + "px";
    canvas.width = Math.round(box.clientWidth * ratio);
    canvas.height = Math.round(cssH * ratio);
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  }

  function xOf(ns) { return LABEL_W + ((ns - view.start) / (view.end - view.start)) * plotWidth(); }

  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  function drawAxis(width) {
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
      ctx.lineTo(x + 0.5, canvas.height);
      ctx.stroke();
      ctx.fillText(fmt(t), x + 3, 14);
    }
  }

  function draw() {
    resize();
    const width = box.clientWidth;
    const height = canvas.height / (window.devicePixelRatio || 1);
    ctx.clearRect(0, 0, width, height);
    drawAxis(width);
    if (!data) return;
    const scale = plotWidth() / (view.end - view.start);
    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL_W, AXIS_H, plotWidth(), height - AXIS_H);
    ctx.clip();
    data.lanes.forEach((lane, i) => {
      const y = AXIS_H + i * LANE_H;
      if (i % 2) { ctx.fillStyle = "#f7f8fa"; ctx.fillRect(LABEL_W, y, plotWidth(), LANE_H); }
      if (lane.buckets) {
        for (const [px, , busy, nameIx] of lane.buckets) {
          const s = data.start_ns + px * data.ns_per_px;
          const x = xOf(s);
          const w = Math.max(1, data.ns_per_px * scale);
          ctx.fillStyle = "hsla(" + hue(data.names[nameIx], lane.group) + ",62%,48%," + (0.25 + 0.75 * busy).toFixed(3) + ")";
          ctx.fillRect(x, y + 2, w, LANE_H - 4);
        }
      }
      for (const [s, e, nameIx] of lane.events) {
        const x = xOf(s);
        const w = Math.max(1, (e - s) * scale);
        if (x > width || x + w < LABEL_W) continue;
        const name = data.names[nameIx];
        ctx.fillStyle = "hsl(" + hue(name, lane.group) + ",60%,52%)";
        ctx.fillRect(x, y + 2, w, LANE_H - 4);
        if (w > 40) {
          ctx.fillStyle = "#fff";
          ctx.font = "11px system-ui, sans-serif";
          const left = Math.max(x, LABEL_W) + 3;
          ctx.save();
          ctx.beginPath();
          ctx.rect(left, y, Math.min(x + w, width) - left - 2, LANE_H);
          ctx.clip();
          ctx.fillText(name, left, y + 14);
          ctx.restore();
        }
      }
    });
    for (const [s, e] of highlights) {
      const x = xOf(s);
      const w = Math.max(2, (e - s) * scale);
      ctx.fillStyle = "rgba(255, 153, 0, 0.22)";
      ctx.fillRect(x, AXIS_H, w, height - AXIS_H);
      ctx.strokeStyle = "rgba(230, 110, 0, 0.95)";
      ctx.strokeRect(x + 0.5, AXIS_H + 0.5, w - 1, height - AXIS_H - 1);
    }
    ctx.restore();
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, AXIS_H, LABEL_W, height - AXIS_H);
    ctx.font = "12px system-ui, sans-serif";
    data.lanes.forEach((lane, i) => {
      ctx.fillStyle = "#39414f";
      ctx.fillText(lane.label.slice(0, 30), 8, AXIS_H + i * LANE_H + 14);
    });
    ctx.strokeStyle = "#d5d9e0";
    ctx.beginPath();
    ctx.moveTo(LABEL_W + 0.5, 0);
    ctx.lineTo(LABEL_W + 0.5, height);
    ctx.stroke();
  }

  function nsAt(clientX) {
    const r = canvas.getBoundingClientRect();
    const x = clientX - r.left - LABEL_W;
    return view.start + (x / plotWidth()) * (view.end - view.start);
  }

  function zoom(factor, centerNs) {
    const c = centerNs === undefined ? (view.start + view.end) / 2 : centerNs;
    const w = Math.min(span, Math.max(MIN_WINDOW_NS, (view.end - view.start) * factor));
    const frac = (c - view.start) / (view.end - view.start);
    view.start = c - frac * w;
    view.end = view.start + w;
    schedule();
  }

  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    zoom(e.deltaY > 0 ? 1.25 : 0.8, nsAt(e.clientX));
  }, { passive: false });

  let drag = null;
  canvas.addEventListener("pointerdown", (e) => {
    drag = { x: e.clientX, start: view.start, end: view.end };
    canvas.setPointerCapture(e.pointerId);
    canvas.classList.add("dragging");
  });
  canvas.addEventListener("pointermove", (e) => {
    if (drag) {
      const dns = ((e.clientX - drag.x) / plotWidth()) * (drag.end - drag.start);
      view.start = drag.start - dns;
      view.end = drag.end - dns;
      schedule();
      return;
    }
    showTooltip(e);
  });
  const endDrag = () => { drag = null; canvas.classList.remove("dragging"); };
  canvas.addEventListener("pointerup", endDrag);
  canvas.addEventListener("pointercancel", endDrag);
  canvas.addEventListener("pointerleave", () => { tooltip.hidden = true; });

  function showTooltip(e) {
    if (!data) return;
    const r = canvas.getBoundingClientRect();
    const lane = data.lanes[Math.floor((e.clientY - r.top - AXIS_H) / LANE_H)];
    const t = nsAt(e.clientX);
    const slack = (2 * (view.end - view.start)) / plotWidth();
    let text = null;
    if (lane && e.clientX - r.left > LABEL_W) {
      for (const [s, en, nameIx] of lane.events) {
        if (s - slack <= t && t <= en + slack) {
          text = data.names[nameIx] + "\n" + fmt(en - s) + " at " + fmt(s);
          break;
        }
      }
      if (!text && lane.buckets) {
        const px = Math.floor((t - data.start_ns) / data.ns_per_px);
        for (const [bpx, n, busy, nameIx] of lane.buckets) {
          if (bpx === px) {
            text = n + " events, busy " + Math.round(busy * 100) + "%\nlongest: " + data.names[nameIx];
            break;
          }
        }
      }
    }
    if (!text) { tooltip.hidden = true; return; }
    tooltip.textContent = lane.label + "\n" + text;
    tooltip.style.whiteSpace = "pre-line";
    tooltip.style.left = Math.min(e.clientX - r.left + 12, box.clientWidth - 300) + "px";
    tooltip.style.top = (e.clientY - r.top + 14) + "px";
    tooltip.hidden = false;
  }

  document.getElementById("tl-zoom-in").addEventListener("click", () => zoom(0.5));
  document.getElementById("tl-zoom-out").addEventListener("click", () => zoom(2));
  document.getElementById("tl-reset").addEventListener("click", () => {
    view.start = 0;
    view.end = span;
    schedule();
  });

  // Selecting a finding highlights its time ranges and brings them into view.
  document.querySelectorAll(".finding").forEach((el) => {
    const select = (e) => {
      if (e.target.closest("a")) return;
      document.querySelectorAll(".finding.selected").forEach((x) => x.classList.remove("selected"));
      el.classList.add("selected");
      highlights = page.highlights[el.dataset.findingId] || [];
      if (highlights.length) {
        const lo = Math.min(...highlights.map((h) => h[0]));
        const hi = Math.max(...highlights.map((h) => h[1]));
        const pad = Math.max((hi - lo) * 0.1, MIN_WINDOW_NS);
        view.start = lo - pad;
        view.end = hi + pad;
      }
      schedule();
    };
    el.addEventListener("click", select);
    el.addEventListener("keydown", (e) => { if (e.key === "Enter") select(e); });
  });

  window.addEventListener("resize", schedule);
  schedule();
})();
