"""Importing request logs: each public format as its files are laid out (written by a seeded
generator, tests/traffic_files.py), read back against statistics computed here with pandas
and numpy; gzip; bad rows named by line and column with nothing kept; the size cap; names;
listing, series and deleting within the team."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import math
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import httpx
import numpy as np
import pandas as pd
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from api.app import create_app
from infercost.settings import Settings
from infercost.traffic.repository import TrafficRepository
from tests.asgi import serve_in_loop
from tests.conftest import TeamClient
from tests.traffic_files import azure_csv, burstgpt_csv, infercost_csv, mooncake_jsonl

pytestmark = pytest.mark.integration


async def post(team: TeamClient, body: bytes, fmt: str, **params: Any) -> httpx.Response:
    headers = params.pop("headers", None)
    return await team.http.post(
        "/v1/traffic", content=body, params={"format": fmt, **params}, headers=headers
    )


async def imported(team: TeamClient, body: bytes, fmt: str, **params: Any) -> dict[str, Any]:
    response = await post(team, body, fmt, **params)
    assert response.status_code == 201, response.text
    return dict(response.json())


def peak_minute(offsets_s: pd.Series) -> int:
    """The most requests in a minute, minutes counted from the first request."""
    return int((offsets_s // 60).value_counts().max())


def lengths_agree(read: dict[str, Any], values: pd.Series) -> None:
    assert read["mean"] == pytest.approx(values.mean(), rel=1e-12)
    for q in (50, 90, 99):
        assert read[f"p{q}"] == pytest.approx(np.percentile(values.to_numpy(), q), rel=1e-12)
    assert read["max"] == values.max()


async def test_an_hour_of_azure_conversation_reads_as_pandas_reads_it(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    # The size of Azure's one-hour conversation trace (19,366 requests).
    body = azure_csv(19_400, seed=3)
    assert body.count(b"\r\n") == 19_400 and not body.endswith(b"\n")
    frame = pd.read_csv(io.BytesIO(body))
    at = pd.to_datetime(frame["TIMESTAMP"], format="%Y-%m-%d %H:%M:%S.%f")
    offsets = (at - at.min()).dt.total_seconds()
    duration = offsets.max()

    read = await imported(team, body, "azure", name="conv-hour")
    assert read["requests"] == len(frame) == 19_400
    assert read["format"] == "azure" and read["name"] == "conv-hour"
    assert read["content_sha256"] == hashlib.sha256(body).hexdigest()
    assert read["start_at"] == at.min().isoformat(timespec="microseconds") + "Z"
    assert read["duration_s"] == pytest.approx(duration, abs=1e-6)
    assert read["mean_requests_per_s"] == pytest.approx(len(frame) / duration, rel=1e-9)
    assert read["peak_1m_requests_per_s"] == pytest.approx(peak_minute(offsets) / 60)
    five = int((offsets // 300).value_counts().max())
    assert read["peak_5m_requests_per_s"] == pytest.approx(five / 300)
    busiest = int((offsets // 60).value_counts().idxmax())
    assert read["peak_minute_start_s"] == busiest * 60
    assert read["peak_to_mean"] == pytest.approx(
        peak_minute(offsets) / 60 / (len(frame) / duration)
    )
    lengths_agree(read["input_tokens"], frame["ContextTokens"])
    lengths_agree(read["output_tokens"], frame["GeneratedTokens"])
    assert read["input_tokens_total"] == int(frame["ContextTokens"].sum())
    assert read["models"] == [] and read["prefix_reuse_share"] is None
    assert read["in_order"] is True

    # Stored a row a request, each at its own offset from the first, in time order.
    stored = await db.fetch(
        "SELECT at_us, input_tokens, output_tokens FROM traffic_requests"
        " WHERE traffic_id = $1 ORDER BY seq",
        uuid.UUID(read["id"]),
    )
    expected_us = ((at - at.min()) // pd.Timedelta(microseconds=1)).tolist()
    assert [r["at_us"] for r in stored] == expected_us
    assert [r["input_tokens"] for r in stored] == frame["ContextTokens"].tolist()

    # The series per minute: every minute from the first, the requests pandas counts in it.
    full = (await team.http.get(f"/v1/traffic/{read['id']}", params={"interval": 60})).json()
    series = full["series"]
    assert series["interval_s"] == 60
    counts = (offsets // 60).astype(int).value_counts().sort_index()
    assert len(series["points"]) == int(duration // 60) + 1
    assert [p["requests"] for p in series["points"]] == [
        int(counts.get(m, 0)) for m in range(len(series["points"]))
    ]
    assert sum(p["output_tokens"] for p in series["points"]) == int(frame["GeneratedTokens"].sum())
    assert series["points"][1]["start_s"] == 60 and series["points"][1]["requests_per_s"] == (
        pytest.approx(counts.get(1, 0) / 60)
    )
    # Without ?interval, the shortest standard interval giving at most 1,440 points.
    assert (await team.http.get(f"/v1/traffic/{read['id']}")).json()["series"]["interval_s"] == 60


def reuse_share(lines: list[dict[str, Any]]) -> float:
    """Prompt tokens in blocks some earlier line had, over all prompt tokens."""
    seen: set[int] = set()
    hit = 0
    for row in lines:
        for k, h in enumerate(row["hash_ids"]):
            if h in seen:
                hit += min(512, row["input_length"] - 512 * k)
        seen.update(row["hash_ids"])
    return hit / sum(row["input_length"] for row in lines)


async def test_mooncake_prefix_blocks_and_reuse(team: TeamClient, db: asyncpg.Connection) -> None:
    body = mooncake_jsonl(3000, seed=5)
    lines = [json.loads(line) for line in body.decode().splitlines()]
    read = await imported(team, body, "mooncake")
    assert read["name"] == f"traffic-{hashlib.sha256(body).hexdigest()[:12]}"
    assert read["requests"] == len(lines)
    assert read["start_at"] is None and read["end_at"] is None
    assert read["duration_s"] == pytest.approx(lines[-1]["timestamp"] / 1000)
    assert read["block_tokens"] == 512
    assert read["prefix_reuse_share"] == pytest.approx(reuse_share(lines), rel=1e-12)
    assert 0.05 < read["prefix_reuse_share"] < 0.95
    lengths_agree(read["input_tokens"], pd.Series([r["input_length"] for r in lines]))
    # Blocks are renumbered in order of first appearance; sharing is kept exactly.
    stored = await db.fetch(
        "SELECT prefix_blocks FROM traffic_requests WHERE traffic_id = $1 ORDER BY seq",
        uuid.UUID(read["id"]),
    )
    numbering: dict[int, int] = {}
    for row in lines:
        for h in row["hash_ids"]:
            numbering.setdefault(h, len(numbering))
    assert [r["prefix_blocks"] for r in stored] == [
        [numbering[h] for h in row["hash_ids"]] for row in lines
    ]
    # The same bytes again (no name): the stored log, 200.
    again = await post(team, body, "mooncake")
    assert again.status_code == 200 and again.json()["id"] == read["id"]


@pytest.mark.parametrize("layout", ["v1", "v1.2"])
async def test_burstgpt_both_layouts(team: TeamClient, layout: str) -> None:
    body = burstgpt_csv(2000, seed=11, layout=layout)
    frame = pd.read_csv(io.BytesIO(body))
    read = await imported(team, body, "burstgpt", name=f"burst-{layout}")
    assert read["requests"] == len(frame)
    assert read["duration_s"] == frame["Timestamp"].max() - frame["Timestamp"].min()
    shares = frame["Model"].value_counts()
    assert [(m["model"], m["requests"]) for m in read["models"]] == list(
        zip(shares.index, shares.tolist(), strict=True)
    )
    assert read["models"][0]["share"] == pytest.approx(shares.iloc[0] / len(frame))
    lengths_agree(read["output_tokens"], frame["Response tokens"])
    sessions = frame["Session ID"].nunique() if layout == "v1.2" else None
    assert read["sessions"] == sessions


async def test_infercost_csv_and_json_lines(team: TeamClient, db: asyncpg.Connection) -> None:
    csv_body = infercost_csv([0.0, 30.5, 61.0, 62.0], [(100, 10), (200, 20), (300, 30), (5, 1)])
    read = await imported(team, csv_body, "infercost", name="gateway-csv")
    assert read["start_at"] == "2026-11-02T00:00:00Z"
    assert read["end_at"] == "2026-11-02T00:01:02Z"
    assert read["duration_s"] == 62.0
    # Minute 0 holds 2 requests, minute 1 holds 2: the peak minute is 2 / 60 requests/s.
    assert read["peak_1m_requests_per_s"] == pytest.approx(2 / 60)
    assert read["mean_requests_per_s"] == pytest.approx(4 / 62)

    rows = [
        {"timestamp": 1_764_000_000.25, "input_tokens": 1024, "output_tokens": 8,
         "model": "llama", "session_id": 7, "prefix_hashes": ["sys", "a1"]},
        {"timestamp": 1_764_000_001.0, "input_tokens": 700, "output_tokens": 9,
         "model": "llama", "session_id": 7, "prefix_hashes": ["sys"]},
        {"timestamp": 1_764_000_000.0, "input_tokens": 600, "output_tokens": 4,
         "model": "mistral", "prefix_hashes": ["sys", "b2"]},
    ]  # fmt: skip
    body = "".join(json.dumps(r) + "\n" for r in rows).encode()
    read = await imported(team, body, "infercost", name="gateway-jsonl")
    # Out of file order: t_0 is the third line's time; the read is the same as in order.
    assert read["in_order"] is False
    assert read["start_at"] == "2025-11-24T16:00:00Z"
    assert read["duration_s"] == 1.0
    assert read["sessions"] == 1
    assert [(m["model"], m["requests"]) for m in read["models"]] == [("llama", 2), ("mistral", 1)]
    # "sys" is reused by the 2nd and 3rd lines: 512 + 512 of 2,324 prompt tokens.
    assert read["prefix_reuse_share"] == pytest.approx(1024 / 2324)
    stored = await db.fetch(
        "SELECT seq, at_us, session_id, prefix_blocks FROM traffic_requests"
        " WHERE traffic_id = $1 ORDER BY at_us, seq",
        uuid.UUID(read["id"]),
    )
    assert [(r["seq"], r["at_us"]) for r in stored] == [(3, 0), (1, 250_000), (2, 1_000_000)]
    assert [r["prefix_blocks"] for r in stored] == [[0, 2], [0, 1], [0]]
    assert [r["session_id"] for r in stored] == [None, "7", "7"]


async def test_gzip_by_content_or_by_header(team: TeamClient) -> None:
    body = azure_csv(500, seed=1)
    packed = gzip.compress(body)
    read = await imported(team, packed, "azure", name="packed")
    assert read["requests"] == 500
    assert read["size_bytes"] == len(packed)
    said = await imported(team, packed, "azure", name="said", headers={"Content-Encoding": "gzip"})
    assert said["requests"] == 500
    wrong = await post(team, body, "azure", name="not-gzip", headers={"Content-Encoding": "gzip"})
    assert wrong.status_code == 422 and "not gzip" in wrong.json()["detail"]


async def test_bad_rows_are_named_and_nothing_is_kept(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    good = azure_csv(80_000, seed=2).decode()
    lines = good.split("\r\n")
    # A bad row far into the file, after the first COPY batch has been written.
    lines[60_001] = lines[60_001].rsplit(",", 1)[0] + ",many"
    cases = [
        ("\r\n".join(lines), "azure", "line 60002, column GeneratedTokens", "'many'"),
        ("TIMESTAMP,Context,GeneratedTokens\r\n2023-11-16 18:00:00.0000000,1,1", "azure",
         "line 1, column ContextTokens", "no column"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 25:00:00,1,1\n", "azure",
         "line 2, column TIMESTAMP", "not a date and time"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [1, 2, 3]}\n',
         "mooncake", "line 1, column hash_ids", "3 blocks"),
        ('{"timestamp": 0, "input_length": 6, "output_length": 2, "hash_ids": [1]}\n{oops\n',
         "mooncake", "line 2", "not a valid JSON object"),
        ("timestamp,input_tokens,output_tokens\n0,-4,3\n", "infercost",
         "line 2, column input_tokens", "outside 0"),
        ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n", "burstgpt",
         "line 1", "no requests"),
    ]  # fmt: skip
    for text, fmt, where, what in cases:
        response = await post(team, text.encode(), fmt)
        assert response.status_code == 422, (where, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        assert problem["detail"].startswith(f"{where}: ") and what in problem["detail"], problem
        assert "nothing was stored" in problem["detail"]
    [error] = (await post(team, cases[0][0].encode(), "azure")).json()["errors"]
    assert (
        error["field"] == "body"
        and error["line"] == 60_002
        and error["column"] == "GeneratedTokens"
    )
    team_id = uuid.UUID(team.team_id)
    assert await db.fetchval("SELECT count(*) FROM traffic WHERE team_id = $1", team_id) == 0
    orphans = await db.fetchval(
        "SELECT count(*) FROM traffic_requests r WHERE NOT EXISTS"
        " (SELECT 1 FROM traffic t WHERE t.id = r.traffic_id)"
    )
    assert orphans == 0
    unknown = await post(team, b"x", "splunk")
    assert unknown.status_code in (400, 422)
    assert "azure" in unknown.text


async def test_names_are_one_per_log(team: TeamClient) -> None:
    first = azure_csv(50, seed=8)
    created = await imported(team, first, "azure", name="prod")
    again = await post(team, first, "azure", name="prod")
    assert again.status_code == 200 and again.json()["id"] == created["id"]
    other = await post(team, azure_csv(50, seed=9), "azure", name="prod")
    assert other.status_code == 409
    assert f"DELETE /v1/traffic/{created['id']}" in other.json()["detail"]


@pytest.fixture
async def small_cap_api(service_env: dict[str, str]) -> AsyncIterator[str]:
    """The API in this process with a 4 KiB traffic cap (the default is 256 MiB)."""
    settings = dataclasses.replace(Settings.from_env(service_env), max_traffic_bytes=4096)
    app = create_app(settings)
    async with AsyncTestClient(app), serve_in_loop(app) as url:
        yield url


async def test_oversized_log_is_413(team: TeamClient, small_cap_api: str) -> None:
    body = azure_csv(400, seed=4)
    assert len(body) > 4096
    headers = {"Authorization": f"Bearer {team.key}"}
    async with httpx.AsyncClient(base_url=small_cap_api, headers=headers) as http:
        response = await http.post("/v1/traffic", params={"format": "azure"}, content=body)
        assert response.status_code == 413, response.text
        assert "INFERCOST_MAX_TRAFFIC_BYTES" in response.json()["detail"]

        async def chunks() -> AsyncIterator[bytes]:
            # No Content-Length: the limit holds on the bytes as they arrive.
            for start in range(0, len(body), 1000):
                yield body[start : start + 1000]

        streamed = await http.post("/v1/traffic", params={"format": "azure"}, content=chunks())
        assert streamed.status_code == 413, streamed.text
        # Small when sent, too large once unpacked: the limit is on the text.
        same = b"TIMESTAMP,ContextTokens,GeneratedTokens" + b"\r\n2023-11-16 18:00:00.0,9,9" * 300
        packed = gzip.compress(same)
        assert len(packed) < 4096 < len(same)
        unpacked = await http.post("/v1/traffic", params={"format": "azure"}, content=packed)
        assert unpacked.status_code == 413, unpacked.text
        small = await http.post(
            "/v1/traffic", params={"format": "azure"}, content=azure_csv(20, seed=4)
        )
        assert small.status_code == 201, small.text


async def test_list_scoped_to_team_and_delete(
    team: TeamClient, new_team: Callable[..., Any], db: asyncpg.Connection
) -> None:
    first = await imported(team, azure_csv(30, seed=1), "azure", name="one")
    second = await imported(team, azure_csv(30, seed=2), "azure", name="two")
    listing = (await team.http.get("/v1/traffic")).json()
    assert listing["total"] == 2
    assert [t["id"] for t in listing["items"]] == [second["id"], first["id"]]
    assert all(t["series"] is None for t in listing["items"])

    other: TeamClient = await new_team()
    assert (await other.http.get("/v1/traffic")).json()["total"] == 0
    assert (await other.http.get(f"/v1/traffic/{first['id']}")).status_code == 404
    assert (await other.http.delete(f"/v1/traffic/{first['id']}")).status_code == 404
    # Names are per team: another team may use "one" for its own log.
    assert (await imported(other, azure_csv(30, seed=1), "azure", name="one"))["id"] != first["id"]

    assert (await team.http.delete(f"/v1/traffic/{first['id']}")).status_code == 204
    assert (await team.http.get(f"/v1/traffic/{first['id']}")).status_code == 404
    left = await db.fetchval(
        "SELECT count(*) FROM traffic_requests WHERE traffic_id = $1", uuid.UUID(first["id"])
    )
    assert left == 0
    too_fine = await team.http.get(f"/v1/traffic/{second['id']}", params={"interval": 0})
    assert too_fine.status_code == 400 or too_fine.status_code == 422
    assert math.isfinite((await team.http.get("/v1/traffic")).json()["items"][0]["duration_s"])


async def test_a_window_reads_back_in_time_order(
    team: TeamClient, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """What a replay reads: the requests of [start_s, start_s + duration_s) after t_0, in time
    order (file order among equal times), with their lengths, model, session and blocks."""
    rows = [
        {"timestamp": 30.0, "input_tokens": 600, "output_tokens": 3, "model": "m",
         "session_id": "s1", "prefix_hashes": ["a", "b"]},
        {"timestamp": 10.0, "input_tokens": 100, "output_tokens": 1},
        {"timestamp": 30.0, "input_tokens": 700, "output_tokens": 4, "prefix_hashes": ["a"]},
        {"timestamp": 45.5, "input_tokens": 800, "output_tokens": 5},
        {"timestamp": 70.0, "input_tokens": 900, "output_tokens": 6},
    ]  # fmt: skip
    body = "".join(json.dumps(r) + "\n" for r in rows).encode()
    read = await imported(team, body, "infercost", name="window")
    async with sessions() as session:
        window = await TrafficRepository(session).window(uuid.UUID(read["id"]), 20.0, 35.5)
    # t_0 is 10 s: the window holds offsets 20 (two requests at 30 s) and 35.5; 60 is past it.
    assert [(w.seq, w.at_s, w.input_tokens, w.output_tokens) for w in window] == [
        (1, 20.0, 600, 3),
        (3, 20.0, 700, 4),
        (4, 35.5, 800, 5),
    ]
    assert (window[0].model, window[0].session_id, window[0].prefix_blocks) == ("m", "s1", [0, 1])
    assert window[1].prefix_blocks == [0] and window[1].model is None
