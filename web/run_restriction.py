"""A ready run analysed on a part of its trace: the restriction a request names and the
report of that part.

A request names it as ``tracelens analyze`` takes it (``window=2s:5s``, ``steps=5:15``,
``range=NAME[@DOMAIN]``, :mod:`tracelens.core.restriction`). The stored report covers the
whole trace and is computed once at ingest; a restricted one is computed on request the
way the CLI computes it: the rows the restriction keeps are copied out of the run's
read-only trace database into memory (:mod:`tracelens.core.restricted_db`) and every
analyzer runs on the copy, with the run's serving objectives.

What a restricted analysis gives is cached per (run, generation, restriction) in
:meth:`web.run_data.RunData.restricted`, apart from the whole-trace caches, so the answer
for one restriction is never served for another or for the whole trace; a re-ingest (a new
generation) or a deletion drops it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar
from urllib.parse import quote, urlencode

import duckdb
import msgspec
from litestar.di import Provide
from litestar.exceptions import ClientException, NotFoundException
from litestar.params import QueryParameter

from tracelens.core.restricted_db import restricted_connection
from tracelens.core.restriction import (
    Interval,
    Restriction,
    RestrictionError,
    merge_intervals,
    one_restriction,
)
from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.profiler_steps import PROFILER_STEPS
from tracelens.llm.slo import parse_slo
from tracelens.ranks.grouping import finding_scope as scope_of
from tracelens.report import ReportInputs, build_report_from_db
from tracelens.report.model import Finding
from web.catalog import Run, RunKind
from web.run_data import finding_without_rank
from web.run_lookup import load_ready_run, open_run_database, ready_report
from web.run_tables import stored_ingest_notes
from web.services import Services

T = TypeVar("T")

# The query parameters naming a restriction, as a restriction's kind names it.
RESTRICTION_PARAMS = ("window", "steps", "range")
# Range names the run page offers in its range field (the longest in total).
RANGE_CHOICES = 20


class BadRestrictionError(ClientException):
    """A restriction that does not parse, or that selects nothing in the run's trace (400)."""


def parse_restriction(
    window: str | None, steps: str | None, range_name: str | None
) -> Restriction | None:
    """The restriction a request's query names, None without one; a 400 says what is wrong,
    in the words of the CLI's error.

    An empty value counts as absent: the run page's form sends all three fields.
    """
    try:
        return one_restriction(_given(window), _given(steps), _given(range_name))
    except RestrictionError as exc:
        raise BadRestrictionError(str(exc)) from None


def _given(value: str | None) -> str | None:
    return value.strip() if value is not None and value.strip() else None


def restriction_query(restriction: Restriction | None) -> str:
    """``?steps=5:15``: the query naming ``restriction`` in a link ("" for none)."""
    return query_string({restriction.kind: restriction.spec} if restriction is not None else {})


def query_string(params: dict[str, str]) -> str:
    """``?k=v&...`` for a link ("" without any)."""
    # ':' and '@' are legal in a query and left as typed, so a pasted link reads as one.
    return "?" + urlencode(params, quote_via=quote, safe=":@") if params else ""


@dataclass(frozen=True)
class RestrictedAnalysis:
    """The report of the part of a run's trace a restriction selects."""

    restriction: Restriction
    # the report as the stored ones are: the JSON form, as `tracelens analyze` writes it
    report: dict[str, Any]
    # what it selected, on the trace clock: sorted, disjoint [start, end) intervals
    intervals: list[Interval]
    # the report's note saying what was analysed
    note: str


def analysis_of(svc: Services, run: Run, restriction: Restriction) -> RestrictedAnalysis:
    """The restricted analysis of a ready run, computed once per generation and restriction."""
    if run.kind == RunKind.JOB:
        raise BadRestrictionError(
            f"run {run.id} is a job of several ranks, analyzed whole: window, steps and "
            "range take one trace"
        )
    return cached(svc, run, restriction, ("analysis",), lambda: _analyse(svc, run, restriction))


def report_of(svc: Services, run: Run, restriction: Restriction | None) -> dict[str, Any]:
    """The run's report: the stored one, or that of the part ``restriction`` selects."""
    if restriction is None:
        return ready_report(svc, run)
    return analysis_of(svc, run, restriction).report


def find_finding(
    svc: Services, run_id: str, finding_id: str, restriction: Restriction | None
) -> tuple[Run, Finding]:
    """A finding of a ready run, in its whole analysis or the restricted one (404 if not
    there: a part of the trace may lack a finding the whole has, and the other way round)."""
    run = load_ready_run(svc, run_id)
    for f in report_of(svc, run, restriction)["findings"]:
        if f["id"] == finding_id:
            # every report was checked against the model when it was loaded or built
            return run, msgspec.convert(finding_without_rank(f), Finding)
    where = f" in {restriction.kind} {restriction.spec}" if restriction is not None else ""
    raise NotFoundException(f"run {run_id} has no finding {finding_id!r}{where}")


def finding_rank(svc: Services, run: Run, finding_id: str) -> int | None:
    """The rank a job's finding is of (None for a single trace's, or a job-wide one)."""
    if run.kind != RunKind.JOB:
        return None
    for f in ready_report(svc, run)["findings"]:
        if f["id"] == finding_id:
            rank = f.get("rank")
            return int(rank) if rank is not None else None
    return None


def finding_ranks_label(svc: Services, run: Run, finding_id: str) -> str | None:
    """Which ranks a job's finding is of ("rank 2", "ranks 0-3 (rank 0 shown)"); None for
    a single trace's finding or one across the job."""
    if run.kind != RunKind.JOB:
        return None
    f = next((f for f in ready_report(svc, run)["findings"] if f["id"] == finding_id), None)
    if f is None or f.get("rank") is None:
        return None
    label = scope_of(f)
    return None if label == "job" else label


