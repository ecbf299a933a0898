"""`infercost sim --max-concurrency N`: requests beyond N queue before their first token."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import httpx
import pytest

from sim.config import SimConfig
from sim.metrics import SimMetrics
from sim.modes import Admission
from sim.process import sim_process


async def _stream(client: httpx.AsyncClient, url: str, user: str, max_tokens: int) -> None:
    """One streamed request, named `user` in the simulator's record, read to the end (a
    client that leaves early frees its slot early)."""
    body = {"model": "sim-model", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": max_tokens, "stream": True, "user": user}  # fmt: skip
    async with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200
        async for _ in response.aiter_raw():
            pass


def _gauge(text: str, name: str) -> float:
    line = next(x for x in text.splitlines() if x.startswith(name + "{"))
    return float(line.rsplit(" ", 1)[1])


async def test_requests_beyond_the_limit_wait_for_a_slot() -> None:
    # 50 ms to the first token and 99 more 10 ms apart: a request holds its slot ~1 s.
    ttft_s, n = 0.05, 100
    config = SimConfig(port=0, ttft_ms=50, itl_ms=10, max_concurrency=2, record_writes=True)
    with sim_process(config) as sim:
        url = sim.openai_base_url + "/chat/completions"
        async with httpx.AsyncClient(timeout=30) as client:
            await _stream(client, url, "warm", 2)  # connections and first-use costs
            requests = asyncio.gather(*(_stream(client, url, f"r{i}", n) for i in range(4)))
            gauges: list[tuple[float, float]] = []  # (running, waiting), polled throughout
            while not requests.done():
                metrics = (await client.get(sim.metrics_url)).text
                gauges.append(
                    (
                        _gauge(metrics, "vllm:num_requests_running"),
                        _gauge(metrics, "vllm:num_requests_waiting"),
                    )
                )
                await asyncio.sleep(0.01)
            await requests
            writes = (await client.get(sim.base_url + "/stats")).json()["writes"]

    # The simulator's own record (arrival, then each content write, on its clock): a request
    # holds a slot from ttft before its first write to its last write at least, and no
    # instant is inside more than two of those spans.
    spans = sorted((w[1] - ttft_s, w[-1]) for user, w in writes.items() if user != "warm")
    assert all(len(writes[f"r{i}"]) == 1 + n for i in range(4))
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    assert max(itertools.accumulate(step for _, step in edges)) <= 2, spans
    # The third to start waited for one of the first two to end.
    assert spans[2][0] >= min(spans[0][1], spans[1][1]), spans
    # What /metrics said, whenever the polls landed: never more than two running, and a
    # request waiting only while both slots were taken; all four in at some poll.
    assert all(running <= 2 for running, _ in gauges), gauges
    assert all(running == 2 for running, waiting in gauges if waiting > 0), gauges
    assert (2, 2) in gauges, gauges


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        SimConfig(max_concurrency=0)


async def test_a_freed_slot_goes_to_the_next_in_line_at_once() -> None:
    """The waiting gauge drops when a slot is handed over, not when the waiter next runs, so a
    scrape between the two never sees a request waiting beside a free slot; a waiter that is
    cancelled leaves the line, and one cancelled just after it was handed a slot passes it
    on."""
    metrics = SimMetrics()
    admission = Admission(2, metrics)
    await admission.acquire()
    await admission.acquire()
    third = asyncio.create_task(admission.acquire())
    fourth = asyncio.create_task(admission.acquire())
    fifth = asyncio.create_task(admission.acquire())
    await asyncio.sleep(0)
    assert (metrics.running, metrics.waiting, admission.full()) == (2, 3, True)

    # The first request ends: the third takes its slot at once, running before its own task
    # resumes (a scrape in between sees two running and two waiting).
    admission.release()
    assert (metrics.running, metrics.waiting, admission.full()) == (2, 2, True)
    await third

    fourth.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await fourth
    assert (metrics.running, metrics.waiting) == (2, 1)

    admission.release()  # handed to the fifth, which is cancelled before it runs
    fifth.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await fifth
    assert (metrics.running, metrics.waiting, admission.free) == (1, 0, 1)
    admission.release()
    assert (metrics.running, admission.free) == (0, 2)
