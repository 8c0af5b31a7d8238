// Run page: "Open in Perfetto". Opens the Perfetto UI in a new window, fetches the
// enriched trace from this service, waits until the UI answers PING with PONG and posts
// it {perfetto: {buffer, title, fileName, url}} (Perfetto's documented postMessage
// protocol). The trace goes from this browser to the UI; the service sends nothing. The
// window opens on a range with the UI's visStart/visEnd arguments (ns on the trace clock):
// a finding's range, or the timeline's window when the address names one. cfg.ranges are
// the timeline's highlights in the order it steps through them (sorted by start), and
// cfg.t0_ns its origin on the downloaded trace's clock (web/perfetto_link.py), so `fr`
// and `tl` mean here what they mean there.
"use strict";
(function () {
  const node = document.getElementById("perfetto-data");
  if (!node) return;
  const cfg = JSON.parse(node.textContent);
  const status = document.getElementById("perfetto-status");
  const target = new URL(cfg.perfetto_url + "/");
  const PING_MS = 250, GIVE_UP_MS = 60000;
  // Present where the service has API tokens: the trace is read with the one typed here
  // (a link cannot send a header, so the download goes through fetch too).
  const tokenField = document.getElementById("perfetto-token");

  function say(text, state) {
    status.textContent = text;
    status.dataset.state = state;
  }

  // [start, end] as decimal ns strings, padded by a twentieth each side so the range is
  // seen with what surrounds it (BigInt: epoch-scale ns exceed a double's exact range).
  function padded(range) {
    const s = BigInt(range[0]), e = BigInt(range[1]);
    const pad = (e - s) / 20n + 1000n;
    return [String(s - pad), String(e + pad)];
  }

  function findingRange(id) {
    const ranges = cfg.ranges[id] || [];
    if (!ranges.length) return null;
    const q = new URLSearchParams(window.location.search);
    const i = q.get("finding") === id ? Math.max(1, Number(q.get("fr")) || 1) - 1 : 0;
    return ranges[Math.min(i, ranges.length - 1)];
  }

  // What the page shows: the finding stepped through on the timeline, else its window.
  function pageRange() {
    const q = new URLSearchParams(window.location.search);
    const id = q.get("finding");
    if (id && cfg.ranges[id]) return findingRange(id);
    const tl = (q.get("tl") || "").split("_");
    if (tl.length === 2 && tl.every((x) => /^\d+$/.test(x))) {
      const t0 = BigInt(cfg.t0_ns);
      return [String(t0 + BigInt(tl[0])), String(t0 + BigInt(tl[1]))];
    }
    return null;
  }

  // The token the reads need, or null (with the reason said) when one is needed and absent.
  function token() {
    if (!tokenField) return "";
    const value = tokenField.value.trim();
    if (!value) {
      say("This service needs an API token to read the trace: enter it first.", "failed");
      tokenField.focus();
      return null;
    }
    return value;
  }

  // The bytes at `url` read with the token, and the file name the answer gives.
  function fetchWithToken(url, tok) {
    const headers = tok ? { Authorization: "Bearer " + tok } : {};
    return fetch(url, { credentials: "same-origin", headers: headers }).then((r) => {
      if (r.ok) {
        const disposition = r.headers.get("content-disposition") || "";
        const named = /filename="([^"]+)"/.exec(disposition);
        return r.arrayBuffer().then((buffer) => ({ buffer, name: named ? named[1] : null }));
      }
      return r.json().then(
        (body) => { throw new Error(body.error || r.statusText); },
        () => { throw new Error(r.status + " " + r.statusText); });
    });
  }

  function download(tok) {
    return fetchWithToken(cfg.trace_url, tok).then((got) => got.buffer);
  }

  function open(range) {
    const tok = token();
    if (tok === null) return;
    const url = new URL(target);
    if (range) {
      const [s, e] = padded(range);
      url.searchParams.set("visStart", s);
      url.searchParams.set("visEnd", e);
    }
    // Opened at once, inside the click: a window opened after the download would be
    // taken for a pop-up and blocked.
    const handle = window.open(url.toString(), "_blank");
    if (!handle) {
      say("The browser blocked the Perfetto window: allow pop-ups for this site.", "blocked");
      return;
    }
    say("Downloading the trace…", "fetching");
    download(tok)
      .then((buffer) => handOver(handle, buffer))
      .catch((err) => {
        handle.close();
        say("Could not get the trace: " + err.message, "failed");
      });
  }

  function handOver(handle, buffer) {
    say("Waiting for " + target.origin + "…", "waiting");
    let done = false;
    const ping = setInterval(() => {
      if (handle.closed) finish("The Perfetto window was closed.", "failed");
      else handle.postMessage("PING", target.origin);
    }, PING_MS);
    const timer = setTimeout(() => finish(
      "No answer from " + target.origin + ": this browser may not reach it.", "failed"), GIVE_UP_MS);
    function finish(text, state) {
      if (done) return;
      done = true;
      clearInterval(ping);
      clearTimeout(timer);
      window.removeEventListener("message", onMessage);
      say(text, state);
    }
    function onMessage(e) {
      if (done || e.source !== handle || e.origin !== target.origin || e.data !== "PONG") return;
      handle.postMessage({
        perfetto: {
          buffer: buffer,
          title: cfg.title,
          fileName: cfg.file_name,
          url: window.location.href,
        },
      }, target.origin, [buffer]);
      finish("Sent to Perfetto.", "sent");
    }
    window.addEventListener("message", onMessage);
  }

  document.getElementById("open-perfetto").addEventListener("click", () => open(pageRange()));
  document.querySelectorAll(".perfetto-range").forEach((b) => {
    b.addEventListener("click", (e) => {
      // not also a click on the finding's card, which would step the timeline to range 1
      e.stopPropagation();
      open(findingRange(b.dataset.findingId));
    });
  });
  // Links to what needs the token (the enriched trace, the kept originals): a link cannot
  // send a header, so where the service has tokens they are fetched and saved from here.
  if (tokenField) {
    document.querySelectorAll("#enriched-trace, a[data-token-download]").forEach((link) => {
      link.addEventListener("click", (e) => {
        e.preventDefault();
        const tok = token();
        if (tok === null) return;
        say("Downloading…", "fetching");
        fetchWithToken(link.href, tok)
          .then((got) => {
            const a = document.createElement("a");
            a.href = URL.createObjectURL(new Blob([got.buffer]));
            a.download = got.name || link.getAttribute("download") || "download";
            document.body.appendChild(a);
            a.click();
            a.remove();
            setTimeout(() => URL.revokeObjectURL(a.href), 60000);
            say("Downloaded.", "downloaded");
          })
          .catch((err) => say("Could not download: " + err.message, "failed"));
      });
    });
  }
})();
