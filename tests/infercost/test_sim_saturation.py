"""`infercost sim --max-concurrency N`: requests beyond N queue before their first token."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from infercost.sim.config import SimConfig
from infercost.sim.process import sim_process


async def _ttft_ms(client: httpx.AsyncClient, url: str) -> float:
    body = {"model": "sim-model", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 5, "stream": True}  # fmt: skip
    start = time.perf_counter()
    first: float | None = None
    # Read to the end: a client that leaves early frees its slot early.
    async with client.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if first is None and '"content":" ' in line:
                first = time.perf_counter()
    assert first is not None, "no content event"
    return (first - start) * 1000


def _gauge(text: str, name: str) -> float:
    line = next(x for x in text.splitlines() if x.startswith(name + "{"))
    return float(line.rsplit(" ", 1)[1])


async def test_requests_beyond_the_limit_wait_for_a_slot() -> None:
    # 50 ms to the first token and 4 more tokens 10 ms apart: a request holds its slot ~90 ms.
    config = SimConfig(port=0, ttft_ms=50, itl_ms=10, max_concurrency=2)
    with sim_process(config) as sim:
        url = sim.openai_base_url + "/chat/completions"
        async with httpx.AsyncClient(timeout=10) as client:
            await _ttft_ms(client, url)  # connections and first-use costs out of the way
            requests = [asyncio.create_task(_ttft_ms(client, url)) for _ in range(4)]
            await asyncio.sleep(0.03)
            metrics = (await client.get(sim.metrics_url)).text
            ttfts = sorted(await asyncio.gather(*requests))
    assert _gauge(metrics, "vllm:num_requests_running") == 2
    assert _gauge(metrics, "vllm:num_requests_waiting") == 2
    # Two start at once; two wait for a slot (~90 ms) and then take their own 50 ms.
    assert ttfts[1] < 90, ttfts
    assert ttfts[2] > 120, ttfts


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        SimConfig(max_concurrency=0)
