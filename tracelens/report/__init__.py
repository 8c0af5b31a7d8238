"""The report (one JSON-able dict), the diff of two reports, and their renderers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracelens.report.build import (
        REPORT_SCHEMA,
        SECTIONS,
        ReportInputs,
        build_report,
        build_report_from_db,
    )

__all__ = ["REPORT_SCHEMA", "SECTIONS", "ReportInputs", "build_report", "build_report_from_db"]


def __getattr__(name: str) -> Any:
    # The builder (every analyzer, DuckDB behind them) loads on first use of one of its
    # names, so a renderer or the diff of saved reports does not pay for it.
    if name in __all__:
        from tracelens.report import build

        value = getattr(build, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
