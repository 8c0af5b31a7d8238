"""Catalog tables: runs, their findings, and API tokens."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(UTC)


class RunStatus(StrEnum):
    QUEUED = "queued"
    INGESTING = "ingesting"
    READY = "ready"
    FAILED = "failed"


class Base(DeclarativeBase):
    pass


class RunKind(StrEnum):
    # one trace file
    TRACE = "trace"
    # a job of several ranks' traces, read together (``tracelens.ranks``)
    JOB = "job"


class Run(Base):
    """One uploaded trace, or one job of several ranks' traces. Its files live in
    ``<data dir>/runs/<id>/``."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    # Unique: the same bytes uploaded twice are the same run.
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    # Comma-separated, lower-case, with a leading and trailing comma so a tag filter is a
    # plain LIKE '%,tag,%' on every database.
    tags: Mapped[str] = mapped_column(String(500), default=",")
    original_filename: Mapped[str] = mapped_column(String(255))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    source_file: Mapped[str] = mapped_column(String(64))
    # Version of the redaction applied to the kept original (0: none, an older upload).
    source_redaction: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Serving objectives the report judges requests against, in their canonical text
    # (``ttft=200ms,tpot=50ms``); None for none.
    slo: Mapped[str | None] = mapped_column(String(200), default=None)
    kind: Mapped[str] = mapped_column(String(16), default=RunKind.TRACE, server_default="trace")
    # A job's ranks: [{"rank", "filename", "source_file", "sha256", "size_bytes"}] (the
    # upload's name and bytes of each, and its kept original); None for a single trace.
    members: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, default=None)
    # The series the run belongs to, by name (``nightly-llama``), and its label there (a
    # commit, a build); None outside any named series.
    series: Mapped[str | None] = mapped_column(String(100), default=None, index=True)
    label: Mapped[str | None] = mapped_column(String(200), default=None)
    # When the trace was recorded, ns since 1970 (the report's ``trace.recorded_at_ns``),
    # set when it is ready; None where the trace does not tell (series then use created_at).
    recorded_ns: Mapped[int | None] = mapped_column(BigInteger, default=None)
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.QUEUED, index=True)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # Bumped on each ingest so a re-ingested run gets fresh file names (open readers of
    # the previous database are never pulled out from under).
    generation: Mapped[int] = mapped_column(Integer, default=0)
    format: Mapped[str | None] = mapped_column(String(32), default=None)
    facts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    finding_count: Mapped[int] = mapped_column(Integer, default=0)
    top_severity: Mapped[str | None] = mapped_column(String(16), default=None)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )
    ready_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)

    findings: Mapped[list[FindingRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", passive_deletes=True
    )

    @property
    def tag_list(self) -> list[str]:
        return [t for t in self.tags.split(",") if t]


class FindingRow(Base):
    """A finding of a ready run, as the report has it (``json``) plus columns to search."""

    __tablename__ = "findings"

    run_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    finding_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer)
    analyzer: Mapped[str] = mapped_column(String(64))
    severity: Mapped[str] = mapped_column(String(16))
    impact_ns: Mapped[int] = mapped_column(BigInteger)
    impact_pct: Mapped[float] = mapped_column(Float)
    title: Mapped[str] = mapped_column(Text)
    json: Mapped[dict[str, Any]] = mapped_column(JSON)

    run: Mapped[Run] = relationship(back_populates="findings")

    __table_args__ = (Index("ix_findings_run_rank", "run_id", "rank"),)


class SeriesDefinition(Base):
    """What a series is beyond its name: the tags that select runs into it (every one of
    them), and its regression limits (``ttft_p95=+10%,busy=-5pt``)."""

    __tablename__ = "series"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    # In the runs' stored form (``,gpu=h100,job=nightly,``); None: members by name only.
    tags: Mapped[str | None] = mapped_column(String(500), default=None)
    limits: Mapped[str | None] = mapped_column(String(500), default=None)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )


class ApiToken(Base):
    """A token allowed to upload and delete; only its sha256 is stored."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # Revoked tokens stay, marked: once tokens were in use, revoking them all must leave
    # writes locked, not open (running without tokens again is an explicit setting).
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
