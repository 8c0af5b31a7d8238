"""SLO attainment for one report: whose requests are judged, and what the trace says why.

With a benchmark client's results (``--bench``) the objectives judge the client's requests:
they are what users saw, over the whole benchmark. Otherwise they judge the trace's
annotated requests. Computed once per trace database and inputs, for the ``llm`` section
and the SLO finding alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.llm.analysis import analyze_llm
from tracelens.llm.bench_results import BenchRun, client_summary
from tracelens.llm.request_latency import RequestLatency
from tracelens.llm.slo import Objectives, attainment, missing
from tracelens.llm.slo_cause import cause, client_phase_sums, phase_sums
from tracelens.llm.trace_requests import trace_requests


@dataclass
class SloOutcome:
    client: dict[str, Any] | None
    slo: dict[str, Any] | None
    objectives: Objectives | None
    # The judged requests: the client's, or the trace's.
    requests: list[RequestLatency] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def section_keys(self) -> dict[str, Any]:
        """What this adds to the report's ``llm`` section: ``client`` and ``slo``."""
        out: dict[str, Any] = {}
        if self.client is not None:
            out["client"] = self.client
        if self.slo is not None:
            out["slo"] = self.slo
        return out


def slo_outcome(
    db: TraceDB, t: Thresholds, objectives: Objectives | None, bench: BenchRun | None
) -> SloOutcome | None:
    """None when neither objectives nor a client's results were given.

    Computed once per trace database and inputs (a benchmark run is its own key: one
    object, compared by identity).
    """
    return db.memo(("llm_slo", objectives, bench), lambda: _outcome(db, t, objectives, bench))


def _outcome(
    db: TraceDB, t: Thresholds, objectives: Objectives | None, bench: BenchRun | None
) -> SloOutcome | None:
    if objectives is None and bench is None:
        return None
    traced = trace_requests(db) if analyze_llm(db, t) is not None else []
    client = client_summary(bench) if bench is not None else None
    notes = list(bench.notes) if bench is not None else []
    if objectives is None:
        return SloOutcome(client, None, None, notes=notes)
    span: float | None
    if bench is not None:
        judged, applies_to, span = bench.requests, "client", bench.duration_ns
    elif traced:
        summary = analyze_llm(db, t).summary  # type: ignore[union-attr]
        judged, applies_to, span = traced, "trace", summary.span_ns
    else:
        notes.append(
            f"--slo {objectives.spec()}: nothing to judge: the trace has no llm.* request "
            "annotations and no benchmark results (--bench) were given"
        )
        return SloOutcome(client, None, objectives, notes=notes)
    slo = {"applies_to": applies_to, **attainment(judged, objectives, span)}
    if applies_to == "trace" and slo["unjudged"]:
        notes.append(
            f"{slo['unjudged']:,} of the trace's requests have no value for some objective "
            "(no llm.request range, or no output token inside the capture) and are left out "
            "of the SLO attainment"
        )
    worst = slo["worst_objective"]
    slo["cause"] = None if worst is None else _cause(worst, objectives, judged, traced, bench)
    return SloOutcome(client, slo, objectives, judged, notes)


def _cause(
    worst: str,
    objectives: Objectives,
    judged: list[RequestLatency],
    traced: list[RequestLatency],
    bench: BenchRun | None,
) -> dict[str, Any]:
    if bench is None:
        miss = [j.request for j in missing(judged, objectives, worst)]
        return {
            **cause(worst, phase_sums(miss)),
            "basis": f"the {_missing_it(len(miss))}",
        }
    if traced:
        # A client's requests cannot be matched to the trace's: the trace's own requests
        # that miss the same objective show where such requests spend their time.
        miss = [j.request for j in missing(traced, objectives, worst)]
        if miss:
            basis = f"the trace's {_missing_it(len(miss), 'annotated ')} too"
        else:
            miss = traced
            basis = f"the trace's {len(miss):,} annotated requests (none of them misses it)"
        return {**cause(worst, phase_sums(miss)), "basis": basis}
    miss = [j.request for j in missing(judged, objectives, worst)]
    return {
        **cause(worst, client_phase_sums(miss)),
        "basis": f"the client's {_missing_it(len(miss))}",
    }


def _missing_it(n: int, kind: str = "") -> str:
    if n == 1:
        return f"1 {kind}request that misses it"
    return f"{n:,} {kind}requests that miss it"
