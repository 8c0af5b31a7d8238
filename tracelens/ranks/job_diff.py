"""Compare two jobs rank by rank: ``tracelens diff JOB_A JOB_B``.

Ranks are matched by rank number and each pair is compared as two single traces
(:func:`tracelens.report.diff.build_diff`). The job's verdict follows its slowest rank:
ranks of one job wait for each other, so the job moves at the pace of the rank with the
largest headline time (median step, else request latency, else wall time, the same
metric on every rank), and a regression is that pace growing beyond the allowed
percentage. The job's own findings (stragglers, imbalance, shared findings) are compared
by id as a single report's are, and the stragglers are listed before and after.
"""

from __future__ import annotations

from typing import Any

from tracelens.report.diff import build_diff, finding_changes, headline_metrics, verdict

JOB_DIFF_SCHEMA = "tracelens.job.diff/1"
_HEADLINES = ("step_median_ns", "llm_e2e_p50_ns", "window_ns")


def build_job_diff(
    baseline: dict[str, Any],
    candidate: dict[str, Any],
    max_regression_pct: float | None = None,
    top: int = 15,
) -> dict[str, Any]:
    """What changed from job ``baseline`` to job ``candidate`` (two job reports)."""
    ra, rb = baseline["rank_reports"], candidate["rank_reports"]
    common = sorted(set(ra) & set(rb), key=int)
    ranks = []
    for r in common:
        d = build_diff(ra[r], rb[r], max_regression_pct, top)
        ranks.append({"rank": int(r), "verdict": d["verdict"], "diff": d})
    ma = {r: headline_metrics(ra[r]) for r in common}
    mb = {r: headline_metrics(rb[r]) for r in common}
    key = next(
        (
            k
            for k in _HEADLINES
            if common and all(m.get(k) is not None for m in [*ma.values(), *mb.values()])
        ),
        None,
    )
    job_verdict: dict[str, Any]
    if not common:
        job_verdict = {
            "status": "incomparable",
            "metric": None,
            "change_pct": None,
            "regression": False,
            "line": "No rank is in both jobs: nothing to compare rank by rank.",
        }
    elif key is None:
        job_verdict = verdict({}, {}, max_regression_pct)
    else:
        slow_a = _slowest(ma, key)
        slow_b = _slowest(mb, key)
        job_verdict = verdict({key: ma[slow_a][key]}, {key: mb[slow_b][key]}, max_regression_pct)
        job_verdict["line"] += f" on the slowest rank (rank {slow_a} -> rank {slow_b})"
        job_verdict["slowest_rank"] = {"baseline": int(slow_a), "candidate": int(slow_b)}
    findings = finding_changes(baseline["findings"], candidate["findings"])
    return {
        "schema": JOB_DIFF_SCHEMA,
        "baseline": _side(baseline),
        "candidate": _side(candidate),
        "verdict": job_verdict,
        "ranks": ranks,
        "only_in_baseline": sorted(int(r) for r in set(ra) - set(rb)),
        "only_in_candidate": sorted(int(r) for r in set(rb) - set(ra)),
        "stragglers": {
            "baseline": [_late(s) for s in baseline["stragglers"]],
            "candidate": [_late(s) for s in candidate["stragglers"]],
        },
        "findings": findings,
        "empty": all(x["diff"]["empty"] for x in ranks)
        and not (findings["appeared"] or findings["resolved"] or findings["changed"]),
    }


def _slowest(metrics: dict[str, dict[str, Any]], key: str) -> str:
    """The rank whose ``key`` is largest (the lowest such rank on a tie)."""
    return max(metrics, key=lambda r: (metrics[r][key], -int(r)))


def _side(job: dict[str, Any]) -> dict[str, Any]:
    return {"ranks": [r["rank"] for r in job["ranks"]], "files": [r["file"] for r in job["ranks"]]}


def _late(s: dict[str, Any]) -> dict[str, Any]:
    return {k: s[k] for k in ("rank", "last_in", "of", "held_back_ns", "cause")}
