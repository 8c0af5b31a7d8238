"""From every analyzer's findings to the list a person reads, ranked by time given back.

- Each millisecond counts once: a finding that explains part of a broader one
  (``supersedes``) keeps its impact, and the broader one is dropped or keeps only the
  unexplained rest.
- Findings that give back the same time (the informational ones, which give back none)
  are ordered by the time they are about (``subject_ns``), biggest first.
- Severity follows the impact's share of the analysed window and nothing else, so it is
  never above ``info`` under ``severity_low_pct`` and never rises down the ranked list.
- Subjects read well in titles: NVTX payload dicts, C++ signatures and Python object
  reprs are shortened to their meaningful part (evidence keeps the full names).
- No two findings share a title: duplicates say what differs between them.
"""

from __future__ import annotations

import ast
import re

from tracelens.core.findings import Finding, Severity, severity_for
from tracelens.core.thresholds import Thresholds
from tracelens.core.units import fmt_ns

_SUBJECT_MAX = 80
_BACKTICKED = re.compile(r"`([^`]+)`")
_OBJECT_AT = re.compile(r"<(?:built-in )?(?:method|function) (\w+) of .*? at 0x[0-9a-f]+>")
_FUNCTION_AT = re.compile(r"<(?:built-in )?function (\w+)>")


def count_once(findings: list[Finding], t: Thresholds) -> list[Finding]:
    """Keep the ranking honest when a specific finding explains part of a broader one.

    The specific findings keep their impact. The broader one is dropped when they explain
    at least half of it; otherwise it keeps only the unexplained rest, and says so.
    """
    by_id = {f.id: f for f in findings}
    explained: dict[str, list[Finding]] = {}
    for f in findings:
        for sid in f.supersedes:
            if sid in by_id and sid != f.id:
                explained.setdefault(sid, []).append(f)
    dropped: set[str] = set()
    for sid, specific in explained.items():
        broad = by_id[sid]
        covered = sum(f.impact_ns for f in specific)
        if broad.impact_ns <= 0 or covered * 2 >= broad.impact_ns:
            dropped.add(sid)
            continue
        rest = broad.impact_ns - covered
        broad.impact_pct = broad.impact_pct * rest / broad.impact_ns
        broad.impact_ns = rest
        names = ", ".join(f"{f.analyzer} `{f.id}`" for f in specific)
        broad.impact_basis += (
            f" {fmt_ns(covered)} of it is explained and counted by {names}; this is the rest."
        )
    return [f for f in findings if f.id not in dropped]


def apply_severity(findings: list[Finding], t: Thresholds) -> None:
    """Severity from the share of the window each finding would give back."""
    for f in findings:
        f.severity = severity_for(f.impact_pct if f.impact_ns > 0 else 0.0, t)


def short_subject(name: str) -> str:
    """A subject as a person would name it: the meaningful part, at most ~80 characters."""
    text = name.strip()
    # NVTX payloads written as Python dict reprs: {'traceMarker': ['forward']} -> forward
    if text.startswith("{") and text.endswith("}"):
        try:
            payload = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            payload = None
        if isinstance(payload, dict) and payload:
            value = next(iter(payload.values()))
            while isinstance(value, list | tuple) and value:
                value = value[0]
            if isinstance(value, str | int | float):
                text = str(value)
    m = _OBJECT_AT.search(text) or _FUNCTION_AT.fullmatch(text)
    if m:
        text = f"{m.group(1)}()"
    # C++ kernel signatures: drop the return type and the argument list
    if "(" in text and text.endswith(")") and not text.endswith("()"):
        depth = 0
        for i, ch in enumerate(text):
            if ch in "<":
                depth += 1
            elif ch == ">":
                depth -= 1
            elif ch == "(" and depth == 0 and i > 0:
                # a call's argument list ("f(int, float)"), not words in parentheses
                if text[i - 1].isalnum() or text[i - 1] in "_>":
                    text = text[:i]
                break
        text = text.removeprefix("void ")
    if len(text) > _SUBJECT_MAX:
        text = text[: _SUBJECT_MAX - 1].rstrip() + "…"
    return text


def readable_titles(findings: list[Finding]) -> None:
    for f in findings:
        f.title = _BACKTICKED.sub(lambda m: f"`{short_subject(m.group(1))}`", f.title)


# Evidence keys that tell two findings about "the same" subject apart, most telling first.
_DISTINGUISHING = (
    "device_id",
    "stream_id",
    "grid",
    "block",
    "launch_config",
    "input_shapes",
    "shapes",
    "bytes",
    "size_bytes",
    "group",
    "kernel",
    "operator",
    "name",
)


def unique_titles(findings: list[Finding]) -> None:
    """Findings that would read the same get what differs between them appended."""
    by_title: dict[str, list[Finding]] = {}
    for f in findings:
        by_title.setdefault(f.title, []).append(f)
    for same in by_title.values():
        if len(same) < 2:
            continue
        key = next(
            (
                k
                for k in _DISTINGUISHING
                if len({repr(f.evidence.get(k)) for f in same}) == len(same)
            ),
            None,
        )
        for i, f in enumerate(same, 1):
            if key is not None:
                value = f.evidence.get(key)
                shown = short_subject(str(value)) if isinstance(value, str) else value
                f.title = f"{f.title} ({key.replace('_', ' ')} {shown})"
            else:
                f.title = f"{f.title} (#{i})"


def rank(findings: list[Finding], t: Thresholds, timing_valid: bool = True) -> list[Finding]:
    """The ranked list: counted once, severity by share, readable and distinct titles.

    Without valid timing (a graph-capture trace) nothing ranks above ``info``.
    """
    findings = count_once(findings, t)
    apply_severity(findings, t)
    if not timing_valid:
        for f in findings:
            f.severity = Severity.INFO
    # Equal impact (above all the informational findings, which give back nothing): the
    # bigger subject first, so a 463 ms wait or the hottest operator is not listed after a
    # 5 % one because of its analyzer's name.
    findings.sort(key=lambda f: (-f.impact_ns, -f.subject_ns, f.analyzer, f.id))
    readable_titles(findings)
    unique_titles(findings)
    return findings
