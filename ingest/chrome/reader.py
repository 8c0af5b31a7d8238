"""PyTorch profiler (Kineto) Chrome-trace JSON -> the canonical tables.

The file is streamed: :mod:`ingest.chrome.event_splitter` cuts the event array into blobs
of whole events, DuckDB's JSON reader parses a batch of them with an explicit column list
(so unknown keys cost nothing and ``args`` is touched once), and SQL routes each event to
its table (:mod:`ingest.chrome.event_sql`); a batch loads on a thread of its own while the
next one is cut (:mod:`ingest.chrome.batched_read`). Timestamps are read as DECIMAL(38,6)
and cast to integer nanoseconds (the cast rounds half away from zero), exact for the
nanosecond decimals newer profilers write; times written with more than six decimals
take a faster exact route. Afterwards come the process and thread names, the devices,
operator and range nesting, and the trace's facts.

Understood categories: ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cuda_runtime``,
``cuda_driver``, ``cuda_sync``, ``cpu_op``, ``python_function``, ``user_annotation``,
``gpu_user_annotation``, ``[memory]`` instants, process/thread names, and the 2021
spellings (``Kernel``, ``Memcpy``, ``Memset``, ``Runtime``, ``Operator``, ``tid`` like
``"stream 7"``, lower-case ``"external id"``).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import duckdb

from ingest.chrome.batched_read import BATCH_BYTES, BatchedRead
from ingest.chrome.event_splitter import BlobParseError, EventArraySplitter
from ingest.chrome.event_sql import META_NAMES, SEQUENCES, STAGE_DB
from ingest.chrome.foreign_trace import foreign_trace_error
from ingest.chrome.hip_work_items import grids_in_workgroups
from ingest.chrome.no_gpu_note import no_gpu_recording
from ingest.chrome.read_stats import ChromeReadStats
from ingest.chrome.recorded_env import recorded_packages, recorded_settings
from ingest.errors import TraceInputError
from ingest.gpu_identity import host_model, host_properties, inferred_name
from ingest.nesting import assign_nesting
from ingest.schema import active_device_ids, earliest_ns, set_info

__all__ = ["ChromeReadStats", "read_chrome_trace"]


def read_chrome_trace(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    chunks: Callable[[], Iterable[bytes]],
    on_progress: Callable[[int], None] | None = None,
    max_events: int | None = None,
    batch_bytes: int = BATCH_BYTES,
) -> ChromeReadStats:
    """Load the Chrome trace whose decompressed bytes ``chunks()`` yields into ``con``.

    ``chunks`` is called again, for the text from its start, only when a speculative cut
    must be read again (:mod:`ingest.chrome.batched_read`). More than ``max_events``
    events stop the read with an error (a small gzip of tiny events must not become an
    unbounded database). ``batch_bytes``: bytes of events loaded by one set of queries.
    """
    con.execute(f"ATTACH ':memory:' AS {STAGE_DB}")
    stats = ChromeReadStats()
    try:
        con.execute(
            f"CREATE TABLE {META_NAMES} (pid BIGINT, tid BIGINT, kind VARCHAR, value VARCHAR)"
        )
        for seq in SEQUENCES:
            con.execute(f"CREATE SEQUENCE {seq} START 1")
        threads = int(con.execute("SELECT current_setting('threads')").fetchone()[0])  # type: ignore[index]
        splitter = EventArraySplitter(path, parts=max(1, threads))
        with tempfile.TemporaryDirectory(prefix="tracelens-") as tmp:
            read = BatchedRead(con, path, tmp, stats, max_events, on_progress, batch_bytes)
            try:
                read.read(splitter, chunks)
            except BlobParseError as exc:
                read.close()
                raise TraceInputError(path, str(exc)) from None
            except BaseException:
                read.close(interrupt=True)
                raise
            read.close()
        _insert_threads(con)
    except BaseException:
        # A connection the error invalidated cannot clean up: that error is the one to report.
        with contextlib.suppress(duckdb.Error):
            _drop_read_state(con)
        raise
    _drop_read_state(con)
    foreign = foreign_trace_error(con, path, stats.categories, lambda: _head(chunks))
    if foreign is not None:
        raise foreign
    _finish(con, path, splitter.result.metadata, stats)
    return stats


_PROFILER_OPTIONS = ("record_shapes", "with_stack", "profile_memory", "with_flops", "with_modules")


def _drop_read_state(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"DETACH DATABASE IF EXISTS {STAGE_DB}")
    for seq in SEQUENCES:
        con.execute(f"DROP SEQUENCE IF EXISTS {seq}")


def _insert_threads(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        f"""
        INSERT INTO threads
        SELECT pid, tid,
               max(value) FILTER (WHERE kind = 'process_name'),
               max(value) FILTER (WHERE kind = 'thread_name')
        FROM {META_NAMES} GROUP BY pid, tid
        """
    )


def _seen_options(con: duckdb.DuckDBPyConnection, stats: ChromeReadStats) -> list[str]:
    """The costly profiler options a trace that does not list them shows it ran with (the
    2021 profiler's): most operators with input shapes, operators' Python call stacks, and
    allocator events."""
    shapes, ops, memory = con.execute(
        """SELECT count(input_shapes), count(*), (SELECT count(*) > 0 FROM memory_events)
           FROM cpu_ops"""
    ).fetchone() or (0, 0, False)
    seen = {
        "record_shapes": bool(ops) and 2 * int(shapes) > int(ops),
        "with_stack": stats.call_stacks,
        "profile_memory": bool(memory),
    }
    return [k for k in _PROFILER_OPTIONS if seen.get(k)]


def _finish(con: duckdb.DuckDBPyConnection, path: Path, meta: dict, stats: ChromeReadStats) -> None:
    active = _insert_devices(con, meta)
    set_info(con, dict(recorded_settings(meta)))
    set_info(con, dict(recorded_packages(meta)))
    # What the profiler recorded besides the events (PyTorch 2 writes its options at the
    # top level): Python stacks and allocator events add host time to every operator.
    options = [k for k in _PROFILER_OPTIONS if meta.get(k) in (1, True)] or _seen_options(
        con, stats
    )
    if options:
        set_info(con, {"profiler_options": ",".join(options)})
    grids_in_workgroups(con)
    assign_nesting(con, "cpu_ops", "op_id", ["pid", "tid"])
    assign_nesting(con, "ranges", "range_id", ["pid", "tid", "device_id"])
    info = meta.get("distributedInfo")
    dist: dict[str, Any] = info if isinstance(info, dict) else {}
    t0 = earliest_ns(con)
    if stats.dropped_missing:
        stats.warnings.append(
            f"{_n(stats.dropped_missing, 'complete (X) event')} without ts or dur skipped"
        )
    if stats.dropped_negative:
        stats.warnings.append(
            f"{_n(stats.dropped_negative, 'event')} with a negative duration skipped"
        )
    props = meta.get("deviceProperties")
    # only for a trace without GPU work: no query on the usual path
    no_gpu = (
        None if active else no_gpu_recording(con, len(props) if isinstance(props, list) else None)
    )
    if no_gpu is not None:
        set_info(con, {"no_gpu_recording": no_gpu[0]})
        stats.warnings.append(no_gpu[1])
    set_info(
        con,
        {
            "format": "torch_chrome",
            "format_version": meta.get("schemaVersion"),
            "tool": "PyTorch profiler (Kineto)",
            "rank": dist.get("rank"),
            "world_size": dist.get("world_size"),
            "distributed_backend": dist.get("backend"),
            "host": meta.get("host_name") or meta.get("hostname"),
            "trace_name": meta.get("traceName"),
            "base_time_ns": meta.get("baseTimeNanoseconds"),
            "t0_ns": t0,
            "event_count": stats.events,
            "warnings": "\n".join(stats.warnings) if stats.warnings else None,
        },
    )


def _head(chunks: Callable[[], Iterable[bytes]]) -> bytes:
    """The text's first bytes, read again only for a trace that routed nothing."""
    for block in chunks():
        return block[:4096]
    return b""


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _insert_devices(con: duckdb.DuckDBPyConnection, meta: dict) -> list[int]:
    """Insert the devices that ran work; returns their ids."""
    props = meta.get("deviceProperties")
    by_id: dict[int, dict] = {}
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict) and isinstance(p.get("id"), int):
                by_id[p["id"]] = p
    active = active_device_ids(con)
    # ROCm's kernels carry the physical GPU index (2, 9), its deviceProperties the
    # process's visible ones from 0: the same GPUs when both sets are the same size and
    # share no index, in order; without this the GPU that ran would look unlisted and
    # the listed one idle
    if by_id and len(by_id) == len(active) and not set(by_id) & set(active):
        visible = sorted(by_id)
        by_id = {dev: by_id[v] for dev, v in zip(sorted(active), visible, strict=True)}
        set_info(
            con,
            {
                "device_ids_renumbered": "; ".join(
                    f"GPU {dev} is the trace's visible device {v}"
                    for dev, v in zip(sorted(active), visible, strict=True)
                )
            },
        )
    rows = []
    named_after_host: list[int] = []
    inferred: list[str] = []
    shared = host_properties(by_id) if by_id else None
    for dev in active:
        p = by_id.get(dev, {})
        if not p and shared is not None:
            p = shared
            named_after_host.append(dev)
        cc = (
            f"{p['computeMajor']}.{p['computeMinor']}"
            if "computeMajor" in p and "computeMinor" in p
            else None
        )
        name = inferred_name(p) if p else None
        if name and not str(p.get("name") or "").strip() and dev not in named_after_host:
            inferred.append(
                f"GPU {dev} ({name}) from gfx {cc}, {p.get('numSms')} compute units, "
                f"{p.get('warpSize')}-wide wavefronts"
            )
        if name is None and not p and by_id:
            name = host_model(by_id)
            if name is not None:
                named_after_host.append(dev)
        rows.append((dev, name, p.get("numSms"), p.get("totalGlobalMem"), cc))
    gfx = {str(p.get("gcnArchName")) for p in by_id.values() if p.get("gcnArchName")}
    if len(gfx) == 1:
        set_info(con, {"gcn_arch": gfx.pop()})
    if named_after_host:
        inferred.append(
            "GPU "
            + ", ".join(str(d) for d in named_after_host)
            + " has no device properties: named and sized after the host's other GPUs (all "
            "one model)"
        )
    if inferred:
        set_info(con, {"device_names_inferred": "; ".join(inferred)})
    if rows:
        con.executemany("INSERT INTO devices VALUES (?, ?, ?, ?, ?)", rows)
    idle = sorted(set(by_id) - set(active))
    if idle:
        names = ", ".join(f"{i}: {by_id[i].get('name')}" for i in idle)
        set_info(con, {"host_gpus_without_work": names})
    return active
