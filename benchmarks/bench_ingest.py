"""Ingest + analysis speed and memory, against Holistic Trace Analysis and AMD TraceLens.

    python benchmarks/bench_ingest.py [--events 600000] [--decimals 3|16] [--trace PATH ...]
        [--peer-events 145000] [--hta-python PATH | --skip-hta]
        [--amd-source SPEC | --amd-python PATH | --skip-amd] [--skip-peers]
    python benchmarks/bench_ingest.py --chunk-mb 32,16,8 [--trace PATH ...] [--events N]

Writes (once, cached) a synthetic Kineto trace of at least ``--events`` events whose times
carry ``--decimals`` digits after the point (or takes ``--trace`` files), and in fresh
processes has tracelens ingest it (in memory and into a file) and run every analyzer.
Then, on a smaller synthetic trace (``--peer-events``, about 50 MB: the peers take minutes
per 50 MB), tracelens, HTA 0.5 (``TraceAnalysis`` load plus its idle-time breakdown) and
AMD TraceLens (its operator tree; its perf report where the trace has ``ac2g`` flows) each
run in a fresh process. Prints seconds, MB/s and peak RSS for each and the ratios. The
peers run from throwaway virtual environments (``--hta-python`` / ``--amd-python``, or
ones created under the cache directory with pip: ``holistictraceanalysis`` from PyPI,
AMD TraceLens from ``--amd-source``); a peer that cannot be installed or fails is skipped
with a message. They are never tracelens dependencies.

``--chunk-mb`` compares read chunk sizes instead (in memory, no peers): for each trace
(``--trace``, repeatable, else the synthetic one) and size, ingest + analysis time, peak
RSS and the sha256 of the ``--format json`` report, which must be the same at every size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
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


def _ensure_trace(cache: Path, events: int, decimals: int = 3) -> Path:
    suffix = "" if decimals == 3 else f"_{decimals}dec"
    path = cache / f"synthetic_{events}{suffix}.pt.trace.json"
    if not path.exists():
        from tracelens.testing.large_trace import write_large_trace

        print(f"writing {path} ({events:,} events, {decimals}-decimal times)...", flush=True)
        tmp = path.with_suffix(".partial")
        write_large_trace(tmp, events, decimals=decimals)
        tmp.rename(path)
    return path


def _peer_python(venv: Path, given: str | None, what: str, spec: str) -> str | None:
    """The interpreter of a throwaway venv holding a peer tool; None (said why) if none."""
    if given:
        return given
    py = venv / "bin" / "python"
    if not py.exists():
        print(f"creating a throwaway venv with {what} ({spec})...", flush=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], check=False)
        if made.returncode == 0:
            made = subprocess.run(
                [str(py), "-m", "pip", "install", "-q", spec], capture_output=True, text=True
            )
        if made.returncode != 0:
            err = (made.stderr or "").strip().splitlines()[-1:] if made.stderr else []
            print(f"{what}: skipped, it could not be installed ({' '.join(err) or 'pip failed'})")
            shutil.rmtree(venv, ignore_errors=True)
            return None
    return str(py)


def _run_peer(py: str | None, script: str, trace: Path, what: str) -> dict | None:
    if py is None:
        return None
    proc = subprocess.run([py, str(HERE / script), str(trace)], capture_output=True, text=True)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        print(f"{what}: skipped, it failed on this trace ({last[0][:200]})")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


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


def _tracelens(trace: Path, mode: str) -> dict:
    return _run_json([sys.executable, __file__, "--child", str(trace), mode, "-"])


def _say_tracelens(r: dict, size_mb: float, mode: str) -> None:
    print(
        f"  tracelens ({mode} db): ingest {r['ingest_s']:.2f} s = "
        f"{size_mb / r['ingest_s']:.1f} MB/s, ingest + every analyzer "
        f"{r['ingest_s'] + r['analyze_s']:.2f} s = "
        f"{size_mb / (r['ingest_s'] + r['analyze_s']):.1f} MB/s, peak RSS "
        f"{r['peak_rss_mb']:,.0f} MB = {r['peak_rss_mb'] / size_mb:.2f}x the JSON, "
        f"{r['findings']} findings",
        flush=True,
    )


def _peers(args: argparse.Namespace) -> None:
    """tracelens, HTA and AMD TraceLens on one (smaller) synthetic trace, in this order."""
    trace = _ensure_trace(args.cache, args.peer_events, args.decimals)
    size_mb = trace.stat().st_size / 1e6
    print(f"peers: {trace.name} ({size_mb:,.1f} MB)")
    ours = _tracelens(trace, "memory")
    _say_tracelens(ours, size_mb, "memory")
    rows = [("tracelens", ours["ingest_s"], ours["ingest_s"] + ours["analyze_s"], ours)]
    if not args.skip_hta:
        py = _peer_python(
            args.cache / "hta-venv",
            args.hta_python,
            "Holistic Trace Analysis",
            "holistictraceanalysis",
        )
        hta = _run_peer(py, "hta_load.py", trace, "Holistic Trace Analysis")
        if hta is not None:
            full = hta["load_s"] + hta["idle_breakdown_s"]
            print(
                f"  HTA: load {hta['load_s']:.1f} s = {size_mb / hta['load_s']:.1f} MB/s, "
                f"+ idle breakdown {full:.1f} s, peak RSS {hta['peak_rss_mb']:,.0f} MB",
                flush=True,
            )
            rows.append(("HTA", hta["load_s"], full, hta))
    if not args.skip_amd:
        py = _peer_python(
            args.cache / "amd-tracelens-venv", args.amd_python, "AMD TraceLens", args.amd_source
        )
        amd = _run_peer(py, "amd_tracelens_load.py", trace, "AMD TraceLens")
        if amd is not None:
            full = amd["load_s"] + (amd["report_s"] or 0.0)
            report = (
                f"+ perf report {full:.1f} s"
                if amd["report_s"] is not None
                else "no perf report (the trace has no ac2g flows: load only)"
            )
            print(
                f"  AMD TraceLens: tree load {amd['load_s']:.1f} s = "
                f"{size_mb / amd['load_s']:.1f} MB/s, {report}, peak RSS "
                f"{amd['peak_rss_mb']:,.0f} MB",
                flush=True,
            )
            rows.append(("AMD TraceLens", amd["load_s"], full, amd))
    for name, load_s, full_s, r in rows[1:]:
        print(
            f"  ratio vs {name}: tracelens ingest {load_s / ours['ingest_s']:.1f}x faster than "
            f"its load, ingest + analysis {full_s / rows[0][2]:.1f}x; peak RSS "
            f"{ours['peak_rss_mb'] / r['peak_rss_mb']:.2f}x its"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--decimals", type=int, default=3, help="digits after the point in times")
    ap.add_argument("--peer-events", type=int, default=145_000, help="the peers' trace (~50 MB)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "tracelens-bench")
    ap.add_argument("--hta-python", default=None)
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--amd-python", default=None)
    ap.add_argument(
        "--amd-source",
        default="git+https://github.com/AMD-AGI/TraceLens.git",
        help="what pip installs AMD TraceLens from (its source archive or git URL)",
    )
    ap.add_argument("--skip-amd", action="store_true")
    ap.add_argument("--skip-peers", action="store_true", help="tracelens on the big trace only")
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
    for trace in args.trace or [_ensure_trace(args.cache, args.events, args.decimals)]:
        size_mb = trace.stat().st_size / 1e6
        print(f"trace: {trace} ({size_mb:,.1f} MB)")
        for mode in ("memory", "file"):
            _say_tracelens(_tracelens(trace, mode), size_mb, mode)
    if not args.skip_peers:
        _peers(args)


if __name__ == "__main__":
    main()
