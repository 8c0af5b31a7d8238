"""Checks a report must pass whatever the trace: each millisecond counted once, and the
report is the shape its model declares."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from tracelens.analyzers import communication, h2d_transfers
from tracelens.analyzers.h2d_transfers import UVM_FINDING_ID
from tracelens.core.findings import Finding
from tracelens.core.tracedb import TraceDB
from tracelens.report.model import Report


def counted_once_problems(db: TraceDB, findings: list[Finding]) -> list[str]:
    """What in ``findings`` counts the same time twice; empty when nothing does.

    - all impacts together fit in the analysed window;
    - the host-copy findings fit in the copies' time;
    - the communication findings of a device fit in its collective kernels' time.
    """
    problems: list[str] = []
    total = sum(f.impact_ns for f in findings)
    window = sum(d.window_ns for d in db.devices) or db.window_ns
    if window and total > window:
        problems.append(f"impacts add up to {total:,} ns, past the {window:,} ns window")
    copies = int(
        db.scalar(
            "SELECT coalesce(sum(end_ns - start_ns), 0) FROM memcpys WHERE kind IN ('HtoD', 'DtoH')"
        )
        or 0
    )
    # page-fault stalls are kernel time, not copies
    h2d = sum(
        f.impact_ns
        for f in findings
        if f.analyzer == h2d_transfers.ANALYZER and f.id != UVM_FINDING_ID
    )
    if h2d > copies:
        problems.append(f"host-copy findings claim {h2d:,} ns of {copies:,} ns of copies")
    kernel_ns = int(db.scalar("SELECT coalesce(sum(end_ns - start_ns), 0) FROM kernels") or 0)
    uvm = sum(f.impact_ns for f in findings if f.id == UVM_FINDING_ID)
    if uvm > kernel_ns:
        problems.append(f"page-fault stalls claim {uvm:,} ns of {kernel_ns:,} ns of kernels")
    for dev, nccl in db.rows(
        "SELECT device_id, sum(end_ns - start_ns) FROM kernels "
        "WHERE name ILIKE '%nccl%' OR name ILIKE '%rccl%' GROUP BY device_id ORDER BY 1"
    ):
        comm = sum(
            f.impact_ns
            for f in findings
            if f.analyzer == communication.ANALYZER and f.evidence.get("device_id") == dev
        )
        if comm > nccl:
            problems.append(f"GPU {dev}: communication findings claim {comm:,} of {nccl:,} ns")
    return problems


def report_model_problems(report: dict[str, Any]) -> list[str]:
    """How ``report`` strays from :class:`~tracelens.report.model.Report`; empty when not.

    - every top-level key is a declared field (a registered section is declared too);
    - it converts strictly (every field declared, of its declared type);
    - the typed view reads back as the same JSON, byte for byte: nothing dropped, reordered
      or turned from an int into a float.
    """
    fields = Report.__struct_fields__
    problems = [f"section {k!r} is not declared in Report" for k in report if k not in fields]
    try:
        typed = Report.of(report)
    except msgspec.ValidationError as exc:
        return [*problems, f"does not fit Report: {exc}"]
    declared = {k: v for k, v in report.items() if k in fields}
    if json.dumps(msgspec.to_builtins(typed), default=str) != json.dumps(declared, default=str):
        problems.append("its typed view reads back as different JSON")
    return problems


def _main(argv: list[str]) -> int:
    """``python -m tracelens.testing.checks [--findings ANALYZER,... | --report-model]
    TRACE...``: one JSON line per trace with its counted-once problems, with the named
    analyzers' findings, or with the problems of its report's shape.

    Tests run it in a fresh process so that loading many traces does not grow theirs, and
    so that repeated analyses run under different hash seeds.
    """
    from ingest import load_trace
    from tracelens.analyzers import ANALYZERS, run_all
    from tracelens.core.thresholds import Thresholds
    from tracelens.report import build_report

    only: list[str] | None = None
    model = argv[:1] == ["--report-model"]
    if model:
        argv = argv[1:]
    elif argv[:1] == ["--findings"]:
        only, argv = argv[1].split(","), argv[2:]
    for path in argv:
        loaded = load_trace(path)
        try:
            db = TraceDB(loaded.con)
            out: dict[str, Any]
            if model:
                try:  # build_report validates what it builds
                    problems = report_model_problems(build_report(loaded))
                except msgspec.ValidationError as exc:
                    problems = [f"does not fit Report: {exc}"]
                out = {"trace": path, "problems": problems}
            elif only is None:
                out = {
                    "trace": path,
                    "problems": counted_once_problems(db, run_all(db, Thresholds())),
                }
            else:
                mods = [m for m in ANALYZERS if m.ANALYZER in only]
                out = {
                    "trace": path,
                    "findings": [f.to_dict() for m in mods for f in m.analyze(db, Thresholds())],
                }
        finally:
            loaded.close()
        print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(_main(sys.argv[1:]))
