"""The ranked list a person reads: severity by share, readable subjects, distinct titles."""

from __future__ import annotations

from tracelens.analyzers.ranking import rank, short_subject
from tracelens.core.findings import Finding, Severity
from tracelens.core.thresholds import Thresholds
from tracelens.report.model import Report
from tracelens.report.render.markdown import render_markdown


def _f(
    fid: str, impact_pct: float, title: str, severity: Severity = Severity.CRITICAL, **ev
) -> Finding:
    return Finding(
        id=fid,
        analyzer="test",
        title=title,
        severity=severity,
        impact_ns=int(impact_pct * 1e6),
        impact_pct=impact_pct,
        impact_basis="",
        summary="",
        evidence=ev,
        advice="",
    )


def test_severity_follows_share_and_never_rises_down_the_list() -> None:
    ranked = rank(
        [
            _f("a", 0.3, "tiny but marked critical"),  # an analyzer's fixed severity loses
            _f("b", 30.0, "big", Severity.INFO),
            _f("c", 4.0, "medium one", Severity.LOW),
            _f("d", 0.0, "no time at all", Severity.HIGH),
        ],
        Thresholds(),
    )
    assert [f.id for f in ranked] == ["b", "c", "a", "d"]
    assert [f.severity for f in ranked] == [
        Severity.CRITICAL,
        Severity.MEDIUM,
        Severity.INFO,
        Severity.INFO,
    ]
    severities = [int(f.severity) for f in ranked]
    assert severities == sorted(severities, reverse=True)


def test_findings_that_give_back_nothing_list_the_biggest_subject_first() -> None:
    """Informational findings all give back 0: the time they are about orders them, not
    the analyzer's name or the id's hash (a 463 ms capture-start wait, an operator with
    45 % of the kernel time, used to come after a 5 % one)."""

    def about(fid: str, analyzer: str, subject_ns: int) -> Finding:
        f = _f(fid, 0.0, f"finding {fid}", Severity.INFO)
        f.analyzer, f.subject_ns = analyzer, subject_ns
        return f

    ranked = rank(
        [
            about("a", "engine_steps", 9_000_000),
            about("b", "hot_ops", 90_000_000),
            about("c", "hot_ops", 211_000_000),
            about("d", "idle_gpu", 463_000_000),
            _f("e", 0.5, "gives back a little", Severity.INFO),
        ],
        Thresholds(),
    )
    assert [f.id for f in ranked] == ["e", "d", "c", "b", "a"]


def test_subjects_are_shortened_to_their_meaningful_part() -> None:
    assert short_subject("{'traceMarker': ['forward_pass']}") == "forward_pass"
    assert (
        short_subject(
            "<built-in method replay of pybind11_builtins.pybind11_detail_function_record_v1"
            "_system_libstdcpp_gxx_abi_1xxx object at 0x7f3a2c1d9e40>"
        )
        == "replay()"
    )
    assert short_subject(
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,"
        " at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3>)"
    ).startswith("at::native::vectorized_elementwise_kernel<4")
    assert short_subject("aten::mm") == "aten::mm"
    assert len(short_subject("x" * 500)) <= 80


def test_two_findings_never_share_a_title() -> None:
    ranked = rank(
        [
            _f("a", 5.0, "`k` underfills the GPU", grid=[4, 1, 1]),
            _f("b", 4.0, "`k` underfills the GPU", grid=[8, 1, 1]),
            _f("c", 3.0, "same words", foo=1),
            _f("d", 2.0, "same words", foo=1),
        ],
        Thresholds(),
    )
    titles = [f.title for f in ranked]
    assert len(set(titles)) == 4, titles
    assert titles[0] == "`k` underfills the GPU (grid [4, 1, 1])"


def test_minor_findings_fold_into_one_line() -> None:
    findings = [
        f.to_dict()
        for f in rank([_f("a", 12.0, "real problem"), _f("b", 0.1, "negligible")], Thresholds())
    ]
    report = {
        "schema": "tracelens.report/1",
        "tracelens_version": "0",
        "source": {"path": "t.json", "format": "torch_chrome", "sha256": "0" * 64, "size_bytes": 1},
        "trace": {"t0_ns": 0},
        "devices": [],
        "metrics": {
            "kernel_count": 1,
            "memcpy_count": 0,
            "uvm_migration_count": 0,
            "memset_count": 0,
            "h2d_bytes": 0,
            "h2d_pageable_bytes": 0,
            "h2d_time_ns": 0,
            "dtoh_bytes": 0,
            "uvm_bytes": 0,
            "uvm_htod_bytes": 0,
            "uvm_dtoh_bytes": 0,
            "uvm_time_ns": 0,
            "gpu_busy_pct": None,
            "window_ns": 100_000_000,
        },
        "workload": {
            "kind": "unknown",
            "kind_basis": "",
            "framework": "unknown",
            "framework_basis": "",
            "gpu": {
                "vendor": None,
                "name": None,
                "model": None,
                "arch": None,
                "compute_capability": None,
                "tensor_core_dtypes": [],
                "assumed": None,
            },
            "compiled": {"torch_compile": False, "cuda_graphs": False},
            "attention": None,
        },
        "findings": findings,
        "top_kernels": [],
        "top_ops": [],
        "notes": [],
    }
    text = render_markdown(Report.of(report))
    assert "| 1 | high |" in text and "real problem" in text
    assert "1 minor finding (little or no time to give back): negligible" in text
    assert "| 2 |" not in text
