"""Derives the ``gaps`` table: stretches where a device did no GPU work, each with a cause.

Busy time is the union of a device's kernel, memcpy and memset intervals (unified-memory
migrations included: the copy engine is working); gaps are the holes in it between its
first and last activity. The cause comes from what the host was doing meanwhile, judged
in this order:

- ``data_loading``: a data-loader range or operator covers at least half the gap;
- ``synchronization``: the launching thread came out of a blocking call (device/stream/
  event synchronize, a synchronous copy, or a CUPTI synchronization record on that thread)
  at the start of or during the gap, so no work had been queued ahead;
- ``launch_overhead``: a short gap (at most ``short_gap_ns``) between queued launches;
- ``gpu_dependency``: the next work had been launched before the gap began, so the GPU
  waited on something else (an event on another stream, another device, a collective);
- ``host_compute``: the launching thread was busy in operators/Python before the launch
  (in a trace without operator records: in an outermost annotation range other than a
  ``ProfilerStep``);
- ``untraced``: nothing recorded on the host explains it.
"""

from __future__ import annotations

import duckdb

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
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "cuMemcpyDtoH",
    "cuMemcpyHtoD",
    "cuMemcpyDtoD",
    "cuMemcpy",
    "cuMemcpy2D",
    "cuMemcpy3D",
)
DATA_LOADER_PATTERN = (
    r"(?i)(dataloader|data_loader|dataloaderiter|_next_data|data loading|load_batch)"
)
# A stream waiting on an event blocks the GPU queue, not the host thread.
STREAM_WAIT_KIND = "Stream Wait Event"
SHORT_GAP_NS = 10_000
SYNC_TOLERANCE_NS = 10_000

# Without operator records (an nsys export, where PyTorch's ops arrive as NVTX ranges), the
# host is "in an operator" when inside an outermost range other than the profiler's step
# markers, which span whole iterations and would explain every gap.
_TOP_LEVEL_RANGES = """
    SELECT r.pid, r.tid, r.name, r.start_ns, r.end_ns
    FROM ranges r LEFT JOIN ranges p ON p.range_id = r.parent_id
    WHERE r.device_id IS NULL AND r.name NOT LIKE 'ProfilerStep#%'
      AND (r.parent_id IS NULL OR p.name LIKE 'ProfilerStep#%')
"""

_HOST_JOINS = {
    "_sync": """ASOF LEFT JOIN _sync s
                ON s.pid = g.pid AND s.tid = g.tid AND s.end_ns <= g.end_ns""",
    "_loader": "ASOF LEFT JOIN _loader d ON d.start_ns <= g.end_ns",
    "_hostop": """ASOF LEFT JOIN _hostop h
                  ON h.pid = g.pid AND h.tid = g.tid
                  AND h.start_ns <= coalesce(g.launch_start, g.end_ns)""",
}
# Stand-ins with the same columns for a join that was skipped.
_NO_ROWS = {
    "_sync": "CROSS JOIN (SELECT NULL::VARCHAR AS name, NULL::BIGINT AS end_ns) s",
    "_loader": (
        "CROSS JOIN (SELECT NULL::VARCHAR AS name, NULL::BIGINT AS start_ns, "
        "NULL::BIGINT AS end_ns) d"
    ),
    "_hostop": "CROSS JOIN (SELECT NULL::VARCHAR AS name, NULL::BIGINT AS end_ns) h",
}


