"""Derives the ``gaps`` table: stretches where a device did no GPU work, each with a cause.

Busy time is the union of a device's kernel, memcpy and memset intervals (unified-memory
migrations included: the copy engine is working); gaps are the holes in it between its
first and last activity. The *launching thread* of a gap is the thread of the runtime call
(correlation id) that issued the activity ending the gap; the *host span* is the part of
the gap before that call started. Each gap's cause comes from evidence, judged in order:

1. ``gpu_dependency``: the next work had already been launched (its runtime call ended)
   before the gap began. Work was queued and the GPU still waited: on an event from
   another stream (``cudaStreamWaitEvent``), another device, a collective, or the queue's
   own latency. Whatever the host did meanwhile is not the cause, however short the gap.
2. ``data_loading``: a data-loader range or operator covers at least
   :data:`LOADER_MIN_GAP_FRACTION` of the gap.
3. ``synchronization``: blocking calls on the launching thread (device/stream/event
   synchronize, synchronous copies, async copies into pageable host memory, CUPTI
   synchronization records other than stream waits; CUDA and HIP names) were in progress
   for at least :data:`SYNC_MIN_GAP_FRACTION` of the gap, counted until the next work was
   issued (``gaps.blocked_ns``). A sync that returned as the GPU drained and left the gap to
   other host code is not the cause; nor is a wait after the next work was queued.
4. ``launch_overhead``: the GPU ran dry while the host was issuing launches: the next
   launch call started at most :data:`LAUNCH_ISSUE_SLACK_NS` after the gap began, and the
   launching thread was inside an enqueue call when the gap began or had left one at most
   :data:`LAUNCH_ISSUE_SLACK_NS` before it.
5. ``host_compute``: an operator, annotation range or Python function on the launching
   thread covers at least :data:`HOST_MIN_SPAN_FRACTION` of the host span (the innermost
   such one is the detail; whole-program and
   whole-step wrappers such as ``<string>(1): <module>``, ``threading.py(..): _bootstrap``,
   ``ProfilerStep#N`` or an engine step do not count).
6. ``untraced``: nothing recorded explains it (detail ``untraced host code`` when the
   launching thread is known: it ran code the profiler did not record).

The thresholds are decided here, at ingest, because the causes are stored with the trace
(the timeline, the step and LLM step profiles read them too); changing one means
re-ingesting. ``tracelens thresholds`` lists them beside the analyzers' thresholds.
"""

from __future__ import annotations

import duckdb

from ingest.profiler_steps import STEP_NAME_PATTERN

SYNC_CALLS = (
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpy2D",
    "cudaMemcpy3D",
    "cudaMemcpyToSymbol",
    "cudaMemcpyFromSymbol",
    "cudaMemcpyPeer",
    "cudaMemcpyToArray",
    "cudaMemcpyFromArray",
    "cudaMemcpy2DToArray",
    "cudaMemcpy2DFromArray",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "cuMemcpyDtoH",
    "cuMemcpyHtoD",
    "cuMemcpyDtoD",
    "cuMemcpy",
    "cuMemcpy2D",
    "cuMemcpy3D",
    "hipDeviceSynchronize",
    "hipStreamSynchronize",
    "hipEventSynchronize",
    "hipCtxSynchronize",
    "hipMemcpy",
    "hipMemcpyWithStream",
    "hipMemcpy2D",
    "hipMemcpy3D",
    "hipMemcpy2DToArray",
    "hipMemcpy2DFromArray",
    "hipMemcpyToArray",
    "hipMemcpyFromArray",
    "hipMemcpyParam2D",
    "hipMemcpyToSymbol",
    "hipMemcpyFromSymbol",
    "hipMemcpyPeer",
    "hipMemcpyDtoH",
    "hipMemcpyHtoD",
    "hipMemcpyDtoD",
)
# Calls that make the GPU wait on an event: GPU-side ordering, never a blocked host.
STREAM_WAIT_CALLS = ("cudaStreamWaitEvent", "hipStreamWaitEvent", "cuStreamWaitEvent")
# Calls that launch kernels (the GPU work an idle GPU waits for when launch-bound).
LAUNCH_CALLS = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaLaunchCooperativeKernel",
    "cudaGraphLaunch",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel",
    "cuGraphLaunch",
    "hipLaunchKernel",
    "hipExtLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipModuleLaunchKernel",
    "hipLaunchCooperativeKernel",
    "hipGraphLaunch",
)
DATA_LOADER_PATTERN = (
    r"(?i)(dataloader|data_loader|dataloaderiter|_next_data|data loading|load_batch)"
)
# A stream waiting on an event blocks the GPU queue, not the host thread.
STREAM_WAIT_KIND = "Stream Wait Event"
# Host intervals that span a whole program, thread or step: covering a gap, they say
# nothing about what the host was doing in it.
WRAPPER_PATTERN = (
    r"^(" + STEP_NAME_PATTERN + r"|.*\): <module>|threading\.py\([0-9]+\): "
    r"(_bootstrap|_bootstrap_inner|run)|runpy\.py\([0-9]+\): .*|<built-in function exec>"
    r"|execute_([0-9]+_)?context_[0-9]+.*|step\[[A-Z_]+( [^]]*)?\])$"
)
UNTRACED_HOST = "untraced host code"

