"""Length distributions and warm-up / cool-down plans: bad combinations get a problem+json
that names the field; good ones are stored as given."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import TeamClient

pytestmark = pytest.mark.integration


def job(endpoint_id: str, input_tokens: Any = None, **load: Any) -> dict[str, Any]:
    plan: dict[str, Any] = {"mode": "concurrency", "levels": [1], "requests_per_level": 10}
    plan.update(load)
    return {
        "endpoint_id": endpoint_id,
        "workload": {
            "input_tokens": input_tokens if input_tokens is not None else {"mean": 8},
            "output_tokens": {"mean": 4},
        },
        "load": plan,
    }


LENGTH_CASES = [
    ({"distribution": "uniform", "min": 10}, "workload.input_tokens", "needs min and max"),
    ({"distribution": "uniform", "max": 10}, "workload.input_tokens", "needs min and max"),
    (
        {"distribution": "uniform", "min": 1, "max": 9, "mean": 5},
        "workload.input_tokens",
        "leave out mean and std",
    ),
    (
        {"distribution": "uniform", "min": 1, "max": 9, "std": 2},
        "workload.input_tokens",
        "leave out mean and std",
    ),
    ({"distribution": "lognormal", "mean": 100}, "workload.input_tokens", "std > 0"),
    ({"distribution": "lognormal", "mean": 100, "std": 0}, "workload.input_tokens", "std > 0"),
    ({"distribution": "lognormal", "std": 10}, "workload.input_tokens", "needs mean"),
    ({"std": 10}, "workload.input_tokens", "normal distribution needs mean"),
    ({"mean": 8, "min": 10, "max": 5}, "workload.input_tokens", "min (10) is greater than max"),
    ({"distribution": "gamma", "mean": 8}, "workload.input_tokens.distribution", "lognormal"),
    ({"mean": 8, "std": -1}, "workload.input_tokens.std", ">= 0"),
]


@pytest.mark.parametrize(("lengths", "field", "hint"), LENGTH_CASES)
async def test_bad_length_distributions_are_400(
    team: TeamClient, lengths: dict[str, Any], field: str, hint: str
) -> None:
    endpoint = await team.create_endpoint()
    response = await team.submit(job(endpoint["id"], lengths))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["detail"].startswith(f"{field}: "), problem
    assert hint.lower() in problem["detail"].lower(), problem
    assert problem["errors"][0]["field"] == field
    assert (await team.http.get("/v1/jobs")).json()["total"] == 0


LOAD_CASES = [
    ({"warmup_s": 2, "warmup_requests": 4}, "load.warmup_s", "not both"),
    ({"warmup_s": 0}, "load.warmup_s", "> 0"),
    ({"cooldown_s": -1}, "load.cooldown_s", ">= 0"),
    ({"cooldown_s": 7200}, "load.cooldown_s", "<= 3600"),
]


@pytest.mark.parametrize(("load", "field", "hint"), LOAD_CASES)
async def test_bad_warmup_and_cooldown(
    team: TeamClient, load: dict[str, Any], field: str, hint: str
) -> None:
    endpoint = await team.create_endpoint()
    response = await team.submit(job(endpoint["id"], **load))
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert field in problem["detail"], problem
    assert hint.lower() in problem["detail"].lower(), problem


@pytest.mark.parametrize(
    "lengths",
    [
        {"mean": 128},
        {"mean": 128, "std": 16, "min": 64, "max": 256},
        {"distribution": "uniform", "min": 32, "max": 64},
        {"distribution": "lognormal", "mean": 512, "std": 256, "max": 4096},
    ],
)
async def test_good_distributions_are_stored_as_given(
    team: TeamClient, lengths: dict[str, Any]
) -> None:
    # An endpoint nobody listens on: the job is stored and queued, whatever then happens.
    endpoint = await team.create_endpoint()
    response = await team.submit(job(endpoint["id"], lengths, warmup_s=1.5, cooldown_s=2))
    assert response.status_code == 202, response.text
    stored = response.json()
    given = {k: v for k, v in stored["workload"]["input_tokens"].items() if v is not None}
    assert given == {"distribution": "normal", **lengths}
    assert stored["load"]["warmup_s"] == 1.5
    assert stored["load"]["cooldown_s"] == 2
