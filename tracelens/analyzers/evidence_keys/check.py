"""Whether a finding's evidence is what its declaration says, and which declarations it uses.

:func:`evidence_problems` lists every way one finding's evidence strays from
:data:`~tracelens.analyzers.evidence_keys.EVIDENCE`: a key or inner field not declared, a
declared one missing where it is said to be always present, a value of another type, a
null where none is declared, a string or map key outside its choices, evidence that
matches no declared kind (or several). :func:`seen_paths` names the declarations a finding
exercises, so a test over many findings can tell the declarations nothing ever shows
(:func:`declared_paths`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tracelens.analyzers.evidence_keys import BY_ANALYZER, EVIDENCE
from tracelens.analyzers.evidence_keys.model import AnalyzerEvidence, Key, Kind
from tracelens.core.findings import Finding


def evidence_problems(f: Finding) -> list[str]:
    """What in ``f.evidence`` its analyzer's declaration does not say (empty: nothing)."""
    decl = BY_ANALYZER.get(f.analyzer)
    if decl is None:
        return [f"{f.analyzer}: no evidence declaration"]
    kind, problem = _kind(decl, f.evidence)
    if problem:
        return [problem]
    where = _path(decl, kind)
    return _object_problems(where, f.evidence, decl.keys_of(kind), _name(kind))


def seen_paths(f: Finding) -> set[str]:
    """The declared kinds, keys and inner fields ``f`` holds (as :func:`declared_paths`
    names them); nothing for evidence that matches no single kind."""
    decl = BY_ANALYZER.get(f.analyzer)
    if decl is None:
        return set()
    kind, problem = _kind(decl, f.evidence)
    if problem:
        return set()
    out = {_path(decl, kind)} if kind is not None else set()
    # Keys every finding may hold are named after the analyzer, a kind's own after the kind.
    owned = ((decl.analyzer, decl.keys), (_path(decl, kind), kind.keys if kind else ()))
    for owner, keys in owned:
        for key in keys:
            if key.name in f.evidence and _applies(key, _name(kind)):
                out |= _seen(f"{owner}.{key.name}", f.evidence[key.name], key, _name(kind))
    return out


def declared_paths() -> dict[str, str]:
    """Every declared kind, key and inner field, with why no trace shows it ('' if one must)."""
    out: dict[str, str] = {}
    for decl in EVIDENCE:
        for kind in decl.kinds:
            out[_path(decl, kind)] = kind.unseen
            for key in kind.keys:
                out |= dict(_declared(f"{_path(decl, kind)}.{key.name}", key, kind.unseen))
        for key in decl.keys:
            out |= dict(_declared(f"{decl.analyzer}.{key.name}", key, ""))
    return out


def _kind(decl: AnalyzerEvidence, evidence: Mapping[str, Any]) -> tuple[Kind | None, str]:
    if not decl.kinds:
        return None, ""
    kinds = decl.kinds_of(evidence)
    if len(kinds) == 1:
        return kinds[0], ""
    names = ", ".join(k.name for k in kinds) or "none"
    return None, f"{decl.analyzer}: evidence matches {names} of its declared kinds"


def _path(decl: AnalyzerEvidence, kind: Kind | None) -> str:
    return decl.analyzer if kind is None else f"{decl.analyzer}[{kind.name}]"


def _name(kind: Kind | None) -> str | None:
    return kind.name if kind is not None else None


def _applies(key: Key, kind: str | None) -> bool:
    return not key.only or kind in key.only


def _object_problems(
    where: str, obj: Mapping[str, Any], keys: tuple[Key, ...], kind: str | None
) -> list[str]:
    declared = {k.name: k for k in keys if _applies(k, kind)}
    out = [f"{where}.{name}: not declared" for name in obj if name not in declared]
    for key in declared.values():
        if key.name in obj:
            out += _value_problems(f"{where}.{key.name}", obj[key.name], key, kind)
        elif not key.when:
            out.append(f"{where}.{key.name}: missing, but declared present in every finding")
    return out


def _value_problems(where: str, value: Any, key: Key, kind: str | None) -> list[str]:
    if value is None:
        return [] if key.null else [f"{where}: null, but declared never null"]
    t = key.type
    if not t.holds(value):
        return [f"{where}: {type(value).__name__} {value!r:.60}, declared {t.label}"]
    if t.json == "string" and key.choices and value not in key.choices:
        return [f"{where}: {value!r} is none of its choices"]
    out: list[str] = []
    if t.json == "object" and key.fields:
        out += _object_problems(where, value, key.fields, kind)
    elif t.json == "list" and t.item is not None:
        for i, item in enumerate(value):
            out += _item_problems(f"{where}[{i}]", item, key, kind)
    elif t.json == "map" and t.item is not None:
        for name, item in value.items():
            if key.choices and name not in key.choices:
                out.append(f"{where}: key {name!r} is none of its choices")
            out += _item_problems(f"{where}.{name}", item, key, kind)
    return out


def _item_problems(where: str, item: Any, key: Key, kind: str | None) -> list[str]:
    """One element of a list, or one value of a map, declared by ``key``."""
    assert key.type.item is not None
    if item is None or not key.type.item.holds(item):
        return [f"{where}: {type(item).__name__} {item!r:.60}, declared {key.type.item.label}"]
    if key.fields:
        return _object_problems(where, item, key.fields, kind)
    return []


def _seen(path: str, value: Any, key: Key, kind: str | None) -> set[str]:
    out = {path}
    if not key.fields or value is None:
        return out
    if isinstance(value, dict):
        objects = list(value.values()) if key.type.json == "map" else [value]
    else:
        objects = list(value) if isinstance(value, list) else []
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        for field in key.fields:
            if field.name in obj and _applies(field, kind):
                out |= _seen(f"{path}.{field.name}", obj[field.name], field, kind)
    return out


def _declared(path: str, key: Key, unseen: str) -> Iterator[tuple[str, str]]:
    why = key.unseen or unseen
    yield path, why
    for field in key.fields:
        yield from _declared(f"{path}.{field.name}", field, why)
