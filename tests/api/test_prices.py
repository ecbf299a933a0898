"""The price book over HTTP: entries with history, filters, what is in effect when, and
re-pricing a stored run from it; every team sees and prices with only its own entries."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from infercost.endpoints.pricing import rfc3339
from tests.conftest import TeamClient, insert_finished_run

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC).replace(microsecond=0)
DAY = timedelta(days=1)


async def test_create_and_list(team: TeamClient) -> None:
    created = await team.add_price(effective_from="2026-12-01T01:00:00+01:00")
    assert created["provider"] == "acme-cloud"
    assert created["hardware"] == "H200-SXM"
    assert created["pricing_model"] == "on-demand"
    assert created["usd_per_gpu_hour"] == 3.5
    assert created["effective_from"] == "2026-12-01T00:00:00Z"
    # effective_from defaults to now.
    later = await team.add_price(usd_per_gpu_hour=4.0)
    started = datetime.fromisoformat(later["effective_from"])
    assert abs(started - datetime.now(UTC)) < timedelta(minutes=1)

    listing = (await team.http.get("/v1/prices")).json()
    assert listing["total"] == 2 and listing["limit"] == 50 and listing["offset"] == 0
    # Newest first within one provider, hardware and pricing model.
    assert [p["usd_per_gpu_hour"] for p in listing["items"]] == [4.0, 3.5]
    page = (await team.http.get("/v1/prices", params={"limit": 1, "offset": 1})).json()
    assert page["total"] == 2
    assert [p["id"] for p in page["items"]] == [created["id"]]

    again = await team.http.post(
        "/v1/prices",
        json={
            "provider": "acme-cloud",
            "hardware": "h200-sxm",
            "usd_per_gpu_hour": 9.0,
            "effective_from": "2026-12-01T00:00:00Z",
        },
    )
    assert again.status_code == 409
    assert "effective_from" in again.json()["detail"]


async def test_filters_and_price_in_effect_at(team: TeamClient) -> None:
    await team.add_price(usd_per_gpu_hour=2.0, effective_from=rfc3339(NOW - 2 * DAY))
    await team.add_price(usd_per_gpu_hour=3.0, effective_from=rfc3339(NOW - DAY))
    await team.add_price(usd_per_gpu_hour=5.0, effective_from=rfc3339(NOW + DAY))
    await team.add_price(
        usd_per_gpu_hour=1.2, pricing_model="spot", effective_from=rfc3339(NOW - DAY)
    )
    await team.add_price(
        hardware="H100-SXM", usd_per_gpu_hour=2.2, effective_from=rfc3339(NOW - DAY)
    )
    await team.add_price(provider="other", usd_per_gpu_hour=4.4, effective_from=rfc3339(NOW - DAY))

    async def prices(**params: str) -> list[float]:
        response = await team.http.get("/v1/prices", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["total"] == len(body["items"])
        return sorted(p["usd_per_gpu_hour"] for p in body["items"])

    assert await prices() == [1.2, 2.0, 2.2, 3.0, 4.4, 5.0]
    assert await prices(provider="other") == [4.4]
    assert await prices(hardware="h100-sxm") == [2.2]
    assert await prices(pricing_model="spot") == [1.2]
    assert await prices(hardware="H200-SXM", pricing_model="on-demand") == [2.0, 3.0, 4.4, 5.0]
    assert await prices(provider="acme-cloud", hardware="H200-SXM", pricing_model="on-demand") == [
        2.0,
        3.0,
        5.0,
    ]
    # `at` keeps, per provider, hardware and pricing model, the latest entry not after it.
    assert await prices(at=rfc3339(NOW)) == [1.2, 2.2, 3.0, 4.4]
    assert await prices(at=rfc3339(NOW - 1.5 * DAY), provider="acme-cloud") == [2.0]
    assert await prices(
        at=rfc3339(NOW + 2 * DAY), provider="acme-cloud", pricing_model="on-demand"
    ) == [
        2.2,
        5.0,
    ]
    assert await prices(at=rfc3339(NOW - 3 * DAY)) == []
    naive = await team.http.get("/v1/prices", params={"at": "2026-12-01T00:00:00"})
    assert naive.status_code == 422
    assert "at:" in naive.json()["detail"] and "time zone" in naive.json()["detail"]


@pytest.mark.parametrize(
    ("change", "status", "field", "hint"),
    [
        ({"hardware": "TPU-v9"}, 422, "hardware", "GET /v1/hardware"),
        ({"pricing_model": "lease"}, 422, "pricing_model", "on-demand, reserved, spot"),
        ({"usd_per_gpu_hour": -1.0}, 422, "usd_per_gpu_hour", "> 0"),
        ({"usd_per_gpu_hour": 0}, 422, "usd_per_gpu_hour", "> 0"),
        ({"effective_from": "yesterday"}, 422, "effective_from", "datetime"),
        ({"effective_from": "2026-12-01T00:00:00"}, 422, "effective_from", "timezone"),
        ({"provider": ""}, 422, "provider", "length"),
    ],
)
async def test_bad_prices_are_refused(
    team: TeamClient, change: dict[str, Any], status: int, field: str, hint: str
) -> None:
    body = {"provider": "acme-cloud", "hardware": "H200-SXM", "usd_per_gpu_hour": 3.5}
    body.update(change)
    response = await team.http.post("/v1/prices", json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    detail = response.json()["detail"]
    assert field in detail and hint.lower() in detail.lower(), detail
    assert (await team.http.get("/v1/prices")).json()["total"] == 0
    unknown_filter = await team.http.get("/v1/prices", params={"hardware": "TPU-v9"})
    assert unknown_filter.status_code == 422
    assert "hardware" in unknown_filter.json()["detail"]


async def test_endpoint_pricing_model(team: TeamClient) -> None:
    plain = await team.create_endpoint()
    assert plain["pricing_model"] == "on-demand"
    spot = await team.create_endpoint(pricing_model="spot", provider="acme-cloud")
    assert spot["pricing_model"] == "spot"
    patched = await team.http.patch(
        f"/v1/endpoints/{spot['id']}", json={"pricing_model": "reserved"}
    )
    assert patched.json()["pricing_model"] == "reserved"
    bad = await team.http.post(
        "/v1/endpoints",
        json={"name": "x", "base_url": "http://h/v1", "model": "m", "pricing_model": "cheap"},
    )
    assert bad.status_code == 422
    assert "on-demand, reserved, spot" in bad.json()["detail"]


async def _stored_run(db: asyncpg.Connection, team: TeamClient, endpoint: dict[str, Any]) -> str:
    """A finished run of `endpoint` measured yesterday at 1000 output tokens/s, with no
    price snapshot; inserted directly so re-pricing is checked without a worker."""
    _, run_id = await insert_finished_run(
        db,
        team.team_id,
        endpoint["id"],
        started_at=datetime.now(UTC) - timedelta(days=1),
        requests_total=10,
        requests_succeeded=10,
        output_tokens_per_s=1000.0,
        total_tokens_per_s=3000.0,
        requests_per_s=2.0,
        price_note="no price then",
    )
    return run_id


async def test_team_isolation_and_repricing_from_the_book(
    new_team: Callable[..., Any], db: asyncpg.Connection
) -> None:
    a: TeamClient = await new_team()
    b: TeamClient = await new_team()
    await a.add_price(usd_per_gpu_hour=2.0, effective_from=rfc3339(NOW - DAY))
    await a.add_price(usd_per_gpu_hour=1.0, pricing_model="spot", effective_from=rfc3339(NOW - DAY))
    assert (await b.http.get("/v1/prices")).json() == {
        "items": [],
        "total": 0,
        "limit": 50,
        "offset": 0,
    }
    assert (await b.http.get("/v1/prices", params={"at": rfc3339(NOW)})).json()["total"] == 0

    fields = {"provider": "acme-cloud", "usd_per_hour": None, "gpu_count": 2}
    a_run = await _stored_run(db, a, await a.create_endpoint(**fields))
    a_spot = await _stored_run(db, a, await a.create_endpoint(**fields, pricing_model="spot"))
    b_run = await _stored_run(db, b, await b.create_endpoint(**fields))

    stored = (await a.http.get(f"/v1/runs/{a_run}")).json()["cost"]
    assert stored["price_source"] == "run"
    assert stored["usd_per_hour"] is None and stored["reason"] == "no price then"

    at = {"price_at": rfc3339(NOW)}
    cost = (await a.http.get(f"/v1/runs/{a_run}", params=at)).json()["cost"]
    assert cost["price_source"] == "price_book"
    assert cost["priced_at"] == rfc3339(NOW)
    assert cost["usd_per_hour"] == 4.0  # 2.0 per GPU-hour x 2 GPUs
    assert cost["per_million_output_tokens_usd"] == pytest.approx(4.0 / (1000 * 3600) * 1e6)
    assert cost["per_thousand_requests_usd"] == pytest.approx(4.0 / (2 * 3600) * 1e3)
    assert cost["reason"] is None
    spot = (await a.http.get(f"/v1/runs/{a_spot}", params=at)).json()["cost"]
    assert spot["usd_per_hour"] == 2.0

    # Team B's identical endpoint cannot use team A's book.
    theirs = (await b.http.get(f"/v1/runs/{b_run}", params=at)).json()["cost"]
    assert theirs["usd_per_hour"] is None
    assert theirs["per_million_output_tokens_usd"] is None
    assert "no price for H200-SXM from provider 'acme-cloud' (on-demand)" in theirs["reason"]
    assert "POST /v1/prices" in theirs["reason"]
    # ...nor read A's run by re-pricing it.
    assert (await b.http.get(f"/v1/runs/{a_run}", params=at)).status_code == 404

    # Re-pricing never writes: the stored snapshot is as it was.
    row = await db.fetchrow(
        "SELECT usd_per_hour, price_note FROM runs WHERE id = $1", uuid.UUID(a_run)
    )
    assert (row["usd_per_hour"], row["price_note"]) == (None, "no price then")


async def test_repricing_parameters_are_checked(team: TeamClient, db: asyncpg.Connection) -> None:
    run_id = await _stored_run(db, team, await team.create_endpoint(usd_per_hour=None))
    both = await team.http.get(
        f"/v1/runs/{run_id}", params={"price_at": rfc3339(NOW), "usd_per_hour": 3}
    )
    assert both.status_code == 422
    assert "price_at" in both.json()["detail"] and "usd_per_hour" in both.json()["detail"]
    naive = await team.http.get(f"/v1/runs/{run_id}", params={"price_at": "2026-12-01T00:00:00"})
    assert naive.status_code == 422
    assert "time zone" in naive.json()["detail"]
    negative = await team.http.get(f"/v1/runs/{run_id}", params={"usd_per_hour": -1})
    assert negative.status_code == 422
    assert "usd_per_hour" in negative.json()["detail"]
    explicit = (await team.http.get(f"/v1/runs/{run_id}", params={"usd_per_hour": 7.2})).json()
    assert explicit["cost"]["usd_per_hour"] == 7.2
    assert explicit["cost"]["price_source"] == "explicit"
    assert explicit["cost"]["priced_at"] is None
    assert explicit["cost"]["per_million_output_tokens_usd"] == pytest.approx(2.0)
