"""What one ingest may use: memory, events and decompressed bytes, sized from the machine.

A small gzip can inflate to gigabytes of tiny events. Reading them is streamed, but DuckDB
would by default let each database grow its buffer pool to 80 % of the machine's memory
(per database, so two concurrent ingests could ask for 160 %). Every connection tracelens
opens is given a ``memory_limit`` (its share of the machine, or of the container's cgroup
limit, divided by the ingests running at once) and a temporary directory to spill to, so
joins and sorts that do not fit go to disk instead of growing the process. The number of
events and the decompressed size are capped too, with an error that says which limit and
how to raise it.

That share is a ceiling, not a target: DuckDB keeps what it has allocated as buffer
pool, so a 1 GB trace analysed under a 9.6 GB ceiling peaked at 1.6 GB of RSS and at
0.97 GB under a 512 MiB limit, in the same CPU time with the same report. Each ingest's
limit therefore also follows its input (:meth:`IngestLimits.for_input`): half of the
decompressed size, at least 512 MiB, raised after ingest to 256 bytes per stored row
(:meth:`IngestLimits.for_rows`), never above the share. Should an analysis still run out
of memory, the report is built again under the whole share
(:meth:`IngestLimits.raise_to_ceiling`).

A small input also runs on one DuckDB thread (:meth:`IngestLimits.for_input`, until
:meth:`IngestLimits.for_rows` finds more rows than that input size holds): every
query's thread pool costs memory of its own, 5-14 MB of peak RSS on traces under
16 MiB, where a second core saves nothing (their ~130 analysis queries take ~2 ms each,
planning and starting more than scanning). From ~30 MB on, both cores pay: one thread was
12-15 % slower on the 34-35 MB traces of the corpus.

Environment variables (all optional):

- ``TRACELENS_MEMORY_LIMIT``: bytes (or ``4GB``-style) one ingest's database may use
  (taken as given: not lowered for small inputs).
- ``TRACELENS_MAX_EVENTS``: events per trace (default 40 million: a 2 GB Kineto trace
  holds about 8 million).
- ``TRACELENS_MAX_DECOMPRESSED_BYTES``: decompressed size of a trace (default half the
  machine's memory, between 2 and 16 GiB).
- ``TRACELENS_TEMP_DIR``: where DuckDB spills (default: beside the database, or the
  system's temporary directory for in-memory databases).
- ``TRACELENS_MAX_SPILL_BYTES``: what one ingest's database may spill there (default four
  times the decompressed trace, at least 4 GiB). DuckDB's own default is 90 % of the free
  disk: one runaway join on a trace whose operators stacked 527 deep once spilled 57 GB,
  filling the disk for every other run on the machine.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from pathlib import Path

import duckdb

GIB = 1024**3
MIB = 1024**2
DEFAULT_MAX_EVENTS = 40_000_000
# The share of the machine's memory all concurrent ingests together may give to DuckDB; the
# rest is the process itself (Python, the read buffers) and the rest of the machine.
_DUCKDB_SHARE = 0.4
_MIN_MEMORY = 256 * MIB
# Below this, the analysers' sorts and windows spill on 500 MB traces and take twice as
# long (256 MiB doubled the analysis time of a 500 MB trace; 512 MiB cost nothing).
_INPUT_FLOOR = 512 * MIB
# What the analysis needs per stored row (kernels, operators, calls, ...): 2.9 M rows of a
# 1 GB trace ran in 512 MiB, 4.7 M rows of tiny events did not (kernel attribution's join).
_BYTES_PER_ROW = 256
# Spill is for sorts and joins somewhat larger than the memory limit, not for a query that
# grows without bound: four times the input is room for several copies of every table,
# and a runaway stops at it instead of at a full disk.
_SPILL_FLOOR = 4 * GIB
_SPILL_PER_INPUT_BYTE = 4
# Inputs up to this size (decompressed) and up to this many stored rows run on one thread.
_ONE_THREAD_INPUT = 16 * MIB
_ONE_THREAD_ROWS = 100_000
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": MIB,
    "gib": GIB,
}


def machine_memory_bytes() -> int:
    """Physical memory, or the cgroup's memory limit when a container sets a lower one."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and 0 < int(raw) < total:
            total = int(raw)
    return total


