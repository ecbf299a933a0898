"""Fair share between teams, on the real queue and a real worker: one team's backlog does
not hold another team's job behind it (infercost/jobs/outbox.py: each job's message goes with
its place in its own team's line as its broker priority). The fault suite's processes are
used for their queue of their own: no other test's job can take the worker meanwhile."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from sim.process import SimProcess
from tests.conftest import TeamClient
from tests.faults.conftest import worker_process

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("fault_maintenance")]


def rate_job(endpoint_id: str) -> dict[str, Any]:
    """10 requests at 5/s: about 2 s of one worker."""
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
        "load": {"mode": "rate", "levels": [5], "requests_per_level": 10},
    }


@contextlib.asynccontextmanager
async def new_team(api: str, env: dict[str, str], name: str) -> AsyncIterator[TeamClient]:
    admin = {"Authorization": f"Bearer {env['INFERCOST_ADMIN_TOKEN']}"}
    async with httpx.AsyncClient(base_url=api, headers=admin, timeout=30) as client:
        team = await client.post("/v1/teams", json={"name": f"{name}-{uuid.uuid4().hex[:6]}"})
        team_id = team.json()["id"]
        key = (await client.post(f"/v1/teams/{team_id}/keys", json={"name": "k"})).json()
    headers = {"Authorization": f"Bearer {key['key']}"}
    async with httpx.AsyncClient(base_url=api, headers=headers, timeout=30) as http:
        yield TeamClient(http=http, team_id=team_id, key=key["key"])


def started(job: dict[str, Any]) -> datetime | None:
    return datetime.fromisoformat(job["started_at"]) if job["started_at"] else None


async def test_a_team_s_one_job_starts_before_another_team_s_second_of_twenty(
    fault_api: str, fault_env: dict[str, str], sim: SimProcess
) -> None:
    async with (
        new_team(fault_api, fault_env, "c") as team_c,
        new_team(fault_api, fault_env, "a") as team_a,
    ):
        c_endpoint = await team_c.create_endpoint(base_url=sim.openai_base_url)
        a_endpoint = await team_a.create_endpoint(base_url=sim.openai_base_url)
        # One worker process (the CLI's default concurrency): jobs run one at a time.
        with worker_process(fault_env, "fair-worker"):
            c_ids = []
            for _ in range(20):
                response = await team_c.submit(rate_job(c_endpoint["id"]))
                assert response.status_code == 202, response.text
                c_ids.append(response.json()["id"])
            response = await team_a.submit(rate_job(a_endpoint["id"]))
            assert response.status_code == 202, response.text
            a_id = response.json()["id"]

            # The queue block says so before it starts: ahead of A's job, at most C's first
            # (if the worker has not claimed it yet), never C's backlog.
            read = (await team_a.http.get(f"/v1/jobs/{a_id}")).json()
            if read["status"] == "queued":
                assert read["queue"]["position"] <= 2, read["queue"]
            last_c = (await team_c.http.get(f"/v1/jobs/{c_ids[-1]}")).json()
            if last_c["status"] == "queued":
                # C's last waits behind C's other queued jobs and A's one.
                assert last_c["queue"]["position"] >= 19, last_c["queue"]

            a_job = await team_a.wait_job(a_id, timeout=120)
            assert a_job["status"] == "succeeded", a_job["error"]
            c_jobs = [(await team_c.http.get(f"/v1/jobs/{i}")).json() for i in c_ids]
            # C's rest need not run for this test.
            for job in c_jobs:
                if job["status"] in ("queued", "running"):
                    await team_c.http.post(f"/v1/jobs/{job['id']}/cancel")

    a_start = started(a_job)
    assert a_start is not None
    c_started_before = [i for i, job in enumerate(c_jobs) if (s := started(job)) and s < a_start]
    print(f"\nfair share: team A's job started after {len(c_started_before)} of team C's 20")
    # A's job started while C had run (or was running) only its first: 19 still queued.
    assert c_started_before in ([], [0]), [started(j) for j in c_jobs]
    second = started(c_jobs[1])
    assert second is None or second > a_start
