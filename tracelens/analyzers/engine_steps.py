"""Serving engines' own steps: where vLLM's and SGLang's step time goes (needs their labels).

Four findings, from the steps of :mod:`tracelens.llm.engine_steps`:

- ``decode_gpu_idle``: decode steps in which the GPU waits on the host (launch-bound when
  the kernels are many and short, or the waits are launch gaps);
- ``between_steps``: host time between steps with the GPU idle (scheduling, sampling,
  detokenizing);
- ``mixed_itl``: mixed steps whose prefill chunk stretches the decode requests' ITL;
- ``small_decode_batch``: decode batches below the GPU's ridge point, where the weight
  GEMMs are memory-bound and a larger batch costs almost no weight-GEMM time.

Each millisecond is counted once. The idle findings count only host-side gap causes
(``launch_overhead``, ``host_compute``, ``untraced``): GPU-side waits stay with idle_gpu,
which names what the GPU waited for, and synchronization and data-loading gaps with the
analyzers that name the call. A cause counts here only where these steps hold at least half
of that cause's idle time on the device; the finding then supersedes idle_gpu's finding for
it (and launch_overhead's, for launch gaps), and the rest of the time stays theirs. The
mixed-step finding is latency per inter-token interval, on average over all of them (as the
LLM latency findings are per request); the batch-size finding carries capacity, not time
(impact 0).
"""

from __future__ import annotations

import re
from collections import Counter

from tracelens.analyzers.contract import finding
from tracelens.analyzers.cost_model import cost_tables, math_peak
from tracelens.analyzers.idle_gpu import idle_finding_id
from tracelens.analyzers.launch_overhead import launch_finding_id
from tracelens.core.findings import Finding, TimeRange
from tracelens.core.kernel_kinds import classify
from tracelens.core.op_cost import MATMUL
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.core.workload import Workload, workload_of
from tracelens.derived import require
from tracelens.derived.kernel_ops import KERNEL_OPS
from tracelens.llm.engine_steps import engine_steps
from tracelens.llm.model import EngineStepsSection

ANALYZER = "engine_steps"

# Gap causes the host spends between or inside steps that no deeper analyzer explains.
CLAIMABLE = ("launch_overhead", "host_compute", "untraced")
# GPU-side waits: the GPU had work queued; idle_gpu says what it waited for.
_GPU_SIDE = "gpu_dependency"
_WEIGHT_BYTES = {"fp8": 1.0, "fp16": 2.0, "bf16": 2.0, "fp32": 4.0}
# Bytes per weight of the narrow types kernel names spell (MXFP4: 4 bits plus a shared
# 8-bit scale per 32 weights, rounded to the 4 bits).
_NAMED_WEIGHT_BYTES = {"mxfp4": 0.5, "fp8": 1.0}
_TOP = 5


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    e = engine_steps(db)
    if e is None or e.section is None:
        return []
    s = e.section
    findings = [
        _decode_gpu_idle(db, t, s),
        _between_steps(db, t, s),
        _mixed_itl(db, t, s),
        _small_decode_batch(db, t, s),
    ]
    return [f for f in findings if f is not None]


def _graphs(w: Workload) -> str:
    return "HIP graphs" if w.gpu.vendor == "amd" else "CUDA graphs"


def _claims(db: TraceDB, table: str, where: str) -> tuple[dict[str, int], int, list[str]]:
    """Host-side idle of ``table`` (per cause), what of it is counted here, and superseded ids.

    A (device, cause) counts here when this part holds at least half of that cause's idle
    time on the device: the ranking then drops the broader finding, which would otherwise
    count the same gaps again.
    """
    rows = db.rows(
        f"""WITH part AS (
                SELECT i.device_id, i.cause, sum(i.ns) AS ns FROM {table} i
                JOIN engine_steps s USING (step_id) WHERE {where} GROUP BY ALL),
            total AS (
                SELECT device_id, cause, sum(end_ns - start_ns) AS ns FROM gaps GROUP BY ALL)
            SELECT p.device_id, p.cause, p.ns, t.ns
            FROM part p JOIN total t USING (device_id, cause)
            WHERE p.cause <> '{_GPU_SIDE}' ORDER BY p.device_id, p.cause"""
    )
    by_cause: Counter[str] = Counter()
    counted = 0
    supersedes: list[str] = []
    for device_id, cause, ns, total in rows:
        by_cause[cause] += int(ns)
        if cause in CLAIMABLE and 2 * int(ns) >= int(total):
            counted += int(ns)
            supersedes.append(idle_finding_id(device_id, cause))
            if cause == "launch_overhead":
                supersedes.append(launch_finding_id(device_id))
    return dict(by_cause.most_common()), counted, supersedes


