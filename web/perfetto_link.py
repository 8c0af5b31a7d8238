"""What the run page's "Open in Perfetto" needs: where the trace is, where Perfetto is.

The page's script (``static/perfetto.js``) fetches the enriched trace from this service
and posts it to the Perfetto UI it opened (Perfetto's documented postMessage protocol),
so the trace goes from the visitor's browser to the UI, never from the server. Times are
absolute nanoseconds as decimal text: at epoch scale they exceed what a JavaScript
number holds exactly, and Perfetto's ``visStart``/``visEnd`` take them on the trace's
clock, which for a Chrome trace is its own microseconds times 1,000.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from web.settings import Settings


def perfetto_context(
    settings: Settings,
    run_id: str,
    run_name: str,
    highlights: dict[str, list[list[Any]]],
    t0_ns: int,
    rank: int | None = None,
) -> dict[str, Any]:
    """The page data of the Perfetto button (and the download link's address).

    ``highlights`` are the page timeline's, each range's start and end relative to its
    origin, ``t0_ns`` that origin on the downloaded trace's clock. The timeline steps
    through a finding's ranges sorted by start and keeps the one shown in the address
    (``fr``); the ranges here are that list in that order, so ``fr`` names one range in
    both. (The timeline's ``tl`` window is relative to the same origin.)"""
    query = f"?{urlencode({'rank': rank})}" if rank is not None else ""
    label = run_id if rank is None else f"{run_id}-rank-{rank}"
    return {
        "rank": rank,
        "trace_url": f"/api/runs/{run_id}/trace/enriched{query}",
        "perfetto_url": settings.perfetto_url,
        "title": f"tracelens {run_name}" + (f" rank {rank}" if rank is not None else ""),
        "file_name": f"{label}-enriched.json.gz",
        "t0_ns": str(t0_ns),
        # the buttons' tooltip: what leaves whose machine, and what it needs
        "tip": (
            f"Sends the enriched trace from your browser to the Perfetto UI at "
            f"{settings.perfetto_url} (it needs your browser to reach it; the service "
            "itself sends nothing anywhere). Perfetto asks whether you trust this site "
            "before it opens the trace."
        ),
        "ranges": {
            fid: [
                [str(t0_ns + int(r[0])), str(t0_ns + int(r[1]))]
                # stable, as the timeline's sort: equal starts keep the highlights' order
                for r in sorted(ranges, key=lambda r: int(r[0]))
            ]
            for fid, ranges in highlights.items()
        },
    }
