"""load.shards "auto" on a machine with two worker processes: a light level stays in one, a
heavy one is split, and each run says how many processes it took and why, from its start.

The decision is held against what the level was given (its schedule's rate and the plan's
output tokens, worked out here) and against where its samples came from (the shard rows)."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from infercost.settings import Settings
from infercost.shards.auto import CPU_SHARE_LIMIT
from sim.config import SimConfig
from sim.process import SimProcess, sim_process
from tests.conftest import TeamClient, running_worker
from workers.runner.shards import free_workers

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker", "auto_second_worker")]

OUTPUT_TOKENS = 512
LIGHT, HEAVY = 20.0, 500.0  # requests/s: 10,240 and 256,000 expected events/s


@pytest.fixture(scope="module")
def auto_second_worker(
    service_env: dict[str, str], worker: subprocess.Popen[bytes]
) -> Iterator[subprocess.Popen[bytes]]:
    """A second `infercost worker` on the session's queue: two processes to split among,
    both answering Celery's remote control before the test starts."""
    with running_worker(service_env, "worker-auto") as proc:
        settings = Settings.from_env(service_env)
        deadline = time.monotonic() + 60
        while free_workers(settings) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)  # (counted from outside: both idle, plus "this one")
        yield proc


@pytest.fixture(scope="module")
def quick_sim() -> Iterator[SimProcess]:
    config = SimConfig(port=0, ttft_ms=5.0, itl_ms=1.0, burst=8, model="sim-model")
    with sim_process(config) as sim:
        yield sim


async def test_auto_splits_the_heavy_level_and_says_why(
    team: TeamClient, quick_sim: SimProcess, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(base_url=quick_sim.openai_base_url)
    job: dict[str, Any] = {
        "endpoint_id": endpoint["id"],
        "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": OUTPUT_TOKENS}},
        "load": {"mode": "rate", "levels": [LIGHT, HEAVY], "requests_per_level": 30},
    }
    final = await team.run_job(job, timeout=180)
    assert final["load"]["shards"] == "auto"  # the default, stored as asked
    light, heavy = final["runs"]
    for run, rate in ((light, LIGHT), (heavy, HEAVY)):
        decided = run["client"]["sharding"]
        assert decided["expected_events_per_s"] == rate * OUTPUT_TOKENS
        budget = CPU_SHARE_LIMIT / (decided["cpu_us_per_event"] * 1e-6)
        assert decided["budget_events_per_s"] == pytest.approx(budget, rel=1e-3)
        # needed = ceil(expected / budget); the budget shown is rounded to 0.1 event/s, so a
        # ratio that lands on a whole number (256000 / 28444.4 = 9.00001) is read with that slack.
        ratio = rate * OUTPUT_TOKENS / decided["budget_events_per_s"]
        assert decided["needed"] - 1 < ratio * (1 + 1e-5)
        assert ratio * (1 - 1e-5) <= decided["needed"]
        rows = await db.fetch(
            "SELECT shard FROM run_shards WHERE run_id = $1", uuid.UUID(run["id"])
        )
        # The samples came from as many processes as it says (none stored: one process).
        assert max(1, len(rows)) == decided["shards"]
        assert run["requests"]["succeeded"] == 30
    # The light level fits one process (by any budget this machine measures: 10,240 events/s
    # would need over 48 us of CPU an event to need two).
    assert light["client"]["sharding"]["shards"] == 1
    assert light["client"]["sharding"]["needed"] == 1
    assert "fit one process" in light["client"]["sharding"]["reason"]
    # The heavy one needs more than one (under 1.95 us an event it would not): it takes the
    # two processes free, and is flagged before it ran when it needed more.
    decided = heavy["client"]["sharding"]
    assert decided["needed"] >= 2
    assert decided["workers_free"] >= 2
    assert decided["shards"] == min(decided["needed"], decided["workers_free"]) >= 2
    assert decided["client_bound"] is (decided["needed"] > decided["shards"])
    assert [s["shard"] for s in heavy["client"]["shards"]] == list(range(decided["shards"]))
    codes = [r["code"] for r in heavy["adequacy"]["reasons"]]
    assert ("client_capacity" in codes) is decided["client_bound"]
    if decided["client_bound"]:
        assert heavy["client_bound"] is True
        assert heavy["client"]["capacity_short"] == decided["reason"]
