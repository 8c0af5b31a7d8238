"""A note where a graph replay's kernels are recorded end to start, 1 ns apart (and,
without replays, where queued kernels are: :mod:`tracelens.core.end_to_start`).

Real kernels never follow each other by exactly a nanosecond. ROCm's trace records each
kernel of a graph replay as starting when the one before it ended (vLLM's decode replay
on an MI300X: all 421 gaps between its replayed kernels are 1 ns; SGLang's: all but one of
545): idle time inside a replay is then inside the kernels' durations, not between them.
GPU busy % over the replays is an upper bound, and an unusually slow instance of a kernel
may be such a bubble (SGLang's 149 µs GEMM that takes 21 µs in every other layer). The
report says so once; the graph-stall advice says it of the stall it places.
"""

from __future__ import annotations

from ingest.derive_gaps import GRAPH_LAUNCH_CALLS
from ingest.schema import sql_list
from tracelens.core.end_to_start import end_to_start
from tracelens.core.tracedb import TraceDB

# At least this many consecutive pairs inside replays, nearly all exactly 1 ns (or 0)
# apart, before the timestamps are called synthetic.
_MIN_PAIRS = 20
_SYNTHETIC_SHARE = 0.95

# Consecutive kernels of one graph launch (one correlation id) on one stream, and how
# many of them are at most 1 ns apart.
_REPLAY_GAPS = f"""
WITH replayed AS (
    SELECT k.device_id, k.stream_id, k.correlation_id, k.start_ns, k.end_ns
    FROM kernels k
    WHERE k.correlation_id IN (
        SELECT correlation_id FROM api_calls
        WHERE name IN ({sql_list(GRAPH_LAUNCH_CALLS)}) AND correlation_id IS NOT NULL)
),
pairs AS (
    SELECT start_ns - lag(end_ns) OVER (
               PARTITION BY device_id, stream_id, correlation_id ORDER BY start_ns) AS gap
    FROM replayed
)
SELECT count(gap) AS pairs, count(gap) FILTER (WHERE gap BETWEEN 0 AND 1) AS one_ns,
       (SELECT count(*) FROM replayed) AS kernels
FROM pairs
"""


def replay_gaps_unmeasured_notes(db: TraceDB) -> list[str]:
    if not db.scalar(
        f"SELECT count(*) > 0 FROM api_calls WHERE name IN ({sql_list(GRAPH_LAUNCH_CALLS)})"
    ):
        # eager work on such a runtime: the same recording, said of every queued kernel
        e = end_to_start(db)
        if e is None:
            return []
        return [
            f"{e.touching:,} of the {e.pairs:,} kernels that follow another on its stream "
            "are recorded 0-1 ns after it, and almost none a measured kernel switch apart "
            "(2 ns to 2 µs): this runtime's trace records queued work as starting when the "
            "previous item ends, so the switch between kernels, and any short wait, sits "
            "inside the kernels' durations; busy % is an upper bound"
        ]
    pairs, one_ns, kernels = db.rows(_REPLAY_GAPS)[0]
    if int(pairs or 0) < _MIN_PAIRS or int(one_ns or 0) < _SYNTHETIC_SHARE * int(pairs):
        return []
    return [
        f"the {int(kernels):,} kernels of the graph replays are recorded {int(one_ns):,} of "
        f"{int(pairs):,} times 1 ns after the one before, too regular to be measured: this "
        "runtime's trace records a replayed kernel as starting when the previous one ends, "
        "so idle time inside a replay can sit inside the kernels' durations; busy % over "
        "the replays is an upper bound, and an unusually slow instance of a kernel may be "
        "such a wait"
    ]
