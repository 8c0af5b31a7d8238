"""How the browser tests and the timeline benchmark start Chromium: Debian's package,
headless, without the services it would otherwise dial out to."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium keeps dialling out to update and sync
# services, which an air-gapped test machine refuses.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
