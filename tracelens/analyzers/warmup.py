"""Captures that are mostly warm-up: first calls, autotuning, compilation, lazy loading.

A profile that starts with the program is dominated by what happens once: CUDA context
and cuDNN/MIOpen initialization, the caching allocator's first ``cudaMalloc`` calls,
cuDNN trying algorithms for each new convolution, JIT compilation (NVRTC, nvFuser,
Triton/Inductor), lazy module loading. None of it is in the steady state a user tunes,
and analyzing it as if it were gives wrong advice ("erratic" first convolutions, "set
cudnn.benchmark" for a capture that shows autotuning).

Evidence, each an interval on the host:

- ranges the program itself named warm-up (``warmup``, ``warm_up``, ``warm-up``);
- first calls of an operator (same input shapes) at least ``warmup_first_call_factor``
  times slower than its later calls;
- convolution calls whose kernels differ from the later calls of the same operator and
  shapes (cuDNN/MIOpen choosing an algorithm), and ``cudnnFind*``/``miopenFind*`` calls;
- compilation: NVRTC/hipRTC calls, module loading, Inductor/Dynamo/Triton/nvFuser ranges;
- lazy initialization: runtime calls such as ``cudaMalloc``/``cudaFree``/stream creation
  lasting at least ``warmup_min_call_ns``.

The warm-up span runs from the start of the analysed window to the end of the last such
interval that starts in the first ``warmup_max_start_pct`` of the window. When it covers at
least ``warmup_min_share_pct`` of the window, the finding says so, with its share and how
to record a steady state; its impact is the span (time a steady-state capture would not
contain). Idle-GPU findings then leave the span out (their idle time inside it is counted
here), operator-variance findings about slow first calls are explained by it, and every
other finding whose time ranges fall in the span says that it includes warm-up.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ingest.derive_gaps import LAUNCH_CALLS, SYNC_CALLS
from tracelens.analyzers.contract import finding
from tracelens.analyzers.finding_kernels import finding_kernels
from tracelens.analyzers.idle_gpu import cause_findings, idle_subject
from tracelens.analyzers.variance import slow_only_in_first_calls
from tracelens.core.findings import Finding, TimeRange
from tracelens.core.module_loads import MODULE_LOAD_API
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.core.workload import workload_of
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS

ANALYZER = "warmup"

_WARMUP_NAME = r"(?i)(^|[^a-z])warm[-_ ]?up"
# Run-time compilation and linking, and loading the result.
_COMPILE_API = (
    f"name LIKE 'nvrtc%' OR name LIKE 'hiprtc%' OR name LIKE 'cuLinkComplete%' OR {MODULE_LOAD_API}"
)
# Paths of the compilers' Python code (a Python-function event) or their range names.
_COMPILE_HOST = (
    r"(torch/_inductor/|torch/_dynamo/|compile_fx|triton/compiler/|(?i:nvfuser)|jit_compile)"
)
# Shorter compiler calls are bookkeeping ("is it compiling?"), not compilation.
_MIN_COMPILE_NS = 100_000
_AUTOTUNE_API = "name LIKE 'cudnnFind%' OR name LIKE 'miopenFind%'"
_LAZY_API = (
    "name IN ('cudaMalloc', 'cudaFree', 'cudaHostAlloc', 'cudaMallocHost', 'cudaSetDevice',"
    " 'cudaGetDeviceProperties', 'cudaDeviceGetStreamPriorityRange', 'cudaStreamCreate',"
    " 'cudaStreamCreateWithFlags', 'cudaStreamCreateWithPriority', 'cuInit', 'cuCtxCreate',"
    " 'cuDevicePrimaryCtxRetain', 'hipMalloc', 'hipFree', 'hipHostMalloc', 'hipInit',"
    " 'hipSetDevice', 'hipStreamCreate', 'hipStreamCreateWithFlags', 'hipGetDeviceProperties',"
    " 'hipGetDevicePropertiesR0600')"
)
_CONV_OPS = "({n} LIKE '%convolution%' OR {n} LIKE '%conv2d%' OR {n} LIKE '%conv3d%')"


@dataclass
class WarmupSpan:
    start_ns: int
    end_ns: int
    # evidence kind -> (host time in the span, examples)
    kinds: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


def warmup_span(db: TraceDB, t: Thresholds) -> WarmupSpan | None:
    """The warm-up span of ``db``'s trace (computed once), or None when there is none."""
    key = (t.warmup_first_call_factor, t.warmup_min_call_ns, t.warmup_max_start_pct)
    return db.memo(("warmup_span", key), lambda: _span(db, t))


