"""Annotated LLM serving scenarios with planted latency problems and hand-computed answers.

``static_launch_bound`` — static batching of 8 requests that all arrive at t = 0, batch 4:

- batch 1 (``q0``-``q3``, 3, 5, 7 and 9 output tokens): prefill 0-2 ms, then decode steps of
  1 ms each from 2 to 10 ms (batch sizes 4, 4, 3, 3, 2, 2, 1, 1);
- batch 2 (``q4``-``q7``, 2 tokens each) waits for all of batch 1: prefill 10-12 ms, one
  decode step 12-13 ms. Queueing: 0 ms for batch 1, 10 ms for batch 2 = 40 ms of the
  56 ms summed TTFT (71.4 %); every request of batch 2 waited through the six under-filled
  decode steps from 4 to 10 ms (static batching);
- every decode step launches 40 kernels of 5 us, one every 20 us: the GPU is busy 200 us of
  each 1 ms step (20 %), 800 us idle per step, 7.2 ms over the 9 decode steps
  (launch-bound); each prefill step runs one 1.8 ms GEMM.

``kv_growth_decode`` — two requests decoding together for 29 steps; step ``k`` (1-based)
lasts 1 ms + 20 us * k: each of the 2 * k generated tokens already in the cache adds 10 us.
Growth cost: 10 us * sum(2k) = 8.7 ms of 37.7 ms of decode (23.1 %).

``prefill_stall`` — request ``b``'s 4 ms prefill runs while ``a`` decodes in 500 us steps:
one of a's inter-token gaps holds it (4.5 ms), the other 11 decode gaps are 500 us.

``prefill_gpu_idle`` — three requests whose 2 ms prefill steps run one 200 us kernel each
(the GPU idle 90 % of prefill time) and whose 1 ms decode steps run an 800 us kernel.
"""

from __future__ import annotations

from tracelens.testing.scenario import Scenario

US = 1_000
MS = 1_000_000


def _decode_kernels(sc: Scenario, start_ns: int, n: int = 40) -> None:
    for i in range(n):
        t = start_ns + 10 * US + i * 20 * US
        sc.launch(None, "void decode_elementwise_kernel<float>()", t - 5 * US, t, 5 * US)


def static_launch_bound() -> Scenario:
    sc = Scenario(name="llm_static_launch_bound")
    outputs = {"q0": 3, "q1": 5, "q2": 7, "q3": 9, "q4": 2, "q5": 2, "q6": 2, "q7": 2}
    t = 0
    for batch in (["q0", "q1", "q2", "q3"], ["q4", "q5", "q6", "q7"]):
        sc.range(f"llm.prefill[{','.join(batch)}]", t, 2 * MS)
        sc.launch(None, "ampere_sgemm_128x64_tn", t + 50 * US, t + 100 * US, 1800 * US)
        t += 2 * MS
        tokens = dict.fromkeys(batch, 1)
        running = [r for r in batch if outputs[r] > 1]
        while running:
            sc.range(f"llm.decode[{','.join(running)}]", t, 1 * MS)
            _decode_kernels(sc, t)
            t += 1 * MS
            for r in running:
                tokens[r] += 1
                if tokens[r] == outputs[r]:
                    sc.range(f"llm.request[{r}]", 0, t)
            running = [r for r in running if tokens[r] < outputs[r]]
    sc.expected = {
        "requests": 8,
        "output_tokens": 32,
        "queue_ns_total": 40 * MS,
        "ttft_ns_total": 56 * MS,
        "queue_mean_ns": 5 * MS,
        "requests_passed_over": 4,
        "decode_steps": 9,
        "decode_ns": 9 * MS,
        "decode_busy_ns": 9 * 200 * US,
        "decode_idle_ns": 9 * 800 * US,
        "decode_kernels_per_step": 40,
        "decode_median_kernel_ns": 5 * US,
        "prefill_busy_ns": 2 * 1800 * US,
    }
    return sc


def kv_growth_decode(steps: int = 29) -> Scenario:
    sc = Scenario(name="llm_kv_growth")
    sc.range("llm.request[g0]", 0, 200 * MS)
    sc.range("llm.request[g1]", 0, 200 * MS)
    sc.range("llm.prefill[g0,g1]", 0, 2 * MS)
    t = 2 * MS
    for k in range(1, steps + 1):
        dur = 1 * MS + 20 * US * k
        sc.range("llm.decode[g0,g1]", t, dur)
        t += dur
    cached = sum(2 * k for k in range(1, steps + 1))
    sc.expected = {
        "decode_steps": steps,
        "ns_per_cached_token": 10 * US,
        "growth_ns": 10 * US * cached,
        "decode_ns": steps * MS + 10 * US * cached,
    }
    return sc


def prefill_stall() -> Scenario:
    sc = Scenario(name="llm_stall")
    sc.range("llm.request[a]", 0, 20 * MS)
    sc.range("llm.request[b]", 3 * MS, 17 * MS)
    sc.range("llm.prefill[a]", 0, 1 * MS)
    t = 1 * MS
    for _ in range(4):
        sc.range("llm.decode[a]", t, 500 * US)
        t += 500 * US
    sc.range("llm.prefill[b]", t, 4 * MS)  # 3 -> 7 ms: a's next token waits 4.5 ms
    t += 4 * MS
    for _ in range(4):
        sc.range("llm.decode[a,b]", t, 500 * US)
        t += 500 * US
    return sc


def prefill_gpu_idle() -> Scenario:
    sc = Scenario(name="llm_prefill_idle")
    for i in range(3):
        s = i * 3 * MS
        sc.range(f"llm.request[p{i}]", s, 3 * MS)
        sc.range(f"llm.prefill[p{i}]", s, 2 * MS)
        sc.launch(None, "ampere_sgemm_128x64_tn", s + 1700 * US, s + 1750 * US, 200 * US)
        sc.range(f"llm.decode[p{i}]", s + 2 * MS, 1 * MS)
        sc.launch(None, "ampere_sgemm_64x64_tn", s + 2050 * US, s + 2100 * US, 800 * US)
    return sc
