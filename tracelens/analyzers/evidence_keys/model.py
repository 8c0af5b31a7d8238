"""What an evidence declaration is: a key's type and unit, its meaning, and when it is there.

A finding's ``evidence`` is a JSON object whose keys depend on its analyzer and, where an
analyzer reports different problems, on the kind of finding. :class:`AnalyzerEvidence`
declares them for one analyzer: the keys every finding has, and per :class:`Kind` the keys
that kind adds. Each :class:`Key` says its type (:class:`Type`: JSON type and unit), what it
means, when it is present or null, and, for objects and lists of objects, its inner fields.
``docs/json-schema.md`` is generated from these declarations, and the tests check every
finding of the planted and corpus traces against them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

JsonType = Literal["int", "number", "string", "bool", "list", "object", "map"]

# What a value of each JSON type is in ``Finding.evidence`` (bool is an int in Python, and
# never what an int or number key holds).
_PYTHON: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "number": (int, float),
    "string": (str,),
    "bool": (bool,),
    "list": (list,),
    "object": (dict,),
    "map": (dict,),
}


@dataclass(frozen=True)
class Type:
    """A value's JSON type and unit, as the document shows it and the tests check it.

    ``map`` is an object whose keys are names drawn from a set (gap causes, objectives)
    rather than fixed fields: ``key`` says what they name, ``item`` what each value is.
    For a list, ``item`` is what each element is.
    """

    json: JsonType
    unit: str = ""
    item: Type | None = None
    key: str = ""

    @property
    def label(self) -> str:
        if self.json == "list" and self.item is not None:
            return f"list of {self.item.plural}"
        if self.json == "map" and self.item is not None:
            return f"object: {self.key} → {self.item.label}"
        return f"{self.json}, {self.unit}" if self.unit else self.json

    @property
    def plural(self) -> str:
        names = {"int": "ints", "number": "numbers", "string": "strings", "object": "objects"}
        return names.get(self.json, self.label)

    def holds(self, value: object) -> bool:
        """Whether ``value`` (not None) is of this type, one level deep."""
        if isinstance(value, bool) and self.json != "bool":
            return False
        return isinstance(value, _PYTHON[self.json])


NS = Type("int", "ns")
NS_FRACTIONAL = Type("number", "ns")  # a mean, median or fit: not a whole nanosecond
BYTES = Type("int", "bytes")
COUNT = Type("int")
PCT = Type("number", "%")  # a share, 0 to 100
NUMBER = Type("number")
TEXT = Type("string")
FLAG = Type("bool")
GBPS = Type("number", "GB/s")
TFLOPS = Type("number", "TFLOP/s")
OBJECT = Type("object")
ROWS = Type("list", item=OBJECT)
TEXTS = Type("list", item=TEXT)
INTS = Type("list", item=COUNT)


def map_of(key: str, value: Type) -> Type:
    """An object keyed by names (``key`` says what they name), each value a ``value``."""
    return Type("map", item=value, key=key)


@dataclass(frozen=True)
class Key:
    """One evidence key (or an inner field of one).

    ``when`` and ``null`` are clauses completing "present only when ..." and "null
    when ...": a key without ``when`` is in every finding it applies to, one without
    ``null`` is never null. ``only`` narrows a key of every finding of an analyzer to the
    findings of some of its kinds (or an inner field to those findings' objects).
    ``fields`` are the inner fields of an object, of each object of a list, or of each
    value of a map. ``choices`` are the values a string takes, or the keys a map may have.
    ``unseen`` says why no planted or corpus trace shows the key: the tests require every
    other declared key to appear in at least one finding, and these never to.
    """

    name: str
    type: Type
    description: str
    when: str = ""
    null: str = ""
    only: tuple[str, ...] = ()
    fields: tuple[Key, ...] = ()
    choices: tuple[str, ...] = ()
    unseen: str = ""


@dataclass(frozen=True)
class Kind:
    """One kind of finding of an analyzer, told apart by an evidence key.

    ``tell`` is the key only this kind has, or, with ``tell_value``, the key whose value
    names the kind (where the kinds share the key). ``name`` is the kind's name in the
    finding's subject (what its id is a hash of) where the subject names it.
    """

    name: str
    description: str
    tell: str
    tell_value: str | None = None
    keys: tuple[Key, ...] = ()
    unseen: str = ""

    def matches(self, evidence: Mapping[str, Any]) -> bool:
        if self.tell not in evidence:
            return False
        return self.tell_value is None or evidence[self.tell] == self.tell_value


@dataclass(frozen=True)
class AnalyzerEvidence:
    """The evidence of one analyzer's findings: keys of every finding, and per kind."""

    analyzer: str
    description: str
    keys: tuple[Key, ...] = ()
    kinds: tuple[Kind, ...] = ()

    def kinds_of(self, evidence: Mapping[str, Any]) -> list[Kind]:
        """The declared kinds this evidence matches (exactly one when it is declared right)."""
        return [k for k in self.kinds if k.matches(evidence)]

    def keys_of(self, kind: Kind | None) -> tuple[Key, ...]:
        """The keys a finding of ``kind`` may hold: the analyzer's that apply to it, then
        the kind's own."""
        name = kind.name if kind is not None else None
        shared = tuple(k for k in self.keys if not k.only or name in k.only)
        return shared + (kind.keys if kind is not None else ())
