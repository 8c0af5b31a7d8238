"""A note on the host's start-up before the GPU's first work.

The findings judge the window from the GPU's first work to its last. A program's first
CUDA or HIP runtime call creates its context (the driver loads, the device initializes,
once per process), and in a short program that call is most of the run: an RTX 3060
vector add spends 303 ms in its first `cudaMalloc` and 5.3 ms on the GPU. The report says
so, once, instead of leaving the program's largest cost unmentioned; it is no finding,
since no change to the GPU work gives it back.
"""

from __future__ import annotations

from collections.abc import Iterable

from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.core.workload import workload_of, wsl_host

# Shorter start-up calls are not worth a note: a profiler that starts late records a few
# ms of calls before the GPU's.
_MIN_STARTUP_NS = 10_000_000

# Longer is more than a context being created (under a second on a loaded driver; an RTX
# 3060 under WSL2 with persistence on took 0.3 s): an A100 AlexNet benchmark's first
# recorded call took 29.9 s.
_SLOW_STARTUP_NS = 5_000_000_000

# The first runtime call of each process (``cuda*``/``hip*``, not the driver's ``cu*``
# queries some programs make first) that ends before the window begins, with the host's
# first recorded time.
_FIRST_CALL = """
WITH host AS (
    SELECT min(s) AS first_ns FROM (
        SELECT min(start_ns) AS s FROM api_calls UNION ALL
        SELECT min(start_ns) FROM cpu_ops UNION ALL
        SELECT min(start_ns) FROM ranges WHERE device_id IS NULL)
),
firsts AS (
    SELECT pid, arg_min(name, start_ns) AS name, min(start_ns) AS start_ns,
           arg_min(end_ns, start_ns) AS end_ns
    FROM api_calls WHERE name LIKE 'cuda%' OR name LIKE 'hip%' GROUP BY pid
)
SELECT f.name, f.start_ns, f.end_ns, host.first_ns FROM firsts f, host
WHERE f.end_ns <= ? ORDER BY f.end_ns - f.start_ns DESC, f.start_ns LIMIT 1
"""


def host_startup_notes(db: TraceDB) -> list[str]:
    """One note where the first runtime call before the GPU's first work took most of the
    host's time until then; else none."""
    if not db.devices:
        return []
    w_start, _ = db.window
    rows = db.rows(_FIRST_CALL, [w_start])
    if not rows:
        return []
    name, start, end, first = rows[0]
    call_ns, lead_ns = int(end) - int(start), w_start - int(first)
    if call_ns < _MIN_STARTUP_NS or 2 * call_ns < lead_ns:
        return []
    wl = workload_of(db)
    amd = wl.gpu.vendor == "amd"
    runtime = "HIP" if amd else "CUDA"
    # WSL2 runs the GPU through the Windows driver: no persistence mode to turn on there
    wsl = wsl_host(db)
    # Where the driver already stayed loaded (the persistence daemon, a display server on
    # the GPU), the call paid this process's own context: persistence mode cannot help.
    kept_loaded = db.info.get("host_driver_kept_loaded")
    advise_persistence = not amd and not wsl and not kept_loaded
    keep_loaded = (
        " Where start-up matters (short jobs, many processes), keep the driver loaded: on "
        "Linux, persistence mode (`nvidia-smi -pm 1`, or the nvidia-persistenced daemon)."
        if advise_persistence
        else f" The driver was already kept loaded ({kept_loaded}), so this is the process's "
        "own context, which every new process pays: where start-up matters, keep one "
        "process running across the work (a server, or a loop over the inputs) instead of "
        "starting one per job."
        if kept_loaded and not amd
        else ""
    )
    slow = ""
    if call_ns >= _SLOW_STARTUP_NS and not amd:
        gpus = _host_gpus(db)
        causes = [
            "the driver initializing every GPU of the host"
            + (f" ({gpus} here)" if gpus > 1 else "")
            + " without persistence mode (`nvidia-smi -pm 1`, and `CUDA_VISIBLE_DEVICES` "
            "naming only the GPUs the process uses)"
            if advise_persistence
            else None,
            "compiling PTX as modules load (a build without code for this GPU's "
            "architecture: check its architecture list; the JIT cache, `CUDA_CACHE_PATH` "
            "and `CUDA_CACHE_MAXSIZE`, only hides it on later runs)",
            # PyTorch sets CUDA_MODULE_LOADING=LAZY itself from 1.13 on
            None
            if wl.is_pytorch
            else "loading every module at once (`CUDA_MODULE_LOADING=LAZY`, CUDA 11.7+, the "
            "default from 12.2)",
        ]
        slow = (
            f" {fmt_ns(call_ns)} is far beyond what creating a context takes on a loaded "
            "driver: the trace does not say what the driver did, but the usual causes are "
            + _either(c for c in causes if c)
            + "."
        )
        keep_loaded = ""  # named among the causes
    return [
        f"the host's first recorded {runtime} runtime call, `{name}`, took {fmt_ns(call_ns)} "
        f"of the {fmt_ns(lead_ns)} the recorded host activity runs before the GPU's first "
        f"work: it creates the {runtime} context (driver and device initialization, once per "
        f"process). Start-up, outside the {fmt_ns(db.window_ns)} from the GPU's first work "
        f"to its last that the findings judge.{slow}{keep_loaded}"
    ]


def _host_gpus(db: TraceDB) -> int:
    """GPUs the trace lists for the host: those that ran work and those that did not."""
    idle = [p for p in (db.info.get("host_gpus_without_work") or "").split(",") if p.strip()]
    return len(db.devices) + len(idle)


def _either(parts: Iterable[str]) -> str:
    items = list(parts)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", or " + items[-1]
