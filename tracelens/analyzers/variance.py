"""High-variance operations: kernels and operators whose duration swings for no visible reason.

A spread is only "erratic" once what explains it is taken out:

- *different work*: kernels are grouped by name, launch configuration (grid, block) and the
  input shapes of the operator that launched them (one cuDNN batch-norm kernel with one grid
  serves layers of 14x14 and 56x56 activations: that is two groups, not one erratic one);
  operators by name and input shapes;
- *a trend over the run*: durations that shrink or grow with launch order (an elimination
  whose submatrix shrinks, a cache that fills) correlate with it; a group whose duration
  correlates with its launch order at |r| >= ``variance_trend_min_corr`` is a trend, not noise;
- *first calls*: a group whose slow instances are mostly among its first calls is reported
  as warm-up, not as erratic;
- *waiting for peers*: collective kernels (NCCL/RCCL) spin until every rank arrives; their
  spread is load imbalance between ranks, which the communication analyzer reports.

What remains is erratic when the group has enough instances, a coefficient of variation at
or above ``variance_min_cv`` and a p95 at least ``variance_min_p95_over_p50`` times its
median. Impact is the time spent above the median of those comparable instances: what the
group would give back if every instance ran at its typical speed.
"""

from __future__ import annotations

from ingest.derive_gaps import DEVICE_ALLOC_CALLS
from tracelens.analyzers.contract import finding
from tracelens.analyzers.idle_gpu import idle_finding_id
from tracelens.analyzers.recording_caveats import profiler_overhead_caveat
from tracelens.core.clipped import clipped
from tracelens.core.cpu_run import ran_on_cpu
from tracelens.core.findings import Finding, TimeRange
from tracelens.core.gpu_terms import AMD, GpuTerms, terms_for
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.core.workload import workload_of

ANALYZER = "variance"

# Collective kernels: their duration includes waiting for the slowest rank.
COLLECTIVE_SQL = "(name ILIKE '%nccl%' OR name ILIKE '%rccl%')"

_KERNEL_KEY = (
    "name || ' grid(' || coalesce(grid_x, 0) || ',' || coalesce(grid_y, 0) || ','"
    " || coalesce(grid_z, 0) || ') block(' || coalesce(block_x, 0) || ','"
    " || coalesce(block_y, 0) || ',' || coalesce(block_z, 0) || ')'"
)

# (table with name, start_ns, end_ns, self_ns; grouping key; columns; finding-id key).
# Operators nest, so their time above the median is measured on self time (duration
# minus children): an outer operator made slow by an erratic child must not count the
# child's time again. Kernels take the input shapes of the operator that launched them
# (through the launch call's correlation and external ids), so one kernel serving
# different layer sizes is split.
_GROUPS = {
    "kernel": (
        f"""(SELECT k.name, k.start_ns, k.end_ns, k.grid_x, k.grid_y, k.grid_z, k.block_x,
                    k.block_y, k.block_z, op.input_shapes,
                    k.end_ns - k.start_ns AS self_ns, false AS no_shapes
             FROM kernels k
             LEFT JOIN (SELECT correlation_id, min(external_id) AS ext FROM api_calls
                        WHERE correlation_id IS NOT NULL GROUP BY correlation_id) a
                    USING (correlation_id)
             LEFT JOIN (SELECT external_id, min(input_shapes) AS input_shapes FROM cpu_ops
                        WHERE external_id IS NOT NULL GROUP BY external_id) op
                    ON op.external_id = a.ext
             WHERE NOT {COLLECTIVE_SQL})""",
        _KERNEL_KEY + " || coalesce(' ' || input_shapes, '')",
        "name, grid_x, grid_y, grid_z, block_x, block_y, block_z, input_shapes",
        # The finding id leaves the shapes out: an Nsight export of the same run links no
        # operator shapes to its kernels, and the same problem must keep its id.
        _KERNEL_KEY,
    ),
    "operator": (
        "(SELECT o.name, o.input_shapes, o.start_ns, o.end_ns,"
        " greatest(0, o.end_ns - o.start_ns - coalesce(c.child_ns, 0)) AS self_ns,"
        # shapes with no dimension in them ([[], []]: aten::empty's sizes are arguments,
        # not tensors) say no more than no shapes: its calls of every size share one group
        " o.input_shapes IS NULL OR NOT regexp_matches(o.input_shapes, '[0-9]') AS no_shapes"
        " FROM cpu_ops o LEFT JOIN (SELECT parent_id, sum(end_ns - start_ns) AS child_ns"
        " FROM cpu_ops WHERE parent_id IS NOT NULL GROUP BY parent_id) c"
        " ON c.parent_id = o.op_id)",
        "name || coalesce(' ' || input_shapes, '')",
        "name, input_shapes",
        "name || coalesce(' ' || input_shapes, '')",
    ),
}


