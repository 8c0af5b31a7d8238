"""A sweep: runs of one deployment at rising load, their latency against throughput, the knee.

Operators tune batch size and concurrency by running the same benchmark at 1, 5, 10, 50
concurrent users and plotting TTFT against output tokens/s. From each run's report (the
dict of ``tracelens analyze --format json``) a sweep takes:

- the load the run was driven with, its *parameter*: an explicit value the caller gives,
  else the benchmark file's ``max_concurrency``, else its finite ``request_rate`` (both in
  ``llm.client``), else the mean decode batch of the trace's steps (engine step labels or
  annotated steps);
- p50/p95 TTFT and TPOT and output tokens/s: the client's (``llm.client``) when a
  benchmark file was given, else the trace's annotated requests (``llm``); a trace with only
  engine step labels has throughput but no TTFT (engine steps carry no arrival times).

Runs are ordered by parameter when every run has one of the same kind, else by throughput.
The *knee* is the first run after which p95 TTFT grows faster than throughput: between it
and the next run, p95 TTFT's growth factor exceeds throughput's (their ratio is above 1).
Beyond it, more load buys less throughput than it costs in latency. With objectives, a run
*meets* them when the p95 of every objective's latency is within its bound (a p95 SLO, as
operators state them), and the best run is the highest-throughput run that does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

from tracelens.llm.slo import Objectives

SWEEP_SCHEMA = "tracelens.sweep/1"
# Percentile a run's latency must meet its objective at.
SLO_PERCENTILE = "p95"
# The report keys holding each objective's distribution.
_OBJECTIVE_KEYS = {"ttft": "ttft_ns", "tpot": "tpot_ns", "itl": "itl_ns", "e2e": "e2e_ns"}


class SweepInputError(ValueError):
    """Runs that make no sweep; the text is one line saying why."""


@dataclass
class SweepRun:
    label: str
    param: float | None
    # "max_concurrency", "request_rate", "mean_batch" or "given": where param came from.
    param_source: str | None
    # "client" (a benchmark file's requests) or "trace" (the trace's own numbers).
    latency_source: str | None
    ttft_p50_ns: float | None
    ttft_p95_ns: float | None
    tpot_p50_ns: float | None
    tpot_p95_ns: float | None
    output_tokens_per_s: float | None
    # With objectives: whether every objective's p95 is within bound (None: cannot tell).
    meets_slo: bool | None = None
    # From this run to the next: the factors p95 TTFT and throughput grow by.
    ttft_growth: float | None = None
    throughput_growth: float | None = None

    @property
    def past_knee(self) -> bool:
        """TTFT grows faster than throughput from here: their ratio is above 1."""
        if self.ttft_growth is None or self.throughput_growth is None:
            return False
        return self.ttft_growth > self.throughput_growth


def _pct(dist: Any, key: str) -> float | None:
    if not isinstance(dist, dict):
        return None
    v = dist.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _mean_batch(llm: dict[str, Any]) -> float | None:
    """The mean decode batch of the trace's steps: engine labels first, then annotations."""
    engine = llm.get("engine_steps")
    if isinstance(engine, dict):
        phases = [engine.get("by_phase", {}).get(p) or {} for p in ("decode", "mixed")]
        counted = [(p["steps"], p["mean_requests"]) for p in phases if p.get("mean_requests")]
        steps = sum(n for n, _ in counted)
        if steps:
            return sum(n * m for n, m in counted) / steps
    decode = (llm.get("steps") or {}).get("decode") or {}
    batch = decode.get("mean_batch")
    return float(batch) if isinstance(batch, int | float) and batch else None


def _param(llm: dict[str, Any], given: float | None) -> tuple[float | None, str | None]:
    if given is not None:
        return given, "given"
    client = llm.get("client") or {}
    for key in ("max_concurrency", "request_rate"):
        if client.get(key):
            return float(client[key]), key
    batch = _mean_batch(llm)
    return (batch, "mean_batch") if batch is not None else (None, None)


def _meets(source: dict[str, Any], objectives: Objectives) -> bool | None:
    verdicts = []
    for name, bound in objectives.items():
        value = _pct(source.get(_OBJECTIVE_KEYS[name]), SLO_PERCENTILE)
        if value is None:
            return None
        verdicts.append(value <= bound)
    return all(verdicts)


