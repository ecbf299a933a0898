"""A request's timings to its request_samples row and back (infercost/jobs/samples.py):
the worker's seconds become stored milliseconds in one place, and come back as seconds."""

from __future__ import annotations

import uuid

import pytest

from infercost.figures.metrics import RequestTiming, ServerTimings
from infercost.jobs.models import RequestSample
from infercost.jobs.repository import SAMPLE_COLUMNS
from infercost.jobs.samples import sample_rows, timing_of

RUN = uuid.uuid4()

#: Sent 2 s into the run, due 1.99 s; first byte 20 ms later, content events at 50, 60, 75
#: ms (the first with reasoning only, visible content at 60 ms), the end at 80 ms; 3 tokens
#: out, so TPOT = (75 - 50) / 2 = 12.5 ms; 4 ms waiting for a slot under the cap.
TIMING = RequestTiming(
    seq=7,
    warmup=False,
    t_sched=1.99,
    t_send=2.0,
    t_first_byte=2.02,
    t_end=2.08,
    chunk_times=[2.05, 2.06, 2.075],
    n_in=100,
    n_out=3,
    count_source="usage",
    status=200,
    t_first_content=2.06,
    chunk_tokens=[1, 1, 1],
    n_in_target=100,
    prompt_length="exact",
    cached_tokens=64,
    server=ServerTimings(
        source="llamacpp", prefill_ms=30.0, per_token_ms=12.0, queue_ms=1.0, n_out=3,
        n_prefilled=36,
    ),
    cap_wait=0.004,
)  # fmt: skip


def _stored(row: tuple[object, ...]) -> dict[str, object]:
    assert len(row) == len(SAMPLE_COLUMNS)
    return dict(zip(SAMPLE_COLUMNS, row, strict=True))


def test_a_row_holds_seconds_for_instants_and_milliseconds_for_durations() -> None:
    (row,) = sample_rows(RUN, [TIMING])
    stored = _stored(row)
    assert stored["run_id"] == RUN and stored["seq"] == 7
    assert (stored["t_sched"], stored["t_send"]) == (1.99, 2.0)
    expected_ms = {
        "ttfb_ms": 20.0, "ttft_ms": 50.0, "tpot_ms": 12.5, "e2e_ms": 80.0, "ttfo_ms": 60.0,
        "cap_wait_ms": 4.0,
    }  # fmt: skip
    for name, ms in expected_ms.items():
        assert stored[name] == pytest.approx(ms), name
    assert stored["chunk_times_ms"] == pytest.approx([50.0, 60.0, 75.0])
    assert stored["server_source"] == "llamacpp" and stored["server_prefill_ms"] == 30.0
    assert stored["cached_tokens"] == 64 and stored["prompt_length"] == "exact"


def test_a_stored_row_comes_back_as_the_same_timing() -> None:
    (row,) = sample_rows(RUN, [TIMING])
    back = timing_of(RequestSample(**_stored(row)))
    assert back.t_send == 2.0 and back.t_sched == 1.99
    assert back.chunk_times == pytest.approx(TIMING.chunk_times, abs=1e-12)
    assert back.t_first_byte == pytest.approx(2.02, abs=1e-12)
    assert back.t_end == pytest.approx(2.08, abs=1e-12)
    assert back.t_first_content == pytest.approx(2.06, abs=1e-12)
    assert back.cap_wait == pytest.approx(0.004, abs=1e-12)
    assert back.server == TIMING.server
    assert (back.seq, back.n_in, back.n_out, back.status, back.count_source) == (
        7, 100, 3, 200, "usage",
    )  # fmt: skip
    assert back.tpot == pytest.approx(0.0125, abs=1e-12)


def test_a_failed_request_without_times_stores_nulls() -> None:
    failed = RequestTiming(
        seq=0, warmup=True, t_sched=0.0, t_send=0.001, error_class="connect", error="refused"
    )
    stored = _stored(sample_rows(RUN, [failed])[0])
    assert [stored[n] for n in ("ttfb_ms", "ttft_ms", "tpot_ms", "e2e_ms", "ttfo_ms")] == [None] * 5
    assert stored["chunk_times_ms"] == [] and stored["server_source"] is None
    back = timing_of(RequestSample(**stored))
    assert back.t_end is None and back.chunk_times == [] and back.server is None
    assert back.error_class == "connect" and back.warmup is True
