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

from cli import main
from sim.process import SimProcess
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
    assert re.search(rf"job {job_id[1]}: succeeded", out)
    summary = [line for line in out.splitlines() if "succeeded" in line and "│" in line]
    assert len(summary) == 2  # the summary table: one row per level

    state = (await team.http.get(f"/v1/jobs/{job_id[1]}")).json()
    assert state["status"] == "succeeded"
    # Each level's line shows the API's figures, rounded; the simulator is never early.
    for run, label in zip(state["runs"], ("1 user", "2 users"), strict=True):
        ttft, throughput = figures_of(out, label)
        assert ttft == pytest.approx(run["ttft_ms"]["p50"], abs=0.051), (ttft, run["ttft_ms"])
        assert throughput == pytest.approx(run["output_tokens_per_s"], abs=0.51), run
        assert ttft >= SIM_TTFT_MS
    assert [r["live"] for r in state["runs"]] == [None, None]  # cleared once each level ended

    listing = await in_thread(api_server, team.key, "jobs")
    assert listing.exit_code == 0, listing.output
    row = next(line for line in listing.output.splitlines() if job_id[1] in line)
    for cell in ("succeeded", endpoint["name"], "1, 2 users", "18/18 (100%)"):
        assert cell in row
    only_failed = await in_thread(api_server, team.key, "jobs", "--status", "failed")
    assert job_id[1] not in only_failed.output
    assert "0 of 0 jobs" in only_failed.output

    # Client-bound runs kept (a loaded machine may flag a level): the table is under test here,
    # the filter in tests/api/test_comparisons.py.
    compared = await in_thread(
        api_server,
        team.key,
        "compare",
        "--model",
        "sim-model",
        "--hardware",
        "H200-SXM",
        "--include-client-bound",
    )
    assert compared.exit_code == 0, compared.output
    rows = [line for line in compared.output.splitlines() if "sim-model" in line]
    assert len(rows) == 2
    assert all("vllm" in r and "H200-SXM" in r for r in rows)
    assert "2 users" in rows[1]
    one_level = await in_thread(
        api_server,
        team.key,
        "compare",
        "--model",
        "sim-model",
        "--level",
        "2",
        "--csv",
        "--include-client-bound",
    )
    parsed = list(csv.DictReader(io.StringIO(one_level.output)))
    assert [(r["model"], r["hardware"], float(r["level"])) for r in parsed] == [
        ("sim-model", "H200-SXM", 2.0)
    ]
    # The level's own stored TTFT p50 (how far above the simulator's 50 ms it lies is the
    # machine's business), which is never below the simulator's.
    two_users = state["runs"][1]
    assert float(parsed[0]["ttft_p50_ms"]) == pytest.approx(two_users["ttft_ms"]["p50"], abs=1e-3)
    assert float(parsed[0]["ttft_p50_ms"]) >= SIM_TTFT_MS


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
    assert "(HTTP 401); the key came from INFERCOST_TOKEN: check it" in bad_token.output
    assert len(bad_token.output.splitlines()) == 1
    flagged = await in_thread(api_server, "ic_x", "jobs", "--token", "ic_not-a-key")
    assert "(HTTP 401); the key came from --token: check it" in flagged.output

    # Run elsewhere: the 401 says which key file it read, or where it looked for one.
    data_dir = tmp_path / "elsewhere"
    data_dir.mkdir()
    env = {"INFERCOST_URL": api_server.url, "INFERCOST_TOKEN": None}
    env["INFERCOST_DATA_DIR"] = str(data_dir)
    keyless = await asyncio.to_thread(CliRunner().invoke, main, ["jobs"], env=env)
    assert keyless.exit_code == 1
    assert "(HTTP 401); no key: --token and INFERCOST_TOKEN were not given and " in (keyless.output)
    assert f"{data_dir / 'default-team.key'} does not exist" in keyless.output
    (data_dir / "default-team.key").write_text("ic_stale-key\n")
    stale = await asyncio.to_thread(CliRunner().invoke, main, ["jobs"], env=env)
    assert stale.exit_code == 1
    assert f"the key came from the key file {data_dir / 'default-team.key'}" in stale.output

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
        # Never earlier or faster than the simulator: its first token at 50 ms, then two
        # users at most 100 tokens per 1.04 s each; how much slower is the machine's.
        assert s["ttft_ms_p50"] >= SIM_TTFT_MS, s
        assert 0 < s["output_tokens_per_s"] < 220, s


