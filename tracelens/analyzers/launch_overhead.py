"""Kernel launch overhead: many tiny kernels, slow launches, a GPU starved by the launcher.

When kernels finish faster than the host can issue the next one, the GPU runs dry while the
host is still issuing launches (the derived gap cause ``launch_overhead``: the next launch
call was running when the gap began, or started within ``LAUNCH_ISSUE_SLACK_NS`` of it
while the launching thread was issuing launches back to back; see
:mod:`ingest.derive_gaps`). A short gap whose next kernel was already queued is the GPU's
own wait (``gpu_dependency``), not launch overhead. This analyzer explains those gaps: how
many kernels are tiny (below ``launch_short_kernel_ns``), how long launches take from the
runtime call to the kernel start, and which operators issue the most tiny kernels.

Impact is the measured launch-overhead gap time, the same gaps idle_gpu reports under that
cause (its finding is named in the evidence): this finding says why they happen and which
code to fuse or capture in a CUDA graph, and does not add new time of its own.
"""

from __future__ import annotations

from tracelens.analyzers.contract import finding
from tracelens.analyzers.idle_gpu import idle_finding_id
from tracelens.analyzers.recording_caveats import profiler_overhead_caveat
from tracelens.core.findings import Finding, TimeRange, finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.core.workload import Workload, workload_of
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS

ANALYZER = "launch_overhead"


def launch_finding_id(device_id: int) -> str:
    """The id of the launch-overhead finding about ``device_id`` (others supersede it)."""
    return finding_id(ANALYZER, device_id)


# Time buckets used to point the timeline at where launch gaps cluster.
_BUCKET_NS = 1_000_000

# Tiny kernels count only when launched one by one: replayed from a CUDA graph they cost
# no per-kernel launch (the graph launch correlates with all of its kernels).
_KERNEL_STATS = """
WITH graph AS (
    SELECT DISTINCT correlation_id FROM api_calls
    WHERE correlation_id IS NOT NULL AND name ILIKE '%graphlaunch%'
),
k AS (
    SELECT end_ns - start_ns AS d,
           coalesce(correlation_id IN (SELECT correlation_id FROM graph), false) AS in_graph
    FROM kernels WHERE device_id = ?
)
SELECT count(*) AS kernels,
       count(*) FILTER (WHERE d < ? AND NOT in_graph) AS short_kernels,
       coalesce(sum(d) FILTER (WHERE d < ? AND NOT in_graph), 0) AS short_ns,
       count(*) FILTER (WHERE in_graph) AS graph_kernels,
       CAST(coalesce(median(d), 0) AS BIGINT) AS median_kernel_ns
FROM k
"""

# Launch latency: launch call start to kernel start, measured only for kernels that found
# the GPU idle (they end a gap and were launched during it); elsewhere the delay is queueing
# behind earlier work, not launch cost. Launch-call host time is over every launch.
_LATENCY = """
WITH api AS ({api}),
-- the earliest gap ending where each kernel starts (a device's gaps are disjoint, so
-- there is at most one): a join on it is the EXISTS test without a per-kernel subquery
ends AS (
    SELECT end_ns, min(start_ns) AS gap_start FROM gaps WHERE device_id = ? GROUP BY end_ns
),
l AS (
    SELECT k.start_ns - a.api_start AS latency, a.api_ns,
           coalesce(a.api_start >= e.gap_start, false) AS on_idle
    FROM kernels k JOIN api a USING (correlation_id)
    LEFT JOIN ends e ON e.end_ns = k.start_ns
    WHERE k.device_id = ?
)
SELECT count(*) FILTER (WHERE on_idle) AS n,
       CAST(coalesce(quantile_cont(latency, 0.5) FILTER (WHERE on_idle), 0) AS BIGINT) AS p50,
       CAST(coalesce(quantile_cont(latency, 0.95) FILTER (WHERE on_idle), 0) AS BIGINT) AS p95,
       CAST(coalesce(median(api_ns), 0) AS BIGINT) AS api_p50,
       coalesce(sum(api_ns), 0) AS api_total
FROM l
"""


