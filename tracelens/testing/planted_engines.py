"""vLLM and SGLang serving traces labelled the way the engines label their own steps.

``vllm_eager_decode`` — a synchronous vLLM engine on an A100, every step labelled
``execute_{T}_context_{C}(sq…sk…sqsq…sqsk…)_generation_{G}(sq…sk…sqsq…sqsk…)``:

- 19 steps: one prefill of 4 prompts of 512 tokens (4 ms, one 3.8 ms GEMM), 16 decode
  steps and 2 mixed steps that each take one new 512-token prompt as a chunk beside the
  running decodes (3 ms, one 2.8 ms GEMM). Decode batches: 4 (6 steps), 5 (6), 6 (4).
- decode step ``k`` (1..16) runs ``50 + k`` kernels of 5 µs, one every 20 µs, launched one
  by one (eager): it lasts ``20 (50 + k) + 10`` µs and the GPU waits 15 µs on the next
  launch between its kernels (launch-bound);
- between consecutive steps the scheduler runs 200 µs of Python with the GPU idle;
- nothing else: the GPU never waits on the GPU, and the trace holds no operators.

``sglang_overlap`` — SGLang with graph replay on an H100: one graph launch per step at the
end of a 1 ms host range, its kernels queued behind the previous step's, so the GPU runs
step after step and each step takes its GPU time. Decode steps are labelled
``step[DECODE bs=B]``, every other one also wrapped in an ``execute_…`` label (one step
labelled twice); one ``step[EXTEND bs=4 toks=4096]``, one ``step[MIXED bs=5]`` without
counts and one ``step[MIXED bs=6 c=1 g=5 c_sq=2048 …]`` with them; one ``step[IDLE bs=0]``.
Before decode step 12 the host spends 6 ms processing results with the GPU idle.
"""

from __future__ import annotations

from tracelens.testing.scenario import ApiCall, DeviceSpec, Kernel, Scenario

US = 1_000
MS = 1_000_000

_GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
_DECODE_KERNEL = "void vllm::rms_norm_kernel<c10::BFloat16, 1>(c10::BFloat16*, int)"
_SCHEDULE = "vllm/v1/core/sched/scheduler.py(301): schedule"


def vllm_label(prefill: list[tuple[int, int]], decode: list[tuple[int, int]]) -> str:
    """vLLM's label of a step: ``(new, total)`` tokens of each prefill and decode request."""

    def sums(reqs: list[tuple[int, int]]) -> str:
        q = sum(n for n, _ in reqs)
        k = sum(t for _, t in reqs)
        return f"sq{q}sk{k}sqsq{sum(n * n for n, _ in reqs)}sqsk{sum(n * t for n, t in reqs)}"

    total = sum(n for n, _ in prefill) + sum(n for n, _ in decode)
    return (
        f"execute_{total}_context_{len(prefill)}({sums(prefill)})"
        f"_generation_{len(decode)}({sums(decode)})"
    )


def vllm_eager_decode() -> Scenario:
    sc = Scenario(name="vllm_eager_decode")
    prompt = 512
    generated: dict[str, int] = {}  # tokens each running request has produced
    plan: list[tuple[str, list[str]]] = [("prefill", ["r0", "r1", "r2", "r3"])]
    plan += [("decode", [])] * 6 + [("mixed", ["r4"])] + [("decode", [])] * 6
    plan += [("mixed", ["r5"])] + [("decode", [])] * 4
    t = 0
    decode_k = 0
    durations: dict[str, list[int]] = {"prefill": [], "decode": [], "mixed": []}
    batches: dict[str, list[int]] = {"prefill": [], "decode": [], "mixed": []}
    context: list[int] = []
    launch_gaps = 0
    for i, (phase, new) in enumerate(plan):
        if i:  # the scheduler's Python between steps, GPU idle
            sc.op(_SCHEDULE, t, 200 * US, category="python_function")
            t += 200 * US
        running = sorted(generated)
        dec = [(1, prompt + generated[r]) for r in running] if phase != "prefill" else []
        pre = [(prompt, prompt) for _ in new]
        if phase == "decode":
            decode_k += 1
            n = 50 + decode_k
            dur = 20 * US * n + 10 * US
            for j in range(n):
                start = t + 10 * US + j * 20 * US
                sc.launch(None, _DECODE_KERNEL, start - 5 * US, start, 5 * US)
            launch_gaps += 15 * US * (n - 1)
        else:
            dur = 4 * MS if phase == "prefill" else 3 * MS
            sc.launch(None, _GEMM, t + 50 * US, t + 100 * US, dur - 200 * US)
        sc.range(vllm_label(pre, dec), t, dur)
        sc.api("cudaEventRecord", t + dur - 3 * US, 2 * US)  # marks the sampled tokens
        durations[phase].append(dur)
        batches[phase].append(len(dec))
        context.append(sum(k for _, k in pre) + sum(k for _, k in dec))
        t += dur
        for r in running:
            generated[r] += 1
        for r in new:
            generated[r] = 1
    between = 200 * US * (len(plan) - 1)
    sc.expected = {
        "durations": durations,
        "decode_requests": batches,
        "context_tokens": context,
        "prefill_tokens": 4 * prompt + 2 * prompt,
        "decode_tokens": sum(batches["decode"]) + sum(batches["mixed"]),
        "span_ns": t,
        "between_intervals": len(plan) - 1,
        "between_ns": between,
        "decode_launch_gap_ns": launch_gaps,
    }
    return sc


