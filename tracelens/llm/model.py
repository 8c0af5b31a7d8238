"""What the LLM analysis computes, as msgspec Structs: its internals and the report's ``llm``.

The modules of :mod:`tracelens.llm` return these; :mod:`tracelens.llm.section` turns them
into the report's ``llm`` dict, whose shape :class:`LlmSection` declares for readers (the
renderers, the web API's schema). Every Struct refuses fields it does not declare, so a
report that grows a key without its declaration fails its validation in ``build_report``.

Times are nanoseconds. Aggregates that may fall between two whole nanoseconds (means,
interpolated percentiles, medians of DuckDB's ``median``) are floats; counts, sums and
instants are ints. ``None`` stands for "not measurable in this trace" (no GPU, no step of
that kind), never for zero.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, Struct, UnsetType

StepKind = Literal["prefill", "decode"]
# The serving engines whose own step labels are read (tracelens.llm.engine_labels).
Engine = Literal["vllm", "sglang"]
EnginePhaseName = Literal["prefill", "decode", "mixed"]


class Distribution(Struct, forbid_unknown_fields=True):
    """Count, mean, p50/p90/p95/p99 and max of a set of values (all but ``count`` None when
    the set is empty): DuckDB's ``quantile_cont``, NumPy's default interpolation."""

    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None


class LatencySummary(Struct, forbid_unknown_fields=True):
    """Request and token counts, latency distributions and throughput of the annotations."""

    requests: int
    output_tokens: int
    ttft_ns: Distribution
    tpot_ns: Distribution
    itl_ns: Distribution
    e2e_ns: Distribution
    span_ns: int | None
    output_tokens_per_s: float | None
    requests_per_s: float | None


class AnnotatedRequest(Struct, forbid_unknown_fields=True):
    """One annotated request: a row of the derived ``llm_per_request`` (which says what
    each is). SLO judging reads :class:`tracelens.llm.request_latency.RequestLatency`."""

    rid: str
    start_ns: int | None
    end_ns: int | None
    output_tokens: int
    first_token_ns: int | None
    last_token_ns: int | None
    ttft_ns: int | None
    tpot_ns: float | None
    e2e_ns: int | None
    queue_ns: int | None
    prefill_ns: int | None


class StepProfile(Struct, forbid_unknown_fields=True):
    """What the GPU did during the annotated steps of one kind (GPU fields None without a
    GPU in the trace)."""

    steps: int
    total_ns: int
    mean_ns: float | None
    p50_ns: float | None
    mean_batch: float | None
    max_batch: int | None
    gpu_busy_ns: int | None
    gpu_busy_pct: float | None
    kernels_per_step: float | None
    median_kernel_ns: float | None
    idle_by_cause: dict[str, int]


class StepProfiles(Struct, forbid_unknown_fields=True):
    prefill: StepProfile
    decode: StepProfile

    def of_kind(self, kind: StepKind) -> StepProfile:
        return self.prefill if kind == "prefill" else self.decode


class QueuedRequest(Struct, forbid_unknown_fields=True):
    rid: str
    start_ns: int
    prefill_start_ns: int
    queue_ns: int
    ttft_ns: int | None


class Queueing(Struct, forbid_unknown_fields=True):
    """How much of TTFT is queueing, and the requests passed over (not in the report: the
    ``llm_latency`` queueing finding shows it)."""

    requests: int
    queue_ns: int
    prefill_ns: int
    ttft_ns: int
    queue_share_pct: float | None
    max_queue_ns: int | None
    decode_steps_while_queued: int
    requests_passed_over: int
    max_decode_batch: int | None
    longest: list[QueuedRequest]


class StalledGap(Struct, forbid_unknown_fields=True):
    """A decode inter-token gap with a whole prefill step inside it."""

    rid: str
    token_index: int
    start_ns: int
    end_ns: int
    itl_ns: int
    prefills: int
    prefill_ns: int


class PrefillStalls(Struct, forbid_unknown_fields=True):
    decode_gaps: int
    stalled_gaps: int
    requests_stalled: int
    baseline_itl_ns: float | None
    mean_stalled_itl_ns: float | None
    excess_ns: int


class KvStep(Struct, forbid_unknown_fields=True):
    dur_ns: int
    batch: int
    cached: int


class KvGrowth(Struct, forbid_unknown_fields=True):
    """The least-squares fit of decode step time to batch size and cached tokens."""

    decode_steps: int
    ns_per_cached_token: float
    ns_per_batch_request: float
    r2: float
    r2_without_cache_term: float
    growth_ns: int
    decode_ns: int
    growth_pct_of_decode: float
    first_step: KvStep
    last_step: KvStep
    max_cached_tokens: int


class TtftBreakdown(Struct, forbid_unknown_fields=True):
    queue_ns: Distribution
    prefill_ns: Distribution
    queue_share_pct: float | None


class LlmLatency(Struct, kw_only=True, forbid_unknown_fields=True):
    """The part of the ``llm`` section that ``tracelens.annotate`` ranges give, in its order."""

    requests: int
    output_tokens: int
    ttft_ns: Distribution
    tpot_ns: Distribution
    itl_ns: Distribution
    e2e_ns: Distribution
    output_tokens_per_s: float | None
    requests_per_s: float | None
    span_ns: int | None
    ttft_breakdown: TtftBreakdown
    steps: StepProfiles
    kv_growth: KvGrowth | None
    prefill_stalls: PrefillStalls
    per_request: list[AnnotatedRequest]


class EnginePhase(Struct, forbid_unknown_fields=True):
    """The engine steps of one phase (GPU fields None without a GPU in the trace)."""

    steps: int
    total_ns: int
    step_ns: Distribution
    mean_requests: float | None
    max_requests: int | None
    prefill_tokens: int | None
    decode_tokens: int | None
    gpu_busy_ns: int | None
    gpu_busy_pct: float | None
    kernels_per_step: float | None
    median_kernel_ns: float | None
    idle_by_cause: dict[str, int]


class EnginePhases(Struct, forbid_unknown_fields=True):
    prefill: EnginePhase
    decode: EnginePhase
    mixed: EnginePhase

    def items(self) -> list[tuple[EnginePhaseName, EnginePhase]]:
        return [("prefill", self.prefill), ("decode", self.decode), ("mixed", self.mixed)]


class MixedSteps(Struct, forbid_unknown_fields=True):
    """How much mixed steps stretch the ITL of the decode requests that share them."""

    steps: int
    mean_ns: float | None
    decode_baseline_ns: float | None
    excess_ns: int | None
    decode_intervals: int
    share_of_itl_pct: float | None
    unknown_decode_requests: int
    prefill_tokens: int | None


class BetweenSteps(Struct, forbid_unknown_fields=True):
    """Host time from one step being done to the next step's range start."""

    intervals: int
    ns: int
    gpu_idle_ns: int | None
    idle_by_cause: dict[str, int]


