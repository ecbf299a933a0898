"""Prompt lengths end to end on an engine whose /tokenize is not vLLM's: a real worker
against a llama.cpp-shaped server builds prompts of exactly the drawn length and says which
tokenizer form it used; against a server with no tokenizer route the run says, while it is
still running, that its prompt lengths are approximate."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import numpy as np
import pytest

from infercost.workload.synthetic import draw_lengths
from tests.asgi import serve_in_loop
from tests.conftest import TeamClient
from tests.tokenizer_engines import CHAT_TEMPLATE, EngineApp

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

SPEC = {"mean": 96, "std": 32, "min": 8, "max": 400}


def job(endpoint_id: str, requests: int, warmup: int) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": SPEC, "output_tokens": {"mean": 4}, "seed": 7},
        "load": {
            "mode": "concurrency",
            "levels": [2],
            "requests_per_level": requests,
            "warmup_requests": warmup,
        },
    }


async def test_llamacpp_prompts_are_exactly_the_drawn_length(team: TeamClient) -> None:
    app = EngineApp("llamacpp")
    async with serve_in_loop(app) as url:
        endpoint = await team.create_endpoint(
            base_url=f"{url}/v1", api="openai-chat", engine="llama.cpp"
        )
        final = await team.run_job(job(endpoint["id"], 14, 2), timeout=90)
    [run] = final["runs"]
    assert run["prompt_lengths"] == "exact"
    tokenizer = run["prompt_tokenizer"]
    assert tokenizer["form"] == "llamacpp:/tokenize content"
    assert tokenizer["exact"] is True
    # the template this server adds to a chat message, measured from its usage
    assert tokenizer["template_tokens"] == CHAT_TEMPLATE["llamacpp"]
    drawn = draw_lengths(SPEC, 16, np.random.default_rng([7, 0])).tolist()
    rows = await team.samples(run["id"])
    assert [r["n_in_target"] for r in rows] == drawn
    assert [r["n_in"] for r in rows] == drawn
    assert {r["prompt_length"] for r in rows} == {"exact"}
    # what the server itself counted for the level's 16 prompts (after the probe's two
    # one-token requests): the drawn lengths, every one
    sent = [n for _, _, n in app.prompts[2:]]
    assert Counter(sent) == Counter(drawn)
    assert all(chat for chat, _, _ in app.prompts)


async def test_without_a_tokenizer_route_the_run_says_approximate_up_front(
    team: TeamClient,
) -> None:
    app = EngineApp("none", delay_s=0.25)
    async with serve_in_loop(app) as url:
        endpoint = await team.create_endpoint(base_url=f"{url}/v1", api="openai-chat")
        response = await team.submit(job(endpoint["id"], 8, 0))
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
        seen_running: dict[str, Any] | None = None
        deadline = time.monotonic() + 60
        while seen_running is None and time.monotonic() < deadline:
            for run in (await team.http.get(f"/v1/jobs/{job_id}/runs")).json():
                if run["status"] == "running" and run["prompt_tokenizer"] is not None:
                    seen_running = run
            await asyncio.sleep(0.05)
        final = await team.wait_job(job_id, timeout=60)
    assert final["status"] == "succeeded", final["error"]
    # while the level was still being measured, its run already said so
    assert seen_running is not None
    early = seen_running["prompt_tokenizer"]
    assert early["form"] is None
    assert early["exact"] is False
    assert early["note"].startswith("no tokenizer route answered consistently")
    [run] = final["runs"]
    assert run["prompt_lengths"] == "approximate"
    assert run["prompt_tokenizer"] == early
    # no probe request was sent to the generation route: every prompt the server saw is
    # one of the level's eight
    assert len(app.prompts) == 8
