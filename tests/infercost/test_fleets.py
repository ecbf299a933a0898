"""Fleets from a log, computed by hand: the worked example of docs/figures.md (needed 2, 2,
3, 2 with a lag of one interval), its costs to the cent, the lag's rounding and the edges."""

from __future__ import annotations

import pytest

from infercost.errors import InvalidInput
from infercost.planning.fleets import lag_intervals, plan_fleets, replicas_needed

#: Twenty minutes of a log (the last holds its one last request, at 1,140 s): four 5-minute
#: intervals whose busiest minutes hold 90, 70, 130 and 60 requests.
MINUTES = [30, 60, 90, 20, 10, 40, 70, 50, 20, 10, 60, 130, 100, 50, 40, 50, 60, 40, 20, 1]


def test_the_worked_example_by_hand() -> None:
    # One replica: 1 request/s at the SLO, planned to 80%, USD 4 an hour.
    fleets = plan_fleets(
        MINUTES,
        duration_s=1140.0,
        output_tokens=95_100,
        capacity_rps=1.0,
        usd_per_hour=4.0,
        target_utilization=0.8,
    )
    # Demand: 90/60 = 1.5, 70/60, 130/60, 60/60 requests/s; over 0.8 request/s a replica:
    # 1.875 -> 2, 1.458 -> 2, 2.708 -> 3, 1.25 -> 2.
    assert [p.demand_rps for p in fleets.intervals] == pytest.approx([1.5, 70 / 60, 130 / 60, 1.0])
    assert [p.needed for p in fleets.intervals] == [2, 2, 3, 2]
    assert [p.requests for p in fleets.intervals] == [210, 190, 380, 171]
    assert [p.length_s for p in fleets.intervals] == [300, 300, 300, 240]
    # k = round(300 / 300) = 1: the autoscaled fleet runs 2, 2, 2, 3; interval 2 is short.
    assert fleets.lag_intervals == 1
    assert [p.autoscaled for p in fleets.intervals] == [2, 2, 2, 3]
    assert fleets.at_risk == [2]
    assert fleets.requests_at_risk == 380
    assert fleets.requests_at_risk_share == pytest.approx(380 / 951)
    # Fixed: 3 replicas for 1,140 s = 0.95 replica-hours, USD 3.80 over the log,
    # 3.80 x 86,400 / 1,140 = USD 288.00 a day, 3.80 / 95,100 x 1e6 = USD 39.96 per
    # million output tokens; 951 / 1,140 requests/s over 3 replicas of 1 = 27.8% busy.
    assert fleets.fixed_replicas == 3
    assert fleets.fixed.replica_hours == pytest.approx(0.95)
    assert round(fleets.fixed.usd, 2) == 3.80
    assert round(fleets.fixed.usd_per_day, 2) == 288.00
    assert round(fleets.fixed.per_million_output_tokens_usd or 0, 2) == 39.96
    assert fleets.fixed.mean_utilization == pytest.approx(951 / 1140 / 3)
    # Autoscaled: 2 x 300 + 2 x 300 + 2 x 300 + 3 x 240 = 2,520 replica-seconds = 0.7
    # replica-hours, USD 2.80, x 86,400 / 1,140 = USD 212.21 a day, USD 29.44 per million;
    # mean replicas 2,520 / 1,140 = 2.2105.
    assert fleets.autoscaled.replica_hours == pytest.approx(0.7)
    assert round(fleets.autoscaled.usd_per_day, 2) == 212.21
    assert round(fleets.autoscaled.per_million_output_tokens_usd or 0, 2) == 29.44
    assert fleets.autoscaled.mean_replicas == pytest.approx(2520 / 1140)
    assert fleets.autoscaled.mean_utilization == pytest.approx(951 / 1140 / (2520 / 1140))
    assert fleets.cheaper == "autoscaled"
    assert round(fleets.saving_usd_per_day, 2) == round(288.00 - 212.21, 2)


def test_a_longer_lag_and_a_floor_of_replicas() -> None:
    # Lag 600 s over 300 s intervals: k = 2, so interval 0 and 1 run needed_0 and the rest
    # needed_(i-2): 2, 2, 2, 2; interval 2 is short again.
    fleets = plan_fleets(
        MINUTES,
        duration_s=1140.0,
        output_tokens=1,
        capacity_rps=1.0,
        usd_per_hour=4.0,
        target_utilization=0.8,
        lag_s=600,
        min_replicas=3,
    )
    # A floor of 3 replicas lifts every interval to 3: nothing at risk, fixed = autoscaled.
    assert [p.needed for p in fleets.intervals] == [3, 3, 3, 3]
    assert fleets.at_risk == [] and fleets.requests_at_risk_share == 0
    assert fleets.cheaper == "fixed" and fleets.saving_usd_per_day == 0
    k2 = plan_fleets(
        MINUTES,
        duration_s=1140.0,
        output_tokens=1,
        capacity_rps=1.0,
        usd_per_hour=4.0,
        target_utilization=0.8,
        lag_s=600,
    )
    assert k2.lag_intervals == 2
    assert [p.autoscaled for p in k2.intervals] == [2, 2, 2, 2]
    assert k2.at_risk == [2]


def test_ten_minute_intervals_take_the_busiest_minute() -> None:
    fleets = plan_fleets(
        MINUTES,
        duration_s=1140.0,
        output_tokens=1,
        capacity_rps=1.0,
        usd_per_hour=1.0,
        target_utilization=1.0,
        interval_s=600,
    )
    # Minutes 0-9 peak at 90, 10-19 at 130: 1.5 and 2.17 requests/s -> 2 and 3 replicas.
    assert [p.needed for p in fleets.intervals] == [2, 3]
    assert [p.length_s for p in fleets.intervals] == [600, 540]


def test_rounding_and_refusals() -> None:
    # Exactly at a replica's planned load: 8 / (0.8 x 10) is one replica, not two.
    assert replicas_needed(8.0, 10.0, 0.8, 1) == 1
    assert replicas_needed(8.01, 10.0, 0.8, 1) == 2
    assert replicas_needed(0.0, 10.0, 0.8, 0) == 0
    assert lag_intervals(150, 300) == 1  # 0.5 rounds up
    assert lag_intervals(449, 300) == 1
    assert lag_intervals(450, 300) == 2
    assert lag_intervals(0, 300) == 1  # never less than one interval
    with pytest.raises(InvalidInput, match="whole number of minutes"):
        plan_fleets(MINUTES, duration_s=1140, output_tokens=1, capacity_rps=1,
                    usd_per_hour=1, target_utilization=1, interval_s=90)  # fmt: skip
    with pytest.raises(InvalidInput, match="spans no time"):
        plan_fleets([5], duration_s=0, output_tokens=1, capacity_rps=1,
                    usd_per_hour=1, target_utilization=1)  # fmt: skip