async def test_ctrl_c_stops_watching_and_the_job_goes_on(
    api_server: Api, team: TeamClient, sim: SimProcess, tmp_path: Path
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    body = _small_job(endpoint["id"], requests_per_level=200)
    body["workload"]["output_tokens"] = {"mean": 100}
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(body))
    env = {**os.environ, "INFERCOST_URL": api_server.url, "INFERCOST_TOKEN": team.key}
    # Ctrl-C raises KeyboardInterrupt as in a terminal: an xdist worker ignores SIGINT, and a
    # child inherits an ignored signal, so Python would install no handler of its own.
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from cli import main; main()",
        "submit",
        str(job_file),
        "--watch",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    job_id = ""
    try:
        assert proc.stdout is not None
        # Lines arrive as they happen (not held in a pipe's buffer until exit). The waits only
        # catch a hang: on a loaded machine the job may queue behind another for a while.
        first = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
        job_id = first.removeprefix("submitted job ").strip()
        assert str(uuid.UUID(job_id)) == job_id, first
        while b"level 1 (1 user): started" not in await asyncio.wait_for(
            proc.stdout.readline(), 120
        ):
            pass
        proc.send_signal(signal.SIGINT)
        rest = (await asyncio.wait_for(proc.stdout.read(), 30)).decode()
        assert await asyncio.wait_for(proc.wait(), 10) == 130
    except BaseException:
        if job_id:  # its 200 long requests must not hold up the next test's jobs
            await team.http.post(f"/v1/jobs/{job_id}/cancel")
        raise
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


# -- the whole path without curl: endpoints, prefixes, prices, datasets, runs, estimates, bench


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


async def test_endpoint_commands_show_what_the_api_holds(
    api_server: Api, team: TeamClient, sim: SimProcess
) -> None:
    name = f"cli-{uuid.uuid4().hex[:6]}"
    added = await in_thread(
        api_server,
        team.key,
        "endpoints",
        "add",
        name,
        sim.openai_base_url,
        "--model",
        "sim-model",
        "--engine",
        "vllm",
        "--hardware",
        "H200-SXM",
        "--usd-per-hour",
        "3.5",
        "--metrics-url",
        sim.metrics_url,
        "--json",
    )
    created = _json(added)
    endpoint_id = created["id"]
    assert created == (await team.http.get(f"/v1/endpoints/{endpoint_id}")).json()
    assert created["check"] is None  # the session's API does not check at registration

    checked = await in_thread(api_server, team.key, "endpoints", "check", name)
    assert checked.exit_code == 0, checked.output
    stored = (await team.http.get(f"/v1/endpoints/{endpoint_id}")).json()["check"]
    assert stored["ok"] is True
    lines = checked.output.splitlines()
    assert lines[0] == f"endpoint {name} ({endpoint_id})"
    assert lines[1].startswith("check passed at ")
    assert lines[1].endswith(f"ms: {stored['summary']}")
    for probe in stored["probes"]:
        row = next(line for line in lines if f" {probe['name']} " in line)
        assert (" ok " if probe["status"] == "pass" else " warn ") in row
        assert probe["detail"][:40] in checked.output

    listing = await in_thread(api_server, team.key, "endpoints", "list")
    row = next(line for line in listing.output.splitlines() if name in line)
    assert endpoint_id in row  # the whole id, never cut
    assert " ok " in row and "H200-SXM x 1" in row
    as_json = _json(await in_thread(api_server, team.key, "endpoints", "list", "--json"))
    assert as_json == (await team.http.get("/v1/endpoints")).json()["items"]

    # A unique prefix of the id names it as well as the name does.
    by_prefix = _json(
        await in_thread(api_server, team.key, "endpoints", "show", endpoint_id[:8], "--json")
    )
    assert by_prefix == (await team.http.get(f"/v1/endpoints/{endpoint_id}")).json()
    shown = await in_thread(api_server, team.key, "endpoints", "show", name)
    assert f"{endpoint_id}" in shown.output and "3.50 USD/h" in shown.output

    removed = await in_thread(api_server, team.key, "endpoints", "remove", endpoint_id[:8])
    assert removed.output == f"removed endpoint {name} ({endpoint_id})\n"
    assert (await team.http.get(f"/v1/endpoints/{endpoint_id}")).status_code == 404


