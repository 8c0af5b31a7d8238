"""Ingest + analysis speed and memory, against Holistic Trace Analysis and AMD TraceLens.

    python benchmarks/bench_ingest.py [--events 600000] [--decimals 3|16] [--trace PATH ...]
        [--peer-events 145000[,1450000,...]] [--steps N] [--hta-python PATH | --skip-hta]
        [--amd-source SPEC | --amd-python PATH | --skip-amd] [--skip-peers | --peers-only]
    python benchmarks/bench_ingest.py --corpus ../shared/corpus [peer options]
    python benchmarks/bench_ingest.py --chunk-mb 32,16,8 [--trace PATH ...] [--events N]

Writes (once, cached) a synthetic Kineto trace of at least ``--events`` events whose times
carry ``--decimals`` digits after the point (or takes ``--trace`` files), and in fresh
processes has tracelens ingest it (in memory and into a file) and run every analyzer.
Then, on smaller synthetic traces (``--peer-events``, one trace per comma-separated count;
145000 is about 50 MB, and the peers take minutes per 50 MB), tracelens, HTA 0.5
(``TraceAnalysis`` load plus its idle-time breakdown) and AMD TraceLens (its operator
tree; its perf report where the trace has ``ac2g`` flows) each run in a fresh process.
Prints seconds, MB/s and peak RSS for each and the ratios (and tracelens's ingest CPU
seconds, all threads: what a shared machine leaves meaningful). The peers run from throwaway
virtual environments (``--hta-python`` / ``--amd-python``, or ones created under the
cache directory with pip: ``holistictraceanalysis`` from PyPI, AMD TraceLens from
``--amd-source``); a peer that cannot be installed or fails is skipped with a message.
They are never tracelens dependencies. Every time counts the tool's own imports (a
peer's clock starts before it imports itself), which dominate on small traces.

``--steps N`` writes the synthetic traces as N profiler steps (a real capture holds a
handful; by default a step is 200 operators, so a 50 MB trace has ~240 steps, which makes
HTA's per-event step lookup, linear in the steps, its main cost).

``--corpus DIR`` runs the same comparison on every Chrome trace under ``DIR`` (the real
traces; Nsight exports are not the peers' input) and prints a Markdown table. In every
comparison tracelens reads each file alone, as the peers do (a serving trace's
``capture_traces/`` folder beside it is not read).

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
        # "alone": the file by itself, as the peers read it (no capture_traces/ beside it)
        cpu0 = _cpu_s()
        loaded = load_trace(path, db_path=db, find_captures=mode != "alone")
        ingested = time.perf_counter()
        ingest_cpu = _cpu_s() - cpu0
        report = build_report(loaded)
        analyzed = time.perf_counter()
        loaded.close()
    print(
        json.dumps(
            {
                "import_s": imported - t0,
                "ingest_s": ingested - imported,
                # user + system of every thread: on a shared machine wall time mostly
                # measures the other jobs
                "ingest_cpu_s": ingest_cpu,
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


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _ensure_trace(cache: Path, events: int, decimals: int = 3, steps: int | None = None) -> Path:
    suffix = ("" if decimals == 3 else f"_{decimals}dec") + (f"_{steps}steps" if steps else "")
    path = cache / f"synthetic_{events}{suffix}.pt.trace.json"
    if not path.exists():
        from tracelens.testing.large_trace import write_large_trace

        shape = f"{steps} steps" if steps else "200 operators per step"
        print(
            f"writing {path} ({events:,} events, {decimals}-decimal times, {shape})...",
            flush=True,
        )
        tmp = path.with_suffix(".partial")
        write_large_trace(tmp, events, decimals=decimals, steps=steps)
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
        f"{size_mb / r['ingest_s']:.1f} MB/s ({r['ingest_cpu_s']:.2f} CPU-s), "
        "ingest + every analyzer "
        f"{r['ingest_s'] + r['analyze_s']:.2f} s = "
        f"{size_mb / (r['ingest_s'] + r['analyze_s']):.1f} MB/s, peak RSS "
        f"{r['peak_rss_mb']:,.0f} MB = {r['peak_rss_mb'] / size_mb:.2f}x the JSON, "
        f"{r['findings']} findings",
        flush=True,
    )


def _json_mb(trace: Path) -> float:
    """Megabytes of JSON in ``trace``: a gzip's own length field (its size mod 4 GiB)."""
    from ingest.byte_source import gzip_trailer_size

    recorded = gzip_trailer_size(trace)
    return (trace.stat().st_size if recorded is None else recorded) / 1e6


