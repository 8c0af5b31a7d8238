"""Ingest throughput of the scale-out mode with 1 and 2 ``tracelens worker`` processes.

    python benchmarks/bench_queue.py [--traces 8] [--events 200000] [--workers 1,2]
                                     [--redis redis://127.0.0.1:6379/0] [--catalog URL]

Writes (once, cached) ``--traces`` distinct synthetic Kineto traces of about ``--events``
events each, then for each worker count: a fresh data directory and queue, ``tracelens
serve`` with ``TRACELENS_QUEUE_URL``, every trace uploaded while no worker runs (so all
wait on the queue), then the workers started (one job at a time each) and timed until
every run is ready. Prints traces/s and MB/s (compressed upload bytes) per worker count
and the ratio to one worker. The catalog is a SQLite file unless ``--catalog`` names one
(PostgreSQL, as a fleet runs it).

On one machine the workers share its cores and disk: the ratio says how far a second
process scales on the cores there are (on a 2-core machine, at most 2x minus the web
process and Redis); across machines each worker brings its own cores and the shared
storage's bandwidth becomes the bound (docs/architecture.md, "Scaling model").
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from contextlib import suppress
from importlib.metadata import entry_points
from pathlib import Path

CACHE = Path(tempfile.gettempdir()) / "tracelens-bench"


def _traces(count: int, events: int) -> list[Path]:
    from tracelens.testing.chrome_writer import write_events
    from tracelens.testing.large_trace import iter_large_events

    CACHE.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(count):
        path = CACHE / f"queue-{events}-{i}.pt.trace.json.gz"
        if not path.exists():
            header = {
                "schemaVersion": 1,
                "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "numSms": 108}],
                "distributedInfo": {"backend": "nccl", "rank": i, "world_size": count},
            }
            tmp = path.with_suffix(".tmp.gz")
            with gzip.open(tmp, "wt", encoding="utf-8") as f:
                write_events(f, iter_large_events(events, seed=1000 + i), header)
            tmp.rename(path)
        out.append(path)
    return out


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker_cmd() -> list[str]:
    if list(entry_points(group="tracelens.commands", name="worker")):
        return [sys.executable, "-m", "tracelens.cli", "worker"]
    return [
        sys.executable,
        "-c",
        "from web.cli import worker; worker(prog_name='tracelens worker')",
    ]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def _upload(base: str, path: Path) -> str:
    import httpx

    with httpx.Client(base_url=base, timeout=120) as c:
        r = c.post("/api/runs", files={"file": (path.name, path.read_bytes())})
        r.raise_for_status()
        return str(r.json()["id"])


def _measure(traces: list[Path], workers: int, redis: str, catalog: str | None) -> dict:
    root = Path(tempfile.mkdtemp(prefix="tracelens-bench-queue-"))
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELENS_")}
    env.update(
        TRACELENS_QUEUE_URL=redis,
        TRACELENS_QUEUE_NAME=queue,
        TRACELENS_DATABASE_URL=catalog or f"sqlite:///{root / 'catalog.sqlite'}",
        TRACELENS_QUEUE_MAX_DEPTH=str(len(traces) + 10),
    )
    procs: list[subprocess.Popen[bytes]] = []
    log = (root / "log.txt").open("ab")
    try:
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "tracelens.cli", "serve", "--port", str(port)]
        procs.append(
            subprocess.Popen(
                [*cmd, "--data-dir", str(root / "data")], env=env, stdout=log, stderr=log
            )
        )
        deadline = time.monotonic() + 60
        while True:
            with suppress(OSError):
                _get(f"{base}/api/health")
                break
            if time.monotonic() > deadline:
                raise SystemExit("tracelens serve did not start")
            time.sleep(0.2)
        ids = [_upload(base, p) for p in traces]
        t0 = time.perf_counter()
        for i in range(workers):
            wcmd = [*_worker_cmd(), "--data-dir", str(root / "data"), "--concurrency", "1"]
            procs.append(
                subprocess.Popen([*wcmd, "--name", f"bench-{i}"], env=env, stdout=log, stderr=log)
            )
        while True:
            runs = [_get(f"{base}/api/runs/{i}") for i in ids]
            if all(r["status"] in ("ready", "failed") for r in runs):
                break
            dead = [p for p in procs if p.poll() is not None]
            if dead:
                log.flush()
                tail = (root / "log.txt").read_text(errors="replace")[-2000:]
                raise SystemExit(f"a process of the benchmark exited:\n{tail}")
            time.sleep(0.2)
        wall = time.perf_counter() - t0
        failed = [r["error"] for r in runs if r["status"] != "ready"]
        if failed:
            raise SystemExit(f"runs failed: {failed[:3]}")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        log.close()
        _drop_queue(redis, queue)
        shutil.rmtree(root, ignore_errors=True)
    mb = sum(p.stat().st_size for p in traces) / 1e6
    return {
        "workers": workers,
        "traces": len(traces),
        "seconds": round(wall, 2),
        "traces_per_s": round(len(traces) / wall, 3),
        "mb_per_s": round(mb / wall, 2),
    }


def _drop_queue(url: str, name: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        for pattern in (f"saq:{name}:*", f"saq:job:{name}:*"):
            keys = list(client.scan_iter(match=pattern, count=500))
            if keys:
                client.delete(*keys)
    finally:
        client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=8)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--catalog", default=None, help="catalog URL (default: a SQLite file)")
    args = ap.parse_args()
    traces = _traces(args.traces, args.events)
    mb = sum(p.stat().st_size for p in traces) / 1e6
    print(f"{len(traces)} traces of ~{args.events:,} events, {mb:.1f} MB compressed in all")
    results = [_measure(traces, int(w), args.redis, args.catalog) for w in args.workers.split(",")]
    base = results[0]["traces_per_s"]
    for r in results:
        r["vs_first"] = round(r["traces_per_s"] / base, 2)
        print(
            f"workers={r['workers']}: {r['seconds']:.1f} s, {r['traces_per_s']:.2f} traces/s, "
            f"{r['mb_per_s']:.1f} MB/s, {r['vs_first']:.2f}x the first"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
