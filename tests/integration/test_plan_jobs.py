"""Jobs stored before the plan's fields existed still run: the worker decodes an old row with
the values the API applied then (infercost/jobs/plan.py) and sends what they say."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import numpy as np
import pytest

from infercost.jobs.arrivals import arrival_offsets
from infercost.jobs.tasks import RUN_JOB_TASK
from infercost.workload.synthetic import draw_lengths
from sim.process import SimProcess
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


async def old_job(
    db: asyncpg.Connection, team: TeamClient, endpoint_id: str, workload: Any, load: Any, total: int
) -> str:
    """A queued job row in an old shape, and its task in the outbox (the relay sends it)."""
    async with db.transaction():
        job_id = await db.fetchval(
            "INSERT INTO jobs (id, team_id, endpoint_id, status, workload, load, progress_done,"
            " progress_total, created_at) VALUES (gen_random_uuid(), $1, $2, 'queued',"
            " $3::jsonb, $4::jsonb, 0, $5, now()) RETURNING id",
            uuid.UUID(team.team_id),
            uuid.UUID(endpoint_id),
            json.dumps(workload),
            json.dumps(load),
            total,
        )
        await db.execute(
            "INSERT INTO task_outbox (task, args, job_id) VALUES ($1, $2::jsonb, $3)",
            RUN_JOB_TASK,
            json.dumps([str(job_id)]),
            job_id,
        )
    return str(job_id)


async def test_rows_in_the_first_apis_shapes_run_as_they_did(
    team: TeamClient, sim: SimProcess, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    workload = {"input_tokens": {"mean": 24, "std": 6}, "output_tokens": {"mean": 4}}
    # The first API's concurrency plan: no seed, arrival, shards, cooldown or telemetry
    # interval stored.
    closed = await old_job(
        db, team, endpoint["id"], workload,
        {"mode": "concurrency", "levels": [2], "requests_per_level": 6, "warmup_requests": 0,
         "timeout_s": 30.0},
        6,
    )  # fmt: skip
    # An early rate plan: no arrival (the worker assumed poisson) and no burstiness.
    opened = await old_job(
        db, team, endpoint["id"], workload,
        {"mode": "rate", "levels": [20], "requests_per_level": 8, "warmup_requests": 0,
         "timeout_s": 30.0},
        8,
    )  # fmt: skip
    final = await team.wait_job(closed, timeout=90)
    assert final["status"] == "succeeded", final["error"]
    [run] = final["runs"]
    samples = await team.samples(run["id"])
    # Seed 0, level 0: the input lengths are the first six draws of that generator.
    drawn = draw_lengths(workload["input_tokens"], 6, np.random.default_rng([0, 0]))
    assert [s["n_in_target"] for s in samples] == drawn.tolist()
    assert [s["status"] for s in samples] == [200] * 6

    final = await team.wait_job(opened, timeout=90)
    assert final["status"] == "succeeded", final["error"]
    [run] = final["runs"]
    assert run["mode"] == "rate"
    samples = await team.samples(run["id"])
    # A poisson schedule at 20/s from seed 0 (the schedule's own generator, [seed, level, 1]).
    # The schedule starts when the first request is ready: offsets from the first one.
    expected = arrival_offsets(20, "poisson", np.random.default_rng([0, 0, 1]), count=8)
    sched = [s["t_sched"] - samples[0]["t_sched"] for s in samples]
    assert sched == pytest.approx(expected.tolist(), abs=1e-6)
