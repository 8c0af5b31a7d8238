"""FLOPs and bytes of an operator call from its recorded input shapes and dtypes.

The PyTorch profiler records each operator's input shapes and dtypes (``record_shapes``);
from them the work of the operators that dominate GPU time follows by arithmetic:

- ``mm`` [M,K]x[K,N]: 2·M·K·N FLOPs; ``addmm``/``baddbmm`` add M·N for the bias; ``bmm``
  [B,M,K]x[B,K,N]: 2·B·M·K·N; ``linear`` x[...,K], w[N,K]: 2·prod(x[:-1])·K·N;
  ``matmul``: broadcast batch dims times 2·M·K·N (vectors as in ``torch.matmul``).
- convolution x[N,C,H,W], w[Co,C/g,kh,kw], output [N,Co,Ho,Wo]: 2·N·Co·Ho·Wo·(C/g)·kh·kw.
  The output's spatial size needs stride and padding, which the shapes do not record; the
  caller passes it (from the next operator's input) or gets no estimate.
  ``convolution_backward`` [grad_out, x, w]: twice the forward (input and weight grads);
  ``cudnn_convolution_backward_input``: the forward's FLOPs; ``…_backward_weight`` too,
  with the weight's shape from the backward operator around it.
- attention q[B,H,L,d], k[B,H,S,d], v[B,H,S,dv]: 2·B·H·P·(d + dv) for QKᵀ and PV over
  the P query-key pairs it computes: L·S without a mask; with a causal one (the call's
  recorded ``is_causal``, or ``_efficient_attention_forward``'s mask type) the pairs on
  and below the diagonal, L(L+1)/2 for a square one, aligned at the top left as PyTorch's
  ``is_causal`` is (or the bottom right, mask type 2). Where the flag is not recorded the
  count is that of no mask, an upper bound for a causal call. ``_flash_attention_forward``
  and ``_efficient_attention_forward`` take [B,L,H,d].
- softmax, layer/RMS/batch norm and elementwise ops are memory-bound: bytes are the tensor
  inputs plus the output (the broadcast of the inputs; in-place ops write their first input).

Bytes are the compulsory traffic: every input read once and the output written once.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

# Recorded dtype names -> (our dtype key, bytes per element).
_DTYPES: dict[str, tuple[str, int]] = {
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Half": ("fp16", 2),
    "half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2),
    "bfloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "long int": ("int64", 8),
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8),
}

MATMUL, CONV, ATTENTION, MEMORY = "matmul", "conv", "attention", "memory"

# Operators that route tokens to experts, by name (vLLM's moe_forward, SGLang's and
# others' fused_moe / experts): their weights are read through their callees.
MOE_OPERATOR = re.compile(r"(?i)moe|expert")

_MM = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul"}
_CONV = {
    "aten::convolution",
    "aten::_convolution",
    "aten::cudnn_convolution",
    "aten::conv2d",
    "aten::conv1d",
    "aten::conv3d",
    "aten::miopen_convolution",
}
# Backward layouts: convolution_backward [grad_out, x, w] and cudnn_convolution_backward
# [x, grad_out, w] compute both gradients; cudnn_convolution_backward_input
# [x_size, grad_out, w] the input gradient only (as many FLOPs as the forward). The weight
# gradient, cudnn_convolution_backward_weight [w_size, grad_out, x], records no kernel size
# (its w_size is an int list, recorded empty): its caller passes the weight's shape from
# the backward operator around it, else there is no estimate.
_CONV_BWD = {
    "aten::convolution_backward": (0, 1, 2, 2.0),
    "aten::cudnn_convolution_backward": (1, 0, 2, 2.0),
}
_CONV_BWD_INPUT = {
    "aten::cudnn_convolution_backward_input",
    "aten::miopen_convolution_backward_input",
}
CONV_BWD_WEIGHT = (
    "aten::cudnn_convolution_backward_weight",
    "aten::miopen_convolution_backward_weight",
)
# The backward operators whose third input is the weight, around a weight-gradient call.
CONV_BWD_WITH_WEIGHT = (
    "aten::convolution_backward",
    "aten::cudnn_convolution_backward",
    "aten::miopen_convolution_backward",
)
_SDPA_BHLD = re.compile(r"^aten::(scaled_dot_product_attention|_scaled_dot_product_\w+)$")
_SDPA_BLHD = {"aten::_flash_attention_forward", "aten::_efficient_attention_forward"}
# Where each attention operator's schema puts ``is_causal`` among its arguments (the
# profiler records scalars as text in "Concrete Inputs", tensors as ""); an overload that
# puts another argument there is caught by its value not being a boolean.
_IS_CAUSAL_AT = {
    "aten::scaled_dot_product_attention": 5,
    "aten::_scaled_dot_product_attention_math": 5,
    "aten::_scaled_dot_product_flash_attention": 4,
    "aten::_scaled_dot_product_flash_attention_for_cpu": 4,
    "aten::_scaled_dot_product_efficient_attention": 6,
    "aten::_scaled_dot_product_cudnn_attention": 6,
    "aten::_flash_attention_forward": 8,
}
# _efficient_attention_forward's custom_mask_type: 0 none, 1 causal from the top left,
# 2 causal from the bottom right.
_MASK_TYPE_AT = ("aten::_efficient_attention_forward", 9)
ATTENTION_OPS = (*_IS_CAUSAL_AT, _MASK_TYPE_AT[0])
_SOFTMAX = {"aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax"}
_NORM = {
    "aten::layer_norm",
    "aten::native_layer_norm",
    "aten::rms_norm",
    "aten::_fused_rms_norm",
    "aten::group_norm",
    "aten::native_group_norm",
    "aten::batch_norm",
    "aten::native_batch_norm",
    "aten::cudnn_batch_norm",
    "aten::_batch_norm_impl_index",
}
_ELEMENTWISE = re.compile(
    r"^aten::(add|sub|mul|div|rsub|neg|relu|gelu|silu|sigmoid|tanh|exp|log|sqrt|rsqrt|pow|"
    r"abs|clamp|clamp_min|threshold|where|masked_fill|dropout|native_dropout|copy|"
    r"_to_copy|fill|zero|hardtanh|leaky_relu|mish|erf|cos|sin|maximum|minimum|addcmul|"
    r"addcdiv|lerp|square|reciprocal|sign|eq|ne|lt|gt|le|ge|logical_and|logical_or)_?$"
)


@dataclass(frozen=True)
class OpCost:
    kind: str  # matmul | conv | attention | memory
    flops: float
    bytes: float
    dtype: str  # fp32, bf16, ... of the first tensor input
    # A matrix multiply's inner and output dimensions (K, N): the ones tensor cores want in
    # multiples (M is the rows, the tokens of a batch, which no model setting pads).
    kn: tuple[int, int] | None = None
    # A fused attention call's keys, whether its mask is causal, and its head dimension:
    # what its rate depends on besides the GPU (``attention_rate_share``).
    attention: AttentionShape | None = None


@dataclass(frozen=True)
class AttentionShape:
    keys: int
    causal: bool
    head_dim: int


# FlashAttention's forward rate against its long-sequence plateau, from FlashAttention-2's
# published forward benchmarks (A100, head dims 64 and 128): with a causal mask about half
# of it at 512 keys, 70 % at 1k and 85 % at 2k (keys / (keys + 400)); without a mask about
# 80 % at 512 keys and flat from 1k (keys / (keys + 100)). Short sequences leave each tile
# of queries few keys to amortise its loads and its softmax over; a causal mask halves that
# again. Heads of 64 run at about 0.85 of heads of 128 (half the math per byte moved).
_HALF_RATE_KEYS_CAUSAL = 400
_HALF_RATE_KEYS = 100
_SMALL_HEAD_SHARE = 0.85


def attention_rate_share(shape: AttentionShape) -> float:
    """The share of a fused attention kernel's long-sequence rate a call of this shape
    reaches: 1.0 for long sequences of heads of 128 or more."""
    half = _HALF_RATE_KEYS_CAUSAL if shape.causal else _HALF_RATE_KEYS
    share = shape.keys / (shape.keys + half) if shape.keys > 0 else 1.0
    return share * (_SMALL_HEAD_SHARE if 0 < shape.head_dim <= 64 else 1.0)


def parse_list(text: str | None) -> list:
    if not text:
        return []
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return []
    return value if isinstance(value, list) else []


def dtype_of(name: str | None) -> tuple[str, int] | None:
    return _DTYPES.get((name or "").strip())


def tensor_bytes(shape: list[int] | tuple[int, ...], dtype: str | None) -> int:
    """Bytes of a tensor of ``shape`` and recorded ``dtype``; 0 where the dtype is unknown."""
    size = dtype_of(dtype)
    return math.prod(shape) * size[1] if size else 0


def _numel(shape: list) -> int:
    return math.prod(int(x) for x in shape) if shape else 1


def _tensor_dtype(shape: object, dtype: object) -> tuple[str, int] | None:
    """(dtype, element size) of a recorded argument that is a tensor of a known type."""
    if not isinstance(shape, list):
        return None
    return dtype_of(dtype if isinstance(dtype, str) else None)


def _broadcast(shapes: list[list[int]]) -> list[int]:
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        out.append(max(dims) if dims else 1)
    return out


def _mm_dims(a: list[int], b: list[int]) -> tuple[int, int, int, int] | None:
    """(batch, M, K, N) of ``torch.matmul(a, b)``; None when the shapes do not multiply."""
    if not a or not b:
        return None
    a2 = [1, *a] if len(a) == 1 else list(a)
    b2 = [*b, 1] if len(b) == 1 else list(b)
    m, k = a2[-2], a2[-1]
    k2, n = b2[-2], b2[-1]
    if k != k2:
        return None
    batch = _numel(_broadcast([a2[:-2], b2[:-2]])) if (a2[:-2] or b2[:-2]) else 1
    return batch, m, k, n


def attention_lengths(name: str, shapes: list) -> tuple[int, int] | None:
    """The query and key/value lengths (L, S) of an attention call from its shapes; None
    for other operators or shapes that do not say."""
    if not (_SDPA_BHLD.match(name) or name in _SDPA_BLHD) or len(shapes) < 2:
        return None
    q, k = shapes[0], shapes[1]
    if not (isinstance(q, list) and isinstance(k, list) and len(q) == 4 and len(k) == 4):
        return None
    return (q[1], k[1]) if name in _SDPA_BLHD else (q[2], k[2])


def causal_alignment(name: str, scalars: list) -> str | None:
    """``top_left`` or ``bottom_right`` where an attention call's recorded arguments say
    its mask is causal, ``none`` where they say it has none, None where they do not say."""
    if name in _IS_CAUSAL_AT:
        at = _IS_CAUSAL_AT[name]
        value = scalars[at] if len(scalars) > at else None
        return {"True": "top_left", "False": "none"}.get(value) if isinstance(value, str) else None
    if name == _MASK_TYPE_AT[0]:
        at = _MASK_TYPE_AT[1]
        value = scalars[at] if len(scalars) > at else None
        kinds = {"0": "none", "1": "top_left", "2": "bottom_right"}
        return kinds.get(value) if isinstance(value, str) else None
    return None


def _attended_pairs(lq: int, s: int, alignment: str | None) -> int:
    """Query-key pairs an attention of ``lq`` queries over ``s`` keys computes."""
    if alignment == "top_left":  # query i sees keys 0..i
        return lq * (lq + 1) // 2 if s >= lq else s * (s + 1) // 2 + (lq - s) * s
    if alignment == "bottom_right":  # query i sees keys 0..s-lq+i
        return lq * (s - lq) + lq * (lq + 1) // 2 if s >= lq else s * (s + 1) // 2
    return lq * s


def op_cost(
    name: str,
    shapes: list,
    types: list,
    conv_out_spatial: list[int] | None = None,
    weight: list | None = None,
    scalars: list | None = None,
) -> OpCost | None:
    """The FLOPs and bytes of one call of ``name``; None where the shapes do not say.

    ``weight``: a weight-gradient call's weight shape, from the operator around it.
    ``scalars``: the call's recorded scalar arguments (an attention call's mask)."""
    pairs = zip(shapes, types, strict=False)
    tensors = [(s, d) for s, t in pairs if (d := _tensor_dtype(s, t)) is not None]
    if not tensors:
        return None
    dtype, es = tensors[0][1]
    try:
        if name in CONV_BWD_WEIGHT:
            return _weight_grad(shapes, weight, dtype, es)
        return _cost(name, shapes, types, tensors, dtype, es, conv_out_spatial, scalars or [])
    except (IndexError, TypeError, ValueError):
        return None


def _weight_grad(shapes: list, w: list | None, dtype: str, es: int) -> OpCost | None:
    """A convolution's weight gradient [w_size, grad_out, x] given the weight's shape: as
    many FLOPs as the forward; reads grad_out and x, writes grad_w."""
    grad, x = shapes[1], shapes[2]
    if not w or len(grad) < 3 or not (len(grad) == len(x) == len(w)):
        return None
    if grad[0] != x[0] or grad[1] != w[0]:
        return None
    macs = grad[0] * w[0] * _numel(grad[2:]) * w[1] * _numel(w[2:])
    return OpCost(CONV, 2.0 * macs, float((_numel(grad) + _numel(x) + _numel(w)) * es), dtype)


def _cost(name, shapes, types, tensors, dtype, es, conv_out_spatial, scalars) -> OpCost | None:
    def nbytes(shape: list[int], size: int = es) -> int:
        return _numel(shape) * size

    if name in _MM:
        if name in ("aten::addmm", "aten::baddbmm"):
            bias, a, b = shapes[0], shapes[1], shapes[2]
        else:
            bias, a, b = None, shapes[0], shapes[1]
        if name == "aten::linear":
            if len(b) != 2:
                return None
            rows = _numel(a[:-1])
            k, n = a[-1], b[0]
            if b[1] != k:
                return None
            flops = 2.0 * rows * k * n
            out = rows * n
            bias_el = _numel(shapes[2]) if len(shapes) > 2 and shapes[2] else 0
            return OpCost(
                MATMUL,
                flops + (out if bias_el else 0),
                (rows * k + k * n + out + bias_el) * es,
                dtype,
                (int(k), int(n)),
            )
        if name in ("aten::bmm", "aten::baddbmm") and (len(a) != 3 or len(b) != 3 or a[0] != b[0]):
            return None
        if name in ("aten::mm", "aten::addmm") and (len(a) != 2 or len(b) != 2):
            return None
        dims = _mm_dims(a, b)
        if dims is None:
            return None
        batch, m, k, n = dims
        out = batch * m * n
        flops = 2.0 * batch * m * k * n + (out if bias is not None else 0)
        moved = nbytes(a) + nbytes(b) + out * es + (nbytes(bias) if bias else 0)
        return OpCost(MATMUL, flops, moved, dtype, (int(k), int(n)))
    if name in _CONV_BWD_INPUT:
        grad, w = shapes[1], shapes[2]
        if len(grad) < 3 or len(w) != len(grad) or grad[1] != w[0]:
            return None
        macs = grad[0] * w[0] * _numel(grad[2:]) * w[1] * _numel(w[2:])
        # reads grad_out and w, writes grad_in (at least: at the output's spatial size)
        x_el = grad[0] * w[1] * _numel(grad[2:])
        return OpCost(CONV, 2.0 * macs, float((_numel(grad) + _numel(w) + x_el) * es), dtype)
    if name in _CONV or name in _CONV_BWD:
        if name in _CONV_BWD:
            gi, xi, wi, factor = _CONV_BWD[name]
            grad, x, w = shapes[gi], shapes[xi], shapes[wi]
            out_spatial = grad[2:]
        else:
            x, w = shapes[0], shapes[1]
            out_spatial = conv_out_spatial
            factor = 1.0
        if not out_spatial or len(x) < 3 or len(w) != len(x) or len(out_spatial) != len(x) - 2:
            return None
        n, co = x[0], w[0]
        macs = n * co * _numel(out_spatial) * w[1] * _numel(w[2:])
        out = n * co * _numel(out_spatial)
        moved = (nbytes(x) + nbytes(w) + out * es) * (1.5 if factor > 1 else 1.0)
        return OpCost(CONV, factor * 2.0 * macs, moved, dtype)
    if _SDPA_BHLD.match(name) or name in _SDPA_BLHD:
        q, k, v = shapes[0], shapes[1], shapes[2]
        if len(q) != 4 or len(k) != 4 or len(v) != 4:
            return None
        if name in _SDPA_BLHD:  # [B, L, H, d]
            b, lq, h, d = q
            s, dv = k[1], v[3]
        else:  # [B, H, L, d]
            b, h, lq, d = q
            s, dv = k[2], v[3]
        alignment = causal_alignment(name, scalars)
        pairs = _attended_pairs(lq, s, alignment)
        flops = 2.0 * b * h * pairs * (d + dv)
        moved = nbytes(q) + nbytes(k) + nbytes(v) + b * h * lq * dv * es
        causal = alignment in ("top_left", "bottom_right")
        return OpCost(ATTENTION, flops, moved, dtype, attention=AttentionShape(s, causal, d))
    if name in _SOFTMAX:
        x = shapes[0]
        return OpCost(MEMORY, 5.0 * _numel(x), 2.0 * nbytes(x), dtype)
    if name in _NORM:
        x = shapes[0]
        params = sum(nbytes(s, dt[1]) for s, dt in tensors[1:])
        return OpCost(MEMORY, 8.0 * _numel(x), 2.0 * nbytes(x) + params, dtype)
    if _ELEMENTWISE.match(name):
        ins = [(s, dt) for s, dt in tensors if s]
        if not ins:
            return None
        read = sum(nbytes(s, dt[1]) for s, dt in ins)
        if name.endswith("_") and not name.endswith("__"):
            out_el = _numel(ins[0][0])
        else:
            out_el = _numel(_broadcast([s for s, _ in ins]))
        return OpCost(MEMORY, float(out_el), float(read + out_el * es), dtype)
    return None
