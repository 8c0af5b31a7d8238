"""A benchmark client's per-request results: ``vllm bench serve`` JSON, SGLang JSONL.

Both clients write one JSON object per benchmark run with the same per-request lists
(SGLang's ``bench_serving`` began as a copy of vLLM's): ``vllm bench serve --save-result
--save-detailed`` writes one object (``--append-result`` appends more, one per line);
``python -m sglang.bench_serving --output-file F --output-details`` appends one line per run.
Fields read, all lists with one entry per request:

- ``ttfts``: seconds from sending the request to its first streamed chunk (0 if it failed);
- ``itls``: per request, the seconds between consecutive streamed chunks;
- ``output_lens``: output tokens (the server's count when it reports usage, else the
  tokenizer's); 0 for a failed request;
- ``errors``: empty for a request that succeeded;
- and ``duration``: the benchmark's wall time in seconds;
- ``max_concurrency`` and ``request_rate`` (where written): the load the run was driven
  with, which a sweep over runs (``tracelens sweep``) orders them by. ``request_rate`` is
  ``"inf"`` (vLLM) or Infinity (SGLang) when every request was sent at once.

Neither file keeps a request's end-to-end latency, so it is rebuilt as TTFT + the sum of
its ITLs (the time of its last chunk; vLLM's own figure for ``/v1/completions``, a final
usage or ``[DONE]`` chunk later for chat and for SGLang), and TPOT as that sum over
(output tokens - 1), vLLM's ``(latency - ttft) / (output_len - 1)``. A chunk may carry
several tokens, so ITLs are chunk gaps, as both clients report them. The last object in the
file that has per-request lists is used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracelens.llm.latency_metrics import PERCENTILES
from tracelens.llm.request_latency import RequestLatency

_PER_REQUEST = ("ttfts", "itls", "output_lens")
# Keys only one client writes, to name it in the report.
_SGLANG_KEYS = ("total_output_tokens_retokenized", "output_throughput_retokenized", "accept_length")
_VLLM_KEYS = ("endpoint_type", "tokenizer_id", "request_goodput", "max_concurrent_requests")


class BenchInputError(ValueError):
    """An unusable results file; the text is one line naming the file and the problem."""


# Identity equality: a run is compared (and cached) as the one object read from its file.
@dataclass(eq=False)
class BenchRun:
    path: str
    tool: str
    duration_ns: float
    requests: list[RequestLatency]
    notes: list[str] = field(default_factory=list)
    # The load it was driven with; None where the file does not say (or the rate is infinite).
    max_concurrency: int | None = None
    request_rate: float | None = None


def _records(text: str, label: str) -> list[tuple[int, Any]]:
    """The JSON values in the file with their line numbers: one document, or JSON lines."""
    try:
        return [(1, json.loads(text))]
    except json.JSONDecodeError as exc:
        first_error = exc
    out: list[tuple[int, Any]] = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((i, json.loads(line)))
        except json.JSONDecodeError:
            raise BenchInputError(
                f"{label}: not JSON or JSON lines (line {first_error.lineno}: {first_error.msg})"
            ) from None
    if not out:
        raise BenchInputError(f"{label}: empty file")
    return out


def _tool_of(rec: dict[str, Any]) -> str:
    if any(k in rec for k in _SGLANG_KEYS):
        return "sglang bench_serving"
    if any(k in rec for k in _VLLM_KEYS):
        return "vllm bench serve"
    return "benchmark client"


def _number(v: Any) -> bool:
    # NumPy is imported where it is used: the report imports this module for its types,
    # and a report without --bench never reads a benchmark's results.
    import numpy as np

    return isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v)


def _requests(rec: dict[str, Any], label: str) -> list[RequestLatency]:
    ttfts, itls, lens = rec["ttfts"], rec["itls"], rec["output_lens"]
    errors = rec.get("errors")
    for key in _PER_REQUEST:
        if not isinstance(rec[key], list):
            raise BenchInputError(f"{label}: {key!r} is not a list")
    sizes = {k: len(rec[k]) for k in _PER_REQUEST}
    if isinstance(errors, list):
        sizes["errors"] = len(errors)
    if len(set(sizes.values())) != 1:
        shown = ", ".join(f"{k} {v:,}" for k, v in sizes.items())
        raise BenchInputError(f"{label}: per-request lists differ in length ({shown})")
    n = len(ttfts)
    if n == 0:
        raise BenchInputError(f"{label}: the result lists no requests")
    out: list[RequestLatency] = []
    for i in range(n):
        ttft, gaps, tokens = ttfts[i], itls[i], lens[i]
        if not _number(ttft) or not isinstance(gaps, list) or not all(map(_number, gaps)):
            raise BenchInputError(f"{label}: request {i}: ttft/itls are not numbers")
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise BenchInputError(f"{label}: request {i}: output length {tokens!r} is not a count")
        ok = not errors[i] if isinstance(errors, list) else ttft > 0
        if not ok:
            out.append(RequestLatency(str(i), False, int(tokens), None, None, None))
            continue
        gaps_ns = [float(g) * 1e9 for g in gaps]
        ttft_ns = float(ttft) * 1e9
        decode_ns = float(sum(gaps_ns))
        out.append(
            RequestLatency(
                rid=str(i),
                ok=True,
                output_tokens=int(tokens),
                ttft_ns=ttft_ns,
                tpot_ns=decode_ns / (tokens - 1) if tokens > 1 else None,
                e2e_ns=ttft_ns + decode_ns,
                itls_ns=gaps_ns,
            )
        )
    return out


def load_bench_results(path: Path) -> BenchRun:
    """Read a results file; :class:`BenchInputError` for anything unusable."""
    label = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BenchInputError(f"{label}: no such file") from None
    except IsADirectoryError:
        raise BenchInputError(f"{label}: is a directory, not a results file") from None
    except UnicodeDecodeError:
        raise BenchInputError(f"{label}: not a text file (expected JSON or JSON lines)") from None
    except OSError as exc:
        raise BenchInputError(f"{label}: cannot read ({exc.strerror or exc})") from None
    records = _records(text, label)
    detailed = [(line, r) for line, r in records if isinstance(r, dict) and "ttfts" in r]
    if not detailed:
        raise BenchInputError(
            f"{label}: no per-request results (ttfts, itls, output_lens); save them with "
            "`vllm bench serve --save-result --save-detailed` or "
            "`python -m sglang.bench_serving --output-details`"
        )
    line, rec = detailed[-1]
    missing = [k for k in _PER_REQUEST if k not in rec]
    if missing:
        raise BenchInputError(f"{label}: line {line}: no {', '.join(missing)} in the result")
    duration = rec.get("duration")
    if not isinstance(duration, int | float) or not _number(duration) or duration <= 0:
        raise BenchInputError(f"{label}: line {line}: no positive 'duration' (seconds)")
    notes = []
    if len(records) > 1:
        notes.append(
            f"{path.name} holds {len(records):,} benchmark results; the one on line {line:,} "
            "(the last with per-request results) is used"
        )
    return BenchRun(
        label,
        _tool_of(rec),
        float(duration) * 1e9,
        _requests(rec, label),
        notes,
        max_concurrency=_positive_int(rec.get("max_concurrency")),
        request_rate=_finite_rate(rec.get("request_rate")),
    )


def _positive_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _finite_rate(v: Any) -> float | None:
    # "inf" (vLLM's spelling) or Infinity: every request sent at once, no rate to order by.
    return float(v) if _number(v) and v > 0 else None


def _summary(values: list[float]) -> dict[str, Any]:
    """count, mean, p50/p90/p95/p99, max: the shape and interpolation of the trace's own."""
    if not values:
        return {"count": 0, "mean": None, **{f"p{p}": None for p in PERCENTILES}, "max": None}
    import numpy as np  # see _number

    a = np.asarray(values, dtype=np.float64)
    pct = np.percentile(a, PERCENTILES)  # linear interpolation, as DuckDB's quantile_cont
    return {
        "count": len(values),
        "mean": float(a.mean()),
        **{f"p{p}": float(v) for p, v in zip(PERCENTILES, pct, strict=True)},
        "max": float(a.max()),
    }


def client_summary(run: BenchRun) -> dict[str, Any]:
    """The ``llm.client`` section: the client's latencies, as it measured them."""
    ok = [r for r in run.requests if r.ok]
    seconds = run.duration_ns / 1e9
    output_tokens = sum(r.output_tokens for r in run.requests)
    return {
        "path": run.path,
        "tool": run.tool,
        "requests": len(run.requests),
        "completed": len(ok),
        "failed": len(run.requests) - len(ok),
        "output_tokens": output_tokens,
        "duration_ns": run.duration_ns,
        "ttft_ns": _summary([r.ttft_ns for r in ok if r.ttft_ns is not None]),
        "tpot_ns": _summary([r.tpot_ns for r in ok if r.tpot_ns is not None]),
        "itl_ns": _summary([g for r in ok for g in r.itls_ns]),
        "e2e_ns": _summary([r.e2e_ns for r in ok if r.e2e_ns is not None]),
        "requests_per_s": len(ok) / seconds,
        "output_tokens_per_s": output_tokens / seconds,
        "max_concurrency": run.max_concurrency,
        "request_rate": run.request_rate,
    }
