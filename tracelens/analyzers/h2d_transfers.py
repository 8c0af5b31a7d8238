"""Host transfers: what explicit copies between host and GPU cost and how to cut it.

Each copy's time is counted once, split in this order:

1. *pinning* (pageable copies only, both directions): the copy's time minus the same bytes
   at the achievable bandwidth of the GPU's host link plus a per-copy latency;
2. *batching* (host-to-device copies below ``h2d_small_copy_bytes``): what is left of the
   copy minus its bytes at bulk bandwidth: per-copy latency that one batched copy saves;
3. *overlap* (host-to-device): the part of the copy during which no kernel ran, less what
   1 and 2 already claim: what prefetching on a side stream would hide.

A copy's time here leaves out the part of its record during which the driver loaded a
module (``_MODULE_LOADS``): the copy waited on the load, not on the link.

So the findings about the same copies never add up to more than the copies took. The
link is taken from the GPU model (:func:`host_link`): PCIe 3/4/5 x16 at about 12/25/50
GB/s achievable, NVLink-C2C on Grace Hopper; the finding states it as an assumption.
Unified-memory migrations (``UVM_*`` kinds) are counted apart and never as explicit copies.

The copies are the derived ``host_copies`` (:mod:`tracelens.derived.host_copies`); the
split, which depends on the thresholds and the link, is applied when they are read.
"""

from __future__ import annotations

import re
from typing import Any

from tracelens.analyzers.contract import finding
from tracelens.core.findings import Finding, TimeRange, finding_id
from tracelens.core.host_platform import host_pcie_cap
from tracelens.core.interval_sql import merged, on_device
from tracelens.core.module_loads import MODULE_LOAD_API
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_bytes, fmt_gbps, fmt_ns
from tracelens.core.workload import Workload, workload_of
from tracelens.derived import require
from tracelens.derived.host_copies import HOST_COPIES

ANALYZER = "h2d_transfers"
# Unified-memory migrations have one finding, whose time is kernel time, not copy time.
_UVM_SUBJECT = ("uvm",)
UVM_FINDING_ID = finding_id(ANALYZER, *_UVM_SUBJECT)

# (pattern on the GPU model or architecture, link, achievable GB/s per direction). First
# match wins. Achievable is what a pinned cudaMemcpy reaches, about 80% of the raw rate.
_LINKS: list[tuple[str, str, float]] = [
    (r"GH200|GB200|Grace", "NVLink-C2C", 400.0),
    (r"RTX 40[56]0|RTX 30[5]0", "PCIe 4.0 x8", 12.0),
    (r"H100|H200|H20\b|B100|B200|Hopper|Blackwell", "PCIe 5.0 x16", 50.0),
    (r"MI300|MI325|CDNA3", "PCIe 5.0 x16", 50.0),
    (
        r"A100|A10|A30|A40|A16|A2\b|RTX 30|RTX A|L4|L40|RTX 40|Ampere|Ada|MI250|MI210|CDNA2",
        "PCIe 4.0 x16",
        25.0,
    ),
    (r"V100|T4|P100|P4\b|RTX 20|Quadro|Titan|Volta|Turing|Pascal", "PCIe 3.0 x16", 12.0),
]


def host_link(wl: Workload, t: Thresholds, host_cpu: str | None = None) -> tuple[str, float, str]:
    """The GPU's host link, its achievable pinned-copy bandwidth (GB/s), and why: the
    card's link, at most what the host's CPU runs (:mod:`tracelens.core.host_platform`)."""
    if t.h2d_pinned_gbps > 0:
        return "configured", t.h2d_pinned_gbps, "threshold h2d_pinned_gbps"
    gpu = wl.gpu
    # matched on every name the GPU goes by; shown by the one the trace gives it
    label = " ".join(x for x in (gpu.spec.name if gpu.spec else None, gpu.name, gpu.arch) if x)
    shown = gpu.name or (gpu.spec.name if gpu.spec else None) or gpu.arch or label
    for pattern, link, gbps in _LINKS:
        if label and re.search(pattern, label, re.IGNORECASE):
            return _capped(link, gbps, f"assumed from the GPU ({shown.strip()}): {link}", host_cpu)
    return _capped("PCIe 4.0 x16", 25.0, "GPU model unknown: assumed PCIe 4.0 x16", host_cpu)


_PCIE = re.compile(r"^PCIe (\d)\.0 x(\d+)$")
# Achievable pinned GB/s of a PCIe 3.0 x16 link; each generation doubles it.
_GEN3_X16_GBPS = 12.0


def _capped(link: str, gbps: float, basis: str, host_cpu: str | None) -> tuple[str, float, str]:
    """The link at most at the host CPU's PCIe generation and lanes."""
    m = _PCIE.match(link)
    cap = host_pcie_cap(host_cpu)
    if m is None or cap is None:
        return link, gbps, basis
    gen, lanes = min(int(m.group(1)), cap.gen), min(int(m.group(2)), cap.lanes)
    if (gen, lanes) == (int(m.group(1)), int(m.group(2))):
        return link, gbps, basis
    capped = f"PCIe {gen}.0 x{lanes}"
    rate = min(gbps, _GEN3_X16_GBPS * 2 ** (gen - 3) * lanes / 16)
    return (
        capped,
        rate,
        f"{basis}, capped by the host: its {host_cpu} ({cap.platform}) runs PCIe "
        f"{cap.gen}.0 x{cap.lanes} at most",
    )


