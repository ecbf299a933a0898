"""`infercost up`: everything on one machine, for `make run` (docs/cli-and-api.md, Command line).

Starts Postgres and Redis (embedded under the data dir unless DATABASE_URL / REDIS_URL
name real servers), applies migrations, then runs the API, one worker, the maintenance
process and the demo simulators as supervised children. On first start it creates the
`default` team, its key and the demo endpoints `sim-fixed` (fixed timings) and `sim-gpu`
(an 8B bf16 model on a simulated H200) through the core's repositories. Ctrl-C or SIGTERM
stops the children, then Redis, then Postgres, and leaves no process behind.

In parts: the process supervisor (cli.supervisor), the data dir's lock and
secrets (cli.datadir), the demo endpoints (cli.demo), first-start data
(cli.seed) and the banner (cli.banner); this module runs them in order.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time

import click

from cli.banner import banner_lines
from cli.datadir import TEAM_KEY_FILE, admin_token, data_dir_lock, secret_keys
from cli.demo import demo_endpoints
from cli.embedded import EmbeddedPostgres, EmbeddedRedis, EmbeddedServiceError
from cli.supervisor import LauncherError, Supervisor, infercost_argv
from infercost.settings import Settings

__all__ = ["TEAM_KEY_FILE", "Launcher", "LauncherError", "up"]

MIGRATE_TIMEOUT_S = 300.0


def check_port_free(host: str, port: int, what: str, flag: str) -> None:
    """Fail early, with the flag to change, when a port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise LauncherError(
                f"cannot listen for the {what} on {host}:{port} ({exc.strerror}): "
                f"free the port or pass {flag}"
            ) from None


def client_host(host: str) -> str:
    """Where a local client reaches a server bound to `host` (wildcards mean loopback)."""
    if host in ("0.0.0.0", ""):  # noqa: S104 - comparing, not binding
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


