"""The report's shape, as msgspec Structs: what ``tracelens analyze --format json`` writes.

:func:`tracelens.report.build.build_report` assembles the report as a JSON-able dict (what
is redacted, written, stored by the web app and served by its API) and validates it against
:class:`Report` before returning it; ``Report.of(report)`` is the typed view the text and
Markdown renderers, the web app's finding endpoints and its OpenAPI schema read.
``docs/json-schema.md`` documents the same shape field by field.

Every Struct refuses fields it does not declare and every field is required unless marked
``UNSET`` (absent from the JSON, not null), so a change to what the report holds fails the
validation until it is declared here. The top level is the exception: it also accepts
report sections registered in ``tracelens.report.build.SECTIONS`` that are not declared
yet (the HTML report shows those in a generic panel); the corpus checks require every
section a real report has to be declared.

Evidence stays a mapping per analyzer (its keys are declared in
:mod:`tracelens.analyzers.evidence_keys`); code that needs a fact from another analyzer's
evidence reads it through that analyzer's functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Self

import msgspec
from msgspec import UNSET, Struct, UnsetType

from tracelens.llm.model import LlmSection

SeverityLabel = Literal["critical", "high", "medium", "low", "info"]
TraceFormat = Literal["torch_chrome", "nsys_sqlite"]
WorkloadKind = Literal["training", "inference", "serving", "compute", "unknown"]
Framework = Literal["pytorch", "tensorrt", "jax", "openmp_offload", "cuda", "hip", "unknown"]
Attention = Literal["flash", "efficient", "fused", "math_sdpa"]
Bound = Literal["compute", "memory"]


class Source(Struct, forbid_unknown_fields=True):
    """The file analyzed (for a profiler folder: the chosen rank's)."""

    path: str
    format: TraceFormat
    # of the file as given (the compressed bytes of a .gz)
    sha256: str
    size_bytes: int


class TraceFacts(Struct, kw_only=True, forbid_unknown_fields=True):
    """Facts from the source; each present only when the trace records it."""

    format_version: str | UnsetType = UNSET
    tool: str | UnsetType = UNSET
    tool_version: str | UnsetType = UNSET
    host: str | UnsetType = UNSET
    rank: int | UnsetType = UNSET
    world_size: int | UnsetType = UNSET
    distributed_backend: str | UnsetType = UNSET
    event_count: int | UnsetType = UNSET
    # the first GPU activity (else the first host activity): what *_offset_ns count from
    t0_ns: int
    # wall-clock time of t0_ns, ns since the Unix epoch, where the trace tells (what a
    # series of runs is ordered by: tracelens.report.recorded_at)
    recorded_at_ns: int | UnsetType = UNSET
    # one per line: skipped events, replaced bytes, ...
    warnings: str | UnsetType = UNSET


class DeviceSummary(Struct, forbid_unknown_fields=True):
    """A GPU that ran work: its activity window and the busy share of it."""

    device_id: int
    name: str | None
    window_ns: int
    busy_ns: int
    busy_pct: float
    idle_pct: float


class Metrics(Struct, forbid_unknown_fields=True):
    kernel_count: int
    # explicit copies; unified-memory migrations are counted apart
    memcpy_count: int
    uvm_migration_count: int
    memset_count: int
    # explicit HtoD copies only
    h2d_bytes: int
    h2d_pageable_bytes: int
    h2d_time_ns: int
    dtoh_bytes: int
    # unified-memory migrations (the driver's page traffic for managed memory), which GPU
    # busy time counts: their bytes in all, to the device and to the host, and their
    # summed durations
    uvm_bytes: int
    uvm_htod_bytes: int
    uvm_dtoh_bytes: int
    uvm_time_ns: int
    # sum of busy / sum of windows over devices; None without a GPU
    gpu_busy_pct: float | None
    # first to last GPU activity on any device
    window_ns: int


class GpuFacts(Struct, forbid_unknown_fields=True):
    vendor: Literal["nvidia", "amd"] | None
    name: str | None
    model: str | None
    arch: str | None
    compute_capability: str | None
    # the matrix-unit data types the GPU has
    tensor_core_dtypes: list[str]
    # how the model was inferred when the trace did not say
    assumed: str | None


class Compiled(Struct, forbid_unknown_fields=True):
    torch_compile: bool
    cuda_graphs: bool


class Workload(Struct, forbid_unknown_fields=True):
    """What was recorded (``tracelens.core.workload``); advice is chosen from it."""

    kind: WorkloadKind
    kind_basis: str
    framework: Framework
    framework_basis: str
    gpu: GpuFacts
    compiled: Compiled
    attention: Attention | None


class TimeRange(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """An interval of the trace's own clock that a finding points at."""

    start_ns: int
    end_ns: int
    device_id: int | None
    label: str | None
    # present in a job report's cross-rank findings: the rank on whose own clock it is
    # (a straggler finding's: the late rank's ranges, then the others' waits for it)
    rank: int | None = None


class Finding(Struct, forbid_unknown_fields=True):
    """One problem, its cost, its proof and its fix (``tracelens.core.findings.Finding``
    as the report records it)."""

    # stable: a hash of the analyzer and its subject
    id: str
    analyzer: str
    title: str
    severity: SeverityLabel
    # the time it would give back
    impact_ns: int
    # of metrics.window_ns, or of the part impact_share_of names
    impact_pct: float
    impact_basis: str
    summary: str
    # analyzer-specific rows, counts, bytes, percentiles
    evidence: dict[str, Any]
    # Markdown, specific to the evidence
    advice: str
    time_ranges: list[TimeRange]
    # ids of broader findings whose time this one explains in more depth
    supersedes: list[str]
    # the time it is about (an operator's GPU time, the idle, blocked or copy time), at
    # least impact_ns: findings of equal impact are ordered by it
    subject_ns: int
    # false: no estimate of what it would give back could be made, so impact_ns (0) is
    # unknown rather than nothing (an operator with no recorded shapes or known GPU peaks);
    # required, so a stored report from before it is rebuilt rather than read as costed
    costed: bool
    # what impact_pct is a share of: "the analysed window", or the part of it the findings
    # describe ("the 79.6 ms after the warm-up"); required, so a stored report from before
    # it is rebuilt rather than read as shares of the whole window
    impact_share_of: str


class KernelStats(Struct, forbid_unknown_fields=True):
    """A kernel (or operator) by its total GPU time; percentiles are ``quantile_cont``."""

    name: str
    count: int
    total_ns: int
    mean_ns: int
    p50_ns: int
    p95_ns: int
    max_ns: int


class OpStats(KernelStats, forbid_unknown_fields=True):
    """An operator by the GPU time of the kernels it launched, one sample per call, with the
    cost model's view (None without recorded shapes, or without the GPU's peaks)."""

    # summed over the calls whose recorded shapes give it
    flops: int | None
    # compulsory traffic: inputs read, output written once
    bytes: int | None
    achieved_tflops: float | None
    achieved_gbps: float | None
    # arithmetic intensity against the GPU's ridge point
    bound: Bound | None


class Report(Struct, kw_only=True):
    """The whole report (schema ``tracelens.report/1``): the core keys, then the sections."""

    schema: str
    tracelens_version: str
    source: Source
    trace: TraceFacts
    devices: list[DeviceSummary]
    metrics: Metrics
    workload: Workload
    # ranked by impact_ns, descending
    findings: list[Finding]
    # positions in findings, in the order the text, Markdown and HTML reports present them
    # (absent from reports made before it was added)
    reading_order: list[int] | UnsetType = UNSET
    top_kernels: list[KernelStats]
    top_ops: list[OpStats]
    notes: list[str]
    # present when llm.* annotations or vLLM/SGLang step labels are found
    llm: LlmSection | UnsetType = UNSET

    @classmethod
    def of(cls, report: Mapping[str, Any]) -> Self:
        """The typed view of a report dict; ``msgspec.ValidationError`` (naming the path of
        the first field that does not fit) when it is not one."""
        return msgspec.convert(report, cls, strict=True)
