"""Writes a :class:`Scenario` as an Nsight Systems SQLite export (``nsys export --type sqlite``).

The same planted scenario written here and by :mod:`.chrome_writer` must give the same
findings. What nsys records differently is reproduced as nsys would record it:

- times are on the session clock (nanoseconds since the capture started), not the epoch;
- names live in ``StringIds``; runtime API names carry their version suffix
  (``cudaLaunchKernel_v7000``); every runtime call gets a ``correlationId``;
- host operators (``cpu_ops``) become NVTX push/pop ranges named as PyTorch's
  ``emit_nvtx`` names them (``aten::mm, seq = 3, op_id = 7, sizes = [[4096, 4096], ...]``);
  annotation ranges become NVTX ranges too, in their NVTX domain when they have one;
- a blocking synchronize call also leaves a CUPTI synchronization record;
- threads are ``globalTid`` values, ``<HW:8><VM:8><PID:24><TID:24>``.

``schema`` picks the era (:mod:`.nsys_layouts`): ``current`` puts range text in
``StringIds`` via ``textId`` and writes ENUM tables and ``META_DATA_EXPORT``; ``legacy``
writes what nsys 2020.x wrote.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ingest.nsys.enums import COPY_KINDS, MEMORY_KINDS
from tracelens.testing.nsys_layouts import EXPORT_META, LAYOUTS, column_names
from tracelens.testing.scenario import Scenario

SESSION_OFFSET_NS = 300_000_000
VM_BITS = 1 << 48

# The inverse of the reader's CUPTI tables (which the corpus exports check): one source of
# truth for the codes. Memory kinds map back to their first (non-static) code.
_COPY_KIND_CODES = {kind: code for code, kind in COPY_KINDS.items()}
_MEM_KIND_CODES: dict[str, int] = {}
for _code, _kind in sorted(MEMORY_KINDS.items()):
    _MEM_KIND_CODES.setdefault(_kind, _code)
# Blocking API -> CUPTI synchronization type it records.
_SYNC_TYPE_OF_API = {
    "cudaEventSynchronize": 1,
    "cudaStreamWaitEvent": 2,
    "cudaStreamSynchronize": 3,
    "cudaDeviceSynchronize": 4,
}
_API_VERSION = {"cudaLaunchKernel": "_v7000"}
_ENUM_ROWS = {
    "ENUM_CUDA_MEMCPY_OPER": [
        (v, f"CUDA_MEMCPY_KIND_{k.upper()}", k) for k, v in _COPY_KIND_CODES.items()
    ],
    "ENUM_CUDA_MEM_KIND": [
        (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
        (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
        (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
        (3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"),
        (4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"),
        (5, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"),
        (6, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static"),
        (7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"),
    ],
    "ENUM_CUPTI_SYNC_TYPE": [
        (0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
        (1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"),
        (2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"),
        (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
        (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync"),
    ],
    "ENUM_NSYS_EVENT_TYPE": [
        (34, "NvtxMark", "NvtxMark"),
        (59, "NvtxPushPopRange", "NvtxPushPopRange"),
        (60, "NvtxStartEndRange", "NvtxStartEndRange"),
        (75, "NvtxDomainCreate", "NvtxDomainCreate"),
    ],
    "ENUM_NSYS_EVENT_CLASS": [
        (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
        (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"),
    ],
}


def global_tid(pid: int, tid: int) -> int:
    return VM_BITS | (pid << 24) | tid


def global_pid(pid: int) -> int:
    return VM_BITS | (pid << 24)


def create_tables(db: sqlite3.Connection, schema: str) -> None:
    """Create the era's tables (empty), as ``nsys export`` lays them out."""
    if schema not in LAYOUTS:
        raise ValueError(f"unknown nsys schema {schema!r}; expected one of {sorted(LAYOUTS)}")
    for table, columns in LAYOUTS[schema].items():
        db.execute(f"CREATE TABLE {table} ({', '.join(columns)})")


def insert_rows(db: sqlite3.Connection, schema: str, table: str, rows: list[dict]) -> None:
    """Insert dict rows; columns the era lacks are dropped, NOT NULL ones default to 0."""
    if not rows:
        return
    cols = column_names(schema, table)
    not_null = {c.split()[0] for c in LAYOUTS[schema][table] if "NOT NULL" in c}
    values = [
        tuple(r.get(c, "[]" if c == "tensorSizeMinusOneElements" else None) for c in cols)
        for r in rows
    ]
    values = [
        tuple(0 if v is None and c in not_null else v for c, v in zip(cols, row, strict=True))
        for row in values
    ]
    marks = ", ".join("?" for _ in cols)
    db.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks})", values)


class _Strings:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, value: str) -> int:
        if value not in self.ids:
            self.ids[value] = len(self.ids) + 1
        return self.ids[value]


def _emit_nvtx_name(name: str, seq: int, op_id: int, shapes: list[list[int]]) -> str:
    if not name.startswith("aten::"):
        return name
    text = f"{name}, seq = {seq}, op_id = {op_id}"
    if shapes:
        text += f", sizes = {shapes}"
    return text


