"""What a Chrome-trace read counted: events, the ones it skipped, and what it repaired."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ChromeReadStats:
    events: int = 0
    dropped_missing: int = 0
    dropped_negative: int = 0
    warnings: list[str] = field(default_factory=list)
    # events per category (lower-cased; ``ph:X`` etc. for events without one), as the
    # census counted them: what says whether the PyTorch profiler wrote the trace
    categories: dict[str, int] = field(default_factory=dict)
    # an operator's ``"Call stack"`` seen near a blob's start: the 2021 profiler's Python
    # stacks (``with_stack=True``), where the trace does not list its options
    call_stacks: bool = False
