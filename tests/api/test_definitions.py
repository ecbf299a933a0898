"""GET /v1/runs/{id}?definitions=vllm|guidellm|aiperf over a run stored straight in the
database with hand-made request samples: each tool's TPOT, ITL and throughput against hand
arithmetic (tests/infercost/test_definitions.py has the same run worked out), an unknown
name refused with the valid ones, and another team's run not found."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import TeamClient, insert_finished_run

pytestmark = pytest.mark.integration

# (seq, warmup, t_sched, t_send, e2e_ms, n_out, chunk_times_ms, chunk_tokens, error_class)
SAMPLES: list[tuple[Any, ...]] = [
    (0, True, 0.0, 0.0, 7.0, 2, [5.0, 6.0], None, None),
    (1, False, 0.09, 0.10, 400.0, 4, [100.0, 110.0, 120.0, 130.0], None, None),
    (2, False, 0.15, 0.15, 260.0, 5, [200.0, 220.0, 260.0], [2, 1, 2], None),
    (3, False, 0.20, 0.20, 90.0, 1, [80.0], None, None),
    (4, False, 0.25, 0.25, 150.0, 3, [150.0], None, None),
    (5, False, 0.30, 0.30, 700.0, 0, [], None, "timeout"),
]


async def stored_run(db: Any, team: TeamClient) -> str:
    """A finished run holding SAMPLES as its raw samples."""
    endpoint = await team.create_endpoint()
    _, run_id = await insert_finished_run(
        db, team.team_id, endpoint["id"], requests_total=5, requests_succeeded=4
    )
    await db.executemany(
        "INSERT INTO request_samples (run_id, seq, warmup, t_sched, t_send, e2e_ms, n_out,"
        " chunk_times_ms, chunk_tokens, error_class, count_source, status)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'usage', 200)",
        [(uuid.UUID(run_id), *row) for row in SAMPLES],
    )
    return run_id


async def definitions(team: TeamClient, run_id: str, tool: str) -> dict[str, Any]:
    response = await team.http.get(f"/v1/runs/{run_id}", params={"definitions": tool})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == run_id
    block: dict[str, Any] = body["definitions"]
    assert block["tool"] == tool
    assert block["differences"]
    assert block["sources"]
    return block


async def test_each_tool_recomputes_the_stored_run(db: Any, team: TeamClient) -> None:
    """vLLM TPOT [10, 15, 0] (the one-event request counts as 0); GuideLLM TPOT weighted
    by tokens, mean 620 / 13 and first-reaching percentiles; AIPerf TPOT [10, 20, 0] (R2's
    2-token first chunk). vLLM and AIPerf ITL pool raw chunk gaps [10, 10, 10, 20, 40];
    GuideLLM's is per request, weighted by n_out - 1. Windows: vLLM 1.0 - 0.09, GuideLLM's
    token span 0.41 - 0.20, AIPerf 0.41 - 0.10."""
    run_id = await stored_run(db, team)

    vllm = await definitions(team, run_id, "vllm")
    assert vllm["tpot_ms"]["count"] == 3
    assert vllm["tpot_ms"]["mean"] == pytest.approx(25 / 3)
    assert vllm["tpot_ms"]["min"] == 0.0
    assert vllm["itl_ms"]["count"] == 5
    assert vllm["itl_ms"]["mean"] == pytest.approx(18.0)
    assert vllm["itl_ms"]["max"] == 40.0
    assert vllm["duration_s"] == pytest.approx(0.91)
    assert vllm["output_tokens_per_s"] == pytest.approx(13 / 0.91)
    assert vllm["requests_per_s"] == pytest.approx(4 / 0.91)
    assert vllm["metric_names"]["tpot_ms"].startswith("TPOT")

    guidellm = await definitions(team, run_id, "guidellm")
    assert guidellm["tpot_ms"]["count"] == 13
    assert guidellm["tpot_ms"]["mean"] == pytest.approx(620 / 13)
    assert guidellm["tpot_ms"]["p50"] == 50.0
    assert guidellm["tpot_ms"]["p95"] == 80.0
    assert guidellm["itl_ms"]["count"] == 9
    assert guidellm["itl_ms"]["mean"] == pytest.approx(10.0)
    assert guidellm["output_tokens_per_s"] == pytest.approx(13 / 0.21)
    assert guidellm["metric_names"]["tpot_ms"] == "time_per_output_token_ms"

    aiperf = await definitions(team, run_id, "aiperf")
    assert aiperf["tpot_ms"]["count"] == 3
    assert aiperf["tpot_ms"]["mean"] == pytest.approx(10.0)
    assert aiperf["tpot_ms"]["max"] == 20.0
    assert aiperf["itl_ms"]["mean"] == pytest.approx(18.0)
    assert aiperf["duration_s"] == pytest.approx(0.31)
    assert aiperf["requests_per_s"] == pytest.approx(4 / 0.31)
    assert aiperf["metric_names"]["itl_ms"] == "inter_chunk_latency"
    assert "p999" not in aiperf["reported_stats"]


async def test_a_run_without_samples_has_empty_figures(db: Any, team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    _, run_id = await insert_finished_run(db, team.team_id, endpoint["id"])
    for tool in ("vllm", "guidellm", "aiperf"):
        block = await definitions(team, run_id, tool)
        assert block["tpot_ms"]["count"] == 0
        assert block["itl_ms"]["mean"] is None
        assert block["duration_s"] is None
        assert block["output_tokens_per_s"] is None


async def test_without_the_parameter_there_is_no_block(db: Any, team: TeamClient) -> None:
    run_id = await stored_run(db, team)
    response = await team.http.get(f"/v1/runs/{run_id}")
    assert response.status_code == 200, response.text
    assert response.json()["definitions"] is None


async def test_an_unknown_tool_is_refused_with_the_valid_names(db: Any, team: TeamClient) -> None:
    run_id = await stored_run(db, team)
    response = await team.http.get(f"/v1/runs/{run_id}", params={"definitions": "genai-perf"})
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    for name in ("vllm", "guidellm", "aiperf"):
        assert name in problem["detail"]
    assert problem["errors"][0]["field"] == "definitions"


async def test_another_teams_run_is_not_found(
    db: Any, team: TeamClient, new_team: Callable[..., Any]
) -> None:
    run_id = await stored_run(db, team)
    other: TeamClient = await new_team()
    response = await other.http.get(f"/v1/runs/{run_id}", params={"definitions": "vllm"})
    assert response.status_code == 404


async def test_the_parameter_is_documented(team: TeamClient) -> None:
    schema = (await team.http.get("/schema/openapi.json")).json()
    parameters = schema["paths"]["/v1/runs/{run_id}"]["get"]["parameters"]
    (param,) = [p for p in parameters if p["name"] == "definitions"]
    assert param["schema"]["enum"] == ["vllm", "guidellm", "aiperf"]
