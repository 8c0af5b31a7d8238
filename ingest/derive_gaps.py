"""Derives the ``gaps`` table: stretches where a device did no GPU work, each with a cause.

Busy time is the union of a device's kernel, memcpy and memset intervals (unified-memory
migrations included: the copy engine is working); gaps are the holes in it between its
first and last activity. The *launching thread* of a gap is the thread of the runtime call
(correlation id) that issued the activity ending the gap (of activities that start and end
together, the first launched); the *host span* is the part of the gap before that call
started. Each gap's cause comes from evidence, judged in order:

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

from ingest.correlation import correlation_ids_unique
from ingest.profiler_steps import STEP_NAME_PATTERN
from ingest.schema import sql_list

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
# Device memory allocations: the caching allocator going to the driver for more memory.
DEVICE_ALLOC_CALLS = ("cudaMalloc", "cudaMallocAsync", "hipMalloc", "cuMemAlloc", "cuMemAlloc_v2")
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
# The launch calls that replay a whole CUDA/HIP graph.
GRAPH_LAUNCH_CALLS = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
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


def async_copy_call(name: str) -> str:
    """SQL: ``name`` is an async copy call (``cudaMemcpyAsync``, ``hipMemcpy2DAsync``, ...).

    The LIKE is implied by the pattern and is a plain substring test, several times
    cheaper than the regular expression: over a million launch calls, the expression
    then runs only on the few candidates.
    """
    return f"({name} LIKE '%Memcpy%Async' AND regexp_matches({name}, '^(cuda|hip)Memcpy.*Async$'))"


def _rule(cause: str) -> str:
    return next(w for c, w, _ in _JUDGED if c == cause)


def _have_rows(con: duckdb.DuckDBPyConnection, *tables: str) -> list[bool]:
    """Whether each of ``tables`` has a row, in one query (tiny traces run many)."""
    checks = ", ".join(f"(SELECT count(*) > 0 FROM {t})" for t in tables)
    return [bool(v) for v in con.execute(f"SELECT {checks}").fetchone() or ()]


def derive_gaps(con: duckdb.DuckDBPyConnection) -> None:
    """Fill ``gaps`` from the canonical tables (see the module docstring for the causes).

    Evidence is gathered only for the gaps it can decide: a cause is the first rule that
    holds, so the data-loader lookup skips gaps whose next work was already queued, and
    the host-interval and enqueue lookups skip gaps the first three rules decided. On a
    GPU-bound trace (most gaps queued) that is most of the work; the joins stay on small
    tables of gap ids and nothing holds a second copy of the activities.
    """
    con.execute("DELETE FROM gaps")
    # The gaps of each device, with the launch call of the work that ends each. A gap is
    # where an activity starts after every earlier one (by start, then end) has ended; of
    # activities that start and end together, the first launched (by correlation id) ends
    # it, not whichever the sort happened to meet first. The sort carries which row ends
    # the gap (source table and a reference), not its name: kernel names would double
    # what the sort holds. A kernel's reference is the number of its name among the few
    # distinct ones, so its name comes back from that small table (a join on the
    # kernel's rowid built a hash table of every kernel and its name: half the final
    # insert); a memcpy's is its rowid, for its kind.
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE _gap_names AS
        SELECT name, row_number() OVER (ORDER BY name) AS rid
        FROM (SELECT DISTINCT name FROM kernels WHERE name IS NOT NULL);

        CREATE OR REPLACE TEMP TABLE _gap0 AS
        WITH iv AS (
            SELECT device_id, start_ns, end_ns, correlation_id, src, rid,
                   max(end_ns) OVER (PARTITION BY device_id
                                     ORDER BY start_ns, end_ns, correlation_id, src, rid
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
            FROM (SELECT k.device_id, k.start_ns, k.end_ns, k.correlation_id, 0 AS src, n.rid
                  FROM kernels k LEFT JOIN _gap_names n USING (name)
                  UNION ALL SELECT device_id, start_ns, end_ns, correlation_id, 1, rowid
                  FROM memcpys
                  UNION ALL SELECT device_id, start_ns, end_ns, correlation_id, 2, rowid
                  FROM memsets)
            WHERE device_id IS NOT NULL AND end_ns >= start_ns
        )
        SELECT row_number() OVER () AS gap_id, device_id, prev_end AS start_ns,
               start_ns AS end_ns, correlation_id AS next_corr, src, rid
        FROM iv WHERE start_ns > prev_end
        """
    )
    # The launch call of each gap's next work; its calls grouped by correlation id unless
    # no two calls share one (ingest/correlation.py), where the rows are the groups.
    calls = "FROM api_calls WHERE correlation_id IN (SELECT next_corr FROM _gap0)"
    launch = (
        f"SELECT correlation_id, pid, tid, start_ns, end_ns {calls}"
        if correlation_ids_unique(con)
        else f"""SELECT correlation_id, any_value(pid) AS pid, any_value(tid) AS tid,
                        min(start_ns) AS start_ns, max(end_ns) AS end_ns
                 {calls} GROUP BY correlation_id"""
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _gap1 AS
        WITH l AS ({launch})
        SELECT g.*, l.pid, l.tid, l.start_ns AS launch_start, l.end_ns AS launch_end,
               -- the host span: from the gap's start to the launch call (or the gap's end)
               greatest(g.start_ns, least(coalesce(l.start_ns, g.end_ns), g.end_ns)) AS host_end,
               -- blocking counts until the next work was issued (a synchronous copy's call
               -- ends after its copy): once it is queued, a wait is the GPU's, not the host's
               greatest(g.start_ns, least(coalesce(l.end_ns, g.end_ns), g.end_ns)) AS block_end
        FROM _gap0 g LEFT JOIN l ON l.correlation_id = g.next_corr;
        DROP TABLE _gap0
        """
    )
    waits = sql_list(STREAM_WAIT_CALLS)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _sync_raw AS
        SELECT pid, tid, name, start_ns, end_ns FROM api_calls
        WHERE name IN ({sql_list(SYNC_CALLS)})
        UNION ALL
        -- an async copy to pageable host memory cannot return before the data lands
        SELECT a.pid, a.tid, a.name, a.start_ns, a.end_ns FROM api_calls a
        WHERE {async_copy_call("a.name")}
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
        """
    )
    # Each lookup keeps only rows that can matter (blocked time, loader overlap above zero:
    # every gap lasts at least 1 ns, so zero decides nothing); an ASOF join costs a sort of
    # its gaps even when the other side is empty, so an empty side is not joined at all.
    has_sync, has_loader = _have_rows(con, "_sync", "_loader")
    if has_sync:
        # B(t) comes from the latest island started by t. One lookup at the end of the
        # blocking span serves both ends when that island started before the gap; only gaps
        # in which an island starts (at most one per island and device) need a second.
        blocked_at = (
            "coalesce({i}.before_ns + least(greatest({t} - {i}.start_ns, 0), "
            "{i}.end_ns - {i}.start_ns), 0)"
        )
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE _blk_end AS
            SELECT * FROM (
                SELECT g.gap_id, g.pid, g.tid, g.start_ns, e.start_ns AS island_start,
                       {blocked_at.format(i="e", t="g.block_end")} AS blocked_end,
                       {blocked_at.format(i="e", t="g.start_ns")} AS blocked_start,
                       e.name AS sync_name
                FROM (SELECT gap_id, pid, tid, start_ns, block_end FROM _gap1
                      WHERE pid IS NOT NULL) g
                ASOF JOIN _sync e
                  ON e.pid = g.pid AND e.tid = g.tid AND e.start_ns <= g.block_end
            ) WHERE island_start > start_ns OR blocked_end <> blocked_start;

            CREATE OR REPLACE TEMP TABLE _blk AS
            SELECT gap_id, blocked_end - blocked_start AS blocked_ns, sync_name
            FROM _blk_end WHERE island_start <= start_ns AND blocked_end <> blocked_start
            UNION ALL
            SELECT * FROM (
                SELECT g.gap_id,
                       g.blocked_end - {blocked_at.format(i="b", t="g.start_ns")} AS blocked_ns,
                       g.sync_name
                FROM (SELECT * FROM _blk_end WHERE island_start > start_ns) g
                ASOF LEFT JOIN _sync b
                  ON b.pid = g.pid AND b.tid = g.tid AND b.start_ns <= g.start_ns
            ) WHERE blocked_ns <> 0;
            DROP TABLE _blk_end
            """
        )
    else:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _blk "
            "(gap_id BIGINT, blocked_ns BIGINT, sync_name VARCHAR)"
        )
    queued = _rule("gpu_dependency")
    if has_loader:
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE _ldr AS
            SELECT * FROM (
                SELECT g.gap_id, d.name AS loader_name,
                       greatest(0, least(d.end_ns, g.end_ns) - greatest(d.start_ns, g.start_ns))
                           AS loader_overlap
                FROM (SELECT gap_id, start_ns, end_ns FROM _gap1
                      WHERE ({queued}) IS NOT TRUE) g
                ASOF JOIN _loader d ON d.start_ns <= g.end_ns
            ) WHERE loader_overlap > 0
            """
        )
    else:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _ldr "
            "(gap_id BIGINT, loader_name VARCHAR, loader_overlap BIGINT)"
        )
    # The gaps that neither queued work, a data loader nor blocking explains: only these
    # need the launching thread's host intervals and enqueue calls.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _open AS
        SELECT gap_id, pid, tid, start_ns, host_end, launch_start FROM (
            SELECT g.gap_id, g.pid, g.tid, g.start_ns, g.end_ns, g.host_end, g.launch_start,
                   g.launch_end, coalesce(b.blocked_ns, 0) AS blocked_ns,
                   coalesce(l.loader_overlap, 0) AS loader_overlap
            FROM _gap1 g LEFT JOIN _blk b USING (gap_id) LEFT JOIN _ldr l USING (gap_id)
            WHERE g.pid IS NOT NULL
        )
        WHERE ({queued}) IS NOT TRUE AND ({_rule("data_loading")}) IS NOT TRUE
          AND ({_rule("synchronization")}) IS NOT TRUE
        """
    )
    # The previous enqueue call matters only when the next launch began after the gap did,
    # within the slack.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _open_launch AS
        SELECT gap_id, pid, tid, launch_start FROM _open
        WHERE launch_start > start_ns AND launch_start <= start_ns + {LAUNCH_ISSUE_SLACK_NS}
        """
    )
    has_open, has_open_launch = _have_rows(con, "_open", "_open_launch")
    if has_open_launch:
        # Calls that enqueued GPU work (their correlation id is on an activity).
        con.execute(
            """
            CREATE OR REPLACE TEMP TABLE _enq AS
            SELECT pid, tid, end_ns FROM api_calls
            WHERE correlation_id IN (
                SELECT correlation_id FROM kernels WHERE correlation_id <> 0
                UNION ALL SELECT correlation_id FROM memcpys WHERE correlation_id <> 0
                UNION ALL SELECT correlation_id FROM memsets WHERE correlation_id <> 0)
              AND (pid, tid) IN (SELECT DISTINCT pid, tid FROM _open_launch);

            CREATE OR REPLACE TEMP TABLE _prev_enq AS
            SELECT g.gap_id, q.end_ns AS prev_enq_end
            FROM _open_launch g ASOF JOIN _enq q
              ON q.pid = g.pid AND q.tid = g.tid AND q.end_ns <= g.launch_start
            """
        )
    else:
        con.execute("CREATE OR REPLACE TEMP TABLE _prev_enq (gap_id BIGINT, prev_enq_end BIGINT)")
    if has_open:
        _host_ops(con)
    else:
        con.execute("CREATE OR REPLACE TEMP TABLE _host (gap_id BIGINT, host_op VARCHAR)")
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
        FROM (
            SELECT g.*, coalesce(b.blocked_ns, 0) AS blocked_ns, b.sync_name,
                   l.loader_name, coalesce(l.loader_overlap, 0) AS loader_overlap,
                   e.prev_enq_end, h.host_op,
                   CASE g.src WHEN 0 THEN kn.name WHEN 1 THEN 'Memcpy ' || mn.kind
                        ELSE 'Memset' END AS next_name
            FROM _gap1 g
            LEFT JOIN _blk b USING (gap_id) LEFT JOIN _ldr l USING (gap_id)
            LEFT JOIN _prev_enq e USING (gap_id) LEFT JOIN _host h USING (gap_id)
            LEFT JOIN (SELECT 0 AS src, rid, name FROM _gap_names) kn USING (src, rid)
            LEFT JOIN (SELECT 1 AS src, rowid AS rid, kind FROM memcpys) mn USING (src, rid)
        )
        ORDER BY device_id, start_ns
        """
    )
    temps = ("_gap_names", "_gap1", "_sync_raw", "_sync", "_loader", "_hostiv", "_blk",
             "_ldr", "_open", "_open_launch", "_enq", "_prev_enq", "_host")  # fmt: skip
    con.execute("".join(f"DROP TABLE IF EXISTS {t};" for t in temps))


# A host interval covers at least HOST_MIN_SPAN_FRACTION of the host span [a, b].
_COVERS_SPAN = f"least(end_ns, b) - greatest(start_ns, a) >= {HOST_MIN_SPAN_FRACTION} * (b - a)"
# A host interval is what the lookup at its depth finds at b, or at a: the latest there.
_CANDIDATE = "(next_start IS NULL OR next_start > b OR start_ns <= a AND next_start > a)"
# The gaps are looked up at every depth of their thread while that takes at most this many
# lookups per host interval of the launching threads: then its two sorts cost less than the
# shortcuts' further ones (440 k operators, 20 k gaps: 0.9 s at 1 lookup per interval, 1.6 s
# at 3, 2.6 s at 5.5; the shortcuts 1.7 to 1.9 s).
_PER_DEPTH_MAX_LOOKUPS_PER_INTERVAL = 4.0


def _host_ops(con: duckdb.DuckDBPyConnection) -> None:
    """``_host``: the host interval naming each gap of ``_open`` (``host_op``), if any.

    The definition: on the launching thread, for each source (operators, annotation ranges)
    and nesting depth, the latest interval started at or before the span's start ``a`` and
    the latest started at or before its end ``b`` are the candidates (the intervals running
    there, or the last to finish before); of the candidates covering at least
    HOST_MIN_SPAN_FRACTION of [a, b], the greatest by (start, -end, depth), the innermost,
    names the gap (an operator before a range that ties). Looking every gap up at every
    depth of its thread is gaps x depths rows: where they outnumber the thread's intervals
    (operators stacked hundreds deep on shared instants, many gaps) the same answer comes
    from fewer lookups (:func:`_host_shortcuts`).
    """
    # The host intervals of the launching threads, wrappers left out, and their levels.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _hostiv AS
        SELECT 0 AS src, pid, tid, depth, name, start_ns, end_ns FROM cpu_ops
        WHERE depth IS NOT NULL AND NOT regexp_matches(name, '{WRAPPER_PATTERN}')
          AND (pid, tid) IN (SELECT pid, tid FROM _open)
        UNION ALL
        SELECT 1, pid, tid, depth, name, start_ns, end_ns FROM ranges
        WHERE device_id IS NULL AND depth IS NOT NULL
          AND NOT regexp_matches(name, '{WRAPPER_PATTERN}')
          AND (pid, tid) IN (SELECT pid, tid FROM _open);
        CREATE OR REPLACE TEMP TABLE _host_levels AS
        SELECT DISTINCT src, pid, tid, depth FROM _hostiv
        """
    )
    lookups, intervals = con.execute(
        "SELECT (SELECT count(*) FROM _open JOIN _host_levels USING (pid, tid)), "
        "(SELECT count(*) FROM _hostiv)"
    ).fetchone() or (0, 0)
    if not intervals:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _host (gap_id BIGINT, host_op VARCHAR);"
            "DROP TABLE _host_levels"
        )
        return
    cand: list[str] = []
    if lookups <= _PER_DEPTH_MAX_LOOKUPS_PER_INTERVAL * intervals:
        # every depth of the thread (joined within each lookup: never held as a table)
        depths = """(SELECT g.gap_id, g.pid, g.tid, d.src, g.start_ns AS a, g.host_end AS b,
                            d.depth
                     FROM _open g JOIN _host_levels d USING (pid, tid))"""
    else:
        _host_shortcuts(con)
        cand.append("SELECT * FROM _host_settled")
        depths = "_host_depths"
    # The lookup per depth, at both ends of the span.
    point = """
        SELECT x.gap_id, x.a, x.b, x.src, h.name, h.start_ns, h.end_ns, h.depth
        FROM {depths} x ASOF JOIN _hostiv h
          ON h.pid = x.pid AND h.tid = x.tid AND h.src = x.src AND h.depth = x.depth
         AND h.start_ns <= x.{at}"""
    cand += [point.format(depths=depths, at="a"), point.format(depths=depths, at="b")]
    # Both lookups may find the same interval; arg_max picks the same name either way. An
    # operator and a range can tie (same start, end and depth: the sources nest apart):
    # the operator names the gap.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _host AS
        SELECT gap_id, arg_max(name, [start_ns, -end_ns, depth, -src]) AS host_op
        FROM ({" UNION ALL ".join(cand)}) WHERE {_COVERS_SPAN}
        GROUP BY gap_id;
        DROP TABLE _host_levels; DROP TABLE IF EXISTS _host_depths;
        DROP TABLE IF EXISTS _host_settled
        """
    )


def _host_shortcuts(con: duckdb.DuckDBPyConnection) -> None:
    """Settle the gaps of ``_open`` that the definition (:func:`_host_ops`) allows with
    fewer lookups (``_host_settled``: the answer for a gap and source), and leave the rest
    for the lookup per depth, at the depths where it can matter (``_host_depths``). By two
    facts:

    (F1) On one thread and source, intervals starting at the same instant have distinct
         depths, deeper as they end earlier (ingest/nesting.py counts the ends at an instant
         first, then its starts longest first): (start, depth) orders them as
         (start, -end, depth) does, and a lookup at one depth finds one interval.
    (F2) An interval covering half of [a, b] or more contains its midpoint:
         start <= mlo = a + (b - a) // 2 and end >= mhi = a + (b - a + 1) // 2.

    A candidate that covers the span and is greater than every interval that can cover it
    is the answer for its source. Per gap and source:

    1. X, the greatest by (start, depth) started by mlo: every interval that can cover the
       span started by mlo (F2), so none is greater (F1). It settles the source when it
       covers the span and is a candidate (its depth's next interval starts after b, or it
       started by a and its depth's next starts after a). None started by mlo: none covers.
    2. Else the intervals containing the midpoint are counted, wrappers too (they have
       depths): c of them, k not *in their parent* (depth above 0, and the parent nesting
       gave it, one level up, does not span it). Each count is those started by mlo less
       those ended before mhi, from running counts: two lookups. With k = 0, one at depth
       d has an ancestor containing the midpoint at each depth below (each in its parent),
       so d < c.
    3. With k = 0, if the latest interval at depth c - 1 started by mlo contains the
       midpoint, it and its c - 1 ancestors are all c: one per depth, each greater than
       the ones around it (it starts no earlier; at the same instant it ends no later and
       is deeper). Whoever covers the span is among them, and the ones around a covering
       one cover too: the deepest covering one is found by halving the depths (each probe,
       the latest at its depth started by mlo, must contain the midpoint, else the gap
       goes on to 4). It is the answer when it is a candidate and no wrapper; none
       covering, there is no answer.
    4. Else one lookup per depth as the definition says: below the depth of the deepest
       covering interval of 3 (deeper ones cover nothing, it is no candidate), below c
       with k = 0 (deeper ones contain no midpoint), at every depth of the thread where
       k > 0 (partial overlaps; zero-length intervals, which can take the depth of the
       one around them).

    Without those conditions the shortcuts give other answers: a later interval of the same
    depth hides one from its depth's lookups, and an interval can be deeper than the number
    around it (tests/test_gap_host_property.py checks the definition).
    """
    # Every host interval of the launching threads (wrappers too): whether it is in its
    # parent, and the start of the next of its depth, wrappers apart: it is its depth's
    # latest interval at the points in between.
    threads = "(pid, tid) IN (SELECT pid, tid FROM _open)"
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _host_all AS
        WITH f AS (
            SELECT 0 AS src, op_id AS id, parent_id, pid, tid, depth, name, start_ns, end_ns,
                   regexp_matches(name, '{WRAPPER_PATTERN}') AS wrapper
            FROM cpu_ops WHERE depth IS NOT NULL AND {threads}
            UNION ALL
            SELECT 1, range_id, parent_id, pid, tid, depth, name, start_ns, end_ns,
                   regexp_matches(name, '{WRAPPER_PATTERN}')
            FROM ranges WHERE device_id IS NULL AND depth IS NOT NULL AND {threads}
        )
        SELECT c.src, c.pid, c.tid, c.depth, c.name, c.start_ns, c.end_ns, c.wrapper,
               NOT coalesce(c.depth <= 0
                            OR (p.pid = c.pid AND p.tid = c.tid AND p.depth = c.depth - 1
                                AND p.start_ns <= c.start_ns AND p.end_ns >= c.end_ns),
                            false) AS loose,
               lead(c.start_ns) OVER (PARTITION BY c.src, c.pid, c.tid, c.depth, c.wrapper
                                      ORDER BY c.start_ns) AS next_start
        FROM f c LEFT JOIN f p ON p.src = c.src AND p.id = c.parent_id
        """
    )
    # 1. The latest interval started by the midpoint, per gap and source: (start, depth) as
    # one ASOF key (depth can dip below zero where a zero-length interval ends first).
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _host_latest AS
        SELECT x.*, h.name, h.start_ns, h.end_ns, h.depth,
               coalesce(({_COVERS_SPAN}) AND {_CANDIDATE}, false) AS settled
        FROM (SELECT g.gap_id, g.pid, g.tid, t.src, g.start_ns AS a, g.host_end AS b,
                     g.start_ns + (g.host_end - g.start_ns) // 2 AS mlo,
                     g.start_ns + (g.host_end - g.start_ns + 1) // 2 AS mhi
              FROM _open g JOIN (SELECT DISTINCT src, pid, tid FROM _host_levels) t
              USING (pid, tid)) x
        ASOF JOIN (SELECT *, CAST(start_ns AS HUGEINT) * 4294967296 + (depth + 2147483648)
                             AS skey FROM _host_all WHERE NOT wrapper) h
          ON h.pid = x.pid AND h.tid = x.tid AND h.src = x.src
         AND h.skey <= CAST(x.mlo AS HUGEINT) * 4294967296 + 4294967295
        """
    )
    # 2. The intervals containing the midpoint: running counts of those started and ended
    # by each instant (one ending before it starts contains nothing, covers no span).
    counted = """
        CREATE OR REPLACE TEMP TABLE _host_{at} AS
        SELECT src, pid, tid, t, sum(n) OVER w AS n, sum(n_loose) OVER w AS n_loose
        FROM (SELECT src, pid, tid, {at}_ns AS t, count(*) AS n,
                     count(*) FILTER (WHERE loose) AS n_loose
              FROM _host_all WHERE end_ns >= start_ns GROUP BY src, pid, tid, {at}_ns)
        WINDOW w AS (PARTITION BY src, pid, tid ORDER BY t);"""
    con.execute(
        f"""
        {counted.format(at="start")}
        {counted.format(at="end")}
        CREATE OR REPLACE TEMP TABLE _host_counted AS
        SELECT u.*, coalesce(s.n, 0) - coalesce(e.n, 0) AS n_in,
               coalesce(s.n_loose, 0) - coalesce(e.n_loose, 0) AS n_loose_in
        FROM (SELECT gap_id, pid, tid, src, a, b, mlo, mhi FROM _host_latest
              WHERE NOT settled) u
        ASOF LEFT JOIN _host_start s
          ON s.src = u.src AND s.pid = u.pid AND s.tid = u.tid AND s.t <= u.mlo
        ASOF LEFT JOIN _host_end e
          ON e.src = u.src AND e.pid = u.pid AND e.tid = u.tid AND e.t < u.mhi;
        DROP TABLE _host_start; DROP TABLE _host_end;

        -- 3. The search: depths up to lo hold a covering interval (the one at lo kept),
        -- none above hi; the first probe is at c - 1, the next halve [lo, hi].
        CREATE OR REPLACE TEMP TABLE _host_chain AS
        SELECT gap_id, pid, tid, src, a, b, mlo, mhi, n_in, -1 AS lo, n_in - 1 AS hi,
               n_in - 1 AS probe, false AS failed, NULL::VARCHAR AS name,
               NULL::BIGINT AS start_ns, NULL::BIGINT AS end_ns, NULL::INTEGER AS depth,
               NULL::BIGINT AS next_start, NULL::BOOLEAN AS wrapper
        FROM _host_counted WHERE n_loose_in = 0 AND n_in > 0
        """
    )
    # A probe that covers the span is kept as the one at lo.
    keep = "name, start_ns, end_ns, depth, next_start, wrapper"
    covers = _COVERS_SPAN.replace("end_ns", "h.end_ns").replace("start_ns", "h.start_ns")
    kept = ", ".join(
        f"CASE WHEN coalesce({covers}, false) THEN h.{c} ELSE x.{c} END AS {c}"
        for c in keep.split(", ")
    )
    while _have_rows(con, "(SELECT 1 FROM _host_chain WHERE probe IS NOT NULL)")[0]:
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE _host_chain_next AS
            WITH r AS (
                SELECT x.* EXCLUDE ({keep}, probe),
                       h.end_ns IS NULL OR h.end_ns < x.mhi AS failed_now,
                       coalesce({covers}, false) AS covers, x.probe, {kept}
                FROM (SELECT * FROM _host_chain WHERE probe IS NOT NULL) x
                ASOF LEFT JOIN _host_all h
                  ON h.src = x.src AND h.pid = x.pid AND h.tid = x.tid AND h.depth = x.probe
                 AND h.start_ns <= x.mlo
            ),
            s AS (
                SELECT * EXCLUDE (failed_now, covers, probe, lo, hi, failed),
                       CASE WHEN covers AND NOT failed_now THEN probe ELSE lo END AS lo,
                       CASE WHEN covers OR failed_now THEN hi ELSE probe - 1 END AS hi,
                       failed_now AS failed
                FROM r
            )
            SELECT * EXCLUDE ({keep}),
                   CASE WHEN NOT failed AND lo < hi THEN (lo + hi + 1) // 2 END AS probe,
                   {keep}
            FROM s
            UNION ALL BY NAME SELECT * FROM _host_chain WHERE probe IS NULL;
            DROP TABLE _host_chain;
            ALTER TABLE _host_chain_next RENAME TO _host_chain
            """
        )
    con.execute(
        f"""
        -- settled: by its deepest covering interval, or as covered by none
        CREATE OR REPLACE TEMP TABLE _host_chain_end AS
        SELECT gap_id, src, a, b, name, start_ns, end_ns, depth, lo,
               NOT failed AND (lo < 0 OR NOT wrapper AND {_CANDIDATE}) AS settled,
               -- the depths left: up to hi when a probe failed (none deeper covers), else
               -- below lo (none deeper covers, and the one at lo is no candidate)
               CASE WHEN failed THEN hi + 1 ELSE lo END AS below
        FROM _host_chain;

        CREATE OR REPLACE TEMP TABLE _host_settled AS
        SELECT gap_id, a, b, src, name, start_ns, end_ns, depth FROM _host_latest WHERE settled
        UNION ALL
        SELECT gap_id, a, b, src, name, start_ns, end_ns, depth FROM _host_chain_end
        WHERE settled AND lo >= 0;

        -- 4. The depths left to look up, below a bound where one is known
        CREATE OR REPLACE TEMP TABLE _host_depths AS
        SELECT u.gap_id, u.pid, u.tid, u.src, u.a, u.b, d.depth
        FROM (SELECT u.*, coalesce(c.below, u.n_in) AS below
              FROM _host_counted u LEFT JOIN _host_chain_end c USING (gap_id, src)
              WHERE c.settled IS NOT TRUE) u
        JOIN _host_levels d
          ON d.src = u.src AND d.pid = u.pid AND d.tid = u.tid
         AND (u.n_loose_in > 0 OR d.depth < u.below);
        DROP TABLE _host_latest; DROP TABLE _host_all; DROP TABLE _host_counted;
        DROP TABLE _host_chain; DROP TABLE _host_chain_end
        """
    )
