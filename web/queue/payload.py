"""What an ingest job carries, and its key on the queue.

A job names a run, never a file: the worker reads the run's kept original and writes
its databases under the shared data directory, and the catalog says what the run is.
The key is the job's identity on the queue: SAQ keeps one unfinished job per key, so
enqueueing a run twice (an upload and a recovery pass at once) queues it once.

Kinds, so that a run of several ranks fans out across workers: one ``rank`` job per
rank builds that rank's database, and one ``align`` job, once every rank is done,
aligns their clocks, analyzes the job and publishes it. Both carry the generation the
fan-out claimed, so a job of an older fan-out finds its generation gone and does
nothing. A single trace is one ``run`` job, which claims and publishes by itself.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

# The one function name workers register: the kind inside the payload picks the handler,
# so a new kind needs no change to how jobs are enqueued or run.
JOB_FUNCTION = "ingest"


class JobKind(StrEnum):
    RUN = "run"
    RANK = "rank"
    ALIGN = "align"


class IngestJob(msgspec.Struct, frozen=True, omit_defaults=True):
    kind: JobKind
    run_id: str
    rank: int | None = None
    # The generation a fan-out claimed (rank and align jobs); a run job claims its own.
    generation: int | None = None

    @classmethod
    def for_run(cls, run_id: str) -> IngestJob:
        return cls(kind=JobKind.RUN, run_id=run_id)

    @property
    def key(self) -> str:
        parts = [self.kind.value, self.run_id]
        if self.generation is not None:
            parts.append(f"g{self.generation}")
        if self.rank is not None:
            parts.append(f"r{self.rank}")
        return ":".join(parts)

    def to_kwargs(self) -> dict[str, Any]:
        return {"payload": msgspec.to_builtins(self)}

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> IngestJob:
        return msgspec.convert(kwargs["payload"], cls)
