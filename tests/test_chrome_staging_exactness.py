"""Staging's shortcuts store exactly what the plain expressions stored, on odd inputs too.

Times become nanoseconds through an offset from a whole microsecond near each blob's times
(64-bit arithmetic instead of DuckDB's 128-bit division) wherever that is exact, and the
plain ``CAST(ts * 1000 AS BIGINT)`` elsewhere. Here kernel times are compared with that
plain cast of the same text by DuckDB's JSON reader: times before and far after the base,
negative, zero, half-way ties at every decimal, written as strings, booleans and exponents.
Longer decimals (the precise read) are compared with Python's decimal rounding. The memory
pass runs only where staging saw memory rows: memory instants are all stored, and a
``"[memory]"`` elsewhere in the text stores nothing.
"""

from __future__ import annotations

import json
import random
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import duckdb

from ingest import load_trace

EPOCH_US = 1_712_000_000_000_000


def _kernel(i: int, ts: str, dur: str, name: str | None = None) -> str:
    return (
        f'{{"ph": "X", "cat": "kernel", "name": "{name or f"k{i}"}", "pid": 0, "tid": 7, '
        f'"ts": {ts}, "dur": {dur}, "args": {{"device": 0, "stream": 7, "correlation": {i}}}}}'
    )


def _odd_times(rng: random.Random, count: int) -> list[tuple[str, str]]:
    """(ts, dur) JSON texts of at most six decimals, of every shape the reader accepts."""
    out = []
    for _ in range(count):
        whole = rng.choice(
            [
                EPOCH_US + rng.randrange(10**9),  # near the base
                EPOCH_US - 10**10 - rng.randrange(10**12),  # before it
                EPOCH_US + 10**11 + rng.randrange(10**12),  # far after it
                rng.randrange(10**6),
                0,
            ]
        )
        frac = rng.choice(
            [
                f"{rng.randrange(10**6):06d}",
                f"{rng.randrange(1000):03d}5",  # a half-way tie at the nanosecond
                f"{rng.randrange(1000):03d}500",
                f"{rng.randrange(1000):03d}4999",
                "9995",
                "0005",
                str(rng.randrange(10)),
            ]
        )
        sign = "-" if rng.random() < 0.1 else ""
        ts = f"{sign}{whole}.{frac}"
        dur = rng.choice(
            [
                f"{rng.randrange(10**4)}.{rng.randrange(1000):03d}5",
                f"{rng.randrange(10**13)}.{rng.randrange(10**6):06d}",  # longer than the range
                str(rng.randrange(100)),
                f"-{rng.randrange(10)}.5",
            ]
        )
        shape = rng.random()
        if shape < 0.05:
            ts = f'"{ts}"'  # a string
        elif shape < 0.08:
            ts = f"{whole / 10**15:.15f}e15" if whole else "0e0"  # an exponent
        elif shape < 0.1:
            ts = rng.choice(["true", "false"])
        if rng.random() < 0.05:
            dur = f'"{dur}"'
        out.append((ts, dur))
    return out


def _plain_cast(path: Path, times: list[tuple[str, str]]) -> dict[int, tuple[int, int]]:
    """{i: (start_ns, end_ns)} as the plain cast reads the texts, for the stored kernels."""
    path.write_text(
        "["
        + ",\n".join(f'{{"i": {i}, "ts": {t}, "dur": {d}}}' for i, (t, d) in enumerate(times))
        + "]"
    )
    rows = (
        duckdb.connect()
        .execute(
            f"""SELECT i, s, s + d FROM (
              SELECT i, CAST(ts * 1000 AS BIGINT) AS s, CAST(dur * 1000 AS BIGINT) AS d
              FROM read_json('{path}', format = 'array',
                             columns = {{'i': 'BIGINT', 'ts': 'DECIMAL(38,6)',
                                        'dur': 'DECIMAL(38,6)'}}))
            WHERE s IS NOT NULL AND d IS NOT NULL AND d >= 0"""
        )
        .fetchall()
    )
    return {i: (s, e) for i, s, e in rows}


def _kernels(path: Path) -> dict[int, tuple[int, int]]:
    loaded = load_trace(path)
    try:
        rows = loaded.con.execute("SELECT correlation_id, start_ns, end_ns FROM kernels").fetchall()
    finally:
        loaded.close()
    return {i: (s, e) for i, s, e in rows}


