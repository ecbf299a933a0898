"""A job on an endpoint priced from the price book: the worker snapshots the price in effect
as each run starts; reads can re-price at another time or price without changing the run."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from infercost.endpoints.pricing import rfc3339
from sim.process import SimProcess
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


async def run_small_job(team: TeamClient, endpoint_id: str) -> dict[str, Any]:
    return await team.run_job(
        {
            "endpoint_id": endpoint_id,
            "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 8}},
            "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 5},
        },
        timeout=60,
    )


async def test_runs_are_priced_from_the_book_and_can_be_repriced(
    team: TeamClient, sim: SimProcess, db: asyncpg.Connection
) -> None:
    yesterday = datetime.now(UTC) - timedelta(days=1)
    await team.add_price(usd_per_gpu_hour=2.0, effective_from=rfc3339(yesterday))
    endpoint = await team.create_endpoint(
        base_url=sim.openai_base_url, provider="acme-cloud", gpu_count=2, usd_per_hour=None
    )
    job = await run_small_job(team, endpoint["id"])
    # Once judged (the worker sets `change` just after the job's status), so that the read at
    # the end, which must find the run unchanged, compares like with like.
    run = (await team.judged_runs(job))[0]
    tokens_per_s = run["output_tokens_per_s"]
    assert tokens_per_s > 0

    # The worker's snapshot: 2.0 per GPU-hour x 2 GPUs, from the entry in effect then.
    cost = run["cost"]
    assert cost["usd_per_hour"] == 4.0
    assert cost["price_source"] == "run"
    assert cost["reason"] is None
    assert cost["per_million_output_tokens_usd"] == pytest.approx(
        4.0 / (tokens_per_s * 3600) * 1e6, rel=1e-9
    )
    stored = await db.fetchrow(
        "SELECT usd_per_hour, price_note, started_at FROM runs WHERE id = $1", uuid.UUID(run["id"])
    )
    assert (stored["usd_per_hour"], stored["price_note"]) == (4.0, None)
    assert cost["priced_at"] == rfc3339(stored["started_at"].astimezone(UTC))

    # A new price from now on; the stored run keeps the one it was measured at...
    await team.add_price(usd_per_gpu_hour=3.0)
    assert (await team.http.get(f"/v1/runs/{run['id']}")).json()["cost"] == cost

    # ...and a query can re-price it at a time when the new price holds.
    later = rfc3339(datetime.now(UTC) + timedelta(minutes=1))
    repriced = (await team.http.get(f"/v1/runs/{run['id']}", params={"price_at": later})).json()
    assert repriced["cost"]["usd_per_hour"] == 6.0
    assert repriced["cost"]["price_source"] == "price_book"
    assert repriced["cost"]["priced_at"] == later
    assert repriced["cost"]["per_million_output_tokens_usd"] == pytest.approx(
        1.5 * cost["per_million_output_tokens_usd"], rel=1e-9
    )
    # Every read path of the run re-prices the same way.
    via_job = (await team.http.get(f"/v1/jobs/{job['id']}", params={"price_at": later})).json()
    via_runs = (
        await team.http.get(f"/v1/jobs/{job['id']}/runs", params={"price_at": later})
    ).json()
    assert via_job["runs"][0]["cost"] == repriced["cost"] == via_runs[0]["cost"]
    # At yesterday-plus-an-hour, the old price holds again.
    then = rfc3339(yesterday + timedelta(hours=1))
    old = (await team.http.get(f"/v1/runs/{run['id']}", params={"price_at": then})).json()
    assert old["cost"]["usd_per_hour"] == 4.0

    explicit = (
        await team.http.get(f"/v1/jobs/{job['id']}/runs", params={"usd_per_hour": 10})
    ).json()[0]["cost"]
    assert explicit["usd_per_hour"] == 10.0
    assert explicit["price_source"] == "explicit"
    assert explicit["priced_at"] is None
    assert explicit["per_million_output_tokens_usd"] == pytest.approx(
        10.0 / (tokens_per_s * 3600) * 1e6, rel=1e-9
    )

    # Re-pricing never wrote anything.
    after = await db.fetchrow(
        "SELECT usd_per_hour, price_note, started_at FROM runs WHERE id = $1", uuid.UUID(run["id"])
    )
    assert dict(after) == dict(stored)
    assert (await team.http.get(f"/v1/runs/{run['id']}")).json() == run


async def test_a_run_with_no_price_says_what_to_do(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(
        name="unpriced", base_url=sim.openai_base_url, provider="acme-cloud", usd_per_hour=None
    )
    run = (await run_small_job(team, endpoint["id"]))["runs"][0]
    assert run["output_tokens_per_s"] > 0
    cost = run["cost"]
    for figure in (
        "usd_per_hour",
        "per_million_output_tokens_usd",
        "per_million_total_tokens_usd",
        "per_thousand_requests_usd",
        "at_slo_per_million_output_tokens_usd",
    ):
        assert cost[figure] is None, figure
    assert cost["price_source"] == "run"
    assert cost["reason"].startswith(
        "no price for H200-SXM from provider 'acme-cloud' (on-demand) in effect at "
    )
    assert cost["reason"].endswith(
        ": add one with POST /v1/prices or set usd_per_hour on endpoint 'unpriced'"
    )


async def test_hosted_api_runs_cost_what_their_tokens_cost(
    team: TeamClient, sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(
        base_url=sim.openai_base_url,
        hardware=None,
        usd_per_hour=None,
        usd_per_million_input_tokens=0.40,
        usd_per_million_output_tokens=1.60,
    )
    job = await run_small_job(team, endpoint["id"])
    run = job["runs"][0]
    cost = run["cost"]
    assert cost["pricing"] == "per_token"
    assert cost["price_source"] == "run"
    assert cost["input_usd_per_million_tokens"] == 0.40
    assert cost["output_usd_per_million_tokens"] == 1.60
    # Blended 3:1 (docs/figures.md): (3 x 0.40 + 1.60) / 4 = 0.70.
    assert cost["blended_usd_per_million_tokens"] == pytest.approx(0.70)
    # Each request costs n_in x input price + n_out x output price, so per million output
    # tokens the run costs (input tokens/s x 0.40 + output tokens/s x 1.60) / output tokens/s.
    in_tps, out_tps = run["input_tokens_per_s"], run["output_tokens_per_s"]
    expected = (in_tps * 0.40 + out_tps * 1.60) / out_tps
    assert cost["per_million_output_tokens_usd"] == pytest.approx(expected, rel=1e-9)
    assert cost["usd_per_hour"] == pytest.approx((in_tps * 0.40 + out_tps * 1.60) * 3600 / 1e6)
    assert cost["reason"] is None