# The driver loading a module: at a kernel's first launch under lazy loading
# (cuLibraryLoadData), or explicitly. A copy in flight meanwhile can stall until the load
# is done (the load takes the context and uploads the module's code), so its record spans
# time that is the load's, not the link's: on an RTX 3060, a pageable 4 MiB copy recorded
# at 1.78 ms, of which 1.09 ms under cuLibraryLoadData, where the same copy before it took
# 0.68 ms. That part is left out of the copy's time in all three splits.
_MODULE_LOADS = f"SELECT 0 AS device_id, start_ns, end_ns FROM api_calls WHERE {MODULE_LOAD_API}"


def _copies(n: int) -> str:
    return "1 copy" if n == 1 else f"{n:,} copies"


def _split_sql(link_gbps: float, t: Thresholds) -> str:
    """The copies of ``host_copies``, each with its time split once into what pinning,
    batching and overlap would save (see the module docstring): a SELECT to read as
    ``h2d``. The thresholds and the link apply here, not in the derived table."""
    return f"""
        WITH loads AS {merged(_MODULE_LOADS)},
        w AS (
            -- the part of each copy's record during which the driver loaded a module
            SELECT c.*, coalesce((
                SELECT sum(least(c.end_ns, l.end_ns) - greatest(c.start_ns, l.start_ns))
                FROM loads l WHERE l.start_ns < c.end_ns AND l.end_ns > c.start_ns), 0)
                   AS load_ns
            FROM host_copies c
        ),
        x AS (
            SELECT *,
                   -- 1. pinning: time beyond the same bytes over the link plus one latency
                   CASE WHEN host_mem = 'pageable' THEN CAST(greatest(0, dur_ns - load_ns
                        - (bytes / {link_gbps} + {t.h2d_copy_latency_ns})) AS BIGINT)
                        ELSE 0 END
                       AS pin_save_ns
            FROM w
        ),
        y AS (
            -- 2. batching: what is left of a small HtoD copy beyond its bytes at bulk rate
            SELECT *, CASE WHEN kind = 'HtoD' AND bytes < {t.h2d_small_copy_bytes}
                           THEN CAST(greatest(0, dur_ns - load_ns - pin_save_ns
                                              - bytes / {link_gbps}) AS BIGINT)
                           ELSE 0 END AS batch_save_ns
            FROM x
        )
        -- 3. overlap: exposed HtoD time that 1 and 2 do not already claim
        SELECT *, raw_exposed_ns AS exposed_total_ns,
               CASE WHEN kind = 'HtoD'
                    THEN greatest(0, raw_exposed_ns - load_ns - pin_save_ns - batch_save_ns)
                    ELSE 0 END
                   AS exposed_ns
        FROM y
        """


def _direction_evidence(db: TraceDB, with_h2d: str, kind: str, t: Thresholds) -> dict[str, Any]:
    """``totals``, ``call_sites`` and ``repeated_sizes`` of one direction's copies."""
    tot = db.dicts(
        with_h2d
        + """SELECT count(*) AS n, coalesce(sum(bytes), 0) AS bytes, coalesce(sum(dur_ns), 0) AS ns,
                  coalesce(sum(load_ns), 0) AS load_ns,
                  coalesce(sum(exposed_total_ns), 0) AS exposed_ns,
                  coalesce(sum(bytes) FILTER (WHERE host_mem = 'pageable'), 0) AS pageable_bytes,
                  count(*) FILTER (WHERE host_blocking) AS blocking_n
           FROM h2d WHERE kind = ?""",
        [kind],
    )[0]
    # the rate is the link's: time under a module load is the load's (as in the titles)
    moving_ns = int(tot["ns"]) - int(tot["load_ns"])
    totals: dict[str, Any] = {
        "copies": int(tot["n"]),
        "bytes": int(tot["bytes"]),
        "time_ns": int(tot["ns"]),
        "module_load_ns": int(tot["load_ns"]),
        "achieved_gbps": round(tot["bytes"] / moving_ns, 3) if moving_ns > 0 else None,
        "pageable_bytes": int(tot["pageable_bytes"]),
        "pageable_share_pct": round(100.0 * tot["pageable_bytes"] / tot["bytes"], 2)
        if tot["bytes"]
        else 0.0,
        "exposed_ns": int(tot["exposed_ns"]),
        "host_blocking_copies": int(tot["blocking_n"]),
    }
    sites = db.dicts(
        with_h2d
        + """SELECT coalesce(op_name, api_name, '(unknown)') AS call_site, count(*) AS copies,
                  sum(bytes) AS bytes, sum(dur_ns) AS ns
           FROM h2d WHERE kind = ? GROUP BY 1 ORDER BY ns DESC, 1 LIMIT 5""",
        [kind],
    )
    repeated = db.dicts(
        with_h2d
        + """SELECT bytes, count(*) AS copies, sum(dur_ns) AS ns FROM h2d WHERE kind = ?
           GROUP BY bytes HAVING count(*) >= ? ORDER BY ns DESC, bytes LIMIT 5""",
        [kind, t.h2d_repeat_min_count],
    )
    return {"totals": totals, "call_sites": sites, "repeated_sizes": repeated}


