"""A request's timings to and from its request_samples row: the one place times change unit.

The worker measures in seconds from the run's origin (RequestTiming, docs/figures.md) and hands
those to `sample_rows`; the row keeps t_sched and t_send in seconds and every duration in
milliseconds from t_send, as the API serves them; `timing_of` turns a stored row back into
the seconds the metric definitions take (a sharded level's merge reads its shards' rows).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from infercost.figures.metrics import RequestTiming, ServerTimings
from infercost.jobs.models import RequestSample

#: Milliseconds in a second: durations are stored in ms, instants in s.
MS_PER_S = 1000.0


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * MS_PER_S


def sample_rows(run_id: uuid.UUID, timings: Sequence[RequestTiming]) -> list[tuple[Any, ...]]:
    """Rows for COPY into request_samples, in SAMPLE_COLUMNS order
    (infercost/jobs/repository.py); times in ms from t_send."""
    return [
        (
            run_id,
            t.seq,
            t.warmup,
            t.t_sched,
            t.t_send,
            _ms(t.ttfb),
            _ms(t.ttft),
            _ms(t.tpot),
            _ms(t.e2e),
            t.n_in,
            t.n_out,
            t.count_source,
            t.status,
            t.error_class,
            t.error,
            [(c - t.t_send) * MS_PER_S for c in t.chunk_times],
            _ms(t.ttfo),
            t.chunk_tokens,
            t.n_in_target,
            t.prompt_length,
            t.cached_tokens,
            *_server_columns(t.server),
            _ms(t.cap_wait),
            t.n_reasoning,
            _ms(t.ttfr),
            t.reasoning_source,
            t.model,
            t.tool_calls,
            t.tool_calls_valid,
            t.structured_valid,
            t.invalid_reasons,
            t.images,
            t.image_tokens,
        )
        for t in timings
    ]


def _server_columns(server: ServerTimings | None) -> tuple[Any, ...]:
    """The sample's server_* columns, in SAMPLE_COLUMNS order."""
    if server is None:
        return (None,) * 6
    return (
        server.source,
        server.prefill_ms,
        server.per_token_ms,
        server.queue_ms,
        server.n_out,
        server.n_prefilled,
    )


def timing_of(sample: RequestSample) -> RequestTiming:
    """A stored sample back as the metric definitions take it (seconds from the origin)."""
    t_send = sample.t_send

    def at(ms: float | None) -> float | None:
        return None if ms is None else t_send + ms / MS_PER_S

    return RequestTiming(
        seq=sample.seq,
        warmup=sample.warmup,
        t_sched=sample.t_sched,
        t_send=t_send,
        t_first_byte=at(sample.ttfb_ms),
        t_end=at(sample.e2e_ms),
        chunk_times=[t_send + c / MS_PER_S for c in sample.chunk_times_ms],
        n_in=sample.n_in,
        n_out=sample.n_out,
        count_source=sample.count_source,
        status=sample.status,
        error_class=sample.error_class,
        error=sample.error,
        t_first_content=at(sample.ttfo_ms),
        chunk_tokens=sample.chunk_tokens,
        n_in_target=sample.n_in_target,
        prompt_length=sample.prompt_length,
        cached_tokens=sample.cached_tokens,
        server=None
        if sample.server_source is None
        else ServerTimings(
            source=sample.server_source,
            prefill_ms=sample.server_prefill_ms,
            per_token_ms=sample.server_tpot_ms,
            queue_ms=sample.server_queue_ms,
            n_out=sample.server_n_out,
            n_prefilled=sample.server_n_prefilled,
        ),
        cap_wait=None if sample.cap_wait_ms is None else sample.cap_wait_ms / MS_PER_S,
        n_reasoning=sample.n_reasoning,
        reasoning_source=sample.reasoning_source,
        t_first_reasoning=at(sample.ttfr_ms),
        model=sample.model,
        tool_calls=sample.tool_calls,
        tool_calls_valid=sample.tool_calls_valid,
        structured_valid=sample.structured_valid,
        invalid_reasons=sample.invalid_reasons,
        images=sample.images,
        image_tokens=sample.image_tokens,
    )
