"""Jobs with request features (workload.features) against the simulator told what to send:
the figures a job reports equal what the simulator sent.

- reasoning: the first R tokens of every answer are reasoning text, in the field each engine
  uses (vLLM's reasoning_content, the OpenAI-style reasoning), counted in usage where the
  engine counts them; the job reports R reasoning and N - R answer tokens per request, the
  first reasoning token at the simulator's TTFT and the first answer token R inter-token
  gaps later.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sim.config import SimConfig
from sim.process import SimProcess
from tests.conftest import TeamClient
from tests.truth import judge, read_record, recording_sim

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

TTFT_MS, ITL_MS = 40.0, 8.0
OUT, REASONING = 12, 5


@pytest.fixture(scope="module", params=["default", "vllm"])
def thinker(request: pytest.FixtureRequest) -> Iterator[tuple[str, SimProcess]]:
    """A reasoning model: OpenAI-style (`reasoning`, counted in usage) or vLLM
    (`reasoning_content`, not in usage)."""
    config = SimConfig.for_engine(
        request.param, port=0, ttft_ms=TTFT_MS, itl_ms=ITL_MS, reasoning_tokens=REASONING
    )
    with recording_sim(config) as sim:
        yield request.param, sim


def job(endpoint: dict[str, Any], **workload: Any) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint["id"],
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": OUT}, **workload},
        "load": {"mode": "concurrency", "levels": [2], "requests_per_level": 16},
    }


async def test_a_reasoning_job_counts_reasoning_and_answer_apart(
    team: TeamClient, thinker: tuple[str, SimProcess]
) -> None:
    engine, sim = thinker
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url, engine=engine)
    done = await team.run_job(job(endpoint, features=["reasoning"]))
    assert done["workload"]["features"] == ["reasoning"]
    (run,) = done["runs"]
    assert run["requests"]["succeeded"] == 16
    block = run["reasoning"]
    assert block["source"] == ("usage" if engine == "default" else "events")
    assert block["requests_with_reasoning"] == 16
    assert block["reasoning_tokens"]["min"] == block["reasoning_tokens"]["max"] == REASONING
    assert block["answer_tokens"]["min"] == block["answer_tokens"]["max"] == OUT - REASONING
    assert block["reasoning_share"] == pytest.approx(REASONING / OUT)
    # the two rates split output tokens/s by that share, and are the run's columns too
    out = run["output_tokens_per_s"]
    assert run["reasoning_tokens_per_s"] == pytest.approx(out * REASONING / OUT)
    assert run["answer_tokens_per_s"] == pytest.approx(out * (OUT - REASONING) / OUT)
    assert run["ttfr_ms"]["count"] == run["ttfo_ms"]["count"] == 16
    assert run["ttft_ms"]["p50"] == pytest.approx(run["ttfr_ms"]["p50"])
    # paying for reasoning: each answer token costs OUT / (OUT - REASONING) output tokens
    cost = run["cost"]
    assert cost["per_million_answer_tokens_usd"] == pytest.approx(
        cost["per_million_output_tokens_usd"] * OUT / (OUT - REASONING)
    )
    samples = sorted(await team.samples(run["id"]), key=lambda s: s["seq"])
    assert {s["n_reasoning"] for s in samples} == {REASONING}
    # Held against the simulator's own record of each request: its first write (reasoning)
    # and its write number REASONING (the first of the answer). The client reads each no
    # earlier than it was written, and the gap between them as the server wrote it.
    record = await read_record(sim)
    served = record.for_rows(samples)
    gaps = []
    for s, server in zip(samples, served, strict=True):
        assert s["ttfr_ms"] == pytest.approx(s["ttft_ms"])
        assert len(server.writes) == OUT
        assert s["ttfr_ms"] >= (server.writes[0] - server.arrival) * 1000.0
        server_gap = (server.writes[REASONING] - server.writes[0]) * 1000.0
        gaps.append(abs(s["ttfo_ms"] - s["ttfr_ms"] - server_gap))
    judge(max(gaps), record, f"time from first reasoning to first answer off by {max(gaps):.1f} ms")


async def test_a_plain_job_has_no_reasoning_block(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    done = await team.run_job(job(endpoint))
    (run,) = done["runs"]
    assert done["workload"]["features"] == []
    assert run["reasoning"] is None and run["answer_tokens_per_s"] is None
    assert run["ttfr_ms"]["count"] == 0
    assert run["cost"]["per_million_answer_tokens_usd"] is None