def _split_table(db: TraceDB, link_gbps: float, t: Thresholds) -> str:
    """A temporary table of :func:`_split_sql`'s rows, built once per trace, link and
    thresholds: the findings read it some twenty times, and planning the split's CTEs
    each time cost more than running them (15-20 ms a query, for a thousand copies)."""
    key = (link_gbps, t.h2d_copy_latency_ns, t.h2d_small_copy_bytes)

    def build() -> str:
        # named by its parameters: another TraceDB of the connection with the same ones
        # rebuilds the same rows under the same name (numbers hash alike in every process)
        name = f"h2d_split_{hash(key) & 0xFFFFFFFFFFFF:x}"
        db.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {_split_sql(link_gbps, t)}")
        return name

    return db.memo(("h2d_split", key), build)


_DIRECTIONS = {
    # kind: (id subject, title words, host memory column)
    "HtoD": ("pageable", "host-to-device copies from pageable memory", "source"),
    "DtoH": ("pageable_dtoh", "device-to-host copies into pageable memory", "destination"),
}


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    findings: list[Finding] = []
    uvm = db.dicts(
        """SELECT kind, count(*) AS n, coalesce(sum(bytes), 0) AS bytes,
                  coalesce(sum(end_ns - start_ns), 0) AS ns
           FROM memcpys WHERE kind LIKE 'UVM%' GROUP BY kind ORDER BY kind"""
    )
    wl = workload_of(db)
    if uvm:
        findings.append(_uvm_finding(db, t, uvm, wl))
    if not db.scalar("SELECT count(*) FROM memcpys WHERE kind IN ('HtoD', 'DtoH')"):
        return findings
    link, link_gbps, link_basis = host_link(wl, t, db.info.get("host_cpu"))
    require(db, HOST_COPIES)
    # every query below reads the split copies as ``h2d``
    with_h2d = f"WITH h2d AS (SELECT * FROM {_split_table(db, link_gbps, t)}) "
    link_ev = {"link": link, "achievable_gbps": link_gbps, "basis": link_basis}
    # the HtoD findings' evidence; the DtoH finding carries its own direction's
    base_evidence = _direction_evidence(db, with_h2d, "HtoD", t) | {"host_link": link_ev}
    htod = base_evidence["totals"]

    # 1. Pageable memory: copies are staged through a bounce buffer and block the host.
    for kind, (subject, words, side) in _DIRECTIONS.items():
        pg = db.dicts(
            with_h2d
            + """SELECT count(*) AS n, coalesce(sum(bytes), 0) AS bytes,
                      coalesce(sum(dur_ns - load_ns), 0) AS ns,
                      coalesce(sum(load_ns), 0) AS load_ns,
                      count(*) FILTER (WHERE load_ns > 0) AS load_n,
                      coalesce(sum(pin_save_ns), 0) AS save
               FROM h2d WHERE kind = ? AND host_mem = 'pageable'""",
            [kind],
        )[0]
        pb, pns, impact = int(pg["bytes"]), int(pg["ns"]), int(pg["save"])
        load_ns, load_n = int(pg["load_ns"]), int(pg["load_n"])
        if not pg["n"] or impact <= 0:
            # latency-bound copies a pinned buffer would not speed up: nothing to give back
            continue
        pinned_ns = pns - impact
        dir_sites = db.dicts(
            with_h2d
            + """SELECT coalesce(op_name, api_name, '(unknown)') AS call_site, count(*) AS copies,
                      sum(bytes) AS bytes, sum(dur_ns) AS ns
               FROM h2d WHERE kind = ? AND host_mem = 'pageable'
               GROUP BY 1 ORDER BY ns DESC, 1 LIMIT 5""",
            [kind],
        )
        longest = db.dicts(
            with_h2d + "SELECT start_ns, end_ns FROM h2d WHERE kind = ? AND host_mem = 'pageable' "
            "ORDER BY dur_ns DESC, start_ns, cid LIMIT 5",
            [kind],
        )
        n = int(pg["n"])
        findings.append(
            finding(
                ANALYZER,
                (subject,),
                impact,
                db,
                t,
                subject_ns=int(pns),
                title=f"{n:,} {words if n != 1 else words.replace('copies', 'copy', 1)} "
                f"({fmt_bytes(pb)} in {fmt_ns(pns)}, {fmt_gbps(pb, pns)}; "
                f"{link} ≈ {link_gbps:g} GB/s pinned)",
                impact_basis=f"Pageable copies took {fmt_ns(pns)}"
                + (
                    f" (their records less the {fmt_ns(load_ns)} that overlaps a module load)"
                    if load_ns
                    else ""
                )
                + f"; pinned, the same bytes at {link_gbps:g} GB/s ({link_basis}) plus "
                f"{fmt_ns(t.h2d_copy_latency_ns)} per copy (h2d_copy_latency_ns) would take "
                f"{fmt_ns(pinned_ns)}. Each copy's time is counted once across this "
                "analyzer's findings.",
                summary=f"{n:,} cop{'ies' if n != 1 else 'y'} with a pageable host {side}: "
                "each is staged through a "
                "driver buffer at reduced bandwidth and blocks the calling thread, so it "
                "cannot overlap with compute."
                + (
                    f" The record of {_copies(load_n)} overlaps {fmt_ns(load_ns)} of the "
                    "driver loading a module (cuLibraryLoad/cuModuleLoad, as at a kernel's "
                    "first launch under lazy loading), during which the copy made little or "
                    "no progress at the link's rate: that time is the load's, so it is left "
                    "out of the rate and of what pinning saves."
                    if load_ns
                    else ""
                ),
                evidence=_direction_evidence(db, with_h2d, kind, t)
                | {"host_link": link_ev}
                | {
                    "direction": kind,
                    "pageable_copies": n,
                    "pageable_bytes": pb,
                    "pageable_ns": pns,
                    "module_load_ns": load_ns,
                    "pinned_estimate_ns": pinned_ns,
                    "pageable_call_sites": dir_sites,
                },
                advice=_pin_advice(wl, kind, dir_sites)
                + (_ONE_SHOT_ADVICE if n < _ONE_SHOT_COPIES else ""),
                time_ranges=[
                    TimeRange(r["start_ns"], r["end_ns"], None, f"pageable {kind}") for r in longest
                ],
            )
        )

    # 2. Many small copies: per-copy latency dominates.
    small = db.dicts(
        with_h2d
        + """SELECT count(*) AS n, coalesce(sum(bytes), 0) AS bytes, coalesce(sum(dur_ns), 0) AS ns,
                  median(dur_ns) AS p50, coalesce(sum(batch_save_ns), 0) AS save
           FROM h2d WHERE kind = 'HtoD' AND bytes < ?""",
        [t.h2d_small_copy_bytes],
    )[0]
    if small["n"] and small["n"] >= t.h2d_small_copy_min_count:
        impact = int(small["save"])
        findings.append(
            finding(
                ANALYZER,
                ("small_copies",),
                impact,
                db,
                t,
                subject_ns=int(small["ns"]),
                title=f"{int(small['n']):,} small host-to-device copies (< "
                f"{fmt_bytes(t.h2d_small_copy_bytes)}) cost {fmt_ns(small['ns'])}",
                impact_basis=f"Time of the small copies minus their bytes moved in one batch at "
                f"{link_gbps:g} GB/s ({link_basis}), less what pinning them already saves: "
                "what batching them into one transfer would save.",
                summary=f"Small copies average {fmt_bytes(small['bytes'] / small['n'])} and take "
                f"a median {fmt_ns(small['p50'])} each: latency-bound, not bandwidth-bound.",
                evidence=base_evidence
                | {
                    "small_copies": int(small["n"]),
                    "small_bytes": int(small["bytes"]),
                    "small_ns": int(small["ns"]),
                },
                advice=_batch_advice(wl),
            )
        )

    # 3. Copies the GPU waits for: transfer time not hidden behind kernels.
    exposed = int(db.scalar(with_h2d + "SELECT coalesce(sum(exposed_ns), 0) FROM h2d") or 0)
    # Overlap hides copies behind kernels, so it gives back at most the kernel time the
    # copies do not overlap already: a one-kernel program moving 8 MiB for a 39 us kernel
    # can hide 39 us, not the copies' whole exposed time.
    room = int(
        db.scalar(
            with_h2d
            + f"""SELECT (SELECT coalesce(sum(end_ns - start_ns), 0)
                        FROM {merged(_COPY_DEVICE_KERNELS)})
                       - (SELECT coalesce(sum(dur_ns - raw_exposed_ns), 0) FROM h2d
                          WHERE kind = 'HtoD')"""
        )
        or 0
    )
    hideable = min(exposed, max(0, room))
    if hideable > 0 and db.pct_of_window(exposed) >= t.severity_low_pct:
        longest = db.dicts(
            with_h2d + "SELECT start_ns, end_ns, exposed_ns FROM h2d WHERE exposed_ns > 0 "
            "ORDER BY exposed_ns DESC, start_ns, cid LIMIT 5"
        )
        load_htod = int(
            db.scalar(with_h2d + "SELECT coalesce(sum(load_ns), 0) FROM h2d WHERE kind = 'HtoD'")
            or 0
        )
        # what pinning or batching saves of the exposed time, the module loads left out
        claimed = (
            int(
                db.scalar(
                    with_h2d + "SELECT coalesce(sum(greatest(0, raw_exposed_ns - load_ns)), 0) "
                    "FROM h2d WHERE kind = 'HtoD'"
                )
                or 0
            )
            - exposed
        )
        findings.append(
            finding(
                ANALYZER,
                ("not_overlapped",),
                hideable,
                db,
                t,
                subject_ns=exposed,
                # the title gives the measured exposed time; what stays after pinning and
                # batching is a projection, said as one
                title=f"{fmt_ns(exposed + claimed)} of host-to-device copy time not overlapped "
                "with compute"
                + _parenthesized(
                    [f"{fmt_ns(exposed)} once pinned or batched"] * (claimed > 0)
                    + [f"kernels to hide it behind: {fmt_ns(hideable)}"] * (hideable < exposed)
                ),
                impact_basis="HtoD copy time during which no kernel ran on the same GPU; copies "
                "prefetched on a side stream would hide it behind compute, up to the kernel "
                "time they do not overlap already"
                + (
                    f" ({fmt_ns(hideable)}: the kernels are shorter than the copies, so the "
                    "rest stays exposed however the copies are scheduled)."
                    if hideable < exposed
                    else "."
                )
                + (
                    f" {fmt_ns(claimed)} more of exposed copy time is what pinning or batching "
                    "saves, counted by those findings, not again here."
                    if claimed > 0
                    else ""
                ),
                summary=f"{fmt_ns(htod['exposed_ns'])} of {fmt_ns(htod['time_ns'])} of HtoD "
                "transfer ran while the GPU computed nothing"
                + (
                    f" ({fmt_ns(load_htod)} of it overlapping the driver loading a module, "
                    "left out here)."
                    if load_htod
                    else "."
                ),
                evidence=base_evidence
                | {"exposed_after_pinning_and_batching_ns": exposed, "hideable_ns": hideable},
                advice=_overlap_advice(wl),
                time_ranges=[
                    TimeRange(r["start_ns"], r["end_ns"], None, "exposed HtoD") for r in longest
                ],
            )
        )
    return findings


