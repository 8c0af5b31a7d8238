"""Whether a GEMM operator's recorded shapes already suit tensor and matrix cores.

cuBLAS and cuDNN pick their fastest tensor-core kernels where a matrix multiply's inner
(K) and output (N) dimensions are multiples of 16 bytes of its type: 8 elements of a
16-bit type, 16 of an 8-bit one (NVIDIA's *Matrix Multiplication Background* guide);
on AMD GPUs the advice has long said 16. M, the rows of a forward GEMM (a batch's tokens),
is no leading dimension there; in a weight gradient the tokens are K, and then the batch is
what to pad. "Keep dimensions multiples of 8" is advice only where the
shapes say otherwise, or do not say: where every costed call's K and N already are, it
is boilerplate, and where one is not, the advice names it (a vocabulary of 50,257 is the
classic: padded to 50,304).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Unaligned calls up to this share of an operator's GEMM time are noise, not a lever.
_NEGLIGIBLE_SHARE = 0.05


def required_multiple(dtype: str, amd: bool) -> int:
    """The multiple K and N should be for a GEMM of ``dtype`` once on tensor/matrix cores
    (FP32 data is advised to a 16-bit type, so it is judged as one)."""
    if amd or dtype in ("fp8", "int8"):
        return 16
    return 8


def off_multiple(kn: tuple[int, int], multiple: int) -> str | None:
    """``"N = 50257"`` (or K) where a dimension is not a multiple of ``multiple``."""
    k, n = kn
    if n % multiple:
        return f"N = {n}"
    if k % multiple:
        return f"K = {k}"
    return None


@dataclass(frozen=True)
class GemmDims:
    """An operator's GEMM calls whose K and N its recorded shapes give."""

    known_ns: int  # their kernel time
    unaligned_ns: int  # kernel time of those with K or N off the multiple
    multiple: int
    example: str | None  # the first such call's dimension, e.g. "N = 50257"

    @property
    def aligned(self) -> bool:
        return self.known_ns > 0 and self.unaligned_ns <= _NEGLIGIBLE_SHARE * self.known_ns


def combined(dims: Iterable[GemmDims | None]) -> GemmDims | None:
    """Several operators' GEMM dimensions as one (an advice covering them all)."""
    known = [d for d in dims if d is not None and d.known_ns > 0]
    if not known:
        return None
    return GemmDims(
        sum(d.known_ns for d in known),
        sum(d.unaligned_ns for d in known),
        max(d.multiple for d in known),
        next((d.example for d in known if d.example), None),
    )


def dims_clause(dims: GemmDims | None, multiple: str) -> str | None:
    """The clause of GEMM advice about dimensions: the general rule where the shapes do not
    say (``multiple``, as worded for the GPU: "8", "8/16", "16"), none where they are
    already multiples, and the dimension to pad where they are not."""
    if dims is None or dims.known_ns <= 0:
        return f"keep GEMM dimensions multiples of {multiple}"
    if dims.aligned:
        return None
    share = 100.0 * dims.unaligned_ns / dims.known_ns
    example = f" ({dims.example} is not)" if dims.example else ""
    # K is the token count where a weight gradient reduces over the batch: then the batch
    # is what to pad (`pad_to_multiple_of` in a tokenizer), not a weight
    return (
        f"pad GEMM dimensions to multiples of {dims.multiple}{example}: calls off that "
        f"multiple hold {share:.0f}% of the GEMM time; pad the model dimension (a "
        "vocabulary, a hidden size), or the batch's tokens where they are the dimension"
    )
