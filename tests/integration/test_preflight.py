"""Preflight against the simulator: what a user sees when registering an endpoint and when
asking for a check (POST /v1/endpoints/{id}/check), and jobs refused after a failed check.

Ground truth is the simulator's configuration: the model it serves, the engine profile it
copies (its metric names, tokenize form), whether it streams and sends usage."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from sim.config import SimConfig
from sim.process import SimProcess, start_sim_process
from tests.conftest import Api, TeamClient, free_port, running_api

pytestmark = pytest.mark.integration

PROBES = [
    "reachable",
    "openai_route",
    "model",
    "streaming",
    "stream_usage",
    "tokenizer",
    "engine",
    "metrics",
]


@pytest.fixture(scope="module")
def checking_api(service_env: dict[str, str]) -> Iterator[Api]:
    """A second `infercost api` on the same database with the check at registration on
    (the session's API has it off, as most tests register endpoints that are not there)."""
    env = {**service_env, "INFERCOST_PREFLIGHT_ON_REGISTER": "1"}
    with running_api(env, "api-preflight", timeout=120.0) as api:
        yield api


@pytest.fixture
async def checking(checking_api: Api, team: TeamClient) -> AsyncIterator[httpx.AsyncClient]:
    """The team's client against the API that checks at registration."""
    async with httpx.AsyncClient(
        base_url=checking_api.url, headers={"Authorization": f"Bearer {team.key}"}, timeout=30
    ) as client:
        yield client


@pytest.fixture(scope="module")
def vllm_sim() -> Iterator[SimProcess]:
    """The simulator with vLLM's behaviours: its metric names, its tokenize body."""
    proc = start_sim_process(SimConfig.for_engine("vllm", port=0, model="sim-model"))
    try:
        yield proc
    finally:
        proc.stop()


def _body(**fields: Any) -> dict[str, Any]:
    return {"name": f"pf-{uuid.uuid4().hex[:6]}", "model": "sim-model", **fields}


def _probes(check: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert [p["name"] for p in check["probes"]] == PROBES
    return {p["name"]: p for p in check["probes"]}


async def test_registering_a_correct_endpoint_passes_every_probe(
    checking: httpx.AsyncClient, vllm_sim: SimProcess
) -> None:
    created = await checking.post(
        "/v1/endpoints",
        json=_body(
            base_url=vllm_sim.openai_base_url, engine="vllm", metrics_urls=[vllm_sim.metrics_url]
        ),
    )
    assert created.status_code == 201, created.text
    endpoint = created.json()
    check = endpoint["check"]
    probes = _probes(check)
    assert {n: p["status"] for n, p in probes.items()} == dict.fromkeys(PROBES, "pass"), check
    assert check["ok"] is True
    assert check["summary"] == "ready: every probe passed"
    assert check["engine"] == "vllm"
    assert probes["model"]["served_models"] == ["sim-model"]
    assert probes["tokenizer"]["form"] == "vllm:/tokenize prompt"
    # The simulator streams one token per event: 4 tokens asked, 4 events and usage of 4.
    assert probes["streaming"]["detail"] == "4 content events, then the end"
    assert probes["stream_usage"]["detail"] == "usage in the stream (4 output tokens)"
    assert probes["metrics"]["urls"][0]["known_series"] > 0
    assert endpoint["checked_at"] is not None
    # Stored: the read shows the same check.
    read = (await checking.get(f"/v1/endpoints/{endpoint['id']}")).json()
    assert read["check"] == check
    assert read["checked_at"] == endpoint["checked_at"]


async def test_a_bare_url_gets_the_v1_suggestion(
    checking: httpx.AsyncClient, vllm_sim: SimProcess
) -> None:
    created = (await checking.post("/v1/endpoints", json=_body(base_url=vllm_sim.base_url))).json()
    check = created["check"]
    probes = _probes(check)
    assert check["ok"] is False
    assert probes["reachable"]["status"] == "pass"
    assert probes["openai_route"]["status"] == "fail"
    assert check["suggested_base_url"] == vllm_sim.openai_base_url
    assert f"set base_url to {vllm_sim.openai_base_url}" in probes["openai_route"]["detail"]
    assert {probes[n]["status"] for n in ("model", "streaming", "stream_usage")} == {"skip"}
    # The server's own metrics are found at its root, and suggested.
    assert probes["metrics"]["suggested_metrics_url"] == vllm_sim.metrics_url

    # Taking the suggestion checks it again, and it passes.
    fixed = await checking.patch(
        f"/v1/endpoints/{created['id']}", json={"base_url": check["suggested_base_url"]}
    )
    assert fixed.json()["check"]["ok"] is True, fixed.json()["check"]


async def test_a_wrong_model_lists_the_served_ones(
    checking: httpx.AsyncClient, vllm_sim: SimProcess
) -> None:
    body = _body(base_url=vllm_sim.openai_base_url, model="meta-llama/Llama-3.1-8B-Instruct")
    check = (await checking.post("/v1/endpoints", json=body)).json()["check"]
    probes = _probes(check)
    assert check["ok"] is False
    assert probes["model"]["status"] == "fail"
    assert check["served_models"] == ["sim-model"]
    assert probes["model"]["detail"] == (
        "'meta-llama/Llama-3.1-8B-Instruct' is not served here (HTTP 404: The model "
        "`meta-llama/Llama-3.1-8B-Instruct` does not exist.); /models lists: sim-model"
    )
    assert probes["streaming"]["status"] == "skip"
    assert check["summary"].startswith("model: 'meta-llama/Llama-3.1-8B-Instruct' is not served")


async def test_nothing_listening(checking: httpx.AsyncClient) -> None:
    port = free_port()  # free now, so nothing answers there
    check = (
        await checking.post("/v1/endpoints", json=_body(base_url=f"http://127.0.0.1:{port}/v1"))
    ).json()["check"]
    probes = _probes(check)
    assert probes["reachable"]["status"] == "fail"
    assert "connection refused" in probes["reachable"]["detail"]
    assert all(probes[n]["status"] == "skip" for n in PROBES[1:])


@pytest.mark.parametrize("engine", ["llamacpp", "sglang", "tgi"])
async def test_the_engine_is_recognised(team: TeamClient, engine: str) -> None:
    sim = start_sim_process(SimConfig.for_engine(engine, port=0, model="sim-model"))  # type: ignore[arg-type]
    try:
        endpoint = await team.create_endpoint(
            base_url=sim.openai_base_url, engine="vllm", metrics_urls=[sim.metrics_url]
        )
        response = await team.http.post(f"/v1/endpoints/{endpoint['id']}/check")
    finally:
        sim.stop()
    assert response.status_code == 200, response.text
    check = response.json()
    probes = _probes(check)
    assert check["ok"] is True  # a wrong engine name warns; it does not stop a job
    assert check["engine"] == engine
    assert probes["engine"]["status"] == "warn"
    assert probes["engine"]["detail"].startswith(f"declared vllm, but it looks like {engine} (")
    assert probes["tokenizer"]["status"] == "pass"
    assert probes["metrics"]["status"] == "pass"


async def test_no_usage_in_the_stream_warns_and_a_broken_stream_fails(team: TeamClient) -> None:
    quiet = start_sim_process(SimConfig(port=0, model="sim-model", usage="none"))
    abrupt = start_sim_process(SimConfig(port=0, model="sim-model", stream_end="abrupt"))
    try:
        checks = []
        for sim in (quiet, abrupt):
            endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
            answer = await team.http.post(f"/v1/endpoints/{endpoint['id']}/check")
            checks.append(answer.json())
    finally:
        quiet.stop()
        abrupt.stop()
    no_usage, broken = checks
    assert no_usage["ok"] is True
    assert _probes(no_usage)["stream_usage"]["status"] == "warn"
    assert _probes(no_usage)["streaming"]["status"] == "pass"
    assert broken["ok"] is False
    assert _probes(broken)["streaming"] == {
        "name": "streaming",
        "status": "fail",
        "detail": "a job's request would fail (stream_broken): the stream ended without [DONE] or a finish_reason (the body just stopped)",
        "error_class": "stream_broken",
    }


async def test_a_job_against_a_failed_endpoint_is_refused_unless_forced(
    team: TeamClient, sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url, model="not-served")
    # The session's API does not check at registration: no check, no refusal.
    assert endpoint["check"] is None
    job = {
        "endpoint_id": endpoint["id"],
        "workload": {"input_tokens": {"mean": 8}, "output_tokens": {"mean": 2}},
        "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 1},
    }
    check = (await team.http.post(f"/v1/endpoints/{endpoint['id']}/check")).json()
    assert check["ok"] is False

    refused = await team.submit(job)
    assert refused.status_code == 409, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    detail = refused.json()["detail"]
    assert detail.startswith(f"endpoint '{endpoint['name']}' failed its last check at ")
    assert "model: 'not-served' is not served here" in detail
    assert "/models lists: sim-model" in detail
    assert '"force": true' in detail

    forced = await team.submit({**job, "force": True})
    assert forced.status_code == 202, forced.text
    await team.http.post(f"/v1/jobs/{forced.json()['id']}/cancel")

    # Fixing the endpoint forgets the failed check (this API does not re-run it).
    fixed = (
        await team.http.patch(f"/v1/endpoints/{endpoint['id']}", json={"model": "sim-model"})
    ).json()
    assert fixed["check"] is None
    accepted = await team.submit(job)
    assert accepted.status_code == 202, accepted.text
    await team.http.post(f"/v1/jobs/{accepted.json()['id']}/cancel")


def test_cli_endpoints_add_exits_1_when_the_check_fails(
    checking_api: Api, team: TeamClient, vllm_sim: SimProcess
) -> None:
    from click.testing import CliRunner

    from cli import main

    env = {"INFERCOST_URL": checking_api.url, "INFERCOST_TOKEN": team.key}
    name = f"pf-{uuid.uuid4().hex[:6]}"
    bare = ["endpoints", "add", name, vllm_sim.base_url, "--model", "sim-model"]
    failed = CliRunner().invoke(main, bare, env=env)
    assert failed.exit_code == 1, failed.output
    assert "check FAILED at " in failed.output
    assert f"set base_url to {vllm_sim.openai_base_url}" in failed.output
    # Registered all the same: the endpoint is there to fix.
    shown = CliRunner().invoke(main, ["endpoints", "show", name, "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    good = ["endpoints", "add", f"{name}-v1", vllm_sim.openai_base_url, "--model", "sim-model"]
    passed = CliRunner().invoke(main, [*good, "--engine", "vllm"], env=env)
    assert passed.exit_code == 0, passed.output
    assert "check passed at " in passed.output