async def test_a_failed_check_refuses_jobs_until_forced(
    api_server: Api, team: TeamClient, sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.base_url)  # no /v1
    checked = await in_thread(api_server, team.key, "endpoints", "check", endpoint["name"])
    assert checked.exit_code == 1
    assert "check FAILED at " in checked.output
    assert f"set base_url to {sim.openai_base_url}" in checked.output
    flags = ("--levels", "1", "--input-tokens", "8", "--output-tokens", "2", "--requests", "1")
    args = ("jobs", "submit", "--endpoint", endpoint["name"], *flags)
    refused = await in_thread(api_server, team.key, *args)
    assert refused.exit_code == 1
    assert refused.output.startswith(
        f"Error: POST /v1/jobs: endpoint '{endpoint['name']}' failed its last check at "
    )
    assert "set base_url to" in refused.output and "(HTTP 409)" in refused.output
    # The API's hint in the command's own words: its flag, not the body field.
    assert "or pass --force to submit it anyway" in refused.output
    assert '"force"' not in refused.output
    forced = await in_thread(api_server, team.key, *args, "--force")
    assert forced.exit_code == 0, forced.output
    job_id = forced.stdout.strip()  # the id alone on stdout; the plan's warnings on stderr
    assert forced.stderr.startswith("warning: measured requests per level (1 user: 1)")
    job = (await team.http.get(f"/v1/jobs/{job_id}")).json()
    assert job["load"]["levels"] == [1] and job["load"]["requests_per_level"] == 1
    assert job["workload"]["input_tokens"]["mean"] == 8
    # The prefix names the job whether or not the worker already ended it (the bare URL
    # fails fast).
    cancelled = await in_thread(api_server, team.key, "jobs", "cancel", job_id[:8])
    assert cancelled.output in (
        f"job {job_id}: cancelled; measured levels kept: 0\n",
        f"Error: job {job_id} has already ended; nothing to cancel\n",
    )


async def test_a_job_that_did_not_succeed_exits_non_zero(
    api_server: Api, team: TeamClient, sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.base_url)  # no /v1: every request 404s
    flags = ("--levels", "1", "--input-tokens", "8", "--output-tokens", "2", "--requests", "2")
    args = ("jobs", "submit", "--endpoint", endpoint["name"], *flags)
    watched = await in_thread(api_server, team.key, *args, "--watch")
    assert watched.exit_code == 1, watched.output
    job_id = re.search(r"^submitted job ([0-9a-f-]{36})$", watched.output, re.MULTILINE)
    assert job_id, watched.output
    state = (await team.http.get(f"/v1/jobs/{job_id[1]}")).json()
    assert state["status"] == "failed"
    assert f"Error: job {job_id[1]} failed: " in watched.output
    # Watching a job that already ended exits with its outcome too; showing it is a read.
    again = await in_thread(api_server, team.key, "jobs", "watch", job_id[1][:8], "--json")
    assert again.exit_code == 1
    shown = await in_thread(api_server, team.key, "jobs", "show", job_id[1][:8])
    assert shown.exit_code == 0, shown.output
    assert f"job {job_id[1]}: failed" in shown.output