def derive_gaps(
    con: duckdb.DuckDBPyConnection,
    short_gap_ns: int = SHORT_GAP_NS,
    sync_tolerance_ns: int = SYNC_TOLERANCE_NS,
) -> None:
    con.execute("DELETE FROM gaps")
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE _gap0 AS
        WITH act AS (
            SELECT device_id, start_ns, end_ns, correlation_id FROM kernels
            UNION ALL SELECT device_id, start_ns, end_ns, correlation_id FROM memcpys
            UNION ALL SELECT device_id, start_ns, end_ns, correlation_id FROM memsets
        ),
        iv AS (
            SELECT device_id, start_ns, end_ns, correlation_id,
                   max(end_ns) OVER (PARTITION BY device_id ORDER BY start_ns, end_ns
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
            FROM act WHERE device_id IS NOT NULL AND end_ns >= start_ns
        )
        SELECT row_number() OVER () AS gap_id, device_id, prev_end AS start_ns,
               start_ns AS end_ns, correlation_id AS next_corr
        FROM iv WHERE start_ns > prev_end
        """
    )
    sync_list = ", ".join(f"'{n}'" for n in SYNC_CALLS)
    no_ops = not con.execute("SELECT count(*) > 0 FROM cpu_ops").fetchone()[0]  # type: ignore[index]
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _launch AS
        SELECT correlation_id, any_value(pid) AS pid, any_value(tid) AS tid,
               min(start_ns) AS start_ns, max(end_ns) AS end_ns
        FROM api_calls WHERE correlation_id IN (SELECT next_corr FROM _gap0)
        GROUP BY correlation_id;

        CREATE OR REPLACE TEMP TABLE _sync AS
        SELECT pid, tid, name, start_ns, end_ns FROM api_calls WHERE name IN ({sync_list})
        UNION ALL
        SELECT y.pid, y.tid, coalesce(a.name, y.kind), y.start_ns, y.end_ns
        FROM syncs y
        LEFT JOIN (SELECT correlation_id, any_value(name) AS name FROM api_calls
                   WHERE correlation_id IN (SELECT correlation_id FROM syncs)
                   GROUP BY correlation_id) a
               USING (correlation_id)
        WHERE y.pid IS NOT NULL AND y.tid IS NOT NULL AND y.kind <> '{STREAM_WAIT_KIND}';

        CREATE OR REPLACE TEMP TABLE _loader AS
        SELECT name, start_ns, end_ns FROM ranges
        WHERE regexp_matches(name, '{DATA_LOADER_PATTERN}')
        UNION ALL
        SELECT name, start_ns, end_ns FROM cpu_ops
        WHERE regexp_matches(name, '{DATA_LOADER_PATTERN}');

        CREATE OR REPLACE TEMP TABLE _hostop AS
        SELECT pid, tid, name, start_ns, end_ns FROM cpu_ops WHERE depth = 0
        UNION ALL
        {_TOP_LEVEL_RANGES if no_ops else "SELECT NULL, NULL, NULL, NULL, NULL WHERE false"};

        CREATE OR REPLACE TEMP TABLE _gap1 AS
        SELECT g.*, l.pid, l.tid, l.start_ns AS launch_start, l.end_ns AS launch_end
        FROM _gap0 g LEFT JOIN _launch l ON l.correlation_id = g.next_corr;
        """
    )
    # An ASOF join costs a sort of every gap even when its other side is empty (no data
    # loader, no operators in an nsys export): join only what has rows.
    joins = []
    for table, join in _HOST_JOINS.items():
        if con.execute(f"SELECT count(*) > 0 FROM {table}").fetchone()[0]:  # type: ignore[index]
            joins.append(join)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _gap2 AS
        SELECT g.*,
               s.name AS sync_name, s.end_ns AS sync_end,
               d.name AS loader_name,
               CASE WHEN d.start_ns IS NULL THEN 0
                    ELSE greatest(0, least(d.end_ns, g.end_ns) - greatest(d.start_ns, g.start_ns))
               END AS loader_overlap,
               h.name AS host_op, h.end_ns AS host_op_end
        FROM _gap1 g
        {" ".join(joins)}
        {" ".join(_NO_ROWS[t] for t in _HOST_JOINS if _HOST_JOINS[t] not in joins)}
        """
    )
    con.execute(
        f"""
        INSERT INTO gaps
        SELECT device_id, start_ns, end_ns,
            CASE
                WHEN coalesce(loader_overlap, 0) * 2 >= end_ns - start_ns THEN 'data_loading'
                WHEN sync_end IS NOT NULL AND sync_end >= start_ns - {sync_tolerance_ns}
                    THEN 'synchronization'
                WHEN end_ns - start_ns <= {short_gap_ns} THEN 'launch_overhead'
                WHEN launch_end IS NOT NULL AND launch_end <= start_ns THEN 'gpu_dependency'
                WHEN host_op IS NOT NULL AND host_op_end >= start_ns THEN 'host_compute'
                ELSE 'untraced'
            END AS cause,
            CASE
                WHEN coalesce(loader_overlap, 0) * 2 >= end_ns - start_ns THEN loader_name
                WHEN sync_end IS NOT NULL AND sync_end >= start_ns - {sync_tolerance_ns}
                    THEN sync_name
                WHEN end_ns - start_ns <= {short_gap_ns} THEN NULL
                WHEN launch_end IS NOT NULL AND launch_end <= start_ns THEN NULL
                WHEN host_op IS NOT NULL AND host_op_end >= start_ns THEN host_op
                ELSE NULL
            END AS detail
        FROM _gap2 ORDER BY device_id, start_ns
        """
    )
    for t in ("_gap0", "_gap1", "_gap2", "_launch", "_sync", "_loader", "_hostop"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
