"""The report: everything ``tracelens analyze`` says about a trace, as one JSON-able dict.

The shape is the documented, stable JSON output (``docs/json-schema.md``), declared as
:class:`tracelens.report.model.Report`; every report is validated against it here. The
renderers and the web app read this dict (the text and Markdown renderers through its
typed view, ``Report.of``) and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import duckdb

from ingest import LoadedTrace
from ingest.redaction import redact
from tracelens import __version__
from tracelens.analyzers import run_all
from tracelens.analyzers.llm_slo import analyze_slo
from tracelens.analyzers.training_mode import training_mode_notes
from tracelens.core.finding_sections import reading_order
from tracelens.core.recorded_at import recorded_at_ns
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import workload_of
from tracelens.derived.kernel_ops import before_host_trace_notes, replay_attribution_notes
from tracelens.llm.bench_results import BenchRun
from tracelens.llm.section import llm_section
from tracelens.llm.slo import Objectives
from tracelens.llm.slo_outcome import slo_outcome
from tracelens.report.host_startup import host_startup_notes
from tracelens.report.metrics import device_summaries, top_kernels, top_ops, trace_metrics
from tracelens.report.model import Report
from tracelens.report.queued_at_start import queued_at_start_notes
from tracelens.report.replay_gaps_unmeasured import replay_gaps_unmeasured_notes

REPORT_SCHEMA = "tracelens.report/1"

_T = TypeVar("_T")


@dataclass(frozen=True)
class ReportInputs:
    """What the caller knows beyond the trace: serving objectives, a benchmark's results."""

    slo: Objectives | None = None
    bench: BenchRun | None = None


# Optional report sections: name -> function of the trace and the run's thresholds returning
# a dict, or None when not applicable. Each is declared as a field of report.model.Report.
SectionFn = Callable[[TraceDB, Thresholds], dict[str, Any] | None]
SECTIONS: dict[str, SectionFn] = {"llm": llm_section}
# The keys every report has; the optional sections come after them.
CORE_KEYS = (
    "schema",
    "tracelens_version",
    "source",
    "trace",
    "devices",
    "metrics",
    "workload",
    "findings",
    "reading_order",
    "top_kernels",
    "top_ops",
    "notes",
)

_INFO_KEYS = (
    "format_version",
    "tool",
    "tool_version",
    "host",
    "rank",
    "world_size",
    "distributed_backend",
    "event_count",
    "t0_ns",
    "warnings",
)


def optional_sections(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's optional sections, in order: what SECTIONS added when it was built
    (a report kept from another version may hold sections this one does not register)."""
    return {key: value for key, value in report.items() if key not in CORE_KEYS}


def build_report(
    loaded: LoadedTrace,
    thresholds: Thresholds | None = None,
    top: int = 10,
    *,
    label: str | None = None,
    sha256: str | None = None,
    inputs: ReportInputs | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    db: TraceDB | None = None,
) -> dict[str, Any]:
    """The report of a loaded trace.

    ``label`` stands for the trace's path where the file read is not the one the user
    knows (the web app reads a kept copy of an upload and shows the uploaded name);
    ``sha256`` likewise for the hash (the upload's, which de-duplication compares, not the
    kept copy's). ``inputs``: serving objectives and a benchmark client's results.
    ``on_progress(done, total)``: after each analyzer. ``db``: the loaded trace's
    :class:`TraceDB` where the caller goes on querying it, so what the analyzers derived
    (kernel attribution, the workload, ...) is built once for both.
    """
    tdb = db if db is not None else TraceDB(loaded.con)

    def build() -> dict[str, Any]:
        return build_report_from_db(
            tdb,
            source={
                "path": label if label is not None else str(loaded.path),
                "format": loaded.format,
                "sha256": sha256 if sha256 is not None else loaded.sha256,
                "size_bytes": loaded.size_bytes,
            },
            thresholds=thresholds,
            top=top,
            notes=loaded.notes,
            inputs=inputs,
            on_progress=on_progress,
        )

    return retried_under_share(loaded, build)


def retried_under_share(loaded: LoadedTrace, build: Callable[[], _T]) -> _T:
    """``build()``, once more under the whole memory share if it ran out of memory.

    The ingest's memory limit follows the input; a query it does not fit gets the whole
    share once. What a TraceDB memoized before is complete and kept, every temporary
    table is created OR REPLACE, so the second build gives the report the first would.
    """
    try:
        return build()
    except duckdb.OutOfMemoryException:
        if loaded.limits is None or not loaded.limits.raise_to_ceiling(loaded.con):
            raise
        return build()


def build_report_from_db(
    db: TraceDB,
    source: dict[str, Any],
    thresholds: Thresholds | None = None,
    top: int = 10,
    notes: list[str] | None = None,
    inputs: ReportInputs | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    t = thresholds or Thresholds()
    given = inputs or ReportInputs()
    serving = slo_outcome(db, t, given.slo, given.bench)
    findings = run_all(db, t, extra=analyze_slo(db, t, serving), on_progress=on_progress)
    info = db.info
    trace: dict[str, Any] = {}
    for key in _INFO_KEYS:
        if key == "t0_ns":  # the analysed window's start, not the first host event's
            trace[key] = db.t0_ns
            recorded = recorded_at_ns(info, db.t0_ns)
            if recorded is not None:  # in the declared order (TraceFacts), after t0_ns
                trace["recorded_at_ns"] = recorded
        elif key in info:
            v: Any = info[key]
            if key in ("rank", "world_size", "event_count"):
                v = int(v)
            trace[key] = v
    ranked = [f.to_dict() for f in findings]
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "tracelens_version": __version__,
        "source": source,
        "trace": trace,
        "devices": device_summaries(db),
        "metrics": trace_metrics(db),
        "workload": workload_of(db).to_dict(),
        "findings": ranked,
        # the order the text, Markdown and HTML reports read them in: a CI job that acts on
        # the first finding gets the one they lead with, whatever the impact ranking
        "reading_order": reading_order(ranked),
        "top_kernels": top_kernels(db, top),
        "top_ops": top_ops(db, top, t),
        "notes": list(notes or []),
    }
    if not db.devices:
        # first: the notes that say why (the readers') follow it
        report["notes"].insert(0, "no GPU work recorded in this trace")
    report["notes"].extend(workload_of(db).recording_notes)
    report["notes"].extend(training_mode_notes(findings))
    report["notes"].extend(replay_attribution_notes(db))
    if db.devices:
        report["notes"].extend(before_host_trace_notes(db))
        report["notes"].extend(host_startup_notes(db))
        report["notes"].extend(queued_at_start_notes(db))
        report["notes"].extend(replay_gaps_unmeasured_notes(db))
    for name, fn in SECTIONS.items():
        section = fn(db, t)
        if section is not None:
            report[name] = section
            # A section's warnings (e.g. malformed annotations) are notes on the whole report.
            report["notes"].extend(f"{name}: {w}" for w in section.get("warnings", []))
    if serving is not None:
        # The caller's objectives and benchmark results join the trace's own LLM numbers
        # (and make an ``llm`` section of their own for a trace without annotations).
        extra = serving.section_keys()
        if extra:
            report.setdefault("llm", {}).update(extra)
        report["notes"].extend(serving.notes)
    # Trace metadata (host, job names, log lines, paths) can carry credentials; every
    # output (CLI, catalog, web) is built from this dict, so hiding them here hides them
    # everywhere.
    report = redact(report)
    # A report that strays from its declared shape is a bug of this version: fail here,
    # where it is made, rather than in a client reading it.
    Report.of(report)
    return report
