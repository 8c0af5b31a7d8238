"""Graph capture traces: which operators recorded the kernels a CUDA/HIP graph replays.

A graph replay (``cudaGraphLaunch`` / ``hipGraphLaunch``) runs hundreds of kernels from one
call, so the replay trace cannot say which model operator each kernel belongs to. Serving
engines can record the capture itself: vLLM and SGLang write the traces recorded while
their graphs were captured into a ``capture_traces/`` folder beside the trace, with an
``execution_details.json`` listing each capture file with its ``batch_size`` and ``mode``.
In a capture trace every kernel launch call (inside ``…StreamBeginCapture`` /
``…StreamEndCapture``) carries the operator that issued it (its external id) and, on ROCm,
the kernel's name.

This module reads those files into the ``captured_launches`` table of the replay trace's
database: one row per launch, in launch order, with the operator that launched it. The
matching of replayed kernels to these rows is analysis (``tracelens/derived/kernel_ops.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ingest.derive_gaps import GRAPH_LAUNCH_CALLS, LAUNCH_CALLS
from ingest.errors import TraceInputError
from ingest.limits import IngestLimits
from ingest.schema import sql_list

CAPTURE_DIR_NAME = "capture_traces"
DETAILS_FILE = "execution_details.json"

_BEGIN = ("cudaStreamBeginCapture", "cuStreamBeginCapture", "hipStreamBeginCapture")
_END = ("cudaStreamEndCapture", "cuStreamEndCapture", "hipStreamEndCapture")
_TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass(frozen=True)
class CaptureEntry:
    file: Path
    batch_size: int | None
    mode: str | None


def find_capture_dir(trace: Path) -> Path | None:
    """The ``capture_traces/`` folder beside ``trace`` (or inside it, for a folder), if any."""
    base = trace if trace.is_dir() else trace.parent
    d = base / CAPTURE_DIR_NAME
    return d if (d / DETAILS_FILE).is_file() else None


def read_capture_entries(capture_dir: Path) -> list[CaptureEntry]:
    """The capture traces of ``capture_dir``, as its ``execution_details.json`` lists them.

    Without that file, every trace file in the folder is a capture of unknown batch size.
    """
    if not capture_dir.is_dir():
        raise TraceInputError(capture_dir, "capture folder not found")
    details = capture_dir / DETAILS_FILE
    if not details.is_file():
        files = sorted(
            p for p in capture_dir.iterdir() if p.is_file() and p.name.endswith(_TRACE_SUFFIXES)
        )
        if not files:
            raise TraceInputError(capture_dir, f"no {DETAILS_FILE} and no capture traces")
        return [CaptureEntry(p, None, None) for p in files]
    try:
        listed = json.loads(details.read_bytes())
    except (OSError, ValueError) as exc:
        raise TraceInputError(details, f"not readable JSON ({str(exc).splitlines()[0]})") from None
    if isinstance(listed, dict):
        listed = [listed]
    if not isinstance(listed, list) or not listed:
        raise TraceInputError(details, "expected a list of {file, batch_size, mode} entries")
    out = []
    for i, item in enumerate(listed):
        if not isinstance(item, dict) or not isinstance(item.get("file"), str):
            raise TraceInputError(details, f"entry {i} has no 'file'")
        name = Path(item["file"]).name  # only files inside the folder
        path = capture_dir / name
        if not path.is_file():
            raise TraceInputError(details, f"entry {i}: {name} not found in {capture_dir.name}/")
        batch = item.get("batch_size")
        mode = item.get("mode")
        out.append(
            CaptureEntry(
                path,
                batch if isinstance(batch, int) and not isinstance(batch, bool) else None,
                str(mode) if isinstance(mode, str) else None,
            )
        )
    return out


# The calls that launch one kernel: what a capture records for each graph node.
_KERNEL_LAUNCHES = tuple(n for n in LAUNCH_CALLS if n not in GRAPH_LAUNCH_CALLS)

# Launches inside the capture window (the whole trace where no begin/end call is recorded),
# in launch order, each with the innermost operator whose external id the call carries.
_LAUNCHES_SQL = f"""
    WITH win AS (
        SELECT min(start_ns) FILTER (WHERE name IN ({sql_list(_BEGIN)})) AS b,
               max(end_ns) FILTER (WHERE name IN ({sql_list(_END)})) AS e
        FROM api_calls
    ),
    launches AS (
        SELECT a.start_ns, a.correlation_id, a.external_id, a.kernel_name
        FROM api_calls a, win
        WHERE (a.kernel_name IS NOT NULL
               OR a.name IN ({sql_list(_KERNEL_LAUNCHES)}))
          AND (win.b IS NULL OR a.start_ns >= win.b)
          AND (win.e IS NULL OR a.start_ns <= win.e)
    ),
    ops AS (
        -- one operator per external id (the first, should two share it), all from one row
        SELECT external_id, min(op_id) AS op_id,
               arg_min_null(name, op_id) AS op_name,
               arg_min_null(input_shapes, op_id) AS input_shapes,
               arg_min_null(input_types, op_id) AS input_types
        FROM cpu_ops
        WHERE external_id IS NOT NULL AND category <> 'python_function'
        GROUP BY external_id
    ),
    numbered AS (
        SELECT row_number() OVER (ORDER BY l.start_ns, l.correlation_id) AS seq,
               l.kernel_name, o.op_id, o.op_name, o.input_shapes, o.input_types
        FROM launches l LEFT JOIN ops o USING (external_id)
    )
    SELECT seq, kernel_name,
           CASE WHEN op_id IS NOT NULL THEN dense_rank() OVER (ORDER BY op_id) END AS op_seq,
           op_name, input_shapes, input_types, op_id
    FROM numbered ORDER BY seq
