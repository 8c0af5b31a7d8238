"""A small decoder-only transformer with a KV cache, random weights, for traced workloads.

Two KV-cache layouts, so the naive serving variant can plant a real problem:

- ``SlotCache`` (tuned): keys and values preallocated per slot up to ``max_len``; a step
  writes one position in place and batched attention masks positions past each length;
- ``ConcatCache`` (naive): one growing tensor per request, extended with ``torch.cat``
  every step (a full copy of the cache each token: cost grows with the sequence).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = 512
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    max_len: int = 512

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model),
            nn.GELU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model),
        )

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.cfg.n_heads, self.cfg.head_dim).transpose(1, 2)

    def qkv_heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)

    def finish(self, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = attn.shape
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, self.cfg.d_model))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, cfg: ModelConfig, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

    def embed_at(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.embed(tokens) + self.pos(positions)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln_f(x))


class SlotCache:
    """Preallocated keys/values: [layers][slots, heads, max_len, head_dim], lengths per slot."""

    def __init__(self, cfg: ModelConfig, slots: int, device: torch.device) -> None:
        shape = (slots, cfg.n_heads, cfg.max_len, cfg.head_dim)
        self.k = [torch.zeros(shape, device=device) for _ in range(cfg.n_layers)]
        self.v = [torch.zeros(shape, device=device) for _ in range(cfg.n_layers)]
        self.lengths = [0] * slots


class ConcatCache:
    """One request's keys/values, grown by concatenation: [layers] of [1, heads, len, dim]."""

    def __init__(self, cfg: ModelConfig) -> None:
        self.k: list[torch.Tensor | None] = [None] * cfg.n_layers
        self.v: list[torch.Tensor | None] = [None] * cfg.n_layers
        self.length = 0


def to_device(values: list[int], dev: torch.device) -> torch.Tensor:
    """Small per-step index tensors, staged in pinned memory and copied asynchronously."""
    t = torch.tensor(values, dtype=torch.long)
    return t.pin_memory().to(dev, non_blocking=True) if dev.type == "cuda" else t


@torch.no_grad()
def prefill_slot(model: TinyLM, cache: SlotCache, slot: int, prompt: torch.Tensor) -> torch.Tensor:
    """Run one prompt ([t] token ids on the model's device) into ``slot``; next-token logits."""
    t = prompt.shape[0]
    x = model.embed_at(prompt[None], torch.arange(t, device=prompt.device)[None])
    for layer, block in enumerate(model.blocks):
        q, k, v = block.qkv_heads(x)
        cache.k[layer][slot, :, :t] = k[0]
        cache.v[layer][slot, :, :t] = v[0]
        x = block.finish(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    cache.lengths[slot] = t
    return model.logits(x[:, -1])[0]


@torch.no_grad()
def decode_slots(
    model: TinyLM, cache: SlotCache, slots: list[int], tokens: torch.Tensor
) -> torch.Tensor:
    """One batched decode step for ``slots`` with their last tokens ([b]); logits [b, vocab]."""
    dev = tokens.device
    lengths = [cache.lengths[s] for s in slots]
    longest = max(lengths) + 1
    idx, pos = to_device(slots, dev), to_device(lengths, dev)
    x = model.embed_at(tokens[:, None], pos[:, None])
    # Each row may attend to its own cached positions and the new one, nothing beyond.
    mask = torch.arange(longest, device=dev)[None, :] <= pos[:, None]
    mask = mask[:, None, None, :]
    for layer, block in enumerate(model.blocks):
        q, k, v = block.qkv_heads(x)
        cache.k[layer][idx, :, pos] = k[:, :, 0]
        cache.v[layer][idx, :, pos] = v[:, :, 0]
        keys = cache.k[layer][idx, :, :longest]
        values = cache.v[layer][idx, :, :longest]
        x = block.finish(x, F.scaled_dot_product_attention(q, keys, values, attn_mask=mask))
    for s in slots:
        cache.lengths[s] += 1
    return model.logits(x[:, 0])


@torch.no_grad()
def step_concat(model: TinyLM, cache: ConcatCache, tokens: torch.Tensor) -> torch.Tensor:
    """Prefill (``tokens`` [t]) or decode (``tokens`` [1]) one request, growing its cache."""
    t = tokens.shape[0]
    start = cache.length
    pos = torch.arange(start, start + t, device=tokens.device)
    x = model.embed_at(tokens[None], pos[None])
    for layer, block in enumerate(model.blocks):
        q, k, v = block.qkv_heads(x)
        old_k, old_v = cache.k[layer], cache.v[layer]
        k_all = k if old_k is None else torch.cat([old_k, k], dim=2)
        v_all = v if old_v is None else torch.cat([old_v, v], dim=2)
        cache.k[layer], cache.v[layer] = k_all, v_all
        scale = 1.0 / math.sqrt(model.cfg.head_dim)
        scores = (q @ k_all.transpose(-1, -2)) * scale
        if t > 1:
            causal = torch.ones(t, start + t, device=tokens.device, dtype=torch.bool).tril(start)
            scores = scores.masked_fill(~causal, float("-inf"))
        x = block.finish(x, scores.softmax(-1) @ v_all)
    cache.length += t
    return model.logits(x[:, -1])[0]
