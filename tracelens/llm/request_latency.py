"""One served request's latencies, from the trace's annotations or a benchmark client's file.

SLO attainment and goodput (:mod:`tracelens.llm.slo`) judge these records whatever their
source, so the trace's requests and a client's requests are measured by one rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RequestLatency:
    """Times in nanoseconds (floats: a client's seconds need not be whole nanoseconds)."""

    rid: str
    # False for a request the client saw fail: it meets no objective.
    ok: bool
    output_tokens: int
    ttft_ns: float | None
    # None for requests with one output token or fewer (TPOT needs two token times).
    tpot_ns: float | None
    e2e_ns: float | None
    # The gaps between consecutive tokens (client: between streamed chunks).
    itls_ns: list[float] = field(default_factory=list)
    # Where the trace shows them: waiting before prefill, the first prefill step, first to
    # last token, and the time other requests' prefill steps ran inside its decode gaps.
    queue_ns: float | None = None
    prefill_ns: float | None = None
    decode_ns: float | None = None
    decode_stalled_ns: float | None = None
    # On the trace's clock, for findings' time ranges; None for a client's requests.
    start_ns: int | None = None
    end_ns: int | None = None