# The kernel table when no operator records input shapes (every Nsight export, traces
# recorded without record_shapes): the shapes would all be NULL, so the two lookups that
# fetch them (per correlation id, then per external id) are left out.
_KERNELS_NO_SHAPES = f"""(SELECT name, start_ns, end_ns, grid_x, grid_y, grid_z, block_x,
                                 block_y, block_z, NULL::VARCHAR AS input_shapes,
                                 end_ns - start_ns AS self_ns, false AS no_shapes
                          FROM kernels WHERE NOT {COLLECTIVE_SQL})"""


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    findings: list[Finding] = []
    w_start, w_end = db.window
    # Host time costs wall time only while the GPU waits for the host; in a GPU-bound run an
    # operator's host duration swings freely behind a full launch queue.
    windows = sum(d.window_ns for d in db.devices)
    host_share = (windows - db.gpu_busy_ns) / windows if windows else 1.0
    has_shapes = bool(
        db.scalar(
            "SELECT count(*) > 0 FROM cpu_ops "
            "WHERE external_id IS NOT NULL AND input_shapes IS NOT NULL"
        )
    )
    # A group needs variance_min_count instances: a table with fewer rows has none, and
    # the grouping query's planning alone costs more than these two counts.
    rows_in = dict(
        zip(
            ("kernel", "operator"),
            db.rows("SELECT (SELECT count(*) FROM kernels), (SELECT count(*) FROM cpu_ops)")[0],
            strict=True,
        )
    )
    for kind, (table, key, cols, id_key) in _GROUPS.items():
        if rows_in[kind] < t.variance_min_count:
            continue
        if kind == "kernel" and not has_shapes:
            table = _KERNELS_NO_SHAPES
        # Rows are grouped by a hash of the grouping columns; the readable key is built
        # only for the groups, not for millions of rows.
        firsts = ", ".join(f"min({c}) AS {c}" for c in cols.split(", "))
        # Only what ran inside the analysed window: start-up (context creation, autotuning
        # before the first kernel) is not the steady state the user is tuning.
        in_window = f"WHERE start_ns >= {w_start} AND end_ns <= {w_end}" if db.devices else ""
        # Whether a group is erratic follows from its spread alone; the launch-order numbering
        # (a sort of every instance) and the time above the median are needed only for the
        # groups that pass, usually few of all. The window sorts only numbers; the names and
        # launch configurations come from a separate grouping. Where the rows are a plain
        # scan, reading them again costs less than holding them; lookups are held once.
        held = "NOT MATERIALIZED" if table is _KERNELS_NO_SHAPES else "MATERIALIZED"
        rows = db.dicts(
            f"""
            WITH b AS {held} (
                SELECT hash({cols}) AS h, {cols}, start_ns, end_ns, self_ns, no_shapes
                FROM {table} {in_window}
            ),
            -- the spread first, in one streaming pass; the quantiles, which sort each
            -- group, only for the groups it leaves (a 567 MB trace: none of its 6)
            spread AS MATERIALIZED (
                SELECT h FROM (
                    SELECT h, count(*) AS n, avg(d) AS mean, stddev_pop(d) AS sd
                    FROM (SELECT h, end_ns - start_ns AS d FROM b)
                    GROUP BY h HAVING count(*) >= ?
                ) WHERE mean > 0 AND sd / mean >= ?
            ),
            e AS MATERIALIZED (
                SELECT * FROM (
                    SELECT h, count(*) AS n, avg(d) AS mean,
                           stddev_pop(d) AS sd, quantile_cont(d, 0.5) AS p50,
                           quantile_cont(d, 0.95) AS p95, max(d) AS mx, sum(d) AS total,
                           quantile_cont(self_ns, 0.5) AS self_p50,
                           bool_and(no_shapes) AS no_shapes
                    FROM (SELECT h, end_ns - start_ns AS d, self_ns, no_shapes FROM b
                          WHERE h IN (SELECT h FROM spread))
                    GROUP BY h
                ) WHERE p95 >= ? * p50
            ),
            x AS MATERIALIZED (
                SELECT h, start_ns, end_ns - start_ns AS d, self_ns,
                       row_number() OVER (PARTITION BY h ORDER BY start_ns, end_ns) AS seq
                FROM b WHERE h IN (SELECT h FROM e)
            ),
            f AS (SELECT h, {firsts} FROM b WHERE h IN (SELECT h FROM e) GROUP BY h),
            s AS (
                SELECT e.*, r.trend_r FROM e
                JOIN (SELECT h, coalesce(corr(d, seq), 0) AS trend_r FROM x GROUP BY h) r
                USING (h)
            ),
            above AS (
                SELECT x.h, sum(x.self_ns - s.self_p50) AS above,
                       count(*) FILTER (WHERE x.d > s.p95) AS slow,
                       count(*) FILTER (WHERE x.d > s.p95 AND x.seq <= greatest(3, s.n / 10))
                           AS slow_early
                FROM x JOIN s USING (h) WHERE x.self_ns > s.self_p50 GROUP BY x.h
            )
            SELECT {key} AS k, {id_key} AS id_k, s.*, f.* EXCLUDE (h),
                   coalesce(above.above, 0) AS above,
                   coalesce(above.slow, 0) AS slow, coalesce(above.slow_early, 0) AS slow_early
            FROM s JOIN f USING (h) LEFT JOIN above USING (h)
            ORDER BY above DESC, k
            """,
            [t.variance_min_count, t.variance_min_cv, t.variance_min_p95_over_p50],
        )
        reported = 0
        subjects: set[str] = set()
        for r in rows:
            above = int(r["above"] or 0)
            impact = above if kind == "kernel" else int(above * host_share)
            pct = db.pct_of_window(impact)
            if pct < t.variance_min_impact_pct or reported >= t.variance_top_n:
                continue
            reported += 1
            cv = r["sd"] / r["mean"]
            warmup = r["slow"] > 0 and r["slow_early"] * 5 >= r["slow"] * 4
            if r["no_shapes"] and not warmup:
                # Without input shapes (record_shapes=False) one group mixes different work
                # (a prefill and a decode call of the same op): spread is expected, not news.
                continue
            if not warmup and abs(r["trend_r"]) >= t.variance_trend_min_corr:
                # Durations follow launch order (shrinking or growing work): a trend the
                # program makes, not noise to chase.
                continue
            subject = r["id_k"]
            if str(subject) in subjects:  # a second shape group of the same kernel and launch
                subject = r["k"]
            subjects.add(str(subject))
            slowest = db.dicts(
                f"""SELECT start_ns, end_ns FROM {table} WHERE hash({cols}) = ?
                    ORDER BY end_ns - start_ns DESC, start_ns, end_ns LIMIT 5""",
                [r["h"]],
            )
            where = "on the GPU" if kind == "kernel" else "on the host"
            basis = "Time its instances spent above the group's median duration"
            if kind == "operator" and ran_on_cpu(db):
                # nothing ran on a GPU: the host's time is the run's time
                basis += (
                    " (self time, excluding nested operators); the run was on the CPU, so "
                    "host time is the run's time."
                )
            elif kind == "operator" and not db.devices:
                # GPU work may have run unrecorded: no idle share to weigh host time by
                basis += (
                    " (self time, excluding nested operators), counted whole: the trace "
                    "records no GPU activity, so when the GPU waited is not known."
                )
            elif kind == "operator":
                basis += (
                    f" (self time, excluding nested operators), times the {100 * host_share:.1f}%"
                    " of the window the GPU sat idle: host time only costs while the GPU waits."
                )
            findings.append(
                finding(
                    ANALYZER,
                    (kind, subject),
                    impact,
                    db,
                    t,
                    title=(
                        f"Slow first calls of {kind} `{clipped(r['name'])}` (warm-up): "
                        if warmup
                        else f"Erratic {kind} `{clipped(r['name'])}`: "
                    )
                    + f"p95 {fmt_ns(r['p95'])} vs median {fmt_ns(r['p50'])} (CV {cv:.2f})",
                    impact_basis=basis + ("" if kind == "operator" else "."),
                    summary=f"{int(r['n']):,} instances {where}, mean {fmt_ns(r['mean'])}, "
                    f"median {fmt_ns(r['p50'])}, p95 {fmt_ns(r['p95'])}, max {fmt_ns(r['mx'])}; "
                    f"{fmt_ns(above)} spent above the median.",
                    evidence={
                        "kind": kind,
                        "group": r["k"],
                        "count": int(r["n"]),
                        "mean_ns": round(r["mean"], 1),
                        "p50_ns": round(r["p50"], 1),
                        "p95_ns": round(r["p95"], 1),
                        "max_ns": int(r["mx"]),
                        "cv": round(cv, 3),
                        "total_ns": int(r["total"]),
                        "above_median_ns": above,
                        "slow_instances": int(r["slow"]),
                        "slow_instances_in_first_calls": int(r["slow_early"]),
                        "duration_vs_launch_order_r": round(r["trend_r"], 3),
                        "input_shapes": r.get("input_shapes"),
                    },
                    advice=(_warmup_advice(not ran_on_cpu(db)) if warmup else "")
                    + (
                        _CPU_ONLY_ADVICE
                        if ran_on_cpu(db)
                        else _advice(kind, terms_for(workload_of(db).gpu.vendor), _allocates(db))
                    )
                    + (profiler_overhead_caveat(workload_of(db)) if kind != "kernel" else ""),
                    # host time above the median while the GPU waited is part of the idle
                    # time idle_gpu files under 'host_compute'
                    supersedes=[]
                    if kind == "kernel"
                    else [idle_finding_id(d.device_id, "host_compute") for d in db.devices],
                    time_ranges=[
                        TimeRange(s["start_ns"], s["end_ns"], None, "slowest instance")
                        for s in slowest
                    ],
                )
            )
    return findings


