"""What was recorded: the kind of workload, its framework, its GPU, what is already done.

Advice has to fit the workload: no optimizer advice for inference, no TF32 on a V100, no
PyTorch API for a CUDA C or OpenMP program, no "use FlashAttention" where attention
already is FlashAttention, no "add torch.compile" where the code is compiled, ROCm terms on
AMD GPUs. Every analyzer reads :func:`workload_of` (computed once per trace database from
the canonical tables) and the report shows it as its ``workload`` section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ingest.derive_gaps import GRAPH_LAUNCH_CALLS
from ingest.profiler_steps import is_step
from tracelens.core.gpu_specs import GpuSpec, lookup
from tracelens.core.tracedb import TraceDB

TRAINING, INFERENCE, SERVING, COMPUTE, UNKNOWN = (
    "training",
    "inference",
    "serving",
    "compute",  # a GPU program without a framework (CUDA C, HIP, OpenMP offload)
    "unknown",
)

# vLLM's `execute_{T}_context_{C}(...)_generation_{G}(...)` (or its short form
# `execute_context_{C}(...)_generation_{G}(...)`) and SGLang's `step[MODE ...]`: the step
# labels the engines write (read by tracelens.llm.engine_labels).
ENGINE_STEP_SQL = (
    "(regexp_matches(name, '^execute_([0-9]+_)?context_[0-9]+') "
    "OR regexp_matches(name, '^step\\[[A-Z_]+( [^]]*)?\\]$'))"
)
_BACKWARD_SQL = (
    "(name LIKE 'autograd::engine::evaluate_function:%' OR name LIKE '%Backward0' "
    "OR name LIKE '%Backward1' OR regexp_matches(name, '^aten::[a-z_0-9]+_backward$'))"
)
_OPTIMIZER_SQL = "(name LIKE 'Optimizer.step#%' OR name LIKE 'Optimizer.zero_grad#%')"
# One optimizer step is one ``Optimizer.step#`` call on the host: Kineto mirrors the
# annotation on the GPU timeline (``gpu_user_annotation``, a range with a device) over the
# kernels it launched, which is the same step again; ``zero_grad`` is training, not a step.
_OPTIMIZER_STEP_SQL = "name LIKE 'Optimizer.step#%'"
_HOST_OPTIMIZER_STEP_SQL = f"{_OPTIMIZER_STEP_SQL} AND device_id IS NULL"


@dataclass(frozen=True)
class GpuInfo:
    vendor: str | None  # "nvidia" | "amd" | None when the trace does not say
    name: str | None
    arch: str | None
    compute_capability: str | None
    tensor_dtypes: tuple[str, ...]
    spec: GpuSpec | None = field(default=None, compare=False)
    assumed: str | None = None

    def has_tensor(self, dtype: str) -> bool:
        return dtype in self.tensor_dtypes


@dataclass(frozen=True)
class TunableOp:
    """PyTorch's TunableOp as the trace's recorded environment sets it (where a harness
    wrote the environment into the trace: ``env.PYTORCH_TUNABLEOP_*`` facts)."""

    enabled: bool
    tuning: bool  # PYTORCH_TUNABLEOP_TUNING, which defaults to on
    results_file: str | None

    @staticmethod
    def of(info: dict[str, str]) -> TunableOp | None:
        """None where the trace does not record whether TunableOp was enabled."""
        enabled = info.get("env.PYTORCH_TUNABLEOP_ENABLED")
        if enabled is None:
            return None
        tuning = info.get("env.PYTORCH_TUNABLEOP_TUNING", "1")
        return TunableOp(
            enabled=enabled.strip() == "1",
            tuning=tuning.strip() == "1",
            results_file=info.get("env.PYTORCH_TUNABLEOP_FILENAME"),
        )


@dataclass(frozen=True)
class Workload:
    kind: str  # training | inference | serving | compute | unknown
    kind_basis: str
    framework: str  # pytorch | tensorrt | jax | openmp_offload | cuda | hip | unknown
    framework_basis: str
    gpu: GpuInfo
    torch_compile: bool
    cuda_graphs: bool
    attention: str | None  # flash | efficient | fused | math_sdpa | None
    optimizer_steps: int
    backward_ops: int
    # What the recording leaves out that the diagnosis would need (report notes).
    recording_notes: tuple[str, ...] = ()
    # The optimizer already runs multi-tensor (foreach) or fused kernels.
    fused_optimizer: bool = False
    # The trace records a graph capture (stream capture, instantiation): not for timing.
    graph_capture: bool = False
    # Only launch and copy runtime calls survive: filtered or sampled after recording.
    filtered: bool = False
    # A filtered trace that also thinned its launches (and their kernels): the runtime
    # calls it keeps and how many its correlation ids number (kept, numbered); None where
    # launches were not thinned. See ``_sampled_calls``.
    sampled_calls: tuple[int, int] | None = None
    # A serving engine's own step labels (vLLM, SGLang): it keeps a paged KV cache.
    serving_engine: bool = False
    # Decode attention over a paged KV cache runs (paged/split-KV kernels).
    paged_attention: bool = False
    # TF32 tensor-core kernels already run for convolutions / for GEMMs: the switch that
    # allows them is on.
    tf32_convs: bool = False
    tf32_gemms: bool = False
    # PyTorch's TunableOp as the recorded environment sets it; None where not recorded.
    tunableop: TunableOp | None = None
    # The PyTorch profiler's options the trace records as on (with_stack, profile_memory,
    # record_shapes, ...); empty where it does not say.
    profiler_options: tuple[str, ...] = ()
    # The Python stacks are operators' "Call stack" fields (the 2021 profiler's), not
    # python_function events: where the advice says to read them.
    stacks_in_operators: bool = False
    # Installed versions of the packages the advice names, where a harness recorded its pip
    # list (``package.<name>`` facts): {"flash_attn": "2.7.4.post1", ...}.
    installed: dict[str, str] = field(default_factory=dict)

    @property
    def tunableop_on(self) -> bool:
        """The recorded environment has PyTorch's TunableOp enabled."""
        return self.tunableop is not None and self.tunableop.enabled

    @property
    def python_stacks(self) -> bool:
        """The capture recorded Python stacks (``with_stack=True``)."""
        return "with_stack" in self.profiler_options

    @property
    def profiler_host_overhead(self) -> tuple[str, ...]:
        """The recorded options that add the profiler's own host time to every operator
        (Python stacks, allocator events)."""
        return tuple(o for o in self.profiler_options if o in ("with_stack", "profile_memory"))

    @property
    def is_pytorch(self) -> bool:
        return self.framework == "pytorch"

    @property
    def is_training(self) -> bool:
        return self.kind == TRAINING

    @property
    def amd(self) -> bool:
        return self.gpu.vendor == "amd"

    @property
    def compiled(self) -> bool:
        return self.torch_compile or self.framework in ("tensorrt", "jax")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "kind_basis": self.kind_basis,
            "framework": self.framework,
            "framework_basis": self.framework_basis,
            "gpu": {
                "vendor": self.gpu.vendor,
                "name": self.gpu.name,
                "model": self.gpu.spec.name if self.gpu.spec else None,
                "arch": self.gpu.arch,
                "compute_capability": self.gpu.compute_capability,
                "tensor_core_dtypes": list(self.gpu.tensor_dtypes),
                "assumed": self.gpu.assumed,
            },
            "compiled": {"torch_compile": self.torch_compile, "cuda_graphs": self.cuda_graphs},
            "attention": self.attention,
        }