_API_GROUPED = """
    SELECT correlation_id, min(start_ns) AS api_start, sum(end_ns - start_ns) AS api_ns
    FROM api_calls
    WHERE correlation_id IS NOT NULL AND name ILIKE '%launch%'
    GROUP BY correlation_id"""
# The same rows, of the same types, where no two calls share a correlation id
# (ingest/correlation.py): a hash table of every launch call fewer.
_API_BY_CALL = """
    SELECT correlation_id, start_ns AS api_start, CAST(end_ns - start_ns AS HUGEINT) AS api_ns
    FROM api_calls
    WHERE correlation_id IS NOT NULL AND name ILIKE '%launch%'"""


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    findings: list[Finding] = []
    t0 = db.t0_ns
    for dev in db.devices:
        ks = db.dicts(
            _KERNEL_STATS, [dev.device_id, t.launch_short_kernel_ns, t.launch_short_kernel_ns]
        )[0]
        n, n_short = int(ks["kernels"]), int(ks["short_kernels"])
        gap_n, gap_ns, in_progress, delay_p50 = db.rows(
            """SELECT count(*), coalesce(sum(end_ns - start_ns), 0),
                      count(*) FILTER (WHERE launch_start_ns <= start_ns),
                      CAST(coalesce(median(launch_start_ns - start_ns)
                                    FILTER (WHERE launch_start_ns > start_ns), 0) AS BIGINT)
               FROM gaps WHERE device_id = ? AND cause = 'launch_overhead'""",
            [dev.device_id],
        )[0]
        gap_share = 100.0 * gap_ns / dev.window_ns if dev.window_ns else 0.0
        many_tiny = n_short >= t.launch_min_short_kernels and 2 * n_short >= n
        if n == 0 or (gap_share < t.launch_min_gap_pct and not many_tiny):
            continue
        api = _API_BY_CALL if db.correlation_ids_unique else _API_GROUPED
        lat = db.dicts(_LATENCY.format(api=api), [dev.device_id, dev.device_id])[0]
        require(db, KERNEL_OPS)
        top_ops = db.dicts(
            """SELECT op_name AS operator, count(*) AS tiny_kernels, sum(dur_ns) AS tiny_ns
               FROM kernel_ops WHERE device_id = ? AND dur_ns < ?
               GROUP BY op_name ORDER BY tiny_kernels DESC, operator LIMIT 5""",
            [dev.device_id, t.launch_short_kernel_ns],
        )
        hot_spots = db.dicts(
            f"""SELECT min(start_ns) AS start_ns, max(end_ns) AS end_ns, count(*) AS gaps,
                       sum(end_ns - start_ns) AS ns
                FROM gaps WHERE device_id = ? AND cause = 'launch_overhead'
                GROUP BY (start_ns - ?) // {_BUCKET_NS} ORDER BY ns DESC, start_ns LIMIT 5""",
            [dev.device_id, t0],
        )
        impact = int(gap_ns)
        short_pct = 100.0 * n_short / n
        ops_text = ", ".join(f"`{o['operator']}` ({int(o['tiny_kernels']):,})" for o in top_ops)
        findings.append(
            finding(
                ANALYZER,
                (dev.device_id,),
                impact,
                db,
                t,
                title=f"GPU {dev.device_id}: {n_short:,} of {n:,} kernels are tiny "
                f"(< {fmt_ns(t.launch_short_kernel_ns)}); launch gaps idle it {fmt_ns(gap_ns)}",
                impact_basis=f"Sum of the {int(gap_n):,} idle gaps where the GPU ran dry while "
                "the host was still issuing the next launch (cause 'launch_overhead', also "
                "counted by idle_gpu under that cause); graphs or fusion remove these gaps, so "
                "this much GPU time comes back at most.",
                summary=f"{short_pct:.0f}% of the kernels on GPU {dev.device_id} run for less "
                f"than {fmt_ns(t.launch_short_kernel_ns)} (median kernel "
                f"{fmt_ns(ks['median_kernel_ns'])}); on an idle GPU a launch takes "
                f"{fmt_ns(lat['p50'])} from the runtime call to the kernel start (p50), and the "
                "GPU idles in "
                f"{int(gap_n):,} gaps between launches ({gap_share:.1f}% of its window).",
                evidence={
                    "device_id": dev.device_id,
                    "kernel_count": n,
                    "short_kernel_threshold_ns": t.launch_short_kernel_ns,
                    "short_kernel_count": n_short,
                    "short_kernel_pct": round(short_pct, 3),
                    "short_kernel_ns": int(ks["short_ns"]),
                    "graph_launched_kernels": int(ks["graph_kernels"]),
                    "median_kernel_ns": int(ks["median_kernel_ns"]),
                    "idle_launch_count": int(lat["n"]),
                    "launch_latency_p50_ns": int(lat["p50"]),
                    "launch_latency_p95_ns": int(lat["p95"]),
                    "launch_call_p50_ns": int(lat["api_p50"]),
                    "launch_call_total_ns": int(lat["api_total"]),
                    "launch_gap_count": int(gap_n),
                    # what made them launch gaps: the launch was still being issued
                    "launch_in_progress_at_gap_start": int(in_progress),
                    "launch_issued_after_gap_start": int(gap_n) - int(in_progress),
                    "launch_issue_delay_p50_ns": int(delay_p50),
                    "launch_gap_ns": int(gap_ns),
                    "launch_gap_pct_of_window": round(gap_share, 3),
                    "top_tiny_kernel_operators": [
                        {
                            "operator": o["operator"],
                            "tiny_kernels": int(o["tiny_kernels"]),
                            "tiny_ns": int(o["tiny_ns"]),
                        }
                        for o in top_ops
                    ],
                },
                supersedes=[idle_finding_id(dev.device_id, "launch_overhead")],
                advice=_advice(
                    ops_text, int(lat["api_p50"]), int(ks["median_kernel_ns"]), workload_of(db)
                ),
                time_ranges=[
                    TimeRange(
                        int(h["start_ns"]),
                        int(h["end_ns"]),
                        dev.device_id,
                        f"{int(h['gaps'])} launch gaps",
                    )
                    for h in hot_spots
                ],
            )
        )
    return findings


