"""Serve a stream of requests with the tiny transformer, annotated and profiled.

    python -m tracelens.workloads.serve --scheduler continuous --variant tuned \\
        --requests 12 --out serve.pt.trace.json.gz

Records a PyTorch profiler Chrome trace (CPU activity, plus CUDA when a GPU is used) with
``llm.request`` / ``llm.prefill`` / ``llm.decode`` ranges from :mod:`tracelens.annotate`
(also emitted as NVTX, so the same command runs unchanged under
``nsys profile --trace=cuda,nvtx --export=sqlite``), and writes the program's own
wall-clock timestamps beside it (``<out>.timestamps.json``) so that the latencies tracelens
derives from the trace can be checked against what the program measured.

Requests arrive on a fixed, seeded schedule. The server loop is one thread: a request is
*received* when the loop first sees it (between steps); its ``llm.request`` range opens
then and closes after its last token. Schedulers:

- ``static``: take up to ``--batch`` waiting requests, prefill them, decode until all are
  done; requests arriving meanwhile wait for the whole batch;
- ``continuous``: every iteration admits waiting requests into free slots (one prefill
  step for the new ones), then runs one decode step for every running request.

Variants:

- ``tuned``: preallocated KV cache, batched decode, next tokens stay on the device and
  reach the host once per step (one copy for the whole batch);
- ``naive``: no batching (batch of one), KV cache grown by ``torch.cat``, inputs built on
  the host and copied to the device every step (pageable host-to-device copy on CUDA), and
  one ``.item()`` per token (a device synchronization on CUDA).

Timestamps are ``time.time_ns()``: the profiler's Chrome trace times plus its
``baseTimeNanoseconds`` are on the same (realtime) clock, within a fraction of a
millisecond; tests compare durations, which need no alignment.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from tracelens import annotate
from tracelens.workloads.tiny_llm import (
    ConcatCache,
    ModelConfig,
    SlotCache,
    TinyLM,
    decode_slots,
    prefill_slot,
    step_concat,
    to_device,
)


@dataclass
class Request:
    rid: str
    arrival_offset_ns: int
    prompt_len: int
    output_len: int
    received_ns: int = 0
    token_ns: list[int] = field(default_factory=list)
    done_ns: int = 0


@dataclass(frozen=True)
class ServeConfig:
    scheduler: str = "continuous"
    variant: str = "tuned"
    requests: int = 12
    batch: int = 4
    interarrival_ms: float = 4.0
    prompt_min: int = 32
    prompt_max: int = 128
    output_min: int = 8
    output_max: int = 32
    seed: int = 0
    device: str = "cpu"
    model: ModelConfig = field(default_factory=ModelConfig)


def make_requests(cfg: ServeConfig) -> list[Request]:
    rng = random.Random(cfg.seed)
    out, t = [], 0.0
    for i in range(cfg.requests):
        out.append(
            Request(
                rid=f"r{i}",
                arrival_offset_ns=int(t * 1e6),
                prompt_len=rng.randint(cfg.prompt_min, cfg.prompt_max),
                output_len=rng.randint(cfg.output_min, cfg.output_max),
            )
        )
        t += rng.expovariate(1.0 / cfg.interarrival_ms)
    return out


class Server:
    """The scheduler loop; every step is annotated, every token time is recorded."""

    def __init__(self, cfg: ServeConfig) -> None:
        self.cfg = cfg
        self.dev = torch.device(cfg.device)
        self.model = TinyLM(cfg.model).to(self.dev).eval()
        self.naive = cfg.variant == "naive"
        self.batch = 1 if self.naive else cfg.batch
        self.rng = torch.Generator().manual_seed(cfg.seed)
        self.spans: dict[str, annotate.Span] = {}
        self.slot_cache = None if self.naive else SlotCache(cfg.model, self.batch, self.dev)
        self.concat: dict[str, ConcatCache] = {}
        self.slot_of: dict[str, int] = {}
        self.next_token: dict[str, Any] = {}

    # -- bookkeeping -------------------------------------------------------------------------

    def receive(self, r: Request) -> None:
        r.received_ns = time.time_ns()
        self.spans[r.rid] = annotate.request(r.rid).start()

    def finish(self, r: Request) -> None:
        self.spans.pop(r.rid).end()
        r.done_ns = time.time_ns()
        if not self.naive:
            del self.slot_of[r.rid]
        self.concat.pop(r.rid, None)
        self.next_token.pop(r.rid, None)

    def host_input(self, values: list[int]) -> torch.Tensor:
        """Naive: inputs built on the host and copied from pageable memory every step."""
        return torch.tensor(values, dtype=torch.long).to(self.dev)

    def emit(self, tokens: list[torch.Tensor]) -> list[int]:
        """Tuned: the step's sampled tokens reach the host in one copy (one sync per step).

        A server must see its tokens to stream them and check stop conditions; without this
        the host would run ahead of the device and a step range would end at launch time,
        not when its tokens exist.
        """
        return torch.stack([t.reshape(-1) for t in tokens]).flatten().tolist()

    # -- steps -------------------------------------------------------------------------------

    def prefill(self, batch: list[Request]) -> None:
        with annotate.prefill(r.rid for r in batch):
            for r in batch:
                prompt_ids = torch.randint(
                    0, self.cfg.model.vocab, (r.prompt_len,), generator=self.rng
                ).tolist()
                if self.naive:
                    cache = self.concat[r.rid] = ConcatCache(self.cfg.model)
                    logits = step_concat(self.model, cache, self.host_input(prompt_ids))
                    self.next_token[r.rid] = int(logits.argmax().item())
                else:
                    slot = min(set(range(self.batch)) - set(self.slot_of.values()))
                    self.slot_of[r.rid] = slot
                    prompt = to_device(prompt_ids, self.dev)  # pinned, asynchronous
                    logits = prefill_slot(self.model, self.slot_cache, slot, prompt)
                    self.next_token[r.rid] = logits.argmax()
            if not self.naive:
                self.emit([self.next_token[r.rid] for r in batch])
        now = time.time_ns()
        for r in batch:
            r.token_ns.append(now)

    def decode(self, batch: list[Request]) -> None:
        with annotate.decode(r.rid for r in batch):
            if self.naive:
                for r in batch:
                    inp = self.host_input([self.next_token[r.rid]])
                    logits = step_concat(self.model, self.concat[r.rid], inp)
                    self.next_token[r.rid] = int(logits.argmax().item())
            else:
                tokens = torch.stack([self.next_token[r.rid] for r in batch])
                logits = decode_slots(
                    self.model,
                    self.slot_cache,
                    [self.slot_of[r.rid] for r in batch],
                    tokens,
                )
                nxt = logits.argmax(-1)
                for i, r in enumerate(batch):
                    self.next_token[r.rid] = nxt[i]
                self.emit([nxt])
        now = time.time_ns()
        for r in batch:
            r.token_ns.append(now)

    # -- schedulers --------------------------------------------------------------------------

    def run(self, requests: list[Request]) -> None:
        pending = deque(requests)
        waiting: deque[Request] = deque()
        running: list[Request] = []
        t0 = time.time_ns()

        def poll() -> None:
            now = time.time_ns()
            while pending and t0 + pending[0].arrival_offset_ns <= now:
                r = pending.popleft()
                self.receive(r)
                waiting.append(r)

        while pending or waiting or running:
            poll()
            if not waiting and not running:
                time.sleep(max(0.0, (t0 + pending[0].arrival_offset_ns - time.time_ns()) / 1e9))
                continue
            if self.cfg.scheduler == "static" and not running:
                batch = [waiting.popleft() for _ in range(min(self.batch, len(waiting)))]
                self.prefill(batch)
                running = self._retire(batch)
            elif self.cfg.scheduler == "continuous":
                free = self.batch - len(running)
                if free and waiting:
                    batch = [waiting.popleft() for _ in range(min(free, len(waiting)))]
                    self.prefill(batch)
                    running += self._retire(batch)
            if running:
                self.decode(running)
                running = self._retire(running)

    def _retire(self, batch: list[Request]) -> list[Request]:
        still = []
        for r in batch:
            if len(r.token_ns) >= r.output_len:
                self.finish(r)
            else:
                still.append(r)
        return still


def serve(cfg: ServeConfig, out: Path, warmup: bool = True) -> dict[str, Any]:
    """Run the workload under the profiler; write the trace and the timestamps file."""
    from torch.profiler import ProfilerActivity, profile

    server = Server(cfg)
    if warmup:  # first calls allocate and pick kernels: keep that out of the trace
        server.run(make_requests(ServeConfig(**{**asdict_shallow(cfg), "requests": 2})))
        server = Server(cfg)
    requests = make_requests(cfg)
    activities = [ProfilerActivity.CPU]
    if server.dev.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        server.run(requests)
        if server.dev.type == "cuda":
            torch.cuda.synchronize()
    out.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out))
    stamps = {
        "clock": "time.time_ns",
        "device": _device_label(server.dev),
        "torch_version": torch.__version__,
        "annotate_backends": annotate.backends(),
        "config": {k: v for k, v in asdict(cfg).items() if k != "model"},
        "model": asdict(cfg.model),
        "requests": [asdict(r) for r in requests],
    }
    Path(str(out) + ".timestamps.json").write_text(json.dumps(stamps, indent=1) + "\n")
    return stamps


def asdict_shallow(cfg: ServeConfig) -> dict[str, Any]:
    return {f: getattr(cfg, f) for f in cfg.__dataclass_fields__}


def _device_label(dev: torch.device) -> str:
    if dev.type == "cuda":
        return f"CUDA ({torch.cuda.get_device_name(dev)})"
    return "CPU (no CUDA)" if not torch.cuda.is_available() else "CPU"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scheduler", choices=["static", "continuous"], default="continuous")
    p.add_argument("--variant", choices=["naive", "tuned"], default="tuned")
    p.add_argument("--requests", type=int, default=12)
    p.add_argument("--batch", type=int, default=4, help="max requests per step (tuned)")
    p.add_argument("--interarrival-ms", type=float, default=4.0, help="mean gap between arrivals")
    p.add_argument("--prompt", type=int, nargs=2, default=[32, 128], metavar=("MIN", "MAX"))
    p.add_argument("--output", type=int, nargs=2, default=[8, 32], metavar=("MIN", "MAX"))
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", type=Path, required=True, help="trace file (.json or .json.gz)")
    a = p.parse_args(argv)
    torch.set_num_threads(1)  # steadier step times on a shared CPU, same on every machine
    cfg = ServeConfig(
        scheduler=a.scheduler,
        variant=a.variant,
        requests=a.requests,
        batch=a.batch,
        interarrival_ms=a.interarrival_ms,
        prompt_min=a.prompt[0],
        prompt_max=a.prompt[1],
        output_min=a.output[0],
        output_max=a.output[1],
        seed=a.seed,
        device=a.device,
        model=ModelConfig(d_model=a.d_model, n_layers=a.layers),
    )
    stamps = serve(cfg, a.out)
    n = sum(len(r["token_ns"]) for r in stamps["requests"])
    print(f"{a.out}: {len(stamps['requests'])} requests, {n} tokens on {stamps['device']}")


if __name__ == "__main__":
    main()
