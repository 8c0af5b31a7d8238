"""Host reads a framework makes on the model's behalf, and what removes them.

Hugging Face transformers checks before each SDPA call whether the attention mask is all
ones (`torch.all(mask == 1)`), so it can drop it: a blocking read of a GPU value in every
forward. The sync-stall finding names it where the read blocks; the idle finding names it
where it runs in the refill after a harness's own sync had emptied the queue (found empty,
it costs its own time only).
"""

from __future__ import annotations

import re

# By the Python function that makes the read, what removes it. A decoder's causal path
# (`_ignore_causal_mask_sdpa`) checks the mask it was given; an encoder's
# (`_prepare_4d_attention_mask_for_sdpa`, BERT) builds an all-ones mask when given none
# and checks that all the same, so `attention_mask=None` removes only the first.
_KNOWN_READS = (
    (
        re.compile(
            r"transformers/modeling_attn_mask_utils\.py\(\d+\): "
            r"(_ignore_causal_mask_sdpa|_prepare_4d_causal_attention_mask\w*)"
        ),
        "The read is transformers' own: before SDPA attention it checks whether the 2D "
        "attention mask is all ones (`torch.all(mask == 1)`) so it can drop it, a host read "
        "of a GPU value per forward. Where every mask is all ones (no padding), passing "
        "`attention_mask=None` skips it and keeps SDPA's causal path. transformers also "
        "skips it under `torch.compile` and tracing, and where the model is given a 4D "
        "mask, but then passes SDPA an explicit mask, which can rule out the flash kernel "
        "a causal call gets.",
    ),
    (
        re.compile(
            r"transformers/modeling_attn_mask_utils\.py\(\d+\): "
            r"_prepare_4d\w*attention_mask\w*"
        ),
        "The read is transformers' own: before SDPA attention it checks whether the 2D "
        "attention mask is all ones (`torch.all(mask == 1)`) so it can drop it, a host read "
        "of a GPU value per forward. An encoder such as BERT builds an all-ones mask when "
        "given none and checks it all the same, so `attention_mask=None` does not skip it; "
        "only `torch.compile` and tracing do, or a 4D mask given to the model, which SDPA "
        "then applies (ruling out its flash kernel). It is one read a forward: worth "
        "removing only where it empties a queue that would otherwise stay full.",
    ),
)


def known_host_read_advice(frame: str | None) -> str:
    """What removes a host read a library makes inside ``frame``; empty if none known."""
    for pattern, advice in _KNOWN_READS:
        if frame and pattern.search(frame):
            return advice
    return ""
