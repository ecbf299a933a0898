"""Run figures of an embeddings level (infercost.figures.metrics.summarize with embeddings=True)
against hand-computed values, and the cost per million input tokens (infercost.figures.cost)."""

from __future__ import annotations

import pytest

from infercost.figures.cost import hosted_run_cost, run_cost
from infercost.figures.metrics import RequestTiming, summarize


def _request(
    seq: int, send: float, end: float, n_in: int, *, warmup: bool = False
) -> RequestTiming:
    # An embeddings answer: one body, no token events.
    return RequestTiming(
        seq=seq, warmup=warmup, t_sched=send, t_send=send, t_first_byte=end, t_end=end,
        n_in=n_in, n_out=0, count_source="usage", status=200,
    )  # fmt: skip


def test_embeddings_level_figures_by_hand() -> None:
    timings = [
        _request(0, 0.0, 0.5, 100, warmup=True),  # ends before the window: not counted
        _request(1, 1.0, 1.2, 10),
        _request(2, 1.2, 1.5, 20),
        _request(3, 1.5, 2.0, 30),
        _request(4, 2.0, 3.0, 40),
    ]
    figures = summarize(timings, target_concurrency=1, embeddings=True)
    # Window: first measured send 1.0 to last end 3.0 = 2 s; 100 prompt tokens inside.
    assert figures.duration_s == pytest.approx(2.0)
    assert figures.requests_per_s == pytest.approx(4 / 2.0)
    assert figures.input_tokens_per_s == pytest.approx(100 / 2.0)
    assert figures.total_tokens_per_s == pytest.approx(100 / 2.0)
    assert figures.output_tokens_per_s is None
    assert figures.goodput_output_tokens_per_s is None
    # Latencies 200, 300, 500, 1000 ms: p50 by linear interpolation = (300 + 500) / 2.
    e2e = figures.stats["e2e_ms"]
    assert e2e["count"] == 4
    assert e2e["p50"] == pytest.approx(400.0)
    assert e2e["max"] == pytest.approx(1000.0)
    for name in ("ttft_ms", "ttfo_ms", "tpot_ms", "itl_ms", "per_user_tokens_per_s"):
        assert figures.stats[name]["count"] == 0
        assert figures.stats[name]["p50"] is None
        assert figures.not_measured is not None
        assert "embeddings" in figures.not_measured[name]
    assert figures.requests_succeeded == 4


def test_generation_levels_say_nothing_is_missing() -> None:
    timing = RequestTiming(
        seq=0, warmup=False, t_sched=0.0, t_send=0.0, t_end=1.0, chunk_times=[0.1, 0.2],
        n_in=5, n_out=2, count_source="usage", status=200,
    )  # fmt: skip
    assert summarize([timing]).not_measured is None


def test_cost_per_million_input_tokens() -> None:
    # 3.6 USD/h at 500 input tokens/s: 3.6 / (500 x 3600) x 1e6 = 2.0 USD per million.
    cost = run_cost(
        3.6,
        output_tokens_per_s=None,
        total_tokens_per_s=500.0,
        requests_per_s=10.0,
        goodput_output_tokens_per_s=None,
        input_tokens_per_s=500.0,
    )
    assert cost.per_million_input_tokens_usd == pytest.approx(2.0)
    assert cost.per_million_output_tokens_usd is None
    assert cost.per_thousand_requests_usd == pytest.approx(0.1)
    assert cost.reason is not None
    assert "embeddings" in cost.reason
    # A hosted embeddings API at 0.02 USD per million prompt tokens costs just that.
    hosted = hosted_run_cost(
        0.02,
        0.0,
        input_tokens_per_s=500.0,
        output_tokens_per_s=None,
        total_tokens_per_s=500.0,
        requests_per_s=10.0,
        goodput_output_tokens_per_s=None,
    )
    assert hosted.per_million_input_tokens_usd == pytest.approx(0.02)
