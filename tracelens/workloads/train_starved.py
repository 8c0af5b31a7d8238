"""A training loop whose data loader starves the device, profiled.

    python -m tracelens.workloads.train_starved --steps 8 --out train.pt.trace.json.gz

Each sample costs ``--sample-ms`` of host time to "load" (a sleep standing in for reading
and decoding from storage), and the loader runs in the training process
(``num_workers=0``) without pinned memory, so every step waits for its batch while the
device has nothing queued; batches are then copied from pageable memory. ``--workers N``
(with pinned memory) is the fix to compare against. Each step is a ``ProfilerStep#N``
range; the loader shows up as ``enumerate(DataLoader)...`` ranges inside it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __init__(self, n: int, features: int, sample_ms: float) -> None:
        self.n, self.features, self.sample_ms = n, features, sample_ms

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.sample_ms / 1000)
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.features, generator=g), torch.randint(0, 10, (), generator=g)


def train(
    out: Path,
    steps: int = 8,
    batch: int = 16,
    features: int = 512,
    sample_ms: float = 1.0,
    workers: int = 0,
    device: str = "cpu",
) -> None:
    from torch.profiler import ProfilerAction, ProfilerActivity, profile

    torch.manual_seed(0)
    dev = torch.device(device)
    model = nn.Sequential(
        nn.Linear(features, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(
        SlowDataset(steps * batch, features, sample_ms),
        batch_size=batch,
        num_workers=workers,
        pin_memory=workers > 0 and dev.type == "cuda",
    )
    activities = [ProfilerActivity.CPU]
    if dev.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    # A schedule (here: record every step) is what makes the profiler mark each iteration
    # with a ProfilerStep#N range.
    with profile(activities=activities, schedule=lambda _: ProfilerAction.RECORD) as prof:
        for x, y in loader:
            x = x.to(dev, non_blocking=workers > 0)
            y = y.to(dev, non_blocking=workers > 0)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
    out.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--sample-ms", type=float, default=1.0, help="host time to load one sample")
    p.add_argument("--workers", type=int, default=0, help="DataLoader workers (0 = starved)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    train(a.out, a.steps, a.batch, sample_ms=a.sample_ms, workers=a.workers, device=a.device)
    print(f"{a.out}: {a.steps} steps on {a.device}")


if __name__ == "__main__":
    main()
