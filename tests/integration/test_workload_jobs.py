"""Workload shapes and token counts end to end: a real worker against the simulator (its
tokenizer route gives exact prompt lengths) and against bare servers that send no usage;
warm-up in seconds and cool-down between levels."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import msgspec
import numpy as np
import pytest

from infercost.workload.synthetic import draw_lengths
from sim.process import SimProcess
from tests.asgi import Receive, Send, read_body, send_json, serve_in_loop
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


async def run_job(team: TeamClient, body: dict[str, Any]) -> dict[str, Any]:
    final = await team.run_job(body, timeout=90)
    assert final["progress"]["done"] == final["progress"]["total"]
    return final


@pytest.mark.parametrize("api", ["openai-chat", "openai-completions"])
async def test_prompts_have_exactly_the_drawn_length(
    team: TeamClient, sim: SimProcess, api: str
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url, api=api)
    spec = {"mean": 96, "std": 32, "min": 8, "max": 400}
    final = await run_job(
        team,
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": spec, "output_tokens": {"mean": 4}, "seed": 7},
            "load": {
                "mode": "concurrency",
                "levels": [1, 4],
                "requests_per_level": 16,
                "warmup_requests": 2,
            },
        },
    )
    for index, run in enumerate(final["runs"]):
        assert run["prompt_lengths"] == "exact"
        assert run["count_source"] == "usage"
        rows = await team.samples(run["id"])
        assert len(rows) == 18
        # the lengths the level drew: its own generator, seeded by the job's seed and the
        # level's index, drawing its 18 requests' input lengths in one call
        drawn = draw_lengths(spec, 18, np.random.default_rng([7, index])).tolist()
        assert [r["n_in_target"] for r in rows] == drawn
        # every request's n_in (the server's usage.prompt_tokens) is exactly that length
        assert [r["n_in"] for r in rows] == drawn
        assert {r["prompt_length"] for r in rows} == {"exact"}
        assert len(set(drawn)) > 8, "std 32 should give lengths that differ"


# --- servers without usage, with and without a tokenizer route ---------------------------


class NoUsageApp:
    """An OpenAI-like server that never sends usage: four content events of two words each.
    Under `/tok/` it also answers POST /tok/tokenize (a word is a token); under `/notok/`
    there is no tokenizer route."""

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = await read_body(receive)
        path = scope["path"]
        if path == "/tok/tokenize":
            body = msgspec.json.decode(raw)
            text = body["messages"][0]["content"] if "messages" in body else body["prompt"]
            words = len(text.split())
            await send_json(send, 200, {"count": words, "tokens": [0] * words})
        elif path.endswith("/chat/completions"):
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            for k in range(4):
                await asyncio.sleep(0.005)
                delta = {"content": f" w{k} x{k}"}
                event = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                chunk = b"data: " + msgspec.json.encode(event) + b"\n\n"
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        else:
            await send_json(send, 404, {"detail": "Not Found"})


@pytest.fixture
async def no_usage_server() -> AsyncIterator[str]:
    async with serve_in_loop(NoUsageApp()) as url:
        yield url


def small_job(endpoint_id: str) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 40, "std": 10}, "output_tokens": {"mean": 8}},
        "load": {"mode": "concurrency", "levels": [2], "requests_per_level": 6},
    }


async def test_without_usage_the_tokenizer_counts_output_and_prompts_are_exact(
    team: TeamClient, no_usage_server: str
) -> None:
    endpoint = await team.create_endpoint(base_url=f"{no_usage_server}/tok/v1")
    [run] = (await run_job(team, small_job(endpoint["id"])))["runs"]
    assert run["count_source"] == "tokenizer"
    assert run["prompt_lengths"] == "exact"
    rows = await team.samples(run["id"])
    assert len(rows) == 6
    for row in rows:
        assert row["count_source"] == "tokenizer"
        # eight words in four events: the tokenizer's count, not the event count
        assert row["n_out"] == 8
        assert len(row["chunk_times_ms"]) == 4
        # no usage: n_in is the prompt's own count, checked exact with the tokenizer
        assert row["n_in"] == row["n_in_target"]
        assert row["prompt_length"] == "exact"


async def test_without_usage_or_tokenizer_events_count_and_prompts_are_approximate(
    team: TeamClient, no_usage_server: str
) -> None:
    endpoint = await team.create_endpoint(base_url=f"{no_usage_server}/notok/v1")
    [run] = (await run_job(team, small_job(endpoint["id"])))["runs"]
    assert run["count_source"] == "events"
    assert run["prompt_lengths"] == "approximate"
    rows = await team.samples(run["id"])
    assert {r["count_source"] for r in rows} == {"events"}
    assert {r["n_out"] for r in rows} == {4}
    assert {r["prompt_length"] for r in rows} == {"approximate"}


# --- warm-up in seconds, cool-down between levels ----------------------------------------


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def test_warmup_seconds_and_cooldown_between_levels(
    team: TeamClient, sim: SimProcess
) -> None:
    # Each request lasts about 50 + 7 x 10 = 120 ms on the simulator, so 0.3 s of warm-up
    # holds a few requests per user.
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    final = await run_job(
        team,
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 8}},
            "load": {
                "mode": "concurrency",
                "levels": [1, 2],
                "requests_per_level": 6,
                "warmup_s": 0.3,
                "cooldown_s": 1.0,
            },
        },
    )
    assert final["load"]["warmup_s"] == 0.3
    first, second = final["runs"]
    for run in (first, second):
        assert run["requests"]["total"] == 6
        rows = await team.samples(run["id"])
        warm = [r for r in rows if r["warmup"]]
        measured = [r for r in rows if not r["warmup"]]
        assert len(measured) == 6
        assert len(warm) >= 1
        assert [r["seq"] for r in rows] == list(range(len(rows)))
        # warm-up requests came first, all scheduled inside the first 0.3 s (t_sched counts
        # from the level's origin, taken just before the loop starts its own clock)
        assert max(r["seq"] for r in warm) < min(r["seq"] for r in measured)
        assert all(r["t_sched"] < 0.3 + 0.1 for r in warm)
        assert all(r["t_sched"] >= 0.3 for r in measured)
    # the second level started only after a second's pause
    assert (_at(second["started_at"]) - _at(first["finished_at"])).total_seconds() >= 1.0


async def test_warmup_seconds_at_a_constant_rate(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    final = await run_job(
        team,
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
            "load": {
                "mode": "rate",
                "levels": [20],
                "arrival": "constant",
                "requests_per_level": 10,
                "warmup_s": 0.5,
            },
        },
    )
    [run] = final["runs"]
    assert run["requests"]["total"] == 10
    rows = await team.samples(run["id"])
    # 20 requests/s for 0.5 s of warm-up: those due at 0, 0.05, ..., 0.45 (ten of them),
    # then the ten measured ones from 0.5 s on
    assert [r["warmup"] for r in rows] == [True] * 10 + [False] * 10
    offsets = np.array([r["t_sched"] for r in rows]) - rows[0]["t_sched"]
    assert offsets[10:] == pytest.approx(0.5 + 0.05 * np.arange(10), abs=1e-6)
