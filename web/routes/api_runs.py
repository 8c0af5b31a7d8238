"""JSON API for runs: upload, list, status, report, findings, delete, re-ingest."""

from __future__ import annotations

import json
import os
from typing import Any

import anyio.to_thread
from litestar import Request, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.enums import MediaType
from litestar.exceptions import ClientException, NotFoundException
from litestar.params import FromPath, FromQuery, Parameter
from litestar.response import File
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_202_ACCEPTED
from sqlalchemy import select

from ingest import TraceInputError
from ingest.redacted_copy import REDACTION_VERSION, redact_in_place
from ingest.redaction import redact_text
from tracelens.report.render.markdown import finding_markdown
from web.catalog import Run, RunStatus
from web.catalog import runs as catalog_runs
from web.services import Services
from web.storage import RunFiles
from web.timeline_store import OutdatedTimelineError
from web.uploads import ReceivedUpload, receive_upload

NAME_MAX = 200
_NAME_SUFFIXES = (".gz", ".json", ".pt.trace", ".trace", ".sqlite")


class ConflictException(ClientException):
    status_code = 409


def run_json(run: Run, request: Request[Any, Any, Any] | None = None) -> dict[str, Any]:
    d = catalog_runs.run_dict(run)
    d["links"] = {
        "self": f"/api/runs/{run.id}",
        "page": f"/runs/{run.id}",
        "findings": f"/api/runs/{run.id}/findings",
        "report": f"/api/runs/{run.id}/report",
        "timeline": f"/api/runs/{run.id}/timeline",
        "source": f"/api/runs/{run.id}/source",
    }
    return d


def load_run(svc: Services, run_id: str) -> Run:
    with svc.catalog.session() as s:
        run = catalog_runs.get_run(s, run_id)
    if run is None:
        raise NotFoundException(f"no run {run_id!r}")
    return run


def load_ready_run(svc: Services, run_id: str) -> Run:
    run = load_run(svc, run_id)
    if run.status != RunStatus.READY:
        detail = f": {run.error}" if run.error else ""
        raise ConflictException(f"run {run_id} is {run.status}, not ready{detail}")
    return run


def open_run_database(svc: Services, run: Run) -> tuple[Any, dict[str, Any]]:
    """A cursor on a ready run's trace database and its timeline metadata.

    A database built by an older tracelens lacks the current timeline tables: the run is
    queued for re-ingestion from its kept original, and the client told to come back.
    """
    try:
        return svc.run_data.database(run.id, run.generation)
    except OutdatedTimelineError:
        with svc.catalog.session() as s:
            catalog_runs.requeue(s, run.id)
        svc.run_data.forget(run.id)
        svc.worker.submit(run.id)
        raise ConflictException(
            f"run {run.id} was ingested by an older tracelens and is being re-ingested; "
            "try again in a moment"
        ) from None


def permalink(svc: Services, request: Request[Any, Any, Any], run_id: str, fid: str) -> str:
    base = svc.settings.public_url or str(request.base_url).rstrip("/")
    return f"{base.rstrip('/')}/runs/{run_id}/findings/{fid}"


def _default_name(filename: str) -> str:
    name = filename
    changed = True
    while changed:
        changed = False
        for suffix in _NAME_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                changed = True
    return name


def register_upload(svc: Services, up: ReceivedUpload) -> tuple[Run, bool]:
    """Keep the received file as a new run, or recognise it as one we already have."""
    for key in ("name", "tags"):
        if "\x00" in up.fields.get(key, ""):
            up.path.unlink(missing_ok=True)
            raise ClientException(f"form field {key!r} holds a NUL byte")
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
    name = (up.fields.get("name") or "").strip()[:NAME_MAX] or _default_name(up.filename)
    new = catalog_runs.NewRun(
        id=run_id,
        sha256=up.sha256,
        name=redact_text(name),
        tags=catalog_runs.normalize_tags(up.fields.get("tags")),
        original_filename=up.filename,
        size_bytes=up.size_bytes,
        source_file=source_file,
        source_redaction=REDACTION_VERSION,
    )
    with svc.catalog.session() as s:
        run, created = catalog_runs.create_run(s, new)
    if not created:
        files.remove()
    else:
        svc.worker.submit(run.id)
    return run, created


