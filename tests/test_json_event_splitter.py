"""The event-array splitter must hand over exactly the events json.loads would see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.chrome.event_splitter import BlobParseError, EventArraySplitter, EventBlob
from ingest.errors import TraceInputError


def _split(text: bytes, chunk: int, speculative: bool, parts: int = 2) -> tuple[list, dict]:
    events: list = []

    def parse(blobs: list[EventBlob]) -> None:
        parsed = []
        for b in blobs:
            try:
                value = json.loads(b.data)
            except ValueError as exc:
                raise BlobParseError(str(exc)) from None
            if not isinstance(value, list):
                raise BlobParseError("not an array")
            parsed.extend(value)
        events.extend(parsed)

    sp = EventArraySplitter(Path("t.json"), speculative=speculative, parts=parts)
    chunks = [text[i : i + chunk] for i in range(0, len(text), chunk)]
    sp.split(chunks, parse)
    return events, sp.result.metadata


TRICKY_NAMES = [
    "plain",
    'quote " inside',
    "brace }, { inside",
    "backslash \\ end\\",
    'escaped \\" quote}, {"ph": "X"}',
    "lambda()#1}, {lambda()#2}",
    "unicode µs → ✓",
    "]} ], [ {",
]


def _doc(events: list[dict], pretty: bool, bare: bool = False) -> bytes:
    if bare:
        return json.dumps(events, indent=2 if pretty else None).encode()
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "GPU }, {"}],
        "traceEvents": events,
        "traceName": "x",
        "tail": [{"a": "}, {"}, {"b": [1, 2]}],
    }
    return json.dumps(doc, indent=2 if pretty else None, ensure_ascii=False).encode()


def _events(n: int) -> list[dict]:
    return [
        {
            "ph": "X",
            "cat": "kernel",
            "name": TRICKY_NAMES[i % len(TRICKY_NAMES)],
            "ts": 1000 + i,
            "dur": 1.5,
            "args": {"grid": [1, 2, 3], "nested": {"x": [{"y": "}, {"}]}},
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("chunk", [1, 7, 64, 333, 4096, 1 << 20])
@pytest.mark.parametrize("speculative", [True, False])
@pytest.mark.parametrize("pretty", [True, False])
def test_split_matches_json_loads(chunk: int, speculative: bool, pretty: bool) -> None:
    events = _events(150)
    text = _doc(events, pretty)
    got, meta = _split(text, chunk, speculative)
    assert got == events
    expected_meta = json.loads(text)
    expected_meta.pop("traceEvents")
    assert meta == expected_meta


@pytest.mark.parametrize("chunk", [5, 100, 1 << 20])
def test_bare_array(chunk: int) -> None:
    events = _events(40)
    got, meta = _split(_doc(events, pretty=True, bare=True), chunk, speculative=True)
    assert got == events
    assert meta == {}


def test_empty_event_array() -> None:
    got, meta = _split(b'{"traceEvents": [], "x": 1}', 3, True)
    assert got == [] and meta == {"x": 1}


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.sampled_from(list('ab"\\{}[],: \n\tµ')), max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.text(alphabet=st.sampled_from(list('k"\\}{, ')), max_size=5), inner, max_size=3
        )
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(st.dictionaries(st.text(max_size=6), json_values, max_size=4), max_size=12),
    chunk=st.integers(min_value=1, max_value=200),
    parts=st.integers(min_value=1, max_value=3),
    pretty=st.booleans(),
)
def test_split_property(events: list[dict], chunk: int, parts: int, pretty: bool) -> None:
    text = _doc(events, pretty)
    got, _ = _split(text, chunk, speculative=True, parts=parts)
    assert got == json.loads(text)["traceEvents"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"", "empty file"),
        (b"   \n", "empty file"),
        (b"hello", "not JSON"),
        (b'{"traceEvents": [{"ph": "X"}', "truncated"),
        (b'{"traceEvents": [{"ph": "X"}]', "truncated"),
        (b'{"other": 1}', 'no "traceEvents"'),
        (b'{"traceEvents": [[1, 2]]}', "array where an event object belongs"),
        (b'{"traceEvents": [1, 2]}', "non-object value"),
        (b'{"traceEvents": []}}', "unbalanced"),
        (b'[{"ph": "X"}] trailing', "unexpected data"),
    ],
)
def test_malformed_structure(text: bytes, message: str) -> None:
    with pytest.raises(TraceInputError, match=message):
        _split(text, 4, speculative=True)


def test_huge_single_event_is_refused() -> None:
    big = b'{"traceEvents": [{"name": "' + b"x" * 5000 + b'"}]}'
    sp = EventArraySplitter(Path("big.json"), max_event_bytes=1000)
    with pytest.raises(TraceInputError, match="larger than 1,000 bytes"):
        sp.split([big[i : i + 100] for i in range(0, len(big), 100)], lambda blobs: None)