def _decode_gpu_idle(db: TraceDB, t: Thresholds, s: EngineStepsSection) -> Finding | None:
    d = s.by_phase.decode
    if not d.steps or d.gpu_busy_pct is None or not db.devices:
        return None
    in_window = sum(
        int(r[0])
        for r in db.rows(
            "SELECT g.in_window_ns FROM engine_step_gpu g JOIN engine_steps s USING (step_id) "
            "WHERE s.phase = 'decode'"
        )
    )
    host_idle, counted, supersedes = _claims(db, "engine_step_idle", "s.phase = 'decode'")
    waited = sum(host_idle.values())
    max_busy = t.llm_decode_max_busy_pct
    if not in_window or 100.0 * waited / in_window < 100.0 - max_busy:
        return None
    w = workload_of(db)
    median_kernel, per_step = d.median_kernel_ns, d.kernels_per_step or 0.0
    top_cause = next(iter(host_idle))
    launch_bound = top_cause == "launch_overhead" or (
        median_kernel is not None
        and median_kernel < t.llm_short_kernel_ns
        and per_step >= t.llm_launch_bound_min_kernels
    )
    share = 100.0 * waited / in_window
    graphs = _graphs(w)
    if launch_bound:
        title = (
            f"Decode steps are launch-bound: {per_step:.0f} kernels of median "
            f"{fmt_ns(median_kernel)} per step, the GPU waiting on the host {share:.0f}% of "
            "decode time"
        )
    else:
        title = f"GPU waits on the host {share:.0f}% of decode step time (mostly {top_cause})"
    if s.source == "sglang":
        engine_advice = (
            f"Replay decode steps from {graphs}: do not pass `--disable-cuda-graph`, and set "
            "`--cuda-graph-max-bs` at least to the running batch size (a larger batch runs "
            "eagerly); `--enable-torch-compile` fuses the small kernels that remain."
        )
    else:
        engine_advice = (
            f"Replay decode steps from {graphs}: do not run with `--enforce-eager`, and make "
            "`--compilation-config '{\"cudagraph_capture_sizes\": [...]}'` cover the decode "
            "batch sizes you run (a batch larger than the largest captured size runs "
            "eagerly)."
        )
    advice = engine_advice + (
        " The host then issues one graph launch per step instead of one launch per kernel."
        if launch_bound
        else " Host code between launches (the step's Python: input preparation, sampling, "
        "the model's own Python) is the rest: a graph removes it from the step."
    )
    return finding(
        ANALYZER,
        ("decode_gpu_idle",),
        counted,
        db,
        t,
        title=title,
        impact_basis=f"GPU idle inside the {d.steps:,} decode steps while the host ran "
        f"(host-side gap causes; {fmt_ns(waited)} in all), counted where these steps hold at "
        "least half of a cause's idle time on the device; graph replay gives back about "
        "this much decode step time.",
        summary=f"{d.steps:,} decode steps took {fmt_ns(d.total_ns)}; the GPU was busy "
        f"{d.gpu_busy_pct:.1f}% of it and waited on the host {fmt_ns(waited)} "
        f"({share:.1f}%), running {per_step:.1f} kernels per step (median "
        f"{fmt_ns(median_kernel)}). Decode step time is the inter-token latency: ITL p50 "
        f"{fmt_ns(s.itl_ns.p50)}.",
        evidence={
            "source": s.source,
            "decode_steps": d.steps,
            "decode_ns": d.total_ns,
            "gpu_busy_ns": d.gpu_busy_ns,
            "gpu_busy_pct": round(d.gpu_busy_pct, 3),
            "host_idle_ns": waited,
            "host_idle_ns_by_cause": host_idle,
            "idle_ns_by_cause": d.idle_by_cause,
            "counted_ns": counted,
            "kernels_per_step": round(per_step, 2),
            "median_kernel_ns": median_kernel,
            "launch_bound": launch_bound,
        },
        advice=advice,
        time_ranges=_slowest(db, "decode"),
        supersedes=supersedes,
    )


