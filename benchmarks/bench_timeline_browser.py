"""The timeline as the user sees it: redraw, new data and details, measured in Chromium.

    python benchmarks/bench_timeline_browser.py [--events 2000000] [--width 1500] [--steps 40]

Serves the cached synthetic Kineto trace of ``bench_web.py`` (about 2 million events) with
``tracelens serve`` in a child process, waits for the run to be ready, and opens its page
in headless Chromium (Debian's, under Playwright) at ``--width`` px. Then, as a user does
with the keyboard, it zooms in by steps (``w``) to a microsecond-scale window, pans
(``d``) and zooms back out (``s``), and clicks kernels for their details. The page itself
reports what it measured (``timeline.js`` keeps them on the canvas's data attributes):

- redraw: one synchronous ``draw()`` of the canvas (every lane, highlight and label);
- new data: from the interaction to the answer drawn (the 60 ms wait that coalesces a
  burst of key presses included, as the user waits for it);
- details: from a click on an event to its details panel filled.

Targets (issue: a timeline a performance engineer can work in): redraw < 16 ms, new data
< 150 ms after a zoom or pan, details < 50 ms. Figures depend on the machine and what else
it runs; nothing here asserts them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_queue import _free_port
from bench_web import _start_server, _stop_server, _trace  # the cached large trace

from tracelens.testing.chromium import CHROMIUM, CHROMIUM_ARGS

_CANVAS = "document.getElementById('tl-canvas')"


def _summary(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    if not s:
        return {}
    return {
        "n": len(s),
        "p50": round(statistics.median(s), 1),
        "p95": round(s[min(len(s) - 1, int(0.95 * len(s)))], 1),
        "max": round(s[-1], 1),
    }


def _upload(base: str, trace: Path) -> str:
    import httpx

    with trace.open("rb") as f:
        r = httpx.post(
            f"{base}/api/runs", files={"file": (trace.name, f, "application/gzip")}, timeout=600
        )
    r.raise_for_status()
    run_id = str(r.json()["id"])
    while True:
        run = httpx.get(f"{base}/api/runs/{run_id}", timeout=60).json()
        if run["status"] in ("ready", "failed"):
            break
        time.sleep(1)
    if run["status"] != "ready":
        raise SystemExit(f"ingest failed: {run['error']}")
    return run_id


def _measure(base: str, run_id: str, width: int, steps: int) -> dict[str, object]:
    from playwright.sync_api import sync_playwright

    redraw: list[float] = []
    new_data: list[float] = []
    details: list[float] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": 1000})
        page.goto(f"{base}/runs/{run_id}")
        canvas = page.locator("#tl-canvas")
        page.wait_for_function(
            "() => Number(document.getElementById('tl-canvas').dataset.loads) > 0"
        )

        def dataset(key: str) -> str | None:
            return canvas.evaluate(f"c => c.dataset.{key} ?? null")

        def key_and_wait(key: str) -> None:
            loads = int(dataset("loads") or 0)
            page.locator("#timeline").focus()
            page.keyboard.press(key)
            redraw.append(float(dataset("drawMs") or "nan"))
            page.wait_for_function(
                f"() => Number({_CANVAS}.dataset.loads) > {loads}",
                timeout=30_000,
            )
            new_data.append(float(dataset("dataMs") or "nan"))
            redraw.append(float(dataset("drawMs") or "nan"))

        for _ in range(steps // 2):
            key_and_wait("w")
        for _ in range(4):
            key_and_wait("d")
        # details of kernels drawn at this zoom: click along the first GPU lane
        lanes = json.loads(dataset("lanes") or "[]")
        box = canvas.bounding_box()
        label_w = int(dataset("labelW") or 0)
        spots = (
            [
                (
                    box["x"] + label_w + (i + 0.5) * (box["width"] - label_w) / 16,
                    box["y"] + y + h / 2,
                )
                for _, y, h in lanes
                for i in range(16)
            ]
            if box
            else []
        )
        for x, y in spots:
            if len(details) >= 12:
                break
            before = dataset("detailsMs")
            page.mouse.click(x, y)
            if not dataset("selected"):
                continue  # no event under the pointer there
            try:
                page.wait_for_function(
                    f"b => ({_CANVAS}.dataset.detailsMs ?? null) !== b", arg=before, timeout=10_000
                )
            except Exception:
                continue
            details.append(float(dataset("detailsMs") or "nan"))
            page.keyboard.press("Escape")
        for _ in range(steps // 2):
            key_and_wait("s")
        browser.close()
    ok = [v for v in redraw if v == v]  # drop NaN (no draw measured)
    return {
        "redraw_ms": _summary(ok),
        "new_data_ms": _summary([v for v in new_data if v == v]),
        "details_ms": _summary(details),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--width", type=int, default=1500)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    trace = _trace(args.events)
    data_dir = Path(tempfile.mkdtemp(prefix="tracelens-bench-tlb-"))
    base = f"http://127.0.0.1:{(port := _free_port())}"
    server, log = _start_server(port, str(data_dir), 1)
    try:
        t = time.perf_counter()
        run_id = _upload(base, trace)
        out: dict[str, object] = {
            "events": args.events,
            "width_px": args.width,
            "ingest_s": round(time.perf_counter() - t, 1),
        }
        out |= _measure(base, run_id, args.width, args.steps)
    finally:
        _stop_server(server, log)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
