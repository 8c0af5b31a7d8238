"""Catalog operations on series: their members, names and definitions (tags, limits)."""

from __future__ import annotations

import re

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from web.catalog.models import Run, SeriesDefinition, utcnow

# Runs read per series, newest first: what a page or an alert needs, bounded so a series
# recorded nightly for years never loads all its reports at once.
MAX_RUNS = 500
_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:=\-]{0,99}$")


def check_series_name(text: str) -> str:
    """A series name as stored; ValueError for one that cannot be one (it is in URLs)."""
    name = text.strip()
    if not _NAME_OK.match(name):
        raise ValueError(
            f"series name {text[:120]!r} must be 1-100 letters, digits and . _ : = - "
            "(starting with a letter or digit)"
        )
    return name


def definition(s: Session, name: str) -> SeriesDefinition | None:
    return s.get(SeriesDefinition, name)


def define(s: Session, name: str, tags: str | None, limits: str | None) -> SeriesDefinition:
    """Create or change a series' definition."""
    row = s.get(SeriesDefinition, name)
    if row is None:
        row = SeriesDefinition(name=name, tags=tags, limits=limits)
        s.add(row)
    else:
        row.tags = tags
        row.limits = limits
        row.updated_at = utcnow()
    s.flush()
    return row


def members(s: Session, name: str, tags: str | None) -> list[Run]:
    """The runs of a series, any status: uploaded into it by name, or carrying every one of
    its tags (stored form ``,a,b,``). The newest :data:`MAX_RUNS` by upload time."""
    wanted = [t for t in (tags or "").split(",") if t]
    selectors = [Run.series == name]
    if wanted:
        every = (Run.tags.like(f"%,{_escape_like(t)},%", escape="\\") for t in wanted)
        selectors.append(and_(*every))
    stmt = select(Run).where(or_(*selectors)).order_by(Run.created_at.desc(), Run.id)
    return list(s.scalars(stmt.limit(MAX_RUNS)).all())


def names(s: Session) -> list[str]:
    """Every series: named at upload by some run, or defined."""
    named = set(s.scalars(select(Run.series).where(Run.series.is_not(None)).distinct()).all())
    defined = set(s.scalars(select(SeriesDefinition.name)).all())
    return sorted(n for n in named | defined if n)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
