"""`infercost up`: everything on one machine, for `make run` (CONTRACT.md, Command line).

Starts Postgres and Redis (embedded under the data dir unless DATABASE_URL / REDIS_URL
name real servers), applies migrations, then runs the API, one worker, the maintenance
process and the demo simulators as supervised children. On first start it creates the
`default` team, its key and the demo endpoints over the HTTP API, exactly as a user would:
`sim-fixed` (fixed timings) and `sim-gpu` (an 8B bf16 model on a simulated H200). Ctrl-C
or SIGTERM stops the children, then Redis, then Postgres, and leaves no process behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import click
import httpx
import psutil
from cryptography.fernet import Fernet

from infercost.embedded import (
    EmbeddedPostgres,
    EmbeddedRedis,
    EmbeddedServiceError,
    child_process_kwargs,
)
from infercost.settings import Settings
from infercost.sim.config import SimPrecision, default_kv_bytes_per_token

ADMIN_TOKEN_FILE = "admin.token"  # noqa: S105 - a file name, not a secret
SECRET_KEYS_FILE = "secret.keys"  # noqa: S105 - a file name, not a secret
TEAM_KEY_FILE = "default-team.key"
LOCK_FILE = "up.lock"
TEAM_NAME = "default"
SIM_ENDPOINT = "sim-fixed"
SIM_MODEL = "sim-model"
SIM_GPU_ENDPOINT = "sim-gpu"
SIM_GPU_MODEL = "sim-llama-8b"
# What both demo endpoints declare they run on, and the model `sim-gpu` simulates.
SIM_HARDWARE = "H200-SXM"
SIM_USD_PER_HOUR = 3.5
SIM_GPU_PARAMS_B = 8
SIM_GPU_PRECISION: SimPrecision = "bf16"
# Bounds on each phase; a slow machine's cold start (initdb + migrations) fits easily.
MIGRATE_TIMEOUT_S = 300.0
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.2


class LauncherError(RuntimeError):
    """`up` cannot go on; the message says what happened and what to do."""


class KeyRejectedError(LauncherError):
    """The API does not accept the saved team key (the data dir is inconsistent)."""


@dataclass(frozen=True)
class DemoEndpoint:
    """A demo simulator `up` runs and registers: its port, its flags and its endpoint fields."""

    name: str
    port: int
    sim_args: tuple[str, ...]
    fields: dict[str, Any]  # registration fields besides name, base_url and metrics_urls
    with_metrics: bool = False  # register its /metrics as the endpoint's metrics_urls

    @property
    def base_url(self) -> str:
        """The OpenAI base URL registered for it."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def port_fields(self) -> dict[str, Any]:
        """The registered fields that follow the port (updated when it changes)."""
        fields: dict[str, Any] = {"base_url": self.base_url}
        if self.with_metrics:
            fields["metrics_urls"] = [f"http://127.0.0.1:{self.port}/metrics"]
        return fields

    def argv(self) -> list[str]:
        """`infercost` arguments that start its simulator."""
        return ["sim", "--host", "127.0.0.1", "--port", str(self.port), *self.sim_args]

    def body(self) -> dict[str, Any]:
        """POST /v1/endpoints body that registers it."""
        return {"name": self.name, **self.port_fields, **self.fields}


def demo_endpoints(sim_port: int, sim_gpu_port: int) -> tuple[DemoEndpoint, DemoEndpoint]:
    """`sim-fixed` (50 ms TTFT, 10 ms per token) and `sim-gpu` (8B bf16 on a modelled H200)."""
    common = {
        "api": "openai-chat",
        "engine": "infercost-sim",
        "hardware": SIM_HARDWARE,
        "gpu_count": 1,
        "usd_per_hour": SIM_USD_PER_HOUR,
    }
    kv_bytes = default_kv_bytes_per_token(SIM_GPU_PARAMS_B, SIM_GPU_PRECISION)
    fixed = DemoEndpoint(
        name=SIM_ENDPOINT,
        port=sim_port,
        sim_args=("--mode", "fixed", "--ttft-ms", "50", "--itl-ms", "10", "--model", SIM_MODEL),
        fields={**common, "model": SIM_MODEL},
    )  # fmt: skip
    gpu = DemoEndpoint(
        name=SIM_GPU_ENDPOINT,
        port=sim_gpu_port,
        sim_args=("--mode", "gpu", "--gpu", SIM_HARDWARE, "--params-b", str(SIM_GPU_PARAMS_B),
                  "--precision", SIM_GPU_PRECISION, "--gpu-count", "1", "--model", SIM_GPU_MODEL),
        fields={**common, "model": SIM_GPU_MODEL, "params_b": SIM_GPU_PARAMS_B,
                "precision": SIM_GPU_PRECISION, "kv_bytes_per_token": kv_bytes},
        with_metrics=True,
    )  # fmt: skip
    return fixed, gpu


