"""Compare two runs: headline metrics, kernels, operators and findings, with a verdict.

:func:`build_diff` takes two reports (the dicts of :mod:`tracelens.report`) and returns one
JSON-able dict, so the CLI (``tracelens diff``) and the web compare view show the same
content. Only what changed is listed: the diff of a trace with itself has no metric deltas,
no kernel or operator rows and no finding changes.

The verdict compares one headline time, lower is better: the median ``ProfilerStep`` time
when both runs have a steps finding (runs of different lengths stay comparable), else the
LLM end-to-end request latency p50 when both have one, else the analysed window (first to
last GPU activity). A change above ``max_regression_pct`` is a regression.
"""

from __future__ import annotations

from typing import Any

from tracelens.analyzers.steps import step_timing
from tracelens.core.units import fmt_ns

DIFF_SCHEMA = "tracelens.report.diff/1"
# Changes smaller than this (percent) are reported as "unchanged" in the verdict.
NOISE_PCT = 1.0

# (key, label, unit, better): unit "ns" | "count" | "bytes" | "pct" | "rate".
_METRICS: list[tuple[str, str, str, str]] = [
    ("window_ns", "wall time (analysed window)", "ns", "lower"),
    ("gpu_busy_ns", "GPU busy time", "ns", "lower"),
    ("gpu_busy_pct", "GPU busy share", "pct", "higher"),
    ("kernel_count", "kernels", "count", "lower"),
    ("kernel_ns", "kernel time", "ns", "lower"),
    ("memcpy_count", "memory copies", "count", "lower"),
    ("h2d_bytes", "host-to-device bytes", "bytes", "lower"),
    ("h2d_time_ns", "host-to-device copy time", "ns", "lower"),
    ("step_median_ns", "median step time", "ns", "lower"),
    ("step_count", "profiled steps", "count", "none"),
    ("llm_ttft_p50_ns", "TTFT p50", "ns", "lower"),
    ("llm_tpot_p50_ns", "TPOT p50", "ns", "lower"),
    ("llm_e2e_p50_ns", "end-to-end latency p50", "ns", "lower"),
    ("llm_output_tokens_per_s", "output tokens/s", "rate", "higher"),
]


def headline_metrics(report: dict[str, Any]) -> dict[str, float | int | None]:
    """The comparable numbers of one report, by key (None where the run lacks them)."""
    m = report.get("metrics", {})
    devices = report.get("devices", [])
    out: dict[str, float | int | None] = {
        "window_ns": m.get("window_ns"),
        "gpu_busy_ns": sum(d.get("busy_ns", 0) for d in devices) if devices else None,
        "gpu_busy_pct": m.get("gpu_busy_pct"),
        "kernel_count": m.get("kernel_count"),
        # Only when the report lists every kernel; a top-N list would understate it.
        "kernel_ns": sum(k["total_ns"] for k in report.get("top_kernels", []))
        if _lists_all_kernels(report) and m.get("kernel_count")
        else None,
        "memcpy_count": m.get("memcpy_count"),
        "h2d_bytes": m.get("h2d_bytes"),
        "h2d_time_ns": m.get("h2d_time_ns"),
    }
    steps = step_timing(report.get("findings", []))
    if steps is not None:
        out["step_median_ns"] = steps.median_step_ns
        out["step_count"] = steps.step_count
    llm = report.get("llm")
    if isinstance(llm, dict):
        for key in ("ttft", "tpot", "e2e"):
            summary = llm.get(f"{key}_ns")
            if isinstance(summary, dict) and summary.get("p50") is not None:
                out[f"llm_{key}_p50_ns"] = summary["p50"]
        out["llm_output_tokens_per_s"] = llm.get("output_tokens_per_s")
    return out


def _lists_all_kernels(report: dict[str, Any]) -> bool:
    listed = sum(k["count"] for k in report.get("top_kernels", []))
    return listed == report.get("metrics", {}).get("kernel_count")


def _pct(base: float | int | None, cand: float | int | None) -> float | None:
    if base is None or cand is None or base == 0:
        return None
    return round(100.0 * (cand - base) / base, 3)


def _metric_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for key, label, unit, better in _METRICS:
        va, vb = a.get(key), b.get(key)
        if va is None and vb is None:
            continue
        delta = None if va is None or vb is None else vb - va
        rows.append(
            {
                "key": key,
                "label": label,
                "unit": unit,
                "better": better,
                "baseline": va,
                "candidate": vb,
                "delta": delta,
                "delta_pct": _pct(va, vb),
                "changed": va != vb,
            }
        )
    return rows


