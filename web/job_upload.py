"""Registering a job: several files dropped at once, or one archive, become ONE run.

Each file is a rank (:func:`ingest.loader.rank_files`: ``distributedInfo.rank``, else the
file name), checked to be a trace, redacted in place and kept as ``ranks/rank-<r><ext>``;
the upload's own bytes never reach the run's folder. The run's identity (its sha256, to
recognise the same job uploaded again) is that of its ranks' files, so the same traces
uploaded loose or zipped are one run. An archive holding one trace is that trace's run.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import unicodedata
from pathlib import Path

from litestar.exceptions import ClientException
from sqlalchemy import select

from ingest import TraceInputError, detect_format
from ingest.archive import ArchiveTooLarge, extract_traces
from ingest.gunzip import GZIP_MAGIC
from ingest.loader import rank_files
from ingest.redacted_copy import REDACTION_VERSION, redact_in_place
from ingest.redaction import redact_text
from web.catalog import Run, RunKind
from web.catalog import runs as catalog_runs
from web.run_lifecycle import (
    NAME_MAX,
    UploadFields,
    default_name,
    register_upload,
    upload_fields,
)
from web.services import Services
from web.storage import RunFiles
from web.uploads import ReceivedFile, ReceivedUpload

RANKS_DIR = "ranks"


def register_job_upload(svc: Services, up: ReceivedUpload) -> tuple[Run, bool]:
    """Keep the upload's files (or its archive's traces) as one job run: (run, created)."""
    fields = upload_fields(up)
    staging = svc.settings.uploads_dir / f"job-{secrets.token_hex(8)}"
    staging.mkdir(parents=True)
    try:
        members = _staged(svc, up, staging)
        if len(members) == 1:  # an archive of one trace: that trace's run, named as it
            one = dict(up.fields)
            if not one.get("name", "").strip():
                one["name"] = default_name(up.filename)
            return register_upload(svc, ReceivedUpload(files=members, fields=one))
        return _register(svc, up, members, fields)
    finally:
        up.discard()
        shutil.rmtree(staging, ignore_errors=True)


def _staged(svc: Services, up: ReceivedUpload, staging: Path) -> list[ReceivedFile]:
    """The job's files under ``staging``, each under its own name (which may say its rank)."""
    if up.format == "archive":
        try:
            extracted = extract_traces(
                up.path, staging / "archive", svc.settings.max_decompressed_bytes
            )
        except ArchiveTooLarge as exc:
            raise ClientException(f"{up.filename}: {exc.problem}", status_code=413) from None
        except TraceInputError as exc:
            raise ClientException(f"{up.filename}: {exc.problem}") from None
        if not extracted:
            raise ClientException(
                f"{up.filename}: archive holds no trace files (*.json, *.json.gz, *.sqlite)"
            )
        out = []
        for m in extracted:
            printable = "".join(ch for ch in m.name if unicodedata.category(ch)[0] != "C")
            label = redact_text(f"{up.filename}:{printable}")[:255]
            try:
                fmt = detect_format(m.path)
            except TraceInputError as exc:
                raise ClientException(f"{label}: {exc.problem}") from None
            out.append(ReceivedFile(m.path, label, m.sha256, m.size_bytes, _ext(m.path, fmt), fmt))
        return out
    named: dict[str, ReceivedFile] = {}
    for f in up.files:
        if f.filename in named or f.filename in (".", ".."):
            raise ClientException(f"{f.filename}: two files of the upload have this name")
        target = staging / f.filename
        os.replace(f.path, target)
        named[f.filename] = ReceivedFile(
            target, f.filename, f.sha256, f.size_bytes, f.extension, f.format
        )
    return list(named.values())


def _ext(path: Path, fmt: str) -> str:
    with path.open("rb") as fh:
        gz = fh.read(2) == GZIP_MAGIC
    return {"nsys_sqlite": ".sqlite", "torch_chrome": ".json"}.get(fmt, ".bin") + (
        ".gz" if gz else ""
    )


def job_sha256(ranked: list[tuple[int, ReceivedFile]]) -> str:
    """A job's identity: its ranks and each rank's file's sha256."""
    text = "tracelens job\n" + "".join(f"{r} {f.sha256}\n" for r, f in ranked)
    return hashlib.sha256(text.encode()).hexdigest()


def _register(
    svc: Services, up: ReceivedUpload, members: list[ReceivedFile], fields: UploadFields
) -> tuple[Run, bool]:
    by_path = {f.path: f for f in members}
    try:
        ranked = [(r, by_path[p]) for r, p in rank_files([f.path for f in members])]
    except TraceInputError as exc:
        raise ClientException(_labelled(exc, by_path)) from None
    sha = job_sha256(ranked)
    with svc.catalog.session() as s:
        existing = s.scalar(select(Run).where(Run.sha256 == sha))
    if existing is not None:
        return existing, False
    # Only redacted files are kept, as for a single trace.
    for _, f in ranked:
        try:
            redact_in_place(f.path, f.format, svc.settings.max_decompressed_bytes)
        except TraceInputError as exc:
            raise ClientException(f"{f.filename}: {exc.problem}") from None
    run_id = catalog_runs.new_run_id()
    files = RunFiles(svc.settings.runs_dir, run_id)
    (files.dir / RANKS_DIR).mkdir(parents=True)
    kept = []
    for r, f in ranked:
        source_file = f"{RANKS_DIR}/rank-{r}{f.extension}"
        os.replace(f.path, files.source(source_file))
        kept.append(
            {
                "rank": r,
                "filename": f.filename,
                "source_file": source_file,
                "sha256": f.sha256,
                "size_bytes": f.size_bytes,
            }
        )
    label = up.filename if up.format == "archive" else _files_label(ranked)
    name = (up.fields.get("name") or "").strip()[:NAME_MAX] or (
        default_name(up.filename) if up.format == "archive" else f"job of {len(ranked)} ranks"
    )
    new = catalog_runs.NewRun(
        id=run_id,
        sha256=sha,
        name=redact_text(name),
        tags=catalog_runs.normalize_tags(up.fields.get("tags")),
        original_filename=label[:255],
        size_bytes=sum(f.size_bytes for _, f in ranked),
        source_file=RANKS_DIR,
        source_redaction=REDACTION_VERSION,
        slo=fields.slo,
        series=fields.series,
        label=fields.label,
        kind=RunKind.JOB,
        members=kept,
    )
    with svc.catalog.session() as s:
        run, created = catalog_runs.create_run(s, new)
    if not created:
        files.remove()
    else:
        svc.worker.submit(run.id)
    return run, created


def _files_label(ranked: list[tuple[int, ReceivedFile]]) -> str:
    first = ranked[0][1].filename
    return f"{first} and {len(ranked) - 1} more" if len(ranked) > 1 else first


def _labelled(exc: TraceInputError, by_path: dict[Path, ReceivedFile]) -> str:
    """``exc`` naming the upload's file rather than where it was staged."""
    for p, f in by_path.items():
        if exc.path == str(p):
            return f"{f.filename}: {exc.problem}"
    return exc.problem