def _warmup_advice(gpu: bool) -> str:
    causes = (
        "lazy CUDA/cuDNN initialization, `cudnn.benchmark` autotuning, caching-allocator "
        "growth, compilation"
        if gpu
        # a trace without GPU work: no CUDA library to initialize, no device allocator
        else "first-call dispatch and kernel selection, memory allocation, compilation"
    )
    return (
        f"The slow instances are among the first calls: warm-up ({causes}). Profile the steady "
        "state with `torch.profiler.schedule(wait=1, warmup=2, active=3)` and run a few "
        "warm-up iterations before timing. Otherwise: "
    )


# Operators of a trace that records no GPU work ran on the CPU alone: no syncs, device
# allocator or launches to blame.
_CPU_ONLY_ADVICE = (
    "Same operator and input shapes, very different host durations: look for garbage "
    "collection, memory allocation, contention for the host's cores (intra-op threads "
    "oversubscribed by other threads or processes: `torch.get_num_threads()` against the "
    "cores the process may use) or preemption. Check the slow instances' children on the "
    "timeline."
)


def _allocates(db: TraceDB) -> bool:
    """The trace records device allocation calls: the caching allocator went to the
    driver at least once."""
    return db.memo(
        "variance_allocates",
        lambda: bool(
            db.scalar(
                "SELECT count(*) > 0 FROM api_calls WHERE name IN (SELECT unnest(?::VARCHAR[]))",
                [list(DEVICE_ALLOC_CALLS)],
            )
        ),
    )


