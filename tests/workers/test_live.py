"""The running figures the heartbeat writes (workers/live.py) agree with the run summary."""

from __future__ import annotations

import statistics

import numpy as np

from infercost.figures.metrics import summarize
from workers.live import RESERVOIR, LiveLevel
from workers.loadgen.stream import RawRequest

MS = 1_000_000  # ns


def finished(
    seq: int, send_ms: float, ttft_ms: float, n_out: int, *, warmup: bool = False
) -> RawRequest:
    """A streamed request that sent at `send_ms`, got its first token `ttft_ms` later and
    then one token every 10 ms."""
    rec = RawRequest(seq, warmup, int(send_ms * MS), 8)
    rec.t_first_byte = rec.t_send + int(ttft_ms * MS)
    rec.chunk_ns = [rec.t_first_byte + i * 10 * MS for i in range(n_out)]
    rec.t_end = rec.chunk_ns[-1]
    rec.n_out = n_out
    rec.count_source = "usage"
    rec.status = 200
    return rec


def failed(seq: int, send_ms: float) -> RawRequest:
    rec = RawRequest(seq, False, int(send_ms * MS), 8)
    rec.t_end = rec.t_send + 5 * MS
    rec.status = 500
    rec.error_class = "http_5xx"
    return rec


def test_final_live_figures_equal_the_summary() -> None:
    rng = np.random.default_rng(7)
    done: list[RawRequest] = []
    live = LiveLevel(done, planned=44, origin_ns=0)
    for seq in range(40):
        done.append(finished(seq, seq * 30.0, float(rng.uniform(40, 90)), int(rng.integers(5, 40))))
        if seq % 7 == 0:
            live.figures(now_ns=done[-1].t_end or 0)  # beats in between see partial lists
    done += [failed(40, 1300.0), finished(41, 0.0, 500.0, 3, warmup=True)]

    figures = live.figures(now_ns=3_000 * MS)
    summary = summarize([r.timing(0) for r in done])

    assert figures["done"] == 42
    assert figures["planned"] == 44
    assert figures["errors"] == 1
    assert figures["elapsed_s"] == 3.0
    # The warm-up request's 500 ms TTFT is left out, as in the summary.
    assert figures["ttft_ms_p50"] == round(summary.stat("ttft_ms", "p50") or 0, 3)
    assert summary.output_tokens_per_s is not None
    assert abs(figures["output_tokens_per_s"] - summary.output_tokens_per_s) < 1e-3


def test_failed_requests_at_the_edges_count_in_the_window_as_in_the_summary() -> None:
    # The first send and the last end of the level are failed requests: the measured
    # window still spans them (docs/figures.md), so output tokens/s is over 0..2005 ms.
    done = [failed(0, 0.0), finished(1, 100.0, 50.0, 20), failed(2, 2000.0)]
    figures = LiveLevel(done, planned=None, origin_ns=0).figures(now_ns=2_100 * MS)
    summary = summarize([r.timing(0) for r in done])

    assert figures["errors"] == 2
    assert summary.output_tokens_per_s is not None
    assert abs(summary.output_tokens_per_s - 20 / 2.005) < 1e-9
    assert abs(figures["output_tokens_per_s"] - summary.output_tokens_per_s) < 1e-3


def test_nothing_measured_yet_gives_nulls_not_zeros() -> None:
    done = [finished(0, 0.0, 80.0, 4, warmup=True)]
    figures = LiveLevel(done, planned=None, origin_ns=0).figures(now_ns=100 * MS)
    assert figures == {
        "done": 1,
        "planned": None,
        "errors": 0,
        "elapsed_s": 0.1,
        "ttft_ms_p50": None,
        "output_tokens_per_s": None,
    }


def test_each_request_is_read_once_and_the_reservoir_stays_bounded() -> None:
    done: list[RawRequest] = []
    live = LiveLevel(done, planned=None, origin_ns=0)
    ttfts = np.random.default_rng(1).lognormal(4.0, 0.5, size=RESERVOIR * 4)
    for start in range(0, len(ttfts), 1000):
        for seq in range(start, min(start + 1000, len(ttfts))):
            done.append(finished(seq, float(seq), float(ttfts[seq]), 2))
        figures = live.figures(now_ns=len(done) * MS)
        assert figures["done"] == len(done)
    # Every request counted once (no re-reading the list), the median from a bounded sample.
    assert live._measured == len(ttfts)
    assert len(live._ttft_ms) == RESERVOIR
    true_median = statistics.median(ttfts)
    assert abs(figures["ttft_ms_p50"] - true_median) / true_median < 0.05


def test_warm_up_tokens_inside_the_window_count_as_in_the_summary() -> None:
    # Warm-up requests overlap the start of the measured window (first measured send at
    # 200 ms): 5 of one's 20 tokens (at 50..240 ms, 10 ms apart: 200..240) arrived inside it,
    # all 4 of another's (at 250..280 ms), none of a third's (10..50 ms). By hand: (5 + 4 +
    # 2 * 30) tokens over 200..740 ms = 127.778 tokens/s.
    done: list[RawRequest] = []
    live = LiveLevel(done, planned=None, origin_ns=0)
    done.append(finished(0, 0.0, 50.0, 20, warmup=True))
    done.append(finished(1, 100.0, 150.0, 4, warmup=True))
    done.append(finished(2, 0.0, 10.0, 5, warmup=True))
    done.append(finished(3, 200.0, 50.0, 30))
    assert live.figures(now_ns=600 * MS)["output_tokens_per_s"] is not None  # a beat between
    done.append(finished(4, 250.0, 200.0, 30))
    figures = live.figures(now_ns=800 * MS)
    summary = summarize([r.timing(0) for r in done])
    assert figures["output_tokens_per_s"] == round(69 / 0.54, 3)
    assert summary.output_tokens_per_s is not None
    assert abs(figures["output_tokens_per_s"] - summary.output_tokens_per_s) < 1e-3