def sweep_run(
    label: str,
    report: dict[str, Any],
    param: float | None = None,
    objectives: Objectives | None = None,
) -> SweepRun:
    """One run of the sweep from its report; ``param`` overrides what the report says."""
    llm = report.get("llm") or {}
    client = llm.get("client")
    if isinstance(client, dict):
        source, latency_source = client, "client"
    elif "ttft_ns" in llm:
        source, latency_source = llm, "trace"
    else:
        source, latency_source = {}, None
    tput = source.get("output_tokens_per_s")
    if tput is None and isinstance(llm.get("engine_steps"), dict):
        tput, latency_source = llm["engine_steps"].get("decode_tokens_per_s"), "trace"
    value, param_source = _param(llm, param)
    return SweepRun(
        label=label,
        param=value,
        param_source=param_source,
        latency_source=latency_source,
        ttft_p50_ns=_pct(source.get("ttft_ns"), "p50"),
        ttft_p95_ns=_pct(source.get("ttft_ns"), "p95"),
        tpot_p50_ns=_pct(source.get("tpot_ns"), "p50"),
        tpot_p95_ns=_pct(source.get("tpot_ns"), "p95"),
        output_tokens_per_s=float(tput) if tput else None,
        meets_slo=_meets(source, objectives) if objectives is not None else None,
    )


def _ordered(runs: list[SweepRun]) -> tuple[list[SweepRun], str]:
    kinds = {r.param_source for r in runs}
    if all(r.param is not None for r in runs) and len(kinds - {"given"}) <= 1:
        return sorted(runs, key=lambda r: (r.param, r.output_tokens_per_s or 0.0)), "param"
    return sorted(runs, key=lambda r: r.output_tokens_per_s or 0.0), "throughput"


def _knee(runs: list[SweepRun]) -> str | None:
    """Label of the first run after which p95 TTFT grows faster than throughput."""
    # Runs without TTFT or throughput are skipped: the next comparable run is the next one.
    known = [
        (r, r.ttft_p95_ns, r.output_tokens_per_s)
        for r in runs
        if r.ttft_p95_ns and r.output_tokens_per_s
    ]
    for (a, ttft_a, tput_a), (_, ttft_b, tput_b) in pairwise(known):
        a.ttft_growth = ttft_b / ttft_a
        a.throughput_growth = tput_b / tput_a
    return next((r.label for r, _, _ in known if r.past_knee), None)


def build_sweep(
    reports: list[tuple[str, dict[str, Any]]],
    params: dict[str, float] | None = None,
    objectives: Objectives | None = None,
) -> dict[str, Any]:
    """The sweep of ``(label, report)`` runs; ``params``: explicit parameters by label."""
    if len(reports) < 2:
        raise SweepInputError("a sweep needs at least two runs")
    labels = [label for label, _ in reports]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise SweepInputError(f"two runs are labelled {dup!r}; give each run its own name")
    given = params or {}
    unknown = sorted(set(given) - set(labels))
    if unknown:
        raise SweepInputError(f"--param names no run: {', '.join(unknown)}")
    runs = [sweep_run(label, rep, given.get(label), objectives) for label, rep in reports]
    runs, order = _ordered(runs)
    knee = _knee(runs)
    notes = [
        f"{r.label}: no output tokens/s (no benchmark results, annotations or engine steps)"
        for r in runs
        if r.output_tokens_per_s is None
    ]
    no_ttft = [r.label for r in runs if r.ttft_p95_ns is None]
    if no_ttft:
        notes.append(
            f"no TTFT for {', '.join(no_ttft)} (engine steps carry no arrival times: give the "
            "benchmark's results, RUN=RESULT, or annotate requests); the knee skips them"
        )
    best = None
    if objectives is not None:
        meeting = [r for r in runs if r.meets_slo and r.output_tokens_per_s]
        if meeting:
            best = max(meeting, key=lambda r: r.output_tokens_per_s or 0.0).label
    return {
        "schema": SWEEP_SCHEMA,
        "order": order,
        "runs": [asdict(r) for r in runs],
        "knee": knee,
        "slo": None if objectives is None else objectives.spec(),
        "slo_percentile": SLO_PERCENTILE,
        "best": best,
        "notes": notes,
    }