def _peer_pythons(args: argparse.Namespace) -> dict[str, str | None]:
    """The peers' interpreters (None where skipped or not installable), each made once."""
    pythons: dict[str, str | None] = {}
    if not args.skip_hta:
        pythons["HTA"] = _peer_python(
            args.cache / "hta-venv",
            args.hta_python,
            "Holistic Trace Analysis",
            "holistictraceanalysis",
        )
    if not args.skip_amd:
        pythons["AMD TraceLens"] = _peer_python(
            args.cache / "amd-tracelens-venv", args.amd_python, "AMD TraceLens", args.amd_source
        )
    return pythons


def _compare(trace: Path, pythons: dict[str, str | None], quiet: bool = False) -> dict:
    """tracelens, then each peer, on ``trace`` in fresh processes; one row of figures.

    Every time includes the tool's imports (each peer's script starts its clock before
    importing it), so a small trace compares what a user waits for.
    """
    size_mb = _json_mb(trace)
    ours = _tracelens(trace, "alone")
    load = ours["import_s"] + ours["ingest_s"]
    row: dict = {
        "trace": trace.name,
        "json_mb": size_mb,
        "tracelens": {"load_s": load, "full_s": load + ours["analyze_s"],
                      "peak_rss_mb": ours["peak_rss_mb"]},
    }  # fmt: skip
    if not quiet:
        _say_tracelens(ours, size_mb, "memory")
    script = {"HTA": "hta_load.py", "AMD TraceLens": "amd_tracelens_load.py"}
    for name, py in pythons.items():
        r = _run_peer(py, script[name], trace, name)
        if r is None:
            continue
        extra = r.get("idle_breakdown_s", r.get("report_s")) or 0.0
        row[name] = {"load_s": r["load_s"], "full_s": r["load_s"] + extra,
                     "peak_rss_mb": r["peak_rss_mb"],
                     "load_only": name == "AMD TraceLens" and r["report_s"] is None}  # fmt: skip
        if not quiet:
            what = "+ idle breakdown" if name == "HTA" else "+ perf report"
            if row[name]["load_only"]:
                what = "no perf report (the trace has no ac2g flows: load only);"
            print(
                f"  {name}: load {r['load_s']:.1f} s = {size_mb / r['load_s']:.1f} MB/s, "
                f"{what} {row[name]['full_s']:.1f} s, peak RSS {r['peak_rss_mb']:,.0f} MB",
                flush=True,
            )
    return row


def _say_ratios(row: dict) -> None:
    ours = row["tracelens"]
    for name in ("HTA", "AMD TraceLens"):
        if name in row:
            peer = row[name]
            print(
                f"  ratio vs {name}: tracelens load {peer['load_s'] / ours['load_s']:.1f}x "
                f"faster than its load, with analysis {peer['full_s'] / ours['full_s']:.1f}x; "
                f"peak RSS {ours['peak_rss_mb'] / peer['peak_rss_mb']:.2f}x its",
                flush=True,
            )


def _peers(args: argparse.Namespace) -> None:
    """tracelens, HTA and AMD TraceLens on synthetic traces of ``--peer-events`` events."""
    pythons = _peer_pythons(args)
    for events in (int(n) for n in str(args.peer_events).split(",")):
        trace = _ensure_trace(args.cache, events, args.decimals, args.steps)
        print(f"peers: {trace.name} ({_json_mb(trace):,.1f} MB)")
        _say_ratios(_compare(trace, pythons))


