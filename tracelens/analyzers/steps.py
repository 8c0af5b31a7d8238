"""Steps: per-iteration (``ProfilerStep#N``) time, its spread, the slowest step and what differed.

Steps come from the profiler's ``ProfilerStep#N`` annotations (host ranges in current
traces, operators in 2021-era ones). For each step the analyzer measures its duration, the
GPU work launched in it (kernels by launch time), the GPU idle inside it by gap cause, and
the host time in data loading and blocking calls; the slowest step is compared with the
per-step median of each measure, and with the average step's kernels, to say what differed.
The measures are the derived ``profiler_step_metrics`` and ``profiler_step_kernels``
(:mod:`tracelens.derived.profiler_steps`).

One finding per trace with at least ``steps_min_count`` steps (informational when the steps
are even). Impact is the time above the median step summed over steps: what the run would
give back if every step took the typical time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ingest.derive_gaps import GAP_CAUSES
from ingest.profiler_steps import STEP_INTERVALS
from tracelens.analyzers.contract import finding
from tracelens.core.cpu_run import ran_on_cpu
from tracelens.core.findings import Finding, TimeRange
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.units import fmt_ns
from tracelens.derived import require
from tracelens.derived.profiler_steps import (
    PROFILER_STEP_KERNELS,
    PROFILER_STEP_METRICS,
)

ANALYZER = "steps"
# At most this many per-step rows go into the evidence.
_MAX_LISTED = 100

_MEASURES = (
    "kernel_count",
    "kernel_ns",
    "gpu_span_ns",
    *(f"idle_{c}_ns" for c in GAP_CAUSES),
    "sync_blocked_ns",
    "loader_ns",
)


def analyze(db: TraceDB, t: Thresholds) -> list[Finding]:
    n_steps = db.scalar(f"SELECT count(DISTINCT name) FROM ({STEP_INTERVALS})")
    if not n_steps or n_steps < t.steps_min_count:
        return []
    require(db, PROFILER_STEP_METRICS, PROFILER_STEP_KERNELS)
    stats = db.dicts(
        """SELECT count(*) AS n, CAST(median(dur_ns) AS BIGINT) AS median_ns,
                  CAST(avg(dur_ns) AS BIGINT) AS mean_ns, min(dur_ns) AS min_ns,
                  max(dur_ns) AS max_ns, CAST(quantile_cont(dur_ns, 0.95) AS BIGINT) AS p95_ns,
                  coalesce(stddev_pop(dur_ns), 0) AS sd, sum(dur_ns) AS total_ns
           FROM profiler_step_metrics"""
    )[0]
    median = int(stats["median_ns"])
    excess = int(
        db.scalar(
            "SELECT coalesce(sum(dur_ns - ?), 0) FROM profiler_step_metrics WHERE dur_ns > ?",
            [median, median],
        )
    )
    steps = db.dicts("SELECT * FROM profiler_step_metrics ORDER BY start_ns")
    slowest = max(steps, key=lambda s: (s["dur_ns"], -s["start_ns"]))
    medians = db.dicts(
        "SELECT "
        + ", ".join(f"CAST(median({m}) AS BIGINT) AS {m}" for m in _MEASURES)
        + " FROM profiler_step_metrics"
    )[0]
    delta = {m: int(slowest[m]) - int(medians[m]) for m in _MEASURES}
    differed = [
        {
            "measure": m,
            "slowest": int(slowest[m]),
            "median": int(medians[m]),
            "delta": delta[m],
        }
        for m in sorted(
            (m for m in _MEASURES if delta[m]), key=lambda m: (-abs(delta[m]), _MEASURES.index(m))
        )
    ]
    kernel_delta = db.dicts(
        """WITH per AS (
               SELECT step, kernel, kernel_ns AS ns FROM profiler_step_kernels
           ),
           avg_other AS (
               SELECT kernel, sum(ns) / ? AS avg_ns FROM per WHERE step <> ? GROUP BY kernel
           )
           SELECT coalesce(p.kernel, a.kernel) AS kernel, coalesce(p.ns, 0) AS slowest_ns,
                  CAST(coalesce(a.avg_ns, 0) AS BIGINT) AS typical_ns,
                  CAST(coalesce(p.ns, 0) - coalesce(a.avg_ns, 0) AS BIGINT) AS delta_ns
           FROM (SELECT * FROM per WHERE step = ?) p FULL JOIN avg_other a USING (kernel)
           ORDER BY delta_ns DESC, slowest_ns DESC, kernel LIMIT 5""",
        [max(1, len(steps) - 1), slowest["step"], slowest["step"]],
    )
    slow_factor = slowest["dur_ns"] / median if median else 1.0
    cv = stats["sd"] / stats["mean_ns"] if stats["mean_ns"] else 0.0
    is_slow = slow_factor >= t.steps_slow_factor
    what = _what_differed(differed, kernel_delta) if is_slow else ""
    title = (
        f"{len(steps)} steps, median {fmt_ns(median)}: slowest `{slowest['step']}` took "
        f"{fmt_ns(slowest['dur_ns'])} ({slow_factor:.2f}x)"
    )
    return [
        finding(
            ANALYZER,
            ("ProfilerStep",),
            excess if is_slow else 0,
            db,
            t,
            subject_ns=excess,
            title=title + (f"; {what}" if what else ""),
            impact_basis="Time above the median step, summed over the steps slower than it: "
            "what the run gives back if every step took the typical time."
            if is_slow
            else "Informational: the steps are even (slowest within "
            f"{t.steps_slow_factor:g}x of the median).",
            summary=f"{len(steps)} profiled steps: median {fmt_ns(median)}, mean "
            f"{fmt_ns(stats['mean_ns'])}, p95 {fmt_ns(stats['p95_ns'])}, min "
            f"{fmt_ns(stats['min_ns'])}, max {fmt_ns(stats['max_ns'])} (coefficient of "
            f"variation {cv:.2f})."
            + (
                f" The kernels launched in a step span a median "
                f"{fmt_ns(medians['gpu_span_ns'])} on the GPU."
                if db.devices
                else " The run was on the CPU."
                if ran_on_cpu(db)
                else " The trace records no GPU activity."
            ),
            evidence={
                "step_count": len(steps),
                "median_step_ns": median,
                "median_gpu_span_ns": int(medians["gpu_span_ns"]),
                "mean_step_ns": int(stats["mean_ns"]),
                "p95_step_ns": int(stats["p95_ns"]),
                "min_step_ns": int(stats["min_ns"]),
                "max_step_ns": int(stats["max_ns"]),
                "total_step_ns": int(stats["total_ns"]),
                "cv": round(cv, 4),
                "excess_over_median_ns": excess,
                "slowest_step": slowest["step"],
                "slowest_over_median": round(slow_factor, 3),
                "slowest_vs_median": differed,
                "slowest_kernels_vs_typical": kernel_delta,
                # Per-step rows, capped so long runs keep the report small (slowest kept).
                "steps": [
                    {k: (int(v) if isinstance(v, int | float) else v) for k, v in s.items()}
                    for i, s in enumerate(steps)
                    if i < _MAX_LISTED - 1 or s is slowest or len(steps) <= _MAX_LISTED
                ],
                "steps_listed_all": len(steps) <= _MAX_LISTED,
            },
            advice=_advice(slowest["step"], differed, kernel_delta, is_slow, not ran_on_cpu(db)),
            time_ranges=[
                TimeRange(int(slowest["start_ns"]), int(slowest["end_ns"]), None, "slowest step")
            ],
        )
    ]


_LABELS = {
    "kernel_ns": "GPU kernel time",
    "gpu_span_ns": "GPU span of the step's kernels",
    "idle_data_loading_ns": "GPU idle waiting for data",
    "idle_synchronization_ns": "GPU idle after host syncs",
    "idle_launch_overhead_ns": "GPU idle between launches",
    "idle_gpu_dependency_ns": "GPU idle on dependencies",
    "idle_host_compute_ns": "GPU idle while the host computes",
    "idle_untraced_ns": "GPU idle, unexplained",
    "sync_blocked_ns": "host blocked in syncs",
    "loader_ns": "data loader time",
}


def _what_differed(differed: list[dict], kernel_delta: list[dict]) -> str:
    top = [d for d in differed if d["measure"] in _LABELS and d["delta"] > 0]
    if not top:
        return ""
    d = top[0]
    return f"{_LABELS[d['measure']]} +{fmt_ns(d['delta'])} over the median step"


def _advice(
    step: str, differed: list[dict], kernel_delta: list[dict], is_slow: bool, gpu: bool = True
) -> str:
    if not is_slow:
        return "Steps are even; look at the other findings for where each step's time goes."
    top = [d for d in differed if d["measure"] in _LABELS and d["delta"] > 0][:3]
    slow_kernels = [k for k in kernel_delta if k["delta_ns"] > 0][:3]
    if top or slow_kernels:
        lines = [f"`{step}` is the slowest step. Compared with the median step it has:"]
        lines += [f"- {_LABELS[d['measure']]}: +{fmt_ns(d['delta'])}" for d in top]
    else:
        # Nothing measured per step grew: the extra time is the host's own work, which no
        # per-step measure holds (an empty "it has:" list said nothing).
        measured = (
            "GPU kernel time, GPU idle by cause, host syncs, data loading"
            if gpu
            else "host syncs, data loading"
        )
        lines = [
            f"`{step}` is the slowest step, yet none of what is measured per step ({measured}) "
            "is larger in it than in the median step: its extra time is in the host's own "
            "work. Compare its operators with a typical step's on the timeline."
        ]
    if slow_kernels:
        lines.append(
            "- kernels taking longer than in a typical step: "
            + ", ".join(f"`{k['kernel'][:80]}` (+{fmt_ns(k['delta_ns'])})" for k in slow_kernels)
        )
    one_off = (
        "cuDNN autotuning, allocator growth, lazy initialization, compilation"
        if gpu
        # no GPU work recorded: no cuDNN to tune, no device allocator
        else "first-call dispatch, memory allocation, lazy initialization, compilation"
    )
    lines.append(
        f"If it is the first profiled step, it likely carries one-off work ({one_off}): record "
        "with `schedule(wait=1, warmup=1, ...)` so warm-up is excluded."
        + (
            " Otherwise fix the cause above: a data wait points at the loader, syncs at "
            "`.item()`/`.cpu()` in the loop, longer kernels at varying shapes (pad or bucket "
            "sequence lengths) or contention from other processes."
            if (top or slow_kernels) and gpu
            else " Otherwise fix the cause above: a data wait points at the loader, longer "
            "operators at varying shapes (pad or bucket sequence lengths), or contention "
            "from other processes."
            if top or slow_kernels
            else ""
        )
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class StepTiming:
    """A run's typical iteration, as its steps finding states it (what ``tracelens diff``
    compares runs of different lengths by)."""

    median_step_ns: int
    step_count: int


def step_timing(findings: Iterable[Mapping[str, Any]]) -> StepTiming | None:
    """The step timing in a report's findings (their JSON dicts); None without a steps finding.

    Read here, beside the evidence it comes from, so no other module depends on the
    evidence's keys.
    """
    f = next((f for f in findings if f.get("analyzer") == ANALYZER), None)
    if f is None:
        return None
    evidence = f["evidence"]
    return StepTiming(int(evidence["median_step_ns"]), int(evidence["step_count"]))
