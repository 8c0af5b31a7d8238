"""A format-neutral description of a traced run, for planting known bottlenecks.

A :class:`Scenario` holds host and device activity in integer nanoseconds. Writers turn
it into a PyTorch-profiler Chrome trace (:mod:`.chrome_writer`) or an Nsight Systems
SQLite export (:mod:`.nsys_writer`), so the same planted problem can be checked through
every reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DeviceSpec:
    device_id: int = 0
    name: str = "NVIDIA A100-SXM4-80GB"
    sm_count: int = 108
    total_memory_bytes: int = 85_899_345_920
    compute_major: int = 8
    compute_minor: int = 0


@dataclass
class Kernel:
    name: str
    start_ns: int
    dur_ns: int
    correlation_id: int
    device_id: int = 0
    stream_id: int = 7
    grid: tuple[int, int, int] = (1024, 1, 1)
    block: tuple[int, int, int] = (256, 1, 1)
    registers_per_thread: int = 32
    shared_memory_bytes: int = 0
    # The profiler's estimate; None where the source does not record one.
    est_occupancy_pct: float | None = None


@dataclass
class Memcpy:
    kind: str  # HtoD, DtoH, DtoD, ...
    src_mem: str  # pageable, pinned, device, managed
    dst_mem: str
    bytes: int
    start_ns: int
    dur_ns: int
    correlation_id: int
    device_id: int = 0
    stream_id: int = 7


@dataclass
class Memset:
    bytes: int
    start_ns: int
    dur_ns: int
    correlation_id: int
    device_id: int = 0
    stream_id: int = 7
    mem: str = "device"


@dataclass
class ApiCall:
    name: str
    start_ns: int
    dur_ns: int
    pid: int
    tid: int
    correlation_id: int | None = None
    external_id: int | None = None
    # the launched kernel, where the call names it (ROCm; launches during graph capture)
    kernel: str | None = None


@dataclass
class CpuOp:
    name: str
    start_ns: int
    dur_ns: int
    pid: int
    tid: int
    external_id: int
    input_shapes: list[list[int]] = field(default_factory=list)
    input_types: list[str] = field(default_factory=list)
    category: str = "cpu_op"


@dataclass
class Range:
    """A host annotation: ``record_function`` / NVTX push-pop range."""

    name: str
    start_ns: int
    dur_ns: int
    pid: int
    tid: int
    domain: str | None = None


@dataclass
class MemoryEvent:
    """One allocator event: ``bytes`` > 0 allocates, < 0 frees; totals are after the event."""

    ts_ns: int
    bytes: int
    total_allocated: int
    total_reserved: int
    pid: int
    tid: int
    device_id: int = 0  # -1 for host (CPU) memory
    addr: int = 0


@dataclass
class Collective:
    """A host-side collective call (all_reduce, all_gather, ...) with its message size.

    Its GPU kernel is a separate :class:`Kernel` (launched by ``Scenario.collective``).
    """

    collective: str
    start_ns: int
    dur_ns: int
    pid: int
    tid: int
    external_id: int
    in_nelems: int
    out_nelems: int
    dtype: str = "Float"
    group_size: int = 2


@dataclass
class Scenario:
    """Everything a writer needs; ``expected`` holds the facts tests assert."""

    name: str
    devices: list[DeviceSpec] = field(default_factory=lambda: [DeviceSpec()])
    kernels: list[Kernel] = field(default_factory=list)
    memcpys: list[Memcpy] = field(default_factory=list)
    memsets: list[Memset] = field(default_factory=list)
    api_calls: list[ApiCall] = field(default_factory=list)
    cpu_ops: list[CpuOp] = field(default_factory=list)
    ranges: list[Range] = field(default_factory=list)
    memory_events: list[MemoryEvent] = field(default_factory=list)
    collectives: list[Collective] = field(default_factory=list)
    rank: int = 0
    world_size: int = 1
    pid: int = 4242
    tid: int = 4242
    # Absolute time of ns 0 of the scenario; traces carry realistic epoch-scale clocks.
    base_ns: int = 1_700_000_000_000_000_000
    expected: dict = field(default_factory=dict)
    _next_id: int = 1

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    # -- builders: host call + linked device work in one line ------------------------------

    def op(
        self,
        name: str,
        start_ns: int,
        dur_ns: int,
        shapes: list[list[int]] | None = None,
        category: str = "cpu_op",
        types: list[str] | None = None,
    ) -> CpuOp:
        """A host operator; ``types`` are the recorded dtypes (``float`` by default)."""
        o = CpuOp(
            name,
            start_ns,
            dur_ns,
            self.pid,
            self.tid,
            self.next_id(),
            shapes or [],
            types if types is not None else ["float"] * len(shapes or []),
            category,
        )
        self.cpu_ops.append(o)
        return o

    def launch(
        self,
        op: CpuOp | None,
        kernel_name: str,
        api_start_ns: int,
        gpu_start_ns: int,
        gpu_dur_ns: int,
        api_dur_ns: int = 5_000,
        **kernel_kw: object,
    ) -> Kernel:
        corr = self._enqueue("cudaLaunchKernel", api_start_ns, api_dur_ns, op)
        k = Kernel(kernel_name, gpu_start_ns, gpu_dur_ns, corr, **kernel_kw)  # type: ignore[arg-type]
        self.kernels.append(k)
        return k

    def graph_launch(
        self,
        kernels: list[tuple[str, int, int]],
        api_start_ns: int,
        api_dur_ns: int = 5_000,
        call: str = "cudaGraphLaunch",
    ) -> list[Kernel]:
        """One graph launch call and the kernels it replays, ``(name, start, duration)``
        each, all under the call's correlation id (as the profilers record a replay)."""
        corr = self._enqueue(call, api_start_ns, api_dur_ns, None)
        out = [Kernel(name, start, dur, corr) for name, start, dur in kernels]
        self.kernels.extend(out)
        return out

    def copy(
        self,
        op: CpuOp | None,
        kind: str,
        src_mem: str,
        dst_mem: str,
        nbytes: int,
        api_start_ns: int,
        gpu_start_ns: int,
        gpu_dur_ns: int,
        api_dur_ns: int = 10_000,
        api_name: str = "cudaMemcpyAsync",
    ) -> Memcpy:
        corr = self._enqueue(api_name, api_start_ns, api_dur_ns, op)
        m = Memcpy(kind, src_mem, dst_mem, nbytes, gpu_start_ns, gpu_dur_ns, corr)
        self.memcpys.append(m)
        return m

    def _enqueue(self, name: str, start_ns: int, dur_ns: int, op: CpuOp | None) -> int:
        """The runtime call that enqueues GPU work for ``op``: its correlation id."""
        corr = self.next_id()
        self.api_calls.append(
            ApiCall(
                name, start_ns, dur_ns, self.pid, self.tid, corr, op.external_id if op else None
            )
        )
        return corr

    def api(self, name: str, start_ns: int, dur_ns: int) -> ApiCall:
        a = ApiCall(name, start_ns, dur_ns, self.pid, self.tid)
        self.api_calls.append(a)
        return a

    def range(self, name: str, start_ns: int, dur_ns: int, domain: str | None = None) -> Range:
        r = Range(name, start_ns, dur_ns, self.pid, self.tid, domain)
        self.ranges.append(r)
        return r

    def memory(
        self,
        ts_ns: int,
        nbytes: int,
        total_allocated: int,
        total_reserved: int,
        device_id: int = 0,
        addr: int = 0,
    ) -> MemoryEvent:
        e = MemoryEvent(
            ts_ns, nbytes, total_allocated, total_reserved, self.pid, self.tid, device_id, addr
        )
        self.memory_events.append(e)
        return e

    def collective(
        self,
        collective: str,
        start_ns: int,
        dur_ns: int,
        nelems: int,
        kernel_name: str,
        gpu_start_ns: int,
        gpu_dur_ns: int,
        dtype: str = "Float",
        group_size: int = 2,
        stream_id: int = 20,
    ) -> Kernel:
        """A collective call on the host and its NCCL kernel on a communication stream."""
        c = Collective(
            collective,
            start_ns,
            dur_ns,
            self.pid,
            self.tid,
            self.next_id(),
            nelems,
            nelems,
            dtype,
            group_size,
        )
        self.collectives.append(c)
        carrier = CpuOp("record_param_comms", start_ns, dur_ns, self.pid, self.tid, c.external_id)
        return self.launch(
            carrier, kernel_name, start_ns + 1_000, gpu_start_ns, gpu_dur_ns, stream_id=stream_id
        )
