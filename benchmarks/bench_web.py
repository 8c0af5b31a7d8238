"""Web service speed on a run of at least 2 million events, loaded from a second process.

    python benchmarks/bench_web.py [--events 2000000] [--clients 50] [--seconds 10]
                                   [--processes 1,2] [--pin 0:1]

Writes (once, cached) a synthetic Kineto trace, starts ``tracelens serve`` on loopback
with a throwaway data directory, uploads the trace and waits for it to be ready, then a
separate client process measures:

- timeline API latency p50/p95 at full zoom-out and for random 1 ms windows (sequential
  requests, 1500 px wide, as the browser asks);
- run page and findings API throughput (req/s) and p50/p95 at ``--clients`` concurrent
  connections, for a bounded time: with ``wrk`` when installed (a light C client, so the
  figures measure the server), else an asyncio client; then the same with
  ``If-None-Match`` carrying the answer's ETag, as a returning browser or a polling
  dashboard asks (each answer an empty 304).

``--pin 0:1`` keeps the server on CPU 0 and the load client on CPU 1, so the client's
work does not count as the server's latency.

Targets: timeline p95 < 100 ms; run page p95 < 50 ms at 50 concurrent clients.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CACHE = Path(tempfile.gettempdir()) / "tracelens-bench"
WIDTH_PX = 1500


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _summary(ms: list[float]) -> dict[str, float]:
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(_pct(ms, 0.95), 2),
        "max_ms": round(max(ms), 2),
    }


def _trace(events: int) -> Path:
    from tracelens.testing.large_trace import write_large_trace

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"large-{events}.pt.trace.json.gz"
    if not path.exists():
        t = time.perf_counter()
        tmp = path.with_suffix(".tmp.gz")
        write_large_trace(tmp, events)
        tmp.rename(path)
        mb = path.stat().st_size / 1e6
        print(f"wrote {path.name} ({mb:.0f} MB) in {time.perf_counter() - t:.0f} s")
    return path


# --- the client process -------------------------------------------------------------------


async def _sequential(client, urls: list[str]) -> list[float]:
    out = []
    for url in urls:
        t = time.perf_counter()
        r = await client.get(url)
        r.raise_for_status()
        out.append(1000 * (time.perf_counter() - t))
    return out


async def _concurrent(
    client, url: str, clients: int, seconds: float, headers: dict[str, str]
) -> dict[str, float]:
    lat: list[float] = []
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < stop:
            t = time.perf_counter()
            r = await client.get(url, headers=headers)
            if r.status_code not in (200, 304):
                r.raise_for_status()
            lat.append(1000 * (time.perf_counter() - t))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    wall = time.perf_counter() - t0
    return {**_summary(lat), "req_per_s": round(len(lat) / wall, 1), "client": "asyncio/httpx"}


# wrk prints only 50/75/90/99 %; its ``done`` hook reads any percentile from the full
# latency histogram, so p95 is measured rather than interpolated.
_WRK_REPORT = """
done = function(summary, latency, requests)
  io.write(string.format("tracelens-percentiles %d %d %d\\n",
    latency:percentile(50), latency:percentile(95), latency:percentile(99)))
