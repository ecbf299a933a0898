"""Uploading datasets: JSONL prompts and chat, ShareGPT; bad lines named and nothing kept;
the size cap; one dataset per content; listing, reading and deleting within the team."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from litestar.testing import AsyncTestClient

from api.app import create_app
from infercost.settings import Settings
from tests.asgi import serve_in_loop
from tests.conftest import TeamClient

pytestmark = pytest.mark.integration

NDJSON = {"Content-Type": "application/x-ndjson"}


def jsonl(*rows: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


async def upload(team: TeamClient, body: bytes, **params: str) -> dict[str, Any]:
    headers = NDJSON if params.get("format") != "sharegpt" else {}
    response = await team.http.post("/v1/datasets", content=body, params=params, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_upload_prompts_and_chat(team: TeamClient, db: asyncpg.Connection) -> None:
    body = jsonl(
        {"prompt": "Write a haiku about GPUs.", "max_tokens": 32},
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
            ]
        },
        {"prompt": "Explain KV caching."},
    )
    created = await upload(team, body, name="mixed")
    assert created["name"] == "mixed" and created["format"] == "jsonl"
    assert created["items"] == 3 and created["chat_items"] == 1
    assert created["max_tokens_items"] == 1 and created["max_turns"] == 1
    assert created["content_sha256"] == hashlib.sha256(body).hexdigest()
    assert created["size_bytes"] == len(body)
    rows = await db.fetch(
        "SELECT seq, prompt, messages, max_tokens FROM dataset_items WHERE dataset_id = $1 "
        "ORDER BY seq",
        uuid.UUID(created["id"]),
    )
    assert [r["prompt"] for r in rows] == ["Write a haiku about GPUs.", None, "Explain KV caching."]
    assert json.loads(rows[1]["messages"])[1] == {"role": "user", "content": "Hi"}
    assert [r["max_tokens"] for r in rows] == [32, None, None]

    # The same bytes again: the same dataset, 200, nothing new stored.
    again = await team.http.post("/v1/datasets", content=body, headers=NDJSON)
    assert again.status_code == 200 and again.json()["id"] == created["id"]
    assert (await team.http.get(f"/v1/datasets/{created['id']}")).json() == created


async def test_upload_sharegpt(team: TeamClient) -> None:
    conversations = [
        {
            "conversations": [
                {"from": "system", "value": "You are helpful."},
                {"from": "human", "value": "What is a GPU?"},
                {"from": "gpt", "value": "A graphics processor."},
                {"from": "human", "value": "And a TPU?"},
                {"from": "gpt", "value": "A tensor processor."},
            ]
        },
        {"conversations": []},
        {"conversations": [{"from": "human", "value": "Hello"}]},
    ]
    array = json.dumps(conversations).encode()
    response = await team.http.post(
        "/v1/datasets", content=array, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["format"] == "sharegpt"
    assert (created["items"], created["chat_items"], created["max_turns"]) == (2, 2, 2)
    assert created["skipped"] == 1
    # ShareGPT as JSONL, said with ?format=sharegpt.
    lines = await upload(team, jsonl(*conversations[:1]), format="sharegpt")
    assert lines["format"] == "sharegpt" and lines["items"] == 1


async def test_malformed_line_named_and_nothing_stored(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    good = {"prompt": "fine"}
    bad_lines = [
        (
            jsonl(good, good, {"messages": [{"role": "robot", "content": "x"}]}),
            "line 3",
            "messages",
        ),
        (jsonl(good) + b"{not json\n", "line 2", "JSON"),
        (jsonl(good, {"prompt": "x", "max_tokens": 0}), "line 2", "max_tokens"),
        (jsonl({"prompt": "x", "temperature": 1}), "line 1", "temperature"),
    ]
    for body, where, what in bad_lines:
        response = await team.http.post("/v1/datasets", content=body, headers=NDJSON)
        assert response.status_code == 422, response.text
        problem = response.json()
        assert response.headers["content-type"].startswith("application/problem+json")
        assert problem["detail"].startswith(f"{where}: ") and what in problem["detail"], problem
    sharegpt = json.dumps([{"conversations": [{"from": "human", "value": "x"}]}, {"x": 1}])
    response = await team.http.post(
        "/v1/datasets", content=sharegpt, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422 and response.json()["detail"].startswith("item 2: ")
    stored = await db.fetchval(
        "SELECT count(*) FROM datasets WHERE team_id = $1", uuid.UUID(team.team_id)
    )
    assert stored == 0
    unknown_type = await team.http.post(
        "/v1/datasets", content=jsonl(good), headers={"Content-Type": "text/csv"}
    )
    assert unknown_type.status_code == 415 and "format=jsonl" in unknown_type.json()["detail"]


@pytest.fixture
async def small_cap_api(service_env: dict[str, str]) -> AsyncIterator[str]:
    """The API in this process, served by uvicorn, with a 1 KiB dataset cap (the server's
    default is 64 MiB); the test client runs its startup, uvicorn streams real bodies."""
    settings = dataclasses.replace(Settings.from_env(service_env), max_dataset_bytes=1024)
    app = create_app(settings)
    async with AsyncTestClient(app), serve_in_loop(app) as url:
        yield url


async def test_oversized_upload_is_413(team: TeamClient, small_cap_api: str) -> None:
    headers = {**NDJSON, "Authorization": f"Bearer {team.key}"}
    body = jsonl(*[{"prompt": "x" * 50}] * 30)
    assert len(body) > 1024
    async with httpx.AsyncClient(base_url=small_cap_api, headers=headers) as http:
        response = await http.post("/v1/datasets", content=body)
        assert response.status_code == 413, response.text
        assert "1024 bytes" in response.json()["detail"]
        assert "INFERCOST_MAX_DATASET_BYTES" in response.json()["detail"]

        async def chunks() -> AsyncIterator[bytes]:
            # No Content-Length: the limit holds on the bytes as they arrive.
            for _ in range(30):
                yield jsonl({"prompt": "x" * 50})

        streamed = await http.post("/v1/datasets", content=chunks())
        assert streamed.status_code == 413, streamed.text
        small = await http.post("/v1/datasets", content=jsonl({"prompt": "x"}))
        assert small.status_code == 201, small.text


async def test_list_scoped_to_team_and_delete(
    team: TeamClient, new_team: Callable[..., Any], db: asyncpg.Connection
) -> None:
    first = await upload(team, jsonl({"prompt": "one"}))
    second = await upload(team, jsonl({"prompt": "two"}))
    listing = (await team.http.get("/v1/datasets")).json()
    assert listing["total"] == 2 and [d["id"] for d in listing["items"]] == [
        second["id"],
        first["id"],
    ]
    page = (await team.http.get("/v1/datasets", params={"limit": 1, "offset": 1})).json()
    assert [d["id"] for d in page["items"]] == [first["id"]]

    other: TeamClient = await new_team()
    assert (await other.http.get("/v1/datasets")).json()["total"] == 0
    assert (await other.http.get(f"/v1/datasets/{first['id']}")).status_code == 404
    assert (await other.http.delete(f"/v1/datasets/{first['id']}")).status_code == 404
    # The same bytes in another team are that team's own dataset.
    theirs = await upload(other, jsonl({"prompt": "one"}))
    assert theirs["id"] != first["id"]

    # Unused: deleted with its items.
    assert (await team.http.delete(f"/v1/datasets/{first['id']}")).status_code == 204
    assert (await team.http.get(f"/v1/datasets/{first['id']}")).status_code == 404
    gone = await db.fetchval(
        "SELECT count(*) FROM dataset_items WHERE dataset_id = $1", uuid.UUID(first["id"])
    )
    assert gone == 0
    assert (await team.http.get("/v1/datasets")).json()["total"] == 1
