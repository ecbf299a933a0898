"""GET /v1/jobs/{id}/export pages through a large run's samples: every sample once, in seq
order, and no chunk of the body holds more than one keyset page of them."""

from __future__ import annotations

import json
import uuid

import asyncpg
import msgspec
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from api.domain.endpoints.schemas import EndpointRead
from api.domain.exports.services import SAMPLE_PAGE, export_lines
from api.domain.jobs.schemas import JobRead
from tests.conftest import TeamClient, insert_finished_run

pytestmark = pytest.mark.integration

SAMPLES = 2 * SAMPLE_PAGE + 500  # three pages, the last one partial


async def test_a_large_run_is_exported_page_by_page(
    team: TeamClient,
    db: asyncpg.Connection,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    endpoint = await team.create_endpoint()
    job_id, run_id = await insert_finished_run(
        db, team.team_id, endpoint["id"], requests_total=SAMPLES, requests_succeeded=SAMPLES
    )
    rows = [
        (uuid.UUID(run_id), seq, seq < 3, seq * 0.01, seq * 0.01, 7, "usage", [1.0, 2.0])
        for seq in range(SAMPLES)
    ]
    await db.copy_records_to_table(
        "request_samples",
        records=rows,
        columns=(
            "run_id", "seq", "warmup", "t_sched", "t_send", "n_out", "count_source",
            "chunk_times_ms",
        ),
    )  # fmt: skip

    response = await team.http.get(
        f"/v1/jobs/{job_id}/export", headers={"Accept-Encoding": "identity"}
    )
    assert response.status_code == 200, response.text
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [line["kind"] for line in lines[:2]] == ["job", "run"]
    samples = lines[2:]
    assert [s["seq"] for s in samples] == list(range(SAMPLES))
    assert all(s["kind"] == "sample" and s["run_id"] == run_id for s in samples)
    assert sum(s["warmup"] for s in samples) == 3
    assert samples[-1]["chunk_times_ms"] == [1.0, 2.0]
    assert samples[-1]["t_send"] == pytest.approx((SAMPLES - 1) * 0.01)

    # The body as the server produces it: the head, the run, then one chunk per page.
    job = msgspec.convert((await team.http.get(f"/v1/jobs/{job_id}")).json(), JobRead)
    about = (await team.http.get(f"/v1/endpoints/{endpoint['id']}")).json()
    chunks = [c async for c in export_lines(sessions, job, msgspec.convert(about, EndpointRead))]
    counts = [c.count(b'"kind":"sample"') for c in chunks]
    assert counts == [0, 0, SAMPLE_PAGE, SAMPLE_PAGE, 500]
    assert b"".join(chunks).decode() == response.text