# Cause thresholds, decided at ingest (see the module docstring).
#: The next work must have been queued (its launch call ended) for at least this share of
#: a gap for the GPU to be the one waiting; queued before the gap began, it always is.
QUEUED_MIN_GAP_FRACTION = 0.5
#: A data-loader range or operator must cover at least this share of a gap.
LOADER_MIN_GAP_FRACTION = 0.5
#: Blocking calls on the launching thread must be in progress for at least this share of
#: a gap for it to be a synchronization gap.
SYNC_MIN_GAP_FRACTION = 0.5
#: Host compute: an operator, range or Python function must cover at least this share of
#: the host part of the gap (from its start to the next launch call) to name it.
HOST_MIN_SPAN_FRACTION = 0.5
#: Launch-bound: the next launch call starts at most this long after the gap begins, and
#: the launching thread left its previous enqueue call at most this long before the gap.
LAUNCH_ISSUE_SLACK_NS = 10_000

GAP_RULES: dict[str, tuple[float, str]] = {
    "gap_queued_min_gap_fraction": (
        QUEUED_MIN_GAP_FRACTION,
        "Gap cause gpu_dependency: the next work was queued (its launch call had ended) for "
        "at least this share of the gap (decided at ingest; re-ingest to change).",
    ),
    "gap_loader_min_gap_fraction": (
        LOADER_MIN_GAP_FRACTION,
        "Gap cause data_loading: a data-loader range or operator covers at least this share "
        "of the gap (decided at ingest; re-ingest to change).",
    ),
    "gap_sync_min_gap_fraction": (
        SYNC_MIN_GAP_FRACTION,
        "Gap cause synchronization: blocking calls on the launching thread were in progress "
        "for at least this share of the gap (decided at ingest).",
    ),
    "gap_host_min_span_fraction": (
        HOST_MIN_SPAN_FRACTION,
        "Gap cause host_compute: the innermost operator, range or Python function on the "
        "launching thread covering at least this share of the gap's host part (start to the "
        "next launch call) names it (decided at ingest).",
    ),
    "gap_launch_issue_slack_ns": (
        LAUNCH_ISSUE_SLACK_NS,
        "Gap cause launch_overhead: the next launch started at most this long after the gap "
        "began and the thread left its previous enqueue call at most this long before the gap "
        "(decided at ingest).",
    ),
}


# The causes in the order they are judged, first match wins: (cause, the evidence that
# decides it over a row of _gap2, the detail it keeps). A gap no rule fits is UNTRACED.
_JUDGED: tuple[tuple[str, str, str], ...] = (
    (
        "gpu_dependency",
        f"""launch_end IS NOT NULL AND end_ns - greatest(launch_end, start_ns)
            >= {QUEUED_MIN_GAP_FRACTION} * (end_ns - start_ns)""",
        "next_name",
    ),
    (
        "data_loading",
        f"loader_overlap >= {LOADER_MIN_GAP_FRACTION} * (end_ns - start_ns)",
        "loader_name",
    ),
    (
        "synchronization",
        f"blocked_ns > 0 AND blocked_ns >= {SYNC_MIN_GAP_FRACTION} * (end_ns - start_ns)",
        "sync_name",
    ),
    (
        "launch_overhead",
        f"""launch_start IS NOT NULL AND launch_start <= start_ns + {LAUNCH_ISSUE_SLACK_NS}
            AND (launch_start <= start_ns
                 OR prev_enq_end >= start_ns - {LAUNCH_ISSUE_SLACK_NS})""",
        f"coalesce(host_op, '{UNTRACED_HOST}')",
    ),
    ("host_compute", "host_op IS NOT NULL", "host_op"),
)
UNTRACED = "untraced"
#: Every value of ``gaps.cause``, in the order the causes are judged.
GAP_CAUSES: tuple[str, ...] = (*(c for c, _, _ in _JUDGED), UNTRACED)