def workload_of(db: TraceDB) -> Workload:
    """The workload of ``db``'s trace, computed once per TraceDB."""
    return db.memo("workload", lambda: _detect(db))


def wsl_host(db: TraceDB) -> bool:
    """The trace was recorded under WSL2 (its host kernel release says ``microsoft``): the
    GPU is driven through the Windows driver, with its launch latency and no persistence
    mode, and managed memory has no concurrent CPU/GPU access."""
    return "microsoft" in (db.info.get("host_kernel") or "").lower()


def _count(db: TraceDB, table: str, where: str) -> int:
    return int(db.scalar(f"SELECT count(*) FROM {table} WHERE {where}") or 0)


def _counts(db: TraceDB, *queries: tuple[str, str]) -> list[int]:
    """:func:`_count` of each ``(table, where)``, in one query: on a small trace each
    query's set-up costs more than its scan. A UNION ALL, not one scalar subquery per
    count: DuckDB orders the cross product of 8 to 15 of those exhaustively (11 took 50
    ms on a four-event trace, the union 6 ms)."""
    union = " UNION ALL ".join(
        f"SELECT {i} AS i, count(*) AS n FROM {t} WHERE {w}" for i, (t, w) in enumerate(queries)
    )
    return [int(n or 0) for _, n in db.rows(f"SELECT i, n FROM ({union}) ORDER BY i")]


