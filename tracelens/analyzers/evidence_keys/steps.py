"""The evidence of ``steps`` findings (:mod:`tracelens.analyzers.steps`)."""

from __future__ import annotations

from ingest.derive_gaps import GAP_CAUSES
from ingest.schema import Column
from tracelens.analyzers.evidence_keys.model import (
    COUNT,
    FLAG,
    NS,
    NUMBER,
    ROWS,
    TEXT,
    AnalyzerEvidence,
    Key,
)
from tracelens.derived.profiler_steps import PROFILER_STEP_METRICS

# The per-step measures the slowest step is compared on (profiler_step_metrics' columns).
_MEASURES = (
    "kernel_count",
    "kernel_ns",
    "gpu_span_ns",
    *(f"idle_{c}_ns" for c in GAP_CAUSES),
    "sync_blocked_ns",
    "loader_ns",
)


def _field(c: Column) -> Key:
    """A per-step row's field: the derived table's column, as the evidence holds it."""
    kind = TEXT if c.type == "VARCHAR" else NS if c.name.endswith("_ns") else COUNT
    return Key(c.name, kind, c.description)


EVIDENCE = AnalyzerEvidence(
    "steps",
    "One finding per trace with at least `steps_min_count` ProfilerStep steps: their "
    "spread, and what differed in the slowest (informational when the steps are even)",
    keys=(
        Key("step_count", COUNT, "Profiled steps"),
        Key("median_step_ns", NS, "Median step duration"),
        Key(
            "median_gpu_span_ns",
            NS,
            "Median, over steps, of the first start to last end of the kernels each launched",
        ),
        Key("mean_step_ns", NS, "Mean step duration"),
        Key("p95_step_ns", NS, "The 95th-percentile step duration"),
        Key("min_step_ns", NS, "Shortest step"),
        Key("max_step_ns", NS, "Longest step"),
        Key("total_step_ns", NS, "Summed step duration"),
        Key("cv", NUMBER, "Coefficient of variation of the step durations"),
        Key(
            "excess_over_median_ns",
            NS,
            "Time above the median, summed over the steps slower than it: the impact when "
            "the slowest step is at least `steps_slow_factor` × the median",
        ),
        Key("slowest_step", TEXT, "Name of the slowest step (`ProfilerStep#N`)"),
        Key("slowest_over_median", NUMBER, "Its duration over the median step's"),
        Key(
            "slowest_vs_median",
            ROWS,
            "Each measure of the slowest step against its per-step median, the largest "
            "difference first; measures that do not differ are left out",
            fields=(
                Key(
                    "measure",
                    TEXT,
                    "The measure (a profiler_step_metrics column)",
                    choices=_MEASURES,
                ),
                Key("slowest", COUNT, "Its value in the slowest step (ns, or kernels)"),
                Key("median", COUNT, "Its median over steps"),
                Key("delta", COUNT, "`slowest` - `median`"),
            ),
        ),
        Key(
            "slowest_kernels_vs_typical",
            ROWS,
            "Kernels whose time in the slowest step differs most from their average in the "
            "other steps, longer first, up to 5",
            fields=(
                Key("kernel", TEXT, "Kernel name"),
                Key("slowest_ns", NS, "Its time in the slowest step"),
                Key("typical_ns", NS, "Its time per other step, on average"),
                Key("delta_ns", NS, "`slowest_ns` - `typical_ns`"),
            ),
        ),
        Key(
            "steps",
            ROWS,
            "Every step in start order, as the derived table profiler_step_metrics holds it "
            "(times on the trace clock, not offsets); capped at 100 rows, the slowest kept",
            fields=tuple(_field(c) for c in PROFILER_STEP_METRICS.columns),
        ),
        Key("steps_listed_all", FLAG, "Whether `steps` lists every step"),
    ),
)
