"""Per-process resources of a worker: one event loop, one engine, one HTTP client.

Created when the worker process starts (never at import, never inherited across fork) and
closed when it stops.
"""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass, field

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

import infercost.db.models  # noqa: F401 - every mapper registered before the first query
from infercost.db.engine import engine_for, make_sessionmaker
from infercost.security import Vault
from infercost.settings import Settings
from workers.loadgen.health import ClientHealth, ReadCost
from workers.loadgen.transport import load_client


@dataclass(slots=True)
class Runtime:
    """What every task in this process shares."""

    settings: Settings
    loop: asyncio.AbstractEventLoop
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    http: httpx.AsyncClient
    vault: Vault
    # The load client's reading-side health (read lag, loop lag, re-sends), per level.
    health: ClientHealth = field(default_factory=ClientHealth)
    # This process's CPU per received event over its recent levels (load.shards "auto").
    read_cost: ReadCost = field(default_factory=ReadCost)

    @classmethod
    def start(cls, settings: Settings) -> Runtime:
        """Create the loop, then the engine and the HTTP pool on it."""
        # The standard loop: uvloop was tried on 2026-12-02 (an earlier bench/loadgen.py that
        # ran both) and was no cheaper per request here, with more TTFT error at 16 streams.
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        engine = engine_for(settings, pool_size=4)
        health = ClientHealth()
        http = load_client(settings.max_concurrency, health=health)
        # Everything start-up made (modules, the runtime) lives as long as the process: the
        # collector need never walk it again.
        gc.collect()
        gc.freeze()
        return cls(
            settings,
            loop,
            engine,
            make_sessionmaker(engine),
            http,
            Vault(settings.secret_keys),
            health,
        )

    def close(self) -> None:
        """Close the HTTP pool and the engine, then the loop."""
        self.loop.run_until_complete(self.http.aclose())
        self.loop.run_until_complete(self.engine.dispose())
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()
