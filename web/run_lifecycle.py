"""What creates, re-ingests and deletes runs: the writes behind the API and the forms.

A run's files are in place before its catalog row exists (a queued run always has its
original), and its cached data is dropped whenever its files change or go.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from litestar.exceptions import ClientException
from sqlalchemy import select

from ingest import TraceInputError
from ingest.redacted_copy import REDACTION_VERSION, redact_in_place
from ingest.redaction import redact_text
from tracelens.llm.slo import parse_slo
from web.catalog import Run, RunKind
from web.catalog import runs as catalog_runs
from web.catalog.series import check_series_name
from web.errors import ConflictException
from web.run_lookup import load_run
from web.services import Services
from web.storage import RunFiles
from web.uploads import ReceivedUpload

NAME_MAX = 200
_NAME_SUFFIXES = (".gz", ".json", ".pt.trace", ".trace", ".sqlite", ".zip", ".tar", ".tgz")


def default_name(filename: str) -> str:
    name = filename
    changed = True
    while changed:
        changed = False
        for suffix in _NAME_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                changed = True
    return name


def canonical_slo(text: str | None, field: str = "slo") -> str | None:
    """Serving objectives as stored (``ttft=200ms,tpot=50ms``); None when none are given.

    The same text ``tracelens analyze --slo`` takes; a 400 says what does not parse.
    """
    if text is None or not text.strip():
        return None
    try:
        return parse_slo(text).spec()
    except ValueError as exc:
        raise ClientException(f"{field}: {exc}") from None


@dataclass(frozen=True)
class UploadFields:
    """An upload's checked form fields beyond its name and tags."""

    slo: str | None
    series: str | None
    label: str | None


def upload_fields(up: ReceivedUpload) -> UploadFields:
    """The upload's objectives, series and label, once its form fields are checked (400
    for a bad one; the upload is discarded then)."""
    for key in ("name", "tags", "slo", "series", "label"):
        if "\x00" in up.fields.get(key, ""):
            up.discard()
            raise ClientException(f"form field {key!r} holds a NUL byte")
    try:
        slo = canonical_slo(up.fields.get("slo"), field="form field 'slo'")
        series = _series_name(up.fields.get("series"))
    except ClientException:
        up.discard()
        raise
    label = (up.fields.get("label") or "").strip()[:NAME_MAX]
    return UploadFields(slo, series, redact_text(label) if label else None)


def _series_name(text: str | None) -> str | None:
    if text is None or not text.strip():
        return None
    try:
        return check_series_name(text)
    except ValueError as exc:
        raise ClientException(f"form field 'series': {exc}") from None


def register_upload(svc: Services, up: ReceivedUpload) -> tuple[Run, bool]:
    """Keep the received file as a new run, or recognise it as one we already have.

    Several files, or an archive, are a job of ranks (:mod:`web.job_upload`). A duplicate
    keeps the existing run's objectives: :func:`change_slo` changes them.
    """
    if len(up.files) > 1 or up.format == "archive":
        from web.job_upload import register_job_upload

        return register_job_upload(svc, up)
    fields = upload_fields(up)
    with svc.catalog.session() as s:
        existing = s.scalar(select(Run).where(Run.sha256 == up.sha256))
    if existing is not None:
        up.path.unlink(missing_ok=True)
        return existing, False
    # Only the redacted file is ever kept: the upload's own bytes never reach runs/ (the
    # sha256 above stays the upload's, so the same file uploaded again is recognised).
    try:
        redact_in_place(up.path, up.format, svc.settings.max_decompressed_bytes)
    except TraceInputError as exc:
        up.path.unlink(missing_ok=True)
        raise ClientException(f"{up.filename}: {exc.problem}") from None
    except BaseException:
        up.path.unlink(missing_ok=True)
        raise
    run_id = catalog_runs.new_run_id()
    files = RunFiles(svc.settings.runs_dir, run_id)
    files.dir.mkdir(parents=True)
    source_file = f"source{up.extension}"
    # In place before the row exists: a queued run always has its original.
    os.replace(up.path, files.source(source_file))
    name = (up.fields.get("name") or "").strip()[:NAME_MAX] or default_name(up.filename)
    new = catalog_runs.NewRun(
        id=run_id,
        sha256=up.sha256,
        name=redact_text(name),
        tags=catalog_runs.normalize_tags(up.fields.get("tags")),
        original_filename=up.filename,
        size_bytes=up.size_bytes,
        source_file=source_file,
        source_redaction=REDACTION_VERSION,
        slo=fields.slo,
        series=fields.series,
        label=fields.label,
    )
    with svc.catalog.session() as s:
        run, created = catalog_runs.create_run(s, new)
    if not created:
        files.remove()
    else:
        svc.worker.submit(run.id)
    return run, created


def reingest_run(svc: Services, run_id: str) -> Run:
    """Queue a run's kept original for ingestion again; the run as it is now queued."""
    load_run(svc, run_id)
    with svc.catalog.session() as s:
        if not catalog_runs.requeue(s, run_id):
            raise ConflictException(f"run {run_id} is already queued or ingesting")
    svc.worker.submit(run_id)
    return load_run(svc, run_id)


def describe_run(svc: Services, run_id: str, given: dict[str, str | None]) -> Run:
    """Rename or re-file a run (``name``, ``tags``, ``series``, ``label`` as given); its
    analysis is untouched. 400 for a value that cannot be stored, as at upload."""
    load_run(svc, run_id)
    values: dict[str, str | None] = {}
    for key, raw in given.items():
        if raw is not None and "\x00" in raw:
            raise ClientException(f"{key!r} holds a NUL byte")
    if "name" in given:
        name = (given["name"] or "").strip()[:NAME_MAX]
        if not name:
            raise ClientException("'name' must not be empty")
        values["name"] = redact_text(name)
    if "tags" in given:
        values["tags"] = catalog_runs.normalize_tags(given["tags"])
    if "series" in given:
        values["series"] = _series_name(given["series"])
    if "label" in given:
        label = (given["label"] or "").strip()[:NAME_MAX]
        values["label"] = redact_text(label) if label else None
    if values:
        with svc.catalog.session() as s:
            catalog_runs.describe_run(s, run_id, values)
        # pages and answers that show the name are kept per run: build them again
        svc.run_data.forget(run_id)
    return load_run(svc, run_id)


def change_slo(svc: Services, run_id: str, text: str | None) -> Run:
    """Set (or, with none, remove) a run's objectives and queue it to be analyzed again:
    re-ingestion is the one path that rebuilds the report and the catalog's findings
    together, the SLO finding among them."""
    if load_run(svc, run_id).kind == RunKind.JOB:
        raise ClientException(
            f"run {run_id} is a job of several ranks: serving objectives are judged on one "
            "trace (upload the serving rank alone)"
        )
    slo = canonical_slo(text)
    with svc.catalog.session() as s:
        if not catalog_runs.set_slo(s, run_id, slo):
            raise ConflictException(
                f"run {run_id} is being ingested; set its objectives once it is done"
            )
    svc.worker.submit(run_id)
    return load_run(svc, run_id)


def remove_run(svc: Services, run_id: str) -> None:
    load_run(svc, run_id)
    with svc.catalog.session() as s:
        catalog_runs.delete_run(s, run_id)
    svc.run_data.forget(run_id)
    RunFiles(svc.settings.runs_dir, run_id).remove()
