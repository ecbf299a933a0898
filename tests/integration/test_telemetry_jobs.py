"""Telemetry during a run: the endpoint's metrics URLs are scraped while the level runs;
values are stored and summarised, and a URL that is down, hangs or returns garbage is
listed as a telemetry error while the run goes on."""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Iterator

import asyncpg
import pytest

from sim.config import SimConfig
from sim.process import SimProcess, sim_process
from tests.conftest import TeamClient, free_port, insert_finished_run
from tests.exporter import SECRET, Exporter, running_exporter

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    with running_exporter() as server:
        yield server


async def test_bad_metrics_urls_are_errors_and_the_run_goes_on(
    team: TeamClient, sim: SimProcess, exporter: Exporter
) -> None:
    good = sim.base_url + "/metrics"
    refused = f"http://127.0.0.1:{free_port()}/metrics"
    hanging_url = exporter.base + "/hang"  # answers after the scraper's 2 s timeout
    garbage_url = exporter.base + "/html"
    endpoint = await team.create_endpoint(
        base_url=sim.openai_base_url, metrics_urls=[good, refused, hanging_url, garbage_url]
    )
    response = await team.submit(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 16}},
            "load": {
                "mode": "concurrency",
                "levels": [4],
                "requests_per_level": 60,
                "telemetry_interval_s": 0.5,
            },
        }
    )
    assert response.status_code == 202, response.text
    job = await team.wait_job(response.json()["id"], timeout=90)
    assert job["status"] == "succeeded", job["error"]
    run = job["runs"][0]
    assert run["requests"]["failed"] == 0

    telemetry = run["telemetry"]
    errors = " | ".join(telemetry["errors"])
    assert "connection refused" in errors, errors
    assert "timed out" in errors, errors
    assert "not Prometheus text" in errors, errors
    assert refused in errors and hanging_url in errors and garbage_url in errors
    # The simulator's own engine gauges were read over the window.
    assert "vllm" in telemetry["sources"]
    assert telemetry["requests_running_mean"] is not None
    assert 0 < telemetry["requests_running_mean"] <= 4.5

    # Every scraped value is stored; the series come back as JSON and as CSV.
    series = (await team.http.get(f"/v1/runs/{run['id']}/telemetry")).json()
    assert "vllm:num_requests_running" in series["metrics"]
    running = [s for s in series["series"] if s["metric"] == "vllm:num_requests_running"]
    assert running and len(running[0]["points"]) >= 3
    times = [t for t, _ in running[0]["points"]]
    assert times == sorted(times)
    assert series["errors"] == telemetry["errors"]

    only = await team.http.get(
        f"/v1/runs/{run['id']}/telemetry",
        params={"metric": "vllm:num_requests_running"},
        headers={"Accept": "text/csv"},
    )
    assert only.status_code == 200
    rows = list(csv.DictReader(io.StringIO(only.text)))
    assert rows and {r["metric"] for r in rows} == {"vllm:num_requests_running"}
    assert set(rows[0]) == {"t", "url", "metric", "labels", "value"}


@pytest.fixture(scope="module")
def llama_sim() -> Iterator[SimProcess]:
    """The simulator as llama-server with 4 slots: a fifth request waits (is deferred)."""
    config = SimConfig.for_engine("llamacpp", port=0, max_concurrency=4, ttft_ms=40, itl_ms=10)
    with sim_process(config) as sim:
        yield sim


async def test_llamacpp_telemetry_shows_the_queue_in_front_of_the_engine(
    team: TeamClient, llama_sim: SimProcess
) -> None:
    """16 users on 4 slots: up to 12 requests are deferred, and the run, its report and its
    stored series say so; the server's token count is held against the client's."""
    endpoint = await team.create_endpoint(
        base_url=llama_sim.openai_base_url, metrics_urls=[llama_sim.base_url + "/metrics"]
    )
    response = await team.submit(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 16}},
            "load": {
                "mode": "concurrency",
                "levels": [16],
                "requests_per_level": 96,
                "telemetry_interval_s": 0.25,
            },
        }
    )
    assert response.status_code == 202, response.text
    job = await team.wait_job(response.json()["id"], timeout=120)
    assert job["status"] == "succeeded", job["error"]
    run = job["runs"][0]
    telemetry = run["telemetry"]
    assert telemetry["errors"] == []
    assert telemetry["sources"] == ["llamacpp"]
    # The simulator lets 4 generate at once, so at most 4 run and at most 16 - 4 wait.
    assert 0 < telemetry["requests_running_max"] <= 4
    assert 0 < telemetry["requests_waiting_max"] <= 12
    assert telemetry["requests_waiting_mean"] > 0
    assert telemetry["busy_slots_per_decode"] is not None
    assert telemetry["notes"] and telemetry["notes"][0].startswith(
        f"requests queued in front of the engine: up to {telemetry['requests_waiting_max']:g} "
        "waited for a free slot"
    )
    # The engine counted the same tokens the client received, over nearly the same window.
    assert telemetry["generation_tokens_per_s"] == pytest.approx(
        run["output_tokens_per_s"], rel=0.3
    )
    assert telemetry["prompt_tokens_per_s"] is not None

    html = (await team.http.get(f"/v1/jobs/{job['id']}/report")).text
    assert '<h2 id="telemetry">Engine telemetry</h2>' in html
    assert "requests queued in front of the engine" in html
    series = (await team.http.get(f"/v1/runs/{run['id']}/telemetry")).json()
    assert "llamacpp:requests_deferred" in series["metrics"]
    assert "llamacpp:n_tokens_max" not in series["metrics"]  # not mapped, not stored


