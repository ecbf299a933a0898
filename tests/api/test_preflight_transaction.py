"""The preflight check probes outside the request's database transaction, then stores.

An endpoint that accepts connections and never answers keeps the check busy for seconds;
meanwhile no connection of the API is left "idle in transaction" after reading it (which
would hold a pooled connection, and a snapshot, for as long as a remote server stalls)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.conftest import TeamClient

pytestmark = pytest.mark.integration

#: An API connection parked for over a second in a transaction whose last statement read
#: endpoints (a transaction caught between two statements for an instant is not parked).
PARKED_SQL = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND state LIKE 'idle in transaction%' AND query ILIKE '%FROM endpoints%'
  AND now() - state_change > interval '1 second'
"""


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """A TCP server on loopback that accepts, reads and never answers; yields its port."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        with contextlib.suppress(ConnectionError):
            while await reader.read(1 << 16):  # until the client gives up and closes
                pass

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()


async def test_the_check_probes_with_no_transaction_open(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    async with silent_server() as port:
        endpoint = await team.create_endpoint(base_url=f"http://127.0.0.1:{port}/v1")
        call = asyncio.create_task(team.http.post(f"/v1/endpoints/{endpoint['id']}/check"))
        parked: list[int] = []
        while not call.done():
            parked.append(int(await db.fetchval(PARKED_SQL)))
            await asyncio.sleep(0.1)
        response = await call
    assert response.status_code == 200, response.text
    check = response.json()
    assert check["ok"] is False  # nothing answered: the probes timed out
    assert len(parked) >= 10, "the check ended before it could be watched"
    assert max(parked) == 0, parked
    # Stored after the probe, and read back as returned.
    stored = (await team.http.get(f"/v1/endpoints/{endpoint['id']}")).json()
    assert stored["check"]["ok"] is False and stored["checked_at"] == check["checked_at"]
