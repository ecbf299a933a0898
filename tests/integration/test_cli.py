"""The client commands against a real API, worker and simulator, as a user runs them: submit a
job from YAML and watch it, list jobs, compare deployments, save the report; and the running
figures the worker publishes on the job read while a level runs."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import re
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from infercost.cli import main
from infercost.sim.process import SimProcess
from tests.conftest import Api, TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

# The simulator's ground truth (conftest `sim`): 50 ms to the first token, 10 ms per token.
SIM_TTFT_MS = 50.0

JOB_YAML = """\
endpoint: {name}
workload:
  input_tokens: {{mean: 32}}
  output_tokens: {{mean: 50}}
load:
  mode: concurrency
  levels: [1, 2]
  requests_per_level: 8
  warmup_requests: 1
"""


def cli(api: Api, token: str, *args: str) -> Result:
    """`infercost ARGS` in-process, against the test API, stdout not a terminal."""
    env = {"INFERCOST_URL": api.url, "INFERCOST_TOKEN": token}
    return CliRunner().invoke(main, list(args), env=env)


async def in_thread(api: Api, token: str, *args: str) -> Result:
    """The same, off the event loop (the command blocks for as long as it watches)."""
    return await asyncio.to_thread(cli, api, token, *args)


def figures_of(output: str, label: str) -> tuple[float, float]:
    """(TTFT p50 ms, output tok/s) from the final line of one level."""
    match = re.search(
        rf"^level \d \({label}\): succeeded, 8 measured requests \(0 failed\), "
        r"TTFT p50 ([\d.,]+) ms, ([\d.,]+) output tok/s$",
        output,
        re.MULTILINE,
    )
    assert match, output
    return float(match[1].replace(",", "")), float(match[2].replace(",", ""))


async def test_submit_watch_jobs_compare(
    api_server: Api, team: TeamClient, sim: SimProcess, tmp_path: Path
) -> None:
    endpoint = await team.create_endpoint(
        name=f"sim-{uuid.uuid4().hex[:6]}", base_url=sim.openai_base_url, engine="vllm"
    )
    job_file = tmp_path / "job.yaml"
    job_file.write_text(JOB_YAML.format(name=endpoint["name"]))

    result = await in_thread(api_server, team.key, "submit", str(job_file), "--watch")
    out = result.output
    assert result.exit_code == 0, out
    job_id = re.search(r"^submitted job ([0-9a-f-]{36})$", out, re.MULTILINE)
    assert job_id, out
    # Plain lines (not a terminal): the job's states, each level's progress while it ran
    # (9 requests with warm-up, about 0.55 s each at one user), then its final figures.
    assert f"job {job_id[1]}: running" in out
    assert re.search(r"^level 1 \(1 user\): [1-8]/9 requests, 0 errors, TTFT p50 ", out, re.M)
    for label, users in (("1 user", 1), ("2 users", 2)):
        ttft, throughput = figures_of(out, label)
        assert SIM_TTFT_MS <= ttft < SIM_TTFT_MS + 40
        # Each user streams about 50 tokens in 50 + 49 x 10 ms.
        assert 0.6 * users * 50 / 0.54 < throughput < 1.1 * users * 50 / 0.54
    assert re.search(rf"job {job_id[1]}: succeeded", out)
    summary = [line for line in out.splitlines() if "succeeded" in line and "│" in line]
    assert len(summary) == 2  # the summary table: one row per level

    state = (await team.http.get(f"/v1/jobs/{job_id[1]}")).json()
    assert state["status"] == "succeeded"
    assert [r["live"] for r in state["runs"]] == [None, None]  # cleared once each level ended

    listing = await in_thread(api_server, team.key, "jobs")
    assert listing.exit_code == 0, listing.output
    row = next(line for line in listing.output.splitlines() if job_id[1] in line)
    for cell in ("succeeded", endpoint["name"], "1, 2 users", "18/18 (100%)"):
        assert cell in row
    only_failed = await in_thread(api_server, team.key, "jobs", "--status", "failed")
    assert job_id[1] not in only_failed.output
    assert "0 of 0 jobs" in only_failed.output

    compared = await in_thread(
        api_server, team.key, "compare", "--model", "sim-model", "--hardware", "H200-SXM"
    )
    assert compared.exit_code == 0, compared.output
    rows = [line for line in compared.output.splitlines() if "sim-model" in line]
    assert len(rows) == 2
    assert all("vllm" in r and "H200-SXM" in r for r in rows)
    assert "2 users" in rows[1]
    one_level = await in_thread(
        api_server, team.key, "compare", "--model", "sim-model", "--level", "2", "--csv"
    )
    parsed = list(csv.DictReader(io.StringIO(one_level.output)))
    assert [(r["model"], r["hardware"], float(r["level"])) for r in parsed] == [
        ("sim-model", "H200-SXM", 2.0)
    ]
    assert SIM_TTFT_MS <= float(parsed[0]["ttft_p50_ms"]) < SIM_TTFT_MS + 40


async def test_report_is_saved(
    api_server: Api, team: TeamClient, sim: SimProcess, tmp_path: Path
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    job = (await team.submit(_small_job(endpoint["id"]))).json()
    assert (await team.wait_job(job["id"]))["status"] == "succeeded"
    target = tmp_path / "out" / "report.html"
    target.parent.mkdir()
    result = await in_thread(api_server, team.key, "report", job["id"], "-o", str(target))
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"saved {target} (")
    html = target.read_text()
    assert "<html" in html.lower()
    assert job["id"] in html


def _small_job(endpoint_id: str, **load: Any) -> dict[str, Any]:
    plan = {"mode": "concurrency", "levels": [1], "requests_per_level": 3, "warmup_requests": 0}
    plan.update(load)
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
        "load": plan,
    }


async def test_api_errors_are_one_clear_line(
    api_server: Api, team: TeamClient, sim: SimProcess, tmp_path: Path
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    bad_token = await in_thread(api_server, "ic_not-a-key", "jobs")
    assert bad_token.exit_code == 1
    assert bad_token.output.startswith("Error: GET /v1/jobs: ")
    assert "(HTTP 401); check --token / INFERCOST_TOKEN" in bad_token.output
    assert len(bad_token.output.splitlines()) == 1

    invalid = tmp_path / "invalid.yaml"
    invalid.write_text(
        f"endpoint_id: {endpoint['id']}\nworkload: {{input_tokens: {{mean: 8}}, "
        "output_tokens: {mean: 4}}\nload: {mode: concurrency, levels: [1.5]}\n"
    )
    refused = await in_thread(api_server, team.key, "submit", str(invalid))
    assert refused.exit_code == 1
    assert refused.output == (
        "Error: POST /v1/jobs: load.levels: 1.5 is not a whole number; a concurrency level is "
        "a number of users (use mode 'rate' for requests per second) (HTTP 422)\n"
    )

    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(invalid.read_text().replace(f"endpoint_id: {endpoint['id']}", "endpoint: x"))
    named = await in_thread(api_server, team.key, "submit", str(unknown))
    assert named.exit_code == 1
    assert (
        named.output == f"Error: no endpoint named 'x' in your team (yours: {endpoint['name']})\n"
    )

    missing = await in_thread(api_server, team.key, "report", str(uuid.uuid4()))
    assert missing.exit_code == 1
    assert "(HTTP 404)" in missing.output


async def test_submit_without_watch_prints_the_id_and_cancel_stops_it(
    api_server: Api, team: TeamClient, sim: SimProcess, tmp_path: Path
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    body = _small_job(endpoint["id"], requests_per_level=200)
    body["workload"]["output_tokens"] = {"mean": 100}
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(body))
    submitted = await in_thread(
        api_server, team.key, "submit", str(job_file), "--idempotency-key", "cli-cancel"
    )
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.strip()
    assert str(uuid.UUID(job_id)) == job_id
    again = await in_thread(
        api_server, team.key, "submit", str(job_file), "--idempotency-key", "cli-cancel"
    )
    assert again.output.strip() == job_id

    cancelled = await in_thread(api_server, team.key, "cancel", job_id)
    assert cancelled.exit_code == 0, cancelled.output
    assert cancelled.output == f"job {job_id}: cancelled; measured levels kept: 0\n"
    assert (await team.http.get(f"/v1/jobs/{job_id}")).json()["status"] == "cancelled"
    twice = await in_thread(api_server, team.key, "cancel", job_id)
    assert twice.exit_code == 1
    assert twice.output == f"Error: job {job_id} has already ended; nothing to cancel\n"


async def test_job_read_shows_live_figures_while_a_level_runs(
    team: TeamClient, sim: SimProcess
) -> None:
    # Two users, 12 requests of 100 tokens (about 1.04 s each): a level of about 6 s.
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    body = _small_job(endpoint["id"], levels=[2], requests_per_level=12, warmup_requests=2)
    body["workload"]["output_tokens"] = {"mean": 100}
    job = (await team.submit(body)).json()

    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = (await team.http.get(f"/v1/jobs/{job['id']}")).json()
        runs = state["runs"]
        if runs and runs[0]["status"] == "running" and runs[0]["live"]:
            seen.append(runs[0]["live"])
        if state["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.25)
    assert state["status"] == "succeeded", state["error"]
    assert state["runs"][0]["live"] is None

    assert len(seen) >= 3, seen
    assert all(s["planned"] == 14 and 0 <= s["done"] <= 14 and s["errors"] == 0 for s in seen)
    dones = [s["done"] for s in seen]
    assert dones == sorted(dones)
    elapsed = [s["elapsed_s"] for s in seen]
    assert elapsed == sorted(elapsed)
    measured = [s for s in seen if s["ttft_ms_p50"] is not None]
    assert measured, seen  # measured requests finished while the level still ran
    for s in measured:
        assert SIM_TTFT_MS <= s["ttft_ms_p50"] < SIM_TTFT_MS + 40
        # Two users at about 100 tokens per 1.04 s each.
        assert 100 < s["output_tokens_per_s"] < 220


async def test_ctrl_c_stops_watching_and_the_job_goes_on(
    api_server: Api, team: TeamClient, sim: SimProcess, tmp_path: Path
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    body = _small_job(endpoint["id"], requests_per_level=200)
    body["workload"]["output_tokens"] = {"mean": 100}
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(body))
    env = {**os.environ, "INFERCOST_URL": api_server.url, "INFERCOST_TOKEN": team.key}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from infercost.cli import main; main()",
        "submit",
        str(job_file),
        "--watch",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        assert proc.stdout is not None
        # Lines arrive as they happen (not held in a pipe's buffer until exit).
        first = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        job_id = first.removeprefix("submitted job ").strip()
        assert str(uuid.UUID(job_id)) == job_id, first
        while b"level 1 (1 user): started" not in await asyncio.wait_for(
            proc.stdout.readline(), 30
        ):
            pass
        proc.send_signal(signal.SIGINT)
        rest = (await asyncio.wait_for(proc.stdout.read(), 30)).decode()
        assert await asyncio.wait_for(proc.wait(), 10) == 130
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert rest.splitlines()[-1] == (
        f"stopped watching; job {job_id} keeps running. Cancel it with `infercost cancel {job_id}`."
    )
    assert (await team.http.get(f"/v1/jobs/{job_id}")).json()["status"] == "running"
    cancelled = await in_thread(api_server, team.key, "cancel", job_id)
    assert cancelled.output == f"job {job_id}: cancelled; measured levels kept: 0\n"
