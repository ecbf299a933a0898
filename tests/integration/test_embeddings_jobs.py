"""An `openai-embeddings` endpoint measured end to end against the simulator's /v1/embeddings:
latency percentiles, requests/s, input tokens/s and cost per million input tokens, with the
streaming figures null and saying why."""

from __future__ import annotations

import pytest

from sim.process import SimProcess
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

INPUT_TOKENS = 40
STREAMING = ("ttft_ms", "ttfo_ms", "tpot_ms", "itl_ms", "per_user_tokens_per_s")


async def test_embeddings_job_measures_latency_throughput_and_cost(
    team: TeamClient, sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(
        base_url=sim.openai_base_url, api="openai-embeddings", usd_per_hour=3.6
    )
    assert endpoint["api"] == "openai-embeddings"
    job_body = {
        "endpoint_id": endpoint["id"],
        "workload": {
            "input_tokens": {"mean": INPUT_TOKENS},
            "output_tokens": {"mean": 1},
            "seed": 7,
        },
        "load": {
            "mode": "concurrency",
            "levels": [2],
            "requests_per_level": 30,
            "warmup_requests": 2,
        },
        "slo": {"e2e_ms": {"p95": 5000}},
    }
    job = await team.run_job(job_body)
    (run,) = job["runs"]
    assert run["requests"] == {"total": 30, "succeeded": 30, "failed": 0, "errors": {}}
    assert run["count_source"] == "usage"
    assert run["prompt_lengths"] == "exact"

    # The simulator answers ttft_ms + embed_token_ms per input token after arrival: every
    # request's latency is at least that (however loaded this machine is).
    floor_ms = sim.config.ttft_ms + sim.config.embed_token_ms * INPUT_TOKENS
    samples = [s for s in await team.samples(run["id"]) if not s["warmup"]]
    assert len(samples) == 30
    for sample in samples:
        assert sample["n_in"] == INPUT_TOKENS, sample  # usage.prompt_tokens: exact prompts
        assert sample["n_out"] == 0
        assert sample["chunk_times_ms"] == []
        assert sample["ttft_ms"] is None
        assert sample["e2e_ms"] >= floor_ms, sample
    assert run["e2e_ms"]["count"] == 30
    assert run["e2e_ms"]["p50"] >= floor_ms
    assert run["e2e_ms"]["min"] == min(s["e2e_ms"] for s in samples)

    # Streaming figures do not exist here: null, each with its reason.
    for name in STREAMING:
        assert run[name]["count"] == 0, name
        assert run[name]["p50"] is None, name
        assert "embeddings" in run["not_measured"][name], name
    assert run["output_tokens_per_s"] is None
    assert "output_tokens_per_s" in run["not_measured"]

    # Throughput by hand from the measured window: 30 requests of 40 prompt tokens (every
    # response, warm-up ones included, ended inside it or before its first send).
    duration = run["duration_s"]
    assert duration > 0
    assert run["requests_per_s"] == pytest.approx(30 / duration, rel=1e-9)
    in_window = 30 * INPUT_TOKENS
    placed = run["input_tokens_per_s"] * duration
    assert in_window - 1e-6 <= placed <= in_window + 2 * INPUT_TOKENS + 1e-6
    assert run["total_tokens_per_s"] == pytest.approx(run["input_tokens_per_s"], rel=1e-9)
    # Two users at >= floor_ms each: requests/s cannot beat 2 / floor.
    assert run["requests_per_s"] <= 2 / (floor_ms / 1000.0)

    cost = run["cost"]
    assert cost["usd_per_hour"] == 3.6
    assert cost["per_million_output_tokens_usd"] is None
    assert cost["per_million_input_tokens_usd"] == pytest.approx(
        3.6 / (run["input_tokens_per_s"] * 3600) * 1e6, rel=1e-9
    )
    assert cost["per_thousand_requests_usd"] == pytest.approx(
        3.6 / (run["requests_per_s"] * 3600) * 1e3, rel=1e-9
    )
    assert "embeddings" in cost["reason"]
    assert run["slo_passed"] is True
    assert run["slo_attainment"] == 1.0

    # The other views of the job take an embeddings run as it is.
    report = await team.http.get(f"/v1/jobs/{job['id']}/report", headers={"Accept": "text/html"})
    assert report.status_code == 200, report.text[:500]
    export = await team.http.get(f"/v1/jobs/{job['id']}/export")
    assert export.status_code == 200
    assert export.text.count('"kind":"sample"') == 32
    # Its own kind: the workload fingerprint differs from the same workload generated from.
    chat = await team.create_endpoint(base_url=sim.openai_base_url)
    generated = await team.submit({**job_body, "endpoint_id": chat["id"], "slo": None})
    assert generated.status_code == 202, generated.text
    fingerprint = generated.json()["workload_fingerprint"]
    assert fingerprint != job["workload_fingerprint"]
    await team.wait_job(generated.json()["id"])
    compared = await team.http.get(
        "/v1/comparisons",
        # A loaded test machine may flag the run client-bound; it is still the run asked for.
        params={"workload_fingerprint": job["workload_fingerprint"], "include_client_bound": True},
    )
    assert compared.status_code == 200, compared.text
    assert [row["run_ids"] for row in compared.json()["items"]] == [[run["id"]]]


async def test_embeddings_job_refuses_a_streaming_slo(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url, api="openai-embeddings")
    response = await team.submit(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": {"mean": 8}, "output_tokens": {"mean": 1}},
            "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 2},
            "slo": {"ttft_ms": {"p95": 500}},
        }
    )
    assert response.status_code == 422, response.text
    assert "e2e_ms" in response.text