def _parenthesized(parts: list[str]) -> str:
    return f" ({'; '.join(parts)})" if parts else ""


# The kernels of the devices that ran host-to-device copies: what overlap can hide them behind.
_COPY_DEVICE_KERNELS = """SELECT device_id, start_ns, end_ns FROM kernels
    WHERE device_id IN (SELECT device_id FROM h2d WHERE kind = 'HtoD')"""


def _host_alloc(wl: Workload) -> str:
    if wl.amd:
        return "`hipHostMalloc` (or `hipHostRegister` on an existing buffer)"
    return "`cudaMallocHost`/`cudaHostAlloc` (or `cudaHostRegister` on an existing buffer)"


# Below this many pageable copies the program copies each buffer about once: pinning then
# trades the copy's staging for the pinned allocation's own cost (page-locking the buffer).
_ONE_SHOT_COPIES = 4
_ONE_SHOT_ADVICE = (
    " These copies run only a few times: pinning pays where a buffer is copied again and "
    "again (page-locking it costs time too), so in a program that copies its data once, "
    "keep the data on the GPU between uses, or measure the pinned allocation against the "
    "time saved."
)


def _pin_advice(wl: Workload, kind: str, sites: list[dict]) -> str:
    where = f"; the largest come from `{sites[0]['call_site']}`" if sites else ""
    if wl.is_pytorch:
        if kind == "HtoD":
            feed = (
                "`DataLoader(..., pin_memory=True)` or `tensor.pin_memory()`"
                if wl.is_training
                else "`tensor.pin_memory()` on the input buffers (reuse them across requests)"
            )
            return (
                f"Allocate the source in pinned (page-locked) memory and copy asynchronously: "
                f"{feed}, then `.to(device, non_blocking=True)`{where}. For inputs reused "
                "every step, keep them resident on the GPU instead."
            )
        return (
            "Copy results into a preallocated pinned buffer (`torch.empty(..., "
            "pin_memory=True)`, then `dst.copy_(src, non_blocking=True)` and synchronize on an "
            f"event only when the host needs the values){where}. Avoid `.cpu()`/`.item()`/"
            "`.numpy()` on device tensors inside the loop: each is a pageable, blocking copy."
        )
    api = "hipMemcpyAsync" if wl.amd else "cudaMemcpyAsync"
    return (
        f"Allocate the host buffer with {_host_alloc(wl)} instead of `malloc`/`new`, and use "
        f"`{api}` on a non-default stream so the copy runs at full link bandwidth and "
        f"overlaps other work{where}."
    )