_H100 = DeviceSpec(name="NVIDIA H100 80GB HBM3", sm_count=132, compute_major=9, compute_minor=0)
_ATTN = "void flashinfer::BatchDecodeWithPagedKVCacheKernel<128u, 8u, __nv_bfloat16>()"


def _graph_launch(sc: Scenario, api_ns: int, gpu_ns: int, gpu_dur_ns: int, kernels: int) -> int:
    """One ``cudaGraphLaunch`` whose ``kernels`` back-to-back kernels take ``gpu_dur_ns``."""
    corr = sc.next_id()
    sc.api_calls.append(ApiCall("cudaGraphLaunch", api_ns, 20 * US, sc.pid, sc.tid, corr))
    each = gpu_dur_ns // kernels
    for j in range(kernels):
        name = _ATTN if j % 2 else _GEMM
        sc.kernels.append(Kernel(name, gpu_ns + j * each, each, corr))
    return gpu_ns + kernels * each


def sglang_overlap() -> Scenario:
    sc = Scenario(name="sglang_overlap", devices=[_H100])
    steps: list[tuple[str, str, int, int | None]] = [
        ("EXTEND", "step[EXTEND bs=4 toks=4096]", 8 * MS, None)
    ]
    for i in range(1, 21):
        bs = 4 if i <= 8 else 5 if i <= 16 else 6
        steps.append(("DECODE", f"step[DECODE bs={bs}]", 3 * MS + 100 * US * i, bs))
        if i == 8:
            steps.append(("MIXED", "step[MIXED bs=5]", 9 * MS, None))
        if i == 16:
            label = "step[MIXED bs=6 c=1 g=5 c_sq=2048 c_sk=2048 g_sq=5 g_sk=6200]"
            steps.append(("MIXED", label, 9 * MS, 5))
    gpu_free = 0  # when the GPU finishes the work queued so far
    prev_host_end, prev_gpu_start = -100 * US, -100 * US
    durations: dict[str, list[int]] = {"prefill": [], "decode": [], "mixed": []}
    itl: list[tuple[int, int]] = []
    between = 0
    decode_no = 0
    for mode, label, gpu_ns, decoding in steps:
        # overlap scheduling: the host prepares a step once the previous one is on the GPU
        host_start = max(prev_host_end + 100 * US, prev_gpu_start + 100 * US)
        decode_no += mode == "DECODE"
        if mode == "DECODE" and decode_no == 12:  # results processed on the host, GPU idle
            sc.op(
                "sglang/srt/managers/scheduler.py(1490): process_batch_result",
                host_start,
                6 * MS,
                category="python_function",
            )
            host_start += 6 * MS
        host_end = host_start + 1 * MS
        launch = host_end - 100 * US
        gpu_start = max(launch + 20 * US, gpu_free)
        sc.range(label, host_start + 50 * US, 900 * US)
        range_start = host_start + 50 * US
        if mode == "DECODE" and decode_no % 2 and decoding:
            ctx = 6000 + 100 * decode_no
            sc.range(vllm_label([], [(1, ctx // decoding)] * decoding), host_start, 1 * MS)
            range_start = host_start
        gpu_end = _graph_launch(sc, launch, gpu_start, gpu_ns, 50)
        # A step is done when its GPU work is. Queued behind the previous step it takes its
        # GPU time; when its range opens after the previous step was done, it takes the
        # host time before its work too, and the time in between is the host's.
        took = gpu_end - max(range_start, gpu_free)
        if gpu_free and range_start > gpu_free:
            between += range_start - gpu_free
        phase = {"EXTEND": "prefill", "DECODE": "decode", "MIXED": "mixed"}[mode]
        durations[phase].append(took)
        if decoding:
            itl.append((took, decoding))
        gpu_free = gpu_end
        prev_host_end, prev_gpu_start = host_end, gpu_start
        if mode == "DECODE" and decode_no == 4:
            sc.range("step[IDLE bs=0]", host_end + 10 * US, 50 * US)
    sc.expected = {
        "durations": durations,
        "itl": itl,
        "prefill_tokens": 4096 + 2048,
        "decode_tokens": 8 * 4 + 8 * 5 + 5 + 4 * 6,
        "between_ns": between,
        "steps": len(steps),
    }
    return sc