def _intervals(db: TraceDB, t: Thresholds) -> dict[str, list[dict[str, Any]]]:
    first_calls = db.dicts(
        """WITH x AS (
               SELECT op_id, name, input_shapes, depth, start_ns, end_ns,
                      end_ns - start_ns AS d,
                      row_number() OVER (PARTITION BY name, input_shapes
                                         ORDER BY start_ns, op_id) AS seq,
                      count(*) OVER (PARTITION BY name, input_shapes) AS n
               -- Python-function events have no shapes and nest (the first _call_impl is
               -- the whole model): only operators with recorded shapes are compared.
               FROM cpu_ops
               WHERE input_shapes IS NOT NULL AND coalesce(category, '') != 'python_function'),
           later AS (SELECT name, input_shapes, median(d) AS m FROM x WHERE seq > 1
                     GROUP BY name, input_shapes)
           SELECT x.op_id, x.name, x.depth, x.start_ns, x.end_ns, x.d - l.m AS excess_ns
           FROM x JOIN later l ON l.name = x.name
                AND l.input_shapes IS NOT DISTINCT FROM x.input_shapes
           WHERE x.seq = 1 AND x.n >= 2 AND x.d >= ? * greatest(l.m, 1)
             AND x.d - l.m >= ?
             -- a first call that spent its time in a blocking call was waiting for the
             -- GPU (a copy to the host behind queued work), not warming up
             AND coalesce((SELECT sum(a.end_ns - a.start_ns) FROM api_calls a
                           WHERE a.name IN (SELECT unnest(?::VARCHAR[]))
                             AND a.start_ns >= x.start_ns AND a.end_ns <= x.end_ns), 0)
                 < 0.5 * x.d
           ORDER BY x.start_ns, x.depth""",
        [t.warmup_first_call_factor, t.warmup_min_call_ns, list(SYNC_CALLS)],
    )
    algo_changes: list[dict[str, Any]] = []
    if db.scalar(f"SELECT count(*) FROM cpu_ops WHERE {_CONV_OPS.format(n='name')}") and db.scalar(
        "SELECT count(*) FROM kernels"
    ):
        require(db, KERNEL_OPS)
        # The kernels a convolution call ran, as a set; a first call whose set differs from
        # the one its later calls settle on was choosing an algorithm.
        algo_changes = db.dicts(
            f"""WITH calls AS (
                   SELECT o.op_id, o.name, o.input_shapes, o.start_ns, o.end_ns,
                          list_sort(list_distinct(list(k.kernel_name))) AS kset,
                          row_number() OVER (PARTITION BY o.name, o.input_shapes
                                             ORDER BY o.start_ns, o.op_id) AS seq
                   FROM cpu_ops o JOIN kernel_ops k ON k.op_id = o.op_id
                   -- without shapes, calls of one operator are different layers, whose
                   -- kernels differ anyway: nothing says the first call was choosing
                   WHERE {_CONV_OPS.format(n="o.name")} AND o.input_shapes IS NOT NULL
                   GROUP BY o.op_id, o.name, o.input_shapes, o.start_ns, o.end_ns),
               settled AS (
                   SELECT name, input_shapes, mode(kset) AS kset, count(*) AS n FROM calls
                   WHERE seq > 1 GROUP BY name, input_shapes)
               SELECT c.op_id, c.name, c.start_ns, c.end_ns, len(c.kset) AS kernels
               FROM calls c JOIN settled s ON s.name = c.name
                    AND s.input_shapes IS NOT DISTINCT FROM c.input_shapes
               WHERE c.seq = 1 AND c.kset != s.kset
               ORDER BY c.start_ns"""
        )
    autotune_api = db.dicts(
        f"SELECT name, start_ns, end_ns FROM api_calls WHERE {_AUTOTUNE_API} ORDER BY start_ns"
    )
    compile_rows = db.dicts(
        f"""SELECT * FROM (
                SELECT name, start_ns, end_ns FROM api_calls WHERE {_COMPILE_API}
                UNION ALL
                SELECT name, start_ns, end_ns FROM cpu_ops WHERE regexp_matches(name, ?)
                UNION ALL
                SELECT name, start_ns, end_ns FROM ranges
                WHERE device_id IS NULL AND regexp_matches(name, ?))
            WHERE end_ns - start_ns >= ? ORDER BY start_ns, name""",
        [_COMPILE_HOST, _COMPILE_HOST, _MIN_COMPILE_NS],
    )
    # ... and the launch calls of a kernel's first run that take as long: loading its module
    # (lazy loading) and initializing the library it belongs to, not launching.
    # They explain time inside a span other evidence sets (``explains_only``); a first launch
    # alone never makes a warm-up span: idle_gpu reports a first launch's wait itself.
    lazy = db.dicts(
        f"""SELECT name, start_ns, end_ns, false AS explains_only FROM api_calls
            WHERE ({_LAZY_API}) AND end_ns - start_ns >= ?
            UNION ALL
            SELECT a.name, a.start_ns, a.end_ns, true FROM api_calls a
            JOIN (SELECT name, arg_min(correlation_id, start_ns) AS correlation_id
                  FROM kernels WHERE correlation_id IS NOT NULL GROUP BY device_id, name) k
              ON k.correlation_id = a.correlation_id
            WHERE a.name IN (SELECT unnest(?::VARCHAR[])) AND a.end_ns - a.start_ns >= ?
            ORDER BY start_ns""",
        [t.warmup_min_call_ns, list(LAUNCH_CALLS), t.warmup_min_call_ns],
    )
    named = db.dicts(
        """SELECT name, start_ns, end_ns FROM ranges
           WHERE device_id IS NULL AND regexp_matches(name, ?) ORDER BY start_ns""",
        [_WARMUP_NAME],
    )
    return {
        "annotated": named,
        "first_calls": first_calls,
        "autotuning": algo_changes + autotune_api,
        "compilation": compile_rows,
        "lazy_init": lazy,
    }


