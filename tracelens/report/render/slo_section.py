"""What the renderers show of ``llm.client`` and ``llm.slo``: rows and one-line captions."""

from __future__ import annotations

from tracelens.core.units import fmt_ns
from tracelens.llm.model import ClientSummary, SloAttainment
from tracelens.llm.slo import LABELS

SLO_COLS = ("objective", "bound", "met", "missed")


def _rate(v: float | None, unit: str) -> str:
    return "-" if v is None else f"{v:,.2f} {unit}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def client_title(client: ClientSummary) -> str:
    return f"LLM serving latency, client side ({client.tool}: {client.path})"


def client_headline(client: ClientSummary) -> str:
    failed = f" ({client.failed:,} failed)" if client.failed else ""
    return (
        f"{client.requests:,} requests{failed}, {client.output_tokens:,} output tokens "
        f"over {fmt_ns(client.duration_ns)}: "
        f"{_rate(client.output_tokens_per_s, 'tokens/s')}, "
        f"{_rate(client.requests_per_s, 'requests/s')}"
    )


def slo_title(slo: SloAttainment) -> str:
    whose = "the client's" if slo.applies_to == "client" else "the trace's"
    return f"SLO attainment ({whose} {slo.judged:,} requests)"


def slo_rows(slo: SloAttainment) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for key, bound in slo.objectives.items():
        name = key.removesuffix("_ns")
        rows.append(
            (
                LABELS[name],
                f"≤ {fmt_ns(bound)}",
                _pct(slo.attainment_pct[name]),
                f"{slo.missed[name]:,}",
            )
        )
    rows.append(
        (
            "all objectives",
            "",
            _pct(slo.attainment_pct["all"]),
            f"{slo.judged - slo.good_requests:,}",
        )
    )
    return rows


def slo_lines(slo: SloAttainment) -> list[str]:
    """Goodput, and the worst objective with its cause."""
    failed = f"; {slo.failed:,} failed requests meet none" if slo.failed else ""
    lines = [
        f"goodput {_rate(slo.goodput_requests_per_s, 'requests/s')}, "
        f"{_rate(slo.goodput_output_tokens_per_s, 'output tokens/s')} "
        f"({slo.good_requests:,} requests meet every objective{failed})"
    ]
    worst, cause = slo.worst_objective, slo.cause
    if worst and cause:
        lines.append(
            f"{LABELS[worst]} fails most. Among {cause['basis']}, {cause['text']}"
            + (f" Mostly {cause['phase']}." if cause.get("phase") else "")
        )
    return lines
