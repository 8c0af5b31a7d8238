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


def async_copy_call(name: str) -> str:
    """SQL: ``name`` is an async copy call (``cudaMemcpyAsync``, ``hipMemcpy2DAsync``, ...).

    The LIKE is implied by the pattern and is a plain substring test, several times
    cheaper than the regular expression: over a million launch calls, the expression
    then runs only on the few candidates.
    """
    return f"({name} LIKE '%Memcpy%Async' AND regexp_matches({name}, '^(cuda|hip)Memcpy.*Async$'))"


def _in_list(names: tuple[str, ...]) -> str:
    return ", ".join(f"'{n}'" for n in names)


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
    waits = _in_list(STREAM_WAIT_CALLS)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _sync_raw AS
        SELECT pid, tid, name, start_ns, end_ns FROM api_calls
        WHERE name IN ({_in_list(SYNC_CALLS)})
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

        CREATE OR REPLACE TEMP TABLE _hostiv AS
        SELECT 0 AS src, pid, tid, depth, name, start_ns, end_ns FROM cpu_ops
        WHERE depth IS NOT NULL AND NOT regexp_matches(name, '{WRAPPER_PATTERN}')
        UNION ALL
        SELECT 1, pid, tid, depth, name, start_ns, end_ns FROM ranges
        WHERE device_id IS NULL AND depth IS NOT NULL
          AND NOT regexp_matches(name, '{WRAPPER_PATTERN}');
        """
    )
    # Each lookup keeps only rows that can matter (blocked time, loader overlap above zero:
    # every gap lasts at least 1 ns, so zero decides nothing); an ASOF join costs a sort of
    # its gaps even when the other side is empty, so an empty side is not joined at all.
    has_sync, has_loader, has_hostiv = _have_rows(con, "_sync", "_loader", "_hostiv")
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
    if has_hostiv and has_open:
        # The innermost host interval covering most of the host span. At each nesting depth
        # intervals are disjoint, so the ones running at the span's start and at its end
        # (an ASOF lookup each) are the candidates; of those covering at least
        # HOST_MIN_SPAN_FRACTION of the span, which nest, the innermost started last.
        point = """
                SELECT x.gap_id, x.a, x.b, h.name, h.start_ns, h.end_ns, h.depth
                FROM (SELECT g.gap_id, g.pid, g.tid, g.start_ns AS a, g.host_end AS b,
                             g.{at} AS p, ds.src, ds.depth
                      FROM _open g, (SELECT DISTINCT src, depth FROM _hostiv) ds) x
                ASOF JOIN _hostiv h
                  ON h.pid = x.pid AND h.tid = x.tid AND h.src = x.src AND h.depth = x.depth
                 AND h.start_ns <= x.p
                WHERE h.end_ns >= x.a"""
        # Both lookups may find the same interval; arg_max picks the same name either way.
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE _host AS
            WITH cand AS ({point.format(at="start_ns")} UNION ALL {point.format(at="host_end")})
            SELECT gap_id, arg_max(name, [start_ns, -end_ns, depth]) AS host_op
            FROM cand
            WHERE least(end_ns, b) - greatest(start_ns, a) >= {HOST_MIN_SPAN_FRACTION} * (b - a)
            GROUP BY gap_id
            """
        )
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
