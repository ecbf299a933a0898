"""GET /v1/comparisons and GET /v1/comparisons/frontier over stored runs, against figures
computed by hand: filters, grouping and aggregation, sorting and pages, CSV, the warning
when rows mix workloads, client-bound runs left out (and counted), rows on inadequate
evidence marked, and a frontier with a dominated point that leaves inadequate runs out.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from infercost.figures.metrics import STAT_KEYS
from tests.conftest import TeamClient, insert_finished_run

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
FP_A, FP_B = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
ADEQUATE = json.dumps({"ok": True, "reasons": []})


def dist(**figures: float) -> dict[str, float | None]:
    """A stored distribution with only the given statistics known."""
    return {**dict.fromkeys(STAT_KEYS), "count": 100, **figures}


def per_million(usd_per_hour: float, tokens_per_s: float) -> float:
    return usd_per_hour / (tokens_per_s * 3600) * 1e6


@dataclass
class Fleet:
    """Three llama-8b deployments (H200 x1, H100 x2, a hosted API) and one qwen-7b."""

    team: TeamClient
    runs: dict[str, str]


async def store(
    db: Any,
    team: TeamClient,
    endpoint: dict[str, Any],
    *,
    level: float,
    out: float,
    per_user: float,
    ttft: float,
    finished: datetime,
    fingerprint: str = FP_A,
    **columns: Any,
) -> str:
    stats = {
        "per_user_tokens_per_s": dist(p50=per_user),
        "itl_ms": dist(p50=1000 / per_user, p95=1200 / per_user),
        "e2e_ms": dist(p50=ttft + 100, p95=ttft + 200),
    }
    _, run_id = await insert_finished_run(
        db,
        team.team_id,
        endpoint["id"],
        level=float(level),
        output_tokens_per_s=out,
        input_tokens_per_s=out * 3,
        total_tokens_per_s=out * 4,
        requests_per_s=out / 100,
        ttft_p50_ms=ttft,
        stats=json.dumps(stats),
        finished_at=finished,
        started_at=finished - HOUR / 60,
        workload_fingerprint=fingerprint,
        **{
            "slo_passed": True,
            "client_bound": False,
            "requests_total": 300,
            "requests_succeeded": 300,
            "adequacy": ADEQUATE,
            **columns,
        },
    )
    return run_id


@pytest.fixture
async def fleet(team: TeamClient, db: Any) -> Fleet:
    h200 = await team.create_endpoint(
        model="llama-8b", engine="vllm", hardware="H200-SXM", usd_per_hour=3.5,
        tags={"env": "prod"},
    )  # fmt: skip
    h100 = await team.create_endpoint(
        model="llama-8b", engine="vllm", hardware="H100-SXM", gpu_count=2, usd_per_hour=4.4,
        tags={"env": "dev"},
    )  # fmt: skip
    hosted = await team.create_endpoint(
        model="llama-8b", hardware=None, usd_per_hour=None,
        usd_per_million_input_tokens=0.5, usd_per_million_output_tokens=2.0,
    )  # fmt: skip
    qwen = await team.create_endpoint(
        model="qwen-7b", engine="sglang", hardware="H200-SXM", usd_per_hour=3.5,
        tags={"env": "dev"},
    )  # fmt: skip
    h200_run = {"usd_per_hour": 3.5}
    runs = {
        # Level 1 measured twice: medians 110 tok/s, 105 tok/s per user, 45 ms TTFT.
        "h200_l1_a": await store(db, team, h200, level=1, out=100, per_user=100, ttft=40,
                                 finished=T0, **h200_run),
        "h200_l1_b": await store(db, team, h200, level=1, out=120, per_user=110, ttft=50,
                                 finished=T0 + HOUR, **h200_run),
        "h200_l8": await store(db, team, h200, level=8, out=800, per_user=90, ttft=80,
                               finished=T0 + HOUR, **h200_run),
        "h200_l16": await store(db, team, h200, level=16, out=1500, per_user=50, ttft=150,
                                finished=T0 + HOUR, slo_passed=False, **h200_run),
        "h200_l32": await store(db, team, h200, level=32, out=2000, per_user=30, ttft=400,
                                finished=T0 + HOUR, client_bound=True, **h200_run),
        # Another workload on the same deployment and level.
        "h200_l1_fp_b": await store(db, team, h200, level=1, out=90, per_user=95, ttft=42,
                                    finished=T0 + HOUR, fingerprint=FP_B, **h200_run),
        # Two GPUs: 600 and 700 output tokens/s per GPU.
        "h100_l8": await store(db, team, h100, level=8, out=1200, per_user=95, ttft=70,
                               finished=T0 - 200 * HOUR, usd_per_hour=4.4),
        "h100_l16": await store(db, team, h100, level=16, out=1400, per_user=40, ttft=120,
                                finished=T0 + HOUR, usd_per_hour=4.4),
        # Priced per token: (150 x 0.5 + 50 x 2.0) / 50 = USD 3.50 per million output tokens.
        "hosted_l1": await store(db, team, hosted, level=1, out=50, per_user=30, ttft=300,
                                 finished=T0 + HOUR, usd_per_million_input_tokens=0.5,
                                 usd_per_million_output_tokens=2.0),
        "qwen_l4": await store(db, team, qwen, level=4, out=500, per_user=70, ttft=60,
                               finished=T0 + HOUR, **h200_run),
    }  # fmt: skip
    # A failed run is never compared.
    await store(db, team, h200, level=64, out=9999, per_user=1, ttft=1, finished=T0,
                status="failed", **h200_run)  # fmt: skip
    return Fleet(team, runs)


async def compare(fleet: Fleet, **params: Any) -> dict[str, Any]:
    response = await fleet.team.http.get("/v1/comparisons", params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


def key(row: dict[str, Any]) -> tuple[str | None, float]:
    return row["deployment"]["hardware"], row["level"]


async def test_rows_per_deployment_and_level_take_the_median_of_repeated_runs(
    fleet: Fleet,
) -> None:
    page = await compare(
        fleet,
        model="llama-8b",
        workload_fingerprint=FP_A,
        hardware="H200-SXM",
        figures="output_tokens_per_s,per_user_tokens_per_s_p50,ttft_p50,cost_per_million_output_tokens_usd",
    )
    assert page["figures"] == [
        "output_tokens_per_s",
        "per_user_tokens_per_s_p50",
        "ttft_p50_ms",
        "cost_per_million_output_tokens_usd",
    ]
    assert page["group_by"] == "deployment_level" and page["aggregate"] == "median"
    assert page["fingerprints"] == [FP_A] and page["mixed_workloads"] is False
    # Level 32 is client-bound, so left out by default, and the page says so; the failed
    # level 64 never shows.
    assert page["excluded"] == {"client_bound": 1}
    [left_out] = page["warnings"]
    assert left_out.startswith("1 client-bound run(s) matching this query were left out")
    assert [r["level"] for r in page["items"]] == [1, 8, 16]
    assert page["total"] == 3
    assert all(r["adequate"] is True and r["inadequate"] == [] for r in page["items"])
    assert page["inadequate_rows"] == 0
    one = page["items"][0]
    assert one["deployment"] == {
        "model": "llama-8b",
        "engine": "vllm",
        "hardware": "H200-SXM",
        "gpu_count": 1,
    }
    assert one["workload_fingerprint"] == FP_A and one["client_bound"] is False
    assert one["runs"] == 2
    assert one["run_ids"] == [fleet.runs["h200_l1_a"], fleet.runs["h200_l1_b"]]
    figures = one["figures"]
    assert figures["output_tokens_per_s"] == pytest.approx(110)
    assert figures["per_user_tokens_per_s_p50"] == pytest.approx(105)
    assert figures["ttft_p50_ms"] == pytest.approx(45)
    # The median of each run's cost (9.722 and 8.102), not the cost at the median speed.
    assert figures["cost_per_million_output_tokens_usd"] == pytest.approx(
        (per_million(3.5, 100) + per_million(3.5, 120)) / 2
    )
    latest = await compare(
        fleet, model="llama-8b", workload_fingerprint=FP_A, hardware="h200-sxm", aggregate="latest",
        figures="output_tokens_per_s,itl_p50,e2e_p95",
    )  # fmt: skip
    first = latest["items"][0]["figures"]
    assert first["output_tokens_per_s"] == 120
    assert first["itl_p50_ms"] == pytest.approx(1000 / 110)
    assert first["e2e_p95_ms"] == pytest.approx(250)


async def test_cost_is_the_run_summarys_cost_for_hourly_and_per_token_prices(
    fleet: Fleet,
) -> None:
    page = await compare(fleet, model="llama-8b", workload_fingerprint=FP_A)
    by_run = {r["run_ids"][-1]: r for r in page["items"] if r["runs"] == 1}
    for name in ("h200_l8", "h100_l16", "hosted_l1"):
        run_id = fleet.runs[name]
        response = await fleet.team.http.get(f"/v1/runs/{run_id}")
        assert response.status_code == 200, response.text
        summary = response.json()
        figures = by_run[run_id]["figures"]
        assert figures["cost_per_million_output_tokens_usd"] == pytest.approx(
            summary["cost"]["per_million_output_tokens_usd"], rel=1e-12
        ), name
        assert figures["cost_per_million_total_tokens_usd"] == pytest.approx(
            summary["cost"]["per_million_total_tokens_usd"], rel=1e-12
        ), name
    hosted = by_run[fleet.runs["hosted_l1"]]
    assert hosted["figures"]["cost_per_million_output_tokens_usd"] == pytest.approx(3.5)
    # No hardware, so no per-GPU throughput; two H100s halve it.
    assert hosted["figures"]["output_tokens_per_s_per_gpu"] is None
    h100 = by_run[fleet.runs["h100_l16"]]
    assert h100["figures"]["output_tokens_per_s_per_gpu"] == pytest.approx(700)
    # Input is three times output here: 5,600 total tokens/s on two GPUs.
    assert h100["figures"]["total_tokens_per_s_per_gpu"] == pytest.approx(2800)
    assert h100["figures"]["cost_per_million_total_tokens_usd"] == pytest.approx(
        per_million(4.4, 5600)
    )
    assert h100["figures"]["cost_per_million_output_tokens_usd"] == pytest.approx(
        per_million(4.4, 1400)
    )


async def test_sort_and_pages(fleet: Fleet) -> None:
    params = {"model": "llama-8b", "workload_fingerprint": FP_A, "figures": "output_tokens_per_s"}
    everything = await compare(fleet, **params, sort="-output_tokens_per_s")
    outs = [r["figures"]["output_tokens_per_s"] for r in everything["items"]]
    assert outs == [1500, 1400, 1200, 800, 110, 50]
    page = await compare(fleet, **params, sort="-output_tokens_per_s", limit=2, offset=1)
    assert [r["figures"]["output_tokens_per_s"] for r in page["items"]] == [1400, 1200]
    assert page["total"] == 6 and page["limit"] == 2 and page["offset"] == 1
    assert page["sort"] == ["-output_tokens_per_s"]
    # Sorting by a figure not asked for shows it too; nulls (the hosted API) come last.
    per_gpu = await compare(fleet, **params, sort="output_tokens_per_s_per_gpu")
    assert per_gpu["figures"] == ["output_tokens_per_s", "output_tokens_per_s_per_gpu"]
    assert [r["figures"]["output_tokens_per_s_per_gpu"] for r in per_gpu["items"]] == [
        110, 600, 700, 800, 1500, None,
    ]  # fmt: skip
    # By deployment fields, then (ties) by deployment and level; the hosted API has no hardware.
    by_hardware = await compare(fleet, **params, sort="-hardware,-level")
    assert [key(r) for r in by_hardware["items"]] == [
        ("H200-SXM", 16), ("H200-SXM", 8), ("H200-SXM", 1),
        ("H100-SXM", 16), ("H100-SXM", 8), (None, 1),
    ]  # fmt: skip
    by_gpus = await compare(fleet, **params, sort="-gpu_count,runs")
    assert [r["deployment"]["gpu_count"] for r in by_gpus["items"]][:2] == [2, 2]
    assert [r["runs"] for r in by_gpus["items"]][2:] == [1, 1, 1, 2]
    beyond = await compare(fleet, **params, offset=50)
    assert beyond["items"] == [] and beyond["total"] == 6 and beyond["fingerprints"] == [FP_A]


async def test_group_by_deployment_takes_its_highest_throughput_level(fleet: Fleet) -> None:
    params = {"model": "llama-8b", "workload_fingerprint": FP_A, "group_by": "deployment"}
    page = await compare(fleet, **params)
    assert sorted((key(r) for r in page["items"]), key=str) == sorted(
        [("H200-SXM", 16), ("H100-SXM", 16), (None, 1)], key=str
    )
    # Only levels that met their SLO: the H200's best is then level 8.
    passed = await compare(fleet, **params, slo_passed="true")
    assert {key(r) for r in passed["items"]} == {("H200-SXM", 8), ("H100-SXM", 16), (None, 1)}
    assert all(r["slo_passed"] is True for r in passed["items"])
    # With client-bound runs, the H200's level 32 wins and is flagged.
    bound = await compare(fleet, **params, include_client_bound="true")
    h200 = next(r for r in bound["items"] if r["deployment"]["hardware"] == "H200-SXM")
    assert h200["level"] == 32 and h200["client_bound"] is True
    assert h200["run_ids"] == [fleet.runs["h200_l32"]]
    assert any("client-bound" in w for w in bound["warnings"])
    # Shown on request, a client-bound row is marked inadequate, and nothing is excluded.
    assert h200["adequate"] is False
    assert [r["code"] for r in h200["inadequate"]] == ["client_bound"]
    assert bound["excluded"] == {}


async def test_filters(fleet: Fleet) -> None:
    def rows(page: dict[str, Any]) -> set[tuple[str, str | None, float]]:
        return {
            (r["deployment"]["model"], r["deployment"]["hardware"], r["level"])
            for r in page["items"]
        }

    prod = await compare(fleet, tag="env:prod", workload_fingerprint=FP_A)
    assert rows(prod) == {
        ("llama-8b", "H200-SXM", 1),
        ("llama-8b", "H200-SXM", 8),
        ("llama-8b", "H200-SXM", 16),
    }
    tagged = await compare(fleet, tag="env")
    assert {m for m, _, _ in rows(tagged)} == {"llama-8b", "qwen-7b"}
    assert rows(await compare(fleet, engine="sglang")) == {("qwen-7b", "H200-SXM", 4)}
    assert rows(await compare(fleet, hardware="h100-sxm")) == {
        ("llama-8b", "H100-SXM", 8),
        ("llama-8b", "H100-SXM", 16),
    }
    # The H100's level 8 finished 200 hours before T0.
    since = (T0 - HOUR).isoformat()
    assert rows(await compare(fleet, hardware="H100-SXM", since=since)) == {
        ("llama-8b", "H100-SXM", 16)
    }
    until = T0.isoformat()
    assert rows(await compare(fleet, until=until)) == {("llama-8b", "H100-SXM", 8)}
    qwen_ep = (await compare(fleet, model="qwen-7b"))["items"][0]["endpoint_ids"]
    assert rows(await compare(fleet, endpoint_id=qwen_ep[0])) == {("qwen-7b", "H200-SXM", 4)}
    both = await compare(fleet, model=["qwen-7b", "llama-8b"], hardware="H200-SXM")
    assert {m for m, _, _ in rows(both)} == {"llama-8b", "qwen-7b"}


async def test_rows_from_several_workloads_are_flagged_never_merged(fleet: Fleet) -> None:
    page = await compare(
        fleet, model="llama-8b", hardware="H200-SXM", figures="output_tokens_per_s"
    )
    assert page["fingerprints"] == [FP_A, FP_B]
    assert page["mixed_workloads"] is True
    assert any("2 different workloads" in w and FP_B in w for w in page["warnings"])
    level_one = [r for r in page["items"] if r["level"] == 1]
    assert {r["workload_fingerprint"]: r["figures"]["output_tokens_per_s"] for r in level_one} == {
        FP_A: 110,
        FP_B: 90,
    }


async def test_csv(fleet: Fleet) -> None:
    response = await fleet.team.http.get(
        "/v1/comparisons",
        params={
            "model": "llama-8b",
            "hardware": "H200-SXM",
            "figures": "output_tokens_per_s,ttft_p50",
        },
        headers={"Accept": "text/csv"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/csv")
    assert response.headers["x-total-count"] == "4"
    assert response.headers["x-mixed-workloads"] == "true"
    table = list(csv.DictReader(io.StringIO(response.text)))
    assert list(table[0]) == [
        "model", "engine", "hardware", "gpu_count", "mode", "level", "workload_fingerprint",
        "runs", "client_bound", "slo_passed", "adequate", "inadequate", "first_measured_at",
        "last_measured_at", "output_tokens_per_s", "ttft_p50_ms", "run_ids",
    ]  # fmt: skip
    first = table[0]
    assert first["level"] == "1.0" and first["workload_fingerprint"] == FP_A
    assert float(first["output_tokens_per_s"]) == 110 and float(first["ttft_p50_ms"]) == 45
    assert first["run_ids"].split() == [fleet.runs["h200_l1_a"], fleet.runs["h200_l1_b"]]
    assert first["client_bound"] == "false" and first["last_measured_at"] == "2026-11-01T01:00:00Z"
    assert first["adequate"] == "true" and first["inadequate"] == ""
    assert [(r["level"], r["workload_fingerprint"]) for r in table] == [
        ("1.0", FP_A), ("8.0", FP_A), ("16.0", FP_A), ("1.0", FP_B),
    ]  # fmt: skip


async def test_frontier_leaves_out_a_dominated_point(fleet: Fleet) -> None:
    mixed = await fleet.team.http.get("/v1/comparisons/frontier", params={"model": "llama-8b"})
    assert mixed.status_code == 422
    assert "workload_fingerprint" in mixed.json()["detail"] and FP_B in mixed.json()["detail"]

    response = await fleet.team.http.get(
        "/v1/comparisons/frontier",
        params={"model": "llama-8b", "workload_fingerprint": FP_A, "include_dominated": "true"},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["x"] == "per_user_tokens_per_s_p50" and body["y"] == "output_tokens_per_s_per_gpu"
    assert body["workload_fingerprint"] == FP_A
    # (x per-user tok/s, y tok/s per GPU): H200 L16 (50, 1500), H200 L8 (90, 800),
    # H100 L8 (95, 600), H200 L1 (105, 110); H100 L16 (40, 700) is beaten by H200 L16.
    assert [
        (key(p), p["per_user_tokens_per_s_p50"], p["output_tokens_per_s_per_gpu"])
        for p in body["frontier"]
    ] == [
        (("H200-SXM", 16), 50, 1500),
        (("H200-SXM", 8), 90, 800),
        (("H100-SXM", 8), 95, 600),
        (("H200-SXM", 1), 105, 110),
    ]
    assert [p["cost_per_million_output_tokens_usd"] for p in body["frontier"]] == pytest.approx(
        [per_million(3.5, 1500), per_million(3.5, 800), per_million(4.4, 1200),
         (per_million(3.5, 100) + per_million(3.5, 120)) / 2]
    )  # fmt: skip
    [dominated] = body["dominated"]
    assert key(dominated) == ("H100-SXM", 16) and dominated["dominated_by"] == 0
    assert dominated["run_ids"] == [fleet.runs["h100_l16"]]
    # The hosted API has no GPUs to divide by; the client-bound level 32 is left out.
    assert body["left_out"] == 1
    plain = await fleet.team.http.get("/v1/comparisons/frontier", params={"model": "qwen-7b"})
    assert plain.status_code == 200 and plain.json()["dominated"] is None
    assert [key(p) for p in plain.json()["frontier"]] == [("H200-SXM", 4)]


async def test_bad_parameters_and_other_teams(fleet: Fleet, new_team: Callable[..., Any]) -> None:
    http = fleet.team.http
    unknown = await http.get("/v1/comparisons", params={"figures": "ttft_p50,speed"})
    assert unknown.status_code == 422
    assert "unknown figure 'speed'" in unknown.json()["detail"]
    assert (await http.get("/v1/comparisons", params={"sort": "-colour"})).status_code == 422
    assert (await http.get("/v1/comparisons", params={"group_by": "model"})).status_code == 422
    naive = await http.get("/v1/comparisons", params={"since": "2026-11-01T00:00:00"})
    assert naive.status_code == 422 and "time zone" in naive.json()["detail"]
    other: TeamClient = await new_team()
    theirs = (await other.http.get("/v1/comparisons")).json()
    assert theirs["items"] == [] and theirs["total"] == 0 and theirs["fingerprints"] == []


async def test_runs_keep_the_deployment_they_measured(team: TeamClient, db: Any) -> None:
    """Re-sizing an endpoint after a run does not move that run: it stays on one GPU with
    its per-GPU throughput, and the next run is a deployment of its own."""
    endpoint = await team.create_endpoint(
        model="llama-70b", engine="vllm", hardware="H100-SXM", usd_per_hour=2.0
    )
    before = await store(db, team, endpoint, level=4, out=400, per_user=50, ttft=90,
                         finished=T0, usd_per_hour=2.0)  # fmt: skip
    response = await team.http.patch(f"/v1/endpoints/{endpoint['id']}", json={"gpu_count": 4})
    assert response.status_code == 200, response.text
    after = await store(db, team, endpoint, level=4, out=1200, per_user=60, ttft=80,
                        finished=T0 + HOUR, usd_per_hour=8.0)  # fmt: skip
    response = await team.http.get(
        "/v1/comparisons", params={"model": "llama-70b", "sort": "gpu_count"}
    )
    assert response.status_code == 200, response.text
    rows = response.json()["items"]
    assert [(r["deployment"]["gpu_count"], r["run_ids"]) for r in rows] == [
        (1, [before]),
        (4, [after]),
    ]
    assert [r["figures"]["output_tokens_per_s_per_gpu"] for r in rows] == [400.0, 300.0]
    # Filtering by hardware reads the run's deployment too.
    response = await team.http.get(
        "/v1/comparisons", params={"hardware": "h100-sxm", "model": "llama-70b"}
    )
    assert len(response.json()["items"]) == 2


async def test_filter_by_the_preset_a_job_named(team: TeamClient, db: Any) -> None:
    endpoint = await team.create_endpoint(model="mistral-7b", hardware="L40S", usd_per_hour=1.0)
    chat = await store(db, team, endpoint, level=1, out=100, per_user=50, ttft=30, finished=T0)
    await store(db, team, endpoint, level=2, out=180, per_user=45, ttft=35, finished=T0)
    await db.execute(
        'UPDATE jobs SET workload = \'{"preset": "interactive-chatbot"}\''
        " WHERE id = (SELECT job_id FROM runs WHERE id = $1)",
        uuid.UUID(chat),
    )
    page = await team.http.get(
        "/v1/comparisons", params={"model": "mistral-7b", "preset": "interactive-chatbot"}
    )
    assert page.status_code == 200, page.text
    assert [r["run_ids"] for r in page.json()["items"]] == [[chat]]
    unknown = await team.http.get("/v1/comparisons", params={"preset": "nope"})
    assert unknown.status_code in (400, 422)
    assert "interactive-chatbot" in unknown.json()["detail"]


async def test_filter_by_load_level_and_mode(fleet: Fleet) -> None:
    page = await compare(fleet, level=["8", "16"], model="llama-8b", workload_fingerprint=FP_A)
    assert sorted((key(r) for r in page["items"]), key=str) == sorted(
        [("H200-SXM", 8), ("H200-SXM", 16), ("H100-SXM", 8), ("H100-SXM", 16)], key=str
    )
    assert page["total"] == 4
    assert (await compare(fleet, mode="rate"))["total"] == 0


async def test_inadequate_runs_are_marked_in_rows_and_left_out_of_the_frontier(
    fleet: Fleet, db: Any
) -> None:
    h200 = fleet.runs["h200_l8"]
    endpoint_id = await db.fetchval("SELECT endpoint_id FROM runs WHERE id = $1", uuid.UUID(h200))
    endpoint = {"id": str(endpoint_id)}
    # A level 4 of 40 requests in 0.9 s: the best per-GPU throughput at its speed if believed.
    thin = json.dumps(
        {
            "ok": False,
            "reasons": [
                {"code": "few_requests", "detail": "40 successful measured requests"},
                {"code": "short", "detail": "the measured window lasted 0.9 s"},
            ],
        }
    )
    thin_id = await store(db, fleet.team, endpoint, level=4, out=5000, per_user=100, ttft=30,
                          finished=T0 + HOUR, adequacy=thin, requests_succeeded=40,
                          usd_per_hour=3.5)  # fmt: skip
    # Stored before adequacy verdicts, with 12 requests: judged on its count.
    old_id = await store(db, fleet.team, endpoint, level=2, out=4000, per_user=104, ttft=30,
                         finished=T0 + HOUR, adequacy=None, requests_succeeded=12,
                         usd_per_hour=3.5)  # fmt: skip

    # Client-bound as a worker stores it today: the flag, and a verdict that says so.
    bound = json.dumps({"ok": False, "reasons": [{"code": "client_bound", "detail": "."}]})
    await store(db, fleet.team, endpoint, level=64, out=6000, per_user=100, ttft=30,
                finished=T0 + HOUR, adequacy=bound, client_bound=True,
                usd_per_hour=3.5)  # fmt: skip

    page = await compare(fleet, model="llama-8b", workload_fingerprint=FP_A, hardware="H200-SXM")
    assert page["excluded"] == {"client_bound": 2}
    rows = {r["level"]: r for r in page["items"]}
    assert rows[4]["adequate"] is False
    assert [r["code"] for r in rows[4]["inadequate"]] == ["few_requests", "short"]
    assert rows[2]["adequate"] is False
    assert [r["code"] for r in rows[2]["inadequate"]] == ["few_requests"]
    assert "12 successful measured requests" in rows[2]["inadequate"][0]["detail"]
    assert rows[8]["adequate"] is True
    assert page["inadequate_rows"] == 2
    assert any(w.startswith("2 row(s) on this page rest on inadequate") for w in page["warnings"])
    as_csv = await fleet.team.http.get(
        "/v1/comparisons",
        params={"model": "llama-8b", "workload_fingerprint": FP_A, "hardware": "H200-SXM"},
        headers={"Accept": "text/csv"},
    )
    by_level = {r["level"]: r for r in csv.DictReader(io.StringIO(as_csv.text))}
    assert (by_level["4.0"]["adequate"], by_level["4.0"]["inadequate"]) == (
        "false",
        "few_requests short",
    )
    assert (by_level["8.0"]["adequate"], by_level["8.0"]["inadequate"]) == ("true", "")

    body = (
        await fleet.team.http.get(
            "/v1/comparisons/frontier",
            params={"model": "llama-8b", "workload_fingerprint": FP_A},
        )
    ).json()
    # Believed, level 4 (100, 5000) would dominate H200 L8 (90, 800) and L1; left out, the
    # frontier is the one of the adequate runs only.
    assert [key(p) for p in body["frontier"]] == [
        ("H200-SXM", 16),
        ("H200-SXM", 8),
        ("H100-SXM", 8),
        ("H200-SXM", 1),
    ]
    # Each left-out run is counted once: client-bound ones as such, the rest as inadequate.
    assert body["excluded"] == {"client_bound": 2, "inadequate": 2}
    assert {s["run_id"]: [r["code"] for r in s["reasons"]] for s in body["skipped"]} == {
        thin_id: ["few_requests", "short"],
        old_id: ["few_requests"],
    }
    assert any("2 run(s) with inadequate evidence" in w for w in body["warnings"])
