"""A structured run beside its plain twin (docs/figures.md, "Structured output against plain"):
the same lengths measured without response_format on the same endpoint and level, against a
simulator told to make JSON answers slower (--structured-itl-ms), with the real API, worker
and command line.

What the test holds the figures against: the simulator's gaps (TPOT of a JSON answer over a
plain one is STRUCTURED_ITL_MS / ITL_MS) and the two runs' own summaries (the twin's figures
are the plain run's, the ratios are divided here from the two summaries).
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from click.testing import CliRunner, Result

from cli import main
from infercost.reports.numbers import number
from sim.config import SimConfig
from sim.process import SimProcess, sim_process
from tests.conftest import Api, TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

TTFT_MS, ITL_MS, STRUCTURED_ITL_MS = 30.0, 4.0, 12.0
IN, OUT, REQUESTS = 32, 48, 16


@pytest.fixture(scope="module")
def guided() -> Iterator[SimProcess]:
    """Fixed mode; a JSON answer's tokens three times as far apart as a plain answer's."""
    config = SimConfig(port=0, ttft_ms=TTFT_MS, itl_ms=ITL_MS, structured_itl_ms=STRUCTURED_ITL_MS)
    with sim_process(config) as sim:
        yield sim


def body(endpoint: dict[str, Any], levels: list[int], features: list[str]) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint["id"],
        "workload": {
            "input_tokens": {"mean": IN},
            "output_tokens": {"mean": OUT},
            "features": features,
        },
        "load": {"mode": "concurrency", "levels": levels, "requests_per_level": REQUESTS},
    }


def cli(api: Api, token: str, *args: str) -> Result:
    """`infercost ARGS` in-process against the test API."""
    env = {"INFERCOST_URL": api.url, "INFERCOST_TOKEN": token}
    return CliRunner().invoke(main, list(args), env=env)


def command_in(reason: str) -> list[str]:
    """The `infercost ...` command a plain_reason quotes, as argv."""
    match = re.search(r"`(infercost [^`]+)`", reason)
    assert match, reason
    return shlex.split(match[1])


async def test_a_structured_run_shows_its_plain_twin_and_what_guided_decoding_costs(
    api_server: Api, team: TeamClient, guided: SimProcess, db: asyncpg.Connection
) -> None:
    name = f"guided-{uuid.uuid4().hex[:6]}"
    endpoint = await team.create_endpoint(name=name, base_url=guided.openai_base_url)

    # Structured first, at two levels: nothing plain measured yet, so no twin, and the
    # reason says which job to run (this level, these lengths, no --feature structured).
    done = await team.run_job(body(endpoint, [1, 4], ["structured"]))
    one, four = done["runs"]
    for run, level in ((one, 1), (four, 4)):
        block = run["structured"]
        assert (block["answers"], block["valid"], block["valid_share"]) == (REQUESTS,) * 2 + (1.0,)
        assert block["plain"] is None
        assert command_in(block["plain_reason"]) == [
            "infercost", "jobs", "submit", "--endpoint", name, "--mode", "concurrency",
            "--levels", str(level), "--requests", str(REQUESTS),
            "--input-tokens", str(IN), "--output-tokens", str(OUT),
        ]  # fmt: skip
        assert f"endpoint '{name}'" in block["plain_reason"]

    # Run what the level-4 reason says, as a user would, with the command line.
    argv = command_in(four["structured"]["plain_reason"])[1:]
    result = await asyncio.to_thread(cli, api_server, team.key, *argv, "--watch")
    assert result.exit_code == 0, result.output
    submitted = re.search(r"^submitted job ([0-9a-f-]{36})$", result.output, re.MULTILINE)
    assert submitted, result.output
    plain_job = (await team.http.get(f"/v1/jobs/{submitted[1]}")).json()
    assert plain_job["workload"]["features"] == []
    (plain,) = plain_job["runs"]
    assert plain["structured"] is None  # a plain run has no block, and so no twin

    # The structured job read again: level 4 now has its twin, level 1 still none.
    job = (await team.http.get(f"/v1/jobs/{done['id']}")).json()
    one, four = job["runs"]
    assert one["structured"]["plain"] is None
    assert "--levels 1" in one["structured"]["plain_reason"]
    twin = four["structured"]["plain"]
    assert four["structured"]["plain_reason"] is None
    assert (twin["run_id"], twin["job_id"]) == (plain["id"], plain_job["id"])
    assert twin["finished_at"] == plain["finished_at"]
    # Its figures are the plain run's own summary figures
    for stat in ("p50", "p95"):
        for metric in ("ttft", "tpot", "e2e"):
            assert twin[f"{metric}_{stat}_ms"] == plain[f"{metric}_ms"][stat]
    assert twin["output_tokens_per_s"] == plain["output_tokens_per_s"]
    # Ratios: the structured run's summary figure over the plain run's
    ratios = twin["ratios"]
    for metric in ("ttft", "tpot", "e2e"):
        expected = four[f"{metric}_ms"]["p50"] / plain[f"{metric}_ms"]["p50"]
        assert ratios[f"{metric}_p50"] == pytest.approx(expected, rel=1e-12)
    expected = four["output_tokens_per_s"] / plain["output_tokens_per_s"]
    assert ratios["output_tokens_per_s"] == pytest.approx(expected, rel=1e-12)
    # What the simulator was told: JSON tokens 12 ms apart, plain ones 4 ms: TPOT x3
    assert ratios["tpot_p50"] == pytest.approx(STRUCTURED_ITL_MS / ITL_MS, rel=0.1)
    assert ratios["output_tokens_per_s"] < 1.0 < ratios["e2e_p50"]

    # The run read alone and the job's runs list say the same
    alone = (await team.http.get(f"/v1/runs/{four['id']}")).json()
    assert alone["structured"] == four["structured"]
    listed = (await team.http.get(f"/v1/jobs/{done['id']}/runs")).json()
    assert [r["structured"] for r in listed] == [one["structured"], four["structured"]]

    # `infercost runs show` and the report put them side by side
    shown = await asyncio.to_thread(cli, api_server, team.key, "runs", "show", four["id"])
    assert shown.exit_code == 0, shown.output
    assert plain["id"] in shown.output
    assert f"(x{ratios['tpot_p50']:.2f})" in shown.output
    shown = await asyncio.to_thread(cli, api_server, team.key, "runs", "show", one["id"])
    assert "infercost jobs submit" in shown.output
    report = await team.http.get(f"/v1/jobs/{done['id']}/report")
    assert report.status_code == 200
    section = report.text.split('id="structured"', 1)[1].split("<h2", 1)[0]
    assert plain["id"] in section
    assert f"&times;{number(ratios['tpot_p50'])}" in section
    assert "--levels 1" in section

    # A plain run the load generator could not keep up with is no twin, and the reason names
    # it (as a busy machine's run would be flagged: its client block says why)
    await db.execute("UPDATE runs SET client_bound = true WHERE id = $1", uuid.UUID(plain["id"]))
    four = (await team.http.get(f"/v1/runs/{four['id']}")).json()
    assert four["structured"]["plain"] is None
    reason = four["structured"]["plain_reason"]
    assert f"the plain run {plain['id']} (job {plain_job['id']})" in reason
    assert "was client-bound" in reason
    assert command_in(reason)[1:] == argv  # the same job to measure it again


async def test_another_endpoint_or_other_lengths_are_no_twin(
    team: TeamClient, guided: SimProcess
) -> None:
    """The twin is of the same endpoint and the same lengths: a plain run elsewhere, or of
    other lengths, leaves the structured run without one."""
    endpoint = await team.create_endpoint(base_url=guided.openai_base_url)
    other = await team.create_endpoint(base_url=guided.openai_base_url)
    await team.run_job(body(other, [4], []))
    longer = body(endpoint, [4], [])
    longer["workload"]["output_tokens"] = {"mean": OUT + 1}
    await team.run_job(longer)
    done = await team.run_job(body(endpoint, [4], ["structured"]))
    (run,) = done["runs"]
    assert run["structured"]["plain"] is None
    assert "--output-tokens 48" in run["structured"]["plain_reason"]

    # ... nor a plain run of the same endpoint before it was changed (two GPUs now: another
    # deployment, which its runs measure)
    same = await team.run_job(body(other, [4], ["structured"]))
    assert same["runs"][0]["structured"]["plain"] is not None  # its twin, as measured
    changed = await team.http.patch(f"/v1/endpoints/{other['id']}", json={"gpu_count": 2})
    assert changed.status_code == 200, changed.text
    after = await team.run_job(body(other, [4], ["structured"]))
    assert after["runs"][0]["structured"]["plain"] is None


async def test_a_dataset_job_finds_its_twin_by_the_datasets_content(
    team: TeamClient, guided: SimProcess
) -> None:
    """Prompts from a dataset: the twin replays the same dataset without structured (its
    fingerprint holds the dataset's content hash, as every dataset job's does)."""
    rows = [{"prompt": f"item {i} says hello", "max_tokens": 24} for i in range(4)]
    response = await team.http.post(
        "/v1/datasets",
        content="\n".join(json.dumps(row) for row in rows).encode(),
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert response.status_code == 201, response.text
    endpoint = await team.create_endpoint(base_url=guided.openai_base_url)

    def replay(features: list[str]) -> dict[str, Any]:
        return {
            "endpoint_id": endpoint["id"],
            "workload": {"dataset_id": response.json()["id"], "features": features},
            "load": {"mode": "concurrency", "levels": [2], "requests_per_level": 8},
        }

    plain_job = await team.run_job(replay([]))
    done = await team.run_job(replay(["structured"]))
    (run,) = done["runs"]
    (plain,) = plain_job["runs"]
    twin = run["structured"]["plain"]
    assert twin is not None, run["structured"]["plain_reason"]
    assert twin["run_id"] == plain["id"]
    assert twin["tpot_p50_ms"] == plain["tpot_ms"]["p50"]
    assert twin["ratios"]["tpot_p50"] == pytest.approx(STRUCTURED_ITL_MS / ITL_MS, rel=0.1)
