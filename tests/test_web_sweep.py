"""The web sweep: the ready runs sharing a tag, their knee and best run, as JSON and a page."""

from __future__ import annotations

import re
from pathlib import Path

from web_helpers import client_for, make_settings, upload, wait_done

from tracelens.report.sweep import build_sweep

SAMPLES = Path(__file__).parents[1] / "sample_traces"
# Three recorded serving runs with annotated requests (TTFT, TPOT from the trace itself).
RUNS = [
    ("serve_static_tuned_cpu.pt.trace.json.gz", 1),
    ("serve_continuous_naive_cpu.pt.trace.json.gz", 4),
    ("serve_continuous_tuned_cpu.pt.trace.json.gz", 8),
]


def test_sweep_of_a_tag_as_json_and_page(tmp_path: Path) -> None:
    with client_for(make_settings(tmp_path)) as client:
        reports = []
        for name, load in RUNS:
            r = upload(client, SAMPLES / name, tags=f"sweep-a, concurrency:{load}", name=name)
            run = wait_done(client, r.json()["id"])
            assert run["status"] == "ready"
            reports.append((name, client.get(f"/api/runs/{run['id']}/report").json()))
        # an unrelated run does not join the sweep
        upload(client, SAMPLES / RUNS[0][0], tags="other", name="other")

        got = client.get("/api/sweep", params={"tag": "sweep-a", "slo": "ttft=10s"})
        assert got.status_code == 200
        sweep = got.json()
        expected = build_sweep(
            reports, {name: float(load) for name, load in RUNS}, None
        )  # same runs, loads from the tags
        assert [r["label"] for r in sweep["runs"]] == [r["label"] for r in expected["runs"]]
        assert [r["param"] for r in sweep["runs"]] == [1.0, 4.0, 8.0]
        assert sweep["knee"] == expected["knee"] and sweep["slo"]

        page = client.get("/sweep", params={"tag": "sweep-a"})
        assert page.status_code == 200
        html = page.text
        assert "<svg" in html and "<script" not in html.split("<svg", 1)[1].split("</svg>")[0]
        assert len(re.findall(r"<circle ", html)) == 3
        for name, _ in RUNS:
            assert name in html

        bad = client.get("/api/sweep", params={"tag": "other"})
        assert bad.status_code == 400 and "at least two runs" in bad.json()["error"]
        assert (
            client.get("/api/sweep", params={"tag": "sweep-a", "slo": "ttft=fast"}).status_code
            == 400
        )
