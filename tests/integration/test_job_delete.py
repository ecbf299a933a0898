"""Deleting a job (DELETE /v1/jobs/{id}, `infercost jobs delete`): refused while it is queued
or running, and once it has ended gone from every read: the job, its runs and raw samples,
comparisons, history, the status board, exports and reports, and from the database."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from infercost.net.tls import tls_context
from sim.process import SimProcess
from tests.conftest import Api, TeamClient
from tests.integration.test_cli import in_thread

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


def _body(endpoint_id: str, requests: int = 6) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
        "load": {
            "mode": "concurrency",
            "levels": [1],
            "requests_per_level": requests,
            "warmup_requests": 0,
        },
    }


async def _rows(db: asyncpg.Connection, job_id: str) -> dict[str, int]:
    """What the database holds of a job: its row, runs, samples and telemetry."""
    job = uuid.UUID(job_id)
    return {
        "jobs": await db.fetchval("SELECT count(*) FROM jobs WHERE id = $1", job),
        "runs": await db.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", job),
        "samples": await db.fetchval(
            "SELECT count(*) FROM request_samples s JOIN runs r ON r.id = s.run_id"
            " WHERE r.job_id = $1",
            job,
        ),
    }


async def test_a_deleted_job_leaves_every_read(
    team: TeamClient, sim: SimProcess, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    kept = await team.run_job(_body(endpoint["id"]))
    gone = await team.run_job(_body(endpoint["id"]))
    gone_runs = [r["id"] for r in gone["runs"]]
    assert await _rows(db, gone["id"]) == {"jobs": 1, "runs": 1, "samples": 6}

    async def comparison_runs() -> set[str]:
        # Client-bound runs too: on a busy machine a one-user level may be flagged so.
        page = (
            await team.http.get("/v1/comparisons", params={"include_client_bound": "true"})
        ).json()
        return {run for row in page["items"] for run in row["run_ids"]}

    async def history_runs() -> set[str]:
        history = (await team.http.get(f"/v1/endpoints/{endpoint['id']}/history")).json()
        return {p["run_id"] for s in history["series"] for p in s["points"]}

    async def board_jobs() -> set[str]:
        board = (await team.http.get("/v1/status", params={"all": "true"})).json()
        return {r["latest"]["job_id"] for r in board["rows"] if r["latest"]}

    # Before: both jobs are read everywhere (the board shows the newest run of the row).
    assert set(gone_runs) <= await comparison_runs()
    assert set(gone_runs) <= await history_runs()
    assert await board_jobs() == {gone["id"]}

    share = await team.http.post("/v1/shares", json={"page": "report", "job_ids": [gone["id"]]})
    assert share.status_code == 201, share.text
    async with httpx.AsyncClient(verify=tls_context(), timeout=60) as browser:
        assert (await browser.get(share.json()["url"])).status_code == 200

    response = await team.http.delete(f"/v1/jobs/{gone['id']}")
    assert response.status_code == 204, response.text
    # A share link to its report finds nothing now, and says so (no error page of the server).
    async with httpx.AsyncClient(verify=tls_context(), timeout=60) as browser:
        shared = await browser.get(share.json()["url"])
    assert shared.status_code == 404

    for path in (
        f"/v1/jobs/{gone['id']}",
        f"/v1/jobs/{gone['id']}/runs",
        f"/v1/jobs/{gone['id']}/export",
        f"/v1/jobs/{gone['id']}/report",
        f"/v1/runs/{gone_runs[0]}",
        f"/v1/runs/{gone_runs[0]}/requests",
    ):
        assert (await team.http.get(path)).status_code == 404, path
    listed = (await team.http.get("/v1/jobs")).json()
    assert [j["id"] for j in listed["items"]] == [kept["id"]]
    assert not set(gone_runs) & await comparison_runs()
    assert await history_runs() == {r["id"] for r in kept["runs"]}
    # The board falls back to the job left.
    assert await board_jobs() == {kept["id"]}
    compare = await team.http.get(
        "/v1/reports/compare", params=[("job_id", kept["id"]), ("job_id", gone["id"])]
    )
    assert compare.status_code == 404
    assert await _rows(db, gone["id"]) == {"jobs": 0, "runs": 0, "samples": 0}
    assert (await _rows(db, kept["id"]))["samples"] == 6

    # Deleting again, or another team's job, is a 404.
    assert (await team.http.delete(f"/v1/jobs/{gone['id']}")).status_code == 404


async def test_a_job_still_running_is_refused_until_cancelled(
    team: TeamClient, new_team: Any, sim: SimProcess, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    submitted = await team.submit(
        {**_body(endpoint["id"]), "load": {"mode": "concurrency", "levels": [1], "duration_s": 60}}
    )
    job_id = submitted.json()["id"]
    refused = await team.http.delete(f"/v1/jobs/{job_id}")
    assert refused.status_code == 409
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert f"/v1/jobs/{job_id}/cancel" in refused.json()["detail"]
    assert "cancel it first" in refused.json()["detail"]
    assert (await _rows(db, job_id))["jobs"] == 1

    # Another team cannot delete it (nor learn it exists).
    other = await new_team()
    assert (await other.http.delete(f"/v1/jobs/{job_id}")).status_code == 404

    assert (await team.http.post(f"/v1/jobs/{job_id}/cancel")).status_code == 200
    for _ in range(50):
        response = await team.http.delete(f"/v1/jobs/{job_id}")
        if response.status_code != 409:
            break
        await asyncio.sleep(0.2)
    assert response.status_code == 204, response.text
    assert await _rows(db, job_id) == {"jobs": 0, "runs": 0, "samples": 0}


async def test_cli_deletes_by_prefix_and_says_to_cancel_first(
    api_server: Api, team: TeamClient, sim: SimProcess, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    done = await team.run_job(_body(endpoint["id"]))
    running = (
        await team.submit(
            {
                **_body(endpoint["id"]),
                "load": {"mode": "concurrency", "levels": [1], "duration_s": 60},
            }
        )
    ).json()

    refused = await in_thread(api_server, team.key, "jobs", "delete", running["id"])
    assert refused.exit_code == 1
    assert f"`infercost jobs cancel {running['id']}`" in refused.output

    deleted = await in_thread(api_server, team.key, "jobs", "delete", done["id"][:8])
    assert deleted.exit_code == 0, deleted.output
    assert deleted.output.strip() == f"deleted job {done['id']} with its runs and samples"
    assert await _rows(db, done["id"]) == {"jobs": 0, "runs": 0, "samples": 0}
    await team.http.post(f"/v1/jobs/{running['id']}/cancel")
