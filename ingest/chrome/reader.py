"""PyTorch profiler (Kineto) Chrome-trace JSON -> the canonical tables.

The file is streamed: :mod:`ingest.chrome.event_splitter` cuts the event array into blobs
of whole events, DuckDB's JSON reader parses each blob with an explicit column list (so
unknown keys cost nothing and ``args`` is touched once), and SQL routes each event to its
table; one chunk's staging overlaps the routing of the chunk before it. Timestamps are
read as DECIMAL(38,6) and cast to integer nanoseconds (the cast rounds half away from
zero), exact for the nanosecond decimals newer profilers write. Times written with more
than six decimals take a faster exact route (:func:`stage_sql`).

Understood categories: ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cuda_runtime``,
``cuda_driver``, ``cuda_sync``, ``cpu_op``, ``python_function``, ``user_annotation``,
``gpu_user_annotation``, ``[memory]`` instants, process/thread names, and the 2021
spellings (``Kernel``, ``Memcpy``, ``Memset``, ``Runtime``, ``Operator``, ``tid`` like
``"stream 7"``, lower-case ``"external id"``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from ingest.chrome.event_splitter import (
    BlobParseError,
    EventArraySplitter,
    EventBlob,
)
from ingest.chrome.event_sql import (
    BASE_MARGIN,
    CENSUS_OF,
    LONG_TIME,
    MAX_BASE,
    MEMORY_SQL,
    OVERLONG_DECIMALS,
    ROUTES,
    SAMPLE,
    STAGE_DB,
    TIME_INTEGERS,
    slot_table,
    stage_sql,
)
from ingest.chrome.hip_work_items import grids_in_workgroups
from ingest.errors import TraceInputError
from ingest.gpu_identity import host_model, host_properties, inferred_name
from ingest.nesting import assign_nesting
from ingest.schema import active_device_ids, earliest_ns, set_info


@dataclass
class ChromeReadStats:
    events: int = 0
    dropped_missing: int = 0
    dropped_negative: int = 0
    warnings: list[str] = field(default_factory=list)


def read_chrome_trace(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    chunks: Iterable[bytes],
    on_progress: Callable[[int], None] | None = None,
    max_events: int | None = None,
) -> ChromeReadStats:
    """Load the Chrome trace whose decompressed bytes are ``chunks`` into ``con``.

    More than ``max_events`` events stop the read with an error (a small gzip of tiny
    events must not become an unbounded database).
    """
    con.execute("CREATE TEMP SEQUENCE op_seq START 1")
    con.execute("CREATE TEMP SEQUENCE range_seq START 1")
    con.execute(
        "CREATE TEMP TABLE meta_names (pid BIGINT, tid BIGINT, kind VARCHAR, value VARCHAR)"
    )
    con.execute("CREATE TEMP TABLE profiler_spans (start_ns BIGINT, end_ns BIGINT)")
    stats = ChromeReadStats()
    threads = int(con.execute("SELECT current_setting('threads')").fetchone()[0])  # type: ignore[index]
    splitter = EventArraySplitter(path, parts=max(1, threads))
    con.execute(f"ATTACH ':memory:' AS {STAGE_DB}")
    stager = con.cursor()
    # The staged chunk waiting for its routing: staging the next one overlaps it.
    pending: list[_Staged] = []

    def route_pending() -> None:
        staged = pending.pop()
        _route(con, staged, stats)
        if max_events is not None and stats.events > max_events:
            raise TraceInputError(
                path,
                f"holds more than {max_events:,} events (the limit; set "
                "TRACELENS_MAX_EVENTS to raise it)",
            )
        if on_progress is not None:
            on_progress(staged.end_offset)

    try:
        with (
            tempfile.TemporaryDirectory(prefix="tracelens-") as tmp,
            ThreadPoolExecutor(1, thread_name_prefix="tracelens-stage") as pool,
        ):

            def parse(blobs: list[EventBlob]) -> None:
                slot = 1 - pending[0].slot if pending else 0
                if pending and threads == 1:  # one thread asked for: no overlap
                    route_pending()
                staging = pool.submit(_stage_blobs, stager, blobs, tmp, slot)
                try:
                    if pending:
                        route_pending()
                except BaseException:
                    wait([staging])  # the cursor is the stager's until it is done
                    raise
                # A malformed blob raises here, for the splitter to rescan its stretch.
                pending.append(staging.result())

            try:
                splitter.split(chunks, parse)
            except BlobParseError as exc:
                raise TraceInputError(path, str(exc)) from None
            if pending:
                route_pending()
    except BaseException:
        stager.close()
        # A connection the error invalidated cannot detach: that error is the one to report.
        with contextlib.suppress(duckdb.Error):
            con.execute(f"DETACH DATABASE IF EXISTS {STAGE_DB}")
        raise
    stager.close()
    con.execute(f"DETACH DATABASE {STAGE_DB}")
    meta = splitter.result.metadata
    _finish(con, path, meta, stats)
    return stats


def _variant(blobs: list[EventBlob]) -> str:
    modern = any(b.contains(b'"External id"') for b in blobs)
    legacy = any(b.contains(b'"external id"') for b in blobs)
    if modern and legacy:
        return "json"
    return "legacy" if legacy else "modern"


def _precise(blobs: list[EventBlob]) -> bool:
    """Whether the blobs' times look longer than six decimals (judged from their start)."""
    return any(LONG_TIME.search(b.buf, b.start, min(b.end, b.start + SAMPLE)) for b in blobs)


