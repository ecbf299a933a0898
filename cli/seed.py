"""First-start data of `infercost up`, written through the core's repositories.

The `default` team and its key (saved in the data dir, mode 600) and the demo endpoints:
`sim-fixed` (fixed timings) and `sim-gpu` (an 8B bf16 model on a simulated H200). A later
start reuses them, pointing the demo endpoints at this start's simulator ports. The rules
are the API's: the key minted and verified as the API does (infercost.security), the
hardware looked up by name for the team, and the endpoint's preflight check run after it
is registered or moved when the API would run one (INFERCOST_PREFLIGHT_ON_REGISTER).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import click
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

import infercost.db.models  # noqa: F401 - every mapper registered before the first query
from cli.datadir import SECRET_KEYS_FILE, TEAM_KEY_FILE, read_private, write_private
from cli.demo import DemoEndpoint, Seeded
from cli.supervisor import LauncherError
from infercost.db.base import utcnow
from infercost.db.engine import engine_for, make_sessionmaker
from infercost.endpoints import preflight
from infercost.endpoints.models import Endpoint
from infercost.endpoints.repository import EndpointRepository
from infercost.hardware.repository import HardwareRepository
from infercost.net.outbound import Policy
from infercost.security import key_prefix, mint_api_key, verify_api_key
from infercost.settings import Settings
from infercost.teams.models import ApiKey, Team
from infercost.teams.repository import TeamRepository

TEAM_NAME = "default"
#: Endpoints read per page while looking for a demo endpoint by name.
_PAGE = 100


def seed(
    settings: Settings, data_dir: Path, demos: tuple[DemoEndpoint, ...], api_url: str
) -> Seeded:
    """Create what is missing (team, key, demo endpoints) in the database of `settings`
    (the children's: its URL, secret keys and outbound policy); LauncherError if the
    database refuses."""
    try:
        return asyncio.run(_Seeder(settings, data_dir, api_url).run(demos))
    except SQLAlchemyError as exc:
        raise LauncherError(
            f"writing the default team and demo endpoints failed: {type(exc).__name__}: "
            f"{exc.__cause__ or exc}"
        ) from exc


class _Seeder:
    def __init__(self, settings: Settings, data_dir: Path, api_url: str) -> None:
        self.settings = settings
        self.data_dir = data_dir
        self.api_url = api_url
        self.key_file = data_dir / TEAM_KEY_FILE

    async def run(self, demos: tuple[DemoEndpoint, ...]) -> Seeded:
        engine = engine_for(self.settings, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as session:
                team = await self._team(session)
                if team is None:
                    return Seeded()
                team_id, team_key = team
                ids = {demo.name: await self._endpoint(session, team_id, demo) for demo in demos}
                return Seeded(team_key, ids)
        finally:
            await engine.dispose()

    async def _team(self, session: AsyncSession) -> tuple[uuid.UUID, str] | None:
        """The default team's id and key: the saved key's team, or a new team and key."""
        teams = TeamRepository(session)
        token = read_private(self.key_file)
        if token is not None:
            prefix = key_prefix(token)
            key = await teams.live_key_by_prefix(prefix) if prefix else None
            if key is None or not verify_api_key(self.settings.secret_keys, token, key.key_hash):
                # Everything else works (the admin token included), so keep running.
                click.secho(
                    f"up: the API does not accept the key in {self.key_file} (this API key is "
                    f"unknown or revoked). Was the database or {SECRET_KEYS_FILE} replaced? "
                    "Put a valid key of the default team in that file, or delete the whole "
                    "data dir to start afresh. Everything else is running.",
                    fg="yellow",
                    err=True,
                )
                return None
            return key.team_id, token
        if await teams.get_by_name(TEAM_NAME) is not None:
            click.secho(
                f"up: a team named '{TEAM_NAME}' already exists but {self.key_file} is missing, "
                "so its key is unknown. Either stop, delete the data dir "
                f"({self.data_dir}) and start afresh, or create a new key with the admin "
                f"token (POST {self.api_url}/v1/teams/<team id>/keys) and save it in "
                f"{self.key_file} (mode 600). Everything else is running.",
                fg="yellow",
                err=True,
            )
            return None
        team = await teams.add(Team(name=TEAM_NAME))
        minted = mint_api_key(self.settings.secret_keys)
        await teams.add_key(
            ApiKey(team_id=team.id, name=TEAM_NAME, prefix=minted.prefix, key_hash=minted.digest)
        )
        await session.commit()
        write_private(self.key_file, minted.token)
        click.echo(f"up: created team '{TEAM_NAME}' and its key ({self.key_file})")
        return team.id, minted.token

    async def _endpoint(self, session: AsyncSession, team_id: uuid.UUID, demo: DemoEndpoint) -> str:
        """The id of a demo endpoint, registering it (or pointing it at its port) as needed."""
        repo = EndpointRepository(session)
        endpoint = await _find(repo, team_id, demo.name)
        if endpoint is None:
            fields = dict(demo.fields)
            hardware = await HardwareRepository(session).by_name(team_id, fields.pop("hardware"))
            endpoint = Endpoint(
                team_id=team_id,
                name=demo.name,
                hardware_id=hardware.id if hardware is not None else None,
                **demo.port_fields,
                **fields,
            )
            endpoint = await repo.add(endpoint)
            await self._check(repo, endpoint)
            await session.commit()
            click.echo(f"up: registered the demo endpoint '{demo.name}'")
            return str(endpoint.id)
        changes = {k: v for k, v in demo.port_fields.items() if getattr(endpoint, k) != v}
        if changes:
            for key, value in changes.items():
                setattr(endpoint, key, value)
            # The last check was of another port: run it again, or forget it.
            endpoint.check, endpoint.checked_at = None, None
            await repo.save(endpoint)
            await self._check(repo, endpoint)
            await session.commit()
            click.echo(f"up: pointed '{demo.name}' at {demo.base_url}")
        return str(endpoint.id)

    async def _check(self, repo: EndpointRepository, endpoint: Endpoint) -> None:
        """The preflight check the API runs on registering or moving an endpoint."""
        if not self.settings.preflight_on_register:
            return
        target = preflight.Target(
            base_url=endpoint.base_url,
            model=endpoint.model,
            api=endpoint.api,
            engine=endpoint.engine,
            metrics_urls=tuple(endpoint.metrics_urls),
        )
        endpoint.check = await preflight.run_check(target, Policy.from_settings(self.settings))
        endpoint.checked_at = utcnow()
        await repo.save(endpoint)


async def _find(repo: EndpointRepository, team_id: uuid.UUID, name: str) -> Endpoint | None:
    """The team's live endpoint called `name`, if any."""
    offset = 0
    while True:
        rows, total = await repo.page(team_id, limit=_PAGE, offset=offset)
        for endpoint in rows:
            if endpoint.name == name:
                return endpoint
        offset += len(rows)
        if not rows or offset >= total:
            return None
