"""Ingest fills the canonical tables of every corpus trace with exactly the same values.

Speed work on ingest (chunk sizes, splitting, query rewrites) must not change a single
value. Each canonical table of each real trace is hashed over its rows in a fixed order
and compared with ``tests/data/canonical_table_hashes.json``, written from the code
before such a change. When a change is meant to alter what is stored (a new column, a
corrected reading), regenerate the file and say why in the commit:

    PYTHONPATH=. python tests/test_canonical_table_hashes.py
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from corpus_cache import corpus_db

from ingest.schema import TABLES

HASHES = Path(__file__).resolve().parent / "data" / "canonical_table_hashes.json"
# Where the file was read from: the one fact that differs between machines.
_MACHINE_FACTS = ("source_path",)


def stored() -> dict[str, dict[str, str]]:
    return json.loads(HASHES.read_text()) if HASHES.exists() else {}


def corpus_traces(root: Path) -> list[str]:
    """Every trace of the corpus, as paths relative to its root."""
    found = [*root.rglob("*.json.gz"), *root.rglob("*.sqlite")]
    return sorted(str(p.relative_to(root)) for p in found)


def table_hashes(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """``rows:md5`` of each canonical table, over its rows' text sorted."""
    out = {}
    for table in TABLES:
        where = (
            "WHERE key NOT IN (" + ", ".join(f"'{k}'" for k in _MACHINE_FACTS) + ")"
            if table == "trace_info"
            else ""
        )
        row = con.execute(
            f"""SELECT count(*) || ':' || md5(coalesce(string_agg(r, chr(10) ORDER BY r), ''))
                FROM (SELECT CAST(t AS VARCHAR) AS r FROM {table} t {where})"""
        ).fetchone()
        assert row is not None  # an aggregate always has its one row
        out[table] = str(row[0])
    return out


def _trace_hashes(root: Path, rel: str) -> dict[str, str]:
    kind, _, name = rel.partition("/")
    return table_hashes(corpus_db(root, name, kind).con)


def test_every_corpus_trace_has_stored_hashes(corpus: Path) -> None:
    assert corpus_traces(corpus) == sorted(stored()), (
        "the corpus and tests/data/canonical_table_hashes.json list different traces"
    )


@pytest.mark.parametrize("rel", sorted(stored()))
def test_canonical_tables_are_unchanged(corpus: Path, rel: str) -> None:
    expected = stored()[rel]
    got = _trace_hashes(corpus, rel)
    changed = {t: (expected.get(t), h) for t, h in got.items() if expected.get(t) != h}
    assert not changed, f"{rel}: tables whose content changed (expected, got): {changed}"


def _write() -> None:
    from conftest import corpus_root

    from ingest import load_trace

    root = corpus_root()
    if root is None:
        raise SystemExit("no corpus: set TRACELENS_CORPUS or place it at ../shared/corpus")
    hashes = {}
    for rel in corpus_traces(root):
        loaded = load_trace(root / rel)
        try:
            hashes[rel] = table_hashes(loaded.con)
        finally:
            loaded.close()
        print(rel, flush=True)
    HASHES.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    _write()
