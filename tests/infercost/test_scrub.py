"""`infercost scrub` (infercost/scrub.py): texts stored before the redactor, holding
an endpoint's key (planted here straight into the database, as an older version stored
them), are masked; another endpoint's rows and clean texts are left as they were."""

from __future__ import annotations

import json
import secrets
import uuid

import asyncpg
import pytest

from tests.conftest import TeamClient, insert_finished_run, running_cli

pytestmark = pytest.mark.integration


async def test_scrub_masks_keys_stored_before_the_redactor(
    team: TeamClient, db: asyncpg.Connection, service_env: dict[str, str]
) -> None:
    key = f"sk-old-{secrets.token_hex(12)}"
    leaky = await team.create_endpoint(api_key=key)
    clean = await team.create_endpoint(api_key=f"sk-other-{secrets.token_hex(12)}")
    said = f"the server refused the credentials (HTTP 401: invalid key Bearer {key})"
    job_id, run_id = await insert_finished_run(db, team.team_id, leaky["id"])
    other_job, _ = await insert_finished_run(db, team.team_id, clean["id"])
    await db.execute("UPDATE jobs SET error = $2 WHERE id = $1", uuid.UUID(job_id), said)
    await db.execute("UPDATE runs SET error = $2 WHERE id = $1", uuid.UUID(run_id), said)
    elsewhere = f"a text that names {key} without a scheme"
    await db.execute("UPDATE jobs SET error = $2 WHERE id = $1", uuid.UUID(other_job), elsewhere)
    check = {"ok": False, "summary": said, "probes": [{"name": "model", "detail": said}]}
    await db.execute(
        'UPDATE endpoints SET "check" = $2 WHERE id = $1', uuid.UUID(leaky["id"]), json.dumps(check)
    )
    webhook = await team.http.post("/v1/webhooks", json={"url": "http://192.0.2.7/hooks"})
    assert webhook.status_code == 201, webhook.text
    payload = {
        "event": "job.finished",
        "data": {"job": {"endpoint_id": leaky["id"], "error": said}},
    }
    delivery = await db.fetchval(
        "INSERT INTO webhook_deliveries (id, webhook_id, event, payload, status, attempts,"
        " created_at) VALUES (gen_random_uuid(), $1, 'job.finished', $2, 'failed', 1, now())"
        " RETURNING id",
        uuid.UUID(webhook.json()["id"]),
        json.dumps(payload),
    )

    with running_cli(service_env, "scrub", "scrub") as proc:
        assert proc.wait(120) == 0

    masked = said.replace(key, "[redacted]")
    assert await db.fetchval("SELECT error FROM jobs WHERE id = $1", uuid.UUID(job_id)) == masked
    assert await db.fetchval("SELECT error FROM runs WHERE id = $1", uuid.UUID(run_id)) == masked
    stored = json.loads(
        await db.fetchval('SELECT "check" FROM endpoints WHERE id = $1', uuid.UUID(leaky["id"]))
    )
    assert stored["summary"] == masked and stored["probes"][0]["detail"] == masked
    sent = json.loads(
        await db.fetchval("SELECT payload FROM webhook_deliveries WHERE id = $1", delivery)
    )
    assert sent["data"]["job"]["error"] == masked
    # Another endpoint's rows are masked against its own key only.
    assert await db.fetchval("SELECT error FROM jobs WHERE id = $1", uuid.UUID(other_job)) == (
        elsewhere
    )
