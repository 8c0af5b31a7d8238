// Upload page: drag-and-drop or pick files, send them with a progress bar, then follow the
// new run's ingestion until it is ready or failed. Several files (a job's ranks) or one
// archive are sent in one request and become one run.
"use strict";
(function () {
  const form = document.getElementById("upload-form");
  if (!form) return;
  const input = document.getElementById("file-input");
  const bar = document.getElementById("upload-progress");
  const status = document.getElementById("upload-status");
  const maxBytes = Number(form.dataset.maxBytes || 0);

  function say(text, isError) {
    status.textContent = text;
    status.classList.toggle("error", Boolean(isError));
  }

  function csrfToken() {
    const m = document.cookie.match(/(?:^|; )tracelens_csrf=([^;]*)/);
    return m ? decodeURIComponent(m[1]) : "";
  }

  function follow(run) {
    bar.hidden = false;
    window.tracelens.followRun(run.id, {
      progress: (r, pct) => {
        bar.value = r.progress || 0;
        say(r.status === "queued" ? "Queued for ingestion…" : "Ingesting… " + pct + "%");
      },
      done: (r) => {
        if (r.status === "ready") {
          say("Ready: opening the run…");
          window.location.assign("/runs/" + encodeURIComponent(r.id));
          return;
        }
        bar.hidden = true;
        say("Ingestion failed: " + (r.error || "unknown error") + " ", true);
        const link = document.createElement("a");
        link.href = "/runs/" + encodeURIComponent(r.id);
        link.textContent = "(the run)";
        status.appendChild(link);
      },
    });
  }

  function send(fileList) {
    const files = Array.from(fileList || []);
    if (!files.length) return;
    const total = files.reduce((n, f) => n + f.size, 0);
    const what = files.length === 1 ? files[0].name : files.length + " files";
    if (maxBytes && total > maxBytes) {
      say(what + ": larger than the upload limit of " + maxBytes.toLocaleString() + " bytes", true);
      return;
    }
    const data = new FormData();
    const name = document.getElementById("run-name").value.trim();
    const tags = document.getElementById("run-tags").value.trim();
    if (name) data.append("name", name);
    if (tags) data.append("tags", tags);
    const slo = document.getElementById("run-slo").value.trim();
    if (slo) data.append("slo", slo);
    files.forEach((f) => data.append("file", f, f.name));
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/runs");
    xhr.setRequestHeader("Accept", "application/json");
    xhr.setRequestHeader("X-CSRFToken", csrfToken());
    const tokenInput = document.getElementById("api-token");
    if (tokenInput && tokenInput.value) xhr.setRequestHeader("Authorization", "Bearer " + tokenInput.value);
    bar.hidden = false;
    bar.value = 0;
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) {
        bar.value = e.loaded / e.total;
        say("Uploading " + what + "… " + Math.round((100 * e.loaded) / e.total) + "%");
      }
    };
    xhr.onload = () => {
      let body = {};
      try { body = JSON.parse(xhr.responseText); } catch (err) { body = {}; }
      if (xhr.status === 200 || xhr.status === 201) {
        say(body.duplicate ? "Already uploaded as “" + body.name + "”" : "Uploaded. Queued for ingestion…");
        follow(body);
      } else {
        bar.hidden = true;
        say("Upload refused: " + (body.error || "HTTP " + xhr.status), true);
      }
    };
    xhr.onerror = () => { bar.hidden = true; say("Upload failed: the connection was interrupted", true); };
    say("Uploading " + what + "…");
    xhr.send(data);
  }

  input.addEventListener("change", () => send(input.files));
  form.addEventListener("submit", (e) => { e.preventDefault(); send(input.files); });
  ["dragenter", "dragover"].forEach((t) => form.addEventListener(t, (e) => {
    e.preventDefault();
    form.classList.add("dragover");
  }));
  ["dragleave", "drop"].forEach((t) => form.addEventListener(t, (e) => {
    e.preventDefault();
    form.classList.remove("dragover");
  }));
  form.addEventListener("drop", (e) => {
    if (e.dataTransfer && e.dataTransfer.files.length) send(e.dataTransfer.files);
  });
})();
