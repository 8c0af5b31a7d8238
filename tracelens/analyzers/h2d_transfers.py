"""Host-to-device transfers: what the explicit HtoD copies cost and how to cut it.

Unified-memory migrations (``UVM_*`` kinds) are counted apart and never as explicit copies.
"""

from __future__ import annotations

from tracelens.core.findings import Finding, Severity, TimeRange, finding_id, severity_for
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_bytes, fmt_gbps, fmt_ns

ANALYZER = "h2d_transfers"

_SYNC_COPY_CALLS = (
    "cudaMemcpy",
    "cudaMemcpy2D",
    "cudaMemcpy3D",
    "cudaMemcpyToSymbol",
    "cuMemcpyHtoD",
    "cuMemcpy",
    "cuMemcpy2D",
    "cuMemcpy3D",
)


def _copies_table(db: TraceDB) -> None:
    sync_list = ", ".join(f"'{n}'" for n in _SYNC_COPY_CALLS)
    db.con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE h2d AS
        WITH kseg AS (
            -- union of kernel intervals per device, so overlap is not double counted
            SELECT device_id, min(start_ns) AS start_ns, max(end_ns) AS end_ns
            FROM (
                SELECT device_id, start_ns, end_ns,
                       sum(CASE WHEN start_ns > prev_end THEN 1 ELSE 0 END)
                           OVER (PARTITION BY device_id ORDER BY start_ns, end_ns) AS seg
                FROM (
                    SELECT device_id, start_ns, end_ns,
                           coalesce(max(end_ns) OVER (PARTITION BY device_id ORDER BY start_ns,
                               end_ns ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), -1)
                               AS prev_end
                    FROM kernels)
            ) GROUP BY device_id, seg
        ),
        c AS (
            SELECT row_number() OVER () AS cid, * FROM memcpys WHERE kind = 'HtoD'
        ),
        ov AS (
            SELECT c.cid, sum(least(c.end_ns, k.end_ns) - greatest(c.start_ns, k.start_ns)) AS ns
            FROM c JOIN kseg k
              ON k.device_id = c.device_id AND k.start_ns < c.end_ns AND k.end_ns > c.start_ns
            GROUP BY c.cid
        ),
        api AS (
            SELECT correlation_id, any_value(name) AS api_name, any_value(external_id) AS ext,
                   any_value(pid) AS pid, any_value(tid) AS tid, any_value(start_ns) AS api_start
            FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY correlation_id
        )
        SELECT c.*, c.end_ns - c.start_ns AS dur_ns,
               c.end_ns - c.start_ns - coalesce(ov.ns, 0) AS exposed_ns,
               api.api_name, api.pid, api.tid, api.api_start,
               api.api_name IN ({sync_list}) OR c.src_mem = 'pageable' AS host_blocking,
               op.name AS op_name
        FROM c LEFT JOIN ov USING (cid) LEFT JOIN api USING (correlation_id)
        LEFT JOIN (SELECT external_id, any_value(name) AS name FROM cpu_ops
                   WHERE external_id IS NOT NULL GROUP BY external_id) op
               ON op.external_id = api.ext
        """
    )


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    findings: list[Finding] = []
    uvm = db.dicts(
        """SELECT kind, count(*) AS n, coalesce(sum(bytes), 0) AS bytes,
                  coalesce(sum(end_ns - start_ns), 0) AS ns
           FROM memcpys WHERE kind LIKE 'UVM%' GROUP BY kind ORDER BY kind"""
    )
    if uvm:
        findings.append(_uvm_finding(db, t, uvm))
    if not db.scalar("SELECT count(*) FROM memcpys WHERE kind = 'HtoD'"):
        return findings
    _copies_table(db)
    tot = db.dicts(
        """SELECT count(*) AS n, sum(bytes) AS bytes, sum(dur_ns) AS ns,
                  sum(exposed_ns) AS exposed_ns,
                  count(*) FILTER (WHERE src_mem = 'pageable') AS pageable_n,
                  coalesce(sum(bytes) FILTER (WHERE src_mem = 'pageable'), 0) AS pageable_bytes,
                  coalesce(sum(dur_ns) FILTER (WHERE src_mem = 'pageable'), 0) AS pageable_ns,
                  count(*) FILTER (WHERE host_blocking) AS blocking_n
           FROM h2d"""
    )[0]
    totals = {
        "copies": int(tot["n"]),
        "bytes": int(tot["bytes"] or 0),
        "time_ns": int(tot["ns"] or 0),
        "achieved_gbps": round((tot["bytes"] or 0) / tot["ns"], 3) if tot["ns"] else None,
        "pageable_bytes": int(tot["pageable_bytes"]),
        "pageable_share_pct": round(100.0 * tot["pageable_bytes"] / tot["bytes"], 2)
        if tot["bytes"]
        else 0.0,
        "exposed_ns": int(tot["exposed_ns"] or 0),
        "host_blocking_copies": int(tot["blocking_n"]),
    }
    sites = db.dicts(
        """SELECT coalesce(op_name, api_name, '(unknown)') AS call_site, count(*) AS copies,
                  sum(bytes) AS bytes, sum(dur_ns) AS ns
           FROM h2d GROUP BY 1 ORDER BY ns DESC, 1 LIMIT 5"""
    )
    repeated = db.dicts(
        """SELECT bytes, count(*) AS copies, sum(dur_ns) AS ns FROM h2d
           GROUP BY bytes HAVING count(*) >= ? ORDER BY ns DESC, bytes LIMIT 5""",
        [t.h2d_repeat_min_count],
    )
    base_evidence = {"totals": totals, "call_sites": sites, "repeated_sizes": repeated}

    # 1. Pageable memory: copies are staged through a bounce buffer and block the host.
    if tot["pageable_n"]:
        pb, pns = int(tot["pageable_bytes"]), int(tot["pageable_ns"])
        pinned_ns = pb / t.h2d_pinned_gbps  # bytes / (GB/s) = ns
        impact = max(0, int(pns - pinned_ns))
        longest = db.dicts(
            "SELECT start_ns, end_ns FROM h2d WHERE src_mem = 'pageable' "
            "ORDER BY dur_ns DESC, start_ns LIMIT 5"
        )
        pct = db.pct_of_window(impact)
        findings.append(
            Finding(
                id=finding_id(ANALYZER, "pageable"),
                analyzer=ANALYZER,
                title=f"{int(tot['pageable_n']):,} host-to-device copies from pageable memory "
                f"({fmt_bytes(pb)} in {fmt_ns(pns)}, {fmt_gbps(pb, pns)})",
                severity=severity_for(pct, t),
                impact_ns=impact,
                impact_pct=pct,
                impact_basis=f"Pageable copies took {fmt_ns(pns)}; the same bytes at "
                f"{t.h2d_pinned_gbps:g} GB/s (pinned, threshold h2d_pinned_gbps) would take "
                f"{fmt_ns(pinned_ns)}.",
                summary=f"{totals['pageable_share_pct']:.1f}% of HtoD bytes come from pageable "
                "host memory: each copy is staged through a driver buffer at reduced bandwidth "
                "and blocks the calling thread, so it cannot overlap with compute.",
                evidence=base_evidence
                | {"pageable_copies": int(tot["pageable_n"]), "pageable_ns": pns},
                advice=(
                    "Allocate the source in pinned (page-locked) memory and copy asynchronously: "
                    "`DataLoader(..., pin_memory=True)` or `tensor.pin_memory()`, then "
                    "`.to(device, non_blocking=True)`"
                    + (f"; the largest copies come from `{sites[0]['call_site']}`" if sites else "")
                    + ". For inputs reused every step, keep them resident on the GPU instead."
                ),
                time_ranges=[
                    TimeRange(r["start_ns"], r["end_ns"], None, "pageable HtoD") for r in longest
                ],
            )
        )

    # 2. Copies the GPU waits for: transfer time not hidden behind kernels.
    exposed = int(tot["exposed_ns"] or 0)
    if exposed > 0 and db.pct_of_window(exposed) >= t.severity_low_pct:
        longest = db.dicts(
            "SELECT start_ns, end_ns, exposed_ns FROM h2d "
            "ORDER BY exposed_ns DESC, start_ns LIMIT 5"
        )
        pct = db.pct_of_window(exposed)
        findings.append(
            Finding(
                id=finding_id(ANALYZER, "not_overlapped"),
                analyzer=ANALYZER,
                title=f"{fmt_ns(exposed)} of host-to-device copy time not overlapped with compute",
                severity=severity_for(pct, t),
                impact_ns=exposed,
                impact_pct=pct,
                impact_basis="HtoD copy time during which no kernel ran on the same GPU; copies "
                "prefetched on a side stream would hide it behind compute.",
                summary=f"{fmt_ns(exposed)} of {fmt_ns(totals['time_ns'])} of HtoD transfer ran "
                "while the GPU computed nothing.",
                evidence=base_evidence,
                advice=(
                    "Prefetch the next batch on a side stream while the current step computes "
                    "(`with torch.cuda.stream(copy_stream): x = x.to(dev, non_blocking=True)`, "
                    "then `torch.cuda.current_stream().wait_stream(copy_stream)` and "
                    "`x.record_stream(...)`), from pinned memory so the copy is truly async."
                ),
                time_ranges=[
                    TimeRange(r["start_ns"], r["end_ns"], None, "exposed HtoD") for r in longest
                ],
            )
        )

    # 3. Many small copies: per-copy latency dominates.
    small = db.dicts(
        """SELECT count(*) AS n, sum(bytes) AS bytes, sum(dur_ns) AS ns,
                  median(dur_ns) AS p50 FROM h2d WHERE bytes < ?""",
        [t.h2d_small_copy_bytes],
    )[0]
    if small["n"] and small["n"] >= t.h2d_small_copy_min_count:
        bulk_gbps = totals["achieved_gbps"] or t.h2d_pinned_gbps
        bulk_gbps = max(bulk_gbps, 1e-9)
        impact = max(0, int(small["ns"] - small["bytes"] / max(bulk_gbps, t.h2d_pinned_gbps)))
        pct = db.pct_of_window(impact)
        findings.append(
            Finding(
                id=finding_id(ANALYZER, "small_copies"),
                analyzer=ANALYZER,
                title=f"{int(small['n']):,} small host-to-device copies (< "
                f"{fmt_bytes(t.h2d_small_copy_bytes)}) cost {fmt_ns(small['ns'])}",
                severity=severity_for(pct, t),
                impact_ns=impact,
                impact_pct=pct,
                impact_basis="Time of the small copies minus their bytes moved in one batch at "
                "bulk bandwidth: what batching them into one transfer would save.",
                summary=f"Small copies average {fmt_bytes(small['bytes'] / small['n'])} and take "
                f"a median {fmt_ns(small['p50'])} each: latency-bound, not bandwidth-bound.",
                evidence=base_evidence
                | {
                    "small_copies": int(small["n"]),
                    "small_bytes": int(small["bytes"]),
                    "small_ns": int(small["ns"]),
                },
                advice="Batch small tensors into one pinned buffer and copy once (e.g. "
                "`torch.cat` on the host, or a preallocated pinned staging tensor), or create "
                "the values directly on the GPU instead of copying scalars and shapes.",
            )
        )
    return findings


def _uvm_finding(db: TraceDB, t: Thresholds, uvm: list[dict]) -> Finding:
    n = sum(int(r["n"]) for r in uvm)
    nbytes = sum(int(r["bytes"]) for r in uvm)
    ns = sum(int(r["ns"]) for r in uvm)
    return Finding(
        id=finding_id(ANALYZER, "uvm"),
        analyzer=ANALYZER,
        title=f"{n:,} unified-memory migrations ({fmt_bytes(nbytes)}), counted apart from copies",
        severity=Severity.INFO,
        impact_ns=0,
        impact_pct=0.0,
        impact_basis="Informational: migrations are driver page faults/prefetches, not explicit "
        "copies; their cost shows up as kernel stalls rather than copy time.",
        summary=f"Unified memory moved {fmt_bytes(nbytes)} in {n:,} migrations over {fmt_ns(ns)}.",
        evidence={"by_kind": uvm},
        advice="Prefetch managed memory before the kernels that use it "
        "(`cudaMemPrefetchAsync` to the device), set `cudaMemAdviseSetPreferredLocation`, or "
        "use explicit device allocations for data the GPU touches every step.",
    )