def _batch_advice(wl: Workload) -> str:
    if wl.is_pytorch:
        return (
            "Batch small tensors into one pinned buffer and copy once (e.g. `torch.cat` on the "
            "host, or a preallocated pinned staging tensor), or create the values directly on "
            "the GPU instead of copying scalars and shapes."
        )
    return (
        f"Pack the small host buffers into one {_host_alloc(wl)} staging buffer and copy it "
        "with one asynchronous call, or compute the values on the GPU."
    )


def _overlap_advice(wl: Workload) -> str:
    if wl.is_pytorch:
        return (
            "Prefetch the next batch on a side stream while the current step computes "
            "(`with torch.cuda.stream(copy_stream): x = x.to(dev, non_blocking=True)`, "
            "then `torch.cuda.current_stream().wait_stream(copy_stream)` and "
            "`x.record_stream(...)`), from pinned memory so the copy is truly async."
        )
    p = "hip" if wl.amd else "cuda"
    return (
        f"Split the data into chunks and pipeline them: `{p}MemcpyAsync` chunk i+1 on one "
        f"stream while kernels process chunk i on another, ordered with `{p}EventRecord`/"
        f"`{p}StreamWaitEvent`, from memory allocated with {_host_alloc(wl)}."
    )


_UVM_FAULTS = f"""
WITH k AS (
    SELECT name, start_ns, end_ns, {on_device("device_id", "start_ns")} AS ds,
           {on_device("device_id", "end_ns")} AS de
    FROM kernels
),
m AS (
    SELECT start_ns, end_ns, bytes, {on_device("device_id", "start_ns")} AS ds,
           {on_device("device_id", "end_ns")} AS de
    FROM memcpys WHERE kind = 'UVM_HtoD'
),
hit AS (
    SELECT k.name, k.start_ns AS k_start, k.end_ns AS k_end,
           greatest(m.start_ns, k.start_ns) AS s, least(m.end_ns, k.end_ns) AS e, m.bytes
    FROM k JOIN m ON m.ds < k.de AND m.de > k.ds
),
per_launch AS (
    SELECT name, k_start, k_end - k_start AS kernel_ns, count(*) AS migrations,
           sum(bytes) AS bytes, least(sum(e - s), k_end - k_start) AS copying_ns,
           -- with its pages resident the launch needs at least its migrated bytes at the
           -- GPU's memory bandwidth; the rest of its time went to page faults (between
           -- migrations the GPU waits on fault handling, which no copy record shows)
           greatest(least(sum(e - s), k_end - k_start),
                    CASE WHEN ? > 0 THEN k_end - k_start - CAST(sum(bytes) / ? AS BIGINT)
                         ELSE 0 END) AS stalled_ns
    FROM hit GROUP BY name, k_start, k_end
)
SELECT name, sum(migrations) AS migrations, sum(bytes) AS bytes, count(*) AS launches,
       sum(stalled_ns) AS stalled_ns, sum(copying_ns) AS copying_ns,
       sum(kernel_ns) AS kernel_ns
FROM per_launch GROUP BY name ORDER BY stalled_ns DESC, name
"""