# Decode attention that reads a paged KV cache: vLLM's paged/unified attention, ROCm's
# paged_attention_ll4mi, FlashInfer's batch decode, split-KV (flash-decoding) kernels and
# SGLang's Triton decode stages.
_PAGED_ATTENTION = re.compile(
    r"(?i)paged_attention|unified_attention|flash_?decod|decode_att|batch_?decode|flashinfer|"
    r"split_?kv|mla_decode|_fwd_(grouped_)?kernel_stage"
)
# Kernels that write or index an attention backend's KV cache (not attention themselves).
_ATTENTION_HELPER = re.compile(r"(?i)reshape_and_cache|kv_indices|copy_blocks|swap_blocks")
# TF32 in a kernel name is its math (``sm80_xmma_fprop_…_tf32f32_tf32f32_…``,
# ``…_tf32gemm_…``); cuDNN convolution kernels say fprop/dgrad/wgrad or conv.
_TF32 = re.compile(r"(?i)tf32")
_CONV_KERNEL = re.compile(r"(?i)conv|fprop|dgrad|wgrad|cudnn")
_GEMM_KERNEL = re.compile(r"(?i)gemm|cublas|cutlass|xmma|matmul")
_FUSED_OPTIMIZER_SQL = (
    "name LIKE 'aten::_foreach_%' OR name LIKE 'aten::_fused_adam%' "
    "OR name LIKE 'aten::_fused_sgd%'"
)
_COMPILED_OPS_SQL = (
    "name LIKE 'Torch-Compiled Region%' OR name LIKE 'CompiledFunction%' OR name LIKE '%inductor%'"
)


def _detect(db: TraceDB) -> Workload:
    gpu = _gpu(db)
    # The counts every trace needs; those only some branches read stay where they are.
    (
        backward,
        optimizer_ranges,
        optimizer_ops,
        step_ranges,
        step_ops,
        aten,
        python,
        llm,
        engine,
        compiled_ops,
        fused,
    ) = _counts(
        db,
        ("cpu_ops", _BACKWARD_SQL),
        ("ranges", _OPTIMIZER_SQL),
        ("cpu_ops", _OPTIMIZER_SQL),
        ("ranges", _HOST_OPTIMIZER_STEP_SQL),
        ("cpu_ops", _OPTIMIZER_STEP_SQL),
        ("cpu_ops", "name LIKE 'aten::%'"),
        ("cpu_ops", "category = 'python_function'"),
        ("ranges", "name LIKE 'llm.%'"),
        ("ranges", ENGINE_STEP_SQL),
        ("cpu_ops", _COMPILED_OPS_SQL),
        ("cpu_ops", _FUSED_OPTIMIZER_SQL),
    )
    optimizer = optimizer_ranges + optimizer_ops  # any optimizer call says training
    steps = step_ranges + step_ops
    api_names = {
        r[0] for r in db.rows("SELECT DISTINCT name FROM api_calls WHERE name IS NOT NULL")
    }
    domains = {
        r[0] for r in db.rows("SELECT DISTINCT domain FROM ranges WHERE domain IS NOT NULL") if r[0]
    }
    kernel_names = [
        r[0]
        for r in db.rows(
            "SELECT name FROM kernels GROUP BY name ORDER BY sum(end_ns - start_ns) DESC LIMIT 400"
        )
    ]
    if backward or optimizer:
        parts = []
        if backward:
            parts.append(f"{backward:,} backward operators")
        if steps:
            parts.append(f"{steps:,} optimizer step{'s' if steps != 1 else ''}")
        elif optimizer:
            parts.append(f"{optimizer:,} optimizer calls")
        kind, basis = TRAINING, " and ".join(parts)
    elif engine or llm:
        kind = SERVING
        basis = (
            f"{engine:,} serving-engine step annotation{'s' if engine != 1 else ''}"
            if engine
            else f"{llm:,} LLM annotation{'s' if llm != 1 else ''}"
        )
    elif aten or python:
        kind, basis = INFERENCE, "framework operators without backward or optimizer steps"
    elif kernel_names or api_names:
        kind, basis = COMPUTE, "GPU work without framework operators"
    else:
        kind, basis = UNKNOWN, "nothing recorded says"

    hip = any(n.startswith("hip") for n in api_names)
    if aten or python or _count(db, "ranges", is_step()):
        framework, fbasis = "pytorch", "PyTorch operators"
    elif "TensorRT" in domains or any(n.startswith("TensorRT") for n in domains):
        framework, fbasis = "tensorrt", "TensorRT NVTX ranges"
    elif any(re.match(r"(?i)xla|jax|jit_", d) for d in domains) or _count(
        db, "ranges", "name LIKE 'XlaModule%' OR name LIKE 'jit_%'"
    ):
        framework, fbasis = "jax", "XLA/JAX ranges"
    elif any(n.startswith("__tgt") for n in api_names) or any(
        "__omp_offloading" in k for k in kernel_names
    ):
        framework, fbasis = "openmp_offload", "OpenMP target offload kernels or runtime calls"
    elif api_names or kernel_names:
        framework = "hip" if hip or gpu.vendor == "amd" else "cuda"
        fbasis = "runtime API calls and kernels without framework operators"
    else:
        framework, fbasis = "unknown", "nothing recorded says"
    if framework == "tensorrt" and kind == COMPUTE:
        kind, basis = INFERENCE, "a TensorRT engine"

    compiled_kernels = sum(1 for k in kernel_names if k.startswith(("triton_", "triton__")))
    graphs = bool(api_names & set(GRAPH_LAUNCH_CALLS))
    options = tuple(o for o in db.info.get("profiler_options", "").split(",") if o)
    filtered = _filtered(db, api_names, len(kernel_names))
    sampled = _sampled_calls(db) if filtered else None
    return Workload(
        kind=kind,
        kind_basis=basis,
        framework=framework,
        framework_basis=fbasis,
        gpu=gpu,
        torch_compile=bool(compiled_kernels or compiled_ops),
        cuda_graphs=graphs,
        attention=_attention(db, kernel_names),
        optimizer_steps=steps,
        backward_ops=backward,
        recording_notes=_recording_notes(api_names, filtered, sampled),
        filtered=filtered,
        sampled_calls=sampled,
        fused_optimizer=bool(fused),
        serving_engine=bool(engine),
        paged_attention=any(_PAGED_ATTENTION.search(k) for k in kernel_names),
        tf32_convs=any(_TF32.search(k) and _CONV_KERNEL.search(k) for k in kernel_names),
        tf32_gemms=any(
            _TF32.search(k) and _GEMM_KERNEL.search(k) and not _CONV_KERNEL.search(k)
            for k in kernel_names
        ),
        graph_capture=bool(
            api_names
            & {
                "cudaStreamBeginCapture",
                "hipStreamBeginCapture",
                "cuStreamBeginCapture",
                "cudaGraphInstantiate",
                "hipGraphInstantiate",
                "hipGraphInstantiateWithFlags",
                "cudaGraphInstantiateWithFlags",
            }
        ),
        tunableop=TunableOp.of(db.info),
        installed={
            k.removeprefix("package."): str(v)
            for k, v in db.info.items()
            if k.startswith("package.") and v is not None
        },
        profiler_options=options,
        stacks_in_operators="with_stack" in options
        and not db.scalar(
            "SELECT count(*) > 0 FROM (SELECT 1 FROM cpu_ops "
            "WHERE category = 'python_function' LIMIT 1)"
        ),
    )


