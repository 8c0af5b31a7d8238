"""The analyzer contract: findings built one way, and the ids analyzers share."""

from __future__ import annotations

from ingest import load_trace
from tracelens.analyzers import ANALYZERS, fusion, hot_ops, idle_gpu
from tracelens.analyzers.contract import finding
from tracelens.analyzers.idle_gpu import idle_finding_id, idle_subject
from tracelens.core.findings import Finding, Severity, finding_id
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.testing.planted_host import uneven_steps


def _built(db: TraceDB, t: Thresholds, impact_ns: int, **kw: object) -> Finding:
    return finding(
        "contract_check",
        ("subject", 3),
        impact_ns,
        db,
        t,
        title="t",
        impact_basis="b",
        summary="s",
        evidence={},
        advice="a",
        **kw,  # type: ignore[arg-type]
    )


def test_finding_takes_id_share_and_severity_from_subject_and_impact(scenario_db) -> None:
    db = scenario_db(uneven_steps())
    t = Thresholds()
    fifth = _built(db, t, db.window_ns // 5)
    assert fifth.id == finding_id("contract_check", "subject", 3)
    assert fifth.analyzer == "contract_check"
    assert abs(fifth.impact_pct - 20.0) < 1e-3
    assert fifth.severity == Severity.HIGH  # 10 % <= 20 % < 25 %
    assert _built(db, t, db.window_ns // 2).severity == Severity.CRITICAL
    assert fifth.time_ranges == [] and fifth.supersedes == []


def test_a_finding_that_gives_back_nothing_is_informational(scenario_db) -> None:
    db = scenario_db(uneven_steps())
    # even where every share would be at least 'low'
    nothing = _built(db, Thresholds(severity_low_pct=0.0), 0)
    assert (nothing.impact_ns, nothing.impact_pct, nothing.severity) == (0, 0.0, Severity.INFO)
    risk = _built(db, Thresholds(), 0, severity=Severity.MEDIUM)
    assert risk.severity == Severity.MEDIUM and risk.impact_pct == 0.0


def test_the_subject_is_the_impact_unless_said_and_never_less(scenario_db) -> None:
    db = scenario_db(uneven_steps())
    t = Thresholds()
    assert _built(db, t, 5_000).subject_ns == 5_000
    assert _built(db, t, 0, subject_ns=9_000).subject_ns == 9_000
    assert _built(db, t, 5_000, subject_ns=1_000).subject_ns == 5_000


def test_every_registered_analyzer_names_itself_once() -> None:
    names = [m.ANALYZER for m in ANALYZERS]
    assert len(set(names)) == len(names)
    assert all(callable(m.analyze) for m in ANALYZERS)


def test_superseded_ids_are_idle_gpus_own(planted_trace) -> None:
    """The analyzers that explain an idle cause name idle_gpu's finding by its exported id."""
    path, _ = planted_trace
    loaded = load_trace(path)
    try:
        db = TraceDB(loaded.con)
        findings = [f for m in ANALYZERS for f in m.analyze(db, Thresholds())]
    finally:
        loaded.close()
    idle = {f.id: f for f in findings if f.analyzer == idle_gpu.ANALYZER}
    assert idle
    for f in idle.values():
        subject = idle_subject(f)
        assert subject is not None and idle_finding_id(*subject) == f.id
    superseded = {s for f in findings if f.analyzer != fusion.ANALYZER for s in f.supersedes}
    # the planted loader stall: data_loading explains idle_gpu's data_loading gaps
    assert superseded and superseded <= set(idle)
    # fusion explains the time of its runs' operators: their hot-operator findings
    for f in findings:
        if f.analyzer == fusion.ANALYZER:
            ops = [o["operator"] for o in f.evidence["operators"]]
            assert set(f.supersedes) >= {hot_ops.operator_finding_id(o) for o in ops}
    assert all(idle_subject(f) is None for f in findings if f.id not in idle)
