"""The price-resolution rule against the real database: which price an endpoint gets, when."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.endpoints.models import Endpoint
from infercost.endpoints.pricing import hourly_price
from infercost.hardware.repository import HardwareRepository
from infercost.prices.models import Price
from infercost.teams.models import Team

pytestmark = pytest.mark.integration

T = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture
async def session(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session whose rows are rolled back at the end, so each test has its own data."""
    async with sessions() as session:
        yield session
        await session.rollback()


async def _team(session: AsyncSession) -> uuid.UUID:
    team = Team(name=f"prices-{uuid.uuid4().hex[:8]}")
    session.add(team)
    await session.flush()
    return team.id


async def _endpoint(session: AsyncSession, team_id: uuid.UUID, **fields: object) -> Endpoint:
    h200 = await HardwareRepository(session).by_name(team_id, "H200-SXM")
    assert h200 is not None
    values: dict[str, object] = {
        "team_id": team_id,
        "name": f"ep-{uuid.uuid4().hex[:6]}",
        "base_url": "http://127.0.0.1:9/v1",
        "api": "openai-chat",
        "model": "m",
        "hardware_id": h200.id,
        "provider": "acme-cloud",
        "gpu_count": 1,
    }
    values.update(fields)
    endpoint = Endpoint(**values)
    session.add(endpoint)
    await session.flush()
    return endpoint


async def _price(
    session: AsyncSession,
    endpoint: Endpoint,
    usd: float,
    effective_from: datetime,
    *,
    team_id: uuid.UUID | None = None,
    pricing_model: str = "on-demand",
) -> None:
    assert endpoint.provider is not None
    assert endpoint.hardware_id is not None
    session.add(
        Price(
            team_id=team_id or endpoint.team_id,
            provider=endpoint.provider,
            hardware_id=endpoint.hardware_id,
            pricing_model=pricing_model,
            usd_per_gpu_hour=usd,
            effective_from=effective_from,
        )
    )
    await session.flush()


async def test_latest_price_not_after_t_wins_and_future_prices_wait(session: AsyncSession) -> None:
    endpoint = await _endpoint(session, await _team(session))
    await _price(session, endpoint, 2.0, T - 2 * DAY)
    await _price(session, endpoint, 3.0, T - DAY)
    await _price(session, endpoint, 5.0, T + DAY)

    now = await hourly_price(session, endpoint, T)
    assert (now.usd_per_hour, now.source, now.priced_at, now.note) == (3.0, "price_book", T, None)
    assert (await hourly_price(session, endpoint, T - 1.5 * DAY)).usd_per_hour == 2.0
    # effective_from is inclusive: the entry holds from that very moment.
    assert (await hourly_price(session, endpoint, T - DAY)).usd_per_hour == 3.0
    assert (await hourly_price(session, endpoint, T + DAY)).usd_per_hour == 5.0
    before_any = await hourly_price(session, endpoint, T - 3 * DAY)
    assert before_any.usd_per_hour is None
    assert before_any.source is None


async def test_gpu_count_multiplies_the_gpu_hour_price(session: AsyncSession) -> None:
    endpoint = await _endpoint(session, await _team(session), gpu_count=4)
    await _price(session, endpoint, 2.5, T - DAY)
    assert (await hourly_price(session, endpoint, T)).usd_per_hour == 10.0


async def test_explicit_usd_per_hour_on_the_endpoint_wins(session: AsyncSession) -> None:
    endpoint = await _endpoint(session, await _team(session), usd_per_hour=7.0, gpu_count=2)
    await _price(session, endpoint, 2.0, T - DAY)
    price = await hourly_price(session, endpoint, T)
    assert (price.usd_per_hour, price.source, price.note) == (7.0, "endpoint", None)


async def test_pricing_model_selects_its_own_entries(session: AsyncSession) -> None:
    team_id = await _team(session)
    on_demand = await _endpoint(session, team_id)
    spot = await _endpoint(session, team_id, pricing_model="spot")
    await _price(session, on_demand, 3.0, T - DAY)
    await _price(session, on_demand, 1.2, T - DAY, pricing_model="spot")
    assert (await hourly_price(session, on_demand, T)).usd_per_hour == 3.0
    assert (await hourly_price(session, spot, T)).usd_per_hour == 1.2


async def test_no_price_says_what_to_do(session: AsyncSession) -> None:
    team_id = await _team(session)
    endpoint = await _endpoint(session, team_id)
    # Another team's price for the very same provider and hardware does not count.
    await _price(session, endpoint, 2.0, T - DAY, team_id=await _team(session))
    price = await hourly_price(session, endpoint, T)
    assert price.usd_per_hour is None
    assert price.note is not None
    assert "no price for H200-SXM from provider 'acme-cloud' (on-demand)" in price.note
    assert "POST /v1/prices" in price.note
    assert "usd_per_hour" in price.note

    bare = await _endpoint(session, team_id, name="bare", provider=None)
    note = (await hourly_price(session, bare, T)).note
    assert note == (
        "endpoint 'bare' has no price: set usd_per_hour, or provider and hardware with a "
        "price in /v1/prices"
    )
