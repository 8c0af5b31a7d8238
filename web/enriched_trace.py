"""A run's trace with its findings in it: what Perfetto and chrome://tracing open.

The download is gzip-compressed Chrome-trace JSON (both viewers open ``.json.gz``):

- a Chrome original: the kept file's bytes as they are (redacted at upload), streamed
  through ingest's bounded gunzip, with our events spliced in front of its event array
  (:mod:`ingest.chrome.event_splice`), so its events, numbers and metadata are the
  original's;
- an Nsight Systems original: the run's database written as Kineto-style events
  (:mod:`web.nsys_chrome`), since neither viewer opens the SQLite export;
- either way, plus the findings process of :mod:`web.trace_annotations` (a slice per
  finding range, GPU busy and memory counters).

Memory follows the 8 MiB chunk (or the database batch), whatever the size of the trace.
A job run's download is one rank's (``rank``): its original on its own clock, and every
finding range on that rank's clock (a range names its rank, else it is its finding's) —
as the job page's timeline shows them: a straggler's finding puts its own time in the late
rank's file and each other rank's wait for it in that rank's.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ingest.byte_source import iter_bytes
from ingest.chrome.event_splice import splice_events
from ingest.loader import detect_format
from web.catalog import Run, RunKind
from web.nsys_chrome import nsys_chrome_events
from web.run_lookup import open_run_database, ready_report
from web.services import Services
from web.trace_annotations import counter_events, finding_events

# Speed over size: level 1 writes a 1 GB trace several times faster than the default 6,
# for a file about 10 % larger; the download is made again for each request.
_GZIP_LEVEL = 1


@dataclass(frozen=True)
class EnrichedTrace:
    """The download's bytes (gzip, produced as they are read) and its file name."""

    chunks: Iterator[bytes]
    filename: str


def _rank_findings(report: dict[str, Any], run: Run, rank: int | None) -> list[dict[str, Any]]:
    """The findings with the time ranges that lie on this trace's clock.

    Ranges are chosen, not findings: a cross-rank finding (a straggler's) is one rank's but
    holds ranges on other ranks' clocks too (their waits for it), each naming its rank."""
    if run.kind != RunKind.JOB:
        return list(report["findings"])
    shown = report["clock"]["reference_rank"] if rank is None else rank
    out = []
    for f in report["findings"]:
        mine = [r for r in f.get("time_ranges") or [] if r.get("rank", f.get("rank")) == shown]
        if mine:
            out.append({**f, "time_ranges": mine})
    return out


def enriched_trace(
    svc: Services,
    run: Run,
    source_path: Path,
    rank: int | None,
    permalink: Callable[[str], str],
) -> EnrichedTrace:
    """The enriched trace of a ready ``run`` (a job's: ``rank``'s, whose kept original is
    ``source_path``). Everything that can fail with a clear answer fails here, before
    the first byte is sent."""
    report = ready_report(svc, run)
    findings = _rank_findings(report, run, rank)
    cur, meta = open_run_database(svc, run, rank)
    try:
        extra = finding_events(findings, permalink)
        extra += counter_events(cur, int(meta["t0_ns"]), int(meta["span_ns"]))
        fmt = detect_format(source_path)
    except BaseException:
        cur.close()
        raise
    label = run.id if rank is None else f"{run.id}-rank-{rank}"
    if fmt == "nsys_sqlite":
        body = _from_database(cur, extra)
    else:
        cur.close()
        body = splice_events(
            source_path,
            iter_bytes(source_path, max_decompressed=svc.settings.max_decompressed_bytes),
            extra,
        )
    return EnrichedTrace(_gzip(body), f"{label}-enriched.json.gz")


def _from_database(cur: duckdb.DuckDBPyConnection, extra: list[bytes]) -> Iterator[bytes]:
    try:
        yield b'{"displayTimeUnit":"ns","traceEvents":[\n'
        yield b",\n".join(extra)
        first = not extra
        for block in nsys_chrome_events(cur):
            yield block if first else b",\n" + block
            first = False
        yield b"\n]}\n"
    finally:
        cur.close()


def _gzip(body: Iterator[bytes]) -> Iterator[bytes]:
    packer = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, 31)
    for piece in body:
        out = packer.compress(piece)
        if out:
            yield out
    yield packer.flush()
