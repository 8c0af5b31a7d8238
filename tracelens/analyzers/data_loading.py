"""Data loading: GPU time lost waiting for the next batch, and how the loader is configured.

Loader activity is what the profiler records for ``DataLoader`` iteration (ranges or
operators named like ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``; the
pattern is :data:`ingest.derive_gaps.DATA_LOADER_PATTERN`). The iterator's class says how
the loader runs: ``_SingleProcessDataLoaderIter`` means ``num_workers=0`` (batches are
prepared on the training thread), ``_MultiProcessingDataLoaderIter`` means workers exist but
do not keep up. Pageable host-to-device copies point at ``pin_memory=False``.

Impact is the idle GPU time in gaps judged ``data_loading`` (idle_gpu sums the same gaps
under that cause; this finding names the loader and its configuration).
"""

from __future__ import annotations

from ingest.derive_gaps import DATA_LOADER_PATTERN
from tracelens.analyzers.contract import finding
from tracelens.analyzers.idle_gpu import idle_finding_id
from tracelens.core.findings import Finding, TimeRange
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns

ANALYZER = "data_loading"

_LOADER_ROWS = f"""
SELECT name, start_ns, end_ns FROM ranges
WHERE device_id IS NULL AND regexp_matches(name, '{DATA_LOADER_PATTERN}')
UNION ALL
SELECT c.name, c.start_ns, c.end_ns FROM cpu_ops c
WHERE regexp_matches(c.name, '{DATA_LOADER_PATTERN}')
  -- outermost loader operators only, so nested loader calls are not counted twice
  AND NOT EXISTS (SELECT 1 FROM cpu_ops p WHERE p.op_id = c.parent_id
                  AND regexp_matches(p.name, '{DATA_LOADER_PATTERN}'))
"""


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    findings: list[Finding] = []
    loaders = db.dicts(
        f"""SELECT name, count(*) AS calls, sum(end_ns - start_ns) AS ns,
                   CAST(median(end_ns - start_ns) AS BIGINT) AS median_ns
            FROM ({_LOADER_ROWS}) GROUP BY name ORDER BY ns DESC, name"""
    )
    if not loaders:
        return []
    names = " ".join(r["name"] for r in loaders)
    single = "_SingleProcessDataLoaderIter" in names
    multi = "_MultiProcessingDataLoaderIter" in names
    pageable_h2d = int(
        db.scalar("SELECT count(*) FROM memcpys WHERE kind = 'HtoD' AND src_mem = 'pageable'") or 0
    )
    loader_ns = sum(int(r["ns"]) for r in loaders)
    # the runs the analysed window holds (the GPU's first to last work); a run that ended
    # before the GPU's first work (the first batch, loaded before anything launched) is
    # said apart, as the idle time it explains is outside the window
    w0, w1 = db.window
    inside, inside_ns = db.rows(
        f"""SELECT count(*), coalesce(sum(end_ns - start_ns), 0) FROM ({_LOADER_ROWS})
            WHERE end_ns > ? AND start_ns < ?""",
        [w0, w1],
    )[0]
    runs = sum(int(r["calls"]) for r in loaders)
    ran = (
        f"The loader ran {runs:,} times for {fmt_ns(loader_ns)} on the host"
        if int(inside) == runs
        else f"The loader ran {int(inside):,} times in the analysed window for "
        f"{fmt_ns(int(inside_ns))} on the host ({runs - int(inside):,} more, "
        f"{fmt_ns(loader_ns - int(inside_ns))}, outside it)"
    )
    for dev in db.devices:
        n, idle_ns = db.rows(
            """SELECT count(*), coalesce(sum(end_ns - start_ns), 0) FROM gaps
               WHERE device_id = ? AND cause = 'data_loading'""",
            [dev.device_id],
        )[0]
        share = 100.0 * idle_ns / dev.window_ns if dev.window_ns else 0.0
        if share < t.dataload_min_idle_pct:
            continue
        longest = db.dicts(
            """SELECT start_ns, end_ns FROM gaps WHERE device_id = ? AND cause = 'data_loading'
               ORDER BY end_ns - start_ns DESC, start_ns LIMIT 5""",
            [dev.device_id],
        )
        workers = "0 (single process)" if single else ("> 0" if multi else "unknown")
        findings.append(
            finding(
                ANALYZER,
                (dev.device_id,),
                int(idle_ns),
                db,
                t,
                title=f"GPU {dev.device_id} waits {fmt_ns(idle_ns)} ({share:.1f}% of its "
                f"window) for the data loader"
                + (" running in the training process (num_workers=0)" if single else ""),
                impact_basis=f"Sum of the {int(n):,} idle gaps on GPU {dev.device_id} that a "
                "data-loader range covers (idle_gpu's 'data_loading' gaps); loading the next "
                "batch while the GPU computes hides this time.",
                summary=f"{ran}; the GPU sat idle {fmt_ns(idle_ns)} waiting "
                f"for it. Workers: {workers}.",
                evidence={
                    "device_id": dev.device_id,
                    "idle_gap_count": int(n),
                    "idle_ns": int(idle_ns),
                    "idle_pct_of_window": round(share, 3),
                    "loader_host_ns": loader_ns,
                    "num_workers": workers,
                    "pageable_h2d_copies": pageable_h2d,
                    "loaders": [
                        {
                            "name": r["name"],
                            "calls": int(r["calls"]),
                            "total_ns": int(r["ns"]),
                            "median_ns": int(r["median_ns"]),
                        }
                        for r in loaders[:5]
                    ],
                },
                advice=_advice(single, multi, pageable_h2d),
                supersedes=[idle_finding_id(dev.device_id, "data_loading")],
                time_ranges=[
                    TimeRange(int(g["start_ns"]), int(g["end_ns"]), dev.device_id, "data wait")
                    for g in longest
                ],
            )
        )
    return findings


def _advice(single: bool, multi: bool, pageable_h2d: int) -> str:
    parts = []
    if single:
        parts.append(
            "The DataLoader runs in the training process (`num_workers=0`), so every batch is "
            "decoded and collated while the GPU waits. Set `num_workers` to a few per GPU "
            "(start with 4-8), with `persistent_workers=True` so workers survive epochs and "
            "`prefetch_factor=2` or more so batches are ready ahead."
        )
    elif multi:
        parts.append(
            "Worker processes exist but do not keep up: raise `num_workers` and "
            "`prefetch_factor`, set `persistent_workers=True`, and make per-sample work "
            "cheaper (pre-decoded/pre-tokenized data, GPU decoding such as DALI/nvJPEG)."
        )
    else:
        parts.append(
            "Prepare batches ahead of the step: `DataLoader(num_workers=N, "
            "persistent_workers=True, prefetch_factor=2)`, and move decoding/augmentation off "
            "the training thread."
        )
    if pageable_h2d:
        parts.append(
            f"{pageable_h2d:,} host-to-device copies come from pageable memory: "
            "`pin_memory=True` plus `.to(device, non_blocking=True)` lets the copy overlap "
            "compute."
        )
    return " ".join(parts)
