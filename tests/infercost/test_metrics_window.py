"""Tokens placed in a measurement window, against hand-counted events."""

from __future__ import annotations

import pytest

from infercost.figures.metrics import RequestTiming, adequacy_block, tokens_in_window


def streamed(times: list[float], tokens: list[int] | None, n_out: int) -> RequestTiming:
    return RequestTiming(
        seq=0,
        warmup=False,
        t_sched=0.0,
        t_send=0.0,
        t_first_byte=times[0],
        t_end=times[-1],
        chunk_times=times,
        n_in=100,
        n_out=n_out,
        chunk_tokens=tokens,
    )


def test_continuous_usage_places_each_events_tokens_at_its_arrival() -> None:
    # Events at 1, 2, 3, 4 s carrying 2, 3, 4, 5 tokens; the window [1.5, 3.5] holds the
    # second and third: 7 tokens out, no prompt (it was placed at 1 s).
    t = streamed([1.0, 2.0, 3.0, 4.0], [2, 3, 4, 5], 14)
    assert tokens_in_window([t], 1.5, 3.5) == (7.0, 0.0)


def test_tokens_after_the_last_text_event_arrive_with_it() -> None:
    # The server counted 20 tokens but its events with text carried 2 + 3 + 4 + 5 = 14: the
    # 6 it counted in events without text after the last one arrive at 4 s.
    t = streamed([1.0, 2.0, 3.0, 4.0], [2, 3, 4, 5], 20)
    assert tokens_in_window([t], 2.5, 5.0) == (4 + 5 + 6, 0.0)
    assert tokens_in_window([t], 0.0, 3.5) == (2 + 3 + 4, 100.0)
    # Both halves together are the whole answer, once.
    assert tokens_in_window([t], 0.0, 2.5)[0] + tokens_in_window([t], 2.5, 5.0)[0] == 20


def test_without_per_event_counts_tokens_spread_evenly() -> None:
    t = streamed([1.0, 2.0, 3.0, 4.0], None, 20)
    assert tokens_in_window([t], 1.5, 3.5) == pytest.approx((10.0, 0.0))


def adequacy_codes(client: dict[str, object], client_bound: bool) -> list[str]:
    block = adequacy_block(
        succeeded=500,
        duration_s=60.0,
        error_rate=0.0,
        client_bound=client_bound,
        client=client,
        cache=None,
    )
    return [r["code"] for r in block["reasons"]]


def test_a_late_reader_is_named_even_when_the_rate_was_not_held() -> None:
    # Sending late: the rate reason says it all.
    sending = {"rate_held": False, "spoils": ["requests_per_s", "output_tokens_per_s"]}
    assert adequacy_codes(sending, client_bound=True) == ["rate_not_held"]
    # Reading late too: every latency figure carries the reader's lag, a reason of its own.
    both = {"rate_held": False, "spoils": ["requests_per_s", "ttft_ms", "itl_ms"]}
    assert adequacy_codes(both, client_bound=True) == ["rate_not_held", "client_bound"]
