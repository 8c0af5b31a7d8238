"""A GPU's name when the trace leaves it empty: ROCm traces often do.

``deviceProperties[].name`` is empty in some ROCm recordings (vLLM's on MI300X); the other
properties still say what the device is: ``gcnArchName`` where present, else the compute
capability ROCm reports (the gfx version), the compute-unit count and the 64-wide
wavefront. A device the properties do not list at all (ROCm traces list the host's GPUs
by HIP index, while kernels carry the node's device number) takes the properties of the
host's other GPUs when they all are one model with one configuration: its compute units,
memory and gfx version, not only its name, so occupancy and the cost model can judge it.
"""

from __future__ import annotations

from typing import Any

# (gfx major.minor, compute units) -> the product; AMD Instinct data-center parts.
_AMD_BY_CU = {
    ("9.4", 304): "AMD Instinct MI300X",
    ("9.4", 228): "AMD Instinct MI300A",
    ("9.0", 220): "AMD Instinct MI250X",
    ("9.0", 208): "AMD Instinct MI250",
    ("9.0", 110): "AMD Instinct MI250X (one GCD)",
    ("9.0", 104): "AMD Instinct MI250 (one GCD)",
    ("9.0", 120): "AMD Instinct MI100",
}
_GFX = {"gfx942": "9.4", "gfx941": "9.4", "gfx940": "9.4", "gfx90a": "9.0", "gfx908": "9.0"}


def inferred_name(props: dict[str, Any]) -> str | None:
    """The device's product name from its properties, or None when they do not say."""
    name = str(props.get("name") or "").strip()
    if name:
        return name
    if props.get("warpSize") != 64 and not props.get("gcnArchName"):
        return None  # not an AMD device, or nothing to go on
    gfx = str(props.get("gcnArchName") or "").split(":")[0].lower()
    cc = _GFX.get(gfx)
    if cc is None and "computeMajor" in props and "computeMinor" in props:
        cc = f"{props['computeMajor']}.{props['computeMinor']}"
    sms = props.get("numSms")
    product = _AMD_BY_CU.get((cc or "", sms)) if isinstance(sms, int) else None
    if product:
        return product
    if gfx:
        return f"AMD GPU ({gfx})"
    return None


# The properties a device without its own entry can take from its identical siblings.
_SHARED = ("numSms", "totalGlobalMem", "computeMajor", "computeMinor", "warpSize", "gcnArchName")


def host_model(props_by_id: dict[int, dict[str, Any]]) -> str | None:
    """The one model all listed GPUs share, if they do."""
    names = {inferred_name(p) for p in props_by_id.values()}
    names.discard(None)
    return names.pop() if len(names) == 1 else None


def host_properties(props_by_id: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """The properties every listed GPU shares (one model, one configuration), else None."""
    model = host_model(props_by_id)
    if model is None:
        return None
    shapes = {tuple(p.get(k) for k in _SHARED) for p in props_by_id.values()}
    if len(shapes) != 1:
        return None
    shared = dict(zip(_SHARED, shapes.pop(), strict=True))
    return {"name": model} | {k: v for k, v in shared.items() if v is not None}
