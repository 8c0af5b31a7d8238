"""Planted idle gaps whose causes are known exactly: one scenario per rule of
:mod:`ingest.derive_gaps`, each with the evidence that decides it.

Every scenario states its right answers in ``expected``; times are in microseconds from the
constants below.
"""

from __future__ import annotations

from tracelens.testing.scenario import ApiCall, DeviceSpec, Kernel, Scenario

US = 1_000
SMALL_KERNEL = "void scale_kernel<float>(float*, float, int)"


def queued_short_gaps(kernels: int = 50) -> Scenario:
    """The host runs ahead: it launches ``kernels`` 20 us kernels back to back in the first
    ``5 * kernels`` us (5 us per launch call, inside one ``aten::_foreach_mul_``), while the
    GPU runs them with 2 us between each: ``kernels - 1`` gaps of 2 us, every one with the
    next kernel queued long before it. GPU-side waits (``gpu_dependency``), never launch
    overhead, however short.
    """
    sc = Scenario(name="planted_queued_short_gaps")
    op = sc.op("aten::_foreach_mul_", 0, kernels * 5 * US + 10 * US, [[64], [64]])
    for i in range(kernels):
        sc.launch(op, SMALL_KERNEL, i * 5 * US, 10 * US + i * 22 * US, 20 * US, api_dur_ns=5 * US)
    sc.expected = {
        "gaps": kernels - 1,
        "gap_ns": (kernels - 1) * 2 * US,
    }
    return sc


def stream_wait_event() -> Scenario:
    """Two GPU-side waits behind ``cudaStreamWaitEvent``; neither is a host sync.

    1. Kernel A runs [0, 100) us. The host issues ``cudaStreamWaitEvent`` at 50 us and
       launches kernel B at 52-57 us; B waits for an event of another device and starts at
       400 us: a 300 us gap with B queued all along (``gpu_dependency``).
    2. Kernel C runs [1000, 1100) us. A ``cudaStreamWaitEvent`` call recorded from 1110 to
       1390 us (the Nsight export also writes its stream-wait synchronization record), then
       the launch of D at 1390-1395 us, D at 1400 us: the call does not block the host, so
       the 300 us gap is not ``synchronization`` (the host ran untraced code).
    """
    sc = Scenario(name="planted_stream_wait_event")
    sc.launch(None, SMALL_KERNEL, 0, 0, 100 * US, api_dur_ns=5 * US)
    sc.api("cudaStreamWaitEvent", 50 * US, 2 * US)
    sc.launch(None, SMALL_KERNEL, 52 * US, 400 * US, 100 * US, api_dur_ns=5 * US)
    sc.launch(None, SMALL_KERNEL, 990 * US, 1_000 * US, 100 * US, api_dur_ns=5 * US)
    sc.api("cudaStreamWaitEvent", 1_110 * US, 280 * US)
    sc.launch(None, SMALL_KERNEL, 1_390 * US, 1_400 * US, 100 * US, api_dur_ns=5 * US)
    sc.expected = {
        "causes": [
            (100 * US, 400 * US, "gpu_dependency"),
            (500 * US, 1_000 * US, "untraced"),
            (1_100 * US, 1_400 * US, "untraced"),
        ]
    }
    return sc


def cuda_c_program(iterations: int = 5) -> Scenario:
    """A CUDA C program (no framework operators, no annotations): each iteration copies
    4 MiB from pageable memory with a synchronous ``cudaMemcpy`` (the host stages the data
    for 400 us before the 300 us DMA), runs a 200 us kernel, and ``cudaDeviceSynchronize``s.

    Iteration ``i`` starts at ``1000 i`` us: ``cudaMemcpy`` [0, 700) with its copy [400, 700),
    the kernel launched at 705-710 and running [712, 912), the synchronize [712, 915).

    - The 488 us gap before each copy after the first (912 to 1400 us of the previous
      iteration's clock) has the host blocked 403 us: 3 us in the synchronize, 400 us inside
      the next ``cudaMemcpy`` staging pageable memory: ``synchronization`` (a synchronous
      copy); the 85 us between them is untraced host code and does not change the verdict.
    - The 12 us before each kernel: the launch call starts 5 us after the copy's
      ``cudaMemcpy`` returned, while the GPU is idle: ``launch_overhead``.

    No advice may speak PyTorch.
    """
    sc = Scenario(name="planted_cuda_c")
    for i in range(iterations):
        s = i * 1_000 * US
        sc.copy(
            None,
            "HtoD",
            "pageable",
            "device",
            4 * 1024 * 1024,
            api_start_ns=s,
            gpu_start_ns=s + 400 * US,
            gpu_dur_ns=300 * US,
            api_dur_ns=700 * US,
            api_name="cudaMemcpy",
        )
        sc.launch(None, "vecAdd(const float*, const float*, float*, int)", s + 705 * US,
                  s + 712 * US, 200 * US, api_dur_ns=5 * US)  # fmt: skip
        sc.api("cudaDeviceSynchronize", s + 712 * US, 203 * US)
    sc.expected = {
        "sync_gaps": iterations - 1,
        "sync_gap_ns": (iterations - 1) * 488 * US,
        "sync_blocked_ns": (iterations - 1) * 403 * US,
        "launch_gaps": iterations,
        "launch_gap_ns": iterations * 12 * US,
    }
    return sc


