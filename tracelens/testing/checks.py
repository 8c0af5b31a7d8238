"""Checks a report must pass whatever the trace: each millisecond counted once."""

from __future__ import annotations

from tracelens.analyzers import communication, h2d_transfers
from tracelens.analyzers.h2d_transfers import UVM_FINDING_ID
from tracelens.core.findings import Finding
from tracelens.core.tracedb import TraceDB


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


def _main(argv: list[str]) -> int:
    """``python -m tracelens.testing.checks [--findings ANALYZER,...] TRACE...``: one JSON
    line per trace with its counted-once problems, or with the named analyzers' findings.

    Tests run it in a fresh process so that loading many traces does not grow theirs, and
    so that repeated analyses run under different hash seeds.
    """
    import json

    from ingest import load_trace
    from tracelens.analyzers import ANALYZERS, run_all
    from tracelens.core.thresholds import Thresholds

    only: list[str] | None = None
    if argv[:1] == ["--findings"]:
        only, argv = argv[1].split(","), argv[2:]
    for path in argv:
        loaded = load_trace(path)
        try:
            db = TraceDB(loaded.con)
            if only is None:
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
