"""Service-level objectives and goodput, as vLLM's serving benchmark defines request goodput.

An objective bounds one per-request latency; a request *meets* it when its value is at
most the bound (``vllm bench serve --goodput`` keeps a request when ``value <= bound``):

- ``ttft``: its time to first token;
- ``tpot``: its time per output token, (e2e - TTFT) / (output tokens - 1); a request with
  one output token or fewer counts as TPOT 0, as in vLLM;
- ``itl``: every one of its inter-token gaps (its longest gap). vLLM's goodput has no ITL
  objective; this is the strict per-request reading of one;
- ``e2e`` (``e2el`` in vLLM): its end-to-end latency.

A request is *good* when it meets every objective given; one the client saw fail meets
none. Attainment is the share of judged requests meeting an objective (``all``: every one).
Goodput is good requests per second (vLLM's ``request_goodput``) and their output tokens
per second, over the benchmark's duration (a client's file) or the trace's request span.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from tracelens.core.units import fmt_ns
from tracelens.llm.request_latency import RequestLatency

OBJECTIVES = ("ttft", "tpot", "itl", "e2e")
LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "end-to-end"}
_ALIASES = {"e2el": "e2e"}
# A bare number is milliseconds, the unit of vLLM's --goodput values.
_UNIT_NS = {"": 1e6, "ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_VALUE = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zµ]*)$")


@dataclass(frozen=True)
class Objectives:
    """The bounds given, in nanoseconds; None where no objective is set."""

    ttft_ns: int | None = None
    tpot_ns: int | None = None
    itl_ns: int | None = None
    e2e_ns: int | None = None

    def items(self) -> list[tuple[str, int]]:
        """``(name, bound_ns)`` of the objectives set, in the fixed order of OBJECTIVES."""
        out = []
        for name in OBJECTIVES:
            bound = getattr(self, f"{name}_ns")
            if bound is not None:
                out.append((name, int(bound)))
        return out

    def spec(self) -> str:
        """The canonical text, e.g. ``ttft=200ms,tpot=50ms`` (parses back to the same)."""
        return ",".join(f"{name}={_fmt_bound(ns)}" for name, ns in self.items())


def _fmt_bound(ns: int) -> str:
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns % scale == 0:
            return f"{ns // scale}{unit}"
    return f"{ns}ns"


def parse_slo(text: str) -> Objectives:
    """``ttft=200ms,tpot=50ms,itl=100ms,e2e=10s`` -> Objectives; ValueError says what is wrong.

    ``NAME:VALUE`` (vLLM's spelling) works too; a bare number is milliseconds.
    """
    bounds: dict[str, int] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep:
            name, sep, value = item.partition(":")
        if not sep:
            raise ValueError(f"expected NAME=VALUE, got {item!r}")
        key = _ALIASES.get(name.strip().lower(), name.strip().lower())
        if key not in OBJECTIVES:
            raise ValueError(
                f"unknown objective {name.strip()!r} (one of: {', '.join(OBJECTIVES)})"
            )
        if key in bounds:
            raise ValueError(f"objective {key} given twice")
        m = _VALUE.match(value.strip().lower())
        if m is None or m.group(2) not in _UNIT_NS:
            raise ValueError(
                f"{key}: expected a duration such as 200ms, 0.5s or 800us, got {value.strip()!r}"
            )
        ns = float(m.group(1)) * _UNIT_NS[m.group(2)]
        if not math.isfinite(ns) or ns <= 0:
            raise ValueError(f"{key}: the bound must be a positive duration, got {value.strip()!r}")
        bounds[key] = round(ns)
    if not bounds:
        raise ValueError("no objective given (e.g. ttft=200ms,tpot=50ms)")
    return Objectives(**{f"{k}_ns": v for k, v in bounds.items()})


def value_of(r: RequestLatency, name: str) -> float | None:
    """The request's value for objective ``name``; None when it cannot be known."""
    if name == "ttft":
        return r.ttft_ns
    if name == "e2e":
        return r.e2e_ns
    if r.output_tokens < 1:
        return None
    if name == "tpot":
        return r.tpot_ns if r.output_tokens > 1 and r.tpot_ns is not None else 0.0
    return max(r.itls_ns, default=0.0)


def excess_of(r: RequestLatency, name: str, bound: int) -> float:
    """Latency the request would have to lose to meet the objective (0 when it meets it).

    TPOT's excess is per token, so it counts once per token after the first; ITL's is the
    part of each gap beyond the bound.
    """
    if not r.ok:
        return 0.0
    if name == "itl":
        return sum(max(0.0, g - bound) for g in r.itls_ns)
    v = value_of(r, name)
    if v is None or v <= bound:
        return 0.0
    if name == "tpot":
        return (v - bound) * (r.output_tokens - 1)
    return v - bound


@dataclass
class Judged:
    """One request against every objective: met[name] is True/False."""

    request: RequestLatency
    met: dict[str, bool]

    @property
    def good(self) -> bool:
        return all(self.met.values())


def judge(requests: list[RequestLatency], objectives: Objectives) -> tuple[list[Judged], int]:
    """The requests that can be judged against every objective, and how many cannot.

    A failed request is judged (it meets none); a completed one only when every objective's
    value is known (a trace request without a request range has no TTFT).
    """
    out: list[Judged] = []
    unjudged = 0
    for r in requests:
        if not r.ok:
            out.append(Judged(r, {name: False for name, _ in objectives.items()}))
            continue
        values = {name: value_of(r, name) for name, _ in objectives.items()}
        if any(v is None for v in values.values()):
            unjudged += 1
            continue
        out.append(
            Judged(r, {name: values[name] <= bound for name, bound in objectives.items()})  # type: ignore[operator]
        )
    return out, unjudged


def attainment(
    requests: list[RequestLatency], objectives: Objectives, duration_ns: float | None
) -> dict[str, Any]:
    """The ``llm.slo`` numbers: attainment per objective and for all, goodput."""
    judged, unjudged = judge(requests, objectives)
    n = len(judged)
    names = [name for name, _ in objectives.items()]
    missed = {name: sum(1 for j in judged if not j.met[name]) for name in names}
    good = [j.request for j in judged if j.good]
    good_tokens = sum(r.output_tokens for r in good)
    seconds = duration_ns / 1e9 if duration_ns else None

    def pct(k: int) -> float | None:
        return round(100.0 * k / n, 3) if n else None

    pcts: dict[str, float | None] = {name: pct(n - missed[name]) for name in names}
    pcts["all"] = pct(len(good))
    worst = max(names, key=lambda k: (missed[k], -names.index(k))) if n else None
    return {
        "objectives": {f"{name}_ns": bound for name, bound in objectives.items()},
        "spec": objectives.spec(),
        "requests": len(requests),
        "judged": n,
        "unjudged": unjudged,
        "failed": sum(1 for r in requests if not r.ok),
        "attainment_pct": pcts,
        "missed": missed,
        "good_requests": len(good),
        "good_output_tokens": good_tokens,
        "duration_ns": None if duration_ns is None else float(duration_ns),
        "goodput_requests_per_s": len(good) / seconds if seconds else None,
        "goodput_output_tokens_per_s": good_tokens / seconds if seconds else None,
        "worst_objective": worst if worst is not None and missed[worst] else None,
    }


def missing(requests: list[RequestLatency], objectives: Objectives, name: str) -> list[Judged]:
    """The judged, completed requests that miss objective ``name``."""
    judged, _ = judge(requests, objectives)
    return [j for j in judged if j.request.ok and not j.met[name]]


def bound_text(name: str, bound_ns: int) -> str:
    return f"{LABELS[name]} ≤ {fmt_ns(bound_ns)}"
