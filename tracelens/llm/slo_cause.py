"""Why requests miss an objective: the serving phase their time went to, as the trace shows it.

A request's latency is made of waiting before its prefill (queueing), the prefill step
(together: TTFT) and decoding (first to last token, in which other requests' prefill steps
can stall it). For the requests that miss the worst objective, the phase the objective
measures that holds most of their time is the cause:

- TTFT: queueing or prefill;
- TPOT and ITL: decode (with the share of it other requests' prefills stalled);
- end-to-end: whichever of queueing, prefill and decode is largest.

A benchmark client's requests carry no phases and cannot be matched to the trace's, so for
them the phases come from the trace's own annotated requests; without annotations only
TTFT against decode can be told apart.
"""

from __future__ import annotations

from typing import Any

from tracelens.core.units import fmt_ns
from tracelens.llm.request_latency import RequestLatency

_PHASE_WORDS = {"queue_ns": "queueing", "prefill_ns": "prefill", "decode_ns": "decode"}


def phase_sums(requests: list[RequestLatency]) -> dict[str, float | None]:
    """Summed phase times; a phase is None when no request shows it."""

    def total(attr: str) -> float | None:
        vals = [getattr(r, attr) for r in requests if getattr(r, attr) is not None]
        return float(sum(vals)) if vals else None

    return {
        "queue_ns": total("queue_ns"),
        "prefill_ns": total("prefill_ns"),
        "decode_ns": total("decode_ns"),
        "decode_stalled_ns": total("decode_stalled_ns"),
        "ttft_ns": total("ttft_ns"),
    }


def client_phase_sums(requests: list[RequestLatency]) -> dict[str, float | None]:
    """A client's requests: TTFT, and decode as end-to-end minus TTFT."""
    pairs = [
        (r.ttft_ns, r.e2e_ns)
        for r in requests
        if r.ok and r.ttft_ns is not None and r.e2e_ns is not None
    ]
    if not pairs:
        return {"ttft_ns": None, "decode_ns": None}
    return {
        "ttft_ns": float(sum(t for t, _ in pairs)),
        "decode_ns": float(sum(e - t for t, e in pairs)),
    }


def _share(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.0f}%" if whole > 0 else "-"


def cause(objective: str, sums: dict[str, float | None]) -> dict[str, Any]:
    """``{"phase": queueing|prefill|decode|None, "text": a clause, **sums}``.

    The text continues "Among <the requests judged>, ...".
    """
    q, p, d = sums.get("queue_ns"), sums.get("prefill_ns"), sums.get("decode_ns")
    stalled = sums.get("decode_stalled_ns")
    phase: str | None = None
    if objective == "ttft":
        if q is not None and p is not None:
            phase = "queueing" if q >= p else "prefill"
            text = (
                f"queueing took {fmt_ns(q)} ({_share(q, q + p)}) of their time to first token "
                f"and prefill {fmt_ns(p)} ({_share(p, q + p)})."
            )
        else:
            text = (
                "the trace has no llm.request/llm.prefill annotations to split their time to "
                "first token into queueing and prefill."
            )
    elif objective in ("tpot", "itl"):
        phase = "decode"
        text = "their decode phase"
        text += f" took {fmt_ns(d)}" if d is not None else " is what the objective measures"
        if stalled and d:
            text += (
                f"; other requests' prefill steps ran inside their decode gaps for "
                f"{fmt_ns(stalled)} ({_share(stalled, d)} of it)"
            )
        text += "."
    else:
        parts = {k: v for k, v in (("queue_ns", q), ("prefill_ns", p), ("decode_ns", d))}
        known = {k: v for k, v in parts.items() if v is not None}
        if q is not None and p is not None and d is not None:
            top = max(known, key=lambda k: (known[k], k == "queue_ns"))
            phase = _PHASE_WORDS[top]
            whole = q + p + d
            text = (
                f"queueing took {fmt_ns(q)} ({_share(q, whole)}) of their latency, prefill "
                f"{fmt_ns(p)} ({_share(p, whole)}) and decode {fmt_ns(d)} ({_share(d, whole)})."
            )
        else:
            t = sums.get("ttft_ns")
            if t is not None and d is not None:
                whole = t + d
                if d > t:
                    phase = "decode"
                text = (
                    f"the time to first token took {fmt_ns(t)} ({_share(t, whole)}) of their "
                    f"latency and decode {fmt_ns(d)} ({_share(d, whole)}); the trace has no "
                    "annotations to split the first into queueing and prefill."
                )
            else:
                text = "the trace shows no phases for these requests."
    return {"phase": phase, "text": text, **sums}
