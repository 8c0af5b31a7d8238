"""Environment settings a harness wrote into a trace's metadata: the few advice depends on
are kept as trace facts, nothing else (the same dictionaries hold access tokens)."""

from __future__ import annotations

import json
from pathlib import Path

from ingest import load_trace
from ingest.chrome.recorded_env import recorded_settings
from tracelens.analyzers import hot_ops
from tracelens.core.thresholds import Thresholds
from tracelens.core.tracedb import TraceDB
from tracelens.core.workload import TunableOp, workload_of


def test_only_the_kept_variables_are_taken_wherever_the_harness_put_them() -> None:
    meta = {
        "metadata": {
            "system": {
                "env": {
                    "PYTORCH_TUNABLEOP_ENABLED": "1",
                    "PYTORCH_TUNABLEOP_TUNING": 0,
                    "HF_TOKEN": "hf_secret",
                    "PATH": "/usr/bin",
                },
            },
            "runs": [{"env": {"PYTORCH_TUNABLEOP_FILENAME": "tuned.csv"}}],
        },
    }
    assert recorded_settings(meta) == {
        "env.PYTORCH_TUNABLEOP_ENABLED": "1",
        "env.PYTORCH_TUNABLEOP_TUNING": "0",
        "env.PYTORCH_TUNABLEOP_FILENAME": "tuned.csv",
    }
    # nested without end: the search stops, it does not recurse forever
    deep: dict = {}
    node = deep
    for _ in range(10_000):
        node["x"] = {}
        node = node["x"]
    node["PYTORCH_TUNABLEOP_ENABLED"] = "1"
    assert recorded_settings(deep) == {}


def test_tunableop_defaults_to_tuning_when_only_enabled() -> None:
    assert TunableOp.of({}) is None
    on = TunableOp.of({"env.PYTORCH_TUNABLEOP_ENABLED": "1"})
    assert on == TunableOp(enabled=True, tuning=True, results_file=None)
    off = TunableOp.of({"env.PYTORCH_TUNABLEOP_ENABLED": "0"})
    assert off is not None and not off.enabled


def _rocm_trace(path: Path, env: dict[str, str] | None) -> Path:
    """A PyTorch run on an MI300X whose time is one bf16 hipBLASLt GEMM operator."""
    events = []
    for i in range(20):
        ts = 1000 + i * 400
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts,
             "dur": 30, "args": {"External id": i, "Input Dims": [[4096, 4096], [4096, 4096]],
                                 "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "hipExtModuleLaunchKernel", "pid": 1,
             "tid": 1, "ts": ts + 5, "dur": 10, "args": {"External id": i, "correlation": i}},
            {"ph": "X", "cat": "kernel",
             "name": "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1",
             "pid": 2, "tid": 0, "ts": ts + 20, "dur": 350,
             "args": {"External id": i, "correlation": i, "device": 0, "stream": 0}},
        ]  # fmt: skip
    doc: dict = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X", "gcnArchName": "gfx942",
                              "computeMajor": 9, "computeMinor": 4, "numSms": 304,
                              "warpSize": 64, "totalGlobalMem": 205822885888}],
        "roctracer_version": 4,
        "traceEvents": events,
    }  # fmt: skip
    if env is not None:
        doc["metadata"] = {"system": {"env": {**env, "HF_TOKEN": "hf_" + "x" * 34}}}
    path.write_text(json.dumps(doc))
    return path


def _gemm_advice(path: Path) -> tuple[str, dict[str, str]]:
    loaded = load_trace(path, find_captures=False)
    db = TraceDB(loaded.con)
    (mm,) = [f for f in hot_ops.analyze(db, Thresholds()) if f.evidence["operator"] == "aten::mm"]
    assert workload_of(db).amd
    return mm.advice, db.info


def test_gemm_advice_follows_the_recorded_tunableop_setting(tmp_path: Path) -> None:
    plain, info = _gemm_advice(_rocm_trace(tmp_path / "plain.json", None))
    assert "`PYTORCH_TUNABLEOP_ENABLED=1`" in plain and "already on" not in plain
    assert not any(k.startswith("env.") for k in info)

    off = {
        "PYTORCH_TUNABLEOP_ENABLED": "1",
        "PYTORCH_TUNABLEOP_TUNING": "0",
        "PYTORCH_TUNABLEOP_FILENAME": "tuned_%d.csv",
    }
    advice, info = _gemm_advice(_rocm_trace(tmp_path / "off.json", off))
    assert "already on with tuning off" in advice and "`tuned_%d.csv`" in advice
    assert "let PyTorch tune" not in advice
    assert info["env.PYTORCH_TUNABLEOP_TUNING"] == "0"
    assert "HF_TOKEN" not in json.dumps(info) and "hf_xxx" not in json.dumps(info)

    tuning, _ = _gemm_advice(_rocm_trace(tmp_path / "on.json", {"PYTORCH_TUNABLEOP_ENABLED": "1"}))
    assert "already on and tuning" in tuning


def test_only_the_named_packages_are_kept_from_a_recorded_pip_list() -> None:
    from ingest.chrome.recorded_env import recorded_packages

    meta = {
        "metadata": {
            "system": {
                "pip_packages": [
                    "absl-py==2.3.1",
                    "flash_attn==2.7.4.post1",
                    "Transformers==4.49.0",
                    "private-internal-tool==1.0",
                ],
            },
        },
    }
    assert recorded_packages(meta) == {
        "package.flash_attn": "2.7.4.post1",
        "package.transformers": "4.49.0",
    }