def host_naming() -> Scenario:
    """What the host was doing, named by the innermost useful interval covering the gap.

    Everything runs in ``threading.py(1016): _bootstrap`` > ``<string>(1): <module>`` >
    ``ProfilerStep#20`` (whole-thread, whole-program and whole-step wrappers).

    1. Kernel 1 [0, 100) us; then ``model.py(40): postprocess`` (a Python function)
       [105, 600) with ``aten::sort`` [110, 150) inside it; kernel 2 launched at 600-605,
       running [610, 700): a 510 us gap named ``model.py(40): postprocess`` (it covers
       495 us; ``aten::sort`` only 40 us).
    2. Kernel 3 launched at 1200-1205, running [1210, 1300) after nothing recorded since
       700 us: a 510 us gap of ``untraced host code`` (only the wrappers cover it).
    """
    sc = Scenario(name="planted_host_naming")
    sc.op("threading.py(1016): _bootstrap", 0, 2_000 * US, category="python_function")
    sc.op("<string>(1): <module>", 0, 2_000 * US, category="python_function")
    sc.range("ProfilerStep#20", 0, 2_000 * US)
    sc.launch(None, SMALL_KERNEL, 0, 0, 100 * US, api_dur_ns=5 * US)
    sc.op("model.py(40): postprocess", 105 * US, 495 * US, category="python_function")
    sc.op("aten::sort", 110 * US, 40 * US, [[1024]])
    sc.launch(None, SMALL_KERNEL, 600 * US, 610 * US, 90 * US, api_dur_ns=5 * US)
    sc.launch(None, SMALL_KERNEL, 1_200 * US, 1_210 * US, 90 * US, api_dur_ns=5 * US)
    sc.expected = {
        "gaps": [
            (100 * US, 610 * US, "host_compute", "model.py(40): postprocess"),
            (700 * US, 1_210 * US, "untraced", "untraced host code"),
        ]
    }
    return sc


def slow_graph_dispatch(replays: int = 3, amd: bool = False) -> Scenario:
    """A graph whose launch call is still dispatching when the GPU catches up with it.

    Replay ``i`` is one graph launch call (``cudaGraphLaunch``, ``hipGraphLaunch`` with
    ``amd``) from ``1000 * i`` us lasting 600 us, with 40 kernels of 10 us: the first 20 run
    back to back from 20 us into the call, then the GPU idles 100 us, mid-graph, before
    the other 20 (the call was running all along: launch overhead, inside the graph
    launch). Between replays the GPU idles 500 us and the next call starts 480 us into that
    gap (not a launch-overhead gap). So ``replays`` in-graph gaps of 100 us are the whole of
    the launch-overhead time.
    """
    device = DeviceSpec(name="AMD Instinct MI300X", sm_count=304) if amd else DeviceSpec()
    sc = Scenario(name="planted_slow_graph_dispatch", devices=[device])
    call = "hipGraphLaunch" if amd else "cudaGraphLaunch"
    for i in range(replays):
        t = i * 1_000 * US
        corr = sc.next_id()
        sc.api_calls.append(ApiCall(call, t, 600 * US, sc.pid, sc.tid, corr))
        for j in range(40):
            start = t + 20 * US + j * 10 * US + (100 * US if j >= 20 else 0)
            sc.kernels.append(Kernel(SMALL_KERNEL, start, 10 * US, corr))
    sc.expected = {
        "call": call,
        "in_graph_gaps": replays,
        "in_graph_ns": replays * 100 * US,
        "kernels_per_launch": 40,
        "call_ns": 600 * US,
    }
    return sc
