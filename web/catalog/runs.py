"""Catalog operations on runs and findings: everything the service and the worker change.

Status changes are single guarded UPDATEs (``... WHERE status = 'queued'``) so two workers,
or a worker and a restart, can never both own a run.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tracelens.core.findings import Severity
from web.catalog.models import FindingRow, Run, RunStatus, utcnow

if TYPE_CHECKING:
    from web.catalog.engine import Catalog

# A run interrupted this many times (the service stopped mid-ingest) is failed, not retried:
# a trace that kills the process must not crash it forever.
MAX_ATTEMPTS = 3
_TAG_SPLIT = re.compile(r"[,\s]+")
# ``=`` lets a tag be a key and a value (``gpu=h100``), as series select runs by.
_TAG_OK = re.compile(r"[^a-z0-9._:=\-]")


def new_run_id() -> str:
    return secrets.token_hex(6)


def normalize_tags(text: str | None) -> str:
    """``"GPU, a100 llm"`` -> ``",gpu,a100,llm,"`` (the stored form: see Run.tags)."""
    tags: list[str] = []
    for raw in _TAG_SPLIT.split((text or "").lower()):
        tag = _TAG_OK.sub("", raw)[:40]
        if tag and tag not in tags:
            tags.append(tag)
    return "," + ",".join(tags[:20]) + ("," if tags else "")


@dataclass
class NewRun:
    id: str
    sha256: str
    name: str
    tags: str
    original_filename: str
    size_bytes: int
    source_file: str
    source_redaction: int = 0
    slo: str | None = None
    kind: str = "trace"
    members: list[dict[str, Any]] | None = None
    series: str | None = None
    label: str | None = None


def create_run(s: Session, new: NewRun) -> tuple[Run, bool]:
    """Insert ``new`` unless a run with the same sha256 exists: (run, created)."""
    existing = s.scalar(select(Run).where(Run.sha256 == new.sha256))
    if existing is not None:
        return existing, False
    run = Run(
        id=new.id,
        sha256=new.sha256,
        name=new.name,
        tags=new.tags,
        original_filename=new.original_filename,
        size_bytes=new.size_bytes,
        source_file=new.source_file,
        source_redaction=new.source_redaction,
        slo=new.slo,
        kind=new.kind,
        members=new.members,
        series=new.series,
        label=new.label,
        status=RunStatus.QUEUED,
        facts={},
    )
    try:
        with s.begin_nested():
            s.add(run)
    except IntegrityError:
        # A concurrent upload of the same bytes won the race: theirs is the run. (The
        # savepoint's rollback has already taken our pending row out of the session.)
        if run in s:
            s.expunge(run)
        existing = s.scalar(select(Run).where(Run.sha256 == new.sha256))
        if existing is None:
            raise
        return existing, False
    return run, True


def get_run(s: Session, run_id: str) -> Run | None:
    return s.get(Run, run_id)


def fresh_run(catalog: Catalog, run_id: str) -> Run | None:
    """The run's row as it is now, in a session of its own (the object outlives it)."""
    with catalog.session() as s:
        return get_run(s, run_id)


def list_runs(
    s: Session,
    q: str | None = None,
    tag: str | None = None,
    status: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[Run], int]:
    stmt = select(Run)
    if q:
        like = f"%{_escape_like(q.strip().lower())}%"
        stmt = stmt.where(
            or_(
                func.lower(Run.name).like(like, escape="\\"),
                func.lower(Run.original_filename).like(like, escape="\\"),
                Run.tags.like(like, escape="\\"),
                Run.id == q.strip(),
            )
        )
    if tag:
        norm = normalize_tags(tag).strip(",").split(",")[0]
        stmt = stmt.where(Run.tags.like(f"%,{_escape_like(norm)},%", escape="\\"))
    if status:
        stmt = stmt.where(Run.status == status)
    total = s.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    rows = s.scalars(stmt.order_by(Run.created_at.desc(), Run.id).limit(limit).offset(offset)).all()
    return list(rows), int(total)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def all_tags(s: Session) -> list[str]:
    tags: set[str] = set()
    for (t,) in s.execute(select(Run.tags).distinct()):
        tags.update(x for x in t.split(",") if x)
    return sorted(tags)


def claim(s: Session, run_id: str, *, lost_too: bool = False) -> int | None:
    """Move a queued run to ingesting; its new generation, or None when not queued.

    ``lost_too`` also takes a run left ingesting (a queue's redelivery of a job whose
    worker was lost mid-ingest); a finished or deleted run is never taken.
    """
    statuses = [RunStatus.QUEUED, RunStatus.INGESTING] if lost_too else [RunStatus.QUEUED]
    res = s.execute(
        update(Run)
        .where(Run.id == run_id, Run.status.in_(statuses))
        .values(
            status=RunStatus.INGESTING,
            attempts=Run.attempts + 1,
            generation=Run.generation + 1,
            progress=0.0,
            error=None,
            updated_at=utcnow(),
        )
    )
    if res.rowcount != 1:  # type: ignore[attr-defined]
        return None
    return s.scalar(select(Run.generation).where(Run.id == run_id))


def set_progress(s: Session, run_id: str, generation: int, fraction: float) -> None:
    s.execute(
        update(Run)
        .where(
            Run.id == run_id,
            Run.generation == generation,
            Run.status == RunStatus.INGESTING,
        )
        .values(progress=max(0.0, min(1.0, fraction)))
    )


