"""Jobs against the simulator behaving as Hugging Face `transformers serve` does: HTTP 422 for
any request field beyond the OpenAI ones, exact lengths only through `generation_config`,
usage on the last chunk, no [DONE], no tokenize route.

What a real `transformers serve` did before (issue 28): the check said "ready", then every
request of a job failed at once with 422 "Unexpected fields in the request: {'ignore_eos'}".
Ground truth is the simulator's profile: an answer whose length is not forced stops after 3
tokens."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sim.config import SimConfig
from sim.process import SimProcess, sim_process
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

OUTPUT_TOKENS = 12


@pytest.fixture(scope="module")
def transformers() -> Iterator[SimProcess]:
    config = SimConfig.for_engine(
        "transformers", port=0, ttft_ms=20.0, itl_ms=2.0, model="sim-model"
    )
    with sim_process(config) as sim:
        yield sim


def job(endpoint: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint["id"],
        "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": OUTPUT_TOKENS}},
        "load": {"mode": "concurrency", "levels": [2], "requests_per_level": 10},
        **extra,
    }


def probes(check: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in check["probes"]}


async def test_declared_transformers_forces_lengths_its_way(
    team: TeamClient, transformers: SimProcess
) -> None:
    endpoint = await team.create_endpoint(
        base_url=transformers.openai_base_url, engine="transformers"
    )
    check = (await team.http.post(f"/v1/endpoints/{endpoint['id']}/check")).json()
    assert check["ok"] is True, check["summary"]
    assert probes(check)["streaming"]["status"] == "pass"
    assert probes(check)["stream_usage"]["status"] == "pass"  # usage comes unasked
    assert probes(check)["tokenizer"]["status"] == "warn"  # it has no tokenize route
    done = await team.run_job(job(endpoint))
    run = done["runs"][0]
    assert run["requests"] == {"total": 10, "succeeded": 10, "failed": 0, "errors": {}}
    samples = [s for s in await team.samples(run["id"]) if not s["warmup"]]
    # generation_config's min_new_tokens held every answer to its asked length (the
    # simulator stops an unforced one after 3), counted by the server's usage
    assert {(s["n_out"], s["count_source"]) for s in samples} == {(OUTPUT_TOKENS, "usage")}


async def test_undeclared_the_check_names_the_refused_field_and_a_job_says_the_same(
    team: TeamClient, transformers: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=transformers.openai_base_url)
    check = (await team.http.post(f"/v1/endpoints/{endpoint['id']}/check")).json()
    assert check["ok"] is False
    streaming = probes(check)["streaming"]
    assert streaming["refused_fields"] == ["ignore_eos"]
    assert "Unexpected fields in the request: {'ignore_eos'}" in streaming["detail"]
    assert "set the endpoint's engine to transformers" in streaming["detail"]
    assert "without it it streams" in streaming["detail"]
    assert check["engine"] == "transformers"
    # Forced anyway, the job fails as the check said it would, with the check's words.
    response = await team.submit(job(endpoint, force=True))
    assert response.status_code == 202, response.text
    failed = await team.wait_job(response.json()["id"])
    assert failed["status"] == "failed"
    assert "the server refuses the request field 'ignore_eos'" in failed["error"]
    assert "set the endpoint's engine to transformers" in failed["error"]
    # And without exact lengths asked, every request gets through (short answers: not forced).
    done = await team.run_job(
        {
            **job(endpoint, force=True),
            "workload": {**job(endpoint)["workload"], "ignore_eos": False},
        }
    )
    assert done["runs"][0]["requests"]["succeeded"] == 10
