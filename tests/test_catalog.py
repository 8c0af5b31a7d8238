"""The catalog on SQLite and on PostgreSQL: migrations, dedup, status changes, search."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect

from web.catalog import ApiToken, Catalog, RunStatus, default_database_url
from web.catalog import runs as R
from web.catalog.tokens import create_token, has_tokens, token_known


@pytest.fixture(params=["sqlite", "postgres"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Catalog:
    if request.param == "sqlite":
        url = default_database_url(tmp_path)
    else:
        url = request.getfixturevalue("postgres_url")
    cat = Catalog(url)
    yield cat
    cat.dispose()


def _new(sha: str, name: str = "run", tags: str = "") -> R.NewRun:
    return R.NewRun(
        id=R.new_run_id(),
        sha256=sha,
        name=name,
        tags=R.normalize_tags(tags),
        original_filename=f"{name}.json.gz",
        size_bytes=10,
        source_file="source.json.gz",
    )


def test_migrations_create_every_table_and_are_idempotent(catalog: Catalog) -> None:
    names = set(inspect(catalog.engine).get_table_names())
    assert {"runs", "findings", "api_tokens", "alembic_version"} <= names
    again = Catalog(catalog.url)  # a second start upgrades nothing and breaks nothing
    again.dispose()


def test_same_sha256_is_the_same_run(catalog: Catalog) -> None:
    with catalog.session() as s:
        a, created_a = R.create_run(s, _new("a" * 64, "first"))
    with catalog.session() as s:
        b, created_b = R.create_run(s, _new("a" * 64, "second"))
    assert created_a and not created_b
    assert b.id == a.id and b.name == "first"


def test_same_sha256_uploaded_concurrently_is_the_same_run(catalog: Catalog) -> None:
    # The other request commits the same bytes between this one's lookup and its insert:
    # the insert hits the unique constraint and must answer with the winner's run.
    winner: list[R.Run] = []
    with catalog.session() as s:
        real_scalar = s.scalar

        def lookup_then_lose_the_race(stmt, *args, **kwargs):  # type: ignore[no-untyped-def]
            found = real_scalar(stmt, *args, **kwargs)
            if not winner:
                with catalog.session() as other:
                    winner.append(R.create_run(other, _new("c" * 64, "winner"))[0])
            return found

        s.scalar = lookup_then_lose_the_race  # type: ignore[method-assign]
        run, created = R.create_run(s, _new("c" * 64, "loser"))
    assert not created
    assert run.id == winner[0].id and run.name == "winner"


def test_lifecycle_claim_ready_with_findings_and_generation_guard(catalog: Catalog) -> None:
    with catalog.session() as s:
        run, _ = R.create_run(s, _new("b" * 64))
    with catalog.session() as s:
        gen = R.claim(s, run.id)
        assert gen == 1
        assert R.claim(s, run.id) is None  # already ingesting: nobody else may take it
    findings = [
        {
            "id": "f1",
            "analyzer": "idle_gpu",
            "severity": "high",
            "impact_ns": 5,
            "impact_pct": 2.5,
            "title": "GPU idle <waiting>",
        },
        {
            "id": "f2",
            "analyzer": "hot_ops",
            "severity": "low",
            "impact_ns": 1,
            "impact_pct": 0.5,
            "title": "op",
        },
    ]
    with catalog.session() as s:
        assert not R.mark_ready(s, run.id, gen + 1, "torch_chrome", {}, findings)  # stale
    with catalog.session() as s:
        assert R.mark_ready(s, run.id, gen, "torch_chrome", {"k": 1}, findings)
    with catalog.session() as s:
        got = R.get_run(s, run.id)
        assert got.status == RunStatus.READY and got.top_severity == "high"
        assert got.finding_count == 2
        assert [f["id"] for f in R.findings_of(s, run.id)] == ["f1", "f2"]
        assert R.finding_of(s, run.id, "f1")["title"] == "GPU idle <waiting>"
        assert R.requeue(s, run.id)
    with catalog.session() as s:
        assert R.get_run(s, run.id).status == RunStatus.QUEUED


def _finding(fid: str, severity: str = "medium") -> dict[str, object]:
    return {
        "id": fid,
        "analyzer": "idle_gpu",
        "severity": severity,
        "impact_ns": 3,
        "impact_pct": 1.0,
        "title": f"finding {fid}",
    }


def test_a_publish_that_loses_its_generation_leaves_the_findings_alone(
    catalog: Catalog,
) -> None:
    """A late delivery's publish (its generation stale, the run already ready, or the run
    deleted) changes nothing: the findings shown stay those of the run's own facts."""
    with catalog.session() as s:
        run, _ = R.create_run(s, _new("e" * 64))
    with catalog.session() as s:
        gen = R.claim(s, run.id)
        assert gen is not None
    with catalog.session() as s:  # a stale generation while the run ingests
        assert not R.mark_ready(s, run.id, gen + 1, "torch_chrome", {}, [_finding("old")])
    with catalog.session() as s:
        assert R.findings_of(s, run.id) == []
        assert R.mark_ready(s, run.id, gen, "torch_chrome", {}, [_finding("a"), _finding("b")])
    with catalog.session() as s:  # a second delivery of the published generation
        assert not R.mark_ready(s, run.id, gen, "torch_chrome", {}, [_finding("late", "high")])
    with catalog.session() as s:
        got = R.get_run(s, run.id)
        assert got is not None and got.finding_count == 2 and got.top_severity == "medium"
        assert [f["id"] for f in R.findings_of(s, run.id)] == ["a", "b"]
        assert R.delete_run(s, run.id)
    with catalog.session() as s:  # the run deleted meanwhile: nothing to publish into
        assert not R.mark_ready(s, run.id, gen, "torch_chrome", {}, [_finding("gone")])