def mark_ready(
    s: Session,
    run_id: str,
    generation: int,
    fmt: str,
    facts: dict[str, Any],
    findings: list[dict[str, Any]],
) -> bool:
    """Publish a finished ingest: status ready and findings replaced, in one transaction.

    The guarded update comes first and the findings are replaced only if it matched: a
    late delivery (its generation stale, the run already published or deleted) must not
    swap the findings of a ready run for its own, nor insert findings for a run that is
    gone.
    """
    top = max((Severity.parse(f["severity"]) for f in findings), default=None)
    recorded = (facts.get("trace") or {}).get("recorded_at_ns")
    res = s.execute(
        update(Run)
        .where(
            Run.id == run_id,
            Run.generation == generation,
            Run.status == RunStatus.INGESTING,
        )
        .values(
            status=RunStatus.READY,
            progress=1.0,
            error=None,
            format=fmt,
            facts=facts,
            finding_count=len(findings),
            top_severity=top.label if top is not None else None,
            recorded_ns=int(recorded) if isinstance(recorded, int) else None,
            ready_at=utcnow(),
            updated_at=utcnow(),
        )
    )
    if res.rowcount != 1:  # type: ignore[attr-defined]
        return False
    s.execute(delete(FindingRow).where(FindingRow.run_id == run_id))
    s.add_all(
        FindingRow(
            run_id=run_id,
            finding_id=f["id"],
            rank=i,
            analyzer=f["analyzer"],
            severity=f["severity"],
            impact_ns=int(f["impact_ns"]),
            impact_pct=float(f["impact_pct"]),
            title=f["title"],
            json=f,
        )
        for i, f in enumerate(_unique_by_id(findings))
    )
    return True


def _unique_by_id(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for f in findings:
        if f["id"] not in seen:
            seen.add(f["id"])
            out.append(f)
    return out


def mark_failed(s: Session, run_id: str, generation: int | None, error: str) -> None:
    stmt = update(Run).where(Run.id == run_id)
    if generation is not None:
        stmt = stmt.where(Run.generation == generation)
    s.execute(stmt.values(status=RunStatus.FAILED, error=error[:2000], updated_at=utcnow()))


def requeue(s: Session, run_id: str) -> bool:
    """Queue a ready or failed run again (re-ingest from its kept original)."""
    res = s.execute(
        update(Run)
        .where(Run.id == run_id, Run.status.in_([RunStatus.READY, RunStatus.FAILED]))
        .values(status=RunStatus.QUEUED, attempts=0, progress=0.0, updated_at=utcnow())
    )
    return res.rowcount == 1  # type: ignore[attr-defined]


def describe_run(s: Session, run_id: str, values: dict[str, str | None]) -> bool:
    """Change how a run is named and filed (``name``, ``tags``, ``series``, ``label``);
    nothing it was analysed with. False when there is no such run."""
    res = s.execute(update(Run).where(Run.id == run_id).values(**values, updated_at=utcnow()))
    return bool(res.rowcount == 1)  # type: ignore[attr-defined]


def set_slo(s: Session, run_id: str, slo: str | None) -> bool:
    """Store a run's objectives unless it is being ingested; a finished run is queued again
    (its report and findings are rebuilt with them). False while it is ingesting."""
    res = s.execute(
        update(Run)
        .where(
            Run.id == run_id,
            Run.status.in_([RunStatus.QUEUED, RunStatus.READY, RunStatus.FAILED]),
        )
        .values(slo=slo, updated_at=utcnow())
    )
    if res.rowcount != 1:  # type: ignore[attr-defined]
        return False
    requeue(s, run_id)
    return True


def all_run_ids(s: Session) -> set[str]:
    return set(s.scalars(select(Run.id)).all())


def set_source_redaction(s: Session, run_id: str, version: int) -> None:
    s.execute(
        update(Run).where(Run.id == run_id).values(source_redaction=version, updated_at=utcnow())
    )


def requeue_unredacted(s: Session, version: int) -> list[str]:
    """Queue every finished run whose kept original predates redaction ``version``: the
    ingest redacts the original first and rebuilds everything stored from it."""
    ids = list(
        s.scalars(
            select(Run.id).where(
                Run.source_redaction < version,
                Run.status.in_([RunStatus.READY, RunStatus.FAILED]),
            )
        ).all()
    )
    for run_id in ids:
        requeue(s, run_id)
    return ids


def recover_interrupted(s: Session, max_attempts: int = MAX_ATTEMPTS) -> list[str]:
    """After a restart: runs caught mid-ingest are retried (or failed after too many tries).

    Returns the ids of every queued run, oldest first, for the worker to pick up.
    """
    s.execute(
        update(Run)
        .where(Run.status == RunStatus.INGESTING, Run.attempts >= max_attempts)
        .values(
            status=RunStatus.FAILED,
            error=f"ingestion was interrupted {max_attempts} times (the service stopped "
            "while ingesting); giving up",
            updated_at=utcnow(),
        )
    )
    s.execute(
        update(Run)
        .where(Run.status == RunStatus.INGESTING)
        .values(status=RunStatus.QUEUED, progress=0.0, updated_at=utcnow())
    )
    return list(
        s.scalars(
            select(Run.id).where(Run.status == RunStatus.QUEUED).order_by(Run.created_at)
        ).all()
    )


def delete_run(s: Session, run_id: str) -> bool:
    s.execute(delete(FindingRow).where(FindingRow.run_id == run_id))
    res = s.execute(delete(Run).where(Run.id == run_id))
    return res.rowcount == 1  # type: ignore[attr-defined]


def findings_of(s: Session, run_id: str) -> list[dict[str, Any]]:
    return [
        row.json
        for row in s.scalars(
            select(FindingRow).where(FindingRow.run_id == run_id).order_by(FindingRow.rank)
        )
    ]


def finding_of(s: Session, run_id: str, finding_id: str) -> dict[str, Any] | None:
    row = s.get(FindingRow, (run_id, finding_id))
    return row.json if row is not None else None
