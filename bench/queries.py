"""How fast are comparisons over a big history? Prints figures; asserts nothing.

`.venv/bin/python bench/queries.py [--samples 10000000] [--runs 20000] [--keep] [--against DIR]`

1. Creates a scratch database on the Postgres named by --pg (default INFERCOST_TEST_PG, else
   postgresql://postgres@127.0.0.1:5432/postgres) and builds it by running the migrations.
2. Starts `infercost api` against it, creates two teams and ~150 endpoints over HTTP (eight
   models on seven GPU types and three engines at 1 to 8 GPUs, tagged env:prod or env:dev,
   and a few hosted APIs priced per token).
3. Loads synthetic but realistic history with COPY: jobs of six concurrency levels each,
   their runs (throughput rising and per-user speed falling with load; full `stats`
   distributions and telemetry as the worker stores them; prices at measurement time; three
   workloads per model; some SLO failures, a few client-bound runs; finished over 180 days;
   90% of runs in the measured team) and --samples raw request samples spread over the runs
   (their per-chunk arrays cut to four entries, and the foreign-key check of each sample
   skipped, to keep the load short). Then VACUUM ANALYZE.
4. Times typical GET /v1/comparisons queries and the frontier through the real API over
   HTTP, one request at a time, and prints p50, p95 and max per query.
5. Drops the database unless --keep.

`--status` measures GET /v1/status instead: 300 watched deployments (an endpoint each, with
a schedule), each measured 8 times a day for --status-days (default 365) days by one-level
scheduled jobs, loaded by COPY (run-level columns only; the COPY's statement triggers fill
the board's summaries, infercost.status.models, as the worker's writes do), then GET
/v1/status over each window, JSON and CSV, timed as above.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import numpy as np
from cryptography.fernet import Fernet
from scratch import add_database_options, scratch_database

from infercost.figures.metrics import PERCENTILE_COLUMNS, STAT_KEYS, percentile_columns
from infercost.jobs.deployments import DEPLOYMENT_OF_ENDPOINT_SQL

ROOT = Path(__file__).resolve().parents[1]
MODELS = {  # name: params (B)
    "llama-3.1-8b": 8,
    "llama-3.1-70b": 70,
    "qwen2.5-7b": 7,
    "qwen2.5-72b": 72,
    "mistral-7b": 7,
    "mixtral-8x7b": 47,
    "gemma-2-27b": 27,
    "deepseek-v2-lite": 16,
}
HARDWARE = {  # name: (memory bandwidth GB/s, USD per GPU-hour)
    "H200-SXM": (4800, 3.5),
    "H100-SXM": (3350, 2.2),
    "A100-SXM-80GB": (2039, 1.6),
    "B200": (8000, 5.5),
    "L40S": (864, 1.0),
    "L4": (300, 0.5),
    "MI300X": (5300, 3.0),
}
ENGINES = ("vllm", "sglang", "tgi")
LEVELS = (1, 2, 4, 8, 16, 32)
WORKLOADS = ("chat", "rag", "batch")
DAYS = 180
NOW = datetime(2026, 12, 2, tzinfo=UTC)
DIST_SHAPE = {"mean": 1.05, "std": 0.2, "min": 0.6, "p50": 1.0, "p90": 1.4, "p95": 1.6,
              "p99": 2.1, "p999": 2.8, "max": 3.2}  # fmt: skip
RUN_COLUMNS = (
    "id", "team_id", "job_id", "endpoint_id", "deployment_id", "level_index", "level", "mode",
    "status",
    "created_at", "started_at", "finished_at", "usd_per_hour", "usd_per_million_input_tokens",
    "usd_per_million_output_tokens", "requests_total", "requests_succeeded", "requests_failed",
    "duration_s", "count_source", "prompt_lengths", "output_tokens_per_s", "input_tokens_per_s",
    "total_tokens_per_s", "requests_per_s", "mean_concurrency", "error_rate", "goodput_rps",
    "goodput_output_tokens_per_s", "slo_attainment", "slo_passed", "client_bound",
    "stats", "telemetry", "workload_fingerprint", *PERCENTILE_COLUMNS,
)  # fmt: skip
SAMPLE_COLUMNS = (
    "run_id", "seq", "warmup", "t_sched", "t_send", "ttfb_ms", "ttft_ms", "tpot_ms", "e2e_ms",
    "n_in", "n_out", "count_source", "status", "chunk_times_ms",
)  # fmt: skip


def dist(p50: float, count: int) -> dict[str, float | int | None]:
    """A distribution shaped like measured latencies, scaled to its median."""
    out: dict[str, float | int | None] = dict.fromkeys(STAT_KEYS)
    out.update({k: p50 * v for k, v in DIST_SHAPE.items()}, count=count)
    return out


def fingerprint(model: str, workload: str) -> str:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"{model}/{workload}").hex[:16]


class Api:
    """`infercost api` on a free port against the scratch database: this checkout's, or with
    `root` another's (`like`: an API whose admin token and secret keys it shares, so the
    same team keys open both)."""

    def __init__(self, database_url: str, root: Path = ROOT, like: Api | None = None) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.admin = like.admin if like else secrets.token_urlsafe(24)
        self.secret = like.secret if like else Fernet.generate_key().decode()
        self.data_dir = tempfile.mkdtemp(prefix="infercost-bench-")
        env = {k: v for k, v in os.environ.items() if not k.startswith("INFERCOST_")}
        env.update(
            DATABASE_URL=database_url,
            REDIS_URL=os.environ.get("INFERCOST_TEST_REDIS", "redis://127.0.0.1:6379/0"),
            INFERCOST_ADMIN_TOKEN=self.admin,
            INFERCOST_SECRET_KEYS=self.secret,
            INFERCOST_DATA_DIR=self.data_dir,
            # The benchmark times queries back to back with one key: no per-key rate limit.
            INFERCOST_RATE_LIMIT_PER_MINUTE="0",
        )
        self.log = open(Path(self.data_dir) / "api.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from cli import main; main()", "api",
             "--port", str(self.port)],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=root,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"infercost api exited; see {self.data_dir}/api.log")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise SystemExit("infercost api did not start in 60 s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


async def make_team(client: httpx.AsyncClient, admin: str, name: str) -> tuple[str, str]:
    headers = {"Authorization": f"Bearer {admin}"}
    team = (await client.post("/v1/teams", json={"name": name}, headers=headers)).json()
    key = (
        await client.post(f"/v1/teams/{team['id']}/keys", json={"name": "bench"}, headers=headers)
    ).json()
    return team["id"], key["key"]


async def make_endpoints(
    client: httpx.AsyncClient, key: str, rng: random.Random
) -> list[dict[str, Any]]:
    """~150 deployments, plus hosted APIs; each returned with what the generator needs."""
    headers = {"Authorization": f"Bearer {key}"}
    combos = {
        (m, h, e, g)
        for m in MODELS
        for h in HARDWARE
        for e in ENGINES
        for g in (1, 2, 4, 8)
        if rng.random() < 0.22
    }
    endpoints = []
    for i, (model, hw, engine, gpus) in enumerate(sorted(combos)):
        body = {
            "name": f"ep-{i}", "base_url": f"http://10.0.{i // 250}.{i % 250}:8000/v1",
            "model": model, "engine": engine, "hardware": hw, "gpu_count": gpus,
            "usd_per_hour": HARDWARE[hw][1] * gpus,
            "tags": {"env": rng.choice(["prod", "dev"]), "region": rng.choice(["eu", "us"])},
        }  # fmt: skip
        r = await client.post("/v1/endpoints", json=body, headers=headers)
        assert r.status_code == 201, r.text
        endpoints.append({**body, "id": r.json()["id"], "hosted": False})
    for i, model in enumerate(list(MODELS)[:4]):
        body = {
            "name": f"hosted-{i}", "base_url": "https://api.example.com/v1", "model": model,
            "usd_per_million_input_tokens": 0.2 * (i + 1), "usd_per_million_output_tokens": 0.8 * (i + 1),
        }  # fmt: skip
        r = await client.post("/v1/endpoints", json=body, headers=headers)
        assert r.status_code == 201, r.text
        endpoints.append({**body, "id": r.json()["id"], "hosted": True, "gpu_count": 1,
                          "hardware": "H100-SXM", "engine": None})  # fmt: skip
    return endpoints


def run_rows(
    endpoints: list[dict[str, Any]], team: str, runs: int, rng: random.Random
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[uuid.UUID, int, float]]]:
    """(jobs, runs, per-run sample plans) for `runs` runs of six-level jobs."""
    jobs, rows, plans = [], [], []
    for _ in range(math.ceil(runs / len(LEVELS))):
        ep = rng.choice(endpoints)
        params = MODELS[ep["model"]]
        bw = HARDWARE[ep["hardware"]][0]
        gpus = ep["gpu_count"]
        # One user's decode speed: a fraction of the bandwidth bound, with engine noise.
        single = min(250.0, bw * gpus * 0.6 / (params * 2)) * rng.uniform(0.85, 1.1)
        half = 12 * gpus * rng.uniform(0.7, 1.3)
        workload = rng.choice(WORKLOADS)
        ttft0 = {"chat": 30.0, "rag": 120.0, "batch": 60.0}[workload] * params / 8 / gpus
        out_len = {"chat": 256, "rag": 128, "batch": 512}[workload]
        in_len = {"chat": 512, "rag": 4096, "batch": 1024}[workload]
        finished = NOW - timedelta(seconds=rng.uniform(0, DAYS * 86400))
        job_id = uuid.uuid4()
        jobs.append((job_id, uuid.UUID(team), uuid.UUID(ep["id"]), "succeeded", "{}",
                     '{"mode": "concurrency"}', 6, 6, finished - timedelta(hours=1), finished,
                     fingerprint(ep["model"], workload)))  # fmt: skip
        for index, level in enumerate(LEVELS):
            per_user = single / (1 + level / half) * rng.uniform(0.95, 1.05)
            out = level * per_user * out_len / (out_len + ttft0 * per_user / 1000)
            rps = out / out_len
            ttft = ttft0 * (1 + level / half) * rng.uniform(0.9, 1.2)
            tpot = 1000 / per_user
            e2e = ttft + tpot * (out_len - 1)
            passed = ttft * 1.6 < 500 and tpot * 1.6 < 50
            bound = rng.random() < 0.03
            duration = 120.0
            n = int(rps * duration) or 1
            usd = None if ep["hosted"] else ep["usd_per_hour"]
            stats = {
                "ttft_ms": dist(ttft, n), "ttfo_ms": dist(ttft, n), "tpot_ms": dist(tpot, n),
                "itl_ms": dist(tpot * 0.98, n * out_len), "e2e_ms": dist(e2e, n),
                "queue_delay_ms": dist(12.0 if bound else 0.4, n),
                "per_user_tokens_per_s": dist(per_user, n), "errors": {},
                "client": {"queue_delay_p99_ms": 14.0 if bound else 1.0, "cpu_util": 0.3,
                           "concurrency_held": not bound},
            }  # fmt: skip
            telemetry = None if ep["hosted"] else {
                "gpu_util_mean": min(1.0, 0.2 + level / 40), "gpu_util_p95": min(1.0, 0.3 + level / 35),
                "power_w_mean": 300 + 10 * level, "kv_cache_usage_mean": min(1.0, level / 40),
                "errors": [],
            }  # fmt: skip
            started = finished - timedelta(seconds=duration * (len(LEVELS) - index))
            run_id = uuid.uuid4()
            rows.append((
                run_id, uuid.UUID(team), job_id, uuid.UUID(ep["id"]), ep["deployment_id"], index,
                float(level),
                "concurrency", "succeeded", started, started, started + timedelta(seconds=duration),
                usd, ep.get("usd_per_million_input_tokens"), ep.get("usd_per_million_output_tokens"),
                n, n, 0, duration, "usage", "exact", out, out * in_len / out_len,
                out * (1 + in_len / out_len), rps, level * 0.97, 0.0, rps if passed else 0.0,
                out if passed else 0.0, 1.0 if passed else 0.4, passed, bound,
                json.dumps(stats), None if telemetry is None else json.dumps(telemetry),
                fingerprint(ep["model"], workload), *percentile_columns(stats).values(),
            ))  # fmt: skip
            plans.append((run_id, out_len, ttft))
            if len(rows) == runs:
                return jobs, rows, plans
    return jobs, rows, plans


def sample_records(
    plans: list[tuple[uuid.UUID, int, float]], samples: int, rng: np.random.Generator
) -> Iterator[list[tuple[Any, ...]]]:
    """Batches of sample rows, `samples` in all, spread evenly over the runs."""
    per_run, extra = divmod(samples, len(plans))
    batch: list[tuple[Any, ...]] = []
    for i, (run_id, out_len, ttft_p50) in enumerate(plans):
        n = per_run + (1 if i < extra else 0)
        t_sched = np.cumsum(rng.exponential(0.2, n))
        t_send = t_sched + rng.exponential(0.0005, n)
        ttft = ttft_p50 * rng.lognormal(0.0, 0.25, n)
        tpot = rng.normal(20.0, 2.0, n).clip(1.0)
        e2e = ttft + tpot * (out_len - 1)
        n_in = rng.integers(256, 2048, n)
        chunks = [0.0, 10.0, 20.0, 30.0]
        batch.extend(
            (run_id, s, s < 8, a, b, c * 0.9, c, d, e, int(f), out_len, "usage", 200, chunks)
            for s, a, b, c, d, e, f in zip(
                range(n), t_sched.tolist(), t_send.tolist(), ttft.tolist(), tpot.tolist(),
                e2e.tolist(), n_in.tolist(), strict=True,
            )
        )  # fmt: skip
        if len(batch) >= 200_000:
            yield batch
            batch = []
    if batch:
        yield batch


async def load(database: str, api: Api, args: argparse.Namespace) -> dict[str, Any]:
    """Teams and endpoints over HTTP, then jobs, runs and samples by COPY."""
    rng = random.Random(args.seed)
    async with httpx.AsyncClient(base_url=api.url, timeout=60) as client:
        team, key = await make_team(client, api.admin, "bench-main")
        other, other_key = await make_team(client, api.admin, "bench-other")
        endpoints = await make_endpoints(client, key, rng)
        other_endpoints = await make_endpoints(client, other_key, rng)
    conn = await asyncpg.connect(database)
    try:
        # Each endpoint's deployment, as the worker records it when a run starts.
        for ep in endpoints + other_endpoints:
            ep["deployment_id"] = await conn.fetchval(
                DEPLOYMENT_OF_ENDPOINT_SQL,
                uuid.UUID(ep["id"]),
            )
        mine = round(args.runs * 0.9)
        jobs, runs, plans = run_rows(endpoints, team, mine, rng)
        jobs2, runs2, plans2 = run_rows(other_endpoints, other, args.runs - mine, rng)
        started = time.perf_counter()
        await conn.copy_records_to_table(
            "jobs", records=jobs + jobs2,
            columns=["id", "team_id", "endpoint_id", "status", "workload", "load",
                     "progress_done", "progress_total", "created_at", "finished_at",
                     "workload_fingerprint"],
        )  # fmt: skip
        await conn.copy_records_to_table("runs", records=runs + runs2, columns=RUN_COLUMNS)
        loaded_runs = time.perf_counter() - started
        print(f"# loaded {len(runs) + len(runs2):,} runs in {loaded_runs:.1f} s", flush=True)
        started = time.perf_counter()
        done = 0
        # Every sample's run was just written, so the per-row foreign-key check is skipped
        # (a superuser setting, for this scratch database's load only).
        await conn.execute("SET session_replication_role = replica")
        for batch in sample_records(plans + plans2, args.samples, np.random.default_rng(1)):
            await conn.copy_records_to_table(
                "request_samples", records=batch, columns=SAMPLE_COLUMNS
            )
            done += len(batch)
            if done % 1_000_000 < len(batch):
                print(f"#   {done:,} samples, {time.perf_counter() - started:.0f} s", flush=True)
        print(f"# loaded {done:,} samples in {time.perf_counter() - started:.1f} s", flush=True)
        await conn.execute("RESET session_replication_role")
        await conn.execute("VACUUM ANALYZE runs")
        await conn.execute("ANALYZE")
        size = await conn.fetchval("SELECT pg_size_pretty(pg_database_size(current_database()))")
        print(f"# database size {size}", flush=True)
    finally:
        await conn.close()
    models = sorted({e["model"] for e in endpoints})
    busiest = max(models, key=lambda m: sum(1 for e in endpoints if e["model"] == m))
    kinds = [e["hardware"] for e in endpoints if e["model"] == busiest and not e["hosted"]]
    return {
        "key": key,
        "model": busiest,
        "hardware": max(sorted(set(kinds)), key=kinds.count),
        "fingerprint": fingerprint(busiest, "chat"),
    }


async def measure(
    api: Api, facts: dict[str, Any], iterations: int, other: Api | None = None
) -> None:
    """Each query `iterations` times after two warm-ups; latency seen by an HTTP client.
    With `other` (another checkout's API on the same database), each request goes to both in
    turn, and each query's line is followed by the other's and the ratio of their medians."""
    model, fp = facts["model"], facts["fingerprint"]
    since = (NOW - timedelta(days=30)).isoformat()
    queries: list[tuple[str, str, dict[str, Any], dict[str, str]]] = [
        ("everything, a row per deployment and level", "/v1/comparisons", {}, {}),
        ("one model, sort=-output_tokens_per_s", "/v1/comparisons",
         {"model": model, "sort": "-output_tokens_per_s"}, {}),
        ("model + hardware + slo_passed, group_by=deployment", "/v1/comparisons",
         {"model": model, "hardware": facts["hardware"], "slo_passed": "true", "group_by": "deployment"}, {}),
        ("tag=env:prod, last 30 days, 4 figures, by cost", "/v1/comparisons",
         {"tag": "env:prod", "since": since, "sort": "cost_per_million_output_tokens_usd",
          "figures": "ttft_p95,tpot_p50,output_tokens_per_s_per_gpu,cost_per_million_output_tokens_usd"}, {}),
        ("everything, group_by=deployment, sort per GPU", "/v1/comparisons",
         {"group_by": "deployment", "sort": "-output_tokens_per_s_per_gpu", "limit": 500}, {}),
        ("one model + workload, aggregate=latest", "/v1/comparisons",
         {"model": model, "workload_fingerprint": fp, "aggregate": "latest"}, {}),
        ("one model as CSV (every row)", "/v1/comparisons", {"model": model},
         {"Accept": "text/csv"}),
        ("frontier: one model, one workload", "/v1/comparisons/frontier",
         {"model": model, "workload_fingerprint": fp, "include_dominated": "true"}, {}),
    ]  # fmt: skip
    queries.insert(
        0, ("baseline: GET /v1/hardware (auth, one small query)", "/v1/hardware", {}, {})
    )
    headers = {"Authorization": f"Bearer {facts['key']}"}
    print(f"\n# {iterations} requests per query, one at a time (model {model}, workload {fp})")
    print(f"{'query':52} {'rows':>6} {'total':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    worst = 0.0
    apis = [api] if other is None else [api, other]
    clients = [httpx.AsyncClient(base_url=a.url, headers=headers, timeout=60) for a in apis]
    try:
        for name, path, params, extra in queries:
            each: list[list[float]] = [[] for _ in apis]
            for i in range(iterations + 2):
                for timings, client in zip(each, clients, strict=True):
                    started = time.perf_counter()
                    r = await client.get(path, params=params, headers=extra)
                    elapsed = (time.perf_counter() - started) * 1000
                    assert r.status_code == 200, r.text
                    if i >= 2:
                        timings.append(elapsed)
            timings = each[0]
            if extra:
                rows, total = r.text.count("\n") - 1, int(r.headers["x-total-count"])
            else:
                body = r.json()
                if isinstance(body, list):
                    rows = total = len(body)
                else:
                    rows = len(body.get("items", body.get("frontier", [])))
                    total = body.get("total", rows + len(body.get("dominated") or []))
            q = statistics.quantiles(timings, n=100, method="inclusive")
            if path != "/v1/hardware":
                worst = max(worst, q[94])
            print(
                f"{name:52} {rows:>6} {total:>6} {q[49]:>8.1f} {q[94]:>8.1f} {max(timings):>8.1f}"
            )
            if other is not None:
                o = statistics.quantiles(each[1], n=100, method="inclusive")
                print(
                    f"{'  --against':52} {'':>6} {'':>6} {o[49]:>8.1f} {o[94]:>8.1f} "
                    f"{max(each[1]):>8.1f}   this / against p50 {q[49] / o[49]:.2f}"
                )
    finally:
        for client in clients:
            await client.aclose()
    print(f"\n# worst p95 of the comparison queries {worst:.1f} ms (target: under 100 ms)")


STATUS_DEPLOYMENTS = 300
STATUS_RUN_COLUMNS = (
    "id", "team_id", "job_id", "endpoint_id", "deployment_id", "level_index", "level", "mode",
    "status", "created_at", "started_at", "finished_at", "usd_per_hour", "requests_total",
    "requests_succeeded", "requests_failed", "duration_s", "output_tokens_per_s",
    "goodput_output_tokens_per_s", "ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms",
    "client_bound", "workload_fingerprint", "adequacy", "change_verdict",
    "per_user_tokens_per_s_p50",
)  # fmt: skip


async def load_status(database: str, api: Api, args: argparse.Namespace) -> str:
    """300 endpoints over HTTP, a schedule each, and their scheduled history by COPY: 8 runs a
    day for --status-days days up to now, a few failed jobs and regressions. Returns the key."""
    rng = random.Random(args.seed)
    combos = sorted(
        (m, h, e, g) for m in MODELS for h in HARDWARE for e in ENGINES for g in (1, 2, 4, 8)
    )
    picked = rng.sample(combos, STATUS_DEPLOYMENTS)
    async with httpx.AsyncClient(base_url=api.url, timeout=60) as client:
        team, key = await make_team(client, api.admin, "bench-status")
        headers = {"Authorization": f"Bearer {key}"}
        endpoints = []
        for i, (model, hw, engine, gpus) in enumerate(picked):
            body = {
                "name": f"watched-{i}", "base_url": f"http://10.1.{i // 250}.{i % 250}:8000/v1",
                "model": model, "engine": engine, "hardware": hw, "gpu_count": gpus,
                "usd_per_hour": HARDWARE[hw][1] * gpus,
            }  # fmt: skip
            r = await client.post("/v1/endpoints", json=body, headers=headers)
            assert r.status_code == 201, r.text
            endpoints.append({**body, "id": uuid.UUID(r.json()["id"])})
    now = datetime.now(UTC)
    conn = await asyncpg.connect(database)
    try:
        team_id = uuid.UUID(team)
        jobs: list[tuple[Any, ...]] = []
        runs: list[tuple[Any, ...]] = []
        for ep in endpoints:
            ep["deployment_id"] = await conn.fetchval(DEPLOYMENT_OF_ENDPOINT_SQL, ep["id"])
            schedule = await conn.fetchval(
                "INSERT INTO schedules (id, team_id, endpoint_id, template, interval_s, timezone,"
                " created_at) VALUES (gen_random_uuid(), $1, $2, '{}', 10800, 'UTC', now())"
                " RETURNING id",
                team_id,
                ep["id"],
            )
            fp = fingerprint(ep["model"], "chat")
            params = MODELS[ep["model"]]
            per_user = min(
                250.0, HARDWARE[ep["hardware"]][0] * ep["gpu_count"] * 0.6 / (params * 2)
            )
            ttft0 = 30.0 * params / 8 / ep["gpu_count"]
            for slot in range(args.status_days * 8):
                finished = now - timedelta(hours=3 * slot, seconds=rng.uniform(0, 600))
                job_id = uuid.uuid4()
                failed = rng.random() < 0.01
                jobs.append((job_id, team_id, ep["id"], "failed" if failed else "succeeded",
                             "{}", '{"mode": "concurrency"}', 1, 1, finished - timedelta(minutes=3),
                             finished, fp, schedule))  # fmt: skip
                if failed:
                    continue
                ttft = ttft0 * rng.uniform(0.9, 1.2)
                tpot = 1000 / per_user * rng.uniform(0.95, 1.05)
                out = 8 * per_user * rng.uniform(0.95, 1.05)
                errors = 1 if rng.random() < 0.05 else 0
                runs.append((
                    uuid.uuid4(), team_id, job_id, ep["id"], ep["deployment_id"], 0, 8.0,
                    "concurrency", "succeeded", finished, finished - timedelta(seconds=120),
                    finished, ep["usd_per_hour"], 200, 200 - errors, errors, 120.0, out,
                    out * rng.uniform(0.7, 1.0), ttft, ttft * 1.6, tpot, tpot * 1.6,
                    rng.random() < 0.01, fp, '{"ok": true, "reasons": []}',
                    "regression" if rng.random() < 0.02 else None,
                    1000 / tpot,
                ))  # fmt: skip
        started = time.perf_counter()
        await conn.copy_records_to_table(
            "jobs", records=jobs,
            columns=["id", "team_id", "endpoint_id", "status", "workload", "load",
                     "progress_done", "progress_total", "created_at", "finished_at",
                     "workload_fingerprint", "schedule_id"],
        )  # fmt: skip
        await conn.copy_records_to_table("runs", records=runs, columns=STATUS_RUN_COLUMNS)
        print(f"# loaded {len(jobs):,} scheduled jobs and {len(runs):,} runs of "
              f"{len(endpoints)} deployments in {time.perf_counter() - started:.1f} s",
              flush=True)  # fmt: skip
        await conn.execute("VACUUM ANALYZE runs")
        await conn.execute("VACUUM ANALYZE jobs")
        await conn.execute("ANALYZE")
        size = await conn.fetchval("SELECT pg_size_pretty(pg_database_size(current_database()))")
        print(f"# database size {size}", flush=True)
    finally:
        await conn.close()
    return key


def cpu_ms(pid: int) -> float:
    """CPU time (user + system) the process `pid` has used so far, in ms (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


async def measure_status(api: Api, key: str, iterations: int) -> None:
    """GET /v1/status `iterations` times per window after two warm-ups, one at a time, and
    the API process's CPU time per request: on a machine other work loads, wall times
    measure the queue for the cores as much as the request; CPU time does not."""
    queries: list[tuple[str, dict[str, Any], dict[str, str]]] = [
        ("status, window=24h", {"window": "24h"}, {}),
        ("status, window=72h (default)", {}, {}),
        ("status, window=72h, sort=-ttft_p50_ms", {"sort": "-ttft_p50_ms"}, {}),
        ("status, window=72h as CSV", {}, {"Accept": "text/csv"}),
        ("status, window=7d", {"window": "7d"}, {}),
        ("status, window=30d", {"window": "30d"}, {}),
    ]
    print(f"\n# {iterations} requests per query, one at a time")
    print(f"{'query':52} {'rows':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'API CPU':>8}")
    async with httpx.AsyncClient(
        base_url=api.url, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as client:
        for name, params, extra in queries:
            timings = []
            for i in range(iterations + 2):
                if i == 2:
                    cpu = cpu_ms(api.proc.pid)
                started = time.perf_counter()
                r = await client.get("/v1/status", params=params, headers=extra)
                elapsed = (time.perf_counter() - started) * 1000
                assert r.status_code == 200, r.text
                if i >= 2:
                    timings.append(elapsed)
            per_request = (cpu_ms(api.proc.pid) - cpu) / iterations
            rows = r.text.count("\n") - 1 if extra else len(r.json()["rows"])
            q = statistics.quantiles(timings, n=100, method="inclusive")
            print(f"{name:52} {rows:>6} {q[49]:>8.1f} {q[94]:>8.1f} {max(timings):>8.1f} "
                  f"{per_request:>8.1f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_options(parser)
    parser.add_argument("--samples", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--status", action="store_true", help="measure GET /v1/status instead")
    parser.add_argument("--status-days", type=int, default=365)
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout (a git worktree of an older commit): its API on the same "
        "database answers every query in turn with this one's",
    )
    args = parser.parse_args()
    with scratch_database(args.pg, keep=args.keep) as db:
        print(f"# bench/queries.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: --runs {args.runs} "
              f"--samples {args.samples} on {os.cpu_count()} CPUs, database {db.name}",
              flush=True)  # fmt: skip
        api = Api(db.url)
        if args.status:
            try:
                key = asyncio.run(load_status(db.dsn, api, args))
                asyncio.run(measure_status(api, key, args.iterations))
            finally:
                api.stop()
            return
        other = None
        try:
            facts = asyncio.run(load(db.dsn, api, args))
            if args.against is not None:
                other = Api(db.url, root=args.against.resolve(), like=api)
            asyncio.run(measure(api, facts, args.iterations, other))
        finally:
            api.stop()
            if other is not None:
                other.stop()


if __name__ == "__main__":
    main()
