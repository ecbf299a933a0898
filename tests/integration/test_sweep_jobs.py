"""Sweeps end to end (load.mode "sweep"): a synchronous level, a throughput level, then rates
evenly spaced between what those two measured; early stops; the job's sweep block."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from sim.config import SimConfig
from sim.process import SimProcess, sim_process
from tests.conftest import TeamClient

#: Inadequacy that means the client set the pace (docs/cli-and-api.md's adequacy codes): a sweep
#: never lengthens a level for them.
CLIENT_SIDE = {"client_bound", "rate_not_held", "concurrency_not_held"}

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


def final_levels(sweep: dict[str, Any]) -> list[dict[str, Any]]:
    """The levels the sweep's decisions rest on: each level's last try."""
    return [lv for lv in sweep["levels"] if lv["superseded_by"] is None]


async def test_sweep_chooses_rates_between_its_closed_loop_levels(
    team: TeamClient, saturating_sim: SimProcess, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(base_url=saturating_sim.openai_base_url)
    # A loose SLO: every level passes, so the sweep measures every level it planned. Levels of
    # 8 s: about 145 requests at one user (55 ms each), enough for a p99.
    body = sweep_job(endpoint["id"], {"e2e_ms": {"p50": 60_000}}, duration_s=8.0)
    del body["load"]["requests_per_level"]
    response = await team.submit(body)
    assert response.status_code == 202, response.text
    submitted = response.json()
    assert submitted["load"]["arrival"] == "constant"
    assert submitted["load"]["levels"] is None
    final = await team.wait_job(submitted["id"], timeout=180)
    assert final["status"] == "succeeded", final["error"]
    assert final["progress"]["done"] == final["progress"]["total"] > 0

    sweep = final["sweep"]
    assert sweep["planned_levels"] == 5
    assert sweep["detail"]
    levels = final_levels(sweep)
    # "completed" only when every level's evidence was adequate; a loaded box may make a
    # level client-bound, and then the sweep must say so instead.
    if sweep["stopped"] == "completed":
        assert all(lv["adequate"] is True and lv["inadequate"] == [] for lv in levels)
    else:
        assert sweep["stopped"] == "inadequate", sweep
        assert any(lv["adequate"] is False for lv in levels), sweep
    if sweep["stopped"] == "inadequate" and len(levels) < 5:
        return  # two client-bound rate levels stopped it: what follows needs all five
    assert [(lv["kind"], lv["mode"]) for lv in levels] == [
        ("synchronous", "concurrency"),
        ("throughput", "concurrency"),
        ("rate", "rate"),
        ("rate", "rate"),
        ("rate", "rate"),
    ]
    assert [lv["level"] for lv in levels[:2]] == [1, 8]
    assert all(lv["why"] for lv in levels)

    # Each run keeps its own mode and level, and the sweep names it (first tries included).
    runs = {r["id"]: r for r in final["runs"]}
    assert len(runs) == len(sweep["levels"])
    assert [runs[lv["run_id"]]["mode"] for lv in levels] == [lv["mode"] for lv in levels]
    assert [runs[lv["run_id"]]["level"] for lv in levels] == pytest.approx(
        [lv["level"] for lv in levels]
    )
    assert [lv["requests_per_s"] for lv in levels] == [
        runs[lv["run_id"]]["requests_per_s"] for lv in levels
    ]

    # The simulator serves 4 at a time: the throughput level carries well over the
    # synchronous level's requests/s, and the rates lie strictly between, evenly spaced.
    sync_rps, throughput_rps = levels[0]["requests_per_s"], levels[1]["requests_per_s"]
    assert throughput_rps > 2 * sync_rps, (sync_rps, throughput_rps)
    rates = [lv["level"] for lv in levels[2:]]
    assert all(sync_rps < r < throughput_rps for r in rates), (sync_rps, rates, throughput_rps)
    step = (throughput_rps - sync_rps) / 4
    assert rates == pytest.approx([sync_rps + i * step for i in (1, 2, 3)], rel=1e-9)
    assert "rate 2 of 3" in levels[3]["why"]

    # Capacity over mixed modes: each adequate level is a load point at its measured
    # requests/s; inadequate ones are named, not used.
    capacity = final["capacity_at_slo"]
    adequate = [lv for lv in levels if lv["adequate"]]
    skipped = {s["run_id"] for s in capacity["skipped"]}
    assert skipped == {lv["run_id"] for lv in sweep["levels"] if not lv["adequate"]}
    if adequate:
        assert capacity["reason"] is None, capacity
        assert capacity["lower_bound"] is True
        assert capacity["requests_per_s"] == max(lv["requests_per_s"] for lv in adequate)

    stored = await db.fetchval("SELECT sweep FROM jobs WHERE id = $1", uuid.UUID(final["id"]))
    assert stored is not None and f'"{sweep["stopped"]}"' in stored


async def test_a_sweep_of_short_levels_lengthens_them_and_never_says_completed(
    team: TeamClient, saturating_sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=saturating_sim.openai_base_url)
    # 16 requests a level: about 0.9 s at one user, 0.2 s at eight. A longer try lasts at
    # most 4 x the first, so about 64 requests at most: still under the 100 a p99 needs.
    body = sweep_job(endpoint["id"], {"e2e_ms": {"p50": 60_000}})
    final = await team.run_job(body, timeout=180)
    sweep = final["sweep"]
    assert sweep["stopped"] == "inadequate", sweep
    assert "inadequate" in sweep["detail"]
    first, longer = sweep["levels"][0], sweep["levels"][1]
    assert first["adequate"] is False and "few_requests" in first["inadequate"]
    if CLIENT_SIDE.intersection(first["inadequate"]):
        # A busy machine set the first level's pace: measuring it longer would only measure
        # the client again, so it stands and the sweep goes on (docs/sweeps.md).
        assert first["superseded_by"] is None and longer["kind"] == "throughput", sweep
        assert longer["lengthened_from"] is None
        return
    assert (first["kind"], longer["kind"]) == ("synchronous", "synchronous")
    # The first try is superseded by a longer one that names it.
    assert first["superseded_by"] == 1 and first["duration_s"] is None
    assert longer["lengthened_from"] == 0 and longer["superseded_by"] is None
    assert longer["duration_s"] > 0 and "again for" in longer["why"]
    assert longer["adequate"] is False and "few_requests" in longer["inadequate"]
    assert longer["run_id"] != first["run_id"]
    runs = {r["id"]: r for r in final["runs"]}
    assert len(runs) == len(sweep["levels"])
    assert (
        runs[longer["run_id"]]["requests"]["succeeded"]
        > runs[first["run_id"]]["requests"]["succeeded"]
    )
    # Every level passed the loose SLO, but none is adequate: no capacity, and why.
    capacity = final["capacity_at_slo"]
    assert capacity["requests_per_s"] is None
    assert capacity["reason"].startswith("no adequate finished level met the SLO")
    assert {s["run_id"] for s in capacity["skipped"]} == set(runs)
    assert final["progress"]["done"] == final["progress"]["total"]


async def test_a_tight_slo_stops_the_sweep_after_two_failing_rates(
    team: TeamClient, saturating_sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=saturating_sim.openai_base_url)
    # TTFT is at least 20 ms, so every level fails a 1 ms median.
    body = sweep_job(endpoint["id"], {"ttft_ms": {"p50": 1}})
    final = await team.run_job(body, timeout=180)

    sweep = final["sweep"]
    assert sweep["stopped"] == "slo_failed_twice", sweep
    assert "two rate levels in a row" in sweep["detail"]
    # Its 16-request levels were too thin to stand, and the detail says so.
    assert "inadequate evidence at" in sweep["detail"]
    levels = final_levels(sweep)
    # Synchronous, throughput, then two failing rates: the third rate is never measured.
    assert [lv["kind"] for lv in levels] == ["synchronous", "throughput", "rate", "rate"]
    assert [lv["slo_passed"] for lv in levels] == [False] * 4
    assert len(final["runs"]) == len(sweep["levels"])
    assert final["progress"]["done"] == final["progress"]["total"]
    assert final["capacity_at_slo"]["requests_per_s"] is None


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


async def test_a_sweep_defaults_to_levels_of_a_duration(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    body = sweep_job(endpoint["id"], None)
    body["load"] = {"mode": "sweep"}
    response = await team.submit(body)
    assert response.status_code == 202, response.text
    job = response.json()
    await team.http.post(f"/v1/jobs/{job['id']}/cancel")
    assert job["load"]["duration_s"] == 30
    assert job["load"]["requests_per_level"] is None


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
