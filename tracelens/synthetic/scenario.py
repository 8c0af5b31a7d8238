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
    ) -> CpuOp:
        o = CpuOp(
            name,
            start_ns,
            dur_ns,
            self.pid,
            self.tid,
            self.next_id(),
            shapes or [],
            ["float"] * len(shapes or []),
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
        corr = self.next_id()
        self.api_calls.append(
            ApiCall(
                "cudaLaunchKernel",
                api_start_ns,
                api_dur_ns,
                self.pid,
                self.tid,
                corr,
                op.external_id if op else None,
            )
        )
        k = Kernel(kernel_name, gpu_start_ns, gpu_dur_ns, corr, **kernel_kw)  # type: ignore[arg-type]
        self.kernels.append(k)
        return k

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
        corr = self.next_id()
        self.api_calls.append(
            ApiCall(
                api_name,
                api_start_ns,
                api_dur_ns,
                self.pid,
                self.tid,
                corr,
                op.external_id if op else None,
            )
        )
        m = Memcpy(kind, src_mem, dst_mem, nbytes, gpu_start_ns, gpu_dur_ns, corr)
        self.memcpys.append(m)
        return m

    def api(self, name: str, start_ns: int, dur_ns: int) -> ApiCall:
        a = ApiCall(name, start_ns, dur_ns, self.pid, self.tid)
        self.api_calls.append(a)
        return a

    def range(self, name: str, start_ns: int, dur_ns: int, domain: str | None = None) -> Range:
        r = Range(name, start_ns, dur_ns, self.pid, self.tid, domain)
        self.ranges.append(r)
        return r
