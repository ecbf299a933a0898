"""An estimate from a request log, computed by hand to the cent: a 19-minute log whose busiest
minutes of four 5-minute intervals need 2, 2, 3 and 2 replicas of 1 request/s planned to 80%,
priced at USD 4 an hour; the hosted API priced from the log's own token counts."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.conftest import ADEQUATE, TeamClient, insert_finished_job
from tests.traffic_files import infercost_csv

pytestmark = pytest.mark.integration

MODEL = "llama-from-a-log"
SLO = {"ttft_ms": {"p95": 100}}
#: Requests in each minute of the log; the last minute holds only the last request, at
#: 1,140 s exactly, so the log lasts 1,140 s.
MINUTES = [30, 60, 90, 20, 10, 40, 70, 50, 20, 10, 60, 130, 100, 50, 40, 50, 60, 40, 20, 1]


def log_times() -> list[float]:
    """Each minute's requests spread evenly inside it, the first at 0 and the last at 1,140."""
    times: list[float] = []
    for minute, count in enumerate(MINUTES[:-1]):
        times += [minute * 60 + 59.0 * k / count for k in range(count)]
    return [*times, 1140.0]


@pytest.fixture
async def log(team: TeamClient) -> dict[str, Any]:
    times = log_times()
    body = infercost_csv(times, [(500, 100)] * len(times))
    response = await team.http.post(
        "/v1/traffic", content=body, params={"format": "infercost", "name": "shop-peak"}
    )
    assert response.status_code == 201, response.text
    read = dict(response.json())
    assert read["requests"] == 951 and read["duration_s"] == 1140.0
    return read


@pytest.fixture
async def replica(team: TeamClient, db: asyncpg.Connection) -> dict[str, Any]:
    """An endpoint at USD 4 an hour whose capacity at the SLO is exactly 1 request/s: the
    level at 1 request/s uses the whole limit (margin 1.0), the one at 2 fails (1.4)."""
    endpoint = await team.create_endpoint(model=MODEL, usd_per_hour=4.0)
    await insert_finished_job(
        db,
        team.team_id,
        endpoint["id"],
        [
            (1, 0.5, 50.0, ADEQUATE, False),
            (2, 1.0, 100.0, ADEQUATE, False),
            (4, 2.0, 140.0, ADEQUATE, False),
        ],
        slo=SLO,
        input_tokens=500,
        output_tokens=100,
    )
    return endpoint


