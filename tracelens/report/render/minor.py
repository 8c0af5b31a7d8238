"""Negligible findings fold into one line: a person reads what matters first.

Findings below the ``low`` severity (under half a percent of the window, or no time to give
back) stay in the JSON, but text, Markdown and HTML (the standalone page and the web run
page) list them in one "minor findings" line after the ones worth acting on.
"""

from __future__ import annotations

from typing import Any

Rows = list[dict[str, Any]]


def split_minor(findings: Rows) -> tuple[Rows, Rows]:
    """(findings worth acting on, minor ones), each in ranked order."""
    major = [f for f in findings if f["severity"] != "info"]
    minor = [f for f in findings if f["severity"] == "info"]
    return major, minor


def minor_line(minor: Rows) -> str:
    """``3 minor findings (little or no time to give back): a; b; c``."""
    titles = "; ".join(f["title"] for f in minor)
    noun = "finding" if len(minor) == 1 else "findings"
    return f"{len(minor)} minor {noun} (little or no time to give back): {titles}"
