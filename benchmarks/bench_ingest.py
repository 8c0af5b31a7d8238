"""Ingest + analysis speed and memory on a large trace, against Holistic Trace Analysis.

    python benchmarks/bench_ingest.py [--events 2000000] [--hta-python PATH | --skip-hta]
    python benchmarks/bench_ingest.py --chunk-mb 32,16,8 [--trace PATH ...] [--events N]

Writes (once, cached) a synthetic Kineto trace of at least ``--events`` events, then in
fresh processes: tracelens ingests it into DuckDB and runs every analyzer; HTA 0.5 loads
the same file (``TraceAnalysis``) and computes its idle-time breakdown. Prints seconds,
MB/s and peak RSS for each and the ratios. HTA runs from a throwaway virtual environment
(``--hta-python``, or one created under the cache directory with ``pip install
holistictraceanalysis``); it is never a tracelens dependency.

``--chunk-mb`` compares read chunk sizes instead (in memory, no HTA): for each trace
(``--trace``, repeatable, else the synthetic one) and size, ingest + analysis time, peak
RSS and the sha256 of the ``--format json`` report, which must be the same at every size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _child(path: str, mode: str, chunk_mb: int | None = None) -> None:
    """Measured in a fresh process so peak RSS belongs to this work alone."""
    t0 = time.perf_counter()
    from ingest import load_trace
    from tracelens.report import build_report

    if chunk_mb is not None:
        import functools

        import ingest.loader

        # the benchmark's own knob: ingest reads at the one size byte_source defines
        ingest.loader.iter_bytes = functools.partial(  # type: ignore[assignment]
            ingest.loader.iter_bytes, chunk_size=chunk_mb * 1024 * 1024
        )

    imported = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "t.duckdb") if mode == "file" else None
        loaded = load_trace(path, db_path=db)
        ingested = time.perf_counter()
        report = build_report(loaded)
        analyzed = time.perf_counter()
        loaded.close()
    print(
        json.dumps(
            {
                "import_s": imported - t0,
                "ingest_s": ingested - imported,
                "analyze_s": analyzed - ingested,
                "findings": len(report["findings"]),
                # the CLI's --format json text, to compare reports across chunk sizes
                "report_sha256": hashlib.sha256(
                    (json.dumps(report, indent=2, default=str) + "\n").encode()
                ).hexdigest(),
                "kernels": report["metrics"]["kernel_count"],
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def _ensure_trace(cache: Path, events: int) -> Path:
    path = cache / f"synthetic_{events}.pt.trace.json"
    if not path.exists():
        from tracelens.testing.large_trace import write_large_trace

        print(f"writing {path} ({events:,} events)...", flush=True)
        tmp = path.with_suffix(".partial")
        write_large_trace(tmp, events)
        tmp.rename(path)
    return path


def _hta_python(cache: Path, given: str | None) -> str:
    if given:
        return given
    venv = cache / "hta-venv"
    py = venv / "bin" / "python"
    if not py.exists():
        print("creating a throwaway venv with holistictraceanalysis...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "holistictraceanalysis"], check=True)
    return str(py)


def _run_json(cmd: list[str]) -> dict:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _compare_chunks(traces: list[Path], sizes: list[int]) -> None:
    for trace in traces:
        size_mb = trace.stat().st_size / 1e6
        print(f"{trace.name} ({size_mb:,.1f} MB on disk)")
        digests = set()
        for chunk in sizes:
            r = _run_json([sys.executable, __file__, "--child", str(trace), "memory", str(chunk)])
            digests.add(r["report_sha256"])
            print(
                f"  {chunk:3d} MB chunks: ingest {r['ingest_s']:.2f} s, analyze "
                f"{r['analyze_s']:.2f} s, peak RSS {r['peak_rss_mb']:,.0f} MB, report "
                f"{r['report_sha256'][:12]}",
                flush=True,
            )
        print(f"  reports {'identical' if len(digests) == 1 else 'DIFFER'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "tracelens-bench")
    ap.add_argument("--hta-python", default=None)
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--chunk-mb", default=None, help="compare these chunk sizes, e.g. 32,16,8")
    ap.add_argument("--trace", type=Path, action="append", default=[])
    ap.add_argument("--child", nargs=3, metavar=("PATH", "MODE", "CHUNK"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        path, mode, chunk = args.child
        _child(path, mode, int(chunk) if chunk != "-" else None)
        return
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.chunk_mb:
        sizes = [int(s) for s in args.chunk_mb.split(",")]
        _compare_chunks(args.trace or [_ensure_trace(args.cache, args.events)], sizes)
        return
    trace = _ensure_trace(args.cache, args.events)
    size_mb = trace.stat().st_size / 1e6
    print(f"trace: {trace} ({size_mb:,.0f} MB, >= {args.events:,} events)")
    results = {}
    for mode in ("memory", "file"):
        r = _run_json([sys.executable, __file__, "--child", str(trace), mode, "-"])
        results[mode] = r
        print(
            f"tracelens ({mode} db): ingest {r['ingest_s']:.1f} s = "
            f"{size_mb / r['ingest_s']:.1f} MB/s, analyze {r['analyze_s']:.1f} s "
            f"({100 * r['analyze_s'] / r['ingest_s']:.0f}% of ingest), peak RSS "
            f"{r['peak_rss_mb']:,.0f} MB = {r['peak_rss_mb'] / size_mb:.2f}x the JSON, "
            f"{r['findings']} findings"
        )
    if args.skip_hta:
        return
    hta = _run_json(
        [_hta_python(args.cache, args.hta_python), str(HERE / "hta_load.py"), str(trace)]
    )
    best = min(results.values(), key=lambda r: r["ingest_s"])
    print(
        f"HTA 0.5: load {hta['load_s']:.1f} s = {size_mb / hta['load_s']:.1f} MB/s, idle "
        f"breakdown {hta['idle_breakdown_s']:.1f} s, peak RSS {hta['peak_rss_mb']:,.0f} MB"
    )
    print(
        f"ratio: tracelens ingest is {hta['load_s'] / best['ingest_s']:.1f}x HTA's load "
        f"throughput; ingest+analysis {hta['load_s'] / (best['ingest_s'] + best['analyze_s']):.1f}x"
        f"; peak RSS {best['peak_rss_mb'] / hta['peak_rss_mb']:.2f}x HTA's"
    )


if __name__ == "__main__":
    main()