async def test_hostile_metrics_urls_leave_no_trace_of_their_answers(
    team: TeamClient, sim: SimProcess, exporter: Exporter
) -> None:
    """An error page, a redirect, a page that is not Prometheus text and one full of
    unknown series and labels: the run stores and serves short reasons and known series
    only, and the text those pages carried appears nowhere."""
    urls = {
        name: exporter.base + path
        for name, path in {
            "404": "/secret-404",
            "redirect": "/redirect-away",
            "garbage": "/garbage",
            "noisy": "/noisy",
            "llamacpp": "/llamacpp",
        }.items()
    }
    endpoint = await team.create_endpoint(
        base_url=sim.openai_base_url, metrics_urls=[sim.base_url + "/metrics", *urls.values()]
    )
    response = await team.submit(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 16}},
            "load": {
                "mode": "concurrency",
                "levels": [2],
                "requests_per_level": 20,
                "telemetry_interval_s": 0.5,
            },
        }
    )
    assert response.status_code == 202, response.text
    job = await team.wait_job(response.json()["id"], timeout=90)
    assert job["status"] == "succeeded", job["error"]
    run = job["runs"][0]
    telemetry = run["telemetry"]

    by_url = {e.split(": ", 1)[0].removeprefix("telemetry from "): e for e in telemetry["errors"]}
    assert ": HTTP 404: nothing at this path" in by_url[urls["404"]]
    assert ": HTTP 302: redirects to internal.example;" in by_url[urls["redirect"]]
    assert ": answered something that is not Prometheus text" in by_url[urls["garbage"]]
    assert urls["noisy"] not in by_url and urls["llamacpp"] not in by_url
    assert set(telemetry["sources"]) == {"vllm", "llamacpp"}
    assert "llamacpp:n_tokens_max" in telemetry["unmapped"]
    assert "vllm:some_new_gauge" in telemetry["unmapped"]

    series = await team.http.get(f"/v1/runs/{run['id']}/telemetry")
    as_csv = await team.http.get(f"/v1/runs/{run['id']}/telemetry", headers={"Accept": "text/csv"})
    assert series.status_code == as_csv.status_code == 200
    for text in (json.dumps(job), series.text, as_csv.text):
        assert SECRET not in text
        assert SECRET.replace("-", "_") not in text
    body = series.json()
    # Only mapped metrics are stored, with only their known labels.
    assert "llamacpp:requests_deferred" in body["metrics"]
    assert not any(m.startswith(("python_", "process_", "corp_")) for m in body["metrics"])
    assert "vllm:time_to_first_token_seconds_bucket" not in body["metrics"]
    noisy = [s for s in body["series"] if s["url"] == urls["noisy"]]
    assert noisy and {tuple(s["labels"]) for s in noisy} == {("model_name",)}


async def test_a_run_without_metrics_urls_has_null_telemetry(
    team: TeamClient, sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    response = await team.submit(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
            "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 3},
        }
    )
    job = await team.wait_job(response.json()["id"], timeout=60)
    telemetry = job["runs"][0]["telemetry"]
    assert telemetry["gpu_util_mean"] is None
    assert telemetry["errors"] == []
    series = (await team.http.get(f"/v1/runs/{job['runs'][0]['id']}/telemetry")).json()
    assert series == {"run_id": job["runs"][0]["id"], "metrics": [], "series": [], "errors": []}


async def test_rows_of_unmapped_metrics_stored_earlier_are_not_served(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    """Runs measured before the scraper filtered stored whatever an exporter published;
    reads serve only the metrics the mapping knows."""
    endpoint = await team.create_endpoint()
    _, run_id = await insert_finished_run(db, team.team_id, endpoint["id"])
    await db.executemany(
        "INSERT INTO telemetry_samples (run_id, t, url, metric, labels, value)"
        " VALUES ($1, $2, 'http://e/metrics', $3, '{}', 1)",
        [
            (uuid.UUID(run_id), 0.0, "vllm:num_requests_running"),
            (uuid.UUID(run_id), 0.0, f"corp_{SECRET.replace('-', '_')}"),
            (uuid.UUID(run_id), 0.0, "python_gc_objects_collected_total"),
        ],
    )
    body = (await team.http.get(f"/v1/runs/{run_id}/telemetry")).json()
    assert body["metrics"] == ["vllm:num_requests_running"]
    assert [s["metric"] for s in body["series"]] == ["vllm:num_requests_running"]
    asked = await team.http.get(
        f"/v1/runs/{run_id}/telemetry",
        params={"metric": "python_gc_objects_collected_total"},
        headers={"Accept": "text/csv"},
    )
    assert asked.status_code == 200
    assert asked.text.strip().splitlines() == ["t,url,metric,labels,value"]
