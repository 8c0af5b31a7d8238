"""An operator finding left un-costed (no recorded shapes) says which finding costs its
FP32 matrix kernels, so "not costed" beside the FP32 finding's figure for the same
kernels reads as one account, not two."""

from __future__ import annotations

from pathlib import Path

from tracelens.testing import write_chrome_trace
from tracelens.testing.reports import report_of_file
from tracelens.testing.scenario import DeviceSpec, Scenario

US = 1_000


def _report(tmp_path: Path, shapes: bool) -> dict:
    """A V100 whose convolutions run FP32 cuDNN kernels, recorded with or without shapes."""
    sc = Scenario("fp32_convs", devices=[DeviceSpec(0, "Tesla V100-SXM2-32GB", 80, 32 << 30, 7, 0)])
    t = 0
    for _ in range(40):
        conv = sc.op(
            "aten::cudnn_convolution",
            t,
            50 * US,
            [[32, 64, 56, 56], [64, 64, 3, 3]] if shapes else None,
        )
        sc.launch(conv, "volta_scudnn_128x64_relu_small_nn_v1", t + 5 * US, t + 10 * US, 900 * US)
        t += 1_000 * US
    path = write_chrome_trace(sc, tmp_path / f"fp32_{shapes}.pt.trace.json.gz")
    return report_of_file(path)


def test_an_uncosted_operator_names_the_fp32_finding(tmp_path: Path) -> None:
    r = _report(tmp_path, shapes=False)
    (fp32,) = [f for f in r["findings"] if "fp32_ns" in f["evidence"]]
    (op,) = [
        f
        for f in r["findings"]
        if f["analyzer"] == "hot_ops" and f["evidence"]["operator"] == "aten::cudnn_convolution"
    ]
    assert not op["costed"] and fp32["costed"] and fp32["impact_ns"] > 0
    assert op["impact_basis"].endswith(
        f"36 ms of its kernel time is FP32 GEMM/convolution kernels, which the FP32 math "
        f"finding ({fp32['id']}) counts in its estimate."
    )


def test_a_costed_operator_is_not_cited(tmp_path: Path) -> None:
    """With shapes the operator has its own estimate, and the FP32 finding leaves its
    kernels out: nothing to cite."""
    r = _report(tmp_path, shapes=True)
    for f in r["findings"]:
        if f["analyzer"] == "hot_ops":
            assert "which the FP32 math finding" not in f["impact_basis"]