async def estimate(team: TeamClient, **body: Any) -> dict[str, Any]:
    payload = {"model": MODEL, "slo": SLO, "include_projections": False, **body}
    response = await team.http.post("/v1/estimates", json=payload)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_fleets_from_a_log_agree_with_the_hand_computation(
    team: TeamClient, log: dict[str, Any], replica: dict[str, Any]
) -> None:
    await team.create_endpoint(
        name="hosted",
        model=MODEL,
        hardware=None,
        usd_per_hour=None,
        usd_per_million_input_tokens=0.5,
        usd_per_million_output_tokens=1.5,
    )
    body = await estimate(team, traffic_id=log["id"])
    traffic = body["traffic"]
    # Sized for the busiest minute: 130 requests from 660 s, 130 / 60 requests/s.
    assert traffic["traffic_id"] == log["id"] and traffic["name"] == "shop-peak"
    assert traffic["requests_per_s"] == pytest.approx(130 / 60)
    assert traffic["mean_requests_per_s"] == pytest.approx(951 / 1140)
    assert traffic["peak_to_mean"] == pytest.approx((130 / 60) / (951 / 1140))
    assert (traffic["input_tokens"], traffic["output_tokens"]) == (500, 100)

    self_hosted = next(c for c in body["candidates"] if c["kind"] == "self_hosted")
    assert self_hosted["capacity_rps"] == pytest.approx(1.0)
    # The peak's sizing: ceil(2.1667 / 0.8) = 3 replicas, USD 12 an hour.
    assert self_hosted["replicas"] == 3 and self_hosted["usd_per_hour"] == pytest.approx(12.0)
    fleets = self_hosted["fleets"]
    assert (fleets["interval_s"], fleets["lag_s"], fleets["lag_intervals"]) == (300, 300, 1)
    assert fleets["min_replicas"] == 1 and fleets["usd_per_replica_hour"] == 4.0
    intervals = fleets["intervals"]
    assert [i["start_s"] for i in intervals] == [0, 300, 600, 900]
    assert [i["length_s"] for i in intervals] == [300, 300, 300, 240]
    assert [i["requests"] for i in intervals] == [210, 190, 380, 171]
    assert [i["demand_rps"] for i in intervals] == pytest.approx([1.5, 70 / 60, 130 / 60, 1.0])
    assert [i["needed"] for i in intervals] == [2, 2, 3, 2]
    assert [i["autoscaled"] for i in intervals] == [2, 2, 2, 3]
    assert [i["at_risk"] for i in intervals] == [False, False, True, False]
    # Fixed: 3 x 1,140 s = 0.95 replica-hours x USD 4 = USD 3.80; a day: 3.80 x 86,400 /
    # 1,140 = USD 288.00; per million output tokens: 3.80 / 95,100 x 1e6 = USD 39.96.
    fixed = fleets["fixed"]
    assert fixed["replicas"] == 3
    assert round(fixed["usd"], 2) == 3.80
    assert round(fixed["usd_per_day"], 2) == 288.00
    assert round(fixed["per_million_output_tokens_usd"], 2) == 39.96
    assert round(fixed["mean_utilization"], 4) == round(951 / 1140 / 3, 4)
    # Autoscaled: (2 x 300 x 3 + 3 x 240) s = 0.7 replica-hours = USD 2.80; a day USD
    # 212.21; per million USD 29.44; at risk: interval 2, 380 of 951 requests.
    auto = fleets["autoscaled"]
    assert round(auto["usd"], 2) == 2.80
    assert round(auto["usd_per_day"], 2) == 212.21
    assert round(auto["per_million_output_tokens_usd"], 2) == 29.44
    assert round(auto["mean_replicas"], 4) == round(2520 / 1140, 4)
    assert auto["slo_risk"] == {
        "intervals": [2],
        "requests": 380,
        "share_of_requests": pytest.approx(380 / 951),
    }
    assert fleets["cheaper"] == "autoscaled"
    assert round(fleets["saving_usd_per_day"], 2) == 75.79
    assert (
        "USD 288.00 a day as a fixed fleet of 3 replica(s) and USD 212.21 autoscaled"
        in (body["explanation"])
    )
    assert "cheaper by USD 75.79 a day (26%)" in body["explanation"]
    assert "1 of 4 intervals (40.0% of requests)" in body["explanation"]

    # The hosted API costs the log's own tokens: 951 x (500 x 0.5 + 100 x 1.5) / 1e6 = USD
    # 0.3804 over 1,140 s, so USD 1.2013 an hour.
    hosted = next(c for c in body["candidates"] if c["kind"] == "hosted_api")
    assert hosted["fleets"] is None
    assert round(hosted["usd_per_hour"], 4) == round(0.3804 / 1140 * 3600, 4)
    assert any("request log 'shop-peak'" in a for a in body["assumptions"])


async def test_plan_settings_and_refusals(
    team: TeamClient, log: dict[str, Any], replica: dict[str, Any]
) -> None:
    # 10-minute intervals, a 10-minute lag, at least 3 replicas: 3 and 3 needed.
    body = await estimate(
        team, traffic_id=log["id"], fleets={"interval_s": 600, "lag_s": 600, "min_replicas": 3}
    )
    fleets = body["candidates"][0]["fleets"]
    assert [i["needed"] for i in fleets["intervals"]] == [3, 3]
    assert fleets["lag_intervals"] == 1 and fleets["cheaper"] == "fixed"
    assert fleets["autoscaled"]["slo_risk"]["intervals"] == []

    async def refused(**extra: Any) -> dict[str, Any]:
        payload = {"model": MODEL, "slo": SLO, **extra}
        response = await team.http.post("/v1/estimates", json=payload)
        assert response.status_code == 422, response.text
        return dict(response.json())

    both = await refused(traffic_id=log["id"], traffic={"requests_per_s": 1})
    assert "not both" in both["detail"]
    nothing = await refused()
    assert "traffic_id" in nothing["detail"]
    stray = await refused(traffic={"requests_per_s": 1, "input_tokens": 5, "output_tokens": 5},
                          fleets={"interval_s": 300})  # fmt: skip
    assert "request log" in stray["detail"]
    odd = await refused(traffic_id=log["id"], fleets={"interval_s": 90})
    assert "interval_s" in odd["detail"]
    missing = await refused(traffic_id="00000000-0000-4000-8000-000000000000")
    assert "GET /v1/traffic" in missing["detail"]