@dataclass
class Child:
    """A supervised child process: the leader of its own process group."""

    name: str
    proc: subprocess.Popen[bytes]
    # Descendants seen so far (e.g. Celery's pool), so a stop can wait for them too.
    seen: dict[int, psutil.Process] = field(default_factory=dict)

    def remember_descendants(self) -> None:
        """Record the child and its current descendants."""
        if self.proc.poll() is not None:  # reaped: its pid may belong to someone else now
            return
        try:
            root = psutil.Process(self.proc.pid)
            for p in [root, *root.children(recursive=True)]:
                self.seen.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass

    def signal_group(self, sig: int) -> None:
        """Send `sig` to the child's process group, or to what is left of it."""
        if self.proc.poll() is None:
            # Not reaped, so the group id cannot have been reused yet.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
            return
        for p in self.seen.values():  # psutil refuses to signal a reused pid
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                p.send_signal(sig)


# ------------------------------------------------------------------------- helpers


def infercost_argv() -> list[str]:
    """How to run this package's command line in a child process.

    The `infercost` script next to the interpreter when installed, else the same entry
    point through `python -c` (the package has no `__main__`).
    """
    script = Path(sys.executable).with_name("infercost")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-c", "from infercost.cli import main; main()"]


def _write_private(path: Path, text: str) -> bool:
    """Create `path` with mode 600 holding `text`; False if it already exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        fh.write(text + "\n")
    return True


def _read_private(path: Path) -> str | None:
    """The stripped contents of a secret file (tightening its mode to 600), or None."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    if path.stat().st_mode & 0o077:
        click.echo(f"up: {path} was readable by others; setting its mode to 600")
        path.chmod(0o600)
    if not text:
        raise LauncherError(f"{path} is empty: restore it from a backup, or delete it")
    return text


def admin_token(settings: Settings, data_dir: Path) -> tuple[str, str]:
    """The admin token and where it came from: INFERCOST_ADMIN_TOKEN, else the data dir."""
    if settings.admin_token:
        return settings.admin_token, "INFERCOST_ADMIN_TOKEN"
    path = data_dir / ADMIN_TOKEN_FILE
    token = _read_private(path)
    if token is None:
        token = secrets.token_urlsafe(32)
        if not _write_private(path, token):  # lost a race with another process
            token = _read_private(path) or token
    return token, str(path)


def secret_keys(settings: Settings, data_dir: Path) -> str:
    """INFERCOST_SECRET_KEYS, else the Fernet key(s) kept in the data dir (made once)."""
    if settings.secret_keys:
        return ",".join(settings.secret_keys)
    path = data_dir / SECRET_KEYS_FILE
    text = _read_private(path)
    if text is None:
        text = Fernet.generate_key().decode()
        if not _write_private(path, text):
            text = _read_private(path) or text
    for key in text.split(","):
        try:
            Fernet(key.strip().encode())
        except ValueError:
            raise LauncherError(
                f"{path} does not hold valid Fernet keys. Restore it from a backup: API keys "
                "and endpoint credentials stored with it cannot be read without it. To start "
                "afresh instead, delete the whole data dir."
            ) from None
    return text