def _slowest(db: TraceDB, phase: str) -> list[TimeRange]:
    return [
        TimeRange(int(a), int(b), None, f"{phase} step")
        for a, b in db.rows(
            "SELECT start_ns, end_ns FROM engine_steps WHERE phase = ? "
            "ORDER BY dur_ns DESC, step_id LIMIT ?",
            [phase, _TOP],
        )
    ]


def _between_steps(db: TraceDB, t: Thresholds, s: EngineStepsSection) -> Finding | None:
    b = s.between_steps
    if not b.intervals or not db.devices:
        return None
    host_idle, counted, supersedes = _claims(db, "engine_between_idle", "true")
    waited = sum(host_idle.values())
    if db.pct_of_window(waited) < t.idle_min_cause_pct:
        return None
    details = db.dicts(
        """SELECT g.detail, sum(least(s.start_ns, g.end_ns) - greatest(s.prev_done_ns, g.start_ns))
                      AS ns
           FROM engine_steps s JOIN gaps g
             ON g.start_ns < s.start_ns AND g.end_ns > s.prev_done_ns
           WHERE s.gap_before_ns > 0 AND g.detail IS NOT NULL AND g.cause <> ?
           GROUP BY g.detail ORDER BY ns DESC, g.detail LIMIT ?""",
        [_GPU_SIDE, _TOP],
    )
    mean_gap = b.ns / b.intervals
    top = f" (mostly `{details[0]['detail']}`)" if details else ""
    if s.source == "sglang":
        engine_advice = (
            "Keep SGLang's overlap scheduler on (no `--disable-overlap-schedule`): it prepares "
            "the next batch while the GPU runs the current one."
        )
    else:
        engine_advice = (
            "Run vLLM with `--async-scheduling`: the scheduler prepares the next step while "
            "the GPU runs the current one."
        )
    steps = s.count
    return finding(
        ANALYZER,
        ("between_steps",),
        counted,
        db,
        t,
        title=f"GPU idle {fmt_ns(waited)} between engine steps while the host schedules, "
        f"samples and detokenizes ({fmt_ns(mean_gap)} per gap){top}",
        impact_basis="GPU idle in the host time from one step being done to the next step's "
        "start (host-side gap causes), counted where it holds at least half of a cause's idle "
        "time on the device; overlapping that host work with the GPU gives it back.",
        summary=f"{b.intervals:,} of the {steps:,} steps start after the previous one "
        f"was done: {fmt_ns(b.ns)} of host time between steps, {fmt_ns(waited)} of it "
        "with the GPU idle. Every running request's next token waits for it too.",
        evidence={
            "source": s.source,
            "intervals": b.intervals,
            "between_ns": b.ns,
            "mean_gap_ns": round(mean_gap),
            "host_idle_ns": waited,
            "host_idle_ns_by_cause": host_idle,
            "counted_ns": counted,
            "host_activity": [{"detail": r["detail"], "ns": int(r["ns"])} for r in details],
        },
        advice=engine_advice
        + " What remains is per-step host work on the engine's critical path: structured-"
        "output grammars, logprobs, stop-string checks and detokenizing run once per step, "
        "and an engine process short of CPU cores (shared with the API server or tokenizers) "
        "runs all of it slower.",
        time_ranges=[
            TimeRange(int(a), int(c), None, "between steps")
            for a, c in db.rows(
                "SELECT prev_done_ns, start_ns FROM engine_steps WHERE gap_before_ns > 0 "
                "ORDER BY gap_before_ns DESC, step_id LIMIT ?",
                [_TOP],
            )
        ],
        supersedes=supersedes,
    )


