"""A burst level (load.mode "burst") is named and charted as requests sent at once, never as
a rate or a number of users."""

from __future__ import annotations

import dataclasses

from infercost.reports.charts import load_axis
from infercost.reports.data import level_label
from tests.infercost.test_charts import deployment


def test_level_labels() -> None:
    assert level_label(30, "burst") == "30 at once"
    assert level_label(200, "burst") == "200 at once"
    assert level_label(8, "concurrency") == "8 users"
    assert level_label(12.5, "rate") == "12.5 req/s"


def test_burst_levels_have_their_own_axis() -> None:
    d = deployment()
    bursts = dataclasses.replace(
        d, runs=tuple(dataclasses.replace(r, mode="burst") for r in d.runs)
    )
    label, x = load_axis([bursts])
    assert label == "burst (requests sent at once)"
    assert [x(r) for r in bursts.runs] == [r.level for r in d.runs]
    # Bursts beside rate levels: neither level is a load the other's axis can show.
    mixed = dataclasses.replace(d, runs=(*d.runs[:1], *bursts.runs[1:]))
    label, x = load_axis([mixed])
    assert label.startswith("measured load (requests/s")
    assert [x(r) for r in mixed.runs] == [r.requests_per_s for r in mixed.runs]
