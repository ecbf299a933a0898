"""Sweeps end to end (load.mode "sweep"): a synchronous level, a throughput level, then rates
evenly spaced between what those two measured; early stops; the job's sweep block."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from infercost.sim.config import SimConfig
from infercost.sim.process import SimProcess, sim_process
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


@pytest.fixture(scope="module")
def saturating_sim() -> Iterator[SimProcess]:
    """A simulator that serves 4 requests at a time (the rest wait): 20 ms to the first
    token, 5 ms per token, so an 8-token request takes about 55 ms."""
    config = SimConfig(port=0, ttft_ms=20.0, itl_ms=5.0, max_concurrency=4, model="sim-model")
    with sim_process(config) as sim:
        yield sim


def sweep_job(endpoint_id: str, slo: dict[str, Any] | None, **load: Any) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "mode": "sweep",
        "rate_levels": 3,
        "max_concurrency": 8,
        "requests_per_level": 16,
        "warmup_requests": 2,
    }
    plan.update(load)
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 8}},
        "load": plan,
        "slo": slo,
    }


async def test_sweep_chooses_rates_between_its_closed_loop_levels(
    team: TeamClient, saturating_sim: SimProcess, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(base_url=saturating_sim.openai_base_url)
    # A loose SLO: every level passes, so the sweep measures every level it planned.
    response = await team.submit(sweep_job(endpoint["id"], {"e2e_ms": {"p50": 60_000}}))
    assert response.status_code == 202, response.text
    submitted = response.json()
    assert submitted["progress"] == {"done": 0, "total": 5 * 18}
    assert submitted["load"]["arrival"] == "constant"
    assert submitted["load"]["levels"] is None
    final = await team.wait_job(submitted["id"], timeout=90)
    assert final["status"] == "succeeded", final["error"]
    assert final["progress"] == {"done": 5 * 18, "total": 5 * 18}

    sweep = final["sweep"]
    assert sweep["stopped"] == "completed", sweep
    assert sweep["planned_levels"] == 5
    assert sweep["detail"]
    levels = sweep["levels"]
    assert [(lv["index"], lv["kind"], lv["mode"]) for lv in levels] == [
        (0, "synchronous", "concurrency"),
        (1, "throughput", "concurrency"),
        (2, "rate", "rate"),
        (3, "rate", "rate"),
        (4, "rate", "rate"),
    ]
    assert [lv["level"] for lv in levels[:2]] == [1, 8]
    assert all(lv["why"] for lv in levels)

    # Each run keeps its own mode and level, and the sweep names it.
    runs = final["runs"]
    assert [r["mode"] for r in runs] == ["concurrency", "concurrency", "rate", "rate", "rate"]
    assert [r["id"] for r in runs] == [lv["run_id"] for lv in levels]
    assert [r["level"] for r in runs] == pytest.approx([lv["level"] for lv in levels])
    assert [lv["requests_per_s"] for lv in levels] == [r["requests_per_s"] for r in runs]

    # The simulator serves 4 at a time: the throughput level carries well over the
    # synchronous level's requests/s, and the rates lie strictly between, evenly spaced.
    sync_rps, throughput_rps = runs[0]["requests_per_s"], runs[1]["requests_per_s"]
    assert throughput_rps > 2 * sync_rps, (sync_rps, throughput_rps)
    rates = [lv["level"] for lv in levels[2:]]
    assert all(sync_rps < r < throughput_rps for r in rates), (sync_rps, rates, throughput_rps)
    step = (throughput_rps - sync_rps) / 4
    assert rates == pytest.approx([sync_rps + i * step for i in (1, 2, 3)], rel=1e-9)
    assert "rate 2 of 3" in levels[3]["why"]

    # Capacity over mixed modes: each level is a load point at its measured requests/s.
    capacity = final["capacity_at_slo"]
    assert capacity["reason"] is None, capacity
    assert capacity["lower_bound"] is True
    assert capacity["requests_per_s"] == max(r["requests_per_s"] for r in runs)

    stored = await db.fetchval("SELECT sweep FROM jobs WHERE id = $1", uuid.UUID(final["id"]))
    assert stored is not None and '"completed"' in stored


async def test_a_tight_slo_stops_the_sweep_after_two_failing_rates(
    team: TeamClient, saturating_sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=saturating_sim.openai_base_url)
    # TTFT is at least 20 ms, so every level fails a 1 ms median.
    body = sweep_job(endpoint["id"], {"ttft_ms": {"p50": 1}})
    final = await team.run_job(body, timeout=90)

    sweep = final["sweep"]
    assert sweep["stopped"] == "slo_failed_twice", sweep
    assert "two rate levels in a row" in sweep["detail"]
    # Synchronous, throughput, then two failing rates: the third rate is never measured.
    assert [lv["kind"] for lv in sweep["levels"]] == ["synchronous", "throughput", "rate", "rate"]
    assert [lv["slo_passed"] for lv in sweep["levels"]] == [False] * 4
    assert len(final["runs"]) == 4
    # The plan counted five levels; the early stop brings the total down to what ran.
    assert final["progress"] == {"done": 4 * 18, "total": 4 * 18}
    assert final["capacity_at_slo"]["reason"] == "no finished level met the SLO"


@pytest.mark.parametrize(
    ("load", "field", "hint"),
    [
        ({"mode": "sweep", "levels": [1, 2]}, "load.levels", "chooses its own levels"),
        ({"mode": "sweep", "max_concurrency": 100_000}, "load.max_concurrency", "limit"),
        ({"mode": "sweep", "burstiness": 0.5}, "load.burstiness", "gamma"),
        ({"mode": "concurrency"}, "load.levels", "sweep"),
        ({"mode": "concurrency", "levels": [1], "rate_levels": 3}, "load.rate_levels", "sweep"),
        ({"mode": "rate", "levels": [1], "max_error_rate": 0.1}, "load.max_error_rate", "sweep"),
    ],
)
async def test_invalid_sweep_plans(
    team: TeamClient, load: dict[str, Any], field: str, hint: str
) -> None:
    endpoint = await team.create_endpoint()
    body = sweep_job(endpoint["id"], None)
    body["load"] = load
    response = await team.submit(body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    detail = response.json()["detail"]
    assert detail.startswith(f"{field}:"), detail
    assert hint in detail, detail
    assert (await team.http.get("/v1/jobs")).json()["total"] == 0, "an invalid job was stored"


async def test_sweep_defaults_are_stored(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    body = sweep_job(endpoint["id"], None)
    body["load"] = {"mode": "sweep", "requests_per_level": 2}
    response = await team.submit(body)
    assert response.status_code == 202, response.text
    job = response.json()
    await team.http.post(f"/v1/jobs/{job['id']}/cancel")
    load = job["load"]
    assert (load["rate_levels"], load["max_concurrency"], load["max_error_rate"]) == (5, 64, 0.05)
    assert load["arrival"] == "constant"
    assert job["progress"]["total"] == 7 * 2
