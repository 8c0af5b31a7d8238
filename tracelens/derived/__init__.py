"""Derived tables: the intermediate tables the analysis builds from the canonical ones.

One module per table or family of related tables, each declaring its tables
(:class:`~tracelens.derived.table.DerivedTable`: the SELECT that fills it and what each
column holds); :func:`require` builds one on demand, its requirements first, once per
:class:`~tracelens.core.tracedb.TraceDB`. :data:`DERIVED_MODULES` is the registry: every
module with the tables it declares, each table after what it requires. ``docs/schema.md``
is generated from it (``tracelens schema --markdown``).
"""

from __future__ import annotations

from types import ModuleType

from tracelens.derived import (
    blocking_calls,
    host_copies,
    kernel_ops,
    llm_annotations,
    llm_latency,
    llm_step_gpu,
    profiler_steps,
)
from tracelens.derived.table import DerivedTable, require

DERIVED_MODULES: dict[ModuleType, tuple[DerivedTable, ...]] = {
    kernel_ops: (kernel_ops.KERNEL_OPS,),
    host_copies: (host_copies.HOST_COPIES,),
    blocking_calls: (blocking_calls.BLOCKING_CALLS, blocking_calls.SYNC_GAPS),
    profiler_steps: (
        profiler_steps.PROFILER_STEPS,
        profiler_steps.PROFILER_STEP_KERNELS,
        profiler_steps.PROFILER_STEP_METRICS,
    ),
    llm_annotations: (
        llm_annotations.LLM_RAW,
        llm_annotations.LLM_REQUEST_RANGES,
        llm_annotations.LLM_REQUESTS,
        llm_annotations.LLM_STEP_RANGES,
        llm_annotations.LLM_STEP_MEMBERS_ALL,
        llm_annotations.LLM_STEP_MEMBERS,
        llm_annotations.LLM_STEPS,
        llm_annotations.LLM_TOKENS,
    ),
    llm_latency: (
        llm_latency.LLM_PER_REQUEST,
        llm_latency.LLM_ITL,
        llm_latency.LLM_ITL_STALLS,
    ),
    llm_step_gpu: (llm_step_gpu.LLM_STEP_GPU,),
}

DERIVED_TABLES: tuple[DerivedTable, ...] = tuple(
    t for tables in DERIVED_MODULES.values() for t in tables
)

__all__ = ["DERIVED_MODULES", "DERIVED_TABLES", "DerivedTable", "require"]