def write_nsys_sqlite(sc: Scenario, path: str | Path, schema: str = "current") -> Path:
    """Write ``sc`` to ``path`` as an nsys SQLite export of era ``schema``."""
    p = Path(path)
    if p.exists():
        p.unlink()
    db = sqlite3.connect(p)
    try:
        create_tables(db, schema)
        _fill(db, sc, schema)
        db.commit()
    finally:
        db.close()
    return p


def _fill(db: sqlite3.Connection, sc: Scenario, schema: str) -> None:
    s = _Strings()
    t = SESSION_OFFSET_NS
    current = schema == "current"
    gpid = global_pid(sc.pid)

    next_corr = max(
        [0]
        + [a.correlation_id for a in sc.api_calls if a.correlation_id is not None]
        + [k.correlation_id for k in sc.kernels]
    )
    runtime, syncs = [], []
    for a in sorted(sc.api_calls, key=lambda a: a.start_ns):
        corr = a.correlation_id
        if corr is None:
            next_corr += 1
            corr = next_corr
        suffix = _API_VERSION.get(a.name, "_v3020")
        row = {
            "start": t + a.start_ns,
            "end": t + a.start_ns + a.dur_ns,
            "eventClass": 0,
            "globalTid": global_tid(a.pid, a.tid),
            "correlationId": corr,
            "nameId": s(a.name + suffix),
            "returnValue": 0,
        }
        runtime.append(row)
        if a.name in _SYNC_TYPE_OF_API:
            sync_type = _SYNC_TYPE_OF_API[a.name]
            syncs.append(
                {
                    "start": row["start"],
                    "end": row["end"],
                    "deviceId": sc.devices[0].device_id if sc.devices else 0,
                    "contextId": 1,
                    "streamId": 7 if sync_type == 3 else 0xFFFFFFFF,
                    "correlationId": corr,
                    "globalPid": global_pid(a.pid),
                    "deprecatedSyncType": None,
                    "syncType": sync_type,
                    "eventId": 0xFFFFFFFF,
                }
            )
    insert_rows(db, schema, "CUPTI_ACTIVITY_KIND_RUNTIME", runtime)
    insert_rows(db, schema, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", syncs)

    kernels = []
    for i, k in enumerate(sorted(sc.kernels, key=lambda k: k.start_ns)):
        short = k.name.split("(")[0].split("<")[0].split()[-1] if k.name else k.name
        kernels.append(
            {
                "start": t + k.start_ns,
                "end": t + k.start_ns + k.dur_ns,
                "deviceId": k.device_id,
                "contextId": 1,
                "greenContextId": 0,
                "streamId": k.stream_id,
                "correlationId": k.correlation_id,
                "globalPid": gpid,
                "demangledName": s(k.name),
                "shortName": s(short),
                "mangledName": s("_Z" + short),
                "launchType": 0,
                "cacheConfig": 0,
                "registersPerThread": k.registers_per_thread,
                "gridX": k.grid[0],
                "gridY": k.grid[1],
                "gridZ": k.grid[2],
                "blockX": k.block[0],
                "blockY": k.block[1],
                "blockZ": k.block[2],
                # nsys splits what the PyTorch profiler reports as one "shared memory".
                "staticSharedMemory": k.shared_memory_bytes // 2,
                "dynamicSharedMemory": k.shared_memory_bytes - k.shared_memory_bytes // 2,
                "gridId": i + 1,
            }
        )
    insert_rows(db, schema, "CUPTI_ACTIVITY_KIND_KERNEL", kernels)

    memcpys = [
        {
            "start": t + m.start_ns,
            "end": t + m.start_ns + m.dur_ns,
            "deviceId": m.device_id,
            "contextId": 1,
            "streamId": m.stream_id,
            "correlationId": m.correlation_id,
            "globalPid": gpid,
            "bytes": m.bytes,
            "copyKind": _COPY_KIND_CODES[m.kind],
            "srcKind": _MEM_KIND_CODES.get(m.src_mem, 7),
            "dstKind": _MEM_KIND_CODES.get(m.dst_mem, 7),
        }
        for m in sc.memcpys
    ]
    insert_rows(db, schema, "CUPTI_ACTIVITY_KIND_MEMCPY", memcpys)
    memsets = [
        {
            "start": t + m.start_ns,
            "end": t + m.start_ns + m.dur_ns,
            "deviceId": m.device_id,
            "contextId": 1,
            "streamId": m.stream_id,
            "correlationId": m.correlation_id,
            "globalPid": gpid,
            "value": 0,
            "bytes": m.bytes,
            "memKind": _MEM_KIND_CODES.get(m.mem, 7),
        }
        for m in sc.memsets
    ]
    insert_rows(db, schema, "CUPTI_ACTIVITY_KIND_MEMSET", memsets)

    nvtx = []
    domains: dict[str, int] = {}
    for r in sc.ranges:
        if r.domain and r.domain not in domains:
            domains[r.domain] = len(domains) + 1
            nvtx.append(
                {
                    "start": t,
                    "eventType": 75,
                    "text": r.domain,
                    "globalTid": global_tid(r.pid, r.tid),
                    "domainId": domains[r.domain],
                }
            )
    spans = [(r.name, r.start_ns, r.dur_ns, r.pid, r.tid, r.domain) for r in sc.ranges]
    for seq, o in enumerate(sc.cpu_ops):
        name = _emit_nvtx_name(o.name, seq, o.external_id, o.input_shapes)
        spans.append((name, o.start_ns, o.dur_ns, o.pid, o.tid, None))
    # A collective is a record_function range under emit_nvtx, like any operator.
    for c in sc.collectives:
        spans.append(("record_param_comms", c.start_ns, c.dur_ns, c.pid, c.tid, None))
    for name, start, dur, pid, tid, domain in sorted(spans, key=lambda x: (x[1], -x[2])):
        nvtx_row: dict[str, object] = {
            "start": t + start,
            "end": t + start + dur,
            "eventType": 59,
            "globalTid": global_tid(pid, tid),
            "domainId": domains.get(domain, 0) if domain else 0,
        }
        if current:
            nvtx_row["textId"] = s(name)
        else:
            nvtx_row["text"] = name
        nvtx.append(nvtx_row)
    insert_rows(db, schema, "NVTX_EVENTS", nvtx)

    insert_rows(
        db,
        schema,
        "ThreadNames",
        [{"nameId": s("python"), "priority": 20, "globalTid": global_tid(sc.pid, sc.tid)}],
    )
    insert_rows(db, schema, "PROCESSES", [{"globalPid": gpid, "pid": sc.pid, "name": "python"}])
    _fill_target(db, sc, schema)
    insert_rows(db, schema, "StringIds", [{"id": i, "value": v} for v, i in s.ids.items()])


def _fill_target(db: sqlite3.Connection, sc: Scenario, schema: str) -> None:
    if schema == "current":
        gpus = [
            {
                "vmId": VM_BITS,
                "id": d.device_id,
                "name": d.name,
                "totalMemory": d.total_memory_bytes,
                "smCount": d.sm_count,
                "cuDevice": d.device_id,
                "computeMajor": d.compute_major,
                "computeMinor": d.compute_minor,
            }
            for d in sc.devices
        ]
        insert_rows(db, schema, "TARGET_INFO_GPU", gpus)
        insert_rows(
            db,
            schema,
            "TARGET_INFO_SYSTEM_ENV",
            [
                {
                    "devStateName": "Local (CLI)",
                    "name": "Hostname",
                    "nameEnum": 619,
                    "value": "synthetic-host",
                }
            ],
        )
        insert_rows(
            db,
            schema,
            "TARGET_INFO_SESSION_START_TIME",
            [
                {
                    "utcEpochNs": sc.base_ns,
                    "utcTime": "2023-11-14T22:13:20",
                    "localTime": "2023-11-14T22:13:20",
                    "systemClockNs": SESSION_OFFSET_NS,
                }
            ],
        )
        insert_rows(
            db,
            schema,
            "META_DATA_EXPORT",
            [{"name": k, "value": v} for k, v in EXPORT_META[schema].items()],
        )
        for table, rows in _ENUM_ROWS.items():
            insert_rows(
                db, schema, table, [{"id": i, "name": n, "label": lbl} for i, n, lbl in rows]
            )
    else:
        gpus = [
            {
                "deviceId": d.device_id,
                "name": d.name,
                "totalGlobalMemory": d.total_memory_bytes,
                "numMultiprocessors": d.sm_count,
                "numThreadsPerWarp": 32,
                "computeCapabilityMajor": d.compute_major,
                "computeCapabilityMinor": d.compute_minor,
            }
            for d in sc.devices
        ]
        insert_rows(db, schema, "TARGET_INFO_CUDA_GPU", gpus)


def add_diagnostic_events(path: str | Path, events: list[tuple[int, int, str]]) -> Path:
    """Add ``DIAGNOSTIC_EVENT`` rows (timestamp, severity, text) to the export at ``path``.

    Severity as nsys writes it: 1 Info, 2 Warning, 3 Error. The table is created as nsys
    2023.3 and later create it; older exports have none.
    """
    db = sqlite3.connect(path)
    try:
        db.execute(
            """CREATE TABLE IF NOT EXISTS DIAGNOSTIC_EVENT (
                   timestamp INTEGER NOT NULL, timestampType INTEGER NOT NULL,
                   source INTEGER NOT NULL, severity INTEGER NOT NULL, text TEXT NOT NULL,
                   globalPid INTEGER)"""
        )
        db.executemany(
            "INSERT INTO DIAGNOSTIC_EVENT VALUES (?, 1, 1, ?, ?, NULL)",
            [(ts, sev, text) for ts, sev, text in events],
        )
        db.commit()
    finally:
        db.close()
    return Path(path)