def _advice(ops_text: str, launch_call_ns: int, median_kernel_ns: int, w: Workload) -> str:
    return _launch_advice(ops_text, launch_call_ns, median_kernel_ns, w) + (
        profiler_overhead_caveat(w)
    )


def _launch_advice(ops_text: str, launch_call_ns: int, median_kernel_ns: int, w: Workload) -> str:
    where = f" Most tiny kernels come from {ops_text}." if ops_text else ""
    head = (
        f"Each launch call costs the host about {fmt_ns(launch_call_ns)} while the median "
        f"kernel runs {fmt_ns(median_kernel_ns)}, so the GPU outruns the launcher.{where} "
    )
    graph = "HIP graph" if w.amd else "CUDA graph"
    if w.cuda_graphs:
        return head + (
            f"{graph}s are already replayed in this trace: capture the launches still issued "
            "one by one into the graph as well, and fuse or enlarge the small kernels."
        )
    if not w.is_pytorch:
        api = "hip" if w.amd else "cuda"
        return head + (
            f"Capture the repeated launch sequence in a {graph} (`{api}StreamBeginCapture` / "
            f"`{api}GraphInstantiate` / `{api}GraphLaunch`), fuse small kernels into one, and "
            "give each kernel more work (more elements per launch)."
        )
    optim = (
        " (fused optimizers with `foreach=True`/`fused=True`, fused norms)" if w.is_training else ""
    )
    batch = (
        "(for serving: batch more requests per decode step)"
        if w.kind == "serving"
        else "(larger batches)"
    )
    return head + (
        f"Capture the repeated region in a {graph} (`torch.cuda.CUDAGraph` / "
        "`torch.cuda.make_graphed_callables`, or `torch.compile(model, "
        'mode="reduce-overhead")`, which does it for you with static shapes); fuse chains of '
        f"small elementwise ops with `torch.compile` or fused kernels{optim}; and give each "
        f"kernel more work {batch}."
    )