end
"""


def _wrk(
    url: str, clients: int, seconds: float, cookie: str, headers: dict[str, str]
) -> dict[str, float]:
    # The cookie a browser holds after its first visit (the CSRF cookie): without it every
    # request would mint a new token, which no returning browser causes.
    header = ["-H", f"Cookie: {cookie}"] if cookie else []
    for name, value in headers.items():
        header += ["-H", f"{name}: {value}"]
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(_WRK_REPORT)
        script.flush()
        out = subprocess.run(
            [
                "wrk",
                f"-t{len(os.sched_getaffinity(0))}",
                f"-c{clients}",
                f"-d{int(seconds)}s",
                "-s",
                script.name,
                *header,
                url,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    # microseconds, from the histogram
    p50, p95, p99 = (
        int(v) / 1000 for v in re.search(r"tracelens-percentiles (\d+) (\d+) (\d+)", out).groups()
    )  # type: ignore[union-attr]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "p50_ms": round(p50, 2),
        "p95_ms": round(p95, 2),
        "p99_ms": round(p99, 2),
        "req_per_s": rps,
        "errors": int(non2xx.group(1)) if non2xx else 0,
        "client": "wrk",
    }


async def _client_main(base: str, run_id: str, span: int, clients: int, seconds: float) -> dict:
    import httpx

    rng = random.Random(1)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    results: dict = {}
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        tl = f"/api/runs/{run_id}/timeline"
        await _sequential(client, [f"{tl}?width_px={WIDTH_PX}"] * 5)  # warm caches
        results["timeline_full"] = _summary(
            await _sequential(client, [f"{tl}?width_px={WIDTH_PX}"] * 100)
        )
        windows = []
        for _ in range(200):
            s = rng.randrange(0, max(1, span - 1_000_000))
            windows.append(f"{tl}?start_ns={s}&end_ns={s + 1_000_000}&width_px={WIDTH_PX}")
        results["timeline_1ms"] = _summary(await _sequential(client, windows))
        r = await client.get(f"{tl}?width_px={WIDTH_PX}")
        results["timeline_full_bytes"] = len(r.content)
        await client.get("/")  # as a browser: pick up the CSRF cookie once
        cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
        for name, url in (
            ("run_page", f"/runs/{run_id}"),
            ("findings_api", f"/api/runs/{run_id}/findings"),
        ):
            await _sequential(client, [url] * 5)
            etag = (await client.get(url)).headers.get("etag")
            asks = {name: {}, f"{name}_304": {"If-None-Match": etag} if etag else None}
            for label, headers in asks.items():
                if headers is None:
                    continue
                if shutil.which("wrk"):
                    results[label] = _wrk(base + url, clients, seconds, cookie, headers)
                else:
                    results[label] = await _concurrent(client, url, clients, seconds, headers)
    return results


# --- the driver -----------------------------------------------------------------------------


def _pinned(cpus: set[int] | None):  # type: ignore[no-untyped-def]
    """A ``preexec_fn`` keeping the child (and what it starts) on ``cpus``; None: anywhere."""
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def _start_server(
    port: int, data_dir: str, processes: int, cpus: set[int] | None = None
) -> tuple[subprocess.Popen, object]:
    import httpx

    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELENS_")}
    env["TRACELENS_UPLOAD_RATE"] = "1000"
    log = open(Path(data_dir) / f"serve-{processes}.log", "wb")  # noqa: SIM115
    cmd = [sys.executable, "-m", "tracelens.cli", "serve", "--port", str(port)]
    cmd += ["--data-dir", data_dir, "--processes", str(processes)]
    server = subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_pinned(cpus)
    )
    for _ in range(300):
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.2)
    return server, log


def _stop_server(server: subprocess.Popen, log: object) -> None:
    server.terminate()
    server.wait(timeout=60)
    log.close()  # type: ignore[attr-defined]


def _ingest(base: str, trace: Path) -> tuple[str, int]:
    import httpx

    t = time.perf_counter()
    with trace.open("rb") as f:
        r = httpx.post(f"{base}/api/runs", files={"file": (trace.name, f)}, timeout=600)
    r.raise_for_status()
    uploaded = time.perf_counter() - t
    run_id = r.json()["id"]
    while True:
        run = httpx.get(f"{base}/api/runs/{run_id}", timeout=30).json()
        if run["status"] in ("ready", "failed"):
            break
        time.sleep(0.5)
    ready = time.perf_counter() - t
    if run["status"] != "ready":
        raise SystemExit(f"ingest failed: {run['error']}")
    events = run["facts"]["trace"].get("event_count")
    span = httpx.get(f"{base}/api/runs/{run_id}/timeline?width_px=1").json()["span_ns"]
    print(
        f"trace: {events:,} events, {trace.stat().st_size / 1e6:.0f} MB gz; upload "
        f"{uploaded:.1f} s, ready after {ready:.1f} s; span {span / 1e9:.2f} s"
    )
    return run_id, span


def _report(results: dict, clients: int, processes: int) -> None:
    tf, t1 = results["timeline_full"], results["timeline_1ms"]
    print(f"-- server processes: {processes}")
    print(
        f"timeline full zoom-out: p50 {tf['p50_ms']} ms, p95 {tf['p95_ms']} ms "
        f"({results['timeline_full_bytes'] / 1024:.0f} KiB per answer, n={tf['n']})"
    )
    print(f"timeline 1 ms window:   p50 {t1['p50_ms']} ms, p95 {t1['p95_ms']} ms (n={t1['n']})")
    for name in ("run_page", "findings_api", "run_page_304", "findings_api_304"):
        if name not in results:
            continue
        r = results[name]
        p95 = r["p95_ms"]
        p99 = f", p99 {r['p99_ms']} ms" if "p99_ms" in r else ""
        errors = f", errors {r['errors']}" if r.get("errors") else ""
        print(
            f"{name} at {clients} clients ({r['client']}): {r['req_per_s']} req/s, "
            f"p50 {r['p50_ms']} ms, p95 {p95} ms{p99}{errors}"
        )


def _split_cpus(pin: str | None) -> tuple[set[int] | None, set[int] | None]:
    if not pin:
        return None, None
    server, _, client = pin.partition(":")
    return ({int(c) for c in server.split(",")}, {int(c) for c in client.split(",")})


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--port", type=int, default=8799)
    ap.add_argument(
        "--processes", default="1", help="server process counts to measure, e.g. 1,2 (default 1)"
    )
    ap.add_argument(
        "--pin",
        default=None,
        metavar="SERVER:CLIENT",
        help="CPU lists for the server and the load client, e.g. 0:1 (each on its own core)",
    )
    ap.add_argument(
        "--client", nargs=3, metavar=("BASE", "RUN_ID", "SPAN_NS"), help=argparse.SUPPRESS
    )
    args = ap.parse_args()
    if args.client:
        base, run_id, span = args.client
        print(
            json.dumps(
                asyncio.run(_client_main(base, run_id, int(span), args.clients, args.seconds))
            )
        )
        return

    trace = _trace(args.events)
    base = f"http://127.0.0.1:{args.port}"
    counts = [int(x) for x in args.processes.split(",")]
    with tempfile.TemporaryDirectory(prefix="tracelens-bench-") as data_dir:
        server, log = _start_server(args.port, data_dir, 1)
        try:
            run_id, span = _ingest(base, trace)
        finally:
            _stop_server(server, log)
        for processes in counts:
            server_cpus, client_cpus = _split_cpus(args.pin)
            server, log = _start_server(args.port, data_dir, processes, server_cpus)
            try:
                load = ["--clients", str(args.clients), "--seconds", str(args.seconds)]
                client = subprocess.run(
                    [sys.executable, __file__, *load, "--client", base, run_id, str(span)],
                    capture_output=True,
                    text=True,
                    preexec_fn=_pinned(client_cpus),
                )
            finally:
                _stop_server(server, log)
            if client.returncode != 0:
                print(f"-- server processes: {processes}: the load client failed:")
                print(client.stderr[-3000:])
                continue
            _report(json.loads(client.stdout), args.clients, processes)
    print("targets: timeline p95 < 100 ms; run page p95 < 50 ms at 50 clients")


if __name__ == "__main__":
    main()
