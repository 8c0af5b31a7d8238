"""The LLM latency analyzer's thresholds: the ``llm_*`` fields of :class:`Thresholds`.

They are named, documented and overridable (``--threshold NAME=VALUE``) like every other
threshold; this module gives the LLM code one way to read them, from a ``Thresholds`` or,
where none is at hand, from the defaults.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from tracelens.core.thresholds import Thresholds

DEFAULTS: dict[str, float] = {
    f.name: float(f.default)  # type: ignore[arg-type]
    for f in fields(Thresholds)
    if f.name.startswith("llm_")
}


def llm_threshold(t: Any, name: str) -> float:
    return float(getattr(t, name, DEFAULTS[name]))
