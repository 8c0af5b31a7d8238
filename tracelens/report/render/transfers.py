"""The report header's unified-memory traffic, as every renderer shows it.

Migrations are not explicit copies, so the copy counts and HtoD/DtoH bytes leave them out;
GPU busy time counts them, and they can open and close a device's window. The header says
so, or a busy share larger than the kernels' and copies' time would go unexplained.
"""

from __future__ import annotations

from tracelens.core.units import fmt_bytes, fmt_count


def unified_memory_text(count: int, total: int, to_device: int, to_host: int) -> str | None:
    """``unified memory 512 MiB in 2,370 migrations (256 MiB to the device, 256 MiB to the
    host): ...`` (what GPU busy time counts besides kernels and copies); None without
    migrations."""
    if not count:
        return None
    ways = [
        f"{fmt_bytes(n)} to the {where}"
        for n, where in ((to_device, "device"), (to_host, "host"))
        if n
    ]
    # "busy" counts migrations (ingest.derive_gaps): a header reading "1 kernel, 0 copies,
    # busy 9.6%" must say what the rest of the busy time is
    return (
        f"unified memory {fmt_bytes(total)} in {fmt_count(count, 'migration')}"
        + (f" ({', '.join(ways)})" if ways else "")
        + ": driver page traffic, not copies; GPU busy time counts it"
    )
