"""A job's ranks on one timeline: every rank's lanes shifted onto the reference clock.

The planted job's ranks record on clocks offset by known amounts, and one rank's trace
starts a step later than the others' (its first step was not captured), so on their own
clocks the ranks' collectives are a step apart; on the aligned timeline every all-reduce
ends at the same instant on every rank.
"""

from __future__ import annotations

import json
import re
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from web_helpers import client_for, make_settings, wait_done

from ingest import load_trace
from tracelens.testing.planted_ranks import ALLREDUCE_KERNEL, PlantedJob, write_job
from web import timeline_aligned
from web.timeline_aligned import (
    LANE_STRIDE,
    MAX_ALIGNED_RANKS,
    MAX_HOST_RANKS,
    BadRanksError,
    aligned_clock,
    aligned_range,
    aligned_window,
)
from web.timeline_store import build_timeline_tables, timeline_meta

# Uneven offsets, one of them negative: a sign or a rank mixed up shows.
OFFSETS = {0: 0, 1: 1_234_567_000, 2: -987_654_321, 3: 55_555_555}
LATE_START_RANK = 1
SLOW_RANK = 2


def _drop_first_ms(path: Path, ms: int) -> None:
    """Leave out the first ``ms`` of a rank's trace (its first step), times kept exact."""
    doc = json.loads(path.read_text(), parse_float=Decimal)
    t0 = min(e["ts"] for e in doc["traceEvents"])
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["ts"] >= t0 + ms * 1000]
    text = json.dumps(doc, default=lambda d: f"{d:.3f}")
    path.write_text(re.sub(r'"(ts|dur)": "([0-9-]+\.[0-9]{3})"', r'"\1": \2', text))


def _drop_before_first_kernel(path: Path) -> None:
    """Leave out what a rank's trace holds before its first kernel: its timeline starts
    with a kernel (as a GPU-only capture's does)."""
    doc = json.loads(path.read_text(), parse_float=Decimal)
    first = min(e["ts"] for e in doc["traceEvents"] if e.get("cat") == "kernel")
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["ts"] >= first]
    text = json.dumps(doc, default=lambda d: f"{d:.3f}")
    path.write_text(re.sub(r'"(ts|dur)": "([0-9-]+\.[0-9]{3})"', r'"\1": \2', text))


def _loaded(job: PlantedJob) -> tuple[dict[int, Any], dict[int, dict[str, Any]], Any]:
    """Each rank's trace loaded with its timeline tables, their metadata, and the aligned
    clock the planted offsets give (standing in for the job report's)."""
    loaded = {}
    for r, path in enumerate(job.files):
        loaded[r] = load_trace(path)
        build_timeline_tables(loaded[r].con)
    metas = {r: timeline_meta(t.con) for r, t in loaded.items()}
    report = {
        "clock": {
            "reference_rank": 0,
            "offsets": [
                {"rank": r, "offset_ns": o, "method": "reference" if r == 0 else "collectives"}
                for r, o in job.offsets_ns.items()
            ],
        }
    }
    return loaded, metas, aligned_clock(report, metas)


def planted_job(folder: Path, ranks: int = 4, steps: int = 10) -> PlantedJob:
    offsets = OFFSETS if ranks == 4 else {r: r * 7_654_321 for r in range(ranks)}
    job = write_job(folder, ranks=ranks, steps=steps, slow_rank=SLOW_RANK, offsets_ns=offsets)
    _drop_first_ms(job.files[LATE_START_RANK], 6)
    return job


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("aligned")
    job = planted_job(tmp / "job")
    with client_for(make_settings(tmp / "data")) as client:
        res = client.post(
            "/api/runs",
            files=[
                ("file", (p.name, p.read_bytes(), "application/octet-stream")) for p in job.files
            ],
        )
        assert res.status_code in (200, 201), res.text
        run = wait_done(client, res.json()["id"], timeout=120)
        assert run["status"] == "ready", run["error"]
        yield client, run["id"], job


def _allreduce_ends(answer: dict[str, Any]) -> dict[int, list[int]]:
    """Each rank's all-reduce kernel ends in a timeline answer, in time order."""
    ix = answer["names"].index(ALLREDUCE_KERNEL)
    ends: dict[int, list[int]] = {}
    for lane in answer["lanes"]:
        if lane["row"] != "gpu":
            continue
        assert lane["buckets"] is None, "a planted GPU lane is sparse at this width"
        ends.setdefault(lane.get("rank", -1), []).extend(e[1] for e in lane["events"] if e[2] == ix)
    return {r: sorted(v) for r, v in ends.items()}