# Runtime calls every real CUDA/HIP program makes besides launches and copies.
_LAUNCH_OR_COPY = re.compile(
    r"^(cuda|hip|cu)(LaunchKernel|Launch|ModuleLaunchKernel|ExtModuleLaunch"
    r"Kernel|Memcpy\w*|Memset\w*|GraphLaunch)"
)


def _filtered(db: TraceDB, api_names: set[str], kernels: int) -> bool:
    calls = int(db.scalar("SELECT count(*) FROM api_calls") or 0)
    return calls >= 100 and kernels > 0 and all(_LAUNCH_OR_COPY.match(n) for n in api_names)


# Below this share of the runtime calls its correlation ids number, a trace kept a sample of
# its launches: unfiltered PyTorch traces keep 6-20 % (the profiler itself leaves out
# calls such as cudaGetDevice that take ids too; an inference benchmark idling between
# passes 6 %), ROCm and Nsight traces all of them; a trace sampled after recording 0.45 %.
_SAMPLED_BELOW = 0.02


def _sampled_calls(db: TraceDB) -> tuple[int, int] | None:
    """(kept, numbered) where a filtered trace kept only a sample of its runtime calls.

    CUDA and HIP number every runtime call a process makes (the correlation id that links
    a launch to its kernel), so the ids between two kept calls count the calls dropped
    between them. Where nearly all are gone, the launches among them went with their
    kernels: the GPU ran work between the kept kernels that the trace does not show."""
    row = db.rows(
        "SELECT sum(n)::BIGINT, sum(span)::BIGINT FROM ("
        "  SELECT count(*) AS n, max(correlation_id) - min(correlation_id) + 1 AS span"
        "  FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY pid)"
    )[0]
    kept, numbered = int(row[0] or 0), int(row[1] or 0)
    if numbered <= 0 or kept >= _SAMPLED_BELOW * numbered:
        return None
    return kept, numbered


