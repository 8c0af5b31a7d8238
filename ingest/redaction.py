"""Secret redaction for anything taken from a trace's metadata.

Profiler traces carry their recording environment: job names, host names, log lines and,
in the worst case, environment dumps with access tokens. Every value that reaches the
catalog, a report or a page passes through :func:`redact` first, so the CLI and the web
app hide the same things.

Two rules:

- a string stored under a secret-looking key (``HF_TOKEN``, ``db_password``,
  ``aws_secret_access_key``, ``X-Api-Key`` ...) is replaced whole;
- inside any string, ``NAME=value`` / ``NAME: value`` pairs with a secret-looking name,
  credentials in URLs (``scheme://user:pass@host``), ``Bearer`` tokens and well-known
  token formats (GitHub, Hugging Face, OpenAI, AWS, Slack) are replaced.

Numbers are never redacted: ``max_tokens: 128`` is a setting, not a secret.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[REDACTED]"

# Matched against the key lower-cased with separators removed ("HF_TOKEN" -> "hftoken").
# "token" must not be followed by "s"/"iz" so token counts and tokenizer names survive.
_SECRET_KEY = re.compile(
    r"token(?!s|iz)|secret|passw(?:or)?d|passphrase|apikey|accesskey|privatekey|credential"
    r"|authorization|cookie|sessionid|signature|^auth$|^pwd$"
)

_KEY_CHARS = r"[A-Za-z0-9_.\-]*"
_SECRET_NAME = (
    r"(?:TOKEN(?!S|IZ)|SECRET|PASSW(?:OR)?D|PASSPHRASE|API[_\-]?KEY|ACCESS[_\-]?KEY"
    r"|PRIVATE[_\-]?KEY|CREDENTIALS?|AUTHORIZATION|COOKIE)"
)
_VALUE = r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;&\"'}\]]+)"
# NAME=value, NAME: value, "name": "value" (inside a dumped JSON string), and --name value.
_NAME = f"{_KEY_CHARS}{_SECRET_NAME}{_KEY_CHARS}"
_PAIR = re.compile(
    rf"(?i)(?P<key>[\"']?{_NAME}[\"']?)(?P<sep>\s*[=:]\s*){_VALUE}"
    rf"|(?P<flag>--{_NAME})(?P<space>\s+)(?!-){_VALUE.replace('value', 'fvalue')}"
)
_NUMBER = re.compile(r"[0-9.,+\-]+")
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^/\s:@]+):([^/\s@]+)@")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
# No \b before: "sgemm_ghp_..." has no word boundary between "_" and "g".
_KNOWN_TOKENS = re.compile(
    r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}"
    r"|sk-[A-Za-z0-9_\-]{20,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|glpat-[A-Za-z0-9_\-]{20,})\b"
)


def is_secret_key(key: str) -> bool:
    normalized = re.sub(r"[^a-z0-9]", "", key.lower())
    return bool(_SECRET_KEY.search(normalized))


def _pair_sub(m: re.Match[str]) -> str:
    if m.group("flag"):
        key, sep, value = m.group("flag"), m.group("space"), m.group("fvalue")
    else:
        key, sep, value = m.group("key"), m.group("sep"), m.group("value")
    bare = value.strip("\"'")
    # Counts and durations ("time per output token: 20 ms") are not secrets, nor is a
    # package pin ("tiktoken==0.9.0", "SecretStorage>=3.3": the value starts a comparator).
    if (
        bare.startswith(REDACTED[:-1])
        or not bare
        or _NUMBER.fullmatch(bare)
        or (sep.strip() == "=" and bare[:1] in "=<>~!")
    ):
        return m.group(0)
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{key}{sep}{quote}{REDACTED}{quote}"


def redact_text(text: str) -> str:
    """``text`` with credentials and secret-looking assignments replaced."""
    if not text:
        return text
    out = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{m.group(2)}:{REDACTED}@", text)
    out = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", out)
    out = _PAIR.sub(_pair_sub, out)
    return _KNOWN_TOKENS.sub(REDACTED, out)


def redact(value: Any, key: str | None = None) -> Any:
    """A copy of ``value`` (JSON-like: dicts, lists, strings, numbers) with secrets hidden."""
    if isinstance(value, str):
        if key is not None and value and is_secret_key(key):
            return REDACTED
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, key) for v in value]
    return value
