"""GET /v1/jobs/{id}/export?format=llmd: each run of a job as an llm-d benchmark report,
version 0.2, valid against llm-d-benchmark's JSON Schema (tests/fixtures/imports), with the
run's figures in the report's places and units: for an imported vLLM file (its figures are
the file's), and for a stored run of infercost's own."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import jsonschema
import pytest

from tests.conftest import TeamClient, insert_finished_run

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parents[1] / "fixtures" / "imports"
SCHEMA = json.loads((FIXTURES / "llmd_br_v0_2_json_schema.json").read_text())


def valid_reports(text: str) -> list[dict[str, Any]]:
    """Every line of the body, each checked against the schema (with its formats)."""
    validator = jsonschema.Draft202012Validator(
        SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    reports = [json.loads(line) for line in text.splitlines()]
    for report in reports:
        errors = sorted(validator.iter_errors(report), key=lambda e: list(e.path))
        assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]
        for key in ("start", "end"):
            datetime.fromisoformat(report["run"]["time"][key])
    return reports


async def test_an_imported_vllm_file_exports_as_three_valid_reports(team: TeamClient) -> None:
    body = (FIXTURES / "vllm_results.jsonl").read_bytes()
    created = await team.http.post(
        "/v1/imports",
        content=body,
        params={"format": "vllm", "hardware": "L40S", "gpu_count": 4, "usd_per_hour": 7.0},
    )
    assert created.status_code == 201, created.text
    job = created.json()

    response = await team.http.get(f"/v1/jobs/{job['id']}/export", params={"format": "llmd"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    reports = valid_reports(response.text)
    assert len(reports) == 3
    first = reports[0]
    assert first["version"] == "0.2"
    assert first["run"]["uid"] == job["runs"][0]["id"] and first["run"]["eid"] == job["id"]
    engine = first["scenario"]["stack"][0]["standardized"]
    assert engine["model"] == {"name": "meta-llama/Llama-3.2-3B-Instruct"}
    assert engine["accelerator"]["model"] == "L40S" and engine["accelerator"]["count"] == 4
    load = first["scenario"]["load"]["standardized"]
    # The load generator was vLLM's bench, whose definitions the figures follow.
    assert load["tool"] == "vllm" and load["rate_qps"] == 10.0
    # total_input_tokens 299700 over 300 requests.
    assert load["input_seq_len"] == {"distribution": "other", "value": 999.0}
    aggregate = first["results"]["request_performance"]["aggregate"]
    assert aggregate["requests"] == {"total": 300, "failures": 0}
    ttft = aggregate["latency"]["time_to_first_token"]
    assert ttft == {
        "units": "ms",
        "mean": 54.592403276680365,
        "stddev": 9.218280749895815,
        "p50": 52.79431650001243,
        "p99": 89.80040712966002,
    }
    assert aggregate["throughput"]["output_token_rate"] == {
        "units": "tokens/s",
        "mean": 2282.2747096685353,
    }
    assert aggregate["throughput"]["request_rate"]["mean"] == 8.288330584211705
    assert "rate_qps" not in reports[2]["scenario"]["load"]["standardized"]  # the burst


async def test_a_run_of_infercosts_own_exports_as_a_valid_report(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(hardware="H100-SXM", gpu_count=2, engine="sglang")
    stats = {
        "ttft_ms": {"count": 4, "mean": 120.0, "std": 10.0, "min": 105.0, "p50": 118.0,
                    "p90": 131.0, "p95": 133.0, "p99": 134.6, "p999": 134.96, "max": 135.0},
        "tpot_ms": {"count": 4, "mean": 8.5, "std": 0.5, "min": 8.0, "p50": 8.5, "p90": 9.0,
                    "p95": 9.0, "p99": 9.0, "p999": 9.0, "max": 9.0},
    }  # fmt: skip
    job_id, _ = await insert_finished_run(
        db,
        team.team_id,
        endpoint["id"],
        level=8.0,
        requests_total=4,
        requests_succeeded=4,
        duration_s=2.5,
        output_tokens_per_s=410.0,
        requests_per_s=1.6,
        stats=json.dumps(stats),
        started_at=datetime.fromisoformat("2026-12-01T10:00:00+00:00"),
        finished_at=datetime.fromisoformat("2026-12-01T10:00:03+00:00"),
    )
    response = await team.http.get(f"/v1/jobs/{job_id}/export", params={"format": "llmd"})
    assert response.status_code == 200, response.text
    (report,) = valid_reports(response.text)
    assert report["run"]["time"] == {
        "start": "2026-12-01T10:00:00Z",
        "end": "2026-12-01T10:00:03Z",
        "duration": "PT2.5S",
    }
    load = report["scenario"]["load"]["standardized"]
    assert load["tool"] == "infercost" and load["concurrency"] == 8.0
    engine = report["scenario"]["stack"][0]["standardized"]
    assert engine["tool"] == "sglang" and engine["accelerator"]["model"] == "H100-SXM"
    latency = report["results"]["request_performance"]["aggregate"]["latency"]
    assert latency["time_to_first_token"]["p99p9"] == 134.96
    assert latency["time_per_output_token"]["units"] == "ms/token"
    assert "request_latency" not in latency  # the run has no E2E figures: none invented


async def test_an_unknown_export_format_is_refused(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint()
    job_id, _ = await insert_finished_run(db, team.team_id, endpoint["id"])
    response = await team.http.get(f"/v1/jobs/{job_id}/export", params={"format": "yaml"})
    assert response.status_code in (400, 422)
    assert "llmd" in response.text