def test_odd_times_are_stored_as_the_plain_cast_reads_them(tmp_path: Path) -> None:
    rng = random.Random(7)
    times = _odd_times(rng, 6000)
    # The first events decide the base: near the epoch, as a profiler writes them.
    times[:3] = [(f"{EPOCH_US}.5", "1"), (f"{EPOCH_US + 1}.0005", "2.0005"), ("0", "0")]
    trace = tmp_path / "t.json"
    trace.write_text(
        '{"traceEvents": [\n'
        + ",\n".join(_kernel(i, t, d) for i, (t, d) in enumerate(times))
        + "\n]}"
    )
    expected = _plain_cast(tmp_path / "plain.json", times)
    got = _kernels(trace)
    assert len(expected) > 4000
    wrong = {i: (expected.get(i), got.get(i)) for i in expected.keys() | got.keys()}
    wrong = {i: v for i, v in wrong.items() if v[0] != v[1]}
    assert not wrong, (
        f"{len(wrong)} kernels differ (plain cast, stored), e.g. {list(wrong.items())[:3]}"
    )


def _ns(text: str) -> int:
    us6 = Decimal(text).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)
    return int((us6 * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def test_long_decimals_near_the_base_round_as_decimal_does(tmp_path: Path) -> None:
    rng = random.Random(11)
    times = []
    for _ in range(3000):
        whole = EPOCH_US + rng.choice([0, rng.randrange(10**9), -(10**11), 10**12])
        text = rng.choice(
            [
                f"{rng.randrange(1000):03d}5000",  # a tie at the nanosecond, 7 decimals
                f"{rng.randrange(1000):03d}4999999",
                f"{rng.randrange(1000):03d}499" + "5" + "0" * 6,  # a tie at six decimals
                "".join(str(rng.randrange(10)) for _ in range(rng.choice([7, 9, 16]))),
            ]
        )
        times.append((f"{whole}.{text}", f"{rng.randrange(100)}.{rng.randrange(10**7):07d}"))
    trace = tmp_path / "t.json"
    trace.write_text(
        '{"traceEvents": [\n'
        + ",\n".join(_kernel(i, t, d) for i, (t, d) in enumerate(times))
        + "\n]}"
    )
    got = _kernels(trace)
    wrong = [
        (t, d, got.get(i))
        for i, (t, d) in enumerate(times)
        if got.get(i) != (_ns(t), _ns(t) + _ns(d))
    ]
    assert not wrong, f"{len(wrong)} kernels with other times than the text's, e.g. {wrong[:3]}"


def _memory(i: int, ts: int) -> str:
    return (
        f'{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, '
        f'"tid": 1, "ts": {ts}, "args": {{"Device Type": 1, "Device Id": 0, "Addr": {i}, '
        f'"Bytes": 512, "Total Allocated": {i * 512}, "Total Reserved": 4096}}}}'
    )


def test_memory_events_are_stored_and_memory_text_elsewhere_adds_nothing(
    tmp_path: Path,
) -> None:
    events = [_kernel(i, f"{EPOCH_US + i}.5", "1") for i in range(2000)]
    events[500:500] = [_memory(i, EPOCH_US + i) for i in range(300)]
    # the text alone: a kernel named after it, and memory keys on a kernel
    events.append(_kernel(9999, f"{EPOCH_US}", "1", name="[memory]"))
    trace = tmp_path / "with.json"
    trace.write_text('{"traceEvents": [\n' + ",\n".join(events) + "\n]}")
    without = tmp_path / "without.json"
    without.write_text(
        '{"traceEvents": [\n'
        + ",\n".join([_kernel(0, "1.5", "1", name="[memory]"), _kernel(1, "2", "1")])
        + "\n]}"
    )
    # both spellings of the external id: args staged as JSON, the memory pass decided alike
    legacy = tmp_path / "legacy.json"
    legacy.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "a",
                        "pid": 1,
                        "tid": 1,
                        "ts": 1,
                        "dur": 1,
                        "args": {"External id": 1},
                    },
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "b",
                        "pid": 1,
                        "tid": 1,
                        "ts": 3,
                        "dur": 1,
                        "args": {"external id": 2},
                    },
                    json.loads(_memory(7, 2)),
                ]
            }
        )
    )
    counts = {}
    for path in (trace, without, legacy):
        loaded = load_trace(path)
        try:
            counts[path.name] = loaded.con.execute(
                "SELECT count(*), count(DISTINCT addr) FROM memory_events"
            ).fetchone()
        finally:
            loaded.close()
    assert counts == {"with.json": (300, 300), "without.json": (0, 0), "legacy.json": (1, 1)}