async def test_hardware_add_registers_a_cpu_machine(api_server: Api, team: TeamClient) -> None:
    name = f"xeon-{uuid.uuid4().hex[:6]}"
    spec = ("--vendor", "intel", "--memory-gb", "512", "--memory-bandwidth-gbps", "560")
    added = await in_thread(
        api_server,
        team.key,
        "hardware",
        "add",
        name,
        "--kind",
        "cpu",
        *spec,
        "--bf16-tflops",
        "9.5",
        "--power-w",
        "700",
        "--json",
    )
    created = _json(added)
    assert (created["kind"], created["bf16_tflops"], created["public"]) == ("cpu", 9.5, False)
    listing = await in_thread(api_server, team.key, "hardware", "list")
    row = next(line for line in listing.output.splitlines() if name in line)
    assert " cpu " in row and " intel " in row and "your team" in row
    assert any(" H200-SXM " in line and " public" in line for line in listing.output.splitlines())
    endpoint = ("endpoints", "add", f"cpu-{name}", "http://192.0.2.7:8080/v1", "--model", "m")
    typo = await in_thread(api_server, team.key, *endpoint, "--hardware", name[:-1] + "x")
    assert typo.exit_code == 1
    assert f"--hardware: unknown hardware '{name[:-1]}x': did you mean '{name}'?" in typo.output
    assert "`infercost hardware list` lists the catalog" in typo.output
    assert "with `infercost hardware add`" in typo.output
    registered = await in_thread(api_server, team.key, *endpoint, "--hardware", name, "--json")
    assert _json(registered)["hardware"] == name


async def test_a_plan_that_cannot_be_adequate_warns_or_is_refused(
    api_server: Api, team: TeamClient
) -> None:
    endpoint = await team.create_endpoint()  # nothing listens: the job fails fast
    flags = ("--levels", "64", "--input-tokens", "8", "--output-tokens", "2", "--requests", "10")
    args = ("jobs", "submit", "--endpoint", endpoint["name"], *flags)
    refused = await in_thread(api_server, team.key, *args, "--strict")
    assert refused.exit_code == 1
    assert "this plan cannot give adequate evidence (strict: true refuses it)" in refused.output
    assert (await team.http.get("/v1/jobs")).json()["total"] == 0
    accepted = await in_thread(api_server, team.key, *args)
    assert accepted.exit_code == 0, accepted.output
    job_id = (await team.http.get("/v1/jobs")).json()["items"][0]["id"]
    # The id on stdout; each warning on stderr, in the command's own flags.
    assert accepted.stdout == f"{job_id}\n"
    lines = accepted.stderr.splitlines()
    assert lines[0].startswith("warning: measured requests per level (64 users: 10) are under")
    assert "raise --requests (or --duration-s; a burst: its level)" in lines[0]
    assert lines[1].startswith("warning: 64 users with 10 measured requests each")
    assert "raise --requests above the level" in lines[1]
    await team.http.post(f"/v1/jobs/{job_id}/cancel")


