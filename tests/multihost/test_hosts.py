"""The production shape on separate hosts: the API, two workers and the maintenance process
each in a network namespace of its own, reaching a Postgres and a Redis on another, and a
sharded job run across both workers.

The test makes every namespace itself: a hub namespace holds a bridge, and each host gets a
veth pair to it with an address from 198.18.0.0/15 (the range reserved for network
benchmarks). Those addresses exist only inside these namespaces, never on an interface of the
machine, and everything is removed at the end. Postgres (initdb into a temporary directory, run
as `nobody`: Postgres refuses root) and Redis (`--bind` on the namespace's address) are private
instances started here, as the shared ones listen on loopback only. The processes are the ones
docker-compose.yml starts (migrate, api, worker x2, maintenance), with the environment a host
of each needs (docs/operations.md): the database and queue URLs, the same secret keys, the
queue name, the outbound allowlist.

Skipped, with the reason, where namespaces cannot be made (not root, no `ip`, a container
without CAP_SYS_ADMIN) or Postgres or Redis binaries are missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from tests.conftest import ARTIFACTS, ROOT

pytestmark = pytest.mark.integration

#: The hosts and their addresses on the test's own link (198.18.0.0/24 of 198.18.0.0/15).
HOSTS = {
    "data": "198.18.0.2",  # Postgres, Redis and the simulated endpoint
    "api": "198.18.0.3",
    "w1": "198.18.0.4",
    "w2": "198.18.0.5",
    "mnt": "198.18.0.6",
    "client": "198.18.0.7",  # where the test's HTTP calls come from
}
PREFIX = 24
SUBNET = "198.18.0.0/24"
START_TIMEOUT_S = 120.0


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=60)


def _why_no_namespaces() -> str | None:
    """None when this machine lets the test make namespaces; else why not, in a sentence."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "making network namespaces needs root (ip netns add)"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) to make network namespaces"
    probe = f"icprobe{uuid.uuid4().hex[:6]}"
    made = _run("ip", "netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` fails here: {made.stderr.strip() or made.returncode}"
    _run("ip", "netns", "del", probe, check=False)
    for tool in ("initdb", "postgres", "redis-server"):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH to start a private instance on the test's link"
    return None


@dataclass
class Net:
    """The namespaces the test made: `ns(host)` is a host's namespace name."""

    tag: str

    def ns(self, host: str) -> str:
        return f"ic{self.tag}-{host}"

    @property
    def hub(self) -> str:
        return self.ns("hub")


@contextlib.contextmanager
def network() -> Iterator[Net]:
    """A hub namespace with a bridge and one namespace per host linked to it by a veth pair;
    removed (with every interface in them) on exit."""
    net = Net(uuid.uuid4().hex[:6])
    made: list[str] = []
    try:
        for name in (net.hub, *(net.ns(h) for h in HOSTS)):
            _run("ip", "netns", "add", name)
            made.append(name)
            _run("ip", "-n", name, "link", "set", "lo", "up")
        _run("ip", "-n", net.hub, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", net.hub, "link", "set", "br0", "up")
        for i, (host, address) in enumerate(HOSTS.items()):
            # Made inside the hub, so neither end ever exists in the machine's namespace.
            hub_end = f"h{i}"
            _run(
                "ip", "-n", net.hub, "link", "add", hub_end, "type", "veth", "peer", "name", "eth0"
            )
            _run("ip", "-n", net.hub, "link", "set", "eth0", "netns", net.ns(host))
            _run("ip", "-n", net.hub, "link", "set", hub_end, "master", "br0")
            _run("ip", "-n", net.hub, "link", "set", hub_end, "up")
            _run("ip", "-n", net.ns(host), "addr", "add", f"{address}/{PREFIX}", "dev", "eth0")
            _run("ip", "-n", net.ns(host), "link", "set", "eth0", "up")
        yield net
    finally:
        for name in reversed(made):
            _run("ip", "netns", "del", name, check=False)


@dataclass
class Hosts:
    """Starts processes on the hosts and stops them all, newest first."""

    net: Net
    logs: Path
    procs: list[tuple[str, subprocess.Popen[bytes]]]

    def start(
        self, host: str, name: str, argv: list[str], env: dict[str, str], user: str | None = None
    ) -> subprocess.Popen[bytes]:
        prefix = ["ip", "netns", "exec", self.net.ns(host)]
        if user is not None:
            prefix += ["runuser", "-u", user, "--"]
        log = (self.logs / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [*prefix, *argv], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
        )
        self.procs.append((name, proc))
        return proc

    def run(self, host: str, argv: list[str], env: dict[str, str], timeout: float = 120) -> str:
        done = subprocess.run(
            ["ip", "netns", "exec", self.net.ns(host), *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            check=False,
        )
        assert done.returncode == 0, f"{argv[:3]} on {host}: {done.stdout}\n{done.stderr}"
        return done.stdout

    def stop_all(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for _, proc in reversed(self.procs):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def alive(self) -> None:
        for name, proc in self.procs:
            assert proc.poll() is None, f"{name} exited with {proc.returncode}; see {self.logs}"

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")


def _wait(hosts: Hosts, host: str, env: dict[str, str], code: str, what: str) -> None:
    """Run the Python `code` on `host` until it exits 0, or fail naming `what`."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        hosts.alive()
        done = subprocess.run(
            ["ip", "netns", "exec", hosts.net.ns(host), sys.executable, "-c", code],
            env=env,
            capture_output=True,
            timeout=30,
            check=False,
        )
        if done.returncode == 0:
            return
        time.sleep(0.5)
    pytest.fail(f"{what} not ready within {START_TIMEOUT_S:.0f} s; logs in {hosts.logs}")


def _net_namespace_inode(name: str) -> int:
    return os.stat(f"/run/netns/{name}").st_ino


def _process_namespace_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


#: The client's side, run on the client host: make a team and its key (admin), register the
#: simulator, submit a sharded job, wait for it, print the job and its shards' workers.
CLIENT = r"""
import json, os, sys, time, httpx
api, admin = os.environ["API"], os.environ["ADMIN"]
with httpx.Client(base_url=api, timeout=30) as http:
    team = http.post("/v1/teams", json={"name": "multihost"},
                     headers={"Authorization": f"Bearer {admin}"}).raise_for_status().json()
    key = http.post(f"/v1/teams/{team['id']}/keys", json={"name": "ci"},
                    headers={"Authorization": f"Bearer {admin}"}).raise_for_status().json()
    auth = {"Authorization": f"Bearer {key['key']}"}
    endpoint = http.post("/v1/endpoints", headers=auth, json={
        "name": "sim", "base_url": os.environ["SIM"], "model": "sim-model",
        "hardware": "H200-SXM", "usd_per_hour": 3.5}).raise_for_status().json()
    job = http.post("/v1/jobs", headers=auth, json={
        "endpoint_id": endpoint["id"],
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 8}},
        "load": {"mode": "concurrency", "levels": [4], "requests_per_level": 40,
                 "warmup_requests": 4, "shards": 2}}).raise_for_status().json()
    deadline = time.monotonic() + float(os.environ["WAIT_S"])
    while job["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.5)
        job = http.get(f"/v1/jobs/{job['id']}", headers=auth).raise_for_status().json()
    print(json.dumps(job))
"""


def _worker_pid(worker: str) -> int:
    """The process id in a shard's `worker` ("host:pid")."""
    return int(worker.rsplit(":", 1)[1])


def test_api_workers_and_maintenance_on_separate_hosts_run_a_sharded_job() -> None:
    why = _why_no_namespaces()
    if why is not None:
        pytest.skip(why)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="multihost-", dir=ARTIFACTS))
    scratch = Path(tempfile.mkdtemp(prefix="infercost-multihost-", dir="/tmp"))
    scratch.chmod(0o755)
    nobody = pwd.getpwnam("nobody")
    data = HOSTS["data"]
    with network() as net:
        hosts = Hosts(net, logs, [])
        try:
            # -- the data host: a private Postgres and Redis on the link, and the endpoint.
            pgdata, sockets = scratch / "pgdata", scratch / "pgsock"
            for d in (pgdata, sockets):
                d.mkdir()
                os.chown(d, nobody.pw_uid, nobody.pw_gid)
            base_env = {k: v for k, v in os.environ.items() if not k.startswith("INFERCOST_")}
            base_env.pop("DATABASE_URL", None)
            base_env.pop("REDIS_URL", None)
            subprocess.run(
                [
                    "runuser",
                    "-u",
                    "nobody",
                    "--",
                    "initdb",
                    "-D",
                    str(pgdata),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--no-sync",
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
            with (pgdata / "pg_hba.conf").open("a") as hba:
                hba.write(f"host all all {SUBNET} trust\n")
            hosts.start(
                "data",
                "postgres",
                [
                    "postgres",
                    "-D",
                    str(pgdata),
                    "-h",
                    data,
                    "-p",
                    "5432",
                    "-k",
                    str(sockets),
                    "-c",
                    "fsync=off",
                    "-c",
                    "max_connections=200",
                ],
                base_env,
                user="nobody",
            )
            hosts.start(
                "data",
                "redis",
                [
                    "redis-server",
                    "--bind",
                    data,
                    "--port",
                    "6379",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--protected-mode",
                    "no",
                ],
                base_env,
            )
            cli = [sys.executable, "-c", "from cli import main; main()"]
            hosts.start(
                "data",
                "sim",
                [
                    *cli,
                    "sim",
                    "--host",
                    data,
                    "--port",
                    "9100",
                    "--mode",
                    "fixed",
                    "--ttft-ms",
                    "20",
                    "--itl-ms",
                    "5",
                    "--model",
                    "sim-model",
                ],
                base_env,
            )
            # -- what every infercost host shares: where the data is, the keys, the queue.
            admin = secrets.token_urlsafe(24)
            env = {
                **base_env,
                "DATABASE_URL": f"postgresql+asyncpg://postgres@{data}:5432/postgres",
                "REDIS_URL": f"redis://{data}:6379/0",
                "INFERCOST_ADMIN_TOKEN": admin,
                "INFERCOST_SECRET_KEYS": Fernet.generate_key().decode(),
                "INFERCOST_QUEUE": "benchmarks",
                "INFERCOST_OUTBOUND_ALLOW": SUBNET,
                "INFERCOST_PREFLIGHT_ON_REGISTER": "0",
                "INFERCOST_DATA_DIR": str(scratch / "data"),
            }
            _wait(
                hosts,
                "api",
                env,
                f"import socket; socket.create_connection(('{data}', 5432), 1)",
                "Postgres",
            )
            _wait(
                hosts,
                "api",
                env,
                f"import socket; socket.create_connection(('{data}', 6379), 1)",
                "Redis",
            )
            hosts.run("api", [*cli, "migrate"], env, timeout=300)
            hosts.start("api", "api", [*cli, "api", "--host", HOSTS["api"], "--port", "8000"], env)
            w1 = hosts.start("w1", "worker-1", [*cli, "worker"], env)
            w2 = hosts.start("w2", "worker-2", [*cli, "worker"], env)
            hosts.start("mnt", "maintenance", [*cli, "maintenance"], env)
            api = f"http://{HOSTS['api']}:8000"
            _wait(
                hosts,
                "client",
                env,
                f"import urllib.request; urllib.request.urlopen('{api}/health', timeout=2)",
                "the API",
            )
            for name in ("worker-1", "worker-2"):
                deadline = time.monotonic() + START_TIMEOUT_S
                while " ready." not in hosts.log(name):
                    hosts.alive()
                    assert time.monotonic() < deadline, f"{name} not ready; see {logs}"
                    time.sleep(0.5)

            # -- the client host: a sharded job, end to end over the link.
            client_env = {
                **env,
                "API": api,
                "ADMIN": admin,
                "SIM": f"http://{data}:9100/v1",
                "WAIT_S": "240",
            }
            out = hosts.run("client", [sys.executable, "-c", CLIENT], client_env, timeout=300)
            job = json.loads(out.strip().splitlines()[-1])
            assert job["status"] == "succeeded", (job["status"], job.get("error"), logs)
            (run,) = job["runs"]
            assert run["requests"]["succeeded"] == 40 and run["requests"]["failed"] == 0
            # The simulator's 20 ms to the first token is a floor no measurement goes under.
            assert run["ttft_ms"]["p50"] >= 20.0

            # Each shard ran on its own worker host: its process lives in that namespace.
            rows = hosts.run(
                "data",
                [
                    "runuser",
                    "-u",
                    "nobody",
                    "--",
                    "psql",
                    "-h",
                    str(sockets),
                    "-U",
                    "postgres",
                    "-At",
                    "-c",
                    f"SELECT shard, worker, status FROM run_shards "
                    f"WHERE run_id = '{run['id']}' ORDER BY shard",
                ],
                base_env,
            )
            shards = [line.split("|") for line in rows.strip().splitlines()]
            assert [(s[0], s[2]) for s in shards] == [("0", "succeeded"), ("1", "succeeded")], (
                shards
            )
            where = set()
            for _, worker, _ in shards:
                pid = _worker_pid(worker)
                where.add(_process_namespace_inode(pid))
            assert where == {
                _net_namespace_inode(net.ns("w1")),
                _net_namespace_inode(net.ns("w2")),
            }, (shards, w1.pid, w2.pid)
        finally:
            hosts.stop_all()
            shutil.rmtree(scratch, ignore_errors=True)
    # Nothing of the link is left on the machine.
    listed = _run("ip", "netns", "list").stdout
    assert net.tag not in listed


#: The infercost commands the test above starts, one host each (workers: two hosts).
STARTED = {"migrate", "api", "worker", "maintenance"}


def test_the_compose_file_starts_the_same_processes() -> None:
    import yaml

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    ours = {
        name: service["command"][0]
        for name, service in compose["services"].items()
        if service.get("image") == "infercost:local"
    }
    assert set(ours.values()) == STARTED, ours
    shared = compose["x-infercost"]["environment"]
    # What a host of each needs, as the test gives it.
    for variable in (
        "DATABASE_URL",
        "REDIS_URL",
        "INFERCOST_ADMIN_TOKEN",
        "INFERCOST_SECRET_KEYS",
        "INFERCOST_OUTBOUND_ALLOW",
        "INFERCOST_QUEUE",
    ):
        assert variable in shared, variable