def _mixed_itl(db: TraceDB, t: Thresholds, s: EngineStepsSection) -> Finding | None:
    m = s.mixed
    base, mean = m.decode_baseline_ns, m.mean_ns
    if not m.steps or not base or mean is None:
        return None
    ratio = mean / base
    if ratio < t.llm_stall_min_ratio:
        return None
    itl = s.itl_ns
    weighted = int(
        db.scalar(
            "SELECT coalesce(sum(greatest(0, dur_ns - ?) * decode_requests), 0) "
            "FROM engine_steps WHERE phase = 'mixed' AND decode_requests > 0",
            [base],
        )
        or 0
    )
    intervals = itl.count
    impact = round(weighted / intervals) if intervals else 0
    chunk = m.prefill_tokens / m.steps if m.prefill_tokens is not None else None
    share = m.share_of_itl_pct
    how_often = (
        f"{share:.1f}% of inter-token intervals"
        if share is not None and m.decode_intervals
        else f"{m.steps:,} steps"
    )
    if s.source == "sglang":
        knob = (
            "Lower `--chunked-prefill-size` (the prompt tokens one step may take) so each "
            "chunk stretches a decode step less, at some cost in time to first token; or "
            "run prefill on separate workers (`--disaggregation-mode prefill|decode`)."
        )
    else:
        knob = (
            "Lower `--max-num-batched-tokens` (the token budget of a step, which bounds the "
            "prefill chunk that shares it with the decodes) so each chunk stretches a decode "
            "step less, at some cost in time to first token; or run prefill on separate "
            "instances (disaggregated prefill, `--kv-transfer-config`)."
        )
    return finding(
        ANALYZER,
        ("mixed_itl",),
        impact,
        db,
        t,
        title=f"Prefill chunks stretch decode ITL: {m.steps:,} mixed steps ({how_often}) "
        f"average {fmt_ns(mean)}, {ratio:.1f}× the {fmt_ns(base)} decode step",
        impact_basis="Mixed-step time beyond the median decode step, once per decode request "
        f"in the step ({fmt_ns(weighted)} summed), averaged over all {intervals:,} "
        "inter-token intervals: the ITL a request gains on average from sharing steps with "
        "prefill chunks.",
        summary=f"{m.steps:,} steps mix a prefill chunk"
        + (f" (mean {chunk:,.0f} prompt tokens)" if chunk is not None else "")
        + f" with running decodes; those decodes wait {fmt_ns(mean)} for their next token "
        f"instead of {fmt_ns(base)}, {fmt_ns(m.excess_ns)} more in all. ITL p50 "
        f"{fmt_ns(itl.p50)}, p99 {fmt_ns(itl.p99)}.",
        evidence={
            "source": s.source,
            "mixed_steps": m.steps,
            "mean_mixed_ns": mean,
            "decode_baseline_ns": base,
            "ratio": round(ratio, 3),
            "excess_ns": m.excess_ns,
            "excess_x_decode_requests_ns": weighted,
            "decode_intervals_in_mixed": m.decode_intervals,
            "share_of_itl_pct": None if share is None else round(share, 3),
            "mean_chunk_tokens": None if chunk is None else round(chunk, 1),
            "itl_p50_ns": itl.p50,
            "itl_p99_ns": itl.p99,
        },
        advice=knob,
        time_ranges=_slowest(db, "mixed"),
    )


def _attention_share(db: TraceDB) -> float | None:
    """Attention kernels' share of all kernel time (percent), None without kernels: the part
    of a decode step that grows with each request's KV cache."""
    total = 0
    attention = 0
    for name, ns in db.rows("SELECT kernel_name, sum(dur_ns) FROM kernel_ops GROUP BY 1"):
        total += int(ns)
        if name is not None and classify(name).key == "attention":
            attention += int(ns)
    return 100.0 * attention / total if total else None


def _weight_dtype(db: TraceDB, t: Thresholds) -> tuple[str, bool]:
    """The GEMMs' data type by time from the cost model, else from the dense GEMM kernels'
    names (FP8 kernels), or 16-bit assumed."""
    by_dtype: Counter[str] = Counter()
    for op in cost_tables(db, t).ops.values():
        if op.kind == MATMUL:
            for dt in op.dtypes & set(_WEIGHT_BYTES):
                by_dtype[dt] += op.costed_ns
    if by_dtype:
        return max(sorted(by_dtype), key=lambda k: by_dtype[k]), False
    if _named_weight_dtype(db, experts=False) == "fp8":
        return "fp8", False
    return "bf16", True


