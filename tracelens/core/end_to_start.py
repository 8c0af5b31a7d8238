"""Whether the trace's runtime records queued kernels end to start, 0-1 ns apart.

A GPU takes about a microsecond or more to switch from one kernel to the next, and CUDA's
traces show it (the corpus's NVIDIA traces: thousands of gaps between 2 ns and 2 µs, a
few at 0-1 ns). ROCm's traces record a kernel queued behind another as starting when the
one before it ended: the MI300X Qwen trace, eager, has 1,458 of its 1,515 same-stream
gaps at 0 or 1 ns and none between 2 ns and 2 µs, as do the vLLM and SGLang replays. The
switch, and any short wait, is then inside the kernels' durations: busy % is an upper
bound, and a run of 1 ns gaps is the recording, not the GPU's own switch.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import workload_of

# At least this many same-stream pairs, most 0-1 ns apart and almost none in the range a
# measured kernel switch falls in, before the timestamps are called synthetic.
_MIN_PAIRS = 20
_MEASURED_SWITCH_NS = (2, 2_000)

_GAPS = f"""
WITH g AS (
    SELECT start_ns - lag(end_ns) OVER (PARTITION BY device_id, stream_id ORDER BY start_ns)
           AS gap
    FROM kernels
)
SELECT count(gap), count(gap) FILTER (WHERE gap BETWEEN 0 AND 1),
       count(gap) FILTER (WHERE gap BETWEEN {_MEASURED_SWITCH_NS[0]} AND
                                            {_MEASURED_SWITCH_NS[1]})
FROM g
"""


@dataclass(frozen=True)
class EndToStart:
    pairs: int  # consecutive kernels on one stream
    touching: int  # of them recorded 0-1 ns apart


def end_to_start(db: TraceDB) -> EndToStart | None:
    """The counts where an AMD GPU's queued kernels are recorded end to start (most
    same-stream gaps 0-1 ns, under 5 % of those as many 2 ns-2 µs apart); None where gaps
    are measured, or on another vendor's GPU: CUDA's traces measure the switch, and a
    generated trace whose kernels touch is not that runtime's recording."""

    def compute() -> EndToStart | None:
        if not workload_of(db).amd:
            return None
        pairs, touching, switch = (int(x or 0) for x in db.rows(_GAPS)[0])
        if pairs < _MIN_PAIRS or 2 * touching < pairs or 20 * switch > touching:
            return None
        return EndToStart(pairs, touching)

    return db.memo("end_to_start", compute)
