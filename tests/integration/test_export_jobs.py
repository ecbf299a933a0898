"""GET /v1/jobs/{id}/export and `infercost export`: one JSON Lines file per job that pandas
reads back, whose samples reproduce the worker's own summary."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cli import main
from sim.process import SimProcess
from tests.conftest import Api, TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


async def test_export_reads_back_with_pandas_and_reproduces_ttft_p50(
    api_server: Api, team: TeamClient, sim: SimProcess, tmp_path: Path
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url, api_key="sk-export-secret")
    job = await team.run_job(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 6}},
            "load": {
                "mode": "concurrency",
                "levels": [1, 4],
                "requests_per_level": 25,
                "warmup_requests": 3,
            },
        }
    )
    # The worker judges the runs just after it stores the job's status (docs/comparisons.md):
    # exported before that, a run reads `change: null` and a later export differs.
    await team.judged_runs(job)

    response = await team.http.get(
        f"/v1/jobs/{job['id']}/export", headers={"Accept-Encoding": "identity"}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert "content-encoding" not in response.headers
    path = tmp_path / "job.jsonl"
    path.write_bytes(response.content)

    frame = pd.read_json(path, lines=True)
    # One job line first, then each run followed by its samples.
    kinds = frame["kind"].tolist()
    assert kinds[0] == "job"
    assert kinds.count("job") == 1
    assert kinds.count("run") == 2
    assert kinds.count("sample") == 2 * (25 + 3)
    head = json.loads(path.read_text().splitlines()[0])
    assert head["id"] == job["id"]
    assert head["format"] == "infercost-export/1"
    assert head["status"] == "succeeded"
    assert head["workload"]["output_tokens"]["mean"] == 6
    assert "runs" not in head
    # What was measured travels with it, never its secret.
    assert head["endpoint"]["id"] == endpoint["id"]
    assert head["endpoint"]["api"] == "openai-chat"
    assert head["endpoint"]["model"] == "sim-model"
    assert "sk-export-secret" not in response.text

    runs = frame[frame["kind"] == "run"]
    samples = frame[frame["kind"] == "sample"]
    assert runs["id"].tolist() == [r["id"] for r in job["runs"]]
    assert runs["level_index"].tolist() == [0, 1]
    for _, run in runs.iterrows():
        mine = samples[samples["run_id"] == run["id"]]
        assert mine["seq"].tolist() == list(range(28))
        assert int(mine["warmup"].sum()) == 3
        measured = mine[~mine["warmup"].astype(bool) & mine["error_class"].isna()]
        assert len(measured) == 25
        # An independent reference: the worker summarised the run when it ended; the file's
        # raw samples, with NumPy's linear interpolation (docs/figures.md), must agree.
        p50 = float(np.percentile(measured["ttft_ms"].to_numpy(dtype=float), 50))
        assert p50 == pytest.approx(run["ttft_ms"]["p50"], rel=1e-9, abs=1e-9)
        assert run["ttft_ms"]["count"] == 25
        # Every sample's first event is its TTFT, never sooner than the sim's 50 ms.
        assert (measured["ttft_ms"] >= sim.config.ttft_ms).all()
        assert all(len(c) == 6 for c in measured["chunk_times_ms"])

    # Gzipped on request: the same lines.
    zipped = await team.http.get(
        f"/v1/jobs/{job['id']}/export", headers={"Accept-Encoding": "gzip"}
    )
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.content == response.content  # httpx decoded it

    # The CLI saves it; a .gz name keeps it compressed on disk.
    saved = tmp_path / "saved.jsonl.gz"
    env = {"INFERCOST_URL": api_server.url, "INFERCOST_TOKEN": team.key}
    result = await asyncio.to_thread(
        CliRunner().invoke, main, ["export", job["id"][:8], "-o", str(saved)], env=env
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"saved {saved} (")
    assert gzip.decompress(saved.read_bytes()) == response.content
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".infercost-export-")]


async def test_export_of_another_teams_job_is_404(
    team: TeamClient, new_team: object, sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    job = (
        await team.submit(
            {
                "endpoint_id": endpoint["id"],
                "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 2}},
                "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 2},
            }
        )
    ).json()
    other: TeamClient = await new_team()  # type: ignore[operator]
    response = await other.http.get(f"/v1/jobs/{job['id']}/export")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")


async def test_a_measured_job_exports_as_valid_llmd_reports_with_its_own_figures(
    api_server: Api, team: TeamClient, sim: SimProcess, tmp_path: Path
) -> None:
    schema_path = (
        Path(__file__).parents[1] / "fixtures" / "imports" / "llmd_br_v0_2_json_schema.json"
    )
    validator = jsonschema.Draft202012Validator(json.loads(schema_path.read_text()))
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url, hardware="H200-SXM")
    job = await team.run_job(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": {"mean": 32, "std": 4}, "output_tokens": {"mean": 6}},
            "load": {"mode": "concurrency", "levels": [1, 2], "requests_per_level": 12},
        }
    )
    response = await team.http.get(f"/v1/jobs/{job['id']}/export", params={"format": "llmd"})
    assert response.status_code == 200, response.text
    reports = [json.loads(line) for line in response.text.splitlines()]
    assert len(reports) == 2
    for report, run in zip(reports, job["runs"], strict=True):
        assert not list(validator.iter_errors(report))
        assert report["run"]["uid"] == run["id"]
        load = report["scenario"]["load"]["standardized"]
        assert load["tool"] == "infercost" and load["concurrency"] == run["level"]
        assert load["input_seq_len"] == {"distribution": "gaussian", "value": 32, "std_dev": 4}
        aggregate = report["results"]["request_performance"]["aggregate"]
        assert aggregate["requests"]["total"] == run["requests"]["total"] == 12
        # The worker's own summary, moved into the report's places.
        ttft = aggregate["latency"]["time_to_first_token"]
        assert ttft["mean"] == run["ttft_ms"]["mean"] and ttft["p99p9"] == run["ttft_ms"]["p999"]
        assert aggregate["latency"]["request_latency"]["p50"] == run["e2e_ms"]["p50"]
        assert aggregate["throughput"]["output_token_rate"]["mean"] == run["output_tokens_per_s"]
    engine = reports[0]["scenario"]["stack"][0]["standardized"]
    assert engine["accelerator"]["model"] == "H200-SXM"

    saved = tmp_path / "job.llmd.jsonl"
    env = {"INFERCOST_URL": api_server.url, "INFERCOST_TOKEN": team.key}
    result = await asyncio.to_thread(
        CliRunner().invoke,
        main,
        ["export", job["id"], "--format", "llmd", "-o", str(saved)],
        env=env,
    )
    assert result.exit_code == 0, result.output
    assert saved.read_bytes() == response.content
