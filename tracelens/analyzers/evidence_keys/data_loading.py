"""The evidence of ``data_loading`` findings (:mod:`tracelens.analyzers.data_loading`)."""

from __future__ import annotations

from tracelens.analyzers.evidence_keys.model import (
    COUNT,
    NS,
    PCT,
    ROWS,
    TEXT,
    AnalyzerEvidence,
    Key,
)

EVIDENCE = AnalyzerEvidence(
    "data_loading",
    "One finding per device idle at least `dataload_min_idle_pct` % of its window in gaps "
    "judged `data_loading`, naming the loader and how it runs",
    keys=(
        Key("device_id", COUNT, "The device"),
        Key("idle_gap_count", COUNT, "Its gaps judged `data_loading`"),
        Key("idle_ns", NS, "Their summed duration: the impact"),
        Key("idle_pct_of_window", PCT, "`idle_ns` as a share of the device's window"),
        Key(
            "loader_host_ns",
            NS,
            "Host time in data-loader ranges and outermost loader operators, whole trace",
        ),
        Key(
            "num_workers",
            TEXT,
            "The DataLoader's workers, from its iterator class",
            choices=("0 (single process)", "> 0", "unknown"),
        ),
        Key(
            "pageable_h2d_copies",
            COUNT,
            "Host-to-device copies from pageable memory in the whole trace (pin_memory=False)",
        ),
        Key(
            "loaders",
            ROWS,
            "Loader ranges and operators by name, up to 5 by host time",
            fields=(
                Key("name", TEXT, "Range or operator name"),
                Key("calls", COUNT, "Its calls"),
                Key("total_ns", NS, "Their summed duration"),
                Key("median_ns", NS, "Their median duration"),
            ),
        ),
    ),
)
