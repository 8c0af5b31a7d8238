"""Times written with any number of decimals are stored as the same whole nanoseconds.

The stored meaning of a time is its text rounded half away from zero to six decimals of a
microsecond, then to whole nanoseconds. Times with more than six decimals are read a faster
way that must agree everywhere, including the rows where rounding a 17th or later digit
lands exactly on a half; the expected values here come from Python's decimal module.
"""

from __future__ import annotations

import random
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from ingest import load_trace


def _ns(text: str) -> int:
    us6 = Decimal(text).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)
    return int((us6 * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _times(rng: random.Random, decimals: int, count: int) -> list[str]:
    out = []
    for _ in range(count):
        whole = rng.choice([0, 7, 1_712_000_000_000_000 + rng.randrange(10**9)])
        # "...499" then a half or just under: where rounding to 6 decides the nanosecond
        near = f"{rng.randrange(1000):03d}499"
        shape = rng.random()
        if shape < 0.25:  # 4 then nines: rounding at 16 places makes it a half
            text = near + "4" + "9" * (decimals - 7)
        elif shape < 0.4:  # exactly a half at six places
            text = near + "5" + "0" * (decimals - 7)
        else:
            text = "".join(str(rng.randrange(10)) for _ in range(decimals))
        out.append(f"{whole}.{text}")
    return out


def _write(path: Path, starts: list[str], durs: list[str]) -> None:
    events = [
        f'{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": {ts}, '
        f'"dur": {dur}, "args": {{"device": 0, "stream": 7, "correlation": {i}}}}}'
        for i, (ts, dur) in enumerate(zip(starts, durs, strict=True))
    ]
    path.write_text('{"traceEvents": [\n' + ",\n".join(events) + "\n]}")


@pytest.mark.parametrize("decimals", [3, 7, 9, 16, 17, 22])
def test_kernel_times_match_decimal_rounding(tmp_path: Path, decimals: int) -> None:
    rng = random.Random(decimals)
    if decimals <= 6:
        starts = [f"{rng.randrange(10**16)}.{rng.randrange(10**decimals):0{decimals}d}"] * 10
        durs = [f"{rng.randrange(10**4)}.{rng.randrange(10**decimals):0{decimals}d}"] * 10
    else:
        starts, durs = _times(rng, decimals, 3000), _times(rng, decimals, 3000)
    path = tmp_path / "t.json"
    _write(path, starts, durs)
    loaded = load_trace(path)
    try:
        rows = loaded.con.execute(
            "SELECT correlation_id, start_ns, end_ns FROM kernels ORDER BY correlation_id"
        ).fetchall()
    finally:
        loaded.close()
    assert len(rows) == len(starts)
    wrong = [
        (starts[i], durs[i], start, end)
        for i, start, end in rows
        if (start, end) != (_ns(starts[i]), _ns(starts[i]) + _ns(durs[i]))
    ]
    assert not wrong, f"{len(wrong)} kernels with other times than the text's, e.g. {wrong[:3]}"
