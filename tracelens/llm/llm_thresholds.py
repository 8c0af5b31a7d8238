"""Thresholds of the LLM latency analyzer, with their defaults.

They are read from :class:`tracelens.thresholds.Thresholds` when it has a field of the same
name (so ``--threshold NAME=VALUE`` overrides them once the field exists there) and fall back
to the defaults below otherwise.
"""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, float] = {
    # Queueing: reported when queueing is at least this share of the summed TTFT ...
    "llm_queue_min_share_pct": 20.0,
    # ... and the mean queueing per request is at least this long (ns).
    "llm_queue_min_mean_ns": 1_000_000,
    # Prefill stalls: reported when stalled decode gaps average at least this multiple of
    # the unstalled median gap.
    "llm_stall_min_ratio": 1.5,
    # KV growth: at least this many decode steps to fit the trend.
    "llm_kv_min_steps": 8,
    # KV growth: reported when growth costs at least this share of decode time ...
    "llm_kv_min_growth_pct": 10.0,
    # ... and adding the cache term explains at least this much more variance (R² points).
    "llm_kv_min_r2_gain": 0.1,
    # GPU idle in steps: reported when the GPU is busy less than this share of decode time ...
    "llm_decode_max_busy_pct": 60.0,
    # ... or of prefill time (prefill is normally compute-bound: a lower busy share is news).
    "llm_prefill_max_busy_pct": 60.0,
    # Launch-bound: median kernel shorter than this (ns) ...
    "llm_short_kernel_ns": 20_000,
    # ... and at least this many kernels per decode step.
    "llm_launch_bound_min_kernels": 20,
}


def llm_threshold(t: Any, name: str) -> float:
    return float(getattr(t, name, DEFAULTS[name]))
