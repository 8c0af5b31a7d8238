"""A rank's extract as JSON, so that ranks analysed apart (by different processes or
machines) can be brought together for :func:`tracelens.ranks.job.job_report`.

The form is the extract's fields as they are, with the rank's report in its stored JSON
form (what every page reads back), so the job report built from extracts read back is
the one built from the extracts in memory.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from tracelens.ranks.extract import Collective, RankExtract, SmallCollectives

EXTRACT_SCHEMA = "tracelens.rank-extract/1"


def extract_to_json(e: RankExtract) -> dict[str, Any]:
    return {
        "schema": EXTRACT_SCHEMA,
        "rank": e.rank,
        "path": str(e.path),
        # through JSON once: tuples become lists and paths text, as read back they will be
        "report": json.loads(json.dumps(e.report, default=str)),
        "collectives": [dataclasses.astuple(c) for c in e.collectives],
        "op_ns": e.op_ns,
        "idle_ns_by_cause": e.idle_ns_by_cause,
        "compute_ns": e.compute_ns,
        "comm_ns": e.comm_ns,
        "exposed_comm_ns": e.exposed_comm_ns,
        "base_time_ns": e.base_time_ns,  # integers: Python's json keeps every digit
        "t0_ns": e.t0_ns,
        "small": None if e.small is None else dataclasses.asdict(e.small),
        "sampled": e.sampled,
    }


def extract_from_json(data: dict[str, Any]) -> RankExtract:
    if data.get("schema") != EXTRACT_SCHEMA:
        raise ValueError(f"not a rank extract of schema {EXTRACT_SCHEMA}: {data.get('schema')!r}")
    small = data["small"]
    return RankExtract(
        rank=int(data["rank"]),
        path=Path(data["path"]),
        report=data["report"],
        collectives=[Collective(*row) for row in data["collectives"]],
        op_ns={str(k): int(v) for k, v in data["op_ns"].items()},
        idle_ns_by_cause={str(k): int(v) for k, v in data["idle_ns_by_cause"].items()},
        compute_ns=int(data["compute_ns"]),
        comm_ns=int(data["comm_ns"]),
        exposed_comm_ns=int(data["exposed_comm_ns"]),
        base_time_ns=None if data["base_time_ns"] is None else int(data["base_time_ns"]),
        t0_ns=None if data["t0_ns"] is None else int(data["t0_ns"]),
        small=None
        if small is None
        else SmallCollectives(**{**small, "kinds": tuple(small["kinds"])}),
        # absent from extracts stored before it was kept: re-ingesting the rank sets it
        sampled=bool(data.get("sampled", False)),
    )