# Weight types GEMM kernel names spell (``_matmul_ogs_…_bf16xbf16xmxfp4``: activations x
# activations x weights; FP8 GEMMs say fp8/f8 or the e4m3/e5m2 formats).
_NAMED_WEIGHTS = (
    ("mxfp4", re.compile(r"(?i)mxfp4|nvfp4|fp4")),
    ("fp8", re.compile(r"(?i)fp8|f8f8|e4m3|e5m2")),
)
_EXPERT_SQL = "regexp_matches(lower(op_name || ' ' || kernel_name), 'moe|expert|matmul_ogs')"


def _named_weight_dtype(db: TraceDB, experts: bool) -> str | None:
    """The low-precision weight type that the GEMM kernels holding most GEMM time name,
    among the expert (mixture-of-experts) GEMMs or the others; None where they name none."""
    require(db, KERNEL_OPS)
    where = _EXPERT_SQL if experts else f"NOT {_EXPERT_SQL}"
    by_dtype: Counter[str] = Counter()
    for name, ns in db.rows(
        f"SELECT kernel_name, sum(dur_ns) FROM kernel_ops WHERE {where} GROUP BY kernel_name"
    ):
        if classify(name).key not in ("gemm", "gemm_fp32"):
            continue
        dtype = next((d for d, rx in _NAMED_WEIGHTS if rx.search(name)), "16-bit or wider")
        by_dtype[dtype] += int(ns)
    if not by_dtype:
        return None
    top = max(sorted(by_dtype), key=lambda k: by_dtype[k])
    return None if top == "16-bit or wider" else top


def _light_load_text(db: TraceDB, dtype: str, expert_dtype: str | None) -> str:
    """What serves a small batch for less: fewer GPUs where the trace is one of several
    ranks (or does not say), narrower weights where they are not narrow already."""
    text = ""
    if int(db.info.get("world_size") or 0) != 1:
        text += (
            " If the load is this light, fewer GPUs (less tensor parallelism) serve it at "
            "about the same latency."
        )
    if dtype not in _NAMED_WEIGHT_BYTES and expert_dtype is None:
        text += (
            " FP8 weights (a quantized checkpoint) halve the bytes each memory-bound step "
            "reads, so steps get shorter at this batch size."
        )
    return text


