"""Every finding's evidence is what tracelens/analyzers/evidence_keys declares, and the
document shows the declarations.

The findings are every analyzer's (before the ranking drops superseded ones) on every
planted scenario and every corpus trace, plus the SLO finding under one objective of
each kind. A declared key no finding shows must say why (``Key.unseen``), so a
declaration cannot outlive the key it describes.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus_cache import corpus_db

import tracelens.testing
from tracelens.analyzers import ANALYZERS, idle_gpu, llm_slo
from tracelens.analyzers.evidence_keys import BY_ANALYZER, EVIDENCE
from tracelens.analyzers.evidence_keys.check import declared_paths, evidence_problems, seen_paths
from tracelens.analyzers.evidence_keys.markdown import (
    EVIDENCE_BEGIN,
    EVIDENCE_END,
    evidence_markdown,
)
from tracelens.analyzers.evidence_keys.model import Key
from tracelens.cli import main
from tracelens.core.findings import Finding
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.llm.slo import parse_slo
from tracelens.llm.slo_outcome import slo_outcome
from tracelens.testing import Scenario, training_steps
from tracelens.testing.planted_cost import A100, V100, fp32_gemm_training
from tracelens.testing.planted_llm import static_launch_bound

REPO = Path(__file__).resolve().parent.parent
# One objective each, so that each is the worst once (the SLO finding's rows name it).
_SLOS = ("ttft=5ms,tpot=1ms", "tpot=500us", "itl=500us", "e2e=1ms")


def _planted() -> dict[str, Callable[[], Scenario]]:
    """Every planted scenario: the builders of tracelens/testing/planted*.py that take no
    argument, and the FP32 GEMM one on both GPUs it is written for."""
    out: dict[str, Callable[[], Scenario]] = {}
    for info in pkgutil.iter_modules(tracelens.testing.__path__):
        if not info.name.startswith("planted"):
            continue
        module = importlib.import_module(f"tracelens.testing.{info.name}")
        for name, fn in vars(module).items():
            if name.startswith("_") or not inspect.isfunction(fn):
                continue
            sig = inspect.signature(fn)
            builds = fn.__module__ == module.__name__ and sig.return_annotation in (
                "Scenario",
                Scenario,
            )
            if builds and all(p.default is not p.empty for p in sig.parameters.values()):
                out[f"{info.name}.{name}"] = fn
    out["fp32_gemm_training(V100)"] = lambda: fp32_gemm_training(V100, "volta_sgemm_128x64_nn")
    out["fp32_gemm_training(A100)"] = lambda: fp32_gemm_training(A100, "ampere_sgemm_128x64_nn")
    return out


def _findings(db: TraceDB) -> list[Finding]:
    t = Thresholds()
    return [f for module in ANALYZERS for f in module.analyze(db, t)]


@pytest.fixture(scope="module")
def planted_findings(scenario_db) -> list[tuple[str, Finding]]:
    out = [(name, f) for name, make in _planted().items() for f in _findings(scenario_db(make()))]
    db = scenario_db(static_launch_bound())
    t = Thresholds()
    for spec in _SLOS:
        outcome = slo_outcome(db, t, parse_slo(spec), None)
        out += [
            (f"static_launch_bound --slo {spec}", f) for f in llm_slo.analyze_slo(db, t, outcome)
        ]
    return out


def _corpus_traces(root: Path) -> Iterator[tuple[str, str]]:
    """(kind folder, path under it) of every trace; capture traces are inputs of another."""
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if "capture_traces" in rel.parts or len(rel.parts) < 2:
            continue
        if path.name.endswith(".json.gz") or path.suffix == ".sqlite":
            yield rel.parts[0], "/".join(rel.parts[1:])


@pytest.fixture(scope="module")
def corpus_findings(corpus: Path) -> list[tuple[str, Finding]]:
    return [
        (f"{kind}/{name}", f)
        for kind, name in _corpus_traces(corpus)
        for f in _findings(corpus_db(corpus, name, kind))
    ]


def _problems(findings: list[tuple[str, Finding]]) -> list[str]:
    return [f"{source}: {p}" for source, f in findings for p in evidence_problems(f)]


def test_the_document_shows_the_declarations_as_generated() -> None:
    text = (REPO / "docs" / "json-schema.md").read_text(encoding="utf-8")
    start, end = text.index(EVIDENCE_BEGIN), text.index(EVIDENCE_END) + len(EVIDENCE_END)
    assert text[start:end] + "\n" == evidence_markdown(), (
        "docs/json-schema.md is out of date: replace its evidence section with "
        "`tracelens schema --evidence`"
    )


def test_schema_command_prints_the_evidence_section() -> None:
    res = CliRunner().invoke(main, ["schema", "--evidence"])
    assert res.exit_code == 0, res.output
    assert res.output == evidence_markdown()


def test_every_analyzer_is_declared_once() -> None:
    names = [e.analyzer for e in EVIDENCE]
    assert len(names) == len(set(names))
    assert set(names) == {m.ANALYZER for m in ANALYZERS} | {llm_slo.ANALYZER}


def _keys(keys: tuple[Key, ...], where: str) -> Iterator[tuple[str, Key]]:
    for k in keys:
        yield f"{where}.{k.name}", k
        yield from _keys(k.fields, f"{where}.{k.name}")


def test_declarations_are_one_line_and_consistent() -> None:
    for decl in EVIDENCE:
        kinds = {k.name for k in decl.kinds}
        assert len(kinds) == len(decl.kinds), decl.analyzer
        scopes = [(decl.analyzer, decl.keys)] + [
            (f"{decl.analyzer}[{k.name}]", k.keys) for k in decl.kinds
        ]
        texts = [decl.description] + [k.description for k in decl.kinds]
        for where, keys in scopes:
            for path, key in _keys(keys, where):
                texts += [key.description, key.when, key.null, key.unseen]
                siblings = [k.name for k in (key.fields or ())]
                assert len(siblings) == len(set(siblings)), path
                assert set(key.only) <= kinds, path
                if key.type.json == "object" or (
                    key.type.json == "list" and key.type.item and key.type.item.json == "object"
                ):
                    assert key.fields, f"{path}: an object documents its fields"
                if key.choices:
                    assert key.type.json in ("string", "map"), path
            names = [k.name for k in keys]
            assert len(names) == len(set(names)), where
        for kind in decl.kinds:
            tell = {k.name: k for k in decl.keys_of(kind)}.get(kind.tell)
            assert tell is not None, f"{decl.analyzer}[{kind.name}] told by an undeclared key"
            if kind.tell_value is not None and tell.choices:
                assert kind.tell_value in tell.choices, kind.name
        for text in filter(None, texts):
            assert "\n" not in text and not text.endswith("."), text
        for path, key in (p for w, ks in scopes for p in _keys(ks, w)):
            assert key.description[0].isupper() or key.description[0] == "`", path


def test_the_check_finds_evidence_that_strays(scenario_db) -> None:
    """Each way a finding can stray from its declaration is reported: the tests below
    would fail on it."""
    f = next(f for f in idle_gpu.analyze(scenario_db(training_steps()), Thresholds()))
    assert evidence_problems(f) == []
    ev = f.evidence

    def problems(**changes: object) -> list[str]:
        return evidence_problems(replace(f, evidence={**ev, **changes}))

    assert any("not declared" in p for p in problems(surprise=1))
    assert any("declared int, ns" in p for p in problems(gap_ns="10 ms"))
    assert any("declared int, ns" in p for p in problems(gap_ns=True))
    assert any("never null" in p for p in problems(gap_count=None))
    assert any("none of its choices" in p for p in problems(idle_ns_by_cause={"elsewhere": 1}))
    row = {**ev["longest_gaps"][0], "extra": 0}
    assert any("longest_gaps[0].extra" in p for p in problems(longest_gaps=[row]))
    missing = {k: v for k, v in ev.items() if k != "window_ns"}
    assert any("window_ns: missing" in p for p in evidence_problems(replace(f, evidence=missing)))
    unmatched = {**ev, "cause": "elsewhere"}
    assert evidence_problems(replace(f, evidence=unmatched)) == [
        "idle_gpu: evidence matches none of its declared kinds"
    ]
    assert evidence_problems(replace(f, analyzer="nobody")) == ["nobody: no evidence declaration"]


def test_planted_findings_hold_their_declared_evidence(planted_findings) -> None:
    assert {f.analyzer for _, f in planted_findings} == set(BY_ANALYZER)
    assert _problems(planted_findings) == []


@pytest.mark.corpus
def test_corpus_findings_hold_their_declared_evidence(corpus_findings) -> None:
    assert corpus_findings
    assert _problems(corpus_findings) == []


@pytest.mark.corpus
def test_every_declaration_is_seen_or_says_why_not(planted_findings, corpus_findings) -> None:
    seen = {p for _, f in planted_findings + corpus_findings for p in seen_paths(f)}
    declared = declared_paths()
    assert sorted(p for p, why in declared.items() if not why and p not in seen) == [], (
        "declared but in no finding: plant it in a scenario, or say why in Key.unseen"
    )
    assert sorted(p for p, why in declared.items() if why and p in seen) == [], (
        "seen after all: drop its Key.unseen"
    )
