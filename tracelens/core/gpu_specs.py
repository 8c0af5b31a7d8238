"""What a GPU can do: architecture, tensor-core data types, and peak rates.

Advice and impact estimates depend on the GPU: TF32 does not exist before Ampere, BF16
not on Volta or Turing, FP8 only from Ada/Hopper (and CDNA3 on AMD). Peaks are dense
(no structured sparsity) figures from the vendors' public spec sheets, in TFLOP/s and
GB/s. A GPU not in the table is judged by its architecture (compute capability, or AMD's
gfx target), with generic figures for that architecture, and the report says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Peaks:
    """Dense peak throughput; ``None`` where the GPU has no such unit."""

    fp32: float  # TFLOP/s on CUDA cores / vector ALUs
    fp16: float | None  # tensor-core (matrix) FP16 with FP32 accumulate
    bf16: float | None
    tf32: float | None
    fp8: float | None
    mem_gbps: float


@dataclass(frozen=True)
class Arch:
    vendor: str  # "nvidia" | "amd"
    name: str  # "Volta", "Ampere", "CDNA3", ...
    tensor_dtypes: tuple[str, ...]  # matrix-unit data types
    generic: Peaks  # for a GPU of this architecture not in the table
    # Share of the spec-sheet matrix peak the clocks sustain under a full matrix load. The
    # cost model's efficiencies are calibrated on NVIDIA parts, whose boost clocks hold;
    # MI300X matrix peaks assume a clock it does not hold at full load, and the best
    # hipBLASLt BF16 GEMMs measure about half of the 1307 TFLOP/s sheet figure (public
    # benchmarks, 2024), i.e. 0.7 of what the same efficiency gives elsewhere.
    sustained_matrix: float = 1.0


@dataclass(frozen=True)
class GpuSpec:
    name: str  # what the table calls it ("H100 SXM")
    arch: Arch
    peaks: Peaks
    assumed: str | None = None  # how the spec was chosen when the name did not say
    compute_capability: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def vendor(self) -> str:
        return self.arch.vendor

    def has_tensor(self, dtype: str) -> bool:
        return dtype in self.arch.tensor_dtypes

    def sustained_note(self, tflops: float, math: str) -> str:
        """`` (0.7 of the sheet's 1307: what its matrix cores sustain)`` after a peak of
        ``tflops`` for ``math`` ("bf16 tensor", ...) that is the sheet's figure derated
        (``Arch.sustained_matrix``); nothing where the peak is the sheet's own."""
        sustained = self.arch.sustained_matrix
        if sustained >= 1 or "tensor" not in math:
            return ""
        sheet = tflops / sustained
        return f" ({sustained:g} of the sheet's {sheet:.4g}: what its matrix cores sustain)"


VOLTA = Arch("nvidia", "Volta", ("fp16",), Peaks(14.0, 112.0, None, None, None, 900.0))
TURING = Arch("nvidia", "Turing", ("fp16", "int8"), Peaks(8.1, 65.0, None, None, None, 320.0))
AMPERE_DC = Arch(
    "nvidia", "Ampere", ("tf32", "fp16", "bf16", "int8"), Peaks(19.5, 312, 312, 156, None, 1555)
)
AMPERE = Arch(
    "nvidia", "Ampere", ("tf32", "fp16", "bf16", "int8"), Peaks(30.0, 70, 70, 35, None, 600)
)
ADA = Arch(
    "nvidia", "Ada", ("tf32", "fp16", "bf16", "fp8", "int8"), Peaks(40.0, 120, 120, 60, 240, 500)
)
HOPPER = Arch(
    "nvidia",
    "Hopper",
    ("tf32", "fp16", "bf16", "fp8", "int8"),
    Peaks(67.0, 989, 989, 495, 1979, 3350),
)
BLACKWELL = Arch(
    "nvidia",
    "Blackwell",
    ("tf32", "fp16", "bf16", "fp8", "fp4", "int8"),
    Peaks(80.0, 2250, 2250, 1100, 4500, 8000),
)
CDNA2 = Arch("amd", "CDNA2", ("fp16", "bf16", "int8"), Peaks(47.9, 383, 383, None, None, 3277))
CDNA3 = Arch(
    "amd",
    "CDNA3",
    ("tf32", "fp16", "bf16", "fp8", "int8"),
    Peaks(81.7, 1307, 1307, 654, 2615, 5300),
    sustained_matrix=0.7,
)

# (pattern on the device name, table name, architecture, peaks). First match wins, so
# specific names come before the family patterns.
_TABLE: list[tuple[str, str, Arch, Peaks]] = [
    (r"V100.*PCI", "V100 PCIe", VOLTA, Peaks(14.0, 112, None, None, None, 900)),
    (r"V100", "V100 SXM2", VOLTA, Peaks(15.7, 125, None, None, None, 900)),
    (r"\bT4\b", "T4", TURING, Peaks(8.1, 65, None, None, None, 320)),
    (r"RTX 2080 Ti", "RTX 2080 Ti", TURING, Peaks(13.4, 53.8, None, None, None, 616)),
    (r"RTX 2080", "RTX 2080", TURING, Peaks(10.1, 40.3, None, None, None, 448)),
    (r"RTX 2070", "RTX 2070", TURING, Peaks(7.5, 29.9, None, None, None, 448)),
    (r"RTX 2060", "RTX 2060", TURING, Peaks(6.5, 25.8, None, None, None, 336)),
    (r"A100.*80GB", "A100 80GB", AMPERE_DC, Peaks(19.5, 312, 312, 156, None, 2039)),
    (r"A100", "A100 40GB", AMPERE_DC, Peaks(19.5, 312, 312, 156, None, 1555)),
    (r"\bA10G\b", "A10G", AMPERE, Peaks(31.2, 70, 70, 35, None, 600)),
    (r"\bA10\b", "A10", AMPERE, Peaks(31.2, 125, 125, 62.5, None, 600)),
    (r"RTX A4500", "RTX A4500", AMPERE, Peaks(23.7, 94.6, 94.6, 47.3, None, 640)),
    (r"RTX 3090", "RTX 3090", AMPERE, Peaks(35.6, 71, 71, 35.6, None, 936)),
    (r"RTX 3080", "RTX 3080", AMPERE, Peaks(29.8, 59.5, 59.5, 29.8, None, 760)),
    (r"RTX 3070", "RTX 3070", AMPERE, Peaks(20.3, 40.6, 40.6, 20.3, None, 448)),
    (r"RTX 3060", "RTX 3060", AMPERE, Peaks(12.7, 25.4, 25.4, 12.7, None, 360)),
    (r"\bL4\b", "L4", ADA, Peaks(30.3, 121, 121, 60, 242, 300)),
    (r"L40S", "L40S", ADA, Peaks(91.6, 362, 362, 183, 733, 864)),
    (r"RTX 4090", "RTX 4090", ADA, Peaks(82.6, 165, 165, 82.6, 330, 1008)),
    (r"RTX 4080", "RTX 4080", ADA, Peaks(48.7, 97.5, 97.5, 48.7, 195, 717)),
    (r"RTX 4070", "RTX 4070", ADA, Peaks(29.1, 58.3, 58.3, 29.1, 117, 504)),
    (r"RTX 4060.*Laptop", "RTX 4060 Laptop", ADA, Peaks(11.6, 46, 46, 23, 92, 256)),
    (r"RTX 4060", "RTX 4060", ADA, Peaks(15.1, 60.5, 60.5, 30.2, 121, 272)),
    (r"H200", "H200", HOPPER, Peaks(67.0, 989, 989, 495, 1979, 4800)),
    (r"H100.*PCI", "H100 PCIe", HOPPER, Peaks(51.0, 756, 756, 378, 1513, 2000)),
    (r"H100", "H100 SXM", HOPPER, Peaks(67.0, 989, 989, 495, 1979, 3350)),
    (r"B200", "B200", BLACKWELL, Peaks(80.0, 2250, 2250, 1100, 4500, 8000)),
    (r"MI250X?", "MI250X", CDNA2, Peaks(47.9, 383, 383, None, None, 3277)),
    (r"MI325X", "MI325X", CDNA3, Peaks(81.7, 1307, 1307, 654, 2615, 6000)),
    (r"MI300X", "MI300X", CDNA3, Peaks(81.7, 1307, 1307, 654, 2615, 5300)),
]

_BY_CC: dict[str, Arch] = {
    "7.0": VOLTA,
    "7.2": VOLTA,
    "7.5": TURING,
    "8.0": AMPERE_DC,
    "8.6": AMPERE,
    "8.7": AMPERE,
    "8.9": ADA,
    "9.0": HOPPER,
    "10.0": BLACKWELL,
    "10.3": BLACKWELL,
}
_BY_GFX: dict[str, Arch] = {"gfx90a": CDNA2, "gfx940": CDNA3, "gfx941": CDNA3, "gfx942": CDNA3}


def lookup(
    name: str | None,
    compute_capability: str | None = None,
    sm_count: int | None = None,
    vendor_hint: str | None = None,
    gfx_arch: str | None = None,
) -> GpuSpec | None:
    """The spec of a device from what the trace says about it; None when it says nothing."""
    label = (name or "").strip()
    for pattern, table_name, arch, peaks in _TABLE:
        if label and re.search(pattern, label, re.IGNORECASE):
            return GpuSpec(table_name, arch, peaks, compute_capability=compute_capability)
    gfx = (gfx_arch or "").split(":")[0].lower()
    if gfx in _BY_GFX:
        arch = _BY_GFX[gfx]
        return _generic(label, arch, f"{gfx} ({arch.name})", compute_capability)
    amd = vendor_hint == "amd" or bool(re.search(r"(?i)\b(amd|instinct|radeon|mi\d{3})", label))
    if amd:
        # ROCm reports gfx9.4 as compute capability 9.4; 304 compute units is an MI300X.
        if compute_capability == "9.4":
            if sm_count == 304:
                peaks = next(p for pat, n, _, p in _TABLE if n == "MI300X")
                return GpuSpec(
                    "MI300X",
                    CDNA3,
                    peaks,
                    assumed="gfx9.4 with 304 compute units: an MI300X",
                    compute_capability=compute_capability,
                )
            return _generic(label, CDNA3, "gfx9.4 (CDNA3)", compute_capability)
        if compute_capability == "9.0" and sm_count in (104, 110, 220):
            return _generic(label, CDNA2, "gfx90a (CDNA2)", compute_capability)
        return None
    if compute_capability in _BY_CC:
        arch = _BY_CC[compute_capability]
        return _generic(label, arch, f"compute capability {compute_capability}", compute_capability)
    return None


def _generic(label: str, arch: Arch, basis: str, cc: str | None) -> GpuSpec:
    return GpuSpec(
        label or f"{arch.name} GPU",
        arch,
        arch.generic,
        assumed=f"not in the GPU table; generic {arch.name} figures from its {basis}",
        compute_capability=cc,
    )
