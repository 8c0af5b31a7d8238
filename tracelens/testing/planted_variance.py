"""Planted duration spreads whose causes are known: different work, a trend, peer waiting,
and one that is really erratic.

Each scenario would fail a plain "same name and grid, large coefficient of variation"
test; only ``erratic_same_shapes`` is noise an expert would chase.
"""

from __future__ import annotations

from tracelens.testing.planted_device import NCCL_ALLREDUCE
from tracelens.testing.planted_host import BF16_GEMM, US
from tracelens.testing.scenario import Scenario

BN_KERNEL = "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float)"
ELIM_KERNEL = "void lu_eliminate_kernel<double>(double*, int, int)"
NOISY_KERNEL = "void gather_rows_kernel<float>(float*, float const*, long const*, int)"


def shared_kernel_layers(steps: int = 10) -> Scenario:
    """One batch-norm backward kernel, one grid (256 blocks of 512), two layer sizes.

    Each 2 ms step runs it for four 14x14 layers (47 us each) and one 56x56 layer (16x the
    elements, 673 us): durations follow the work, and with the launching operator's input
    shapes they form two tight groups.
    """
    sc = Scenario(name="planted_shared_kernel_layers")
    for k in range(steps):
        s = k * 2_000 * US
        sc.range(f"ProfilerStep#{k}", s, 2_000 * US)
        t = s + 50 * US
        for i in range(5):
            big = i == 2
            hw = 56 if big else 14
            dur = (673 if big else 47) * US
            op = sc.op(
                "aten::cudnn_batch_norm_backward",
                t,
                20 * US,
                [[32, 256, hw, hw], [32, 256, hw, hw], [256], [256]],
            )
            sc.launch(
                op, BN_KERNEL, t + 5 * US, t + 10 * US, dur, grid=(256, 1, 1), block=(512, 1, 1)
            )
            t += dur + 20 * US
    return sc


def shrinking_elimination(n: int = 200) -> Scenario:
    """A CUDA C LU factorisation: one elimination kernel per pivot, same grid, no operators.

    Pivot k updates the trailing (n-k)^2 submatrix, so durations shrink from 500 us to
    almost nothing with launch order: a trend, not noise.
    """
    sc = Scenario(name="planted_shrinking_elimination")
    t = 0
    for k in range(n):
        dur = max(1 * US, int(500 * US * ((n - k) / n) ** 2))
        sc.launch(None, ELIM_KERNEL, t, t + 5 * US, dur, grid=(64, 64, 1), block=(16, 16, 1))
        t += dur + 10 * US
    return sc


def erratic_same_shapes(steps: int = 10) -> Scenario:
    """A gather kernel on identical shapes: 10 us, except every seventh launch takes 80 us,
    scattered over the run with no trend and not in the first calls."""
    sc = Scenario(name="planted_erratic_same_shapes")
    i = 0
    for k in range(steps):
        s = k * 1_000 * US
        sc.range(f"ProfilerStep#{k}", s, 1_000 * US)
        t = s + 10 * US
        for _ in range(20):
            i += 1
            dur = 80 * US if i % 7 == 3 else 10 * US
            op = sc.op("aten::index_select", t, 8 * US, [[4096, 1024], [], [512]])
            sc.launch(
                op, NOISY_KERNEL, t + 2 * US, t + 4 * US, dur, grid=(512, 1, 1), block=(128, 1, 1)
            )
            t += dur + 10 * US
    return sc


def nccl_peer_waiting(steps: int = 20) -> Scenario:
    """Rank 0 of 4: a 4 ms GEMM then a 100 MB all-reduce each 14 ms step. The transfer takes
    2 ms; in every fourth step a peer arrives 6 ms late, so that kernel runs 8 ms, the
    extra 6 ms spinning while it waits. No compute runs beside the all-reduce."""
    sc = Scenario(name="planted_nccl_peer_waiting", rank=0, world_size=4)
    late = []
    for k in range(steps):
        s = k * 14_000 * US
        sc.range(f"ProfilerStep#{k}", s, 14_000 * US)
        mm = sc.op("aten::mm", s, 20 * US, [[8192, 8192], [8192, 8192]])
        sc.launch(mm, BF16_GEMM, s + 5 * US, s + 100 * US, 4_000 * US)
        wait = 6_000 * US if k % 4 == 1 else 0
        if wait:
            late.append(f"ProfilerStep#{k}")
        sc.collective(
            "allreduce",
            s + 50 * US,
            30 * US,
            25_000_000,
            NCCL_ALLREDUCE,
            gpu_start_ns=s + 4_200 * US,
            gpu_dur_ns=2_000 * US + wait,
            group_size=4,
        )
    sc.expected = {
        "comm_ns": steps * 2_000 * US + len(late) * 6_000 * US,
        "waiting_ns": len(late) * 6_000 * US,
        "late_steps": late,
    }
    return sc
