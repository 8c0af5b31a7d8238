// Run page: while the run is queued or ingesting, follow its status and reload when done.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("page-data").textContent);
  if (data.status !== "queued" && data.status !== "ingesting") return;
  const bar = document.getElementById("ingest-progress");
  const label = document.getElementById("ingest-label");
  const poll = () => {
    fetch("/api/runs/" + encodeURIComponent(data.run_id), { headers: { Accept: "application/json" } })
      .then((r) => r.json())
      .then((r) => {
        if (r.status === "ready" || r.status === "failed") {
          window.location.reload();
          return;
        }
        bar.value = r.progress || 0;
        label.textContent = r.status === "queued" ? "queued…" : "ingesting… " + Math.round(100 * (r.progress || 0)) + "%";
        setTimeout(poll, 700);
      })
      .catch(() => setTimeout(poll, 1500));
  };
  poll();
})();
