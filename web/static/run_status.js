// Following a run's ingestion, for the run page (run.js) and the upload form (upload.js):
// poll /api/runs/{id} until the run is ready or failed. A failed request (the service
// restarting, a dropped connection) is retried a little later rather than given up.
"use strict";
window.tracelens = window.tracelens || {};
window.tracelens.followRun = function (runId, handlers) {
  const POLL_MS = 700, RETRY_MS = 1500;
  const poll = () => {
    fetch("/api/runs/" + encodeURIComponent(runId), { headers: { Accept: "application/json" } })
      .then((r) => r.json())
      .then((run) => {
        if (run.status === "ready" || run.status === "failed") {
          handlers.done(run);
          return;
        }
        handlers.progress(run, Math.round(100 * (run.progress || 0)));
        setTimeout(poll, POLL_MS);
      })
      .catch(() => setTimeout(poll, RETRY_MS));
  };
  poll();
};