def test_aligned_view_puts_each_collectives_end_at_one_instant(served: Any) -> None:
    client, run_id, job = served
    report = client.get(f"/api/runs/{run_id}/report").json()
    aligned = client.get(
        f"/api/runs/{run_id}/timeline", params={"ranks": "all", "width_px": 4000}
    ).json()
    assert [r["rank"] for r in aligned["ranks"]] == [0, 1, 2, 3]
    for row in aligned["ranks"]:
        assert abs(row["offset_ns"] - job.offsets_ns[row["rank"]]) <= 2_000, row
        assert row["host"] is False and row["host_lanes"] > 0
    # GPU lanes only by default, each naming its rank; ids unique across ranks
    assert {lane["rank"] for lane in aligned["lanes"]} == {0, 1, 2, 3}
    assert all(lane["thread"] == "" for lane in aligned["lanes"])
    ids = [lane["id"] for lane in aligned["lanes"]]
    assert len(set(ids)) == len(ids)
    assert all(
        lane["id"] == lane["rank"] * LANE_STRIDE + lane["local_id"] for lane in aligned["lanes"]
    )

    ends = _allreduce_ends(aligned)
    # the late-starting rank lacks the first step's all-reduce: compare from its first
    n = len(ends[LATE_START_RANK])
    assert n == job.steps - 1
    for r in (0, 2, 3):
        assert len(ends[r]) == job.steps
        ends[r] = ends[r][-n:]
    for k in range(n):
        at = [ends[r][k] for r in range(4)]
        assert max(at) - min(at) <= 5_000, (k, at)  # within a few µs on the aligned clock

    # on their own clocks they are a step apart (what the alignment corrects)
    own = {}
    for r in range(4):
        one = client.get(
            f"/api/runs/{run_id}/timeline", params={"rank": r, "width_px": 4000}
        ).json()
        own[r] = _allreduce_ends(one)[-1][-n:]
        # the aligned time is the rank's own time read on the reference clock
        shift = next(x["shift_ns"] for x in aligned["ranks"] if x["rank"] == r)
        t0_al = aligned["t0_ns"]
        for mine, al in zip(own[r], ends[r], strict=True):
            assert al == mine - shift
            assert abs((one["t0_ns"] + mine - job.offsets_ns[r]) - (t0_al + al)) <= 2_000
    assert abs(own[LATE_START_RANK][0] - own[0][0]) > 1_000_000
    assert report["clock"]["reference_rank"] == 0


