"""Jobs against the simulator behaving as llama.cpp's server does (close after every
response, role-only first chunk, usage with `timings` in a final `choices: []` chunk, a prompt
cache): what failed or lied against the real server, held against the simulator's own record.

The real-engine findings these reproduce (issue "Real engines"): half of all requests failed on
connections the server had closed; a rerun with identical prompts was answered from the prompt
cache and called a large "improvement".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from sim.config import SimConfig
from sim.process import SimProcess, sim_process
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

TTFT_MS, ITL_MS = 60.0, 5.0


@pytest.fixture(scope="module")
def llama() -> Iterator[SimProcess]:
    """The simulator as llama-server: 8 slots, prefix cache on, closes after each response."""
    config = SimConfig.for_engine(
        "llamacpp", port=0, max_concurrency=8, ttft_ms=TTFT_MS, itl_ms=ITL_MS, model="sim-model"
    )
    with sim_process(config) as sim:
        yield sim


def job(endpoint: dict[str, Any], levels: list[int], **workload: Any) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint["id"],
        "workload": {
            "input_tokens": {"mean": 64},
            "output_tokens": {"mean": 8},
            **workload,
        },
        "load": {
            "mode": "concurrency",
            "levels": levels,
            "requests_per_level": 24,
            "warmup_requests": 2,
        },
    }


async def test_a_server_that_closes_every_connection_costs_no_request(
    team: TeamClient, llama: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=llama.openai_base_url, engine="llamacpp")
    done = await team.run_job(job(endpoint, [1, 4, 8]))
    runs = done["runs"]
    assert [r["level"] for r in runs] == [1, 4, 8]
    for run in runs:
        # Every request succeeded: re-sent once on a fresh connection when the kept-alive one
        # turned out closed, and counted once.
        assert run["requests"] == {"total": 24, "succeeded": 24, "failed": 0, "errors": {}}
        server = run["server_timings"]
        assert server is not None and server["source"] == "llamacpp"
        assert server["requests"] == 24
        # output token counts equal the server's own at every request
        assert server["output_tokens_agree"] == 1.0
        # the simulator's prefill time is its TTFT (60 ms for an uncached prompt)
        assert server["prefill_ms"]["p50"] == pytest.approx(TTFT_MS, rel=0.05)
        # a fresh seed: no prompt was served from the cache
        assert run["cache"]["share"] == pytest.approx(0.0, abs=0.05)
    samples = await team.samples(runs[0]["id"])
    measured = [s for s in samples if not s["warmup"]]
    assert len(measured) == 24
    assert all(s["server_source"] == "llamacpp" for s in measured)
    assert all(s["server_n_out"] == s["n_out"] == 8 for s in measured)
    # TTFT is never below the server's own prefill time (the rest is HTTP and the client)
    assert all(s["ttft_ms"] >= s["server_prefill_ms"] for s in measured)


async def test_a_rerun_with_the_same_prompts_is_not_called_an_improvement(
    team: TeamClient, llama: SimProcess
) -> None:
    # A client-bound run (a busy machine) is never a baseline: then the rerun would have none
    # to be refused against, so the pair is measured again on a new endpoint (baselines are
    # an endpoint's own) with new prompts (a new seed: none of them in the cache yet).
    for seed in (42, 43, 44):
        endpoint = await team.create_endpoint(base_url=llama.openai_base_url, engine="llamacpp")
        first = await team.run_job(job(endpoint, [1], seed=seed))
        if not first["runs"][0]["client_bound"]:
            break
    again = await team.run_job(job(endpoint, [1], seed=seed))
    fresh = await team.run_job(job(endpoint, [1]))
    # Without a seed the job drew one, and shows it so the job can be repeated
    assert isinstance(fresh["workload"]["seed"], int) and fresh["workload"]["seed"] != seed
    assert first["workload"]["seed"] == again["workload"]["seed"] == seed

    (cached,) = await team.judged_runs(again)
    # the same prompts again: nearly all of every prompt came from the server's cache
    assert cached["cache"]["share"] > 0.8
    assert cached["adequacy"]["ok"] is False
    assert "prompt_cache" in [r["code"] for r in cached["adequacy"]["reasons"]]
    change = cached["change"]
    assert change["verdict"] not in ("improvement", "regression"), change
    if first["runs"][0]["client_bound"]:
        # Three client-bound first runs (a machine busy beyond reason): none is a baseline,
        # so the cached rerun is the endpoint's first of its kind, and says so.
        assert change["verdict"] == "baseline" and change["baseline_run_id"] is None, change
        return
    assert change["verdict"] == "incomparable"
    assert change["baseline_run_id"] == first["runs"][0]["id"]
    assert "served from the prefix cache" in " ".join(change["notes"])
    # the fresh seed's run has no cache hits; against the cached run (its latest baseline,
    # unless that one was client-bound on a busy machine) it is incomparable, against the
    # first it is compared as usual: never an improvement or regression from the cache
    (fresh_run,) = await team.judged_runs(fresh)
    assert fresh_run["cache"]["share"] == pytest.approx(0.0, abs=0.05)
    if fresh_run["change"]["baseline_run_id"] == cached["id"]:
        assert fresh_run["change"]["verdict"] == "incomparable"
    else:
        assert cached["client_bound"] is True
        assert fresh_run["change"]["baseline_run_id"] == first["runs"][0]["id"]
        assert fresh_run["change"]["verdict"] in ("no_change", "insufficient_data")


async def test_shared_prefixes_are_served_from_the_cache_and_prefill_less(
    team: TeamClient, llama: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=llama.openai_base_url, engine="llamacpp")
    body = job(endpoint, [1], prefix={"count": 2, "tokens": 40})
    body["workload"]["input_tokens"] = {"mean": 80}
    done = await team.run_job(body)
    run = done["runs"][0]
    samples = [s for s in await team.samples(run["id"]) if not s["warmup"]]
    # the two prefixes were first seen in the warm-up: every measured prompt shares one
    hits = [s for s in samples if s["cached_tokens"]]
    assert len(hits) == len(samples) == 24
    # about 40 of about 80 tokens each came from the cache
    share = run["cache"]["share"]
    assert 0.35 < share < 0.65
    # the simulator prefilled only the uncached part: its own prefill time is TTFT x uncached
    # share, so less than the 60 ms of an uncached prompt
    prefill = np.array([s["server_prefill_ms"] for s in samples])
    assert float(np.median(prefill)) < 0.7 * TTFT_MS
    # caching is this workload's point: not a reason to doubt the level
    assert "prompt_cache" not in [r["code"] for r in run["adequacy"]["reasons"]]