#: Each cause's rule in a line, as the findings about it quote it.
CAUSE_RULES: dict[str, str] = {
    "gpu_dependency": "the next work was queued before the gap began, or for at least "
    f"{QUEUED_MIN_GAP_FRACTION:.0%} of it",
    "data_loading": f"a data-loader range covers at least {LOADER_MIN_GAP_FRACTION:.0%} of the gap",
    "synchronization": "blocking calls on the launching thread took at least "
    f"{SYNC_MIN_GAP_FRACTION:.0%} of the gap before the next work was issued",
    "launch_overhead": "the next launch call was running when the GPU ran dry, or started "
    f"within {LAUNCH_ISSUE_SLACK_NS // 1000:,} µs while the thread was issuing launches",
    "host_compute": "an operator, range or Python function on the launching thread covers the "
    "host part of the gap",
    UNTRACED: "nothing recorded covers the host part of the gap",
}


def _in_list(names: tuple[str, ...]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def derive_gaps(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("DELETE FROM gaps")
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE _act AS
        SELECT device_id, start_ns, end_ns, correlation_id, name FROM kernels
        UNION ALL SELECT device_id, start_ns, end_ns, correlation_id, 'Memcpy ' || kind
        FROM memcpys
        UNION ALL SELECT device_id, start_ns, end_ns, correlation_id, 'Memset' FROM memsets;

        CREATE OR REPLACE TEMP TABLE _gap0 AS
        WITH iv AS (
            SELECT device_id, start_ns, end_ns, correlation_id, name,
                   max(end_ns) OVER (PARTITION BY device_id ORDER BY start_ns, end_ns
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
            FROM _act WHERE device_id IS NOT NULL AND end_ns >= start_ns
        )
        SELECT row_number() OVER () AS gap_id, device_id, prev_end AS start_ns,
               start_ns AS end_ns, correlation_id AS next_corr, name AS next_name
        FROM iv WHERE start_ns > prev_end
        """
    )
    waits = _in_list(STREAM_WAIT_CALLS)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _launch AS
        SELECT correlation_id, any_value(pid) AS pid, any_value(tid) AS tid,
               min(start_ns) AS start_ns, max(end_ns) AS end_ns
        FROM api_calls WHERE correlation_id IN (SELECT next_corr FROM _gap0)
        GROUP BY correlation_id;

        -- Calls that enqueued GPU work (their correlation id is on an activity).
        CREATE OR REPLACE TEMP TABLE _enq AS
        SELECT pid, tid, start_ns, end_ns FROM api_calls
        WHERE correlation_id IN (SELECT correlation_id FROM _act WHERE correlation_id <> 0);

        CREATE OR REPLACE TEMP TABLE _sync_raw AS
        SELECT pid, tid, name, start_ns, end_ns FROM api_calls
        WHERE name IN ({_in_list(SYNC_CALLS)})
        UNION ALL
        -- an async copy to pageable host memory cannot return before the data lands
        SELECT a.pid, a.tid, a.name, a.start_ns, a.end_ns FROM api_calls a
        WHERE regexp_matches(a.name, '^(cuda|hip)Memcpy.*Async$')
          AND a.correlation_id IN (SELECT correlation_id FROM memcpys
                                   WHERE kind = 'DtoH' AND dst_mem = 'pageable')
        UNION ALL
        SELECT y.pid, y.tid, coalesce(a.name, y.kind), y.start_ns, y.end_ns
        FROM syncs y
        LEFT JOIN (SELECT correlation_id, any_value(name) AS name FROM api_calls
                   WHERE correlation_id IN (SELECT correlation_id FROM syncs)
                   GROUP BY correlation_id) a
               USING (correlation_id)
        WHERE y.pid IS NOT NULL AND y.tid IS NOT NULL AND y.kind <> '{STREAM_WAIT_KIND}'
          AND coalesce(a.name, '') NOT IN ({waits});

        -- Blocking time per thread as disjoint islands (a runtime call and the driver call
        -- inside it count once) with the blocked time before each, so the blocked time in
        -- any interval is B(end) - B(start): two ASOF lookups, no interval join.
        CREATE OR REPLACE TEMP TABLE _sync AS
        WITH s AS (
            SELECT *, max(end_ns) OVER (PARTITION BY pid, tid ORDER BY start_ns, end_ns
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
            FROM _sync_raw WHERE end_ns >= start_ns
        ),
        m AS (
            SELECT *, sum(CASE WHEN prev_end IS NULL OR start_ns >= prev_end THEN 1 ELSE 0 END)
                      OVER (PARTITION BY pid, tid ORDER BY start_ns, end_ns
                            ROWS UNBOUNDED PRECEDING) AS island
            FROM s
        ),
        i AS (
            SELECT pid, tid, min(start_ns) AS start_ns, max(end_ns) AS end_ns,
                   arg_max(name, end_ns - start_ns) AS name
            FROM m GROUP BY pid, tid, island
        )
        SELECT *, coalesce(sum(end_ns - start_ns) OVER (
                      PARTITION BY pid, tid ORDER BY start_ns
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before_ns
        FROM i;

        CREATE OR REPLACE TEMP TABLE _loader AS
        SELECT name, start_ns, end_ns FROM ranges
        WHERE regexp_matches(name, '{DATA_LOADER_PATTERN}')
        UNION ALL
        SELECT name, start_ns, end_ns FROM cpu_ops
        WHERE regexp_matches(name, '{DATA_LOADER_PATTERN}');

        CREATE OR REPLACE TEMP TABLE _hostiv AS
        SELECT 0 AS src, pid, tid, depth, name, start_ns, end_ns FROM cpu_ops
        WHERE depth IS NOT NULL AND NOT regexp_matches(name, '{WRAPPER_PATTERN}')
        UNION ALL
        SELECT 1, pid, tid, depth, name, start_ns, end_ns FROM ranges
        WHERE device_id IS NULL AND depth IS NOT NULL
          AND NOT regexp_matches(name, '{WRAPPER_PATTERN}');

        CREATE OR REPLACE TEMP TABLE _gap1 AS
        SELECT g.*, l.pid, l.tid, l.start_ns AS launch_start, l.end_ns AS launch_end,
               -- the host span: from the gap's start to the launch call (or the gap's end)
               greatest(g.start_ns, least(coalesce(l.start_ns, g.end_ns), g.end_ns)) AS host_end,
               -- blocking counts until the next work was issued (a synchronous copy's call
               -- ends after its copy): once it is queued, a wait is the GPU's, not the host's
               greatest(g.start_ns, least(coalesce(l.end_ns, g.end_ns), g.end_ns)) AS block_end
        FROM _gap0 g LEFT JOIN _launch l ON l.correlation_id = g.next_corr;
        """
    )
    has = {
        t: bool(con.execute(f"SELECT count(*) > 0 FROM {t}").fetchone()[0])  # type: ignore[index]
        for t in ("_sync", "_loader", "_enq", "_hostiv")
    }
    # An ASOF join costs a sort of every gap even when its other side is empty (no data
    # loader, no operators in an nsys export): join only what has rows.
    parts = []
    if has["_sync"]:
        parts.append(
            """
            , blk AS (
                SELECT g.gap_id,
                       coalesce(e.before_ns + least(greatest(g.block_end - e.start_ns, 0),
                                                    e.end_ns - e.start_ns), 0)
                       - coalesce(b.before_ns + least(greatest(g.start_ns - b.start_ns, 0),
                                                      b.end_ns - b.start_ns), 0) AS blocked_ns,
                       e.name AS sync_name
                FROM _gap1 g
                ASOF LEFT JOIN _sync e
                  ON e.pid = g.pid AND e.tid = g.tid AND e.start_ns <= g.block_end
                ASOF LEFT JOIN _sync b
                  ON b.pid = g.pid AND b.tid = g.tid AND b.start_ns <= g.start_ns
                WHERE g.pid IS NOT NULL
            )"""
        )
    else:
        parts.append(
            ", blk AS (SELECT NULL::BIGINT AS gap_id, 0::BIGINT AS blocked_ns, "
            "NULL::VARCHAR AS sync_name WHERE false)"
        )
    if has["_loader"]:
        parts.append(
            """
            , ldr AS (
                SELECT g.gap_id, d.name AS loader_name,
                       greatest(0, least(d.end_ns, g.end_ns) - greatest(d.start_ns, g.start_ns))
                           AS loader_overlap
                FROM _gap1 g ASOF JOIN _loader d ON d.start_ns <= g.end_ns
            )"""
        )
    else:
        parts.append(
            ", ldr AS (SELECT NULL::BIGINT AS gap_id, NULL::VARCHAR AS loader_name, "
            "0::BIGINT AS loader_overlap WHERE false)"
        )
    if has["_enq"]:
        parts.append(
            """
            , enq AS (
                SELECT g.gap_id, q.end_ns AS prev_enq_end
                FROM _gap1 g ASOF JOIN _enq q
                  ON q.pid = g.pid AND q.tid = g.tid AND q.end_ns <= g.launch_start
                WHERE g.pid IS NOT NULL
            )"""
        )
    else:
        parts.append(
            ", enq AS (SELECT NULL::BIGINT AS gap_id, NULL::BIGINT AS prev_enq_end WHERE false)"
        )
    if has["_hostiv"]:
        # The innermost host interval covering most of the host span. At each nesting depth
        # intervals are disjoint, so the ones running at the span's start and at its end
        # (an ASOF lookup each) are the candidates; of those covering at least
        # HOST_MIN_SPAN_FRACTION of the span, which nest, the innermost started last.
        point = """
                SELECT x.gap_id, x.a, x.b, h.name, h.start_ns, h.end_ns, h.depth
                FROM (SELECT g.gap_id, g.pid, g.tid, g.start_ns AS a, g.host_end AS b,
                             g.{at} AS p, ds.src, ds.depth
                      FROM _gap1 g, (SELECT DISTINCT src, depth FROM _hostiv) ds
                      WHERE g.pid IS NOT NULL) x
                ASOF JOIN _hostiv h
                  ON h.pid = x.pid AND h.tid = x.tid AND h.src = x.src AND h.depth = x.depth
                 AND h.start_ns <= x.p
                WHERE h.end_ns >= x.a"""
        parts.append(
            f"""
            , cand AS ({point.format(at="start_ns")} UNION {point.format(at="host_end")}),
            host AS (
                SELECT gap_id, arg_max(name, [start_ns, -end_ns, depth]) AS host_op
                FROM cand
                WHERE least(end_ns, b) - greatest(start_ns, a) >= {HOST_MIN_SPAN_FRACTION} * (b - a)
                GROUP BY gap_id
            )"""
        )
    else:
        parts.append(
            ", host AS (SELECT NULL::BIGINT AS gap_id, NULL::VARCHAR AS host_op WHERE false)"
        )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _gap2 AS
        WITH _unused AS (SELECT 1) {"".join(parts)}
        SELECT g.*, coalesce(blk.blocked_ns, 0) AS blocked_ns, blk.sync_name,
               ldr.loader_name, coalesce(ldr.loader_overlap, 0) AS loader_overlap,
               enq.prev_enq_end, host.host_op
        FROM _gap1 g
        LEFT JOIN blk USING (gap_id) LEFT JOIN ldr USING (gap_id)
        LEFT JOIN enq USING (gap_id) LEFT JOIN host USING (gap_id)
        """
    )
    cause = (
        "CASE "
        + " ".join(f"WHEN {w} THEN '{c}'" for c, w, _ in _JUDGED)
        + f" ELSE '{UNTRACED}' END"
    )
    detail = (
        "CASE "
        + " ".join(f"WHEN {w} THEN {d}" for _, w, d in _JUDGED)
        + f" WHEN pid IS NOT NULL THEN '{UNTRACED_HOST}' ELSE NULL END"
    )
    con.execute(
        f"""
        INSERT INTO gaps (device_id, start_ns, end_ns, cause, detail, launch_start_ns,
                          launch_end_ns, blocked_ns)
        SELECT device_id, start_ns, end_ns, {cause}, {detail}, launch_start, launch_end,
               least(blocked_ns, end_ns - start_ns)
        FROM _gap2 ORDER BY device_id, start_ns
        """
    )
    for t in (
        "_act",
        "_gap0",
        "_gap1",
        "_gap2",
        "_launch",
        "_enq",
        "_sync_raw",
        "_sync",
        "_loader",
        "_hostiv",
    ):
        con.execute(f"DROP TABLE IF EXISTS {t}")