def _write_files(blobs: list[EventBlob], tmp: str, slot: int, repair_utf8: bool) -> list[str]:
    files = []
    for i, blob in enumerate(blobs):
        name = os.path.join(tmp, f"events-{slot}-{i}.json")
        with open(name, "wb") as f:
            if repair_utf8:
                f.write(blob.data.decode("utf-8", "replace").encode("utf-8"))
            else:
                blob.write(f)
        files.append(name)
    return files


def _stage(
    con: duckdb.DuckDBPyConnection,
    blobs: list[EventBlob],
    tmp: str,
    variant: str,
    slot: int,
    repair_utf8: bool = False,
) -> tuple[list[str], bool]:
    """Write the blobs to files and stage them; the files and whether read precisely."""
    files = _write_files(blobs, tmp, slot, repair_utf8)
    base = _time_base(blobs)
    table = slot_table(slot)
    # Several files in one scan: DuckDB parses them on parallel threads.
    if _precise(blobs):
        try:
            con.execute(stage_sql(table, variant, True, base), [files])
            return files, True
        except duckdb.Error:
            pass  # e.g. an integer part too long for 16 decimals: the standard read decides
    con.execute(stage_sql(table, variant, False, base), [files])
    return files, False


def _time_base(blobs: list[EventBlob]) -> int:
    """A whole microsecond at or before most of the blobs' times (judged from their start),
    which lets :func:`_nanoseconds` take its fast route; 0 when none is seen."""
    seen = [
        int(m.group(1))
        for b in blobs
        for m in TIME_INTEGERS.finditer(b.buf, b.start, min(b.end, b.start + SAMPLE))
    ]
    positive = [t for t in seen if t > 0]
    if not positive:
        return 0
    return max(0, min(min(positive) - BASE_MARGIN, MAX_BASE))


def _needs_standard_read(blobs: list[EventBlob], ties: int) -> bool:
    """Whether a precise read may differ from the standard one.

    Only where rounding to 16 decimals carried into a 6-decimal half (``ties`` rows) and the
    text had more than 16 decimals to round.
    """
    return ties > 0 and any(
        OVERLONG_DECIMALS.search(b.buf, b.start, b.end) is not None for b in blobs
    )


def _census(con: duckdb.DuckDBPyConnection, slot: int) -> tuple[list[tuple], int]:
    rows = con.execute(CENSUS_OF[slot]).fetchall()
    return rows, sum(r[4] for r in rows)


@dataclass
class _Staged:
    """One chunk staged in its slot's table, ready to be routed."""

    slot: int
    files: list[str]
    census: list[tuple]
    memory_pass: bool  # whether the chunk holds allocator events (MEMORY_SQL)
    warning: str | None  # what reading it had to repair
    end_offset: int  # the input bytes read once it is routed


