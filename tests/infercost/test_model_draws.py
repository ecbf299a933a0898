"""workload.models: each request's model drawn by weight, reproducibly from the seed."""

from __future__ import annotations

import numpy as np
import pytest

from infercost.workload.models import ModelDraws
from sim.config import SimConfig, served_model_speeds


def draws(seed: int, first: int) -> ModelDraws:
    return ModelDraws(["a", "b", "c"], [2, 1, 1], first, np.random.default_rng([seed, 0, 2]))


def test_the_same_seed_draws_the_same_models_however_many_were_known() -> None:
    # A level of a duration draws more on demand: the models of its first requests are those a
    # level that knew its count drew.
    known, grown = draws(7, 4000), draws(7, 10)
    assert [known[i] for i in range(4000)] == [grown[i] for i in range(4000)]
    assert [draws(7, 100)[i] for i in range(100)] == [draws(7, 100)[i] for i in range(100)]
    assert [draws(8, 100)[i] for i in range(100)] != [draws(7, 100)[i] for i in range(100)]


def test_models_are_drawn_by_weight() -> None:
    d = draws(1, 20000)
    counts = dict.fromkeys("abc", 0)
    for i in range(20000):
        counts[d[i]] += 1
    # 2:1:1 within a few standard deviations (sd of the share of "a" at 20000 is 0.0035)
    assert counts["a"] / 20000 == pytest.approx(0.5, abs=0.02)
    assert counts["b"] / 20000 == pytest.approx(0.25, abs=0.02)


def test_the_simulator_names_each_served_model_once_with_its_speed() -> None:
    assert served_model_speeds("lora-a:80:12, lora-b:30:6") == {
        "lora-a": (80.0, 12.0),
        "lora-b": (30.0, 6.0),
    }
    for bad in ("lora-a", "lora-a:x:1", ":1:1", "a:1:1,a:2:2", "a:-1:1"):
        with pytest.raises(ValueError, match="served_models"):
            served_model_speeds(bad)
    with pytest.raises(ValueError, match="already the main model"):
        SimConfig(model="m", served_models="m:1:1")