# Prefetches the host undid: managed memory moved back to the host (its writes faulting)
# after a prefetch call and before the first kernel that ran after it.
_UNDONE_PREFETCH = """
WITH p AS (SELECT name, start_ns FROM api_calls WHERE name IN ('cudaMemPrefetchAsync',
               'hipMemPrefetchAsync', 'cuMemPrefetchAsync')),
first_p AS (SELECT min(start_ns) AS at_ns, count(*) AS calls, any_value(name) AS call FROM p),
k AS (SELECT min(start_ns) AS at_ns FROM kernels WHERE start_ns > (SELECT at_ns FROM first_p))
SELECT first_p.call, first_p.calls, count(m.start_ns) AS migrations,
       coalesce(sum(m.bytes), 0) AS bytes
FROM first_p, k LEFT JOIN memcpys m ON m.kind = 'UVM_DtoH' AND m.start_ns >= first_p.at_ns
     AND m.end_ns <= k.at_ns
WHERE first_p.at_ns IS NOT NULL AND k.at_ns IS NOT NULL
GROUP BY first_p.call, first_p.calls
"""


# Migrations to the host by when they ran against the kernels that faulted: those before
# the first such kernel started moved memory the GPU already had (prefetched, or left by
# earlier kernels) back to the host just before a kernel needed it, which it then faults
# in again; those after the last one ended are the host reading results, as expected.
_TO_HOST_SPLIT = f"""
WITH f AS (
    SELECT min(k.start_ns) AS first_ns, max(k.end_ns) AS last_ns FROM (
        SELECT DISTINCT k.start_ns, k.end_ns
        FROM (SELECT start_ns, end_ns, {on_device("device_id", "start_ns")} AS ds,
                     {on_device("device_id", "end_ns")} AS de FROM kernels) k
        JOIN (SELECT {on_device("device_id", "start_ns")} AS ds,
                     {on_device("device_id", "end_ns")} AS de
              FROM memcpys WHERE kind = 'UVM_HtoD') m
          ON m.ds < k.de AND m.de > k.ds
    ) k
),
d AS (
    SELECT CASE WHEN m.start_ns < f.first_ns THEN 'before'
                WHEN m.start_ns >= f.last_ns THEN 'after' ELSE 'during' END AS phase,
           m.bytes
    FROM memcpys m, f WHERE m.kind = 'UVM_DtoH' AND f.first_ns IS NOT NULL
)
SELECT count(*) FILTER (WHERE phase = 'before') AS before_migrations,
       coalesce(sum(bytes) FILTER (WHERE phase = 'before'), 0) AS before_bytes,
       count(*) FILTER (WHERE phase = 'during') AS during_migrations,
       coalesce(sum(bytes) FILTER (WHERE phase = 'during'), 0) AS during_bytes,
       count(*) FILTER (WHERE phase = 'after') AS after_migrations,
       coalesce(sum(bytes) FILTER (WHERE phase = 'after'), 0) AS after_bytes
FROM d
"""


