"""Retention (INFERCOST_SAMPLE_RETENTION_DAYS) on the maintenance process: the raw request and
telemetry samples of runs finished longer ago are deleted, their summaries stay, the run says
when (`samples_pruned_at`), and every read of samples says so instead of failing."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import asyncpg
import pytest

from sim.process import SimProcess
from tests.conftest import TeamClient, running_maintenance

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


def _body(endpoint_id: str) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
        "load": {"mode": "concurrency", "levels": [1, 2], "requests_per_level": 6},
    }


async def _samples(db: asyncpg.Connection, run_ids: list[str]) -> int:
    return int(
        await db.fetchval(
            "SELECT count(*) FROM request_samples WHERE run_id = ANY($1::uuid[])",
            [uuid.UUID(r) for r in run_ids],
        )
    )


async def test_old_samples_are_pruned_and_reads_say_so(
    team: TeamClient, sim: SimProcess, db: asyncpg.Connection, service_env: dict[str, str]
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    old = await team.run_job(_body(endpoint["id"]))
    recent = await team.run_job(_body(endpoint["id"]))
    old_runs = [r["id"] for r in old["runs"]]
    recent_runs = [r["id"] for r in recent["runs"]]
    before = {r: (await team.http.get(f"/v1/runs/{r}")).json() for r in old_runs}
    assert all(b["samples_pruned_at"] is None for b in before.values())
    assert await _samples(db, old_runs) == 12
    # The old job's runs finished ten days ago; the recent one's now.
    await db.execute(
        "UPDATE runs SET finished_at = now() - interval '10 days' WHERE job_id = $1",
        uuid.UUID(old["id"]),
    )

    env = {
        **service_env,
        "INFERCOST_SAMPLE_RETENTION_DAYS": "7",
        "INFERCOST_RETENTION_EVERY_S": "0.5",
    }
    with running_maintenance(env, "maintenance-retention"):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not await _samples(db, old_runs):
                break
            await asyncio.sleep(0.3)
    assert await _samples(db, old_runs) == 0
    # Runs within the retention keep every sample.
    assert await _samples(db, recent_runs) == 12

    for run_id in old_runs:
        after = (await team.http.get(f"/v1/runs/{run_id}")).json()
        assert after["samples_pruned_at"] is not None
        # Every figure of the summary stays as it was (finished_at was moved back above).
        changed = {"samples_pruned_at", "finished_at"}
        assert {k: v for k, v in after.items() if k not in changed} == {
            k: v for k, v in before[run_id].items() if k not in changed
        }
        page = (await team.http.get(f"/v1/runs/{run_id}/requests")).json()
        assert page["items"] == [] and page["next_after"] is None
        assert page["samples_pruned_at"] == after["samples_pruned_at"]
        assert "deleted" in page["note"] and "INFERCOST_SAMPLE_RETENTION_DAYS" in page["note"]
        csv = await team.http.get(f"/v1/runs/{run_id}/requests", headers={"Accept": "text/csv"})
        assert csv.status_code == 410
        assert csv.headers["content-type"].startswith("application/problem+json")
        assert f"GET /v1/runs/{run_id}" in csv.json()["detail"]
        # Definitions are recomputed from samples: none, and the run says why.
        defined = await team.http.get(f"/v1/runs/{run_id}", params={"definitions": "vllm"})
        assert defined.status_code == 200
        assert defined.json()["definitions"] is None
        assert defined.json()["samples_pruned_at"] == after["samples_pruned_at"]
    recent_run = (await team.http.get(f"/v1/runs/{recent_runs[0]}")).json()
    assert recent_run["samples_pruned_at"] is None

    # The export carries the runs, each saying its samples were pruned, and no sample lines.
    export = await team.http.get(
        f"/v1/jobs/{old['id']}/export", headers={"Accept-Encoding": "identity"}
    )
    assert export.status_code == 200
    lines = [json.loads(line) for line in export.text.splitlines()]
    assert [line["kind"] for line in lines] == ["job", "run", "run"]
    assert all(line["samples_pruned_at"] for line in lines[1:])
    # The report still draws its tables and charts; the latency histogram says it has no data.
    report = await team.http.get(f"/v1/jobs/{old['id']}/report")
    assert report.status_code == 200 and "<table" in report.text
    chart = await team.http.get(f"/v1/jobs/{old['id']}/charts/ttft-distribution.svg")
    assert chart.status_code == 200 and "<svg" in chart.text
    # The job and its figures stay in every read.
    job = (await team.http.get(f"/v1/jobs/{old['id']}")).json()
    assert [r["output_tokens_per_s"] for r in job["runs"]] == [
        before[r]["output_tokens_per_s"] for r in old_runs
    ]
