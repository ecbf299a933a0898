"""A job's run says how late its client read, not only how late it sent (the `client` block
of the run summary, workers/loadgen/health.py)."""

from __future__ import annotations

from datetime import datetime

import pytest

from sim.process import SimProcess
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


async def test_a_run_reports_its_reading_side_health(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    body = {
        "endpoint_id": endpoint["id"],
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 8}},
        "load": {
            "mode": "concurrency",
            "levels": [4],
            "requests_per_level": 24,
            "warmup_requests": 4,
        },
    }
    final = await team.run_job(body, timeout=90)
    [run] = final["runs"]
    client = run["client"]
    # The job's own start and end bound every wait the client measured during it.
    job_ms = (
        datetime.fromisoformat(final["finished_at"]) - datetime.fromisoformat(final["started_at"])
    ).total_seconds() * 1000
    # Every streamed response was parsed after its bytes were read, and the loop was probed
    # through the level (every 5 ms over a level of about 0.8 s: 28 requests of 8 tokens at
    # 50 ms + 7 x 10 ms, 4 at a time): each figure is measured (a probe that never ran gives
    # null, one that never waited gives 0) and in milliseconds within the job's length (one
    # in ns or us would be thousands of times too large).
    assert 0 < client["read_lag_p50_ms"] <= client["read_lag_p99_ms"] <= client["read_lag_max_ms"]
    assert client["read_lag_max_ms"] < job_ms, (client, job_ms)
    assert 0 < client["loop_lag_p50_ms"] <= client["loop_lag_p99_ms"] <= client["loop_lag_max_ms"]
    assert client["loop_lag_max_ms"] < job_ms, (client, job_ms)
    assert client["resent"] == 0  # the simulator keeps its connections alive
    # What the client's lateness spoils follows from client_bound, whichever side was late.
    assert (client["spoils"] != []) is run["client_bound"], client