def _small_decode_batch(db: TraceDB, t: Thresholds, s: EngineStepsSection) -> Finding | None:
    d = s.by_phase.decode
    spec = workload_of(db).gpu.spec
    if not d.steps or spec is None:
        return None
    tokens = db.rows(
        "SELECT median(decode_tokens), max(decode_tokens) FROM engine_steps "
        "WHERE phase = 'decode' AND decode_tokens > 0"
    )[0]
    if tokens[0] is None:
        return None
    median_tokens, max_tokens = float(tokens[0]), int(tokens[1])
    dtype, assumed = _weight_dtype(db, t)
    peak = math_peak(spec, MATMUL, dtype)
    if peak is None or not spec.peaks.mem_gbps:
        return None
    ridge = peak[1] * 1e3 / spec.peaks.mem_gbps  # FLOP per byte
    # A weight GEMM of M tokens does 2·M·K·N FLOPs and reads at least the K·N weights:
    # its intensity is at most 2·M / (bytes per weight), below the ridge for small M.
    per_weight = _WEIGHT_BYTES[dtype]
    compute_from = ridge * per_weight / 2
    if median_tokens >= compute_from:
        return None
    gpu = spec.name
    # Mixture-of-experts layers: each expert's GEMM sees only batch x top-k / experts tokens,
    # so the threshold below holds for the dense projections only. Operators and kernels
    # say so (Python function names also carry "moe" in dense models' engines).
    moe = bool(
        db.scalar(
            "SELECT count(*) > 0 FROM (SELECT name FROM cpu_ops "
            "WHERE category <> 'python_function' UNION ALL SELECT name FROM kernels "
            "UNION ALL SELECT op_name FROM captured_launches) "
            "WHERE regexp_matches(lower(name), 'moe|expert|matmul_ogs')"
        )
    )
    # The experts' weights may be narrower than the dense projections' (MXFP4 experts
    # beside BF16 attention): their kernels say so, and fewer bytes per weight only move
    # their ridge further out.
    expert_dtype = _named_weight_dtype(db, experts=True) if moe else None
    moe_text = (
        " This is a mixture-of-experts model: each expert's GEMM sees only about batch × "
        "top-k / experts tokens, so the expert GEMMs stay memory-bound to larger batches (by "
        "experts / top-k)"
        + (
            f" (their kernels read {expert_dtype.upper()} weights, "
            f"{_NAMED_WEIGHT_BYTES[expert_dtype]:g} byte each: more FLOPs per byte read, "
            "which brings a GEMM nearer the ridge and offsets part of that factor)"
            if expert_dtype
            else ""
        )
        + f"; the figure holds for the dense projections (attention, and shared experts "
        f"where the model has them; {dtype})."
        if moe
        else ""
    )
    sheet = spec.sustained_note(peak[1], peak[0])
    attention = _attention_share(db)
    if s.source == "sglang":
        knobs = "`--max-running-requests`, with `--mem-fraction-static` for KV-cache room"
    else:
        knobs = "`--max-num-seqs`, with `--gpu-memory-utilization` for KV-cache room"
    return finding(
        ANALYZER,
        ("small_decode_batch",),
        0,
        db,
        t,
        # what it is about: the GPU time of every decode step, each reading all the weights
        # for few tokens (the steps' wall time where no GPU work is attributed to them)
        subject_ns=d.gpu_busy_ns if d.gpu_busy_ns is not None else d.total_ns,
        # its saving is capacity, which the trace cannot price: "little or no time to give
        # back" would bury the lever of a memory-bound decode step, so it is listed with the
        # other findings whose savings are unknown, by the decode time it is about
        costed=False,
        title=f"Decode batches are small for the {gpu}: {median_tokens:.0f} tokens per step "
        "keep the weight GEMMs memory-bound "
        + (
            f"(the dense ones compute-bound from about {compute_from:.0f}, the experts' only "
            "at larger batches)"
            if moe
            else f"(compute-bound from about {compute_from:.0f})"
        ),
        impact_basis="Capacity, not time: below the ridge point each decode step reads all "
        "the weights for few tokens, so a larger batch adds tokens at almost no weight-GEMM "
        "time (its attention still reads each added request's KV cache, and that grows "
        "with the batch); what that is worth depends on the load waiting.",
        summary=f"Decode steps carry a median {median_tokens:.0f} tokens (at most "
        f"{max_tokens:,}). A weight GEMM of M tokens does at most 2·M FLOPs per "
        f"{per_weight:g}-byte {dtype} weight it reads: under the {gpu}'s ridge point of "
        f"{ridge:.0f} FLOP per byte ({peak[1]:.0f} TFLOP/s {peak[0]}{sheet} over "
        f"{spec.peaks.mem_gbps:,.0f} GB/s) it is memory-bound until about "
        f"{compute_from:.0f} tokens per step. Decode runs at "
        f"{s.decode_tokens_per_s or 0:,.0f} tokens/s."
        + (" The weights are taken as 16-bit: the trace records no GEMM shapes." if assumed else "")
        + moe_text,
        evidence={
            "source": s.source,
            "gpu": gpu,
            "median_decode_tokens": median_tokens,
            "max_decode_tokens": max_tokens,
            "weight_dtype": dtype,
            "weight_dtype_assumed": assumed,
            "ridge_flop_per_byte": round(ridge, 3),
            "peak_used": peak[0],
            "peak_tflops": peak[1],
            "memory_gbps": spec.peaks.mem_gbps,
            "compute_bound_from_tokens": round(compute_from, 1),
            "mixture_of_experts": moe,
            "expert_weight_dtype": expert_dtype,
            "decode_tokens_per_s": s.decode_tokens_per_s,
        },
        advice=f"If requests wait for a slot, raise the batch limit ({knobs}): decode "
        "throughput grows almost with the batch until the GEMMs become compute-bound, and "
        "each step gets only a little longer (attention reads each request's KV cache, "
        "so long contexts cost more"
        + (
            f": here attention is {attention:.0f}% of the kernel time, about "
            f"{attention / median_tokens:.1f}% of a step per request at this context length)."
            if attention is not None and median_tokens > 0
            else ")."
        )
        + _light_load_text(db, dtype, expert_dtype)
        + " Check the ITL target before raising the batch.",
    )
