"""What one token of a paged KV cache weighs per layer, read off an attention call's inputs."""

from __future__ import annotations

import json

import pytest

from tracelens.analyzers.paged_attention_cost import kv_token_bytes


def _call(shapes: list, types: list[str]) -> tuple[str, str]:
    return json.dumps(shapes), json.dumps(types)


@pytest.mark.parametrize(
    ("shapes", "types", "token_bytes"),
    [
        # SGLang: query, workspace, output, then the K and V pools (page size 1)
        (
            [[32, 32, 128], [10905190400], [32, 32, 128], [835874, 1, 8, 128], [835874, 1, 8, 128]],
            ["c10::BFloat16", "unsigned char", "c10::BFloat16", "c10::BFloat16", "c10::BFloat16"],
            2 * 8 * 128 * 2,
        ),
        # pages of 16 tokens, an FP8 cache: one byte an element
        (
            [[8, 32, 128], [4096, 16, 8, 128], [4096, 16, 8, 128]],
            ["c10::BFloat16", "c10::Float8_e4m3fn", "c10::Float8_e4m3fn"],
            2 * 8 * 128,
        ),
    ],
)  # fmt: skip
def test_a_k_and_a_v_pool_give_the_bytes_of_a_token(
    shapes: list, types: list[str], token_bytes: int
) -> None:
    got = kv_token_bytes(*_call(shapes, types))
    assert got is not None and got[0] == token_bytes
    assert "token slots" in got[1]


@pytest.mark.parametrize(
    ("shapes", "types"),
    [
        # vLLM's attention operator: query, key and value of the new tokens only
        ([[32, 64, 64], [32, 8, 64], [32, 8, 64], [32, 64, 64]], ["c10::BFloat16"] * 4),
        # two equal 4-D activations of a small batch are no pool
        ([[2, 16, 8, 128], [2, 16, 8, 128]], ["c10::BFloat16"] * 2),
        # a pool of a dtype with no known size
        ([[835874, 1, 8, 128], [835874, 1, 8, 128]], ["c10::Float4_e2m1fn_x2"] * 2),
    ],
)
def test_no_pool_no_bytes(shapes: list, types: list[str]) -> None:
    assert kv_token_bytes(*_call(shapes, types)) is None