def test_host_lanes_search_and_range_on_the_aligned_clock(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, run_id, _ = served
    api = f"/api/runs/{run_id}/timeline"
    both = client.get(api, params={"ranks": "0,2", "host_ranks": "2", "width_px": 1000}).json()
    assert {lane["rank"] for lane in both["lanes"]} == {0, 2}
    hosts = {lane["rank"] for lane in both["lanes"] if lane["thread"]}
    assert hosts == {2}
    assert [r["host"] for r in both["ranks"]] == [False, True]

    found = client.get(api + "/search", params={"q": "AllReduce", "ranks": "all"}).json()
    per_rank = {r: sum(1 for m in found["matches"] if m[5] == r) for r in range(4)}
    assert per_rank == {0: 10, 1: 9, 2: 10, 3: 10}, per_rank
    assert found["count"] == len(found["matches"])
    assert [m[0] for m in found["matches"]] == sorted(m[0] for m in found["matches"])
    # past the cap, the first matches in time order of all ranks together
    monkeypatch.setattr(timeline_aligned, "MAX_MATCHES", 7)
    first = client.get(api + "/search", params={"q": "AllReduce", "ranks": "all"}).json()
    by_time = sorted(found["matches"], key=lambda m: (m[0], m[2]))
    assert first["count"] == found["count"] and first["matches"] == by_time[:7]
    assert len({m[5] for m in first["matches"]}) > 1  # the first few come from several ranks
    # a match's lane is the aligned window's, and its event is that rank's
    m = found["matches"][-1]
    ev = client.get(api + "/event", params={"kind": m[3], "ref": m[4], "rank": m[5]}).json()
    assert ev["name"] == ALLREDUCE_KERNEL and ev["lane"] == m[2] - m[5] * LANE_STRIDE

    stretch = client.get(
        api + "/range", params={"start_ns": 0, "end_ns": both["span_ns"], "ranks": "all"}
    ).json()
    assert {d["rank"] for d in stretch["devices"]} == {0, 1, 2, 3}
    assert stretch["kernels"] == sum(d["kernels"] for d in stretch["devices"])

    # refusals: both rank and ranks, ranks the job lacks, a single trace's run
    assert client.get(api, params={"rank": 1, "ranks": "all"}).status_code == 400
    bad = client.get(api, params={"ranks": "0,9"})
    assert bad.status_code == 400 and "no rank 9" in bad.json()["error"]
    assert client.get(api, params={"ranks": "x"}).status_code == 400
    # host lanes are the wide part of an answer: a few ranks' at once, however many shown
    # (the planted job has four ranks: the cap is lowered below that to be passed)
    monkeypatch.setattr(timeline_aligned, "MAX_HOST_RANKS", 2)
    many = client.get(api, params={"ranks": "all", "host_ranks": "all"})
    assert many.status_code == 400 and "host lanes" in many.json()["error"], many.text
    ok = client.get(api, params={"ranks": "all", "host_ranks": "1,3"}).json()
    assert {lane["rank"] for lane in ok["lanes"] if lane["thread"]} == {1, 3}
    # single-rank answers are unchanged: no ranks list, lanes without a rank
    plain = client.get(api, params={"rank": 2}).json()
    assert "ranks" not in plain and all("rank" not in lane for lane in plain["lanes"])


def test_straggler_finding_names_the_late_rank_and_the_others_waits(served: Any) -> None:
    client, run_id, _ = served
    report = client.get(f"/api/runs/{run_id}/report").json()
    late = next(
        f for f in report["findings"] if f["analyzer"] == "ranks" and f["rank"] == SLOW_RANK
    )
    ranges = late["time_ranges"]
    own = [r for r in ranges if r["rank"] == SLOW_RANK]
    waits = [r for r in ranges if r["rank"] != SLOW_RANK]
    assert len(own) == 5 and {r["rank"] for r in waits} == {0, 1, 3}
    assert all("waits in" in r["label"] for r in waits)

    page = client.get(f"/runs/{run_id}", params={"ranks": "all"})
    assert page.status_code == 200
    assert "on rank 0&#39;s clock" in page.text or "on rank 0's clock" in page.text
    data = json.loads(page.text.split('id="page-data">', 1)[1].split("</script>", 1)[0])
    assert [r["rank"] for r in data["aligned"]["ranks"]] == [0, 1, 2, 3]
    marks = data["highlights"][late["id"]]
    assert {m[3] for m in marks if m[2] == SLOW_RANK} == {"own"}
    assert {m[2] for m in marks if m[3] == "wait"} == {0, 1, 3}
    # on the aligned clock, each wait ends where the late rank's time before it ends
    # (it arrives): the first worst collective's
    ends_own = sorted(m[1] for m in marks if m[3] == "own")
    for m in (m for m in marks if m[3] == "wait"):
        assert min(abs(m[1] - e) for e in ends_own) <= 5_000, m
    # a view of some ranks highlights ranges on those ranks only
    some = client.get(f"/runs/{run_id}", params={"ranks": "0,2"}).text
    part = json.loads(some.split('id="page-data">', 1)[1].split("</script>", 1)[0])
    assert {m[2] for m in part["highlights"][late["id"]]} == {0, 2}
    # a punctual rank's own-clock page highlights its waits for the straggler
    page0 = client.get(f"/runs/{run_id}", params={"rank": 3}).text
    data0 = json.loads(page0.split('id="page-data">', 1)[1].split("</script>", 1)[0])
    assert len(data0["highlights"][late["id"]]) == 5


def _page_json(page: str, node: str) -> Any:
    return json.loads(page.split(f'id="{node}">', 1)[1].split("</script>", 1)[0])


def test_perfetto_opens_on_what_the_job_timeline_shows(served: Any) -> None:
    """The Perfetto download is one rank's; the button opens it at the timeline's window
    (``tl``, relative to the page's origin) or at the range the timeline steps to
    (``fr``, an index into the finding's ranges sorted by start)."""
    client, run_id, _ = served
    report = client.get(f"/api/runs/{run_id}/report").json()
    offset = {int(o["rank"]): int(o["offset_ns"] or 0) for o in report["clock"]["offsets"]}
    ref = report["clock"]["reference_rank"]
    late = next(
        f for f in report["findings"] if f["analyzer"] == "ranks" and f["rank"] == SLOW_RANK
    )
    for params, ranks in (({"ranks": "all"}, [0, 1, 2, 3]), ({"ranks": "0,2"}, [0, 2])):
        page = client.get(f"/runs/{run_id}", params=params).text
        data, perfetto = _page_json(page, "page-data"), _page_json(page, "perfetto-data")
        assert perfetto["rank"] == ref
        # the reference rank's trace, read on its own clock: the aligned origin there
        assert int(perfetto["t0_ns"]) == data["t0_ns"] - offset[ref]
        # each range shown, at its instant on the reference clock, in the timeline's order
        expected = sorted(
            (int(r["start_ns"]) - offset[r["rank"]], int(r["end_ns"]) - offset[r["rank"]])
            for r in late["time_ranges"]
            if r["rank"] in ranks
        )
        got = [(int(s), int(e)) for s, e in perfetto["ranges"][late["id"]]]
        assert [s for s, _ in got] == [s for s, _ in expected]
        assert sorted(got) == expected
        stepped = sorted(data["highlights"][late["id"]], key=lambda m: m[0])
        t0 = int(perfetto["t0_ns"])
        assert [(t0 + m[0], t0 + m[1]) for m in stepped] == got
    # a punctual rank's own page: its waits on its own clock, in start order
    page3 = client.get(f"/runs/{run_id}", params={"rank": 3}).text
    data3, perfetto3 = _page_json(page3, "page-data"), _page_json(page3, "perfetto-data")
    assert perfetto3["rank"] == 3 and int(perfetto3["t0_ns"]) == data3["t0_ns"]
    waits = sorted(
        (int(r["start_ns"]), int(r["end_ns"])) for r in late["time_ranges"] if r["rank"] == 3
    )
    assert len(waits) == 5
    assert [(int(s), int(e)) for s, e in perfetto3["ranges"][late["id"]]] == waits


def test_sixty_four_ranks_stay_bounded(tmp_path: Path) -> None:
    """64 ranks' timelines (ingested, not analysed: the window is what is measured) on one
    clock: GPU lanes only unless asked, so the answer stays small. Its time is printed,
    not asserted: on a loaded machine any bound is either loose or flaky."""
    job = planted_job(tmp_path / "job", ranks=MAX_ALIGNED_RANKS, steps=4)
    loaded, metas, clock = _loaded(job)

    def open_rank(rank: int) -> tuple[Any, dict[str, Any]]:
        return loaded[rank].con.cursor(), metas[rank]

    ranks = list(range(MAX_ALIGNED_RANKS))
    t = time.perf_counter()
    gpu = aligned_window(open_rank, clock, ranks, set(), None, None, 1500)
    took = time.perf_counter() - t
    size = len(json.dumps(gpu))
    print(f"64 ranks, GPU lanes: {size} bytes in {1000 * took:.0f} ms")
    assert len(gpu["lanes"]) == 2 * MAX_ALIGNED_RANKS  # two streams a rank
    assert all(not lane["thread"] for lane in gpu["lanes"]) and not gpu["counters"]
    assert size < 1_000_000, size
    with pytest.raises(BadRanksError, match="host lanes"):
        aligned_window(open_rank, clock, ranks, set(ranks), None, None, 1500)
    some = set(ranks[-MAX_HOST_RANKS:])
    both = aligned_window(open_rank, clock, ranks, some, None, None, 1500)
    assert {lane["rank"] for lane in both["lanes"] if lane["thread"]} == some
    for t_ in loaded.values():
        t_.close()


def test_a_stretch_before_a_ranks_start_holds_none_of_its_kernels(tmp_path: Path) -> None:
    """The late-starting rank's timeline opens with a kernel: a stretch of the aligned
    clock that ends before the rank's first event holds none of its kernels, and one that
    reaches past it does."""
    job = planted_job(tmp_path / "job", ranks=3, steps=3)
    _drop_before_first_kernel(job.files[LATE_START_RANK])
    loaded, metas, clock = _loaded(job)

    def open_rank(rank: int) -> tuple[Any, dict[str, Any]]:
        return loaded[rank].con.cursor(), metas[rank]

    begins = -clock.ranks[LATE_START_RANK].shift_ns  # its first event on the aligned clock
    assert begins > 1_000_000, begins
    before = aligned_range(open_rank, clock, [0, LATE_START_RANK], 0, begins - 1_000)
    assert {d["rank"] for d in before["devices"]} == {0}, before["devices"]
    across = aligned_range(open_rank, clock, [0, LATE_START_RANK], 0, begins + 1_000)
    late = [d for d in across["devices"] if d["rank"] == LATE_START_RANK]
    assert late and late[0]["kernels"] >= 1, across["devices"]
    for t_ in loaded.values():
        t_.close()


def test_a_rank_without_a_clock_offset_starts_with_the_reference_rank() -> None:
    """A rank whose clock could not be aligned (method none) keeps its own recorded clock:
    ns since boot, say, beside the others' epoch times. It is drawn from the reference
    rank's first event and does not move the aligned origin or stretch the span."""
    epoch = 1_700_000_000_000_000_000
    report = {
        "clock": {
            "reference_rank": 0,
            "offsets": [
                {"rank": 0, "offset_ns": 0, "method": "reference"},
                {"rank": 1, "offset_ns": 3_000_000, "method": "collectives"},
                {"rank": 2, "offset_ns": 0, "method": "none"},
            ],
        }
    }
    metas = {
        0: {"t0_ns": epoch, "span_ns": 50_000_000},
        1: {"t0_ns": epoch + 1_000_000, "span_ns": 60_000_000},  # 2 ms before rank 0
        2: {"t0_ns": 9_000_000, "span_ns": 40_000_000},
    }
    clock = aligned_clock(report, metas)
    assert clock.t0_ns == epoch - 2_000_000
    assert clock.span_ns == 60_000_000  # rank 1's, which starts first and ends last
    unsynced = clock.ranks[2]
    assert unsynced.method == "none"
    # its first event (its own time 0) is where the reference rank's is
    assert -unsynced.shift_ns == -clock.ranks[0].shift_ns == 2_000_000
    assert clock.aligned(2, metas[2]["t0_ns"]) == clock.aligned(0, metas[0]["t0_ns"])


def test_ranks_are_chosen_as_ranges_with_a_form_on_the_job_page(served: Any) -> None:
    """A job of more ranks than one view holds needs a way to page through them: the
    job page has a form of ranks and ranges (``1-3``), as the address takes them."""
    from web.timeline_aligned import compact_ranks, parse_ranks

    client, run_id, _ = served
    page = client.get(f"/runs/{run_id}", params={"ranks": "1-3"})
    assert page.status_code == 200
    data = _page_json(page.text, "page-data")
    assert [r["rank"] for r in data["aligned"]["ranks"]] == [1, 2, 3]
    form = page.text.split('id="ranks-form"', 1)[1].split("</form>", 1)[0]
    assert 'name="ranks"' in form and 'value="1-3"' in form
    bad = client.get(f"/runs/{run_id}", params={"ranks": "5-9"})
    assert bad.status_code == 400 and "no rank in 5-9 (its ranks: 0-3)" in bad.text
    # a sparse job: a range takes the ranks it holds; a named rank must exist
    sparse = list(range(0, 1024, 2))
    assert parse_ranks("64-127", sparse) == list(range(64, 128, 2))
    assert parse_ranks("0, 10-12 ,7-7", list(range(20))) == [0, 7, 10, 11, 12]
    assert compact_ranks([*sparse[:3], 7, 8, 9]) == "0,2,4,7-9"
    for spec, says in (
        ("3-1", "ends before it starts"),
        ("1-x", "comma-separated list of ranks and ranges"),
        ("0-127", f"at most {MAX_ALIGNED_RANKS} ranks at once, not 128"),
        ("5", "no rank 5 (its ranks: 0-3)"),
    ):
        with pytest.raises(BadRanksError, match=re.escape(says)):
            parse_ranks(spec, list(range(4)) if spec == "5" else list(range(200)))
