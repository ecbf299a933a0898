"""A job read says where the job stands in the queue and when it should start and end."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from sim.process import SimProcess
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


def rate_job(endpoint_id: str, requests: int) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
        "load": {"mode": "rate", "levels": [5], "requests_per_level": requests, "cooldown_s": 1},
    }


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def test_a_queued_job_says_its_place_and_its_times(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    # 40 requests at 5/s: 8 s, and 1 s of cool-down.
    first = (await team.submit(rate_job(endpoint["id"], 40))).json()
    # 10 requests at 5/s: 2 s, and 1 s of cool-down.
    second = (await team.submit(rate_job(endpoint["id"], 10))).json()

    read = (await team.http.get(f"/v1/jobs/{second['id']}")).json()
    assert read["status"] == "queued"
    queue = read["queue"]
    # Other tests' jobs may share this queue and start at any moment: only what this test
    # controls is checked (the arithmetic is in tests/api/test_eta.py).
    # The first job is ahead of it, queued (so it is at least second) or running.
    assert queue["position"] + queue["jobs_running"] >= 2, queue
    assert queue["basis"]
    if queue["estimated_start_at"] is not None:
        # Its own length is its plan's: 3 s from start to end.
        start, end = at(queue["estimated_start_at"]), at(queue["estimated_end_at"])
        assert (end - start).total_seconds() == pytest.approx(3.0)
    else:
        assert queue["basis"].startswith("no estimate"), queue

    for job in (first, second):
        done = await team.wait_job(job["id"], timeout=90)
        assert done["status"] == "succeeded", done["error"]
        assert done["queue"] is None
