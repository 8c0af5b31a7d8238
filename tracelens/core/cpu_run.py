"""Whether a trace's run was on the CPU alone, as its recording shows.

A trace with no GPU activity is not always a CPU run: a GPU run whose GPU tracing failed,
or one profiled with CPU activities only, records none either. Findings word host time
as the run's time, and give CPU causes, only where the recording shows the run was on
the CPU: no runtime call and an empty device list (``no_gpu_recording`` = ``cpu_run``,
:mod:`ingest.chrome.no_gpu_note`).
"""

from __future__ import annotations

from tracelens.core.tracedb import TraceDB


def ran_on_cpu(db: TraceDB) -> bool:
    return not db.devices and db.info.get("no_gpu_recording") == "cpu_run"
