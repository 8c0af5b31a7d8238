"""Nsight Systems export enumerations, built in because exports before 2021 carry no ENUM_* tables.

Values are CUPTI's and have not changed since nsys 2020.3; the canonical spellings on the
right are those of :mod:`ingest.schema`.
"""

from __future__ import annotations

# CUpti_ActivityMemcpyKind (copyKind) -> memcpys.kind
COPY_KINDS: dict[int, str] = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UVM_HtoD",
    12: "UVM_DtoH",
    13: "UVM_DtoD",
}

# CUpti_ActivityMemoryKind (srcKind, dstKind, memKind) -> memcpys.src_mem/dst_mem, memsets.mem.
# The "static" kinds are __device__/__managed__ variables: the same memory for our purposes.
MEMORY_KINDS: dict[int, str] = {
    0: "pageable",
    1: "pinned",
    2: "device",
    3: "array",
    4: "managed",
    5: "device",
    6: "managed",
    7: "unknown",
}

# CUpti_ActivitySynchronizationType (syncType) -> syncs.kind, spelled as Kineto's
# ``cuda_sync_kind`` so both readers fill the column alike.
SYNC_KINDS: dict[int, str] = {
    0: "Unknown",
    1: "Event Sync",
    2: "Stream Wait Event",
    3: "Stream Sync",
    4: "Context Sync",
}

# eventClass of CUPTI_ACTIVITY_KIND_RUNTIME rows -> api_calls.kind
API_CLASSES: dict[int, str] = {0: "runtime", 1: "driver"}

# NVTX_EVENTS.eventType
NVTX_MARK = 34
NVTX_PUSH_POP = 59
NVTX_START_END = 60
NVTX_DOMAIN_CREATE = 75

# CUPTI writes this where a stream or event does not apply (e.g. a context synchronize).
INVALID_ID = 0xFFFFFFFF


def sql_case(column: str, mapping: dict[int, str], default: str) -> str:
    """A DuckDB ``CASE`` expression mapping ``column``'s integer codes to strings."""
    whens = " ".join(f"WHEN {k} THEN '{v}'" for k, v in mapping.items())
    return f"CASE {column} {whens} ELSE '{default}' END"
