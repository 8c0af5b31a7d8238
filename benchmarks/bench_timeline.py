"""Timeline speed on a run of about 2 million events: what the run page waits for.

    python benchmarks/bench_timeline.py [--events 2000000] [--width 1500]

Uploads the cached synthetic Kineto trace of ``bench_web.py`` to the app (in-process
ASGI client: routing, validation and JSON encoding included, no network), waits for it
to be ready, then measures sequential requests as the browser makes them:

- new data after a zoom: from the whole trace in by halves towards random points, to a
  1 µs-scale window, and back out;
- new data after a pan: 20 % steps at 100 ms, 10 ms and 1 ms windows;
- the details of a selected event (kernels, operators, runtime calls picked from the
  answers), a name search (substring and regex), and a measured stretch;
- the time to rebuild the timeline tables of the run (part of its ingestion).

Targets (issue: a timeline a performance engineer can work in): new data < 150 ms after
a zoom or pan, details < 50 ms (p95).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The cached large trace, shared with bench_web.py.
from bench_web import _trace


def _summary(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(s), 2),
        "p95_ms": round(s[min(len(s) - 1, round(0.95 * (len(s) - 1)))], 2),
        "max_ms": round(s[-1], 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--width", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    import duckdb
    from litestar.testing import TestClient

    from web.app import create_app
    from web.settings import Settings
    from web.timeline_store import build_timeline_tables

    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    rng = random.Random(args.seed)
    trace = _trace(args.events)
    data_dir = Path(tempfile.mkdtemp(prefix="tracelens-bench-tl-"))
    settings = Settings.from_env(
        data_dir,
        api_tokens=frozenset(),
        redis_url=None,
        database_url=f"sqlite:///{data_dir / 'catalog.sqlite'}",
    )
    out: dict[str, object] = {"events": args.events, "width_px": args.width}
    try:
        with TestClient(create_app(settings, start_worker=True), timeout=600) as client:
            t = time.perf_counter()
            with trace.open("rb") as f:
                r = client.post("/api/runs", files={"file": (trace.name, f, "application/gzip")})
            run_id = r.json()["id"]
            while (run := client.get(f"/api/runs/{run_id}").json())["status"] not in (
                "ready",
                "failed",
            ):
                time.sleep(0.5)
            assert run["status"] == "ready", run["error"]
            out["ingest_s"] = round(time.perf_counter() - t, 1)
            api = f"/api/runs/{run_id}/timeline"

            def get(url: str) -> tuple[float, dict]:
                t = time.perf_counter()
                resp = client.get(url)
                resp.raise_for_status()
                return 1000 * (time.perf_counter() - t), resp.json()

            def window(s: float, e: float) -> tuple[float, dict]:
                return get(f"{api}?start_ns={int(s)}&end_ns={int(e)}&width_px={args.width}")

            _, full = window(0, 2**62)
            get(f"{api}?width_px={args.width}")  # the first answer opens the database
            span = full["span_ns"]
            events: list[tuple[str, int]] = []

            def collect(answer: dict) -> None:
                for lane in answer["lanes"]:
                    for ev in lane["events"][:20]:
                        events.append((answer["kinds"][ev[3]], ev[4]))

            zoom_ms: list[float] = []
            for _ in range(6):
                s, e = 0.0, float(span)
                c = rng.uniform(0, span)
                while e - s > 2000:
                    w = (e - s) / 2
                    s, e = c - (c - s) / 2, c - (c - s) / 2 + w
                    ms, answer = window(max(0, s), min(span, e))
                    zoom_ms.append(ms)
                    collect(answer)
                while e - s < span:
                    w = (e - s) * 2
                    s, e = c - (c - s) * 2, c - (c - s) * 2 + w
                    zoom_ms.append(window(max(0, s), min(span, e))[0])
            out["zoom"] = _summary(zoom_ms)

            for width_ns in (100_000_000, 10_000_000, 1_000_000):
                pan_ms = []
                s = rng.uniform(0, span - 10 * width_ns)
                for _ in range(25):
                    s += 0.2 * width_ns
                    ms, answer = window(s, s + width_ns)
                    pan_ms.append(ms)
                    collect(answer)
                out[f"pan_{width_ns // 1_000_000}ms"] = _summary(pan_ms)

            by_kind: dict[str, list[int]] = {}
            for kind, ref in events:
                by_kind.setdefault(kind, []).append(ref)
            details: dict[str, dict[str, float]] = {}
            for kind, refs in sorted(by_kind.items()):
                picks = rng.sample(refs, min(30, len(refs)))
                details[kind] = _summary(
                    [get(f"{api}/event?kind={kind}&ref={r}")[0] for r in picks]
                )
            out["details"] = details
            out["search_substring"] = _summary([get(f"{api}/search?q=gemm")[0] for _ in range(5)])
            out["search_regex"] = _summary(
                [get(f"{api}/search?regex=true&q=%5Eaten%3A%3A(add)%3Fmm%24")[0] for _ in range(5)]
            )
            stretch = []
            for _ in range(10):
                s = rng.uniform(0, span - 10_000_000)
                stretch.append(
                    get(f"{api}/range?start_ns={int(s)}&end_ns={int(s) + 10_000_000}")[0]
                )
            out["stretch_10ms"] = _summary(stretch)
            out["answer_kb_full_zoom_out"] = round(
                len(client.get(f"{api}?width_px={args.width}").content) / 1024, 1
            )

        db = next((data_dir / "runs" / run_id).glob("*.duckdb"))
        copy = data_dir / "copy.duckdb"
        shutil.copy(db, copy)
        con = duckdb.connect(str(copy))
        t = time.perf_counter()
        build_timeline_tables(con)
        out["timeline_build_s"] = round(time.perf_counter() - t, 2)
        con.close()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