async def test_prefix_ids_work_in_every_job_and_run_command(
    api_server: Api, team: TeamClient, sim: SimProcess, tmp_path: Path
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    job = await team.run_job(_small_job(endpoint["id"]))
    job_id, run_id = job["id"], job["runs"][0]["id"]

    shown = _json(await in_thread(api_server, team.key, "jobs", "show", job_id[:6], "--json"))
    assert shown == (await team.http.get(f"/v1/jobs/{job_id}")).json()
    table_view = await in_thread(api_server, team.key, "jobs", "show", job_id[:6])
    assert run_id in table_view.output  # the run ids, whole, to copy into `runs`
    listing = await in_thread(api_server, team.key, "jobs", "list")
    assert job_id in listing.output  # never cut to '8b58da70-87…'
    assert any(
        job_id == j["id"]
        for j in _json(await in_thread(api_server, team.key, "jobs", "--json"))["items"]
    )

    run = _json(await in_thread(api_server, team.key, "runs", "show", run_id[:6], "--json"))
    assert run == (await team.http.get(f"/v1/runs/{run_id}")).json()
    summary = await in_thread(api_server, team.key, "runs", "show", run_id[:6])
    assert summary.output.startswith(f"run {run_id} of job {job_id}: 1 user, succeeded, 3 ")
    ttft = run["ttft_ms"]
    ttft_row = next(line for line in summary.output.splitlines() if " TTFT " in line)
    assert f"{ttft['p50']:,.1f}" in ttft_row and f"{ttft['p95']:,.1f}" in ttft_row

    target = tmp_path / "samples.csv"
    saved = await in_thread(api_server, team.key, "runs", "samples", run_id[:6], "-o", str(target))
    assert saved.output == f"saved {target} (3 requests)\n"
    expected = await team.http.get(f"/v1/runs/{run_id}/requests", headers={"Accept": "text/csv"})
    assert target.read_text() == expected.text
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert len(rows) == len(await team.samples(run_id)) == 3

    report_file = tmp_path / "r.html"
    saved_report = await in_thread(
        api_server, team.key, "report", job_id[:6], "-o", str(report_file), "--json"
    )
    assert _json(saved_report)["job_id"] == job_id
    assert job_id in report_file.read_text()

    missing = await in_thread(api_server, team.key, "runs", "show", "ffffffff")
    assert missing.exit_code == 1
    assert "no run id starts with 'ffffffff'" in missing.output


async def test_prices_datasets_compare_and_estimate(
    api_server: Api, team: TeamClient, sim: SimProcess, tmp_path: Path
) -> None:
    provider = f"cloud-{uuid.uuid4().hex[:6]}"
    price = _json(
        await in_thread(
            api_server,
            team.key,
            "prices",
            "add",
            "--provider",
            provider,
            "--hardware",
            "H200-SXM",
            "--usd-per-gpu-hour",
            "2.75",
            "--json",
        )
    )
    book = (await team.http.get("/v1/prices", params={"provider": provider})).json()["items"]
    assert book == [price]
    listed = await in_thread(api_server, team.key, "prices", "list", "--provider", provider)
    row = next(line for line in listed.output.splitlines() if provider in line)
    assert price["id"] in row and "2.75" in row and "on-demand" in row

    data = tmp_path / "prompts.jsonl"
    data.write_text('{"prompt": "hello there"}\n{"prompt": "a second prompt", "max_tokens": 5}\n')
    dataset = _json(
        await in_thread(
            api_server, team.key, "datasets", "upload", str(data), "--name", "two", "--json"
        )
    )
    assert dataset["items"] == 2 and dataset["name"] == "two"
    assert dataset == (await team.http.get(f"/v1/datasets/{dataset['id']}")).json()
    datasets = await in_thread(api_server, team.key, "datasets", "list")
    assert dataset["id"] in datasets.output

    compared = _json(await in_thread(api_server, team.key, "compare", "--json"))
    assert compared == (await team.http.get("/v1/comparisons")).json()

    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    measured = _small_job(endpoint["id"], levels=[1, 2], requests_per_level=8)
    measured["workload"] = {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 50}}
    await team.run_job(measured)
    body = {
        "model": "sim-model",
        "traffic": {"requests_per_s": 2, "input_tokens": 32, "output_tokens": 50},
        "slo": {"ttft_ms": {"p95": 500}},
    }
    args = ["estimate", "--model", "sim-model", "--rps", "2", "--input-tokens", "32"]
    args += ["--output-tokens", "50", "--slo-ttft-p95", "500"]
    estimated_json = await in_thread(api_server, team.key, *args, "--json")
    estimated = json.loads(estimated_json.output)
    # An estimate with no candidate exits 4 (the evidence here may fall short of the SLO).
    assert estimated_json.exit_code == (0 if estimated["candidates"] else 4)
    assert estimated == (await team.http.post("/v1/estimates", json=body)).json()
    plain = await in_thread(api_server, team.key, *args)
    assert plain.exit_code == (0 if estimated["candidates"] else 4), plain.output
    assert plain.output.startswith("sim-model at 2.00 req/s, 32 in / 50 out tokens\n")
    for candidate in estimated["candidates"]:
        row = next(ln for ln in plain.output.splitlines() if candidate["deployment"]["name"] in ln)
        assert f"{candidate['per_million_output_tokens_usd']:,.2f}" in row
        assert f"{candidate['usd_per_hour']:,.2f}" in row
    if not estimated["candidates"]:
        assert f"no estimate: {estimated['reason']}" in plain.output

    # No level measured meets a 1 ms TTFT (the simulator takes 50): no answer, said so, and
    # exit 4 for scripts.
    unmeasured = (
        "estimate",
        "--model",
        "sim-model",
        "--rps",
        "2",
        "--input-tokens",
        "32",
        "--output-tokens",
        "50",
        "--slo-ttft-p95",
        "1",
    )
    nothing = await in_thread(api_server, team.key, *unmeasured)
    assert nothing.exit_code == 4, nothing.output
    assert "\nno estimate: " in nothing.output
    nothing_json = await in_thread(api_server, team.key, *unmeasured, "--json")
    assert nothing_json.exit_code == 4
    assert json.loads(nothing_json.output)["candidates"] == []