class EngineStep(Struct, forbid_unknown_fields=True):
    """One listed step (see ``tracelens.llm.engine_steps`` for how it is timed)."""

    start_ns: int
    dur_ns: int
    range_ns: int
    gap_before_ns: int | None
    gpu_busy_ns: int | None
    kernels: int
    phase: EnginePhaseName
    requests: int | None
    decode_requests: int | None
    prefill_tokens: int | None
    decode_tokens: int | None
    context_tokens: int | None


class EngineStepsSection(Struct, forbid_unknown_fields=True):
    """``llm.engine_steps``: the steps vLLM or SGLang labelled themselves."""

    source: Engine
    count: int
    by_phase: EnginePhases
    span_ns: int | None
    prefill_tokens: int
    decode_tokens: int
    steps_with_unknown_tokens: int
    prefill_tokens_per_s: float | None
    decode_tokens_per_s: float | None
    itl_ns: Distribution
    itl_basis: str
    ttft_note: str
    mixed: MixedSteps
    between_steps: BetweenSteps
    steps: list[EngineStep]
    steps_listed: int


class ClientSummary(Struct, forbid_unknown_fields=True):
    """``llm.client``: a benchmark client's own measurements (``--bench``), as it saw them."""

    path: str
    # the client that wrote the file (vLLM's bench serve, SGLang's bench_serving, ...)
    tool: str
    requests: int
    completed: int
    failed: int
    output_tokens: int
    duration_ns: float
    ttft_ns: Distribution
    tpot_ns: Distribution
    itl_ns: Distribution
    e2e_ns: Distribution
    requests_per_s: float
    output_tokens_per_s: float
    # the load it was driven with, where the file says
    max_concurrency: int | None
    request_rate: float | None


class SloAttainment(Struct, forbid_unknown_fields=True):
    """``llm.slo``: how the judged requests fare against the objectives given (``--slo``);
    :mod:`tracelens.llm.slo` defines each number."""

    applies_to: Literal["client", "trace"]
    # the bounds given, by objective (``ttft_ns``, ``tpot_ns``, ``itl_ns``, ``e2e_ns``)
    objectives: dict[str, int]
    spec: str
    requests: int
    judged: int
    unjudged: int
    failed: int
    # by objective name, and ``all``; None with no request judged
    attainment_pct: dict[str, float | None]
    missed: dict[str, int]
    good_requests: int
    good_output_tokens: int
    duration_ns: float | None
    goodput_requests_per_s: float | None
    goodput_output_tokens_per_s: float | None
    worst_objective: str | None
    # The phase the misses' time went to: ``phase``, ``text`` and ``basis``, beside the
    # phase sums the requests judged show (which differ between a client and the trace).
    cause: dict[str, Any] | None


class LlmSection(Struct, kw_only=True, forbid_unknown_fields=True):
    """The report's ``llm`` section as its JSON has it.

    The latency fields are :class:`LlmLatency`'s, each present only when annotations were
    found (``latency`` gives them as one); ``engine_steps`` only when step labels were read;
    ``warnings`` whenever the trace's annotations or labels were read; ``client`` and
    ``slo`` only with a benchmark's results or objectives. A section of only ``warnings``
    (labels that did not parse) shows as report notes.
    """

    requests: int | UnsetType = UNSET
    output_tokens: int | UnsetType = UNSET
    ttft_ns: Distribution | UnsetType = UNSET
    tpot_ns: Distribution | UnsetType = UNSET
    itl_ns: Distribution | UnsetType = UNSET
    e2e_ns: Distribution | UnsetType = UNSET
    output_tokens_per_s: float | UnsetType | None = UNSET
    requests_per_s: float | UnsetType | None = UNSET
    span_ns: int | UnsetType | None = UNSET
    ttft_breakdown: TtftBreakdown | UnsetType = UNSET
    steps: StepProfiles | UnsetType = UNSET
    kv_growth: KvGrowth | UnsetType | None = UNSET
    prefill_stalls: PrefillStalls | UnsetType = UNSET
    per_request: list[AnnotatedRequest] | UnsetType = UNSET
    engine_steps: EngineStepsSection | UnsetType = UNSET
    warnings: list[str] | UnsetType = UNSET
    client: ClientSummary | UnsetType = UNSET
    slo: SloAttainment | UnsetType = UNSET

    @property
    def latency(self) -> LlmLatency | None:
        """The latency part, when the trace had ``tracelens.annotate`` ranges."""
        if self.requests is UNSET:
            return None
        return msgspec.convert(self, LlmLatency, from_attributes=True)