@post(
    "/api/runs",
    status_code=HTTP_201_CREATED,
    request_max_body_size=None,
    summary="Upload a trace (multipart field 'file'; optional 'name', 'tags')",
    description=(
        "Body: multipart/form-data with the trace (.json, .json.gz, nsys .sqlite) in `file`, "
        "optionally `name` and `tags` (comma-separated). Streams to disk. Answers 201 with "
        "the new run (status `queued`), or 200 with `duplicate: true` and the existing run "
        'when the same bytes were uploaded before. 400/413/415 with `{"error": ...}` for '
        "unusable uploads; 401 without a valid token when tokens are configured; 429 when "
        "rate limited."
    ),
)
async def upload_run(
    request: Request[Any, Any, Any], svc: NamedDependency[Services]
) -> Response[dict[str, Any]]:
    await anyio.to_thread.run_sync(svc.access.check, request)
    announced = request.headers.get("content-length")
    if announced and announced.isdigit() and int(announced) > svc.settings.max_upload_bytes + 65536:
        raise ClientException(
            f"upload of {int(announced):,} bytes is larger than the limit of "
            f"{svc.settings.max_upload_bytes:,} bytes",
            status_code=413,
        )
    received = await receive_upload(
        request.stream(),
        request.headers.get("content-type", ""),
        svc.settings.uploads_dir,
        svc.settings.max_upload_bytes,
        svc.settings.max_decompressed_bytes,
    )
    run, created = await anyio.to_thread.run_sync(register_upload, svc, received)
    body = run_json(run)
    body["duplicate"] = not created
    return Response(body, status_code=HTTP_201_CREATED if created else HTTP_200_OK)


@get(
    "/api/runs",
    summary="List runs, newest first; search by text, filter by tag or status",
    sync_to_thread=True,
)
def list_runs(
    svc: NamedDependency[Services],
    q: FromQuery[str | None] = None,
    tag: FromQuery[str | None] = None,
    status: FromQuery[str | None] = None,
    limit: int = Parameter(default=50, ge=1, le=500),
    # bounded so the database never sees a number beyond its BIGINT
    offset: int = Parameter(default=0, ge=0, le=2**62),
) -> dict[str, Any]:
    with svc.catalog.session() as s:
        runs, total = catalog_runs.list_runs(
            s, q=q, tag=tag, status=status, limit=limit, offset=offset
        )
        tags = catalog_runs.all_tags(s)
    return {"runs": [run_json(r) for r in runs], "total": total, "tags": tags}


@get(
    "/api/runs/{run_id:str}",
    summary="A run: status (queued, ingesting, ready, failed), facts",
    sync_to_thread=True,
)
def get_run(svc: NamedDependency[Services], run_id: FromPath[str]) -> dict[str, Any]:
    return run_json(load_run(svc, run_id))


@delete(
    "/api/runs/{run_id:str}",
    summary="Delete a run and its files",
    status_code=204,
    sync_to_thread=True,
)
def delete_run(
    request: Request[Any, Any, Any], svc: NamedDependency[Services], run_id: FromPath[str]
) -> None:
    svc.access.check(request)
    remove_run(svc, run_id)


def remove_run(svc: Services, run_id: str) -> None:
    load_run(svc, run_id)
    with svc.catalog.session() as s:
        catalog_runs.delete_run(s, run_id)
    svc.run_data.forget(run_id)
    RunFiles(svc.settings.runs_dir, run_id).remove()


@post(
    "/api/runs/{run_id:str}/reingest",
    status_code=HTTP_202_ACCEPTED,
    summary="Ingest the kept original again (e.g. after an upgrade); finding ids stay stable",
    sync_to_thread=True,
)
def reingest_run(
    request: Request[Any, Any, Any], svc: NamedDependency[Services], run_id: FromPath[str]
) -> dict[str, Any]:
    svc.access.check(request)
    load_run(svc, run_id)
    with svc.catalog.session() as s:
        if not catalog_runs.requeue(s, run_id):
            raise ConflictException(f"run {run_id} is already queued or ingesting")
    svc.worker.submit(run_id)
    return run_json(load_run(svc, run_id))