@contextlib.contextmanager
def data_dir_lock(data_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock so two launchers never share one data dir."""
    path = data_dir / LOCK_FILE
    with path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise LauncherError(
                f"another `infercost up` (pid {holder}) is using {data_dir}: stop it first, "
                "or set INFERCOST_DATA_DIR to another directory"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


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


def _exit_text(returncode: int | None) -> str:
    """How a child ended, in words: 'exited with code 2', 'was killed by SIGKILL'."""
    if returncode is not None and returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def _problem_detail(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200]
    if isinstance(body, dict):
        return str(body.get("detail") or body.get("title") or body)
    return str(body)[:200]


def _shell_path(path: Path) -> str:
    """`path` as short as it can be written in a shell command run from here."""
    with contextlib.suppress(ValueError):
        return shlex.quote(str(path.relative_to(Path.cwd())))
    return shlex.quote(str(path))


# ------------------------------------------------------------------------ launcher


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
        self.children: list[Child] = []
        self.argv = infercost_argv()
        self._signal: int | None = None
        self._starting = True

    # -- signals

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        first = self._signal is None
        if first:
            self._signal = signum
            click.echo(f"\nup: {signal.Signals(signum).name} received; stopping everything")
        if first and self._starting:
            # Startup blocks in places that do not poll (pg_ctl, migrations); unwind them.
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def _signals_deferred(self) -> Iterator[None]:
        """Only note a signal while inside; act on it after.

        For steps that must not be cut in half (initdb, pg_ctl, spawning Redis): an
        exception there could leave a half-made cluster or an unrecorded server.
        """
        starting, self._starting = self._starting, False
        try:
            yield
        finally:
            self._starting = starting
        self._check_stop()

    def _check_stop(self) -> None:
        if self._signal is not None:
            raise KeyboardInterrupt

    # -- entry point

    def run(self) -> int:
        """Start everything, serve until a signal or a failure, stop everything; exit code."""
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        code = 1
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            with data_dir_lock(self.data_dir):
                try:
                    code = self._start_and_supervise()
                except KeyboardInterrupt:
                    code = 0
                except (LauncherError, EmbeddedServiceError, OSError) as exc:
                    if self._signal is None:
                        click.secho(f"up: {exc}", fg="red", err=True)
                        code = 1
                    else:  # a step failed because Ctrl-C reached its process too
                        code = 0
                finally:
                    self._starting = False
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
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if code == 0:
            click.echo("up: everything stopped")
        return code

    def _start_and_supervise(self) -> int:
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
        self._spawn("sim", fixed.argv(), env)
        self._spawn("GPU sim", gpu.argv(), env)
        self._migrate(env)
        t_migrated = time.monotonic()
        self._spawn("api", ["api", "--host", self.api_host, "--port", str(self.api_port)], env)
        self._spawn("worker", ["worker", "--concurrency", str(self.worker_processes)], env)
        # The outbox relay, the sweep for dead workers and webhook delivery.
        self._spawn("maintenance", ["maintenance"], env)
        self._wait_http(f"{self.api_url}/health", "API")
        self._wait_http(f"{fixed.base_url}/models", "simulator")
        self._wait_http(f"{gpu.base_url}/models", "GPU simulator")
        team_key, endpoint_ids = self._seed(token)
        self._starting = False
        self._banner(team_key, token_source, endpoint_ids, time.monotonic() - t0, t_migrated - t0)
        return self._supervise()

    # -- services

    def _database(self) -> str:
        if self.settings.database_url:
            click.echo("up: using the Postgres at DATABASE_URL")
            return self.settings.database_url
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            click.echo(
                "up: running as root, so embedded Postgres runs as the system user 'pgserver'; "
                f"it owns {self.data_dir / 'postgres'} and the directories above it are made "
                "traversable (o+rx)"
            )
        self.postgres = EmbeddedPostgres(self.data_dir)
        t = time.monotonic()
        with self._signals_deferred():
            url = self.postgres.start()
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
        with self._signals_deferred():
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
        # allowed (infercost/outbound.py): allow it, on top of whatever the operator allows.
        allow = [a for a in env.get("INFERCOST_OUTBOUND_ALLOW", "").split(",") if a.strip()]
        env["INFERCOST_OUTBOUND_ALLOW"] = ",".join([*allow, "127.0.0.0/8", "::1"])
        return env

    def _migrate(self, env: dict[str, str]) -> None:
        # A separate process: Alembic configures logging and runs its own event loop.
        t = time.monotonic()
        child = self._spawn("migrate", ["migrate"], env)
        deadline = t + MIGRATE_TIMEOUT_S
        while (code := child.proc.poll()) is None:
            self._check_stop()
            self._raise_if_dead(besides=child)
            if time.monotonic() > deadline:
                raise LauncherError(
                    f"migrations did not finish within {MIGRATE_TIMEOUT_S:.0f} s; "
                    "is another process holding a lock on the database?"
                )
            time.sleep(POLL_S)
        self.children.remove(child)
        if code != 0:
            raise LauncherError(f"migrations failed (exit code {code}); see the output above")
        click.echo(f"up: migrations applied in {time.monotonic() - t:.1f} s")

    # -- children

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> Child:
        with self._signals_deferred():  # so that every started child is recorded
            try:
                proc = subprocess.Popen(  # noqa: S603 - our own command line, no shell
                    [*self.argv, *args],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    **child_process_kwargs(),
                )
            except OSError as exc:
                raise LauncherError(f"could not start the {name}: {exc}") from exc
            child = Child(name, proc)
            self.children.append(child)
        return child

    def _dead_child(self, besides: Child | None = None) -> Child | None:
        for child in self.children:
            if child is besides:
                continue
            if child.proc.poll() is not None:
                return child
            child.remember_descendants()
        return None

    def _raise_if_dead(self, besides: Child | None = None) -> None:
        child = self._dead_child(besides)
        if child is not None:
            raise LauncherError(
                f"the {child.name} {_exit_text(child.proc.returncode)} while starting; "
                "see its output above"
            )

    def _wait_http(self, url: str, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        with httpx.Client(timeout=2.0) as client:
            while True:
                self._check_stop()
                self._raise_if_dead()
                try:
                    if client.get(url).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise LauncherError(
                        f"the {what} did not answer {url} within {READY_TIMEOUT_S:.0f} s"
                    )
                time.sleep(POLL_S)

    def _supervise(self) -> int:
        while self._signal is None:
            child = self._dead_child()
            if child is not None:
                click.secho(
                    f"up: the {child.name} {_exit_text(child.proc.returncode)} unexpectedly; "
                    "stopping the rest",
                    fg="red",
                    err=True,
                )
                return 1
            time.sleep(POLL_S)
        return 0

    # -- stopping

    def _stop_all(self) -> None:
        """Children first (their open connections go with them), then Redis, then Postgres."""
        self._stop_children()
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

    def _stop_children(self) -> None:
        children, self.children = self.children, []
        for child in children:
            child.remember_descendants()
            child.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        pending = [p for child in children for p in child.seen.values()]
        _, alive = psutil.wait_procs(pending, timeout=max(0.1, deadline - time.monotonic()))
        stubborn = [c for c in children if c.proc.poll() is None]
        if alive or stubborn:
            names = ", ".join(c.name for c in stubborn) or "child processes"
            click.echo(f"up: {names} did not stop within {STOP_TIMEOUT_S:.0f} s; killing")
            for child in children:
                child.signal_group(signal.SIGKILL)
            for p in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.kill()
            psutil.wait_procs(alive, timeout=5)
            for child in children:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.proc.wait(timeout=5)

    # -- first-start data

    def _seed(self, token: str) -> tuple[str | None, dict[str, str]]:
        """The default team's key and the demo endpoints' ids by name, creating them when
        missing."""
        key_file = self.data_dir / TEAM_KEY_FILE
        with httpx.Client(base_url=self.api_url, timeout=15.0) as client:
            team_key = _read_private(key_file)
            if team_key is None:
                team_key = self._create_team_key(client, token, key_file)
                if team_key is None:
                    return None, {}
            try:
                ids = {demo.name: self._sim_endpoint(client, team_key, demo) for demo in self.demos}
            except KeyRejectedError as exc:
                # Everything else works (the admin token included), so keep running.
                click.secho(f"up: {exc} Everything else is running.", fg="yellow", err=True)
                return None, {}
            return team_key, ids

    def _create_team_key(self, client: httpx.Client, token: str, key_file: Path) -> str | None:
        admin = {"Authorization": f"Bearer {token}"}
        resp = client.post("/v1/teams", json={"name": TEAM_NAME}, headers=admin)
        if resp.status_code == 409:
            click.secho(
                f"up: a team named '{TEAM_NAME}' already exists but {key_file} is missing, so "
                "its key is unknown. Either stop, delete the data dir "
                f"({self.data_dir}) and start afresh, or create a new key with the admin "
                f"token (POST {self.api_url}/v1/teams/<team id>/keys) and save it in "
                f"{key_file} (mode 600). Everything else is running.",
                fg="yellow",
                err=True,
            )
            return None
        if resp.status_code != 201:
            raise LauncherError(
                f"creating the default team failed: HTTP {resp.status_code}: "
                f"{_problem_detail(resp)}"
            )
        team_id = resp.json()["id"]
        resp = client.post(f"/v1/teams/{team_id}/keys", json={"name": TEAM_NAME}, headers=admin)
        if resp.status_code != 201:
            raise LauncherError(
                f"creating the default team's key failed: HTTP {resp.status_code}: "
                f"{_problem_detail(resp)}"
            )
        key: str = resp.json()["key"]
        _write_private(key_file, key)
        click.echo(f"up: created team '{TEAM_NAME}' and its key ({key_file})")
        return key

    def _sim_endpoint(self, client: httpx.Client, team_key: str, demo: DemoEndpoint) -> str:
        """The id of a demo endpoint, registering it (or pointing it at its port) as needed."""
        auth = {"Authorization": f"Bearer {team_key}"}
        found = self._find_endpoint(client, auth, demo.name)
        if found is None:
            resp = client.post("/v1/endpoints", json=demo.body(), headers=auth)
            if resp.status_code != 201:
                raise LauncherError(
                    f"registering the demo endpoint '{demo.name}' failed: HTTP "
                    f"{resp.status_code}: {_problem_detail(resp)}"
                )
            click.echo(f"up: registered the demo endpoint '{demo.name}'")
            endpoint_id: str = resp.json()["id"]
            return endpoint_id
        endpoint_id = str(found["id"])
        changes = {k: v for k, v in demo.port_fields.items() if found.get(k) != v}
        if changes:
            resp = client.patch(f"/v1/endpoints/{endpoint_id}", json=changes, headers=auth)
            if resp.status_code == 200:
                click.echo(f"up: pointed '{demo.name}' at {demo.base_url}")
            else:
                stale = "; ".join(
                    f"{key} is {found.get(key)}, not {changes[key]}" for key in changes
                )
                click.secho(
                    f"up: '{demo.name}' has {stale}, and updating it failed: HTTP "
                    f"{resp.status_code}: {_problem_detail(resp)}",
                    fg="yellow",
                    err=True,
                )
        return endpoint_id

    def _find_endpoint(
        self, client: httpx.Client, auth: dict[str, str], name: str
    ) -> dict[str, Any] | None:
        offset = 0
        while True:
            resp = client.get("/v1/endpoints", params={"offset": offset}, headers=auth)
            if resp.status_code == 401:
                raise KeyRejectedError(
                    f"the API does not accept the key in {self.data_dir / TEAM_KEY_FILE} "
                    f"({_problem_detail(resp)}). Was the database or {SECRET_KEYS_FILE} "
                    "replaced? Put a valid key of the default team in that file, or delete the "
                    "whole data dir to start afresh."
                )
            if resp.status_code != 200:
                raise LauncherError(
                    f"listing endpoints failed: HTTP {resp.status_code}: {_problem_detail(resp)}"
                )
            page = resp.json()
            items: list[dict[str, Any]] = page.get("items", [])
            for item in items:
                if item.get("name") == name:
                    return item
            offset += len(items)
            if not items or offset >= int(page.get("total", 0)):
                return None

    # -- output

    def _banner(
        self,
        team_key: str | None,
        token_source: str,
        endpoint_ids: dict[str, str],
        ready_s: float,
        migrated_s: float,
    ) -> None:
        key_file = self.data_dir / TEAM_KEY_FILE
        key_arg = f'"Authorization: Bearer $(cat {_shell_path(key_file)})"'
        out: TextIO = sys.stdout
        lines = [
            "",
            f"infercost is running (ready in {ready_s:.1f} s; database ready and migrated "
            f"after {migrated_s:.1f} s)",
            f"  API          {self.api_url}",
            f"  docs         {self.api_url}/schema",
        ]
        if team_key is not None:
            lines.append(f"  team key     {team_key}")
            lines.append(f"               (saved in {key_file})")
        lines.append(f"  admin token  in {token_source}")
        for demo in self.demos:
            if demo.name in endpoint_ids:
                lines.append(
                    f"  demo         endpoint '{demo.name}' (id {endpoint_ids[demo.name]}), "
                    f"simulator at {demo.base_url}"
                )
        endpoint_id = endpoint_ids.get(SIM_ENDPOINT)
        if endpoint_id is not None:
            lines += [
                "",
                "Submit a first job:",
                f"  curl -s -X POST {self.api_url}/v1/jobs -H {key_arg} \\",
                "    -H 'Content-Type: application/json' \\",
                f'    -d \'{{"endpoint_id": "{endpoint_id}", '
                '"workload": {"input_tokens": {"mean": 128}, "output_tokens": {"mean": 64}}, '
                '"load": {"mode": "concurrency", "levels": [1, 8], "requests_per_level": 50, '
                '"warmup_requests": 4}}\'',
                "Read it back (the id is in the response):",
                f"  curl -s {self.api_url}/v1/jobs/<job id> -H {key_arg}",
            ]
        lines += ["", "Press Ctrl-C to stop everything.", ""]
        click.echo("\n".join(lines), file=out)


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