def _corpus_traces(corpus: Path) -> list[Path]:
    """Every Chrome trace of the corpus (Nsight exports are not the peers' input)."""
    found = [
        p
        for p in sorted(corpus.rglob("*.json*"))
        if p.name.endswith((".json", ".json.gz")) and "execution_details" not in p.name
    ]
    return [p for p in found if p.stat().st_size > 1024]


def _corpus(args: argparse.Namespace) -> None:
    """The peers on every real corpus trace: a table of seconds, peak RSS and ratios."""
    corpus = Path(args.corpus)
    traces = _corpus_traces(corpus)
    if not traces:
        raise SystemExit(f"{corpus}: no Chrome traces found")
    pythons = _peer_pythons(args)
    rows = []
    for trace in traces:
        print(f"{trace.relative_to(corpus)} ({_json_mb(trace):,.1f} MB of JSON)", flush=True)
        rows.append(_compare(trace, pythons, quiet=True))
    names = [n for n in ("HTA", "AMD TraceLens") if n in pythons]
    head = "| trace | JSON MB | tracelens s (+analysis) / MB |"
    head += "".join(f" {n} s (+analysis) / MB | speed-up (+analysis), RSS ratio |" for n in names)
    print("\n" + head + "\n|" + "---|" * (3 + 2 * len(names)))
    for row in rows:
        ours = row["tracelens"]
        line = (
            f"| {row['trace']} | {row['json_mb']:.1f} | {ours['load_s']:.2f} "
            f"({ours['full_s']:.2f}) / {ours['peak_rss_mb']:.0f} |"
        )
        for name in names:
            peer = row.get(name)
            if peer is None:
                line += " failed | - |"
                continue
            note = " load only" if peer["load_only"] else ""
            line += (
                f" {peer['load_s']:.2f} ({peer['full_s']:.2f}{note}) / {peer['peak_rss_mb']:.0f} |"
                f" {peer['load_s'] / ours['load_s']:.1f}x ({peer['full_s'] / ours['full_s']:.1f}x),"
                f" {ours['peak_rss_mb'] / peer['peak_rss_mb']:.2f}x |"
            )
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--decimals", type=int, default=3, help="digits after the point in times")
    ap.add_argument(
        "--peer-events",
        default="145000",
        help="the peers' synthetic traces, comma-separated event counts (145000 is ~50 MB)",
    )
    ap.add_argument(
        "--steps",
        type=int,
        default=None,
        help="profiler steps in each synthetic trace (default: 200 operators per step, so "
        "the step count grows with the trace; real captures hold a handful)",
    )
    ap.add_argument(
        "--corpus",
        default=None,
        help="compare with the peers on every Chrome trace under this folder instead",
    )
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
    ap.add_argument("--peers-only", action="store_true", help="the peer comparison alone")
    ap.add_argument("--chunk-mb", default=None, help="compare these chunk sizes, e.g. 32,16,8")
    ap.add_argument("--trace", type=Path, action="append", default=[])
    ap.add_argument("--child", nargs=3, metavar=("PATH", "MODE", "CHUNK"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        path, mode, chunk = args.child
        _child(path, mode, int(chunk) if chunk != "-" else None)
        return
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.corpus:
        _corpus(args)
        return
    if args.chunk_mb:
        sizes = [int(s) for s in args.chunk_mb.split(",")]
        _compare_chunks(args.trace or [_ensure_trace(args.cache, args.events)], sizes)
        return
    if args.peers_only:
        big = []
    else:
        big = args.trace or [_ensure_trace(args.cache, args.events, args.decimals, args.steps)]
    for trace in big:
        size_mb = trace.stat().st_size / 1e6
        print(f"trace: {trace} ({size_mb:,.1f} MB)")
        for mode in ("memory", "file"):
            _say_tracelens(_tracelens(trace, mode), size_mb, mode)
    if not args.skip_peers:
        _peers(args)


if __name__ == "__main__":
    main()