@get(
    "/api/runs/{run_id:str}/report",
    summary="The full report, as `tracelens analyze --format json`",
    sync_to_thread=True,
)
def get_report(svc: NamedDependency[Services], run_id: FromPath[str]) -> dict[str, Any]:
    run = load_ready_run(svc, run_id)
    return svc.run_data.report(run.id, run.generation)


@get(
    "/api/runs/{run_id:str}/findings",
    summary="Findings, ranked, in the CLI's JSON shape",
    sync_to_thread=True,
)
def get_findings(svc: NamedDependency[Services], run_id: FromPath[str]) -> Response[bytes]:
    run = load_ready_run(svc, run_id)
    # Serialized once per ingest generation: this is what tickets and dashboards poll.
    body = svc.run_data.memo(
        (run.id, run.generation, "findings.json"),
        lambda: json.dumps(
            svc.run_data.report(run.id, run.generation)["findings"], separators=(",", ":")
        ).encode(),
    )
    return Response(body, media_type=MediaType.JSON)


def find_finding(svc: Services, run_id: str, finding_id: str) -> tuple[Run, dict[str, Any]]:
    run = load_ready_run(svc, run_id)
    for f in svc.run_data.report(run.id, run.generation)["findings"]:
        if f["id"] == finding_id:
            return run, f
    raise NotFoundException(f"run {run_id} has no finding {finding_id!r}")


@get(
    "/api/runs/{run_id:str}/findings/{finding_id:str}",
    summary="One finding, its permalink and Markdown",
    sync_to_thread=True,
)
def get_finding(
    request: Request[Any, Any, Any],
    svc: NamedDependency[Services],
    run_id: FromPath[str],
    finding_id: FromPath[str],
) -> dict[str, Any]:
    _, f = find_finding(svc, run_id, finding_id)
    link = permalink(svc, request, run_id, finding_id)
    return {
        "run_id": run_id,
        "permalink": link,
        "markdown": finding_markdown(f, permalink=link),
        "finding": f,
    }


@get(
    "/api/runs/{run_id:str}/findings/{finding_id:str}/markdown",
    media_type="text/markdown",
    summary="One finding as Markdown for a ticket (with its permalink)",
    sync_to_thread=True,
)
def get_finding_markdown(
    request: Request[Any, Any, Any],
    svc: NamedDependency[Services],
    run_id: FromPath[str],
    finding_id: FromPath[str],
) -> str:
    _, f = find_finding(svc, run_id, finding_id)
    return finding_markdown(f, permalink=permalink(svc, request, run_id, finding_id))


@get(
    "/api/runs/{run_id:str}/source",
    summary="The uploaded file as kept: secrets redacted, re-ingestable",
    description=(
        "The kept copy of the upload, with every secret-looking value rewritten to "
        "`[REDACTED]` at upload time. Needs `Authorization: Bearer <token>` when the "
        "service has API tokens."
    ),
    sync_to_thread=True,
)
def get_source(
    request: Request[Any, Any, Any], svc: NamedDependency[Services], run_id: FromPath[str]
) -> File:
    svc.access.check_read(request)
    run = load_run(svc, run_id)
    if run.source_redaction < REDACTION_VERSION:
        raise ConflictException(
            f"the original of run {run_id} is being redacted; try again once it is ready"
        )
    path = RunFiles(svc.settings.runs_dir, run.id).source(run.source_file)
    if not path.exists():
        raise NotFoundException(f"the original file of run {run_id} is gone")
    ext = run.source_file.removeprefix("source")
    return File(path=path, filename=f"{run.id}{ext}", media_type="application/octet-stream")


ROUTES = [
    upload_run,
    list_runs,
    get_run,
    delete_run,
    reingest_run,
    get_report,
    get_findings,
    get_finding,
    get_finding_markdown,
    get_source,
]