async def test_bench_registers_checks_runs_and_answers(
    api_server: Api, team: TeamClient, sim: SimProcess
) -> None:
    port = sim.base_url.rsplit(":", 1)[1]
    name = f"bench-127.0.0.1-{port}-sim-model"
    args = (
        "bench",
        sim.openai_base_url,
        "--model",
        "sim-model",
        "--levels",
        "1,2",
        "--input-tokens",
        "16",
        "--output-tokens",
        "10",
        "--requests",
        "4",
        "--warmup",
        "0",
        "--usd-per-hour",
        "3.5",
    )
    result = await in_thread(api_server, team.key, *args)
    out = result.output
    assert result.exit_code == 0, out
    endpoints = (await team.http.get("/v1/endpoints")).json()["items"]
    [endpoint] = [e for e in endpoints if e["name"] == name]
    assert out.startswith(f"endpoint {name} ({endpoint['id']})\ncheck passed at ")
    assert endpoint["engine"] == "vllm"  # what the check recognised (vLLM's metric names)
    job_id = re.search(r"^submitted job ([0-9a-f-]{36})$", out, re.MULTILINE)
    assert job_id, out
    job = (await team.http.get(f"/v1/jobs/{job_id[1]}")).json()
    assert job["status"] == "succeeded"
    assert job["load"]["levels"] == [1, 2] and job["load"]["requests_per_level"] == 4
    rows = [line for line in out.splitlines() if "succeeded" in line and "│" in line]
    assert len(rows) == 2
    for row, run in zip(rows, job["runs"], strict=True):
        cost = run["cost"]["per_million_output_tokens_usd"]
        assert f"{run['ttft_ms']['p50']:,.1f}" in row
        assert f"{run['output_tokens_per_s']:,.1f}" in row
        assert f"{cost:,.2f}" in row
        assert run["ttft_ms"]["p50"] >= SIM_TTFT_MS  # the simulator is never early

    # Again: the same endpoint, reused; --json prints the finished job.
    again = _json(await in_thread(api_server, team.key, *args, "--json"))
    assert again["status"] == "succeeded" and again["endpoint_id"] == endpoint["id"]
    names = [e["name"] for e in (await team.http.get("/v1/endpoints")).json()["items"]]
    assert names.count(name) == 1
