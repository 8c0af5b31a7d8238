"""Where a run's files live under the data directory.

``runs/<run id>/source<ext>`` is the original upload, byte for byte; ``trace.<gen>.duckdb``
and ``report.<gen>.json`` are what ingest generation ``gen`` produced. A job of several
ranks keeps each rank's original as ``ranks/rank-<r><ext>`` and each rank's database as
``trace.<gen>.rank-<r>.duckdb``, but for its reference rank's, which is
``trace.<gen>.duckdb`` (the run's timeline); in the scale-out mode each rank's job also
leaves ``extract.<gen>.rank-<r>.json``, what the align job reads. Names come only from
the run id (random hex) and the detected format, never from the uploaded file name.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any

_RUN_ID = re.compile(r"^[0-9a-f]{12}$")


class RunFiles:
    def __init__(self, runs_dir: Path, run_id: str) -> None:
        if not _RUN_ID.match(run_id):
            raise ValueError(f"not a run id: {run_id!r}")
        self.dir = runs_dir / run_id

    def source(self, source_file: str) -> Path:
        return self.dir / source_file

    def database(self, generation: int) -> Path:
        return self.dir / f"trace.{generation}.duckdb"

    def rank_database(self, generation: int, rank: int) -> Path:
        return self.dir / f"trace.{generation}.rank-{rank}.duckdb"

    def job_database(self, generation: int, rank: int, reference: int) -> Path:
        """A job's rank's database: the run's own for its reference rank."""
        return (
            self.database(generation) if rank == reference else self.rank_database(generation, rank)
        )

    def rank_extract(self, generation: int, rank: int) -> Path:
        return self.dir / f"extract.{generation}.rank-{rank}.json"

    def rank_extracts(self, generation: int) -> list[Path]:
        return sorted(self.dir.glob(f"extract.{generation}.rank-*.json"))

    def databases(self, generation: int) -> list[Path]:
        """Every trace database of ``generation``: the run's, and a job's ranks'."""
        return sorted(self.dir.glob(f"trace.{generation}.*duckdb"))

    def report(self, generation: int) -> Path:
        return self.dir / f"report.{generation}.json"

    def remove_partials(self, generation: int | None = None) -> None:
        """Leftovers of an ingest that did not finish (of one generation, or all)."""
        pattern = ".*.partial*" if generation is None else f".trace.{generation}.*duckdb.*.partial*"
        for p in self.dir.glob(pattern):
            p.unlink(missing_ok=True)

    def remove_generations_before(self, generation: int) -> None:
        kinds = ("trace.*.duckdb*", "report.*.json", "extract.*.json")
        for p in [p for pattern in kinds for p in self.dir.glob(pattern)]:
            gen = p.name.split(".")[1]
            if gen.isdigit() and int(gen) < generation:
                p.unlink(missing_ok=True)

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(data, f, default=str, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# What link() answers on a filesystem without hard links (some network and FUSE ones).
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})


def publish_once(built: Path, target: Path) -> bool:
    """Move the complete file ``built`` to ``target`` unless a file is already there; True
    if this one was put in place. ``built`` is gone either way.

    For a file two deliveries of one job may each build (the queue delivers at least
    once). The one there is never replaced: it is complete (only complete files are moved
    into place), the same as ``built``, and a reader may have it open, on a network
    filesystem another machine's, which a replaced file gives stale-handle errors.
    link() refuses an existing target atomically, where rename() would replace it.
    """
    try:
        os.link(built, target)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        # No hard links: the check and the rename are two steps, so two deliveries
        # finishing at the same instant may still replace one another's file.
        if target.exists():
            return False
        os.replace(built, target)
    finally:
        built.unlink(missing_ok=True)
    return True


def write_json_once(path: Path, data: Any) -> bool:
    """``data`` as ``path``, written whole, unless ``path`` is already there
    (:func:`publish_once`); True if this one was written. Written first under a name of
    its own (a ``.partial``, as ``remove_partials`` clears), so two writers never mix."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(data, f, default=str, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        return publish_once(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