class Launcher:
    """Runs, supervises and stops everything `infercost up` starts."""

    def __init__(
        self,
        settings: Settings,
        api_port: int,
        sim_port: int,
        sim_gpu_port: int,
        worker_processes: int = 1,
    ) -> None:
        self.settings = settings
        # Worker processes: a job with load.shards K needs K of them.
        self.worker_processes = worker_processes
        self.data_dir = settings.data_dir.expanduser().resolve()
        self.api_host = settings.host
        self.api_port = api_port
        self.api_url = f"http://{client_host(self.api_host)}:{api_port}"
        self.demos = demo_endpoints(sim_port, sim_gpu_port)
        self.postgres: EmbeddedPostgres | None = None
        self.redis: EmbeddedRedis | None = None
        self.supervisor = Supervisor(infercost_argv())

    def run(self) -> int:
        """Start everything, serve until a signal or a failure, stop everything; exit code."""
        sup = self.supervisor
        code = 1
        with sup.handling_signals():
            try:
                self.data_dir.mkdir(parents=True, exist_ok=True)
                with data_dir_lock(self.data_dir):
                    try:
                        code = self._start_and_supervise()
                    except KeyboardInterrupt:
                        code = 0
                    except (LauncherError, EmbeddedServiceError, OSError) as exc:
                        if sup.signal is None:
                            click.secho(f"up: {exc}", fg="red", err=True)
                            code = 1
                        else:  # a step failed because Ctrl-C reached its process too
                            code = 0
                    finally:
                        sup.starting = False
                        self._stop_all()
            except OSError as exc:  # the data dir cannot be created or locked
                click.secho(
                    f"up: cannot use {self.data_dir} as the data dir ({exc}); "
                    "set INFERCOST_DATA_DIR to a writable directory",
                    fg="red",
                    err=True,
                )
                code = 1
            except LauncherError as exc:
                click.secho(f"up: {exc}", fg="red", err=True)
                code = 1
        if code == 0:
            click.echo("up: everything stopped")
        return code

    def _start_and_supervise(self) -> int:
        sup = self.supervisor
        t0 = time.monotonic()
        check_port_free(self.api_host, self.api_port, "API", "--port or set INFERCOST_PORT")
        fixed, gpu = self.demos
        check_port_free("127.0.0.1", fixed.port, "simulator", "--sim-port")
        check_port_free("127.0.0.1", gpu.port, "GPU simulator", "--sim-gpu-port")
        token, token_source = admin_token(self.settings, self.data_dir)
        keys = secret_keys(self.settings, self.data_dir)
        database_url = self._database()
        redis_url = self._redis()
        env = self._child_env(database_url, redis_url, token, keys)

        # The simulators need no database, so they start while migrations run.
        sup.spawn("sim", fixed.argv(), env)
        sup.spawn("GPU sim", gpu.argv(), env)
        self._migrate(env)
        t_migrated = time.monotonic()
        sup.spawn("api", ["api", "--host", self.api_host, "--port", str(self.api_port)], env)
        sup.spawn("worker", ["worker", "--concurrency", str(self.worker_processes)], env)
        # The outbox relay, the sweep for dead workers and webhook delivery.
        sup.spawn("maintenance", ["maintenance"], env)
        sup.wait_http(f"{self.api_url}/health", "API")
        sup.wait_http(f"{fixed.base_url}/models", "simulator")
        sup.wait_http(f"{gpu.base_url}/models", "GPU simulator")
        # As the API's processes see things: their database, keys and outbound policy. (Imported
        # here: the database layer it needs would slow every `infercost --help`.)
        from cli.seed import seed

        seeded = seed(Settings.from_env(env), self.data_dir, self.demos, self.api_url)
        sup.starting = False
        lines = banner_lines(
            api_url=self.api_url,
            key_file=self.data_dir / TEAM_KEY_FILE,
            seeded=seeded,
            token_source=token_source,
            demos=self.demos,
            ready_s=time.monotonic() - t0,
            migrated_s=t_migrated - t0,
        )
        click.echo("\n".join(lines))
        return sup.watch()

    # -- services

    def _database(self) -> str:
        if self.settings.database_url:
            click.echo("up: using the Postgres at DATABASE_URL")
            return self.settings.database_url
        self.postgres = EmbeddedPostgres(self.data_dir)
        t = time.monotonic()
        with self.supervisor.signals_deferred():
            url = self.postgres.start()
        placed = self.postgres.placement
        if placed is not None:
            where = (
                f"{placed.pgdata} (linked from {placed.linked_from}: the data dir is out of its "
                "reach)"
                if placed.linked_from is not None
                else str(placed.pgdata)
            )
            binaries = (
                f"; its binaries are a copy in {placed.bin_dir.parent}"
                if placed.bin_dir is not None
                else ""
            )
            click.echo(
                "up: running as root, so embedded Postgres runs as the system user 'pgserver' "
                f"in a directory it owns, {where}{binaries}; no permission above it was changed"
            )
        click.echo(
            f"up: embedded Postgres ready in {time.monotonic() - t:.1f} s ({self.postgres.pgdata})"
        )
        return url

    def _redis(self) -> str:
        if self.settings.redis_url:
            click.echo("up: using the Redis at REDIS_URL")
            return self.settings.redis_url
        self.redis = EmbeddedRedis(self.data_dir)
        t = time.monotonic()
        with self.supervisor.signals_deferred():
            url = self.redis.start()
        click.echo(f"up: embedded Redis ready in {time.monotonic() - t:.1f} s ({self.redis.dir})")
        return url

    def _child_env(
        self, database_url: str, redis_url: str, token: str, keys: str
    ) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DATABASE_URL=database_url,
            REDIS_URL=redis_url,
            INFERCOST_ADMIN_TOKEN=token,
            INFERCOST_SECRET_KEYS=keys,
            INFERCOST_DATA_DIR=str(self.data_dir),
            INFERCOST_HOST=self.api_host,
            INFERCOST_PORT=str(self.api_port),
            PYTHONUNBUFFERED="1",
        )
        # The demo simulators listen on loopback, which the outbound policy refuses unless
        # allowed (infercost/net/outbound.py): allow it, on top of whatever the operator allows.
        allow = [a for a in env.get("INFERCOST_OUTBOUND_ALLOW", "").split(",") if a.strip()]
        env["INFERCOST_OUTBOUND_ALLOW"] = ",".join([*allow, "127.0.0.0/8", "::1"])
        return env

    def _migrate(self, env: dict[str, str]) -> None:
        # A separate process: Alembic configures logging and runs its own event loop.
        t = time.monotonic()
        child = self.supervisor.spawn("migrate", ["migrate"], env)
        code = self.supervisor.wait_exit(
            child,
            MIGRATE_TIMEOUT_S - (time.monotonic() - t),
            f"migrations did not finish within {MIGRATE_TIMEOUT_S:.0f} s; "
            "is another process holding a lock on the database?",
        )
        if code != 0:
            raise LauncherError(f"migrations failed (exit code {code}); see the output above")
        click.echo(f"up: migrations applied in {time.monotonic() - t:.1f} s")

    # -- stopping

    def _stop_all(self) -> None:
        """Children first (their open connections go with them), then Redis, then Postgres."""
        self.supervisor.stop_children()
        if self.redis is not None:
            try:
                self.redis.stop()
            except (OSError, subprocess.SubprocessError) as exc:
                click.secho(f"up: could not stop Redis cleanly: {exc}", fg="red", err=True)
        if self.postgres is not None:
            try:
                self.postgres.stop()
            except (OSError, subprocess.SubprocessError, EmbeddedServiceError) as exc:
                click.secho(f"up: could not stop Postgres cleanly: {exc}", fg="red", err=True)


@click.command()
@click.option("--port", type=int, default=None, help="API port (default INFERCOST_PORT or 8000).")
@click.option("--sim-port", type=int, default=9100, show_default=True, help="Demo simulator port.")
@click.option(
    "--sim-gpu-port",
    type=int,
    default=9101,
    show_default=True,
    help="Port of the demo GPU-mode simulator.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Worker processes (a job with load.shards K needs K).",
)
def up(port: int | None, sim_port: int, sim_gpu_port: int, workers: int) -> None:
    """Run everything here: Postgres, Redis, migrations, API, a worker, the maintenance
    process and two simulators.

    Without DATABASE_URL / REDIS_URL, Postgres and Redis are embedded under
    INFERCOST_DATA_DIR (default ./.infercost). On first start a `default` team, its key
    (written to INFERCOST_DATA_DIR/default-team.key) and the demo endpoints `sim-fixed`
    and `sim-gpu` are created. Ctrl-C stops everything.
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if sim_gpu_port == sim_port:
        raise click.UsageError("--sim-port and --sim-gpu-port must differ")
    launcher = Launcher(
        settings,
        api_port=port or settings.port,
        sim_port=sim_port,
        sim_gpu_port=sim_gpu_port,
        worker_processes=workers,
    )
    sys.exit(launcher.run())
