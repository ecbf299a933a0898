"""POST /v1/estimates over two deployments standing for two GPUs at different prices, each with a
finished job whose levels carry figures chosen by hand (written straight to the database, as
tests/api/test_adequate_evidence.py does): the planner ranks them as the numbers say, and
changes its answer when the price book changes, with no new measurement. Capacity from levels
the worker really measured is covered by tests/integration/test_sweep_jobs.py; the planner's
arithmetic over many cases by tests/infercost/test_planning*.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from infercost.endpoints.pricing import rfc3339
from tests.conftest import ADEQUATE, StoredLevel, TeamClient, insert_finished_job

pytestmark = pytest.mark.integration

MODEL = "sim-llama-8b"
SLO = {"ttft_ms": {"p95": 200}}

#: (level, requests/s, TTFT p95 ms, adequacy, client_bound) of requests of 64 tokens in and 16
#: out. The small GPU queues past the SLO between 3 and 12 users: margins (p95 / 200 ms) 0.75
#: and 2.0, so its capacity is 20 + (1 - 0.75) / (2.0 - 0.75) x (25 - 20) = 21 requests/s
#: (at 3 + 0.2 x 9 = 4.8 users). The big one meets it at every level: at least 100 requests/s.
SMALL: list[StoredLevel] = [
    (1, 10.0, 50.0, ADEQUATE, False),
    (3, 20.0, 150.0, ADEQUATE, False),
    (12, 25.0, 400.0, ADEQUATE, False),
]
BIG: list[StoredLevel] = [
    (1, 10.0, 50.0, ADEQUATE, False),
    (3, 30.0, 50.0, ADEQUATE, False),
    (12, 100.0, 150.0, ADEQUATE, False),
]


async def measured(
    team: TeamClient, db: asyncpg.Connection, hardware: str, levels: list[StoredLevel]
) -> dict[str, Any]:
    """An endpoint on `hardware` (priced by the book) with one finished job of `levels`."""
    endpoint = await team.create_endpoint(
        name=f"{hardware.lower()}-ep",
        model=MODEL,
        hardware=hardware,
        provider="acme-cloud",
        usd_per_hour=None,
        params_b=8,
        precision="bf16",
    )
    job_id, _ = await insert_finished_job(
        db, team.team_id, endpoint["id"], levels, slo=SLO, input_tokens=64, output_tokens=16
    )
    return dict((await team.http.get(f"/v1/jobs/{job_id}")).json())


async def estimate(team: TeamClient, **body: Any) -> dict[str, Any]:
    payload = {
        "model": MODEL,
        "traffic": {"requests_per_s": 40, "input_tokens": 64, "output_tokens": 16},
        "slo": SLO,
        **body,
    }
    response = await team.http.post("/v1/estimates", json=payload)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_estimates_rank_by_the_numbers_and_follow_the_price_book(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    week_ago = rfc3339(datetime.now(UTC) - timedelta(days=7))
    await team.add_price(hardware="L40S", usd_per_gpu_hour=1.0, effective_from=week_ago)
    await team.add_price(hardware="H200-SXM", usd_per_gpu_hour=6.0, effective_from=week_ago)
    small = await measured(team, db, "L40S", SMALL)
    big = await measured(team, db, "H200-SXM", BIG)

    # Each job reports its capacity at the SLO: the small one between its levels, the big one
    # at its top level, a lower bound.
    assert small["capacity_at_slo"]["requests_per_s"] == pytest.approx(21.0)
    assert small["capacity_at_slo"]["level"] == pytest.approx(4.8)
    assert small["capacity_at_slo"]["between"] == [3, 12]
    assert big["capacity_at_slo"]["requests_per_s"] == pytest.approx(100.0)
    assert big["capacity_at_slo"]["lower_bound"] is True

    result = await estimate(team, include_projections=False)
    candidates = result["candidates"]
    assert [c["deployment"]["hardware"] for c in candidates] == ["L40S", "H200-SXM"]
    by_hw = {c["deployment"]["hardware"]: c for c in candidates}
    # Sized to run each replica at most at the default 80% of its capacity at the SLO: 40
    # requests/s need ceil(40 / (0.8 x 21)) = 3 small GPUs (USD 3/hour) or ceil(40 / 80) = 1
    # big one (USD 6/hour).
    for hardware, capacity, replicas, usd_per_hour in (
        ("L40S", 21.0, 3, 3.0),
        ("H200-SXM", 100.0, 1, 6.0),
    ):
        c = by_hw[hardware]
        assert c["target_utilization"] == 0.8
        assert c["capacity_rps"] == pytest.approx(capacity)
        assert c["replicas"] == replicas
        assert c["usd_per_hour"] == pytest.approx(usd_per_hour)
        assert c["usd_per_month"] == pytest.approx(usd_per_hour * 730)
        assert c["utilization"] == pytest.approx(40 / (replicas * capacity))
        # USD per hour over 40 x 16 x 3600 output tokens an hour, x 1e6.
        assert c["per_million_output_tokens_usd"] == pytest.approx(usd_per_hour / 2.304)
        assert c["basis"] == "measured"
        assert c["evidence"] and all(e["measured_at"] for e in c["evidence"])
    assert result["explanation"].startswith(candidates[0]["deployment"]["name"])

    # The cheap GPU becomes dear: the answer follows the book without re-measuring.
    a_second_ago = rfc3339(datetime.now(UTC) - timedelta(seconds=1))
    await team.add_price(hardware="L40S", usd_per_gpu_hour=500.0, effective_from=a_second_ago)
    repriced = await estimate(team, include_projections=False)
    assert repriced["candidates"][0]["deployment"]["hardware"] == "H200-SXM"
    dear = next(c for c in repriced["candidates"] if c["deployment"]["hardware"] == "L40S")
    assert dear["usd_per_hour"] == pytest.approx(by_hw["L40S"]["replicas"] * 500.0)
    assert dear["evidence"] == by_hw["L40S"]["evidence"]

    # A hosted API in the same ranking, with the break-even where self-hosting wins.
    await team.create_endpoint(
        name="hosted-api",
        base_url="http://127.0.0.1:9/v1",
        model=MODEL,
        hardware=None,
        usd_per_hour=None,
        usd_per_million_input_tokens=0.20,
        usd_per_million_output_tokens=0.80,
    )
    with_hosted = await estimate(team, include_projections=False)
    hosted = next(c for c in with_hosted["candidates"] if c["kind"] == "hosted_api")
    # 40 req/s x 3600 x (64 x 0.20 + 16 x 0.80) / 1e6 = USD 3.6864 per hour.
    assert hosted["usd_per_hour"] == pytest.approx(3.6864)
    assert hosted["blended_usd_per_million_tokens"] == pytest.approx(0.35)
    assert hosted["basis"] == "list_price"
    h200 = next(c for c in with_hosted["candidates"] if c["deployment"]["hardware"] == "H200-SXM")
    assert h200["break_even"]["against"] == "hosted-api"

    # Hardware with a price but no measurement of the model: a labelled projection.
    await team.add_price(hardware="B200", usd_per_gpu_hour=9.0, effective_from=week_ago)
    projected = await estimate(team)
    b200 = next(c for c in projected["candidates"] if c["deployment"]["hardware"] == "B200")
    assert b200["basis"] == "projection"
    assert any("projected" in w for w in b200["warnings"])


async def test_estimate_errors_say_what_to_fix(team: TeamClient) -> None:
    await team.create_endpoint(name="never-measured", model="unmeasured-model")

    async def post(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = await team.http.post("/v1/estimates", json=body)
        return response.status_code, response.json()

    traffic = {"requests_per_s": 5, "input_tokens": 512, "output_tokens": 128}
    status, problem = await post({"model": "x", "traffic": {**traffic, "requests_per_s": -1}})
    assert status == 422 and "requests_per_s" in problem["detail"]
    status, problem = await post({"model": "x", "traffic": traffic, "preset": "chatty"})
    assert status in (400, 422) and "interactive-chatbot" in problem["detail"]
    status, problem = await post({"model": "x", "traffic": traffic, "slo": {"ttft_ms": {}}})
    assert status in (400, 422) and "p95" in problem["detail"]
    status, problem = await post({"model": "nobody-serves-this", "traffic": traffic, "slo": SLO})
    assert status == 404 and "nobody-serves-this" in problem["detail"]

    # Served but never measured: no invented numbers, and a reason.
    status, body = await post({"model": "unmeasured-model", "traffic": traffic, "slo": SLO})
    assert status == 200
    assert body["candidates"] == []
    assert body["reason"]
    assert body["unavailable"][0]["name"] == "never-measured"
    assert "never measured" in body["unavailable"][0]["reason"]


async def test_presets_are_listed(team: TeamClient) -> None:
    response = await team.http.get("/v1/presets")
    assert response.status_code == 200
    names = {p["name"] for p in response.json()}
    assert names == {
        "interactive-chatbot",
        "coding-assistant",
        "batch-documents",
        "high-volume-api",
        "internal-tool",
    }
    one = (await team.http.get("/v1/presets/batch-documents")).json()
    assert one["optimises"] == "throughput" and one["slo"]
    # A preset gives the lengths and the SLO of an estimate.
    status = (
        await team.http.post(
            "/v1/estimates",
            json={
                "model": "nobody",
                "traffic": {"requests_per_day": 100000, "peak_to_mean": 3},
                "preset": "interactive-chatbot",
            },
        )
    ).status_code
    assert status == 404
