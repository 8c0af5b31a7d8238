"""A naive and a tuned variant of the same decode loop, for checking ``tracelens diff``.

Each token does the same work: one GEMM and 30 tiny elementwise kernels.

- naive: FP32 GEMM (200 us, no tensor cores); ``next_token.item()`` after the GEMM blocks
  the host until it finishes; then 30 ``aten::add`` are launched one by one, each launch
  (5 us) slower than its 3 us kernel. The host paces the GPU: 470 us per token.
- tuned: bf16 GEMM (100 us); no per-token ``.item()``; the 30 adds replayed from a CUDA
  graph (one ``cudaGraphLaunch``). The host runs ahead (150 us per token) and the GPU
  works back to back: 190 us per token.

Kernel start is ``max(launch call start + 4 us, end of the previous GPU work)``, a single
in-order stream, so the timelines follow from the constants.
"""

from __future__ import annotations

from tracelens.testing.planted_host import ADD_KERNEL, BF16_GEMM
from tracelens.testing.scenario import ApiCall, Kernel, Scenario

US = 1_000
FP32_GEMM = "ampere_sgemm_64x64_nn"
LAUNCH_LATENCY = 4 * US
TINY = 30


def decode_naive(tokens: int = 64) -> Scenario:
    sc = Scenario(name="planted_decode_naive")
    free = 0
    for k in range(tokens):
        t = k * 470 * US
        mm = sc.op("aten::mm", t, 20 * US, [[8, 4096], [4096, 4096]])
        free = max(t + 10 * US, free) + 200 * US
        sc.launch(mm, FP32_GEMM, t + 2 * US, free - 200 * US, 200 * US, api_dur_ns=5 * US)
        item = sc.op("aten::item", t + 20 * US, 200 * US)
        lsd = sc.op("aten::_local_scalar_dense", t + 22 * US, 196 * US)
        sc.copy(lsd, "DtoH", "device", "pageable", 8, t + 25 * US, free, 2 * US, 188 * US)
        free += 2 * US
        sc.api("cudaStreamSynchronize", t + 214 * US, 2 * US)
        assert item.start_ns + item.dur_ns >= t + 216 * US >= free
        for i in range(TINY):
            s = t + 220 * US + i * 8 * US
            add = sc.op("aten::add", s, 7 * US, [[8, 4096], [8, 4096]])
            start = max(s + 1 * US + LAUNCH_LATENCY, free)
            sc.launch(add, ADD_KERNEL, s + 1 * US, start, 3 * US, api_dur_ns=5 * US)
            free = start + 3 * US
    sc.expected = {
        "window_ns": (tokens - 1) * 470 * US + 450 * US,
        "kernel_count": tokens * (TINY + 1),
    }
    return sc


def decode_tuned(tokens: int = 64) -> Scenario:
    sc = Scenario(name="planted_decode_tuned")
    free = 0
    for k in range(tokens):
        t = k * 150 * US
        mm = sc.op("aten::mm", t, 20 * US, [[8, 4096], [4096, 4096]], types=["c10::BFloat16"] * 2)
        start = max(t + 2 * US + LAUNCH_LATENCY, free)
        sc.launch(mm, BF16_GEMM, t + 2 * US, start, 100 * US, api_dur_ns=5 * US)
        free = start + 100 * US
        replay = sc.op("CUDAGraph.replay", t + 20 * US, 20 * US)
        corr = sc.next_id()
        sc.api_calls.append(
            ApiCall(
                "cudaGraphLaunch", t + 22 * US, 10 * US, sc.pid, sc.tid, corr, replay.external_id
            )
        )
        for _ in range(TINY):
            sc.kernels.append(Kernel(ADD_KERNEL, free, 3 * US, corr))
            free += 3 * US
    sc.expected = {
        "window_ns": tokens * 190 * US,
        "kernel_count": tokens * (TINY + 1),
    }
    return sc
