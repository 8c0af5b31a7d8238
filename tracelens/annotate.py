"""Annotate an LLM server so tracelens can derive TTFT, TPOT, ITL and throughput from a trace.

Each helper returns a :class:`Span` that emits the same range twice: as a
``torch.profiler.record_function`` range (lands in a PyTorch profiler Chrome trace) and as an
NVTX range (lands in an Nsight Systems report). Either backend is used only when its package
can be imported; without both the spans are no-ops, so annotated code runs everywhere.

The names are the public convention tracelens reads back:

- ``llm.request[<rid>]``: from a request's arrival to its completion;
- ``llm.prefill[<rid>,<rid>,...]``: one prefill step; each listed request emits its first
  token at the end of this range;
- ``llm.decode[<rid>,<rid>,...]``: one decode step; each listed request emits one more
  token at the end of this range.

Request ids are strings without ``[``, ``]`` or ``,`` (and without surrounding spaces).
A step span should end once its sampled tokens are on the host: GPU work is asynchronous,
and a span that ends at launch time would date the tokens too early.

A span is a context manager, and can also be started and ended explicitly. Request spans of
concurrent requests overlap without nesting, so ``start()``/``end()`` may happen in any
order: the torch backend keeps one ``record_function`` object per span, and the NVTX backend
uses start/end ranges (not push/pop), which need no nesting and may even end on another
thread.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType, TracebackType
from typing import Any

NVTX_DOMAIN = "tracelens"
_FORBIDDEN = frozenset("[],")

_backends: tuple[Any, ModuleType | None] | None = None


def _load_backends() -> tuple[Any, ModuleType | None]:
    """(record_function class or None, nvtx module or None), imported once, lazily.

    Importing torch costs seconds, so it happens on the first span, never on import of
    this module; a missing or broken package just disables its backend.
    """
    global _backends
    if _backends is None:
        record_function = None
        try:
            record_function = importlib.import_module("torch.profiler").record_function
        except Exception:  # any import failure means "no torch backend"
            record_function = None
        nvtx: ModuleType | None
        try:
            nvtx = importlib.import_module("nvtx")
            if not (hasattr(nvtx, "start_range") and hasattr(nvtx, "end_range")):
                nvtx = None
        except Exception:  # same: no NVTX backend
            nvtx = None
        _backends = (record_function, nvtx)
    return _backends


def backends() -> list[str]:
    """Names of the backends spans are emitted to (``torch``, ``nvtx``), for logs and tests."""
    record_function, nvtx = _load_backends()
    return [n for n, b in (("torch", record_function), ("nvtx", nvtx)) if b is not None]


def check_request_id(rid: object) -> str:
    """``rid`` as a string, or ValueError when the convention cannot carry it."""
    text = str(rid)
    if not text or text != text.strip():
        raise ValueError(f"request id {text!r} must be non-empty without surrounding spaces")
    bad = sorted(_FORBIDDEN.intersection(text))
    if bad:
        raise ValueError(f"request id {text!r} must not contain {' '.join(bad)}")
    return text


def request_name(rid: object) -> str:
    return f"llm.request[{check_request_id(rid)}]"


def step_name(kind: str, rids: Iterable[object]) -> str:
    if kind not in ("prefill", "decode"):
        raise ValueError(f"step kind must be 'prefill' or 'decode', got {kind!r}")
    ids = [check_request_id(r) for r in rids]
    if not ids:
        raise ValueError(f"a {kind} step must list at least one request id")
    return f"llm.{kind}[{','.join(ids)}]"


class Span:
    """One annotation range, emitted to every available backend."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._rf: Any = None
        self._nvtx_id: Any = None
        self._open = False

    def start(self) -> Span:
        if self._open:
            raise RuntimeError(f"span {self.name} already started")
        record_function, nvtx = _load_backends()
        if nvtx is not None:
            self._nvtx_id = nvtx.start_range(message=self.name, domain=NVTX_DOMAIN)
        if record_function is not None:
            self._rf = record_function(self.name)
            self._rf.__enter__()
        self._open = True
        return self

    def end(self) -> None:
        if not self._open:
            raise RuntimeError(f"span {self.name} is not running")
        self._open = False
        if self._rf is not None:
            self._rf.__exit__(None, None, None)
            self._rf = None
        if self._nvtx_id is not None:
            _, nvtx = _load_backends()
            if nvtx is not None:
                nvtx.end_range(self._nvtx_id)
            self._nvtx_id = None

    def __enter__(self) -> Span:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.end()


def request(rid: object) -> Span:
    """Span for one request, from its arrival to its completion."""
    return Span(request_name(rid))


def prefill(rids: Iterable[object]) -> Span:
    """Span for one prefill step; every listed request emits its first token at its end."""
    return Span(step_name("prefill", rids))


def decode(rids: Iterable[object]) -> Span:
    """Span for one decode step; every listed request emits one more token at its end."""
    return Span(step_name("decode", rids))
