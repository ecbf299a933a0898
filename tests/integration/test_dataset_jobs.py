"""Jobs on uploaded datasets against the simulator: the dataset's prompts and max_tokens
are what is sent, and every run carries the workload's fingerprint."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import asyncpg
import pytest

from sim.process import SimProcess
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

# The simulator counts whitespace-separated words as prompt tokens.
ITEMS = [
    {"prompt": "one two three", "max_tokens": 4},
    {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "a b c d e"},
        ],
        "max_tokens": 6,
    },
    {"prompt": "w " * 10},
]


async def upload(team: TeamClient, rows: list[dict[str, Any]]) -> dict[str, Any]:
    body = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    response = await team.http.post(
        "/v1/datasets", content=body, headers={"Content-Type": "application/x-ndjson"}
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


def job(endpoint_id: str, workload: dict[str, Any], levels: list[int]) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "workload": workload,
        "load": {"mode": "concurrency", "levels": levels, "requests_per_level": 6},
    }


async def test_dataset_job_sends_its_prompts(
    team: TeamClient, sim: SimProcess, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    dataset = await upload(team, ITEMS)
    workload = {"dataset_id": dataset["id"], "output_tokens": {"mean": 3}, "seed": 1}
    first = await team.run_job(job(endpoint["id"], workload, [1, 2]))

    fingerprint = first["workload_fingerprint"]
    assert fingerprint and len(fingerprint) == 16
    for run in first["runs"]:
        assert run["workload_fingerprint"] == fingerprint
        assert run["prompt_lengths"] == "dataset"
        rows = await db.fetch(
            "SELECT n_in, n_out, n_in_target FROM request_samples WHERE run_id = $1",
            uuid.UUID(run["id"]),
        )
        # Each level cycles through the three items twice: their word counts and max_tokens
        # (the third has none, so output_tokens gives 3).
        assert Counter((r["n_in"], r["n_out"]) for r in rows) == {(3, 4): 2, (7, 6): 2, (10, 3): 2}
        assert all(r["n_in_target"] is None for r in rows)

    # Same workload, other levels and seed: comparable, the same fingerprint.
    again = await team.run_job(job(endpoint["id"], {**workload, "seed": 9}, [3]))
    assert again["workload_fingerprint"] == fingerprint
    assert again["runs"][0]["workload_fingerprint"] == fingerprint
    # Another dataset, or synthetic prompts: another fingerprint.
    other = await upload(team, [*ITEMS, {"prompt": "more words here"}])
    synthetic = {"input_tokens": {"mean": 8}, "output_tokens": {"mean": 3}}
    for changed in ({**workload, "dataset_id": other["id"]}, synthetic):
        response = await team.submit(job(endpoint["id"], changed, [1]))
        assert response.json()["workload_fingerprint"] not in (None, fingerprint)
        # Only the fingerprint was wanted: leave the worker free for the next test.
        await team.http.post(f"/v1/jobs/{response.json()['id']}/cancel")

    # Used by jobs: deleting hides it but keeps it for them; new jobs cannot name it.
    assert (await team.http.delete(f"/v1/datasets/{dataset['id']}")).status_code == 204
    assert (await team.http.get(f"/v1/datasets/{dataset['id']}")).status_code == 404
    kept = await db.fetchval(
        "SELECT count(*) FROM dataset_items WHERE dataset_id = $1", uuid.UUID(dataset["id"])
    )
    assert kept == len(ITEMS)
    refused = await team.submit(job(endpoint["id"], workload, [1]))
    assert refused.status_code == 422 and "GET /v1/datasets" in refused.json()["detail"]


async def test_dataset_job_checks(team: TeamClient, sim: SimProcess) -> None:
    chat = await team.create_endpoint(base_url=sim.openai_base_url)
    completions = await team.create_endpoint(base_url=sim.openai_base_url, api="openai-completions")
    dataset = await upload(team, ITEMS)

    async def detail(endpoint_id: str, workload: dict[str, Any]) -> str:
        response = await team.submit(job(endpoint_id, workload, [1]))
        assert response.status_code == 422, response.text
        return str(response.json()["detail"])

    assert "openai-chat" in await detail(
        completions["id"], {"dataset_id": dataset["id"], "output_tokens": {"mean": 3}}
    )
    assert "give no max_tokens" in await detail(chat["id"], {"dataset_id": dataset["id"]})
    assert "leave input_tokens out" in await detail(
        chat["id"],
        {"dataset_id": dataset["id"], "input_tokens": {"mean": 3}, "output_tokens": {"mean": 3}},
    )
    assert "dataset_id" in await detail(chat["id"], {"output_tokens": {"mean": 3}})


async def test_sessions_send_the_history(
    team: TeamClient, sim: SimProcess, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)

    async def n_in(workload: dict[str, Any], users: int, requests: int) -> Counter[int]:
        body = job(endpoint["id"], workload, [users])
        body["load"]["requests_per_level"] = requests
        done = await team.run_job(body)
        rows = await db.fetch(
            "SELECT n_in FROM request_samples WHERE run_id = $1",
            uuid.UUID(done["runs"][0]["id"]),
        )
        return Counter(r["n_in"] for r in rows)

    # Synthetic: a 20-word system prompt, 5-word user messages, 4-token answers, 3 turns;
    # turn k holds the system prompt, k user messages and k - 1 answers.
    synthetic = {
        "input_tokens": {"mean": 5},
        "output_tokens": {"mean": 4},
        "sessions": {"turns": 3, "system_prompt_tokens": 20},
    }
    assert await n_in(synthetic, 2, 12) == {25: 4, 34: 4, 43: 4}

    # ShareGPT: the conversation replayed turn by turn, with the model's own 4-word answer
    # (not the recorded 3-word one) in the history of the second turn.
    conversation = {
        "conversations": [
            {"from": "system", "value": "You are helpful."},
            {"from": "human", "value": "What is a GPU?"},
            {"from": "gpt", "value": "A graphics processor."},
            {"from": "human", "value": "And a TPU?"},
            {"from": "gpt", "value": "A tensor processor."},
        ]
    }
    response = await team.http.post(
        "/v1/datasets", content=json.dumps([conversation]), params={"format": "sharegpt"}
    )
    assert response.status_code == 201, response.text
    replayed = {
        "dataset_id": response.json()["id"],
        "output_tokens": {"mean": 4},
        "sessions": {"turns": 5},
    }
    assert await n_in(replayed, 1, 4) == {7: 2, 14: 2}

    rate = job(endpoint["id"], synthetic, [1])
    rate["load"]["mode"] = "rate"
    refused = await team.submit(rate)
    assert refused.status_code == 422 and "concurrency" in refused.json()["detail"]