def finding_scope(svc: Services, run: Run, finding_id: str, note: str | None) -> str | None:
    """What a finding's Markdown says it is of: the part analysed, or the job's rank."""
    ranks = len(run.members or [])
    label = finding_ranks_label(svc, run, finding_id)
    if label is None:
        rank = finding_rank(svc, run, finding_id)
        if rank is None:
            return note
        label = f"across a job of {ranks} ranks, naming rank {rank}"
    else:
        label = f"{label} of a job of {ranks} ranks"
    return label + (f"; {note}" if note else "")


def cached(
    svc: Services,
    run: Run,
    restriction: Restriction | None,
    what: tuple[Any, ...],
    make: Callable[[], T],
) -> T:
    """``make()`` once per run generation, restriction and ``what`` (a form of the answer:
    the page, the findings JSON): the whole trace's in the run's memo, a part's in the
    restricted cache, under a key naming the restriction."""
    if restriction is None:
        # updated_at: a rename in another server process shows here too (a ready run's row
        # changes only when it is renamed or re-filed)
        return svc.run_data.memo((run.id, run.generation, run.updated_at, *what), make)
    key = (run.id, run.generation, restriction.kind, restriction.spec, *what)
    return svc.run_data.restricted(key, make)


def _analyse(svc: Services, run: Run, restriction: Restriction) -> RestrictedAnalysis:
    # The upload's name and hash, as the stored report has them (not the kept copy's).
    source = ready_report(svc, run)["source"]
    inputs = ReportInputs(slo=parse_slo(run.slo) if run.slo else None)
    cur, _ = open_run_database(svc, run)
    try:
        with svc.run_data.analysis_slot():
            try:
                intervals = merge_intervals(restriction.intervals(TraceDB(cur)))
            except RestrictionError as exc:  # selects nothing in this trace
                raise BadRestrictionError(str(exc)) from None
            note = restriction.describe(intervals)
            con = restricted_connection(cur, intervals, note)
            try:
                # ingest's notes, then the restriction's, as restrict_loaded gives the CLI
                notes = [*stored_ingest_notes(cur), note]
                report = build_report_from_db(TraceDB(con), source, notes=notes, inputs=inputs)
            finally:
                con.close()
    finally:
        cur.close()
    # Through JSON, as a stored report is written and read back, so pages and the API see
    # one form whichever report they are given.
    report = json.loads(json.dumps(report, default=str))
    return RestrictedAnalysis(restriction, report, intervals, note)


@dataclass(frozen=True)
class RangeChoice:
    """A range name the run page offers: as the range field takes it, and how it occurs."""

    spec: str
    count: int
    total_ns: int


@dataclass(frozen=True)
class RestrictionChoices:
    """What the run page lists beside its form: the profiler steps and the main ranges."""

    # (first, last, count) of the ProfilerStep#N ranges, None without any
    steps: tuple[int, int, int] | None
    ranges: list[RangeChoice]


def restriction_choices(cur: duckdb.DuckDBPyConnection) -> RestrictionChoices:
    """The steps and the longest range names of a run's trace database (two aggregates,
    computed when its page is rendered, which is once per generation)."""
    db = TraceDB(cur)
    require(db, PROFILER_STEPS)
    first, last, count = db.rows("SELECT min(step_no), max(step_no), count(*) FROM profiler_steps")[
        0
    ]
    rows = db.rows(
        """SELECT name, domain, count(*) AS n, sum(end_ns - start_ns) AS total
           FROM ranges
           WHERE end_ns > start_ns AND NOT regexp_full_match(name, 'ProfilerStep#[0-9]+')
           GROUP BY name, domain
           ORDER BY total DESC, name, domain
           LIMIT ?""",
        [RANGE_CHOICES],
    )
    return RestrictionChoices(
        steps=(int(first), int(last), int(count)) if count else None,
        ranges=[RangeChoice(_range_spec(n, d), int(k), int(t)) for n, d, k, t in rows],
    )


def _range_spec(name: str, domain: str | None) -> str:
    # The domain follows the last '@'; a name holding one and no domain ends with '@'.
    if domain:
        return f"{name}@{domain}"
    return f"{name}@" if "@" in name else name


# The query parameters, as the API documents them; the pages take the same.
WINDOW_HELP = (
    "Analyze only this time window: START:END, offsets from the analysed window's start "
    "(the first GPU activity, the report's trace.t0_ns), in ns or with a unit (2s:5s, 150ms:, "
    ":800ms), as `tracelens analyze --window`"
)
STEPS_HELP = (
    "Analyze only profiler steps FIRST to END-1 (ProfilerStep#N): 5:15, 5:, 7, as "
    "`tracelens analyze --steps`"
)
RANGE_HELP = (
    "Analyze only the instances of this annotation or NVTX range: NAME[@DOMAIN] (exact name; "
    "the domain is the NVTX domain or Chrome category), as `tracelens analyze --range`"
)


# A handler's three parameters, as its signature declares them.
WindowQuery = Annotated[str | None, QueryParameter(name="window", description=WINDOW_HELP)]
StepsQuery = Annotated[str | None, QueryParameter(name="steps", description=STEPS_HELP)]
RangeQuery = Annotated[str | None, QueryParameter(name="range", description=RANGE_HELP)]


def restriction_from_query(
    window: WindowQuery = None, steps: StepsQuery = None, range_name: RangeQuery = None
) -> Restriction | None:
    """The dependency a handler takes its restriction from (at most one of the three)."""
    return parse_restriction(window, steps, range_name)


# For a Controller's ``dependencies``: its handlers take ``restriction: NamedDependency[...]``.
RESTRICTION_DEPENDENCY = {"restriction": Provide(restriction_from_query, sync_to_thread=False)}
