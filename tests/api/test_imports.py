"""Importing other tools' result files (POST /v1/imports): each format's real example
(tests/fixtures/imports, sources in its README) becomes runs whose figures are the file's
own summary values, written here as literals copied from the file; the runs are labelled
with the tool and its definitions, under an external endpoint and an imported job; bad
files are refused with a sentence and nothing stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import TeamClient

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parents[1] / "fixtures" / "imports"


async def post(team: TeamClient, fixture: str, fmt: str, **params: Any) -> httpx.Response:
    body = (FIXTURES / fixture).read_bytes()
    return await team.http.post("/v1/imports", content=body, params={"format": fmt, **params})


async def imported(team: TeamClient, fixture: str, fmt: str, **params: Any) -> dict[str, Any]:
    response = await post(team, fixture, fmt, **params)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_vllm_results_one_per_line_become_three_runs_with_the_files_figures(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    job = await imported(
        team,
        "vllm_results.jsonl",
        "vllm",
        hardware="L40S",
        gpu_count=4,
        usd_per_hour=7.0,
        name="llm-d base (vllm bench)",
    )
    assert job["imported"] is True and job["status"] == "succeeded"
    # The import is in the team's audit log, naming the job it made.
    log = (await team.http.get("/v1/audit", params={"limit": 200})).json()["items"]
    assert [e["action"] for e in log if e.get("target_id") == job["id"]] == ["job.import"]
    runs = job["runs"]
    assert [(r["mode"], r["level"]) for r in runs] == [
        ("rate", 10.0),
        ("rate", 30.0),
        ("burst", 900.0),
    ]
    first, second, burst = runs
    # Line 1 of the file: completed 300, duration 36.19546746500009, ...
    assert first["requests"] == {"total": 300, "succeeded": 300, "failed": 0, "errors": {}}
    assert first["duration_s"] == 36.19546746500009
    assert first["ttft_ms"]["mean"] == 54.592403276680365
    assert first["ttft_ms"]["p50"] == 52.79431650001243
    assert first["ttft_ms"]["p99"] == 89.80040712966002
    assert first["ttft_ms"]["std"] == 9.218280749895815
    assert first["tpot_ms"]["mean"] == 13.81029661989983
    assert first["tpot_ms"]["p99"] == 17.1377381639993
    assert first["itl_ms"]["p50"] == 13.049414999841247
    assert first["output_tokens_per_s"] == 2282.2747096685353
    assert first["total_tokens_per_s"] == 10562.316963296029
    assert first["requests_per_s"] == 8.288330584211705
    # total_input_tokens 299700 over the duration.
    assert first["input_tokens_per_s"] == pytest.approx(299700 / 36.19546746500009, rel=1e-12)
    assert second["ttft_ms"]["mean"] == 73.27519322778042
    assert second["requests"]["total"] == 900
    assert burst["ttft_ms"]["p99"] == 3155.812861540362
    assert burst["output_tokens_per_s"] == 10145.340773280393
    # vLLM saves `date` when the run ends: 20250530-195922.
    assert first["finished_at"] == "2025-05-30T19:59:22Z"
    # Priced at the request's USD 7 an hour, like any run (docs/figures.md, cost).
    assert first["cost"]["per_million_output_tokens_usd"] == pytest.approx(
        7.0 / (2282.2747096685353 * 3600) * 1e6, rel=1e-12
    )
    source = first["source"]
    assert source["tool"] == "vllm" and source["definitions"] == "vllm"
    assert source["metric_names"]["tpot_ms"].startswith("TPOT")
    assert source["differences"] and source["hardware_in_file"] == "4xNVIDIA_L40S"

    endpoint = (await team.http.get(f"/v1/endpoints/{job['endpoint_id']}")).json()
    assert endpoint["external"] is True
    assert endpoint["model"] == "meta-llama/Llama-3.2-3B-Instruct"
    assert endpoint["engine"] == "vllm" and endpoint["hardware"] == "L40S"
    assert endpoint["gpu_count"] == 4 and endpoint["name"] == "llm-d base (vllm bench)"
    stored = await db.fetch(
        "SELECT source_tool, workload_fingerprint, ttft_p50_ms FROM runs WHERE job_id = $1"
        " ORDER BY level_index",
        job["id"],
    )
    assert [r["source_tool"] for r in stored] == ["vllm"] * 3
    assert [r["workload_fingerprint"] for r in stored] == ["vllm-import"] * 3
    assert stored[0]["ttft_p50_ms"] == 52.79431650001243

    # A second file under the same name lands under the same external endpoint.
    again = await imported(team, "vllm_results.jsonl", "vllm", name="llm-d base (vllm bench)")
    assert again["endpoint_id"] == job["endpoint_id"] and again["id"] != job["id"]
    # Another model under that name would file its runs under the wrong deployment.
    response = await post(
        team, "aiperf_profile_export_aiperf.json", "aiperf", name="llm-d base (vllm bench)"
    )
    assert response.status_code == 409, response.text
    assert "this file measured openai/gpt-oss-20b" in response.json()["detail"]


async def test_guidellm_benchmarks_become_a_run_per_benchmark(team: TeamClient) -> None:
    job = await imported(team, "guidellm_benchmarks.json", "guidellm", engine="vllm")
    runs = job["runs"]
    assert [(r["mode"], r["level"]) for r in runs] == [("rate", 2.0), ("rate", 4.0)]
    first, second = runs
    # benchmarks[0].metrics: request_totals, time_to_first_token_ms.successful, ...
    assert first["requests"]["total"] == 2 and first["requests"]["succeeded"] == 2
    assert first["duration_s"] == 5.01964807510376
    assert first["ttft_ms"]["count"] == 2
    assert first["ttft_ms"]["mean"] == 11.481165885925293
    assert first["ttft_ms"]["p50"] == 11.276006698608398
    assert first["ttft_ms"]["p99"] == 11.686325073242188
    assert first["ttft_ms"]["std"] == 0.20515918731689453
    assert first["requests_per_s"] == 0.39843430656414264
    assert first["output_tokens_per_s"] == 3.1950675815128577
    assert second["ttft_ms"]["mean"] == 9.78386402130127
    assert second["requests_per_s"] == 0.7940882013937378
    assert second["output_tokens_per_s"] == 6.377131566888984
    source = first["source"]
    assert source["tool"] == "guidellm" and source["tool_version"] == "0.8.0.dev18"
    # GuideLLM's TPOT is its time_per_output_token_ms (first token included), not infercost's.
    assert source["metric_names"]["tpot_ms"] == "time_per_output_token_ms"
    endpoint = (await team.http.get(f"/v1/endpoints/{job['endpoint_id']}")).json()
    assert endpoint["model"] == "e2e-mock-model" and endpoint["engine"] == "vllm"
    assert endpoint["name"] == "guidellm: e2e-mock-model"


async def test_aiperf_summary_becomes_a_run_with_its_errors(team: TeamClient) -> None:
    job = await imported(team, "aiperf_profile_export_aiperf.json", "aiperf")
    (run,) = job["runs"]
    assert (run["mode"], run["level"]) == ("concurrency", 100.0)
    # request_count 200 (successful); error_summary: 81 cancelled, 3 server errors.
    assert run["requests"] == {
        "total": 284,
        "succeeded": 200,
        "failed": 84,
        "errors": {"RequestCancellationError": 81, "InternalServerError": 3},
    }
    assert run["duration_s"] == 15.196591969000002
    assert run["ttft_ms"]["mean"] == 1588.797775365
    assert run["ttft_ms"]["p50"] == 787.5439584999999
    assert run["ttft_ms"]["p95"] == 4051.42644575
    assert run["ttft_ms"]["min"] == 382.242961 and run["ttft_ms"]["max"] == 4121.087335
    assert run["e2e_ms"]["p99"] == 9381.628943169999
    assert run["requests_per_s"] == 13.16084556379392
    # AIPerf's own CSV of this run prints Output Token Throughput 1274.63 tokens/sec.
    assert run["output_tokens_per_s"] == pytest.approx(1274.63, abs=0.005)
    assert run["error_rate"] == pytest.approx(84 / 284)
    assert run["source"]["hardware_in_file"] == "NVIDIA RTX 6000 Ada Generation"
    endpoint = (await team.http.get(f"/v1/endpoints/{job['endpoint_id']}")).json()
    assert endpoint["model"] == "openai/gpt-oss-20b"


async def test_aiperf_records_are_stored_as_raw_samples(team: TeamClient) -> None:
    job = await imported(team, "aiperf_profile_export.jsonl", "aiperf", model="Qwen/Qwen3-0.6B")
    (run,) = job["runs"]
    assert run["requests"]["total"] == 2 and run["requests"]["succeeded"] == 1
    assert run["requests"]["errors"] == {"http_4xx": 1}
    assert run["ttft_ms"]["mean"] == 4.8984369999999995
    assert run["source"]["per_request"] is True
    page = (await team.http.get(f"/v1/runs/{run['id']}/requests")).json()
    ok, cancelled = page["items"]
    assert ok["n_out"] == 9 and ok["n_in"] == 550 and ok["error_class"] is None
    assert ok["e2e_ms"] == 297.52522799999997
    assert len(ok["chunk_times_ms"]) == 9
    assert ok["chunk_times_ms"][-1] == pytest.approx(4.8984369999999995 + 41.63866, abs=1e-9)
    assert cancelled["error_class"] == "http_4xx" and cancelled["status"] == 499
    assert cancelled["n_in"] == 550


async def test_an_external_endpoint_is_never_benchmarked(team: TeamClient) -> None:
    job = await imported(team, "aiperf_profile_export_aiperf.json", "aiperf")
    response = await team.http.post(
        "/v1/jobs",
        json={
            "endpoint_id": job["endpoint_id"],
            "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 8}},
            "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 2},
        },
    )
    assert response.status_code == 422, response.text
    assert "imported from another tool" in response.json()["detail"]


async def test_imported_rows_are_labelled_beside_infercosts_own(team: TeamClient) -> None:
    await imported(team, "vllm_results.jsonl", "vllm", hardware="L40S", gpu_count=4)
    await imported(team, "guidellm_benchmarks.json", "guidellm")
    page = (await team.http.get("/v1/comparisons")).json()
    by_fingerprint = {row["workload_fingerprint"]: row["definitions"] for row in page["items"]}
    assert by_fingerprint == {"vllm-import": "vllm", "guidellm-import": "guidellm"}
    assert any("definitions" in w and "guidellm, vllm" in w for w in page["warnings"])


@pytest.mark.parametrize(
    ("fmt", "body", "says"),
    [
        ("vllm", b"", "the body is empty"),
        ("vllm", b"<html>", "the body is not JSON"),
        ("vllm", b'{"duration": 3.0}', "no number `completed`"),
        ("vllm", b'{"completed": 3, "duration": 1}\n{"completed": ', "line 2 is not JSON"),
        ("guidellm", b'{"metadata": {}}', "no `benchmarks` list"),
        ("aiperf", b'{"time_to_first_token": {"avg": 3}}', "no `request_count`"),
    ],
)
async def test_a_bad_file_is_refused_saying_why_and_nothing_is_stored(
    team: TeamClient, db: asyncpg.Connection, fmt: str, body: bytes, says: str
) -> None:
    response = await team.http.post(
        "/v1/imports", content=body, params={"format": fmt, "model": "m"}
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert says in response.json()["detail"]
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE team_id = $1", team.team_id) == 0
    assert await db.fetchval("SELECT count(*) FROM endpoints WHERE team_id = $1", team.team_id) == 0


async def test_a_file_without_a_model_asks_for_one(team: TeamClient) -> None:
    response = await post(team, "aiperf_profile_export.jsonl", "aiperf")
    assert response.status_code == 422
    assert "pass model=" in response.json()["detail"]


async def test_unknown_hardware_and_a_benchmarked_endpoints_name_are_refused(
    team: TeamClient,
) -> None:
    response = await post(team, "vllm_results.jsonl", "vllm", hardware="no-such-gpu")
    assert response.status_code == 422 and "GET /v1/hardware" in response.json()["detail"]
    registered = await team.create_endpoint()
    response = await post(team, "vllm_results.jsonl", "vllm", name=registered["name"])
    assert response.status_code == 409, response.text
    assert "pass another name=" in response.json()["detail"]
    response = await team.http.post("/v1/imports", content=b"{}", params={"format": "csv"})
    assert response.status_code == 422 and "guidellm" in response.text


async def test_an_imported_job_reads_everywhere_a_job_is_read(team: TeamClient) -> None:
    job = await imported(
        team, "vllm_results.jsonl", "vllm", hardware="L40S", gpu_count=4, usd_per_hour=7.0
    )
    endpoint_id = job["endpoint_id"]
    for path in (
        "/v1/jobs",
        f"/v1/jobs/{job['id']}/runs",
        f"/v1/runs/{job['runs'][0]['id']}",
        f"/v1/jobs/{job['id']}/report",
        f"/v1/jobs/{job['id']}/export",
        f"/v1/endpoints/{endpoint_id}/history",
        "/v1/status",
        "/v1/endpoints",
    ):
        response = await team.http.get(path)
        assert response.status_code == 200, (path, response.text)
    listed = (await team.http.get("/v1/endpoints")).json()["items"]
    assert [e["external"] for e in listed] == [True]
    response = await team.http.post(
        "/v1/estimates",
        json={
            "model": "meta-llama/Llama-3.2-3B-Instruct",
            "traffic": {"requests_per_s": 5, "input_tokens": 1000, "output_tokens": 270},
            "slo": {"ttft_ms": {"p95": 500}},
        },
    )
    assert response.status_code == 200, response.text
    response = await team.http.post(f"/v1/endpoints/{endpoint_id}/check")
    assert response.status_code == 422 and "no server to probe" in response.json()["detail"]
