// Run page: while the run is queued or ingesting, follow its status and reload when done.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("page-data").textContent);
  if (data.status !== "queued" && data.status !== "ingesting") return;
  const bar = document.getElementById("ingest-progress");
  const label = document.getElementById("ingest-label");
  window.tracelens.followRun(data.run_id, {
    progress: (run, pct) => {
      bar.value = run.progress || 0;
      label.textContent = run.status === "queued" ? "queued…" : "ingesting… " + pct + "%";
    },
    done: () => window.location.reload(),
  });
})();
