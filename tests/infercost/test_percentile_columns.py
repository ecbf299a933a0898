"""Every percentile column of a run comes from its stats one way
(infercost.figures.metrics.percentile_columns, written by JobRepository.update_run)."""

from __future__ import annotations

import pytest

from infercost.figures.metrics import (
    PERCENTILE_COLUMNS,
    RequestTiming,
    distribution,
    percentile_columns,
    summarize,
)


def test_columns_are_the_statistics_of_the_stats() -> None:
    """TTFT of 10, 20, 30 and 40 ms: p50 = 25 ms and p95 = 30 + 0.85 x 10 = 38.5 ms (linear
    interpolation between order statistics); distributions not kept give nulls."""
    stats = {"ttft_ms": distribution([10.0, 20.0, 30.0, 40.0])}
    columns = percentile_columns(stats)
    assert set(columns) == set(PERCENTILE_COLUMNS)
    assert columns["ttft_p50_ms"] == pytest.approx(25.0)
    assert columns["ttft_p95_ms"] == pytest.approx(38.5)
    assert all(v is None for k, v in columns.items() if not k.startswith("ttft_"))


def test_all_nine_columns_from_a_measured_window() -> None:
    """Two requests, each sent at 0 s with chunks 100, 110, 120 ms and 200, 220, 240 ms after
    (3 tokens): ITL gaps 10, 10, 20, 20 ms (p50 15 ms), TPOT 10 and 20 ms, E2E = last chunk,
    per-user speed 100 and 50 tokens/s (p50 75)."""
    timings = [
        RequestTiming(seq=i, warmup=False, t_sched=0.0, t_send=0.0, t_first_byte=first,
                      t_end=first + 2 * gap, chunk_times=[first, first + gap, first + 2 * gap],
                      n_out=3, count_source="usage", status=200)
        for i, (first, gap) in enumerate(((0.1, 0.01), (0.2, 0.02)))
    ]  # fmt: skip
    figures = summarize(timings)
    columns = percentile_columns(figures.stats)
    assert columns["ttft_p50_ms"] == pytest.approx(150.0)
    assert columns["tpot_p50_ms"] == pytest.approx(15.0)
    assert columns["itl_p50_ms"] == pytest.approx(15.0)
    assert columns["e2e_p50_ms"] == pytest.approx(180.0)
    assert columns["per_user_tokens_per_s_p50"] == pytest.approx(75.0)
    assert columns["e2e_p95_ms"] == pytest.approx(120 + 0.95 * 120)


def test_no_stats_no_figures() -> None:
    assert percentile_columns(None) == dict.fromkeys(PERCENTILE_COLUMNS)
    assert percentile_columns({"itl_ms": {"p50": None}})["itl_p50_ms"] is None
