"""The profiler's step markers (``ProfilerStep#N``) as the canonical tables hold them.

``torch.profiler`` wraps each ``prof.step()`` iteration in a range named ``ProfilerStep#N``:
a host range in current traces, an operator in 2021-era ones. Readers keep them as they
are; the gap causes, the analyzers and the workload all recognise them by this one name,
so a profiler that renames them needs one change here.
"""

from __future__ import annotations

STEP_PREFIX = "ProfilerStep#"
#: A step marker's whole name, as a regular expression (DuckDB's RE2 and Python's ``re``).
STEP_NAME_PATTERN = STEP_PREFIX + "[0-9]+"


def is_step(column: str = "name") -> str:
    """SQL predicate: ``column`` is a step marker's name."""
    return f"{column} LIKE '{STEP_PREFIX}%'"


def is_not_step(column: str = "name") -> str:
    """SQL predicate: ``column`` is not a step marker's name."""
    return f"{column} NOT LIKE '{STEP_PREFIX}%'"


#: Every step marker as ``(name, start_ns, end_ns)`` rows: host ranges and, for traces that
#: record steps as operators, operators. A step appears once per source that records it.
STEP_INTERVALS = f"""
    SELECT name, start_ns, end_ns FROM ranges WHERE device_id IS NULL AND {is_step()}
    UNION ALL
    SELECT name, start_ns, end_ns FROM cpu_ops WHERE {is_step()}
"""
