"""Named, documented thresholds every analyzer reads; each can be overridden.

Override from the CLI with ``--threshold NAME=VALUE`` (repeatable) or in code with
``Thresholds(name=value)``. ``docs/thresholds.md`` lists them (generated from this file's
field docs by ``tracelens thresholds``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Thresholds:
    # Severity: share of the analysed window (GPU activity span) a finding would give back.
    severity_critical_pct: float = 25.0
    severity_high_pct: float = 10.0
    severity_medium_pct: float = 3.0
    severity_low_pct: float = 0.5

    # Idle GPU: a cause is reported when its gaps add up to at least this share of the window.
    idle_min_cause_pct: float = 1.0
    # Idle GPU: how many of the longest gaps a finding lists as evidence.
    idle_top_gaps: int = 5

    # H2D: copies below this size count as "small" (per-copy overhead dominates).
    h2d_small_copy_bytes: int = 64 * 1024
    # H2D: at least this many small copies before "many small copies" is reported.
    h2d_small_copy_min_count: int = 100
    # H2D: pinned-copy bandwidth (GB/s) for what pinning would save; 0 takes it from the
    # GPU's host link (PCIe 3/4/5 x16 about 12/25/50 GB/s, NVLink-C2C on Grace Hopper).
    h2d_pinned_gbps: float = 0.0
    # H2D: fixed cost of one pinned copy (ns) on top of its bytes over the link.
    h2d_copy_latency_ns: int = 2_000
    # H2D: a transfer size repeated at least this many times is "copied again every step".
    h2d_repeat_min_count: int = 5

    # Hot operators/kernels: how many to report and list.
    hot_top_n: int = 10
    # Hot: a kernel or operator below this share of GPU busy time is not reported.
    hot_min_share_pct: float = 5.0
    # Hot: at most this many informational (no savings estimate) hot-operator findings.
    hot_info_findings: int = 3

    # Cost model: share of the tensor-core (or FP32) peak a well-shaped library GEMM reaches
    # (cuBLAS/hipBLASLt reach 70-85% on large problems); an operator's time beyond its FLOPs
    # at this rate (or its bytes at the bandwidth below, whichever is longer) is its impact.
    cost_gemm_efficiency: float = 0.7
    # Cost model: share of peak a cuDNN/MIOpen convolution reaches (lower than GEMMs: im2col,
    # layout transforms and small channel counts cost extra; ResNet-50 layers with AMP run
    # at 40-60% of tensor-core peak on V100/A100).
    cost_conv_efficiency: float = 0.5
    # Cost model: share of peak a fused attention kernel reaches (FlashAttention-2 runs at
    # 50-70% of A100/H100 peak for head dims 64-128).
    cost_attention_efficiency: float = 0.5
    # Cost model: share of the memory bandwidth a streaming kernel reaches (STREAM-like
    # copies and elementwise kernels reach 70-90% of HBM bandwidth).
    cost_memory_efficiency: float = 0.7
    # Cost model: the least time a kernel takes however little it does (ns): launch,
    # ramp-up and tail of a grid. Each kernel's ideal time is at least this.
    cost_min_kernel_ns: int = 3_000

    # Variance: groups need at least this many instances to judge their spread.
    variance_min_count: int = 10
    # Variance: coefficient of variation (stddev / mean) at or above which a group is erratic.
    variance_min_cv: float = 0.5
    # Variance: and p95 at least this multiple of the median.
    variance_min_p95_over_p50: float = 1.5
    # Variance: report at most this many groups per kind (kernel, operator).
    variance_top_n: int = 10
    # Variance: groups whose time above the median is below this share of the window are
    # not worth a finding (nanosecond jitter on tiny kernels, rare host hiccups).
    variance_min_impact_pct: float = 0.5
    # Variance: a group whose durations correlate with launch order at least this strongly
    # (|Pearson r|) is a trend (shrinking or growing work), not erratic.
    variance_trend_min_corr: float = 0.7

    # Launch overhead: kernels shorter than this are "tiny" (launch cost rivals their work).
    launch_short_kernel_ns: int = 5_000
    # Launch overhead: report when launch-overhead gaps reach this share of the window ...
    launch_min_gap_pct: float = 1.0
    # ... or when at least this many kernels are tiny and they are at least half of all kernels.
    launch_min_short_kernels: int = 1000

    # Sync stalls: report a pattern when the GPU idles this share of the window after it ...
    sync_min_idle_pct: float = 0.5
    # ... or when the host is blocked in it for at least this share of the window.
    sync_min_blocked_pct: float = 1.0
    # ... provided the blocking recurs at least this many times (a final sync is harmless).
    sync_min_calls: int = 3
    # Sync stalls: how many individual blocking calls a finding lists as evidence.
    sync_top_calls: int = 5

    # Data loading: report when the GPU idles in data-loader gaps this share of the window.
    dataload_min_idle_pct: float = 1.0

    # Memory: peak reserved at or above this share of device memory is "near capacity".
    memory_near_capacity_pct: float = 90.0
    # Memory: reserved at least this multiple of allocated at the peak suggests fragmentation.
    memory_reserved_over_allocated: float = 1.5
    # Memory: and the unused reserve must be at least this large (bytes) to matter.
    memory_min_slack_bytes: int = 1024**3
    # Memory: cudaMalloc/cudaFree calls inside steps at or above this count are allocator churn.
    memory_min_churn_calls: int = 10

    # Communication: report when exposed (not overlapped) NCCL time reaches this share.
    comm_min_exposed_pct: float = 1.0
    # Communication: report a rank's waiting for its peers inside collective kernels when the
    # exposed part of it reaches this share of the window.
    comm_min_wait_pct: float = 1.0

    # Occupancy: a kernel group is reported when it holds at least this share of kernel time.
    occupancy_min_share_pct: float = 2.0
    # Occupancy: grids with fewer blocks than this many per SM (x SM count) underfill the GPU.
    occupancy_min_blocks_per_sm: float = 1.0
    # Occupancy: estimated achieved occupancy below this percentage is "low".
    occupancy_low_pct: float = 25.0

    # Steps: at least this many ProfilerStep iterations before judging their spread.
    steps_min_count: int = 3
    # Steps: the slowest step is "slow" when it exceeds the median by this factor.
    steps_slow_factor: float = 1.25

    # LLM: queueing is reported when it is at least this share of the summed TTFT ...
    llm_queue_min_share_pct: float = 20.0
    # LLM: ... and the mean queueing per request is at least this long (ns).
    llm_queue_min_mean_ns: int = 1_000_000
    # LLM: prefill stalls are reported when stalled decode gaps average at least this
    # multiple of the unstalled median gap.
    llm_stall_min_ratio: float = 1.5
    # LLM: at least this many decode steps to fit the KV-cache growth trend.
    llm_kv_min_steps: int = 8
    # LLM: KV growth is reported when it costs at least this share of decode time ...
    llm_kv_min_growth_pct: float = 10.0
    # LLM: ... and the cache term explains at least this much more variance (R² points).
    llm_kv_min_r2_gain: float = 0.1
    # LLM: GPU idle in steps is reported when the GPU is busy less than this share of
    # decode time ...
    llm_decode_max_busy_pct: float = 60.0
    # LLM: ... or of prefill time (prefill is normally compute-bound).
    llm_prefill_max_busy_pct: float = 60.0
    # LLM: decode is launch-bound when the median kernel is shorter than this (ns) ...
    llm_short_kernel_ns: int = 20_000
    # LLM: ... and a decode step runs at least this many kernels.
    llm_launch_bound_min_kernels: int = 20

    # Warm-up: a first call of an operator (same shapes) this many times slower than its
    # later calls is warm-up ...
    warmup_first_call_factor: float = 10.0
    # ... when it is also at least this much slower (ns); runtime calls such as cudaMalloc
    # or stream creation lasting this long count as lazy initialization.
    warmup_min_call_ns: int = 1_000_000
    # Warm-up: evidence that starts after this share of the window is not warm-up.
    warmup_max_start_pct: float = 50.0
    # Warm-up: the capture is "mostly warm-up" (a finding) when the span covers this share.
    warmup_min_share_pct: float = 20.0
    # Warm-up: the span ends where warm-up evidence still covers this share of it.
    warmup_min_coverage_pct: float = 50.0

    @classmethod
    def with_overrides(cls, overrides: dict[str, str]) -> Thresholds:
        known = {f.name: f for f in fields(cls)}
        values: dict[str, object] = {}
        for name, raw in overrides.items():
            if name not in known:
                raise ValueError(f"unknown threshold {name!r}")
            typ = known[name].type
            try:
                values[name] = int(raw) if typ in (int, "int") else float(raw)
            except ValueError:
                raise ValueError(f"threshold {name} needs a number, got {raw!r}") from None
            if not math.isfinite(values[name]):  # type: ignore[arg-type]
                # NaN compares false with everything: it would silently disable a gate
                raise ValueError(f"threshold {name} needs a finite number, got {raw!r}")
        return cls(**values)  # type: ignore[arg-type]
