"""``host_copies``: explicit copies between host and GPU, with what each overlapped and who
made it.

HtoD and DtoH copies only: unified-memory migrations (``UVM_*``) are driver page traffic,
not explicit transfers. Read by the ``h2d_transfers`` analyzer, which splits each copy's
time into what pinning, batching and overlap would save.
"""

from __future__ import annotations

from ingest.schema import Column, sql_list
from tracelens.core.interval_sql import covered, covered_at, merged
from tracelens.derived.table import DerivedTable

# Copy calls that return only when the copy is done, whatever the host memory.
SYNC_COPY_CALLS = (
    "cudaMemcpy",
    "cudaMemcpy2D",
    "cudaMemcpy3D",
    "cudaMemcpyToSymbol",
    "cuMemcpyHtoD",
    "cuMemcpy",
    "cuMemcpy2D",
    "cuMemcpy3D",
    "hipMemcpy",
    "hipMemcpyWithStream",
)

_SYNC_LIST = sql_list(SYNC_COPY_CALLS)

HOST_COPIES = DerivedTable(
    "host_copies",
    "Explicit host-to-device and device-to-host copies, with their exposed time, launching "
    "call and operator",
    (
        Column("cid", "BIGINT", "Copy number, in (start, end, device, stream, ...) order"),
        Column("device_id", "INTEGER", "Device that ran the copy"),
        Column("stream_id", "BIGINT", "Stream it ran on"),
        Column("kind", "VARCHAR", "HtoD or DtoH"),
        Column("src_mem", "VARCHAR", "Source memory (memcpys.src_mem)"),
        Column("dst_mem", "VARCHAR", "Destination memory (memcpys.dst_mem)"),
        Column("bytes", "BIGINT", "Bytes copied"),
        Column("start_ns", "BIGINT", "Copy start (ns on the trace clock)"),
        Column("end_ns", "BIGINT", "Copy end (ns on the trace clock)"),
        Column("correlation_id", "BIGINT", "Its runtime call (api_calls.correlation_id)"),
        Column("host_mem", "VARCHAR", "The host side's memory: src_mem for HtoD, dst_mem for DtoH"),
        Column("dur_ns", "BIGINT", "Copy duration (ns)"),
        Column("raw_exposed_ns", "HUGEINT", "Time of the copy no kernel ran on its device (ns)"),
        Column("api_name", "VARCHAR", "The runtime call that issued it; NULL if not recorded"),
        Column("pid", "BIGINT", "Host process id of that call"),
        Column("tid", "BIGINT", "Host thread id of that call"),
        Column("api_start", "BIGINT", "Start of that call (ns on the trace clock)"),
        Column(
            "host_blocking",
            "BOOLEAN",
            "The call blocks the host: a synchronous copy call or pageable host memory",
        ),
        Column("op_name", "VARCHAR", "Operator that made the call (by external id); NULL if none"),
    ),
    f"""
    WITH kseg AS {covered(merged("SELECT device_id, start_ns, end_ns FROM kernels"))},
    c AS (
        SELECT row_number() OVER (ORDER BY start_ns, end_ns, device_id, stream_id, kind,
                                  bytes, correlation_id) AS cid, *,
               CASE WHEN kind = 'HtoD' THEN src_mem ELSE dst_mem END AS host_mem
        FROM memcpys WHERE kind IN ('HtoD', 'DtoH')
    ),
    -- kernel time inside each copy: the union's time before its end less that before its
    -- start (two ASOF lookups; an interval join compared every copy with every stretch
    -- of kernels on its device: 8 s for 20 k copies beside 500 k)
    ov AS (
        SELECT c.cid, {covered_at("ke", "c.end_ns")} - {covered_at("ks", "c.start_ns")} AS ns
        FROM c
        ASOF LEFT JOIN kseg ks ON ks.device_id = c.device_id AND c.start_ns >= ks.start_ns
        ASOF LEFT JOIN kseg ke ON ke.device_id = c.device_id AND c.end_ns >= ke.start_ns
    ),
    api AS (
        SELECT correlation_id, min(name) AS api_name, min(external_id) AS ext,
               min(pid) AS pid, min(tid) AS tid, min(start_ns) AS api_start
        FROM api_calls
        WHERE correlation_id IN (SELECT correlation_id FROM c WHERE correlation_id IS NOT NULL)
        GROUP BY correlation_id
    )
    SELECT c.*, c.end_ns - c.start_ns AS dur_ns,
           c.end_ns - c.start_ns - coalesce(ov.ns, 0) AS raw_exposed_ns,
           api.api_name, api.pid, api.tid, api.api_start,
           api.api_name IN ({_SYNC_LIST}) OR c.host_mem = 'pageable' AS host_blocking,
           op.name AS op_name
    FROM c LEFT JOIN ov USING (cid) LEFT JOIN api USING (correlation_id)
    LEFT JOIN (SELECT external_id, min(name) AS name FROM cpu_ops
               WHERE external_id IS NOT NULL GROUP BY external_id) op
           ON op.external_id = api.ext
    """,
)
