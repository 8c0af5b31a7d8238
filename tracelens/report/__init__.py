"""The report (one JSON-able dict), the diff of two reports, and their renderers."""

from tracelens.report.build import (
    REPORT_SCHEMA,
    SECTIONS,
    ReportInputs,
    build_report,
    build_report_from_db,
)

__all__ = ["REPORT_SCHEMA", "SECTIONS", "ReportInputs", "build_report", "build_report_from_db"]