def test_restart_requeues_interrupted_runs_and_fails_repeat_offenders(catalog: Catalog) -> None:
    with catalog.session() as s:
        retry, _ = R.create_run(s, _new("c" * 64, "retry"))
        doomed, _ = R.create_run(s, _new("d" * 64, "doomed"))
    with catalog.session() as s:
        R.claim(s, retry.id)
        for _ in range(R.MAX_ATTEMPTS):
            R.claim(s, doomed.id)
            s.get(R.Run, doomed.id).status = RunStatus.QUEUED
        s.get(R.Run, doomed.id).status = RunStatus.INGESTING
    with catalog.session() as s:
        queued = R.recover_interrupted(s)
    with catalog.session() as s:
        assert queued == [retry.id]
        assert R.get_run(s, retry.id).status == RunStatus.QUEUED
        failed = R.get_run(s, doomed.id)
        assert failed.status == RunStatus.FAILED and "interrupted" in failed.error


def test_search_by_name_and_tag(catalog: Catalog) -> None:
    with catalog.session() as s:
        R.create_run(s, _new("e" * 64, "llama decode", "llm, A100"))
        R.create_run(s, _new("f" * 64, "resnet train", "vision"))
        R.create_run(s, _new("0" * 64, "100%_weird", ""))
    with catalog.session() as s:
        by_name, n = R.list_runs(s, q="LLAMA")
        assert n == 1 and by_name[0].name == "llama decode"
        by_tag, _ = R.list_runs(s, tag="a100")
        assert [r.name for r in by_tag] == ["llama decode"]
        assert by_tag[0].tag_list == ["llm", "a100"]
        literal, _ = R.list_runs(s, q="0%_")  # LIKE wildcards are matched literally
        assert [r.name for r in literal] == ["100%_weird"]
        assert R.all_tags(s) == ["a100", "llm", "vision"]


def test_tokens_are_stored_hashed(catalog: Catalog) -> None:
    with catalog.session() as s:
        assert not has_tokens(s)
        token = create_token(s, "ci")
    with catalog.session() as s:
        assert has_tokens(s) and token_known(s, token) and not token_known(s, token + "x")
        stored = s.scalars(R.select(ApiToken.token_sha256)).all()
        assert stored and token not in stored