def _to_host_split(db: TraceDB) -> dict[str, int]:
    """The migrations to the host before, among and after the faulting kernels
    (``_TO_HOST_SPLIT``); empty where no kernel faulted or none went to the host."""
    row = db.dicts(_TO_HOST_SPLIT)[0]
    split = {k: int(v or 0) for k, v in row.items()}
    return split if any(split.values()) else {}


def _to_host_note(
    total: dict[str, Any], split: dict[str, int], undone: dict[str, Any] | None, p: str
) -> str:
    """The summary's sentences on migrations to the host: split by when they ran against
    the faulting kernels where some kernel faulted, since the ones before the kernels are
    avoidable and the ones after them are the results being read."""
    n, nbytes = int(total["n"]), int(total["bytes"])
    head = f" {n:,} migrations ({fmt_bytes(nbytes)}) went back to the host"
    if not split:
        return head + ": host code touched managed memory the GPU had, faulting it back."
    # the prefetch's undoing is named only where it accounts for all of them (the advice
    # counts the migrations after the prefetch call, these all before the kernel)
    after_prefetch = undone is not None and int(undone["migrations"]) == split["before_migrations"]
    before = (
        "the host touching the memory after the prefetch, undoing it, so the kernel faulted "
        "it in again: avoidable (see the advice)"
        if after_prefetch
        else "the host touching managed memory the GPU already had, so the kernels fault it "
        "in again: avoidable (see the advice)"
    )
    during = (
        "the host touching managed memory between launches, or pages evicted to make room on "
        "the GPU"
    )
    after = (
        "the host reading the results back: expected (a prefetch to the host, "
        f"`{p}CpuDeviceId`, moves them in bulk rather than on faults)"
    )
    parts = [
        (split["before_migrations"], split["before_bytes"],
         "before the first faulting kernel started", before),
        (split["during_migrations"], split["during_bytes"],
         "while the faulting kernels ran or between them", during),
        (split["after_migrations"], split["after_bytes"],
         "after the last faulting kernel ended", after),
    ]  # fmt: skip
    shown = [(m, b, when, why) for m, b, when, why in parts if m]
    if len(shown) == 1:
        _, _, when, why = shown[0]
        return f"{head}, all {when}, {why}."
    return (
        head
        + ". "
        + " ".join(f"{m:,} ({fmt_bytes(b)}) ran {when}, {why}." for m, b, when, why in shown)
    )


def _fault_rows(db: TraceDB, wl: Workload) -> list[dict]:
    """Each faulting kernel's migrations and stalled time: once per trace, for the
    page-fault finding and for the grid finding that leaves that time out."""
    spec = wl.gpu.spec
    bytes_per_ns = spec.peaks.mem_gbps if spec and spec.peaks.mem_gbps else 0.0  # GB/s = B/ns
    return db.memo(
        ("uvm_faults", bytes_per_ns),
        lambda: db.dicts(_UVM_FAULTS, [bytes_per_ns, bytes_per_ns or 1.0]),
    )


def fault_stalled_ns(db: TraceDB) -> dict[str, int]:
    """Each kernel's time stalled on unified-memory page faults, as the page-fault finding
    counts it: other findings about the same kernel (its grid's idle SMs) leave it out,
    since SMs waiting on faults are not idle for want of blocks."""
    if not db.scalar("SELECT count(*) FROM memcpys WHERE kind = 'UVM_HtoD'"):
        return {}
    return {str(r["name"]): int(r["stalled_ns"]) for r in _fault_rows(db, workload_of(db))}