def parse_bytes(raw: str, name: str) -> int:
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", raw)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"{name} must be a size such as 2147483648 or 2GB, got {raw!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _env_bytes(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    return parse_bytes(raw, name) if raw else None


def spill_quota_full(exc: BaseException) -> bool:
    """DuckDB ran out of spill quota (``max_temp_directory_size``), not of memory: the
    knob to name is TRACELENS_MAX_SPILL_BYTES."""
    return "max_temp_directory_size" in str(exc)


def exhausted_hint(exc: BaseException, limits: IngestLimits | None = None) -> str:
    """Which limit ``exc`` (an out-of-memory error) hit, and the variable that raises it."""
    if spill_quota_full(exc):
        size = f"the {limits.spill_bytes // MIB} MiB spill quota" if limits else "the spill quota"
        return f"with {size} full; set TRACELENS_MAX_SPILL_BYTES to raise it"
    size = f"a {limits.memory_bytes // MIB} MiB limit" if limits else "its memory limit"
    return f"under {size}; set TRACELENS_MEMORY_LIMIT to raise it"


def default_max_decompressed() -> int:
    return min(16 * GIB, max(2 * GIB, machine_memory_bytes() // 2))


@dataclasses.dataclass(frozen=True)
class IngestLimits:
    memory_bytes: int
    max_events: int
    max_decompressed: int
    temp_dir: Path | None = None
    # TRACELENS_MEMORY_LIMIT was set: the user's figure stands whatever the input.
    memory_given: bool = False
    # The share this ingest may never exceed (memory_bytes until sized to an input).
    ceiling_bytes: int = 0
    # What the database may write to its spill directory.
    spill_bytes: int = _SPILL_FLOOR
    # TRACELENS_MAX_SPILL_BYTES was set: taken as given whatever the input.
    spill_given: bool = False
    # DuckDB threads for this ingest: 1 for a small input, 0 for DuckDB's default (a core each).
    threads: int = 0

    @classmethod
    def from_env(cls, concurrent: int = 1) -> IngestLimits:
        """The limits for one of ``concurrent`` ingests running at once on this machine."""
        given = _env_bytes("TRACELENS_MEMORY_LIMIT")
        memory = given or int(machine_memory_bytes() * _DUCKDB_SHARE / max(1, concurrent))
        raw_events = os.environ.get("TRACELENS_MAX_EVENTS", "").strip()
        if raw_events and not raw_events.isdigit():
            raise ValueError(f"TRACELENS_MAX_EVENTS must be a whole number, got {raw_events!r}")
        temp = os.environ.get("TRACELENS_TEMP_DIR", "").strip()
        spill = _env_bytes("TRACELENS_MAX_SPILL_BYTES")
        return cls(
            memory_bytes=max(_MIN_MEMORY, memory),
            ceiling_bytes=max(_MIN_MEMORY, memory),
            max_events=int(raw_events) if raw_events else DEFAULT_MAX_EVENTS,
            max_decompressed=_env_bytes("TRACELENS_MAX_DECOMPRESSED_BYTES")
            or default_max_decompressed(),
            temp_dir=Path(temp) if temp else None,
            memory_given=given is not None,
            spill_bytes=spill or _SPILL_FLOOR,
            spill_given=spill is not None,
        )

    @property
    def ceiling(self) -> int:
        return self.ceiling_bytes or self.memory_bytes

    def for_input(self, input_bytes: int) -> IngestLimits:
        """These limits for one input of ``input_bytes`` (decompressed): the memory limit
        is half of it, at least 512 MiB, at most the share (or the limit given); the spill
        quota four times it, at least 4 GiB (or the quota given); one thread up to
        16 MiB."""
        spill = (
            self.spill_bytes
            if self.spill_given
            else max(_SPILL_FLOOR, input_bytes * _SPILL_PER_INPUT_BYTE)
        )
        memory = (
            self.memory_bytes
            if self.memory_given
            else min(self.ceiling, max(_INPUT_FLOOR, input_bytes // 2))
        )
        return dataclasses.replace(
            self,
            memory_bytes=memory,
            ceiling_bytes=self.ceiling,
            spill_bytes=spill,
            threads=1 if input_bytes <= _ONE_THREAD_INPUT else 0,
        )

    def for_rows(self, rows: int) -> IngestLimits:
        """Raised, once ingest has counted them, to ``_BYTES_PER_ROW`` per stored row for the
        analysis: its joins and sorts follow rows, not bytes (1 M tiny events are 110 MB of
        JSON and as many rows as 400 MB of a training trace). More than 100,000 rows are
        analysed on every core, whatever the input's size."""
        threads = self.threads if rows <= _ONE_THREAD_ROWS else 0
        if self.memory_given:
            return dataclasses.replace(self, threads=threads)
        memory = min(self.ceiling, max(self.memory_bytes, rows * _BYTES_PER_ROW))
        return dataclasses.replace(
            self, memory_bytes=memory, ceiling_bytes=self.ceiling, threads=threads
        )

    def spill_dir(self, db_path: Path | None) -> Path:
        if self.temp_dir is not None:
            return self.temp_dir
        if db_path is not None:
            return db_path.parent / f".{db_path.name}.tmp"
        return Path(tempfile.gettempdir()) / f"tracelens-spill-{os.getpid()}"

    def raise_to_ceiling(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Give ``con`` the whole share; False when it had it already (nothing to retry)."""
        if self.memory_bytes >= self.ceiling:
            return False
        dataclasses.replace(self, memory_bytes=self.ceiling).set_memory(con)
        return True

    def set_memory(self, con: duckdb.DuckDBPyConnection) -> None:
        """Only the memory limit: DuckDB refuses a new spill directory once it has spilled."""
        con.execute(f"SET memory_limit = '{self.memory_bytes // MIB}MiB'")

    def set_threads(self, con: duckdb.DuckDBPyConnection) -> None:
        con.execute(f"SET threads = {self.threads}" if self.threads else "RESET threads")

    def configure(self, con: duckdb.DuckDBPyConnection, db_path: Path | None) -> None:
        """Bound ``con``'s memory and let it spill under ``spill_dir``, up to the quota
        (set here only: DuckDB refuses a quota below what it has already spilled)."""
        self.set_memory(con)
        self.set_threads(con)
        con.execute(f"SET temp_directory = '{self.spill_dir(db_path)}'")
        con.execute(f"SET max_temp_directory_size = '{self.spill_bytes // MIB}MiB'")
