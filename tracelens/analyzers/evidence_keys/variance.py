"""The evidence of ``variance`` findings (:mod:`tracelens.analyzers.variance`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import (
    COUNT,
    NS,
    NS_FRACTIONAL,
    NUMBER,
    TEXT,
    AnalyzerEvidence,
    Key,
)

EVIDENCE = AnalyzerEvidence(
    "variance",
    "A group of comparable kernels (name, grid, block, launching operator's input shapes) or "
    "operators (name, input shapes) whose duration swings with no trend, or whose slow "
    "instances are first calls (warm-up)",
    keys=(
        Key("kind", TEXT, "What the group is of", choices=("kernel", "operator")),
        Key(
            "group",
            TEXT,
            "The grouping key: the name, and for kernels `grid(x,y,z) block(x,y,z)`, then "
            "the input shapes when recorded",
        ),
        Key("count", COUNT, "Instances in the group inside the analysed window"),
        Key("mean_ns", NS_FRACTIONAL, "Their mean duration"),
        Key("p50_ns", NS_FRACTIONAL, "Their median duration"),
        Key("p95_ns", NS_FRACTIONAL, "Their 95th-percentile duration"),
        Key("max_ns", NS, "Their longest duration"),
        Key("cv", NUMBER, "Coefficient of variation of the durations (population sd / mean)"),
        Key("total_ns", NS, "Their summed duration"),
        Key(
            "above_median_ns",
            NS,
            "Time the instances spent above the group's median, on self time for operators "
            "(nested operators excluded); the impact, for operators times the GPU's idle share",
        ),
        Key("slow_instances", COUNT, "Instances slower than the group's p95"),
        Key(
            "slow_instances_in_first_calls",
            COUNT,
            "Of those, the ones among the group's first calls (the first 3, or the first tenth)",
        ),
        Key(
            "duration_vs_launch_order_r",
            NUMBER,
            "Correlation of duration with launch order (0 where undefined); a group at "
            "|r| >= `variance_trend_min_corr` is a trend and has no finding unless warm-up",
        ),
        Key(
            "input_shapes",
            TEXT,
            "The input shapes of the group (for kernels, of the operator that launched them)",
            null="the trace records no shapes for them",
        ),
    ),
)
