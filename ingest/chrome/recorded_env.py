"""Environment settings a trace's metadata records, where the recording harness wrote them.

Kineto does not record the process environment, but benchmark harnesses often put it in
the trace's top-level metadata (AMD's MI300X recordings: ``metadata.system.env``). Advice
depends on a few of those settings (telling a run to enable PyTorch's TunableOp that
already has it on is advice it cannot take), so exactly those are kept, as trace facts
named ``env.<VARIABLE>``. Nothing else is: the same dictionaries hold access tokens.

The same harnesses list the installed Python packages (``metadata.system.pip_packages``,
``name==version``): the versions of the few the advice names (an installed `flash_attn`
makes "use FlashAttention" a one-line switch) are kept as ``package.<name>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# Variables kept, by prefix: what the advice reads.
KEPT_PREFIXES = ("PYTORCH_TUNABLEOP_",)
# Packages whose installed version the advice reads (normalized: lower case, '-' as '_').
KEPT_PACKAGES = frozenset({"flash_attn", "aiter", "transformers", "vllm", "sglang"})
_MAX_DEPTH = 6
_MAX_NODES = 20_000


def _containers(meta: dict[str, Any]) -> Iterator[tuple[dict | list, int]]:
    """Each dict and list in ``meta`` with its depth, the walk bounded in depth and size:
    a harness's metadata is the user's, of any shape."""
    seen = 0
    stack: list[tuple[Any, int]] = [(meta, 0)]
    while stack and seen < _MAX_NODES:
        node, depth = stack.pop()
        seen += 1
        yield node, depth
        if depth < _MAX_DEPTH:
            children = node.values() if isinstance(node, dict) else node
            stack.extend((v, depth + 1) for v in children if isinstance(v, (dict, list)))


def recorded_settings(meta: dict[str, Any]) -> dict[str, str]:
    """``{"env.NAME": value}`` for the kept variables found in ``meta`` (the first value
    seen for a name wins); scalar values only, the search bounded in depth and size."""
    found: dict[str, str] = {}
    for node, _ in _containers(meta):
        if isinstance(node, dict):
            for key, value in node.items():
                if (
                    isinstance(key, str)
                    and key.startswith(KEPT_PREFIXES)
                    and isinstance(value, (str, int, float, bool))
                    and f"env.{key}" not in found
                ):
                    found[f"env.{key}"] = str(value)
    return found


def recorded_packages(meta: dict[str, Any]) -> dict[str, str]:
    """``{"package.NAME": version}`` for the kept packages in any ``name==version`` list of
    ``meta`` (a pip freeze a harness wrote), the search bounded as above."""
    found: dict[str, str] = {}
    for node, depth in _containers(meta):
        if isinstance(node, list) and depth < _MAX_DEPTH:
            for item in node:
                if isinstance(item, str) and "==" in item:
                    name, _, version = item.partition("==")
                    key = name.strip().lower().replace("-", "_")
                    if key in KEPT_PACKAGES and f"package.{key}" not in found:
                        found[f"package.{key}"] = version.strip()[:64]
    return found