def _table_rows(
    base: list[dict[str, Any]], cand: list[dict[str, Any]], top: int
) -> list[dict[str, Any]]:
    """Rows by name whose count or total time differ, largest absolute change first."""
    a = {r["name"]: r for r in base}
    b = {r["name"]: r for r in cand}
    rows = []
    for name in sorted(set(a) | set(b)):
        ra, rb = a.get(name), b.get(name)
        ca, cb = (ra or {}).get("count", 0), (rb or {}).get("count", 0)
        ta, tb = (ra or {}).get("total_ns", 0), (rb or {}).get("total_ns", 0)
        if ca == cb and ta == tb:
            continue
        rows.append(
            {
                "name": name,
                "status": "new" if ra is None else ("gone" if rb is None else "changed"),
                "baseline_count": ca,
                "candidate_count": cb,
                "baseline_ns": ta,
                "candidate_ns": tb,
                "delta_ns": tb - ta,
                "delta_pct": _pct(ta, tb) if ra and rb else None,
            }
        )
    rows.sort(key=lambda r: (-abs(r["delta_ns"]), r["name"]))
    return rows[:top]


def finding_changes(base: list[dict[str, Any]], cand: list[dict[str, Any]]) -> dict[str, Any]:
    a = {f["id"]: f for f in base}
    b = {f["id"]: f for f in cand}

    def brief(f: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f["id"],
            "analyzer": f["analyzer"],
            "title": f["title"],
            "severity": f["severity"],
            "impact_ns": f["impact_ns"],
        }

    appeared = [brief(b[i]) for i in b if i not in a]
    resolved = [brief(a[i]) for i in a if i not in b]
    changed = []
    for i in a.keys() & b.keys():
        fa, fb = a[i], b[i]
        if fa["impact_ns"] != fb["impact_ns"] or fa["severity"] != fb["severity"]:
            changed.append(
                {
                    **brief(fb),
                    "baseline_title": fa["title"],
                    "baseline_severity": fa["severity"],
                    "baseline_impact_ns": fa["impact_ns"],
                    "delta_ns": fb["impact_ns"] - fa["impact_ns"],
                }
            )
    for lst in (appeared, resolved):
        lst.sort(key=lambda f: (-f["impact_ns"], f["id"]))
    changed.sort(key=lambda f: (-abs(f["delta_ns"]), f["id"]))
    return {
        "appeared": appeared,
        "resolved": resolved,
        "changed": changed,
        "unchanged_count": len(a.keys() & b.keys()) - len(changed),
    }


def verdict(
    a: dict[str, Any], b: dict[str, Any], max_regression_pct: float | None
) -> dict[str, Any]:
    candidates = (
        ("step_median_ns", "median step time"),
        ("llm_e2e_p50_ns", "end-to-end latency p50"),
        ("window_ns", "wall time"),
    )
    chosen = next(((k, lbl) for k, lbl in candidates if a.get(k) and b.get(k) is not None), None)
    if chosen is None:
        return {
            "status": "incomparable",
            "metric": None,
            "change_pct": None,
            "regression": False,
            "line": "No common headline time: neither run has GPU activity, steps or requests.",
        }
    key, label = chosen
    change = _pct(a[key], b[key]) or 0.0
    regression = max_regression_pct is not None and change > max_regression_pct
    if regression:
        status = "regression"
    elif change > NOISE_PCT:
        status = "slower"
    elif change < -NOISE_PCT:
        status = "faster"
    else:
        status = "unchanged"
    line = f"{status.upper()}: {label} {fmt_ns(a[key])} -> {fmt_ns(b[key])} ({change:+.1f}%"
    if max_regression_pct is not None:
        line += f"; allowed +{max_regression_pct:g}%"
    line += ")"
    return {
        "status": status,
        "metric": key,
        "metric_label": label,
        "baseline": a[key],
        "candidate": b[key],
        "change_pct": change,
        "max_regression_pct": max_regression_pct,
        "regression": regression,
        "line": line,
    }


def build_diff(
    baseline: dict[str, Any],
    candidate: dict[str, Any],
    max_regression_pct: float | None = None,
    top: int = 15,
) -> dict[str, Any]:
    """What changed from ``baseline`` to ``candidate`` (two reports), as a JSON-able dict."""
    ma, mb = headline_metrics(baseline), headline_metrics(candidate)
    kernels = _table_rows(baseline.get("top_kernels", []), candidate.get("top_kernels", []), top)
    ops = _table_rows(baseline.get("top_ops", []), candidate.get("top_ops", []), top)
    findings = finding_changes(baseline.get("findings", []), candidate.get("findings", []))
    metrics = _metric_rows(ma, mb)
    return {
        "schema": DIFF_SCHEMA,
        "baseline": _source(baseline),
        "candidate": _source(candidate),
        "verdict": verdict(ma, mb, max_regression_pct),
        "metrics": metrics,
        "kernels": kernels,
        "operators": ops,
        "findings": findings,
        "empty": not (
            any(r["changed"] for r in metrics)
            or kernels
            or ops
            or findings["appeared"]
            or findings["resolved"]
            or findings["changed"]
        ),
        "notes": []
        if _lists_all_kernels(baseline) and _lists_all_kernels(candidate)
        else [
            "Kernel and operator rows compare the reports' top lists; a name missing on one "
            "side may lie below that report's cut-off."
        ],
    }


def _source(report: dict[str, Any]) -> dict[str, Any]:
    src = report.get("source", {})
    return {"path": src.get("path"), "sha256": src.get("sha256"), "format": src.get("format")}