"""

# The operators each launching operator called (nested in it on its thread), with their
# recorded inputs, in call order.
_CALLEES_SQL = """
    SELECT p.op_id, c.input_shapes, c.input_types
    FROM cpu_ops p JOIN cpu_ops c
      ON c.pid = p.pid AND c.tid = p.tid AND c.start_ns >= p.start_ns
     AND c.end_ns <= p.end_ns AND c.depth > p.depth
    WHERE p.op_id IN (SELECT UNNEST(?::BIGINT[])) AND c.category <> 'python_function'
      AND c.input_shapes IS NOT NULL
    ORDER BY p.op_id, c.start_ns, c.op_id
"""

# Recorded input types that are no tensor (scalars, lists, optional arguments left out).
_NOT_TENSORS = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "None"})

# Bound on the tensors kept per operator: a layer's weights come early, and a long tail
# of temporaries says nothing more.
_MAX_CALLEE_TENSORS = 64


def _callee_inputs(rows: list[tuple]) -> dict[int, str]:
    """Per launching operator, its callees' distinct tensors as JSON ``[[shape, dtype]...]``."""
    seen: dict[int, dict[tuple, None]] = {}
    for op_id, shapes_text, types_text in rows:
        try:
            shapes, types = json.loads(shapes_text), json.loads(types_text or "[]")
        except ValueError:
            continue
        if not isinstance(shapes, list) or not isinstance(types, list):
            continue
        kept = seen.setdefault(op_id, {})
        for shape, dtype in zip(shapes, types, strict=False):
            if (
                isinstance(shape, list)
                and shape
                and all(isinstance(d, int) for d in shape)
                and isinstance(dtype, str)
                and dtype not in _NOT_TENSORS
                and len(kept) < _MAX_CALLEE_TENSORS
            ):
                kept.setdefault((tuple(shape), dtype), None)
    return {
        op_id: json.dumps([[list(s), d] for s, d in kept], separators=(",", ":"))
        for op_id, kept in seen.items()
        if kept
    }


def load_captures(
    con: duckdb.DuckDBPyConnection, capture_dir: Path, limits: IngestLimits | None = None
) -> list[str]:
    """Fill ``captured_launches`` of ``con`` from ``capture_dir``; returns notes for the report."""
    from ingest.loader import load_trace  # the loader calls this module

    entries = read_capture_entries(capture_dir)
    notes = []
    for capture_id, entry in enumerate(entries):
        cap = load_trace(entry.file, limits=limits, find_captures=False)
        try:
            rows = cap.con.execute(_LAUNCHES_SQL).fetchall()
            op_ids = sorted({r[-1] for r in rows if r[-1] is not None})
            callees = _callee_inputs(cap.con.execute(_CALLEES_SQL, [op_ids]).fetchall())
        finally:
            cap.con.close()
        con.executemany(
            "INSERT INTO captured_launches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    capture_id,
                    entry.file.name,
                    entry.batch_size,
                    entry.mode,
                    *row[:-1],
                    callees.get(row[-1]),
                )
                for row in rows
            ],
        )
        what = ", ".join(
            x
            for x in (
                f"batch size {entry.batch_size}" if entry.batch_size is not None else "",
                f"mode {entry.mode}" if entry.mode else "",
            )
            if x
        )
        notes.append(
            f"graph capture {entry.file.name}: {len(rows):,} kernel launches recorded"
            + (f" ({what})" if what else "")
        )
    return notes
