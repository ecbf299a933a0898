"""An unscoped read fails in the running API, not only in a test's walker.

The API runs in this process (create_app, served by uvicorn on loopback, on the suite's
database) with one repository method broken on purpose: EndpointRepository.get forgets the
team it is given, as a careless change would, by a select or by raw SQL on the request's
connection. Another team then asks for the owner's endpoint. With the application's own
sessions (infercost.db.engine.make_sessionmaker) the read is refused before it reaches the
database: the request ends in a problem+json 500 that holds nothing of the endpoint, and the
server logs the refusal. The same app on plain SQLAlchemy sessions answers 200 with the
other team's endpoint: the leak the guard stops, so the test fails if the guard goes.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar import Litestar
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import async_sessionmaker

from api.app import create_app
from infercost.db.engine import make_engine
from infercost.endpoints.models import Endpoint
from infercost.endpoints.repository import EndpointRepository
from infercost.settings import Settings
from tests.asgi import serve_with_hooks
from tests.conftest import TeamClient


async def by_id_alone(
    self: EndpointRepository, team_id: uuid.UUID, endpoint_id: uuid.UUID
) -> Endpoint | None:
    """The defect: the team is given and forgotten; the endpoint is read by its id alone."""
    return await self.session.scalar(select(Endpoint).where(Endpoint.id == endpoint_id))


async def by_raw_sql(
    self: EndpointRepository, team_id: uuid.UUID, endpoint_id: uuid.UUID
) -> Endpoint | None:
    """The same defect in raw SQL, run on the request's connection (below the ORM)."""
    connection = await self.session.connection()
    query = text("SELECT * FROM endpoints WHERE id = :id AND deleted_at IS NULL")
    row = (await connection.execute(query, {"id": endpoint_id})).mappings().first()
    return None if row is None else Endpoint(**row)


@pytest.fixture
async def api_in_process(service_env: dict[str, str]) -> AsyncIterator[tuple[Litestar, str]]:
    """The API in this process, its startup and shutdown run in the loop uvicorn serves in;
    yields the app (its state holds the sessions) and its URL."""
    settings = dataclasses.replace(
        Settings.from_env(service_env), queue=f"test-scope-{uuid.uuid4().hex[:8]}"
    )
    app = create_app(settings)
    async with serve_with_hooks(app) as url:
        yield app, url


@pytest.mark.parametrize("leaky", [by_id_alone, by_raw_sql], ids=["select", "raw-sql"])
async def test_an_unscoped_read_fails_the_request_and_leaks_nothing(
    api_in_process: tuple[Litestar, str],
    new_team: Any,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    leaky: Any,
) -> None:
    app, url = api_in_process
    owner: TeamClient = await new_team()
    other: TeamClient = await new_team()
    name = f"owners-only-{uuid.uuid4().hex[:6]}"
    endpoint = await owner.create_endpoint(name=name, base_url="http://127.0.0.1:9/owners-v1")
    path = f"/v1/endpoints/{endpoint['id']}"
    monkeypatch.setattr(EndpointRepository, "get", leaky)
    headers = {"Authorization": f"Bearer {other.key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        with caplog.at_level(logging.ERROR, logger="infercost.scope"):
            refused = await http.get(path)
        assert refused.status_code == 500, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        problem = refused.json()
        assert problem["title"] == "Internal error"
        assert "incident" in problem["detail"]
        assert name not in refused.text and "owners-v1" not in refused.text
        refusals = [r.getMessage() for r in caplog.records if r.name == "infercost.scope"]
        assert any(m.startswith("unscoped read refused") for m in refusals), refusals
        expected = "endpoints read with no team criterion" if leaky is by_id_alone else "raw SQL"
        assert any(expected in m for m in refusals), refusals

        # The same app and route on sessions without the guard: the other team's endpoint
        # comes back, which is what the refusal above prevented.
        guarded = app.state.sessionmaker
        engine = make_engine(database_url, pool_size=1)
        app.state.sessionmaker = async_sessionmaker(engine, expire_on_commit=False)
        try:
            leaked = await http.get(path)
        finally:
            app.state.sessionmaker = guarded
            await engine.dispose()
        assert leaked.status_code == 200, leaked.text
        assert leaked.json()["name"] == name

        # And the guard is back on the app's sessions: the next such request is refused too.
        assert (await http.get(path)).status_code == 500
