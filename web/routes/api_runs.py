"""JSON API for runs: upload and list (``/api/runs``), one run's status, deletion,
re-ingestion, kept original and enriched trace (``/api/runs/{run_id}``)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import msgspec
from litestar import Controller, Request, Response, post
from litestar.di import NamedDependency
from litestar.exceptions import ClientException, NotFoundException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, FromQuery, JSONBody, Parameter
from litestar.response import File, Stream
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_202_ACCEPTED

from ingest.redacted_copy import REDACTION_VERSION
from web import run_lifecycle
from web.api_schema import (
    RunDescription,
    RunList,
    RunView,
    SloChange,
    UploadedRun,
    error_responses,
)
from web.catalog import Run, RunKind
from web.catalog import runs as catalog_runs
from web.enriched_trace import enriched_trace
from web.errors import ConflictException, refuse_when_queue_full
from web.permalinks import finding_permalink
from web.routes.blocking import (
    blocking_delete,
    blocking_get,
    blocking_patch,
    blocking_post,
    blocking_put,
)
from web.run_lookup import live_view, load_ready_run, load_run
from web.services import Services
from web.storage import RunFiles
from web.uploads import receive_upload


class RunsController(Controller):
    path = "/api/runs"
    tags = ("runs",)

    @post(
        "/",
        status_code=HTTP_201_CREATED,
        request_max_body_size=None,
        summary="Upload a trace (multipart field 'file'; optional 'name', 'tags', 'slo')",
        description=(
            "Body: multipart/form-data with the trace (.json, .json.gz, nsys .sqlite) in "
            "`file`, optionally `name`, `tags` (comma-separated) and `slo` (serving objectives "
            "as `tracelens analyze --slo` takes them, e.g. `ttft=200ms,tpot=50ms`). Several "
            "`file` fields (a job's ranks), or one .zip/.tar/.tar.gz of them, are one run of "
            "kind `job`: its report is the job report (`tracelens.job/1`). Streams to "
            "disk. Answers "
            "201 with the new run (status `queued`), or 200 with `duplicate: true` and the "
            "existing run when the same bytes were uploaded before. 400/413/415 with "
            '`{"error": ...}` for unusable uploads; 401 without a valid token when tokens are '
            "configured; 429 when rate limited; 503 with `Retry-After` when the ingest queue "
            "(scale-out mode) is full or unreachable."
        ),
        responses={
            HTTP_200_OK: ResponseSpec(
                data_container=UploadedRun,
                description="The same bytes were uploaded before: that run, `duplicate: true`",
                generate_examples=False,
            ),
            **error_responses(401, 403, 413, 415, 429, 503),
        },
    )
    async def upload_run(
        self, request: Request[Any, Any, Any], svc: NamedDependency[Services]
    ) -> Response[UploadedRun]:
        await anyio.to_thread.run_sync(svc.access.check, request)
        if svc.queue is not None:
            await anyio.to_thread.run_sync(refuse_when_queue_full, svc.queue)
        announced = request.headers.get("content-length")
        limit = svc.settings.max_upload_bytes
        if announced and announced.isdigit() and int(announced) > limit + 65536:
            raise ClientException(
                f"upload of {int(announced):,} bytes is larger than the limit of {limit:,} bytes",
                status_code=413,
            )
        received = await receive_upload(
            request.stream(),
            request.headers.get("content-type", ""),
            svc.settings.uploads_dir,
            limit,
            svc.settings.max_decompressed_bytes,
        )
        run, created = await anyio.to_thread.run_sync(run_lifecycle.register_upload, svc, received)
        return Response(
            UploadedRun.of_upload(run, created),
            status_code=HTTP_201_CREATED if created else HTTP_200_OK,
        )

    @blocking_get(
        "/",
        summary="List runs, newest first; search by text, filter by tag or status",
        responses=error_responses(),
    )
    def list_runs(
        self,
        svc: NamedDependency[Services],
        q: FromQuery[str | None] = None,
        tag: FromQuery[str | None] = None,
        status: FromQuery[str | None] = None,
        limit: int = Parameter(default=50, ge=1, le=500),
        # bounded so the database never sees a number beyond its BIGINT
        offset: int = Parameter(default=0, ge=0, le=2**62),
    ) -> RunList:
        with svc.catalog.session() as s:
            runs, total = catalog_runs.list_runs(
                s, q=q, tag=tag, status=status, limit=limit, offset=offset
            )
            tags = catalog_runs.all_tags(s)
        return RunList(runs=[RunView.of(r) for r in runs], total=total, tags=tags)


class RunController(Controller):
    path = "/api/runs/{run_id:str}"
    tags = ("runs",)

    @blocking_get(
        "/",
        summary="A run: status (queued, ingesting, ready, failed), facts",
        responses=error_responses(404),
    )
    def get_run(self, svc: NamedDependency[Services], run_id: FromPath[str]) -> RunView:
        return live_view(svc, load_run(svc, run_id))

    @blocking_delete(
        "/",
        summary="Delete a run and its files",
        status_code=204,
        responses=error_responses(401, 403, 404),
    )
    def delete_run(
        self, request: Request[Any, Any, Any], svc: NamedDependency[Services], run_id: FromPath[str]
    ) -> None:
        svc.access.check(request)
        run_lifecycle.remove_run(svc, run_id)

    @blocking_post(
        "/reingest",
        status_code=HTTP_202_ACCEPTED,
        summary="Ingest the kept original again (e.g. after an upgrade); finding ids stay stable",
        responses=error_responses(401, 403, 404, 409),
    )
    def reingest_run(
        self, request: Request[Any, Any, Any], svc: NamedDependency[Services], run_id: FromPath[str]
    ) -> RunView:
        svc.access.check(request)
        return RunView.of(run_lifecycle.reingest_run(svc, run_id))

    @blocking_patch(
        "/",
        summary="Rename or re-file a run: its name, tags, series and label",
        description=(
            'Body: any of `{"name": "...", "tags": "a,b", "series": "nightly", "label": '
            '"abc123"}`; a field left out is kept, `series`/`label` null or empty removes '
            "them. The analysis is untouched. 400 for a value that cannot be stored."
        ),
        responses=error_responses(401, 403, 404),
    )
    def describe_run(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        data: JSONBody[RunDescription],
    ) -> RunView:
        svc.access.check(request)
        given = {k: getattr(data, k) for k in data.__struct_fields__}
        given = {k: v for k, v in given.items() if v is not msgspec.UNSET}
        return RunView.of(run_lifecycle.describe_run(svc, run_id, given))

    @blocking_put(
        "/slo",
        status_code=HTTP_202_ACCEPTED,
        summary="Set a run's serving objectives and analyze it again against them",
        description=(
            'Body: `{"slo": "ttft=200ms,tpot=50ms,itl=100ms,e2e=10s"}` (any subset; `null` or '
            "an empty string removes them). The run is queued for re-ingestion; its report "
            "then has `llm.slo` (attainment, goodput) and, below 90 % attainment, the "
            "`llm_slo` finding. 400 for objectives that do not parse, 409 while it is ingesting."
        ),
        responses=error_responses(401, 403, 404, 409),
    )
    def set_slo(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        data: JSONBody[SloChange],
    ) -> RunView:
        svc.access.check(request)
        return RunView.of(run_lifecycle.change_slo(svc, run_id, data.slo))

    @blocking_get(
        "/source",
        summary="The uploaded file as kept: secrets redacted, re-ingestable",
        description=(
            "The kept copy of the upload, with every secret-looking value rewritten to "
            "`[REDACTED]` at upload time. A job's run keeps one per rank: `?rank=R` names "
            "it (400 without). Needs `Authorization: Bearer <token>` when the service has "
            "API tokens."
        ),
        responses=error_responses(401, 404, 409),
    )
    def get_source(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        rank: FromQuery[int | None] = None,
    ) -> File:
        svc.access.check_read(request)
        run = load_run(svc, run_id)
        if run.source_redaction < REDACTION_VERSION:
            raise ConflictException(
                f"the original of run {run_id} is being redacted; try again once it is ready"
            )
        source_file = _source_file(run, rank)
        path = RunFiles(svc.settings.runs_dir, run.id).source(source_file)
        if not path.exists():
            raise NotFoundException(f"the original file of run {run_id} is gone")
        name = source_file.rsplit("/", 1)[-1]
        ext = name[name.index(".") :] if "." in name else ""
        label = f"{run.id}-{name.split('.')[0]}" if rank is not None else run.id
        return File(path=path, filename=f"{label}{ext}", media_type="application/octet-stream")

    @blocking_get(
        "/trace/enriched",
        summary="The trace with its findings: Chrome-trace JSON (gzip) for Perfetto or chrome://tracing",
        description=(
            "The kept original's events (secrets redacted; an Nsight Systems export's "
            "kernels, copies, memsets, runtime calls, NVTX ranges and synchronizations, "
            "written from the run's database), plus a process `tracelens findings`: one "
            "complete event per time range of each finding (named by its title; `args` "
            "with id, severity, impact and permalink), and counters of each GPU's busy "
            "share and, where recorded, its allocated and reserved memory. Always "
            "gzip-compressed (`application/gzip`, a `.json.gz` attachment), streamed. A "
            "job's run: one rank's, `?rank=R` (400 without), with that rank's findings. "
            "Needs `Authorization: Bearer <token>` when the service has API tokens, as "
            "the original does; 409 until the run is ready."
        ),
        media_type="application/gzip",
        responses=error_responses(401, 404, 409),
    )
    def get_enriched_trace(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        run_id: FromPath[str],
        rank: FromQuery[int | None] = None,
    ) -> Stream:
        svc.access.check_read(request)
        run = load_ready_run(svc, run_id)
        if run.source_redaction < REDACTION_VERSION:
            raise ConflictException(
                f"the original of run {run_id} is being redacted; try again once it is ready"
            )
        path = RunFiles(svc.settings.runs_dir, run.id).source(_source_file(run, rank))
        if not path.exists():
            raise NotFoundException(f"the original file of run {run_id} is gone")
        trace = enriched_trace(
            svc,
            run,
            path,
            rank,
            lambda fid: finding_permalink(svc.settings, request, run.id, fid),
        )
        return Stream(
            trace.chunks,
            media_type="application/gzip",
            headers={"content-disposition": f'attachment; filename="{trace.filename}"'},
        )


def _source_file(run: Run, rank: int | None) -> str:
    """The kept file of the run, or of a job's ``rank``."""
    if run.kind != RunKind.JOB:
        if rank is not None:
            raise ClientException(f"run {run.id} is one trace: it has no ?rank= originals")
        return run.source_file
    ranks = [int(m["rank"]) for m in run.members or []]
    if rank is None:
        raise ClientException(
            f"run {run.id} is a job of {len(ranks)} ranks, each with its original: add "
            f"?rank=R (ranks: {ranks})"
        )
    for m in run.members or []:
        if int(m["rank"]) == rank:
            return str(m["source_file"])
    raise NotFoundException(f"run {run.id} has no rank {rank} (ranks: {ranks})")