def _union_steps(intervals: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """For intervals sorted by start: after each one, (end of the union so far, its length)."""
    covered, cur_s, cur_e = 0, 0, None
    for s, e in intervals:
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            covered += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
        yield cur_e, covered + (cur_e - cur_s)


def _union_ns(rows: list[dict[str, Any]], lo: int, hi: int) -> int:
    clipped = sorted((max(lo, int(r["start_ns"])), min(hi, int(r["end_ns"]))) for r in rows)
    return max((length for _, length in _union_steps(clipped)), default=0)


def _span(db: TraceDB, t: Thresholds) -> WarmupSpan | None:
    w_start, w_end = db.window
    window = w_end - w_start
    if window <= 0:
        return None
    latest_start = w_start + window * t.warmup_max_start_pct / 100.0
    evidence = _intervals(db, t)
    # The span ends at the last evidence interval that keeps it mostly warm-up: at that
    # end, evidence covers at least warmup_min_coverage_pct of the span. A late one-off
    # (a cudaMalloc halfway through) never stretches it over the steady state.
    spans = sorted(
        (max(int(r["start_ns"]), w_start), min(int(r["end_ns"]), w_end))
        for rows in evidence.values()
        for r in rows
        if r["start_ns"] <= latest_start and r["end_ns"] > w_start and not r.get("explains_only")
    )
    end = w_start
    for union_end, covered in _union_steps(spans):
        if covered * 100 >= t.warmup_min_coverage_pct * (union_end - w_start):
            end = max(end, union_end)
    if end <= w_start:
        return None
    span = WarmupSpan(w_start, end)
    # Kinds nest (lazy initialization inside a slow first call inside a warm-up range): each
    # instant is counted once, under the most specific kind covering it, so the times add up.
    counted: list[dict[str, Any]] = []
    for kind in _SPECIFIC_FIRST:
        inside = [r for r in evidence[kind] if r["start_ns"] < end and r["end_ns"] > w_start]
        if not inside:
            continue
        before = _union_ns(counted, w_start, end)
        counted.extend(inside)
        span.kinds[kind] = {"host_ns": _union_ns(counted, w_start, end) - before, "rows": inside}
    return span


# The order in which warm-up kinds claim host time: the most specific explanation first.
_SPECIFIC_FIRST = ("lazy_init", "compilation", "autotuning", "first_calls", "annotated")

_KIND_TEXT = {
    "annotated": "ranges the program names warm-up",
    "first_calls": "first calls of operators far slower than their later calls",
    "autotuning": "convolutions choosing an algorithm (kernels differ from the later calls)",
    "compilation": "JIT compilation and module loading",
    "lazy_init": "initialization: context, libraries, lazy module loading and first allocations",
}


def _examples(kind: str, rows: list[dict[str, Any]]) -> list[str]:
    if kind == "first_calls":
        # the innermost of nested slow first calls names the work (cudnn_convolution, not conv2d)
        deepest = sorted(rows, key=lambda r: (-int(r.get("excess_ns") or 0), -int(r["depth"] or 0)))
        seen: list[str] = []
        for r in deepest:
            if r["name"] not in seen:
                seen.append(r["name"])
        return [f"`{n}`" for n in seen[:3]]
    # per name, the union of its intervals: nested or repeated ranges count once
    grouped: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault(r["name"], []).append(r)
    by_name = {
        name: _union_ns(rs, min(int(r["start_ns"]) for r in rs), max(int(r["end_ns"]) for r in rs))
        for name, rs in grouped.items()
    }
    top = sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    if kind == "annotated":
        # a range's own length, which can exceed its kind's host time: the instants an
        # earlier kind covers (initialization inside the warm-up range) are counted there
        return [f"`{n}` (a {fmt_ns(ns)} range)" for n, ns in top]
    return [f"`{n}` ({fmt_ns(ns)})" for n, ns in top]


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    span = warmup_span(db, t)
    w = workload_of(db)
    if span is None or w.graph_capture:
        return []  # a capture trace is one-off work by nature: its note says so
    share = db.pct_of_window(span.duration_ns)
    if share < t.warmup_min_share_pct:
        return []
    parts = []
    for kind in _SPECIFIC_FIRST:
        info = span.kinds.get(kind)
        if not info or info["host_ns"] <= 0:
            continue
        parts.append(
            f"{_KIND_TEXT[kind]} ({fmt_ns(info['host_ns'])} on the host: "
            f"{', '.join(_examples(kind, info['rows']))})"
        )
    steady = db.window_ns - span.duration_ns
    nsys = db.info.get("format") == "nsys_sqlite"
    if w.is_pytorch:
        how = (
            "Record a steady state: skip the first iterations with "
            "`torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=2, "
            "active=3), ...)` and call `prof.step()` each iteration, or start the profiler "
            "after a few warm-up iterations"
        )
        if nsys:
            how += (
                "; under Nsight Systems use `nsys profile --capture-range=cudaProfilerApi` "
                "with `torch.cuda.profiler.start()`/`stop()` around steady-state iterations"
            )
    else:
        how = (
            "Record a steady state: run the warm-up iterations first and profile only "
            "later ones, e.g. `nsys profile --capture-range=cudaProfilerApi` with "
            "`cudaProfilerStart()`/`cudaProfilerStop()` around them"
        )
    if "autotuning" in span.kinds:
        how += (
            ". The capture shows the convolution algorithm search itself: it runs once per "
            "new input shape, so keep shapes fixed in the steady state rather than tuning "
            "for it"
        )
    holder = _init_holder(db, span)
    advice = (
        how + f". Only {fmt_ns(max(steady, 0))} of this window is after the warm-up; the other "
        "findings describe that part, or say where they include warm-up."
        + (
            f" Where start-up itself costs, the {fmt_ns(holder[1])} inside the "
            f"{'first ' if holder[2] else ''}`{holder[0]}` is part of it: a server can pay "
            "it before taking requests (one pass at start), a short job pays it on every "
            "run, so shorten it at its source (the notes say what makes a first call slow "
            "on this host)."
            if holder is not None
            else ""
        )
    )
    return [
        finding(
            ANALYZER,
            ("capture",),
            span.duration_ns,
            db,
            t,
            title=f"This capture is mostly warm-up: the first {fmt_ns(span.duration_ns)} "
            f"({share:.1f}% of the window) run once per process, not in the steady state",
            impact_basis="The warm-up span: time a steady-state capture would not contain."
            + (" Idle GPU time inside it is counted here, not by idle_gpu." if db.devices else ""),
            summary="From the start of the window to "
            f"{fmt_ns(span.duration_ns)} the host was warming up: "
            + "; ".join(parts)
            + (
                " (each instant counted once, under the first of these that covers it)."
                if len(parts) > 1
                else "."
            )
            + (
                f" Most of the initialization calls' time ({fmt_ns(holder[1])}) is inside "
                f"the {'first ' if holder[2] else ''}`{holder[0]}`."
                if holder is not None
                else ""
            ),
            evidence={
                "span_start_offset_ns": 0,
                "span_end_offset_ns": span.duration_ns,
                "share_pct": round(share, 3),
                "steady_state_ns": max(steady, 0),
                "evidence": {
                    k: {"host_ns": v["host_ns"], "count": len(v["rows"])}
                    for k, v in sorted(span.kinds.items())
                },
            },
            advice=advice,
            time_ranges=[TimeRange(span.start_ns, span.end_ns, None, "warm-up")],
        )
    ]


def _init_holder(db: TraceDB, span: WarmupSpan) -> tuple[str, int, bool] | None:
    """The innermost operator holding at least half of the warm-up's initialization calls'
    host time (AlexNet's first `aten::cudnn_convolution`: 10.8 s of `cudaFree`,
    `cudaLaunchKernel` and stream creation), its share of it, and whether it is that
    operator's first call; None where no operator holds half."""
    rows = (span.kinds.get("lazy_init") or {}).get("rows") or []
    if not rows:
        return None
    starts = [int(r["start_ns"]) for r in rows]
    ends = [int(r["end_ns"]) for r in rows]
    got = db.rows(
        """WITH r AS (SELECT unnest(?::BIGINT[]) AS s, unnest(?::BIGINT[]) AS e),
                total AS (SELECT sum(e - s) AS ns FROM r)
           SELECT o.name, sum(r.e - r.s) AS ns,
                  NOT EXISTS (SELECT 1 FROM cpu_ops p WHERE p.name = o.name
                              AND p.start_ns < o.start_ns) AS first
           FROM cpu_ops o JOIN r ON r.s >= o.start_ns AND r.e <= o.end_ns
           GROUP BY o.op_id, o.name, o.start_ns, o.depth
           HAVING 2 * sum(r.e - r.s) >= (SELECT ns FROM total)
           ORDER BY o.depth DESC, ns DESC, o.start_ns LIMIT 1""",
        [starts, ends],
    )
    return (str(got[0][0]), int(got[0][1]), bool(got[0][2])) if got else None


def _share_in_span(db: TraceDB, f: Finding, span: WarmupSpan) -> float:
    """The share of a finding's subject's time that falls in the warm-up span: its
    kernels' time where it names kernels that ran, else its time ranges'."""
    lo, hi = span.start_ns, span.end_ns
    subject = finding_kernels(db, f)
    if subject is not None:
        sel, params = subject
        row = db.rows(
            f"""SELECT sum(greatest(0, least(end_ns, ?) - greatest(start_ns, ?))),
                       sum(end_ns - start_ns)
                FROM ({sel})""",
            [hi, lo, *params],
        )
        inside, total = row[0] if row else (0, 0)
        if total:
            return float(inside or 0) / float(total)
    if f.time_ranges:
        inside = sum(max(0, min(r.end_ns, hi) - max(r.start_ns, lo)) for r in f.time_ranges)
        total = sum(max(0, r.end_ns - r.start_ns) for r in f.time_ranges)
        return inside / total if total else 0.0
    return 0.0


def leave_out_warmup(findings: list[Finding], db: TraceDB, t: Thresholds) -> list[Finding]:
    """Make the other findings leave the warm-up span out, or say they include it.

    Their shares of the window become shares of the time after the span in
    :mod:`tracelens.analyzers.described_window`, with the rest of the rescaling.
    """
    if not any(f.analyzer == ANALYZER for f in findings):
        return findings
    span = warmup_span(db, t)
    if span is None:
        return findings
    after = {f.id: f for f in cause_findings(db, t, after_ns=span.end_ns)}
    kept: list[Finding] = []
    for f in findings:
        if f.analyzer == ANALYZER:
            kept.append(f)
            continue
        if idle_subject(f) is not None:
            # judged again over the gaps after the span: what the host did then, not the
            # warm-up's causes (an idle finding with nothing left after it is dropped)
            if f.id in after:
                kept.append(after[f.id])
            elif f.impact_ns <= 0:
                kept.append(f)
            continue
        if slow_only_in_first_calls(f):
            continue  # slow first calls: that is the warm-up, already reported
        share = _share_in_span(db, f, span)
        if share >= 0.999:
            continue  # all of it happened during the warm-up, which is counted already
        if share > 0.0 and f.impact_ns > 0:
            rest = int(f.impact_ns * (1.0 - share))
            f.impact_basis += (
                f" {100 * share:.0f}% of its time falls in the warm-up span, counted by the "
                f"warm-up finding: this is the rest ({fmt_ns(rest)} of {fmt_ns(f.impact_ns)})."
            )
            f.impact_ns = rest
        kept.append(f)
    return kept