def _stage_blobs(
    con: duckdb.DuckDBPyConnection, blobs: list[EventBlob], tmp: str, slot: int
) -> _Staged:
    """Parse blobs into the slot's table and count them; BlobParseError when one is not
    valid JSON. Everything that reads the blobs' bytes happens here: the splitter reuses
    them once the chunk is handed back."""
    variant = _variant(blobs)
    warning = None
    try:
        files, precise = _stage(con, blobs, tmp, variant, slot)
    except duckdb.Error as exc:
        if _not_the_traces_fault(exc):
            raise
        if "utf-8" not in str(exc).lower() and "unicode" not in str(exc).lower():
            raise BlobParseError(_describe_json_error(exc, blobs)) from None
        # Tolerant reading: undecodable bytes become U+FFFD, as a browser would show them.
        try:
            files, precise = _stage(con, blobs, tmp, variant, slot, repair_utf8=True)
        except duckdb.Error as exc2:
            if _not_the_traces_fault(exc2):
                raise
            raise BlobParseError(_describe_json_error(exc2, blobs)) from None
        warning = "non-UTF-8 bytes in event text were replaced with U+FFFD"
    census, ties = _census(con, slot)
    if precise and _needs_standard_read(blobs, ties):
        con.execute(stage_sql(slot_table(slot), variant, False, _time_base(blobs)), [files])
        census, _ = _census(con, slot)
    # The memory pass reads the same files with the same top-level columns, so without
    # memory rows in the staged chunk it would insert nothing; skipping it then also skips
    # the byte search (a full pass over the blobs). Where ``args`` was staged as JSON rather
    # than a STRUCT, the pass's STRUCT read may fail where staging did not: that variant
    # keeps the search alone deciding, as always.
    memory_rows = sum(row[5] for row in census)
    memory_pass = bool(memory_rows or variant == "json") and any(
        b.contains(b'"[memory]"') for b in blobs
    )
    end = blobs[-1].source_offset + blobs[-1].size
    return _Staged(slot, files, census, memory_pass, warning, end)


def _route(con: duckdb.DuckDBPyConnection, staged: _Staged, stats: ChromeReadStats) -> None:
    """Route a staged chunk's events to their tables, in the order chunks were read (the
    operator and range ids follow it)."""
    if staged.warning is not None and staged.warning not in stats.warnings:
        stats.warnings.append(staged.warning)
    present = set()
    for cat, total, missing, negative, _, _ in staged.census:
        present.add(cat)
        stats.events += total
        stats.dropped_missing += missing
        stats.dropped_negative += negative
    # Most blobs hold a handful of categories; a query per absent one is pure overhead.
    for cats, sql in ROUTES[staged.slot]:
        if cats & present:
            con.execute(sql)
    if staged.memory_pass:
        con.execute(MEMORY_SQL, [staged.files])


def _not_the_traces_fault(exc: duckdb.Error) -> bool:
    """Out of memory or of disk: the machine's limits, which must not be reported as a
    malformed event (the loader names them and the knob)."""
    if isinstance(exc, duckdb.OutOfMemoryException):
        return True
    return isinstance(exc, duckdb.IOException) and "No space left" in str(exc)


def _describe_json_error(exc: duckdb.Error, blobs: list[EventBlob]) -> str:
    text = str(exc).splitlines()[0]
    text = text.replace("Invalid Input Error: ", "").replace("Conversion Error: ", "")
    # DuckDB names our temporary file; point at the user's file instead.
    text = text.split(' in file "')[0] if ' in file "' in text else text
    return f"malformed event in traceEvents after byte {blobs[0].source_offset:,}: {text}"


def _finish(con: duckdb.DuckDBPyConnection, path: Path, meta: dict, stats: ChromeReadStats) -> None:
    con.execute(
        """
        INSERT INTO threads
        SELECT pid, tid,
               max(value) FILTER (WHERE kind = 'process_name'),
               max(value) FILTER (WHERE kind = 'thread_name')
        FROM meta_names GROUP BY pid, tid
        """
    )
    _insert_devices(con, meta)
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
    con.execute("DROP TABLE meta_names")


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _insert_devices(con: duckdb.DuckDBPyConnection, meta: dict) -> None:
    props = meta.get("deviceProperties")
    by_id: dict[int, dict] = {}
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict) and isinstance(p.get("id"), int):
                by_id[p["id"]] = p
    active = active_device_ids(con)
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
