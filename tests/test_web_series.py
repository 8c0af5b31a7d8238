"""Series of runs: recording order, bands, change points against one-run outliers, limits
and alerts, ``tracelens upload``/``tracelens series`` against a running service, /metrics
for Prometheus and a finding's history on its permalink page.

The series is :data:`tracelens.testing.planted_series.SERIES`: twelve runs of one training
loop with a little jitter, an outlier at run 5, a sustained 1.5 ms step-time regression from
run 8, and a data-loader wait (its own finding) in runs 3 to 6 only. They are uploaded out
of recording order, so the order the series shows comes from the traces.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families
from web_helpers import client_for, make_settings, serve_process, upload, wait_done

from tracelens.testing import write_chrome_trace
from tracelens.testing.planted_series import (
    LOADER_FIRST,
    LOADER_RESOLVED,
    OUTLIER_RUN,
    REGRESSION_RUN,
    SERIES,
    series_run,
    step_us,
)

# Uploaded in this order: not the recording order.
UPLOAD_ORDER = [7, 2, 11, 0, 5, 9, 3, 1, 10, 4, 8, 6]


def _write_series(d: Path) -> list[Path]:
    return [
        write_chrome_trace(
            series_run(r.gemm_us, r.loader, r.recorded_s), d / f"{r.label}.pt.trace.json.gz"
        )
        for r in SERIES
    ]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracelens.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={k: v for k, v in os.environ.items() if not k.startswith("TRACELENS_")},
    )


def _get(base: str, path: str) -> Any:
    with urllib.request.urlopen(f"{base}{path}", timeout=30) as r:
        body = r.read()
        return json.loads(body) if r.headers.get_content_type() == "application/json" else body


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A running ``tracelens serve`` holding the series, uploaded by ``tracelens upload``."""
    d = tmp_path_factory.mktemp("series")
    paths = _write_series(d)
    with serve_process(d / "data") as base:
        ids: dict[str, str] = {}
        for i in UPLOAD_ORDER:
            r = SERIES[i]
            done = _cli(
                "upload", str(paths[i]), "--server", base, "--series", "nightly",
                "--label", r.label, "--tags", "gpu=h100,job=nightly", "--wait", "120",
                "--format", "json",
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            run = json.loads(done.stdout)
            assert run["status"] == "ready" and run["series"] == "nightly", run
            assert run["label"] == r.label
            ids[r.label] = run["id"]
        yield base, ids


def _by_label(ids: dict[str, str]) -> dict[str, str]:
    return {v: k for k, v in ids.items()}


def test_runs_follow_the_recording_time_not_the_upload_order(
    served: tuple[str, dict[str, str]],
) -> None:
    base, _ = served
    d = _get(base, "/api/series/nightly")
    assert [r["label"] for r in d["runs"]] == [r.label for r in SERIES]
    assert {r["ordered_by"] for r in d["runs"]} == {"recorded"}
    assert d["runs"][0]["time"].startswith("2026-01-01T00:00")
    step = next(m for m in d["metrics"] if m["key"] == "step")
    assert [p["value"] for p in step["points"]] == [step_us(r.gemm_us) * 1000 for r in SERIES]
    # A training loop has no LLM latencies: those metrics have no points.
    assert "ttft_p95" not in {m["key"] for m in d["metrics"]}
    run_page = urllib.request.urlopen(f"{base}/runs/{d['runs'][0]['id']}", timeout=30).read()
    assert b'id="series-link" href="/series/nightly">nightly</a> (c00)' in run_page


def test_the_regression_is_a_change_point_and_the_outlier_is_not(
    served: tuple[str, dict[str, str]],
) -> None:
    base, ids = served
    label = _by_label(ids)
    d = _get(base, "/api/series/nightly")
    step_changes = [c for c in d["change_points"] if c["metric"] == "step"]
    assert [label[c["run_id"]] for c in step_changes] == [SERIES[REGRESSION_RUN].label]
    change = step_changes[0]
    before = SERIES[REGRESSION_RUN - 1].label
    assert change["direction"] == "up" and change["meaning"] == "regression"
    # the slower kernels also keep the GPU busier: not an improvement at that run
    (busy,) = [c for c in d["change_points"] if c["metric"] == "busy"]
    assert (busy["run_id"], busy["meaning"]) == (change["run_id"], "more work")
    assert label[change["previous_run_id"]] == before
    assert change["compare"] == f"/compare?base={ids[before]}&cand={change['run_id']}"
    # The compare link of the change point opens the diff of the runs on either side.
    diff = _get(base, change["api_compare"])
    assert diff["verdict"]["status"] == "slower" and diff["verdict"]["change_pct"] > 20
    outlier = SERIES[OUTLIER_RUN].label
    assert outlier in {label[p["run_id"]] for p in d["outliers"]}
    assert ids[outlier] not in {c["run_id"] for c in d["change_points"]}
    step = next(m for m in d["metrics"] if m["key"] == "step")
    kinds = {label[p["run_id"]]: p["kind"] for p in step["points"]}
    assert kinds[outlier] == "outlier"
    # After the change, the following runs are the same move, not new change points.
    assert all(kinds[r.label] == "shifted" for r in SERIES[REGRESSION_RUN + 1 :])
    assert all(kinds[r.label] in ("normal", None) for r in SERIES[:OUTLIER_RUN])
    # The band is the runs before: the outlier's band is the normal level's.
    p5 = next(p for p in step["points"] if label[p["run_id"]] == outlier)
    assert p5["band_low"] < step_us(5000) * 1000 < p5["band_high"] < p5["value"]


def test_limits_turn_the_series_red_and_check_exits_1(served: tuple[str, dict[str, str]]) -> None:
    base, ids = served
    red = _cli("series", "nightly", "--server", base, "--limits", "step=+10%", "--check")
    assert red.returncode == 1, red.stderr
    assert "series nightly is red" in red.stderr and "median step time" in red.stderr
    assert (
        f"change point: step up (regression) at {SERIES[REGRESSION_RUN].label}, from "
        f"{SERIES[REGRESSION_RUN - 1].label}: {base}/compare?base=" in red.stdout
    )
    d = _get(base, "/api/series/nightly")
    assert d["red"] and d["limits"] == "step=+10%"
    [alert] = d["alerts"]
    assert alert["run_id"] == ids[SERIES[-1].label] and alert["metric"] == "step"
    # The median of the ten runs before the latest, not the latest's own band.
    assert alert["median"] == pytest.approx((6306 + 6312) / 2 * 1000)
    home = urllib.request.urlopen(f"{base}/", timeout=30).read().decode()
    assert 'id="series-panel"' in home and "1 red" in home and "/series/nightly" in home

    loose = _cli(
        "series", "nightly", "--server", base, "--limits", "step=+30%,busy=-5pt", "--check"
    )
    assert loose.returncode == 0, loose.stderr
    listed = _get(base, "/api/series")["series"]
    assert [(s["name"], s["red"], s["runs"]) for s in listed] == [("nightly", False, 12)]
    as_json = _cli("series", "nightly", "--server", base, "--format", "json", "--window", "5")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["window"] == 5


def test_bad_input_exits_2_with_one_line(served: tuple[str, dict[str, str]]) -> None:
    base, _ = served
    cases = [
        (("series", "nightly", "--limits", "stepp=+10%"), "unknown metric 'stepp'"),
        (("series", "nightly", "--limits", "step=+10pt"), "points (pt) apply to percentages"),
        (("series", "nosuch"), "no series 'nosuch'"),
        (("series", "nightly", "--server", "http://127.0.0.1:9"), "cannot reach"),
        (("upload", "missing.json", "--series", "x"), "no such file"),
    ]
    for args, message in cases:
        done = _cli(*args, *(() if "--server" in args else ("--server", base)))
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{base}/api/series/nightly?window=1", timeout=30)
    assert refused.value.code == 400


def test_metrics_for_prometheus(served: tuple[str, dict[str, str]]) -> None:
    base, _ = served
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as r:
        assert r.headers.get_content_type() == "text/plain"
        text = r.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    latest = {
        s.labels["metric"]: s.value
        for s in families["tracelens_series_latest"].samples
        if s.labels["series"] == "nightly"
    }
    assert latest["step_seconds"] == pytest.approx(step_us(SERIES[-1].gemm_us) * 1e-6)
    assert 0 < latest["busy_percent"] < 100 and "ttft_p95_seconds" not in latest
    # No run-level label anywhere: only series and metric / severity.
    for family in families.values():
        for sample in family.samples:
            assert set(sample.labels) <= {"series", "metric", "severity"}, sample
    [runs] = families["tracelens_series_runs"].samples
    assert runs.labels == {"series": "nightly"} and runs.value == 12
    severities = {
        s.labels["severity"]: s.value for s in families["tracelens_series_latest_findings"].samples
    }
    assert severities["critical"] == 1 and set(severities) == {
        "critical", "high", "medium", "low", "info"
    }  # fmt: skip
    assert "tracelens_series_red" in families


def test_the_grafana_dashboard_reads_the_metrics_served() -> None:
    """Every metric name and ``metric`` label the dashboard queries is one /metrics has."""
    from tracelens.series.metrics import METRICS
    from web.prometheus import PREFIX, metric_label

    dashboard = json.loads(
        (Path(__file__).parent.parent / "docs/grafana-dashboard.json").read_text()
    )
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    names = {n for e in exprs for n in re.findall(r"\b(tracelens_\w+)", e)}
    served = {f"{PREFIX}_{n}" for n in ("latest", "runs", "latest_findings", "red")}
    assert names <= served | {f"{PREFIX}_latest_timestamp_seconds"}, names
    labels = {m for e in exprs for m in re.findall(r'metric="([a-z0-9_]+)"', e)}
    assert labels and labels <= {metric_label(m.key, m.unit) for m in METRICS}, labels


def test_finding_history_on_its_permalink_page(served: tuple[str, dict[str, str]]) -> None:
    base, ids = served
    current = SERIES[LOADER_FIRST + 1].label
    findings = _get(base, f"/api/runs/{ids[current]}/findings")
    loader = next(f for f in findings if f["analyzer"] == "data_loading")
    page = (
        urllib.request.urlopen(f"{base}/runs/{ids[current]}/findings/{loader['id']}", timeout=30)
        .read()
        .decode()
    )
    assert 'id="finding-history"' in page
    first = SERIES[LOADER_FIRST].label
    resolved = SERIES[LOADER_RESOLVED].label
    assert f'id="history-first" href="/runs/{ids[first]}">{first}<' in page
    assert f'id="history-resolved" href="/runs/{ids[resolved]}">{resolved}<' in page
    assert page.count('data-state="present"') == LOADER_RESOLVED - LOADER_FIRST
    assert page.count('data-state="absent"') == len(SERIES) - (LOADER_RESOLVED - LOADER_FIRST)
    # A finding present in every run is still there: no resolution.
    hot = next(f for f in findings if f["analyzer"] == "hot_ops")
    page = (
        urllib.request.urlopen(f"{base}/runs/{ids[current]}/findings/{hot['id']}", timeout=30)
        .read()
        .decode()
    )
    assert 'id="history-unresolved"' in page and 'id="history-resolved"' not in page


def _series_on(client: TestClient, d: Path) -> dict[str, str]:
    ids = {}
    for path, r in zip(_write_series(d), SERIES, strict=True):
        res = upload(client, path, tags="gpu=h100,job=nightly", label=r.label)
        assert res.status_code == 201, res.text
        ids[r.label] = res.json()["id"]
    for run_id in ids.values():
        assert wait_done(client, run_id)["status"] == "ready"
    return ids


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_series_selected_by_tags(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Runs uploaded without a series name join one defined by their tags; on either
    catalog database."""
    overrides = {}
    if backend == "postgres":
        overrides["database_url"] = request.getfixturevalue("postgres_url")
    with client_for(make_settings(tmp_path / "data", **overrides)) as client:
        ids = _series_on(client, tmp_path)
        assert client.get("/api/series/tagged").status_code == 404
        r = client.put("/api/series/tagged", json={"tags": "job=nightly,gpu=h100"})
        assert r.status_code == 200, r.text
        d = r.json()
        assert d["tags"] == ["job=nightly", "gpu=h100"] and len(d["runs"]) == len(SERIES)
        assert [c["run_id"] for c in d["change_points"] if c["metric"] == "step"] == [
            ids[SERIES[REGRESSION_RUN].label]
        ]
        r = client.put("/api/series/tagged", json={"limits": "step=+10%"})
        assert r.json()["red"] and r.json()["tags"] == ["job=nightly", "gpu=h100"]
        # A tag the runs lack selects none of them.
        r = client.put("/api/series/other", json={"tags": "job=nightly,gpu=a100"})
        assert r.json()["runs"] == []
        for body, message in (
            ({"limits": "ttft_p95=10"}, "METRIC=[+|-]NUMBER(%|pt)"),
            ({"limits": "step=+1%,step=+2%"}, "limited twice"),
        ):
            r = client.put("/api/series/tagged", json=body)
            assert r.status_code == 400 and message in r.json()["error"], r.text
        bad_name = client.put("/api/series/a%20b", json={})
        assert bad_name.status_code == 400 and "series name" in bad_name.json()["error"]
        bad = upload(client, tmp_path / "c00.pt.trace.json.gz", series="no spaces allowed")
        assert bad.status_code == 400 and "series" in bad.json()["error"]
        page = client.get("/series/tagged")
        assert page.status_code == 200 and page.text.count('class="series-chart"') >= 3


def test_upload_and_limits_need_the_token_where_the_service_has_tokens(tmp_path: Path) -> None:
    data = tmp_path / "data"
    created = _cli("api-token", "create", "ci", "--data-dir", str(data))
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    r = SERIES[0]
    trace = write_chrome_trace(
        series_run(r.gemm_us, r.loader, r.recorded_s), tmp_path / "t.json.gz"
    )
    with serve_process(data) as base:
        refused = _cli("upload", str(trace), "--server", base, "--series", "s")
        assert refused.returncode == 2 and "401" in refused.stderr, refused.stderr
        done = subprocess.run(
            [sys.executable, "-m", "tracelens.cli", "upload", str(trace), "--server", base,
             "--series", "s", "--label", "first", "--wait", "120"],
            capture_output=True, text=True, timeout=180,
            env={**os.environ, "TRACELENS_TOKEN": token},
        )  # fmt: skip
        assert done.returncode == 0 and "\tready\t" in done.stdout, done.stderr
        no_token = _cli("series", "s", "--server", base, "--limits", "step=+5%")
        assert no_token.returncode == 2 and "401" in no_token.stderr
        ok = _cli("series", "s", "--server", base, "--token", token, "--limits", "step=+5%")
        assert ok.returncode == 0 and "limits step=+5%" in ok.stdout, ok.stderr
        # Reading needs no token; one run has no band yet, so no alert.
        check = _cli("series", "s", "--server", base, "--check")
        assert check.returncode == 0 and "s: 1 ready run;" in check.stdout
