"""`infercost api`, `infercost worker`, `infercost maintenance`, `infercost migrate`: the
production parts."""

from __future__ import annotations

import os
import sys

import click

from infercost.settings import Settings

# How long the API keeps an idle client connection open. uvicorn's default (5 s) equals httpx's
# keep-alive expiry, so a client reusing a connection idle for about 5 s could send its request
# just as the server hung up, and get "Server disconnected without sending a response" (seen in
# the suite on a loaded machine). Longer than the clients' expiry (httpx 5 s) and the usual load
# balancer idle timeout (60 s), the client or the balancer always closes first.
KEEP_ALIVE_S = 75


@click.command()
@click.option("--host", default=None, help="Bind address (default INFERCOST_HOST or 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default INFERCOST_PORT or 8000).")
def api(host: str | None, port: int | None) -> None:
    """Serve the HTTP API."""
    import uvicorn

    settings = Settings.from_env()
    settings.require_database_url()
    settings.require_redis_url()
    uvicorn.run(
        "api.app:create_app",
        factory=True,
        host=host or settings.host,
        port=port or settings.port,
        log_level="info",
        access_log=False,
        timeout_keep_alive=KEEP_ALIVE_S,
    )


@click.command()
@click.option("--concurrency", type=int, default=1, show_default=True, help="Worker processes.")
@click.option("--loglevel", default="info", show_default=True)
def worker(concurrency: int, loglevel: str) -> None:
    """Run a Celery worker that executes benchmark jobs."""
    settings = Settings.from_env()
    settings.require_database_url()
    settings.require_redis_url()
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers.app",
        "worker",
        "--pool",
        "prefork",
        "--concurrency",
        str(concurrency),
        "--queues",
        settings.queue,
        # A node name of its own: workers on one host would otherwise all answer Celery's
        # remote control as celery@host, and `load.shards: "auto"` counts them by their answers.
        "--hostname",
        f"infercost-{os.getpid()}@%h",
        "--loglevel",
        loglevel,
        "--without-gossip",
        "--without-mingle",
    ]
    os.execv(sys.executable, argv)  # noqa: S606 - replace this process with the worker


@click.command()
def maintenance() -> None:
    """Run the periodic duties: outbox relay, sweep for dead workers, webhook delivery.

    One is enough and several are safe (workers/maintenance.py says why).
    """
    from workers.maintenance import main

    settings = Settings.from_env()
    settings.require_database_url()
    settings.require_redis_url()
    main(settings)


@click.command()
def migrate() -> None:
    """Apply database migrations up to the latest revision."""
    from infercost.db.migrate import upgrade_head

    settings = Settings.from_env()
    upgrade_head(settings.require_database_url())
    click.echo("database is at the latest revision")


@click.command()
def scrub() -> None:
    """Mask endpoints' keys in what was stored before this version masked them (checks, job
    and run errors, webhook payloads); once after upgrading, harmless again."""
    import asyncio

    from infercost.db.engine import engine_for, make_sessionmaker
    from infercost.scrub import scrub_stored_secrets
    from infercost.security import Vault

    settings = Settings.from_env()
    settings.require_database_url()

    async def run() -> dict[str, int]:
        engine = engine_for(settings)
        try:
            async with make_sessionmaker(engine)() as session:
                changed = await scrub_stored_secrets(session, Vault(settings.secret_keys))
                await session.commit()
        finally:
            await engine.dispose()
        return dict(changed)

    changed = asyncio.run(run())
    done = ", ".join(f"{n} {kind}" for kind, n in sorted(changed.items())) or "nothing"
    click.echo(f"scrubbed: {done}")
