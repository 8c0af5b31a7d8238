"""Writes a :class:`Scenario` as a PyTorch profiler (Kineto) Chrome trace."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from tracelens.testing.scenario import Scenario


def _us(ns: int) -> str:
    """Exact microseconds with nanosecond decimals, as Kineto writes them."""
    whole, frac = divmod(ns, 1000)
    return f"{whole}.{frac:03d}"


def _event(d: dict, ts_ns: int, dur_ns: int | None = None) -> str:
    # ts/dur are spliced in as exact decimal text: float formatting would round them.
    body = json.dumps(d)[:-1]
    body += f', "ts": {_us(ts_ns)}'
    if dur_ns is not None:
        body += f', "dur": {_us(dur_ns)}'
    return body + "}"


def iter_events(sc: Scenario) -> Iterator[str]:
    base = sc.base_ns
    yield _event(
        {"name": "process_name", "ph": "M", "pid": sc.pid, "tid": 0, "args": {"name": "python"}},
        base,
    )
    yield _event(
        {
            "name": "thread_name",
            "ph": "M",
            "pid": sc.pid,
            "tid": sc.tid,
            "args": {"name": "thread 4242 (python)"},
        },
        base,
    )
    for r in sc.ranges:
        yield _event(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": r.name,
                "pid": r.pid,
                "tid": r.tid,
                "args": {},
            },
            base + r.start_ns,
            r.dur_ns,
        )
    for o in sc.cpu_ops:
        args: dict[str, object] = {"External id": o.external_id}
        if o.input_shapes:
            args["Input Dims"] = o.input_shapes
            args["Input type"] = o.input_types
        yield _event(
            {
                "ph": "X",
                "cat": o.category,
                "name": o.name,
                "pid": o.pid,
                "tid": o.tid,
                "args": args,
            },
            base + o.start_ns,
            o.dur_ns,
        )
    for c in sc.collectives:
        # Kineto records a collective as a ``record_param_comms`` operator with its sizes.
        yield _event(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "record_param_comms",
                "pid": c.pid,
                "tid": c.tid,
                "args": {
                    "External id": c.external_id,
                    "Collective name": c.collective,
                    "In msg nelems": c.in_nelems,
                    "Out msg nelems": c.out_nelems,
                    "dtype": c.dtype,
                    "Group size": c.group_size,
                },
            },
            base + c.start_ns,
            c.dur_ns,
        )
    for e in sc.memory_events:
        yield _event(
            {
                "ph": "i",
                "s": "t",
                "cat": "cpu_instant_event",
                "name": "[memory]",
                "pid": e.pid,
                "tid": e.tid,
                "args": {
                    "Device Type": 0 if e.device_id < 0 else 1,
                    "Device Id": e.device_id,
                    "Addr": e.addr,
                    "Bytes": e.bytes,
                    "Total Allocated": e.total_allocated,
                    "Total Reserved": e.total_reserved,
                },
            },
            base + e.ts_ns,
        )
    for a in sc.api_calls:
        args = {"cbid": 211}
        if a.kernel is not None:
            args["kernel"] = a.kernel
        if a.correlation_id is not None:
            args["correlation"] = a.correlation_id
        if a.external_id is not None:
            args["External id"] = a.external_id
        yield _event(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": a.name,
                "pid": a.pid,
                "tid": a.tid,
                "args": args,
            },
            base + a.start_ns,
            a.dur_ns,
        )
    for k in sc.kernels:
        yield _event(
            {
                "ph": "X",
                "cat": "kernel",
                "name": k.name,
                "pid": k.device_id,
                "tid": k.stream_id,
                "args": {
                    "queued": 0,
                    "device": k.device_id,
                    "context": 1,
                    "stream": k.stream_id,
                    "correlation": k.correlation_id,
                    "registers per thread": k.registers_per_thread,
                    "shared memory": k.shared_memory_bytes,
                    "grid": list(k.grid),
                    "block": list(k.block),
                    **(
                        {"est. achieved occupancy %": k.est_occupancy_pct}
                        if k.est_occupancy_pct is not None
                        else {}
                    ),
                },
            },
            base + k.start_ns,
            k.dur_ns,
        )
    names = {"pageable": "Pageable", "pinned": "Pinned", "device": "Device", "managed": "Managed"}
    for m in sc.memcpys:
        src, dst = names.get(m.src_mem, m.src_mem), names.get(m.dst_mem, m.dst_mem)
        label = f"Memcpy {m.kind} ({src} -> {dst})"
        yield _event(
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": label,
                "pid": m.device_id,
                "tid": m.stream_id,
                "args": {
                    "device": m.device_id,
                    "context": 1,
                    "stream": m.stream_id,
                    "correlation": m.correlation_id,
                    "bytes": m.bytes,
                },
            },
            base + m.start_ns,
            m.dur_ns,
        )
    for s in sc.memsets:
        yield _event(
            {
                "ph": "X",
                "cat": "gpu_memset",
                "name": "Memset (Device)",
                "pid": s.device_id,
                "tid": s.stream_id,
                "args": {
                    "device": s.device_id,
                    "context": 1,
                    "stream": s.stream_id,
                    "correlation": s.correlation_id,
                    "bytes": s.bytes,
                },
            },
            base + s.start_ns,
            s.dur_ns,
        )


def write_events(out: IO[str], events: Iterator[str], header: dict) -> None:
    head = json.dumps(header)[:-1]
    out.write(head + (", " if header else "") + '"traceEvents": [\n')
    first = True
    for e in events:
        if not first:
            out.write(",\n")
        out.write("  " + e)
        first = False
    out.write('\n], "traceName": "tracelens-synthetic", "displayTimeUnit": "ms"}\n')


def header_for(sc: Scenario) -> dict:
    return {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": d.device_id,
                "name": d.name,
                "totalGlobalMem": d.total_memory_bytes,
                "computeMajor": d.compute_major,
                "computeMinor": d.compute_minor,
                "numSms": d.sm_count,
                "warpSize": 32,
                "maxThreadsPerBlock": 1024,
                "maxThreadsPerMultiprocessor": 2048,
                "regsPerBlock": 65536,
                "sharedMemPerBlock": 49152,
            }
            for d in sc.devices
        ],
        "distributedInfo": {"backend": "nccl", "rank": sc.rank, "world_size": sc.world_size},
    }


def write_chrome_trace(sc: Scenario, path: str | Path) -> Path:
    """Write ``sc`` to ``path`` (gzip-compressed when the name ends in ``.gz``)."""
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "wt", encoding="utf-8") as out:
        write_events(out, iter_events(sc), header_for(sc))
    return p
