"""A request sample's columns are named once: the table (infercost/jobs/models.py) gives the
COPY's column order, the Sample struct is the table as the API serves it, and the CSV export's
columns are the struct's fields. Here the four (and the worker's row tuples) are held against
each other and against the CSV header users read."""

from __future__ import annotations

import uuid

import msgspec

from api.domain.runs.schemas import CSV_COLUMNS, Sample
from infercost.figures.metrics import RequestTiming, ServerTimings
from infercost.jobs.models import RequestSample
from infercost.jobs.repository import SAMPLE_COLUMNS
from infercost.jobs.samples import sample_rows

#: The CSV header of GET /v1/runs/{id}/requests, as users read it (docs/cli-and-api.md's columns
#: first, then the ones added since).
CSV_HEADER = (
    "seq", "warmup", "t_sched", "t_send", "ttfb_ms", "ttft_ms", "e2e_ms", "n_in", "n_out",
    "count_source", "status", "error_class", "ttfo_ms", "n_in_target", "prompt_length",
    "cached_tokens", "server_source", "server_prefill_ms", "server_tpot_ms", "server_queue_ms",
    "server_n_out", "server_n_prefilled", "cap_wait_ms", "n_reasoning", "ttfr_ms",
    "reasoning_source", "model", "tool_calls", "tool_calls_valid", "structured_valid",
    "images", "image_tokens",
)  # fmt: skip


def test_the_api_serves_every_stored_column_but_the_run_and_tpot() -> None:
    served = [name for name in SAMPLE_COLUMNS if name not in ("run_id", "tpot_ms")]
    assert list(Sample.__struct_fields__) == served


def test_the_csv_has_the_samples_fields_but_the_error_text_and_event_lists() -> None:
    assert CSV_COLUMNS == CSV_HEADER
    left_out = [name for name in Sample.__struct_fields__ if name not in CSV_COLUMNS]
    assert left_out == ["error", "chunk_times_ms", "chunk_tokens", "invalid_reasons"]


def test_a_written_row_reads_back_as_the_sample_the_api_serves() -> None:
    # Every column a value of its own, so a row whose values sit in the wrong columns shows.
    timing = RequestTiming(
        seq=3, warmup=True, t_sched=1.5, t_send=2.0, t_first_byte=2.01, t_end=2.1,
        chunk_times=[2.05, 2.08], n_in=11, n_out=2, count_source="usage", status=200,
        error_class="http", error="teapot", t_first_content=2.06, chunk_tokens=[1, 1],
        n_in_target=12, prompt_length="exact", cached_tokens=4,
        server=ServerTimings(
            source="tgi", prefill_ms=7.0, per_token_ms=8.0, queue_ms=9.0, n_out=2,
            n_prefilled=6,
        ),
        cap_wait=0.003, n_reasoning=1, reasoning_source="events", t_first_reasoning=2.05,
    )  # fmt: skip
    (row,) = sample_rows(uuid.UUID(int=5), [timing])
    assert len(row) == len(SAMPLE_COLUMNS)
    stored = RequestSample(**dict(zip(SAMPLE_COLUMNS, row, strict=True)))
    sample = msgspec.convert(stored, Sample, from_attributes=True)
    served = msgspec.to_builtins(sample)
    assert {k: served[k] for k in ("seq", "warmup", "t_sched", "t_send", "n_in", "n_out")} == {
        "seq": 3, "warmup": True, "t_sched": 1.5, "t_send": 2.0, "n_in": 11, "n_out": 2,
    }  # fmt: skip
    assert (served["count_source"], served["status"], served["error_class"]) == (
        "usage", 200, "http",
    )  # fmt: skip
    assert (served["error"], served["chunk_tokens"], served["n_in_target"]) == (
        "teapot",
        [1, 1],
        12,
    )
    assert (served["prompt_length"], served["cached_tokens"]) == ("exact", 4)
    assert (served["server_source"], served["server_prefill_ms"], served["server_tpot_ms"]) == (
        "tgi", 7.0, 8.0,
    )  # fmt: skip
    assert (served["server_queue_ms"], served["server_n_out"], served["server_n_prefilled"]) == (
        9.0, 2, 6,
    )  # fmt: skip
    assert (served["n_reasoning"], served["reasoning_source"]) == (1, "events")
    # Durations in ms from t_send: first byte 10, first token (reasoning) 50, content 60, end
    # 100, wait 3.
    for name, ms in {
        "ttfb_ms": 10.0, "ttft_ms": 50.0, "ttfo_ms": 60.0, "e2e_ms": 100.0, "cap_wait_ms": 3.0,
        "ttfr_ms": 50.0,
    }.items():  # fmt: skip
        assert abs(served[name] - ms) < 1e-9, name
    assert [round(x, 9) for x in served["chunk_times_ms"]] == [50.0, 80.0]
