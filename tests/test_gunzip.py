"""The bounded gunzip that trace files and uploads are both inflated through."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from ingest import TraceInputError
from ingest.byte_source import iter_bytes
from ingest.gunzip import BoundedGunzip, GzipProblem, GzipTooLarge


def _inflate(data: bytes, limit: int = 1 << 20, step: int = 1024, piece: int = 7) -> bytes:
    """Feed ``data`` in small pieces, as a network stream arrives."""
    g = BoundedGunzip(limit, step=step)
    out = b"".join(b for i in range(0, len(data), piece) for b in g.feed(data[i : i + piece]))
    g.finish()
    return out


def test_members_in_a_row_and_zero_padding_after_the_last() -> None:
    data = gzip.compress(b'{"a": 1,') + gzip.compress(b' "b": 2}') + b"\x00" * 100
    assert _inflate(data) == b'{"a": 1, "b": 2}'


def test_output_comes_in_bounded_steps_and_stops_at_the_cap() -> None:
    bomb = gzip.compress(b" " * 200_000)
    g = BoundedGunzip(100_000, step=4096)
    seen = 0
    with pytest.raises(GzipTooLarge) as exc:
        for out in g.feed(bomb):
            assert len(out) <= 4096
            seen += len(out)
    assert seen <= 100_000 and exc.value.limit == 100_000
    assert exc.value.problem == "decompresses to more than 100,000 bytes"


def test_truncated_and_damaged_input_are_refused() -> None:
    data = gzip.compress(b"x" * 10_000)
    with pytest.raises(GzipProblem, match="truncated gzip file"):
        _inflate(data[: len(data) // 2])
    damaged = data[:10] + bytes(b ^ 0xFF for b in data[10:20]) + data[20:]
    with pytest.raises(GzipProblem, match="damaged gzip data"):
        _inflate(damaged)


def test_a_trace_file_names_itself_and_the_setting_when_over_the_cap(tmp_path: Path) -> None:
    p = tmp_path / "big.json.gz"
    p.write_bytes(gzip.compress(b" " * 50_000))
    with pytest.raises(TraceInputError) as exc:
        list(iter_bytes(p, chunk_size=1024, max_decompressed=10_000))
    assert str(exc.value).startswith(f"{p}: decompresses to more than 10,000 bytes; refusing")
    assert "TRACELENS_MAX_DECOMPRESSED_BYTES" in str(exc.value)
