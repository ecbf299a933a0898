"""One reason per failure: when Postgres stays away longer than the store's retry budget
(INFERCOST_STORE_RETRY_S, 8 s here) the level's samples are lost, and the job and the run
that was being stored say the same thing about why, whoever records it first (the runner
once the database is back, or the sweep after the heartbeat bound). A first such loss is
measured again like any worker's death (the sweep hands the job over), so the job here has
already had one: this loss fails it."""

from __future__ import annotations

import time
import uuid
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from sim.process import SimProcess
from tests.conftest import TeamClient
from tests.faults.conftest import PgProxy, worker_process

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("fault_maintenance")]

#: Longer than the retry budget the fault environment sets (8 s).
DOWN_S = 12.0


def job_body(endpoint_id: str) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 16}},
        "load": {"mode": "concurrency", "levels": [2], "requests_per_level": 40},
    }


async def test_the_run_and_the_job_give_one_reason(
    fault_env: dict[str, str],
    fault_team: TeamClient,
    sim: SimProcess,
    fault_db: asyncpg.Connection,
) -> None:
    assert float(fault_env["INFERCOST_STORE_RETRY_S"]) < DOWN_S
    url = make_url(fault_env["DATABASE_URL"])
    endpoint = await fault_team.create_endpoint(base_url=sim.openai_base_url)
    with PgProxy((url.host or "127.0.0.1", url.port or 5432), down_s=DOWN_S) as proxy:
        through_proxy = url.set(host="127.0.0.1", port=proxy.port)
        env = {**fault_env, "DATABASE_URL": through_proxy.render_as_string(hide_password=False)}
        # Cut every connection when the level's COPY starts; refuse new ones for DOWN_S.
        proxy.armed = True
        with worker_process(env, "faults-worker-one-reason"):
            response = await fault_team.submit(job_body(endpoint["id"]))
            assert response.status_code == 202, response.text
            # One earlier death on record: the next fails the job rather than measuring again.
            await fault_db.execute(
                "UPDATE jobs SET interruptions = 1 WHERE id = $1",
                uuid.UUID(response.json()["id"]),
            )
            job = await fault_team.wait_job(response.json()["id"], timeout=120)
            ended_at = time.time()
    assert proxy.cuts == 1, "the store never reached the database through the proxy"
    print(
        f"\ndatabase away {DOWN_S:g} s: the job ended {ended_at - proxy.cut_at:.1f} s after the cut"
    )
    assert job["status"] == "failed"
    runs = (await fault_team.http.get(f"/v1/jobs/{job['id']}/runs")).json()
    assert [r["status"] for r in runs] == ["failed"]
    assert job["error"], job
    assert runs[0]["error"] == job["error"], (runs[0]["error"], job["error"])
