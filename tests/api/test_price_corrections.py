"""Correcting the price book: a withdrawn entry (DELETE /v1/prices/{id}) is kept for the record
but prices nothing again (runs keep the price they stored; re-pricing and estimates use the
entry before it), and a price far from what the book holds for the hardware is accepted
with a warning that estimates built on it repeat."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from infercost.endpoints.pricing import rfc3339
from tests.api.test_adequate_evidence import LEVELS, SLO
from tests.conftest import Api, TeamClient, insert_finished_job, insert_finished_run
from tests.integration.test_cli import in_thread

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC).replace(microsecond=0)
DAY = timedelta(days=1)


async def test_a_withdrawn_price_prices_nothing_again(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    older = await team.add_price(usd_per_gpu_hour=2.0, effective_from=rfc3339(NOW - 3 * DAY))
    newer = await team.add_price(usd_per_gpu_hour=3.0, effective_from=rfc3339(NOW - 2 * DAY))
    assert newer["warnings"] == [] and newer["withdrawn_at"] is None
    endpoint = await team.create_endpoint(provider="acme-cloud", usd_per_hour=None, gpu_count=2)
    # A run the worker priced from the newer entry: 3.0 x 2 GPUs stored as its snapshot.
    _, run_id = await insert_finished_run(
        db,
        team.team_id,
        endpoint["id"],
        started_at=NOW - DAY,
        usd_per_hour=6.0,
        output_tokens_per_s=1000.0,
        requests_per_s=2.0,
    )
    at = {"price_at": rfc3339(NOW)}
    assert (await team.http.get(f"/v1/runs/{run_id}", params=at)).json()["cost"][
        "usd_per_hour"
    ] == 6.0

    response = await team.http.delete(f"/v1/prices/{newer['id']}")
    assert response.status_code == 200, response.text
    withdrawn = response.json()
    assert withdrawn["id"] == newer["id"] and withdrawn["usd_per_gpu_hour"] == 3.0
    assert datetime.fromisoformat(withdrawn["withdrawn_at"]) >= NOW

    # The run keeps the price it stored: 6.0 USD/h, 6.0 / (1000 x 3600) x 1e6 per M tokens.
    stored = (await team.http.get(f"/v1/runs/{run_id}")).json()["cost"]
    assert stored["usd_per_hour"] == 6.0 and stored["price_source"] == "run"
    assert stored["per_million_output_tokens_usd"] == pytest.approx(6.0 / 3600 / 1000 * 1e6)
    # Re-priced from the book, the entry before it is in effect again: 2.0 x 2 GPUs.
    repriced = (await team.http.get(f"/v1/runs/{run_id}", params=at)).json()["cost"]
    assert repriced["usd_per_hour"] == 4.0 and repriced["price_source"] == "price_book"

    # Listings leave it out unless asked; `at` never sees it; the entry itself stays readable.
    listed = (await team.http.get("/v1/prices")).json()
    assert [p["id"] for p in listed["items"]] == [older["id"]]
    everything = (await team.http.get("/v1/prices", params={"withdrawn": "true"})).json()
    assert {p["id"] for p in everything["items"]} == {older["id"], newer["id"]}
    in_effect = (await team.http.get("/v1/prices", params={"at": rfc3339(NOW)})).json()
    assert [p["usd_per_gpu_hour"] for p in in_effect["items"]] == [2.0]
    gone = await team.http.get(f"/v1/prices/{newer['id']}")
    assert gone.status_code == 404 and "was withdrawn at" in gone.json()["detail"]
    read = (await team.http.get(f"/v1/prices/{newer['id']}", params={"withdrawn": "true"})).json()
    assert read["withdrawn_at"] == withdrawn["withdrawn_at"]
    assert await db.fetchval(
        "SELECT usd_per_gpu_hour FROM prices WHERE id = $1 AND withdrawn_at IS NOT NULL",
        uuid.UUID(newer["id"]),
    ) == pytest.approx(3.0)

    # Its moment is free for the corrected figure; withdrawing twice is a conflict.
    corrected = await team.add_price(usd_per_gpu_hour=3.3, effective_from=rfc3339(NOW - 2 * DAY))
    assert corrected["effective_from"] == newer["effective_from"]
    again = await team.http.delete(f"/v1/prices/{newer['id']}")
    assert again.status_code == 409 and "already withdrawn" in again.json()["detail"]


async def test_another_teams_price_cannot_be_withdrawn(team: TeamClient, new_team: Any) -> None:
    price = await team.add_price()
    other: TeamClient = await new_team()
    assert (await other.http.delete(f"/v1/prices/{price['id']}")).status_code == 404
    assert (await other.http.get(f"/v1/prices/{price['id']}")).status_code == 404
    assert (await team.http.get(f"/v1/prices/{price['id']}")).json()["withdrawn_at"] is None


async def test_a_price_far_from_the_book_warns(team: TeamClient) -> None:
    # Nothing to compare the first entry of a hardware with.
    first = await team.add_price(usd_per_gpu_hour=2.0, effective_from=rfc3339(NOW - 3 * DAY))
    assert first["warnings"] == []
    await team.add_price(usd_per_gpu_hour=3.0, effective_from=rfc3339(NOW - 2 * DAY))
    # Median 2.5: 12.5 (5x) and 0.5 (a fifth) are the edges, still quiet.
    edge_high = await team.add_price(
        provider="edge", usd_per_gpu_hour=12.5, effective_from=rfc3339(NOW - 2 * DAY)
    )
    assert edge_high["warnings"] == []
    # The book now holds 2.0, 3.0 and 12.5: median 3.0. 2,200 is 733x it.
    typo = await team.add_price(usd_per_gpu_hour=2200.0, effective_from=rfc3339(NOW - DAY))
    [warning] = typo["warnings"]
    assert "USD 2,200.00 per GPU-hour for H200-SXM is 733x the USD 3.00" in warning
    assert "the median of its 3 entries" in warning
    assert f"DELETE /v1/prices/{typo['id']}" in warning
    # 0.22 is under a fifth of the median (now 3.0 of 2.0, 3.0, 12.5, 2200: 7.75).
    low = await team.add_price(
        provider="cheap", usd_per_gpu_hour=0.22, effective_from=rfc3339(NOW - DAY)
    )
    [low_warning] = low["warnings"]
    assert "is 1/35 of the USD 7.75" in low_warning
    # Another hardware has a book of its own: its first entry has nothing to be far from.
    other = await team.add_price(hardware="H100-SXM", usd_per_gpu_hour=2200.0)
    assert other["warnings"] == []
    # The warning stays with the entry.
    assert (await team.http.get(f"/v1/prices/{typo['id']}")).json()["warnings"] == [warning]


async def test_estimates_built_on_a_warned_price_carry_it(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    model = "llama-priced"
    await team.add_price(usd_per_gpu_hour=2.2, effective_from=rfc3339(NOW - 3 * DAY))
    typo = await team.add_price(usd_per_gpu_hour=2200.0, effective_from=rfc3339(NOW - DAY))
    [warning] = typo["warnings"]
    endpoint = await team.create_endpoint(model=model, provider="acme-cloud", usd_per_hour=None)
    await insert_finished_job(db, team.team_id, endpoint["id"], LEVELS, slo=SLO)
    body = {
        "model": model,
        "traffic": {"requests_per_s": 5, "input_tokens": 100, "output_tokens": 100},
        "slo": SLO,
    }

    response = await team.http.post("/v1/estimates", json=body)
    assert response.status_code == 200, response.text
    [candidate] = response.json()["candidates"]
    assert candidate["usd_per_hour"] == pytest.approx(2200.0)
    assert warning in candidate["warnings"]

    # Withdrawn, the estimate goes back to the entry before it, with no warning.
    assert (await team.http.delete(f"/v1/prices/{typo['id']}")).status_code == 200
    [candidate] = (await team.http.post("/v1/estimates", json=body)).json()["candidates"]
    assert candidate["usd_per_hour"] == pytest.approx(2.2)
    assert warning not in candidate["warnings"]


async def test_cli_prints_the_warning_and_withdraws_by_prefix(
    api_server: Api, team: TeamClient
) -> None:
    await team.add_price(usd_per_gpu_hour=2.2)
    added = await in_thread(
        api_server,
        team.key,
        *("prices", "add", "--provider", "acme-cloud", "--hardware", "H200-SXM"),
        *("--usd-per-gpu-hour", "2200", "--effective-from", rfc3339(NOW + DAY)),
    )
    assert added.exit_code == 0, added.output
    typo = (await team.http.get("/v1/prices", params={"at": rfc3339(NOW + 2 * DAY)})).json()
    [entry] = typo["items"]
    assert "warning: USD 2,200.00 per GPU-hour for H200-SXM is 1,000x the USD 2.20" in (
        added.stderr
    )
    assert f"(`infercost prices withdraw {entry['id']}`)" in added.stderr

    done = await in_thread(api_server, team.key, "prices", "withdraw", entry["id"][:8])
    assert done.exit_code == 0, done.output
    assert done.output.strip() == (
        f"withdrew price {entry['id']} (acme-cloud, H200-SXM, on-demand, USD 2,200.00/GPU-h)"
    )
    listed = await in_thread(api_server, team.key, "prices", "list", "--withdrawn", "--json")
    assert {p["id"]: p["withdrawn_at"] is not None for p in json.loads(listed.stdout)} == {
        entry["id"]: True,
        (await team.http.get("/v1/prices")).json()["items"][0]["id"]: False,
    }