def _uvm_finding(db: TraceDB, t: Thresholds, uvm: list[dict], wl: Workload) -> Finding:
    n = sum(int(r["n"]) for r in uvm)
    nbytes = sum(int(r["bytes"]) for r in uvm)
    ns = sum(int(r["ns"]) for r in uvm)
    # The summed copy time is not how long the traffic lasted: say both, apart.
    span_ns = int(
        db.scalar(
            "SELECT coalesce(max(end_ns) - min(start_ns), 0) FROM memcpys WHERE kind LIKE 'UVM%'"
        )
        or 0
    )
    moved = (
        f"Unified memory moved {fmt_bytes(nbytes)} in {n:,} migrations taking {fmt_ns(ns)} "
        f"of copying, spread over {fmt_ns(span_ns)}"
    )
    p = "hip" if wl.amd else "cuda"
    spec = wl.gpu.spec
    bytes_per_ns = spec.peaks.mem_gbps if spec and spec.peaks.mem_gbps else 0.0  # GB/s = B/ns
    faults = _fault_rows(db, wl)
    undone = [r for r in db.dicts(_UNDONE_PREFETCH) if int(r["migrations"])]
    to_host = next((r for r in uvm if r["kind"] == "UVM_DtoH"), None)
    split = _to_host_split(db) if to_host and faults else {}
    host_note = _to_host_note(to_host, split, undone[0] if undone else None, p) if to_host else ""
    prefetch = (
        f"Prefetch managed memory to the device right before the kernels that use it "
        f"(`{p}MemPrefetchAsync(ptr, size, device, stream)`), after the host's last access "
        "(a read pulls pages back as a write does), and "
        f"back to the host (`{p}CpuDeviceId`) before host code reads it; mark data the GPU "
        f"only reads with `{p}MemAdvise(..., {p}MemAdviseSetReadMostly, ...)`; or use explicit "
        f"`{p}Malloc` buffers with pinned-memory copies for data the GPU touches every step."
    )
    if undone:
        u = undone[0]
        prefetch = (
            f"The program already prefetches (`{u['call']}`, {int(u['calls']):,} "
            f"{'call' if int(u['calls']) == 1 else 'calls'}), but the host touched the memory "
            f"after it: {int(u['migrations']):,} migrations ({fmt_bytes(int(u['bytes']))}) moved "
            "it back to the host before the kernel ran, which then faulted it in again. A host "
            "read faults pages back as a write does: move the host code that reads or writes "
            "this memory (a CPU reference computation, a check) before the prefetch or after "
            "the kernel, and issue the prefetch right before the launch on the kernel's "
            "stream; where the host must read it in between, mark it "
            f"`{p}MemAdvise(..., {p}MemAdviseSetReadMostly, ...)`, so host reads copy pages "
            "instead of moving them. Prefetch every managed buffer the kernel touches, its "
            "output too (first-touch faults on the GPU stall it as migrations do), and "
            f"results to the host (`{p}CpuDeviceId`) before host code reads them."
        )
    if faults:
        stalled = sum(int(r["stalled_ns"]) for r in faults)
        copying = sum(int(r["copying_ns"]) for r in faults)
        bw = (
            f"its migrated bytes at {spec.name}'s {spec.peaks.mem_gbps:,.0f} GB/s memory bandwidth"
            if spec and bytes_per_ns
            else "the migrations' own time"
        )
        top = faults[0]
        kernel = str(top["name"])  # titles' subjects are shortened by the ranking
        # Without a prefetch in the program, one must still move the faulted bytes, once,
        # before the kernel (hidden only where it overlaps other work): at least the time
        # the migrations themselves took, a rate the trace shows (a bulk prefetch is not
        # much faster: a T4's ran at half its PCIe link). Where the program prefetches and
        # the host undid it, that move is already paid.
        faulted = sum(int(r["bytes"]) for r in faults)
        move_ns = 0 if undone else copying
        return finding(
            ANALYZER,
            _UVM_SUBJECT,
            max(0, stalled - move_ns),
            db,
            t,
            subject_ns=stalled,
            title=f"GPU page faults: `{kernel}` waits on {int(top['migrations']):,} "
            f"unified-memory migrations ({fmt_bytes(int(top['bytes']))}) while it runs",
            impact_basis="Each faulting launch's time beyond what it needs with its pages "
            f"resident ({bw}), and at least the time migrations ran during it: the kernel "
            "waited on page faults instead of computing (between migrations the GPU waits on "
            "fault handling, which no copy record shows). An upper bound when the kernel is "
            "compute-bound; migrations are driver page traffic, not explicit copies."
            + (
                f" Less the {fmt_ns(move_ns)} the migrations themselves took "
                f"({fmt_bytes(faulted)} at {fmt_gbps(faulted, move_ns)}), which a prefetch "
                "still spends, once, before the kernel."
                if move_ns
                else (
                    " The program's prefetch already moves the data once: with nothing "
                    "undoing it, and the kernel's other managed buffers (its output too) "
                    "prefetched as well, the whole stall comes back."
                    if undone
                    else ""
                )
            ),
            summary=f"{moved}; {sum(int(r['migrations']) for r in faults):,} of them ran during "
            f"kernels ({fmt_ns(copying)} of copying), which ran "
            f"{fmt_ns(sum(int(r['kernel_ns']) for r in faults))} and were stalled on page "
            f"faults for about {fmt_ns(stalled)}." + host_note,
            evidence={
                "by_kind": uvm,
                "span_ns": span_ns,
                "faulting_kernels": [
                    {k: (int(v) if isinstance(v, int | float) else v) for k, v in r.items()}
                    for r in faults[:5]
                ],
                **({"undone_prefetch": undone[0]} if undone else {}),
                **({"to_host_split": split} if split else {}),
            },
            advice="The kernel touches managed memory that is not on the GPU, so it stalls "
            "while the driver migrates pages on demand. " + prefetch,
        )
    return finding(
        ANALYZER,
        _UVM_SUBJECT,
        0,
        db,
        t,
        subject_ns=int(ns),
        title=f"{n:,} unified-memory migrations ({fmt_bytes(nbytes)}), counted apart from copies",
        impact_basis="Informational: no migration ran while a kernel did, so none stalled a "
        "kernel; they are driver prefetches or host faults, not explicit copies.",
        summary=f"{moved}." + host_note,
        evidence={"by_kind": uvm, "span_ns": span_ns},
        advice=prefetch,
    )
