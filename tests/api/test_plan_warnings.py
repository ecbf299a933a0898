"""POST /v1/jobs says at submission what its plan decides about its evidence (`warnings`), and
refuses such a plan when asked to be strict."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import TeamClient

pytestmark = pytest.mark.integration


def _job(endpoint_id: str, **load: Any) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 8}, "output_tokens": {"mean": 4}},
        "load": {"mode": "concurrency", **load},
    }


async def test_a_plan_that_cannot_be_adequate_is_accepted_with_warnings(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    body = _job(endpoint["id"], levels=[64], requests_per_level=10)
    accepted = await team.http.post("/v1/jobs", json=body)
    assert accepted.status_code == 202, accepted.text
    warnings = accepted.json()["warnings"]
    assert [(w["code"], w["levels"]) for w in warnings] == [
        ("few_requests", [64]),
        ("concurrency_not_held", [64]),
    ]
    assert "(64 users: 10) are under the 100 a p99 needs" in warnings[0]["detail"]
    # The job itself reads as any other: warnings belong to the submission.
    read = (await team.http.get(f"/v1/jobs/{accepted.json()['id']}")).json()
    assert "warnings" not in read and read["load"]["requests_per_level"] == 10
    await team.http.post(f"/v1/jobs/{read['id']}/cancel")

    fine = await team.http.post(
        "/v1/jobs", json=_job(endpoint["id"], levels=[4], requests_per_level=100)
    )
    assert fine.status_code == 202 and fine.json()["warnings"] == []
    await team.http.post(f"/v1/jobs/{fine.json()['id']}/cancel")


async def test_strict_refuses_it(team: TeamClient) -> None:
    endpoint = await team.create_endpoint(metrics_urls=["http://127.0.0.1:9/metrics"])
    # Rate 50 req/s for 2 s: 100 requests (enough) in a window under 5 s.
    body = _job(endpoint["id"], levels=[50], duration_s=2)
    body["load"]["mode"] = "rate"
    before = (await team.http.get("/v1/jobs")).json()["total"]
    refused = await team.http.post("/v1/jobs", json={**body, "strict": True})
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert problem["errors"][0]["field"] == "load"
    assert problem["detail"].startswith(
        "load: this plan cannot give adequate evidence (strict: true refuses it): short: "
    )
    assert (
        "50 req/s: 2 s" in problem["detail"] and "5 telemetry intervals of 1 s" in problem["detail"]
    )
    assert (await team.http.get("/v1/jobs")).json()["total"] == before  # nothing stored
    accepted = await team.http.post("/v1/jobs", json=body)
    assert accepted.status_code == 202
    assert [w["code"] for w in accepted.json()["warnings"]] == ["short"]
    await team.http.post(f"/v1/jobs/{accepted.json()['id']}/cancel")
