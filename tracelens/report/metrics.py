"""Headline numbers of a trace: counts, bytes, busy time, top kernels and operators."""

from __future__ import annotations

from typing import Any

from tracelens.analyzers.cost_model import cost_tables
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS


def trace_metrics(db: TraceDB) -> dict[str, Any]:
    # One scan of memcpys with filters: eight scalar subqueries cost DuckDB's join
    # ordering more than the scans (16 ms on a four-event trace).
    r = db.dicts(
        """SELECT (SELECT count(*) FROM kernels) AS kernel_count,
                  m.memcpy_count, m.uvm_migration_count,
                  (SELECT count(*) FROM memsets) AS memset_count,
                  m.h2d_bytes, m.h2d_pageable_bytes, m.h2d_time_ns, m.dtoh_bytes,
                  m.uvm_bytes, m.uvm_htod_bytes, m.uvm_dtoh_bytes, m.uvm_time_ns
           FROM (SELECT count(*) FILTER (WHERE kind NOT LIKE 'UVM%') AS memcpy_count,
                        count(*) FILTER (WHERE kind LIKE 'UVM%') AS uvm_migration_count,
                        coalesce(sum(bytes) FILTER (WHERE kind = 'HtoD'), 0) AS h2d_bytes,
                        coalesce(sum(bytes) FILTER (WHERE kind = 'HtoD'
                                                    AND src_mem = 'pageable'), 0)
                            AS h2d_pageable_bytes,
                        coalesce(sum(end_ns - start_ns) FILTER (WHERE kind = 'HtoD'), 0)
                            AS h2d_time_ns,
                        coalesce(sum(bytes) FILTER (WHERE kind = 'DtoH'), 0) AS dtoh_bytes,
                        coalesce(sum(bytes) FILTER (WHERE kind LIKE 'UVM%'), 0) AS uvm_bytes,
                        coalesce(sum(bytes) FILTER (WHERE kind = 'UVM_HtoD'), 0)
                            AS uvm_htod_bytes,
                        coalesce(sum(bytes) FILTER (WHERE kind = 'UVM_DtoH'), 0)
                            AS uvm_dtoh_bytes,
                        coalesce(sum(end_ns - start_ns) FILTER (WHERE kind LIKE 'UVM%'), 0)
                            AS uvm_time_ns
                 FROM memcpys) m"""
    )[0]
    windows = sum(d.window_ns for d in db.devices)
    busy = sum(d.busy_ns for d in db.devices)
    metrics: dict[str, Any] = {k: int(v) for k, v in r.items()}
    metrics["gpu_busy_pct"] = round(100.0 * busy / windows, 3) if windows else None
    metrics["window_ns"] = db.window_ns
    return metrics


def device_summaries(db: TraceDB) -> list[dict[str, Any]]:
    return [
        {
            "device_id": d.device_id,
            "name": d.name,
            "window_ns": d.window_ns,
            "busy_ns": d.busy_ns,
            "busy_pct": round(d.busy_pct, 3),
            "idle_pct": round(d.idle_pct, 3),
        }
        for d in db.devices
    ]


_STATS = """count(*) AS count, sum(d) AS total_ns, CAST(round(avg(d)) AS BIGINT) AS mean_ns,
            CAST(round(quantile_cont(d, 0.5)) AS BIGINT) AS p50_ns,
            CAST(round(quantile_cont(d, 0.95)) AS BIGINT) AS p95_ns, max(d) AS max_ns"""


def top_kernels(db: TraceDB, n: int) -> list[dict[str, Any]]:
    return db.dicts(
        f"""SELECT name, {_STATS} FROM (SELECT name, end_ns - start_ns AS d FROM kernels)
            GROUP BY name ORDER BY total_ns DESC, name LIMIT ?""",
        [n],
    )


def top_ops(db: TraceDB, n: int, thresholds: Thresholds | None = None) -> list[dict[str, Any]]:
    """Operators by the GPU time of the kernels they launched (per call: sum of its kernels).

    Each row also carries the cost model's view (null where no recorded shapes give it or
    the GPU's peaks are unknown): ``flops`` and ``bytes`` summed over the calls with
    shapes, ``achieved_tflops`` and ``achieved_gbps`` over those calls' kernel time, and
    ``bound`` (``compute`` or ``memory``, from the roofline of the GPU's peaks).
    """
    if not db.scalar("SELECT count(*) FROM kernels"):
        return []
    require(db, KERNEL_OPS)
    rows = db.dicts(
        f"""SELECT name, {_STATS} FROM (
                SELECT op_name AS name, sum(dur_ns) AS d FROM kernel_ops
                GROUP BY op_name, coalesce(op_id, krow))
            GROUP BY name ORDER BY total_ns DESC, name LIMIT ?""",
        [n],
    )
    costs = cost_tables(db, thresholds or Thresholds())
    for r in rows:
        est = costs.ops.get(r["name"])
        if est is None or est.costed_ns <= 0:  # no call of it had shapes to cost
            r.update(flops=None, bytes=None, achieved_tflops=None, achieved_gbps=None, bound=None)
            continue
        r["flops"] = round(est.flops) if est.flops else None
        r["bytes"] = round(est.bytes)
        r["achieved_tflops"] = round(est.achieved_tflops, 3) if est.achieved_tflops else None
        r["achieved_gbps"] = round(est.achieved_gbps, 3) if est.achieved_gbps else None
        r["bound"] = est.bound
    return rows
