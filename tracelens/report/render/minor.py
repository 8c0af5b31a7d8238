"""Negligible findings fold into one line: a person reads what matters first.

Findings below the ``low`` severity (under half a percent of the window, or no time to give
back) stay in the JSON, but text, Markdown and HTML (the standalone page and the web run
page) list them in one "minor findings" line after the ones worth acting on.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracelens.report.model import Finding

MINOR_SEVERITY = "info"


def split_minor(findings: Sequence[Finding]) -> tuple[list[Finding], list[Finding]]:
    """(findings worth acting on, minor ones), each in ranked order."""
    major = [f for f in findings if f.severity != MINOR_SEVERITY]
    minor = [f for f in findings if f.severity == MINOR_SEVERITY]
    return major, minor


def minor_line(minor: Sequence[Finding]) -> str:
    """``3 minor findings (little or no time to give back): a; b; c``."""
    titles = "; ".join(f.title for f in minor)
    noun = "finding" if len(minor) == 1 else "findings"
    return f"{len(minor)} minor {noun} (little or no time to give back): {titles}"
