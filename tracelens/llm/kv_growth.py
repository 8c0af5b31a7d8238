"""Does a decode step get slower as the requests in it generate more tokens (KV-cache growth)?

Each decode step's duration is fitted, by least squares, to

    duration = a + b * batch_size + c * cached_tokens

where ``cached_tokens`` is the sum, over the requests in the step, of the tokens each has
already generated (its token index - 1; the prompt is not in the trace, and a constant
per-request prompt length is absorbed by ``b``). ``c`` is the time each generated token in
the KV cache adds to a step: attention reads the whole cache, and a cache grown by
concatenation is copied every step. The growth cost is ``c * cached_tokens`` summed over
decode steps. The fit runs on one row per decode step (not per event), with numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracelens.core.tracedb import TraceDB
from tracelens.derived import require
from tracelens.derived.llm_annotations import LLM_STEPS, LLM_TOKENS
from tracelens.llm.model import KvGrowth, KvStep

if TYPE_CHECKING:
    import numpy as np

STEPS_SQL = """
SELECT s.step_id, s.end_ns - s.start_ns AS dur_ns, s.n_requests,
       sum(t.token_index - 1) AS cached_tokens
FROM llm_steps s JOIN llm_tokens t USING (step_id)
WHERE s.kind = 'decode'
GROUP BY s.step_id, s.start_ns, s.end_ns, s.n_requests
ORDER BY s.start_ns
"""


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else 0.0


def kv_growth(db: TraceDB, min_steps: int) -> KvGrowth | None:
    """The fit and the growth cost, or None with fewer than ``min_steps`` decode steps."""
    require(db, LLM_STEPS, LLM_TOKENS)
    rows = db.rows(STEPS_SQL)
    if not rows or len(rows) < min_steps:  # no fit without a step, whatever the threshold
        return None
    # numpy only here: a trace without decode steps never imports it
    import numpy as np

    arr = np.array([[r[1], r[2], r[3]] for r in rows], dtype=float)
    y, batch, cached = arr[:, 0], arr[:, 1], arr[:, 2]
    ones = np.ones_like(y)
    full = np.column_stack([ones, batch, cached])
    coef, *_ = np.linalg.lstsq(full, y, rcond=None)
    base = np.column_stack([ones, batch])
    base_coef, *_ = np.linalg.lstsq(base, y, rcond=None)
    per_token_ns = float(coef[2])
    growth_ns = max(0.0, per_token_ns) * float(cached.sum())
    total_ns = float(y.sum())
    first, last = rows[0], rows[-1]
    return KvGrowth(
        decode_steps=len(rows),
        ns_per_cached_token=per_token_ns,
        ns_per_batch_request=float(coef[1]),
        r2=_r2(y, full @ coef),
        r2_without_cache_term=_r2(y, base @ base_coef),
        growth_ns=round(growth_ns),
        decode_ns=int(total_ns),
        growth_pct_of_decode=100.0 * growth_ns / total_ns if total_ns else 0.0,
        first_step=KvStep(dur_ns=int(first[1]), batch=int(first[2]), cached=int(first[3])),
        last_step=KvStep(dur_ns=int(last[1]), batch=int(last[2]), cached=int(last[3])),
        max_cached_tokens=int(cached.max()),
    )