# Words that open the filtered and thinned-launch notes below: what a job's notes repeat of
# each rank's (``ranks.job``), kept beside the texts they must match.
_FILTERED_NOTE = "the trace holds only launch and copy runtime calls"
_SAMPLED_NOTE = "it keeps "
RECORDING_CAVEATS = (_FILTERED_NOTE, _SAMPLED_NOTE)


def _recording_notes(
    api_names: set[str], filtered: bool, sampled: tuple[int, int] | None = None
) -> tuple[str, ...]:
    notes: list[str] = []
    if api_names & {"cudaStreamBeginCapture", "hipStreamBeginCapture", "cuStreamBeginCapture"}:
        notes.append(
            "this trace records a CUDA/HIP graph capture: kernels recorded while capturing "
            "do not run at their replay speed, so it names the operators behind a replay but "
            "is not for timing; analyze a trace of the replays"
        )
    if filtered:
        notes.append(
            f"{_FILTERED_NOTE} (no event, stream-wait or "
            "synchronize calls): it was probably filtered or sampled after recording, so "
            "idle causes that depend on those calls (dependencies, syncs, host code) are "
            "uncertain; analyze the unfiltered trace"
        )
    if sampled is not None:
        kept, numbered = sampled
        notes.append(
            f"{_SAMPLED_NOTE}{kept:,} of the ~{numbered:,} runtime calls its correlation ids "
            f"number ({100 * kept / numbered:.2g}%): launches were dropped with their "
            "kernels, so the GPU ran work between the kept kernels that the trace does not "
            "show, its busy % is a lower bound and its idle gaps are not measured"
        )
    return tuple(notes)


def _attention(db: TraceDB, kernel_names: list[str]) -> str | None:
    ops = {
        r[0]
        for r in db.rows(
            "SELECT DISTINCT name FROM cpu_ops WHERE name LIKE 'aten::_%attention%' "
            "OR name LIKE 'aten::scaled_dot_product%'"
        )
    }
    # kernels that maintain the KV cache for an attention backend name it without being
    # attention: vLLM's `reshape_and_cache_flash_kernel`, SGLang's
    # `create_flashinfer_kv_indices_triton` beside ROCm's paged attention
    text = " ".join(k for k in kernel_names if not _ATTENTION_HELPER.search(k))
    if any("flash" in o for o in ops) or re.search(r"(?i)flash|fmha_|attn_fwd|fwd_kernel", text):
        return "flash"
    if any("efficient" in o for o in ops) or re.search(
        r"(?i)mem_efficient|efficient_attention", text
    ):
        return "efficient"
    if re.search(r"(?i)unified_attention|paged_attention|attention_kernel", text):
        return "fused"
    if any("math" in o for o in ops):
        return "math_sdpa"
    return None


def _gpu(db: TraceDB) -> GpuInfo:
    row = db.rows(
        "SELECT name, compute_capability, sm_count FROM devices "
        "WHERE device_id IN (SELECT device_id FROM kernels) ORDER BY device_id LIMIT 1"
    ) or db.rows("SELECT name, compute_capability, sm_count FROM devices ORDER BY 1 LIMIT 1")
    name, cc, sms = row[0] if row else (None, None, None)
    assumed = None
    amd_calls, cuda_calls = _counts(
        db, ("api_calls", "name LIKE 'hip%'"), ("api_calls", "name LIKE 'cuda%' OR name LIKE 'cu%'")
    )
    amd_api, cuda_api = bool(amd_calls), bool(cuda_calls)
    if not name:
        # The active device's properties may be empty (some ROCm traces): the host's other
        # GPUs, when all of one model, name it.
        others = {
            part.split(":", 1)[1].strip()
            for part in (db.info.get("host_gpus_without_work") or "").split(",")
            if ":" in part and part.split(":", 1)[1].strip()
        }
        if len(others) == 1:
            name = others.pop()
            assumed = f"named after the host's other GPUs ({name})"
    spec = lookup(
        name, cc, sms, vendor_hint="amd" if amd_api else None, gfx_arch=db.info.get("gcn_arch")
    )
    vendor = (
        spec.vendor if spec else ("amd" if amd_api else ("nvidia" if name or cuda_api else None))
    )
    if db.info.get("device_names_inferred") and not assumed:
        assumed = db.info["device_names_inferred"]  # the trace's device name was empty
    if spec and spec.assumed:
        assumed = f"{assumed}; {spec.assumed}" if assumed else spec.assumed
    return GpuInfo(
        vendor=vendor,
        name=name or None,
        arch=spec.arch.name if spec else None,
        compute_capability=cc,
        tensor_dtypes=spec.arch.tensor_dtypes if spec else (),
        spec=spec,
        assumed=assumed,
    )