def _advice(kind: str, w: GpuTerms, allocates: bool = True) -> str:
    if kind == "kernel":
        return (
            "Same kernel, same launch configuration and input shapes, very different "
            "durations, with no trend over the run: look at what "
            "runs beside the slow instances on the timeline (concurrent kernels or copies "
            f"contending for {w.units} or memory bandwidth, "
            + ("RCCL" if w is AMD else "NCCL")
            + f" traffic), clock throttling ({w.clock_query}), and data-dependent work "
            "(sparsity, dynamic shapes hidden behind the same grid). Lock clocks when "
            "benchmarking."
        )
    if not allocates:
        # no device allocation call in the whole trace: the allocator never went to the
        # driver, so its cache misses are not what slowed these calls
        return (
            "Same operator and input shapes, very different host durations. No allocation "
            "call reached the driver in this trace, so the slow calls are not the caching "
            "allocator growing: look for implicit syncs, garbage collection, contention "
            "with other threads or processes for the host's cores, or preemption of the "
            "launching thread. Check the slow instances' children on the timeline."
        )
    return (
        "Same operator and input shapes, very different host durations: the slow calls "
        "usually hide allocator work ("
        + ("hipMalloc" if w is AMD else "cudaMalloc")
        + " after cache misses), implicit syncs, "
        "garbage collection or contention with other threads. Check the slow instances' "
        "children on the timeline; warm up the caching allocator and avoid per-step "
        "allocations."
    )


def slow_only_in_first_calls(f: Finding) -> bool:
    """A variance finding whose slow instances are all first calls: warm-up, not variance."""
    return (
        f.analyzer == ANALYZER
        and bool(f.evidence.get("slow_instances"))
        and f.evidence.get("slow_instances_in_first_calls") == f.evidence.get("slow_instances")
    )
