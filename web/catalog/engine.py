"""Catalog connection set-up and schema upgrades."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS = "web:catalog/migrations"
# PostgreSQL advisory lock key held while the schema is upgraded (any fixed 64-bit number).
_MIGRATION_LOCK = 0x7472616365  # "trace"


def default_database_url(data_dir: Path) -> str:
    return f"sqlite:///{(data_dir / 'catalog.sqlite').resolve()}"


def _sqlite_pragmas(dbapi_con: Any, _record: Any) -> None:
    # WAL lets page requests read while the ingest worker writes; the busy timeout makes
    # concurrent writers wait instead of failing; SQLite enforces foreign keys only on request.
    cur = dbapi_con.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=10
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


def alembic_config(url: str) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", MIGRATIONS)
    # ConfigParser interpolation: a literal % in a password must be doubled.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


@contextmanager
def _sqlite_migration_lock(engine: Engine) -> Iterator[None]:
    """One process at a time upgrades a SQLite catalog: a web process and its workers
    starting together on a new catalog otherwise race to create the same tables, and the
    losers die at start. An exclusive lock on a file beside the database (never the
    database file itself: closing any descriptor of it drops SQLite's own locks in this
    process); where the platform has no ``flock``, none."""
    path = engine.url.database
    try:
        import fcntl
    except ImportError:  # not POSIX
        fcntl = None  # type: ignore[assignment]
    if fcntl is None or not path or path == ":memory:":
        yield
        return
    with open(f"{path}-migrate.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def upgrade_schema(engine: Engine) -> None:
    """Bring the catalog schema to the newest migration (creating it on first use)."""
    if engine.dialect.name == "sqlite":
        with _sqlite_migration_lock(engine):
            _upgrade(engine)
    else:
        _upgrade(engine)


def _upgrade(engine: Engine) -> None:
    from alembic import command

    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as con:
        if con.dialect.name == "postgresql":
            # Processes starting together (a web process and its workers, --processes N)
            # would otherwise race to create the same tables: one at a time, the later
            # ones finding the schema current. Released when this transaction ends.
            con.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        cfg.attributes["connection"] = con
        command.upgrade(cfg, "head")


def migrations_dir() -> Path:
    return Path(str(resources.files("web") / "catalog" / "migrations"))


class Catalog:
    """An engine and its session factory; ``upgrade=True`` migrates the schema first."""

    def __init__(self, url: str, upgrade: bool = True) -> None:
        self.url = url
        self.engine = make_engine(url)
        if upgrade:
            upgrade_schema(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose work is committed on success and rolled back on error."""
        with self._sessions() as s, s.begin():
            yield s

    def dispose(self) -> None:
        self.engine.dispose()
