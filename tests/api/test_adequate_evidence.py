"""Capacity at the SLO and estimates rest on adequate, not client-bound levels only, over runs
written straight to the database with figures chosen by hand: a client-bound level is
skipped (and named), evidence from another workload gives no numbers unless asked for,
sizing leaves the target headroom, and every default the figures rest on is stated."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.conftest import ADEQUATE, StoredLevel, TeamClient, insert_finished_job

pytestmark = pytest.mark.integration

SLO = {"ttft_ms": {"p95": 100}}
CLIENT_BOUND = {
    "ok": False,
    "reasons": [{"code": "client_bound", "detail": "queue delay p99 above 10 ms"}],
}
MODEL = "llama-adequacy"


#: (level, requests/s, TTFT p95 ms, adequacy, client_bound). Margins (p95 / 100 ms): 0.4, 0.6,
#: 0.8 (client-bound), 1.4 (fails). Believing level 8, capacity = 14 + (1 - 0.8) / (1.4 - 0.8)
#: x (16 - 14) = 14.67 req/s; without it, 8 + (1 - 0.6) / (1.4 - 0.6) x (16 - 8) = 12 req/s.
LEVELS: list[StoredLevel] = [
    (1, 2.0, 40.0, ADEQUATE, False),
    (4, 8.0, 60.0, ADEQUATE, False),
    (8, 14.0, 80.0, CLIENT_BOUND, True),
    (16, 16.0, 140.0, ADEQUATE, False),
]


@pytest.fixture
async def measured(team: TeamClient, db: asyncpg.Connection) -> tuple[dict[str, Any], list[str]]:
    endpoint = await team.create_endpoint(model=MODEL, usd_per_hour=2.0)
    job_id, run_ids = await insert_finished_job(db, team.team_id, endpoint["id"], LEVELS, slo=SLO)
    job = (await team.http.get(f"/v1/jobs/{job_id}")).json()
    return job, run_ids


async def test_capacity_skips_a_client_bound_level(
    measured: tuple[dict[str, Any], list[str]],
) -> None:
    job, run_ids = measured
    capacity = job["capacity_at_slo"]
    assert capacity["reason"] is None, capacity
    assert capacity["requests_per_s"] == pytest.approx(12.0)
    assert capacity["output_tokens_per_s"] == pytest.approx(1200.0)
    assert capacity["level"] == pytest.approx(10.0)  # halfway from 4 to 16 users
    assert capacity["between"] == [4, 16]
    assert capacity["run_ids"] == [run_ids[1], run_ids[3]]
    assert capacity["client_bound"] is False
    # The true capacity lies between the bracketing levels' requests/s.
    assert (capacity["requests_per_s_low"], capacity["requests_per_s_high"]) == (8.0, 16.0)
    [skipped] = capacity["skipped"]
    assert skipped["run_id"] == run_ids[2] and skipped["level"] == 8
    assert [r["code"] for r in skipped["reasons"]] == ["client_bound"]


async def test_runs_stored_before_verdicts_are_judged_on_their_counts(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(model=MODEL)
    job_id, run_ids = await insert_finished_job(
        db,
        team.team_id,
        endpoint["id"],
        [(1, 2.0, 40.0, None, False), (4, 8.0, 60.0, None, True)],
        slo=SLO,
    )
    # The second (client-bound by its flag) is skipped; the first (300 requests) stands.
    job = (await team.http.get(f"/v1/jobs/{job_id}")).json()
    capacity = job["capacity_at_slo"]
    assert capacity["requests_per_s"] == pytest.approx(2.0)
    assert capacity["lower_bound"] is True
    assert (capacity["requests_per_s_low"], capacity["requests_per_s_high"]) == (2.0, None)
    assert [s["run_id"] for s in capacity["skipped"]] == [run_ids[1]]
    # With every level left out there is no capacity, and the reason says why.
    only_bound = await insert_finished_job(
        db, team.team_id, endpoint["id"], [(8, 14.0, 80.0, CLIENT_BOUND, True)], slo=SLO
    )
    job = (await team.http.get(f"/v1/jobs/{only_bound[0]}")).json()
    assert job["capacity_at_slo"]["requests_per_s"] is None
    assert "no adequate finished level" in job["capacity_at_slo"]["reason"]
    assert [s["run_id"] for s in job["capacity_at_slo"]["skipped"]] == only_bound[1]


async def estimate(team: TeamClient, traffic: dict[str, Any], **body: Any) -> dict[str, Any]:
    payload = {"model": MODEL, "traffic": traffic, "slo": SLO, "include_projections": False}
    response = await team.http.post("/v1/estimates", json={**payload, **body})
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_sizing_leaves_the_target_headroom(
    team: TeamClient, measured: tuple[dict[str, Any], list[str]]
) -> None:
    _, run_ids = measured
    lengths = {"input_tokens": 100, "output_tokens": 100}
    # Capacity 12 req/s per replica at a target of 0.8: 9.6 req/s fit one replica exactly.
    body = await estimate(team, {"requests_per_s": 9.6, "peak_to_mean": 1, **lengths})
    [one] = body["candidates"]
    assert one["basis"] == "measured"
    assert one["capacity_rps"] == pytest.approx(12.0)
    assert one["replicas"] == 1 and one["target_utilization"] == 0.8
    assert one["utilization"] == pytest.approx(0.8)
    assert one["headroom"] == pytest.approx(0.2)
    assert one["usd_per_hour"] == pytest.approx(2.0)
    # Over the capacity's interval [8, 16]: 9.6 / (0.8 x 16) -> 1 replica, / (0.8 x 8) -> 2.
    assert (one["capacity_rps_low"], one["capacity_rps_high"]) == (8.0, 16.0)
    assert one["replicas_range"] == [1, 2]
    assert one["usd_per_hour_range"] == pytest.approx([2.0, 4.0])
    # USD 2/h over 9.6 x 100 x 3600 output tokens/h, x 1e6.
    assert one["per_million_output_tokens_usd_range"] == pytest.approx(
        [2.0 / (9.6 * 100 * 3600) * 1e6, 4.0 / (9.6 * 100 * 3600) * 1e6]
    )
    assert [s["run_id"] for s in one["skipped"]] == [run_ids[2]]
    assert [e["run_id"] for e in one["evidence"]] == [run_ids[1], run_ids[3]]
    assert body["explanation"].startswith(
        f"{one['deployment']['name']} is cheapest: 1 replica(s) (1 to 2 over the capacity's "
        "interval), 1 GPU(s) at 80% utilisation for USD 2.00/hour"
    )
    assert body["target_utilization"] == 0.8
    assert any("80%" in a for a in body["assumptions"])
    # A little more traffic than 0.8 x 12: a second replica.
    more = await estimate(team, {"requests_per_s": 10, "peak_to_mean": 1, **lengths})
    assert more["candidates"][0]["replicas"] == 2
    assert more["candidates"][0]["utilization"] == pytest.approx(10 / 24)
    # The caller may plan closer to the limit: 10 / (1.0 x 12) fits one replica.
    full = await estimate(
        team, {"requests_per_s": 10, "peak_to_mean": 1, **lengths}, target_utilization=1.0
    )
    assert full["candidates"][0]["replicas"] == 1


async def test_daily_traffic_without_peak_to_mean_states_the_peak_it_assumed(
    team: TeamClient, measured: tuple[dict[str, Any], list[str]]
) -> None:
    lengths = {"input_tokens": 100, "output_tokens": 100}
    body = await estimate(team, {"requests_per_day": 432_000, **lengths})
    # 432,000 / 86,400 = 5 req/s average; the assumed peak is 2 x that.
    assert body["traffic"]["mean_requests_per_s"] == pytest.approx(5.0)
    assert body["traffic"]["requests_per_s"] == pytest.approx(10.0)
    assert body["traffic"]["peak_to_mean"] == pytest.approx(2.0)
    assert any("peak_to_mean not given" in a and "10 requests/s" in a for a in body["assumptions"])
    given = await estimate(team, {"requests_per_day": 432_000, "peak_to_mean": 3, **lengths})
    assert given["traffic"]["requests_per_s"] == pytest.approx(15.0)
    assert not any("peak_to_mean" in a for a in given["assumptions"])


async def test_evidence_from_another_workload_gives_no_numbers_unless_asked(
    team: TeamClient, measured: tuple[dict[str, Any], list[str]]
) -> None:
    # The interactive-chatbot lengths (1000 in / 250 out) against runs of 100 / 100:
    # similarity min(100 / 1000, 100 / 250) = 0.1.
    chatbot = {"requests_per_s": 5, "peak_to_mean": 1, "input_tokens": 1000, "output_tokens": 250}
    body = await estimate(team, chatbot)
    assert body["candidates"] == []
    [left_out] = body["unavailable"]
    assert left_out["reason"].startswith("measured on a different workload (100 in / 100 out")
    assert "allow_mismatched_workload" in left_out["reason"]
    assert left_out["workload_similarity"] == pytest.approx(0.1)
    assert "allow_mismatched_workload" in body["reason"]

    labelled = await estimate(team, chatbot, allow_mismatched_workload=True)
    [guess] = labelled["candidates"]
    assert guess["basis"] == "extrapolation"
    assert guess["workload_similarity"] == pytest.approx(0.1)
    assert any(w.startswith("Extrapolation") for w in guess["warnings"])
    assert guess["capacity_rps"] == pytest.approx(12.0)
    assert labelled["explanation"].endswith("(an extrapolation from another workload's runs).")
