"""Arrival schedules follow the process they name: mean gap, coefficient of variation, counts.

Tolerances are a few standard errors of the estimate, worked out from the process's own
moments below, so a wrong scale or shape fails while sampling noise (any seed) does not.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from infercost.jobs.arrivals import Arrival, arrival_offsets

N = 20_000
RATE = 8.0
#: How many standard errors an estimate may stray: a false failure about once in 1.7 million.
Z = 5.0


def gaps(offsets: np.ndarray) -> np.ndarray:
    return np.diff(offsets)


def gamma_cv_standard_error(k: float, n: int) -> float:
    """Standard error of the sample CV of n gamma(shape k) gaps, by the delta method.

    Var(cv_hat) / cv^2 = ((kurtosis - 1) / 4 + cv^2 - skewness x cv) / n, with cv = 1/sqrt(k),
    skewness 2/sqrt(k) and kurtosis 3 + 6/k (k = 1: exponential, relative SE 1/sqrt(n)).
    """
    cv = 1.0 / math.sqrt(k)
    kurtosis = 3.0 + 6.0 / k
    skewness = 2.0 / math.sqrt(k)
    return cv * math.sqrt(((kurtosis - 1.0) / 4.0 + cv**2 - skewness * cv) / n)


def cv_of(values: np.ndarray) -> float:
    return float(values.std() / values.mean())


def test_poisson_gaps_have_mean_one_over_rate_and_cv_one() -> None:
    g = gaps(arrival_offsets(RATE, "poisson", np.random.default_rng(1), count=N + 1))
    assert g.size == N
    # Exponential gaps: std = mean = 1/r, so the mean's standard error is (1/r) / sqrt(n).
    assert abs(g.mean() - 1 / RATE) < Z * (1 / RATE) / math.sqrt(N)
    assert abs(cv_of(g) - 1.0) < Z * gamma_cv_standard_error(1.0, N)


@pytest.mark.parametrize(("burstiness", "cv"), [(0.25, 2.0), (1.0, 1.0), (4.0, 0.5)])
def test_gamma_burstiness_sets_the_cv_and_keeps_the_mean(burstiness: float, cv: float) -> None:
    offsets = arrival_offsets(
        RATE, "gamma", np.random.default_rng(2), burstiness=burstiness, count=N + 1
    )
    g = gaps(offsets)
    # The mean's standard error is cv x (1/r) / sqrt(n).
    assert abs(g.mean() - 1 / RATE) < Z * cv * (1 / RATE) / math.sqrt(N)
    assert abs(cv_of(g) - cv) < Z * gamma_cv_standard_error(burstiness, N)


def test_constant_gaps_are_exact() -> None:
    offsets = arrival_offsets(20.0, "constant", np.random.default_rng(3), count=60)
    assert offsets.size == 60
    assert offsets[0] == 0.0
    assert np.allclose(gaps(offsets), 0.05, rtol=0, atol=1e-12)
    assert cv_of(gaps(offsets)) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("arrival", ["constant", "poisson", "gamma"])
def test_count_mode_gives_that_many_ascending_offsets_from_zero(arrival: Arrival) -> None:
    offsets = arrival_offsets(
        3.0,
        arrival,
        np.random.default_rng(4),
        burstiness=0.5,
        count=500,
    )
    assert offsets.size == 500
    assert offsets[0] == 0.0
    assert np.all(np.diff(offsets) >= 0)


@pytest.mark.parametrize(
    ("arrival", "burstiness"), [("constant", 1.0), ("poisson", 1.0), ("gamma", 0.25)]
)
def test_duration_mode_stays_inside_the_duration(arrival: Arrival, burstiness: float) -> None:
    rate, duration = 10.0, 1000.0
    offsets = arrival_offsets(
        rate,
        arrival,
        np.random.default_rng(5),
        burstiness=burstiness,
        duration_s=duration,
    )
    assert offsets.size > 0
    assert offsets[0] == 0.0
    assert float(offsets.max()) < duration
    # About r x d = 10,000 requests; the count's standard deviation is cv x sqrt(r d).
    cv = 1.0 / math.sqrt(burstiness) if arrival != "constant" else 0.0
    assert abs(offsets.size - rate * duration) <= Z * cv * math.sqrt(rate * duration) + 1
    # The schedule does not stop early: the next gap would have crossed the duration.
    assert duration - float(offsets.max()) < 100 / rate


def test_constant_duration_counts_exactly() -> None:
    # 0, 0.1, ..., 2.9 s: 30 sends; 3.0 is not before the 3 s duration.
    offsets = arrival_offsets(10.0, "constant", np.random.default_rng(0), duration_s=3.0)
    assert offsets.size == 30
    assert offsets[-1] == pytest.approx(2.9)
    # 12.5 x 4.4 is 55.00000000000001 in floating point: still 55 sends, none at 4.4 s.
    offsets = arrival_offsets(12.5, "constant", np.random.default_rng(0), duration_s=4.4)
    assert offsets.size == 55
    assert offsets[-1] == pytest.approx(54 / 12.5)


def test_same_seed_same_schedule_other_seed_other_schedule() -> None:
    def schedule(seed: int) -> np.ndarray:
        return arrival_offsets(
            5.0, "gamma", np.random.default_rng([seed, 0, 1]), burstiness=0.5, duration_s=60.0
        )

    assert np.array_equal(schedule(7), schedule(7))
    assert not np.array_equal(schedule(7)[:10], schedule(8)[:10])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"count": 10, "duration_s": 1.0},
        {},
        {"count": 10, "burstiness": 0.0},
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"count|burstiness"):
        arrival_offsets(1.0, "gamma", np.random.default_rng(0), **kwargs)
