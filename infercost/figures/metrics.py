"""The canonical definition of every per-request and per-run figure (docs/figures.md).

Pure functions over plain values: the worker calls them on fresh timings, and the API can
call them again on stored raw samples, so a figure is always recomputable.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Statistic names in the order they appear in every distribution block.
STAT_KEYS = ("count", "mean", "std", "min", "p50", "p90", "p95", "p99", "p999", "max")
_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}

#: Figures an SLO may limit, and the statistics a limit may apply to.
SLO_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
SLO_STATS = ("mean", "p50", "p90", "p95", "p99", "p999", "max")

#: The percentile columns of `runs` (comparisons, history and the status board sort and
#: aggregate them), each a statistic of a distribution the run keeps in `stats`.
PERCENTILE_COLUMNS: dict[str, tuple[str, str]] = {
    "ttft_p50_ms": ("ttft_ms", "p50"),
    "ttft_p95_ms": ("ttft_ms", "p95"),
    "tpot_p50_ms": ("tpot_ms", "p50"),
    "tpot_p95_ms": ("tpot_ms", "p95"),
    "itl_p50_ms": ("itl_ms", "p50"),
    "itl_p95_ms": ("itl_ms", "p95"),
    "e2e_p50_ms": ("e2e_ms", "p50"),
    "e2e_p95_ms": ("e2e_ms", "p95"),
    "per_user_tokens_per_s_p50": ("per_user_tokens_per_s", "p50"),
}


def percentile_columns(stats: Mapping[str, Any] | None) -> dict[str, float | None]:
    """Every percentile column of a run from its `stats`, made one way for all of them:
    the statistic as `stats` holds it, null where the distribution or statistic is not
    there. JobRepository.update_run writes them whenever a run's stats are written."""
    columns: dict[str, float | None] = {}
    for column, (name, key) in PERCENTILE_COLUMNS.items():
        block = (stats or {}).get(name)
        value = block.get(key) if isinstance(block, Mapping) else None
        columns[column] = None if value is None else float(value)
    return columns


#: Error classes of docs/figures.md, in a fixed order.
ERROR_CLASSES = ("connect", "timeout", "http_4xx", "http_5xx", "stream_broken", "protocol", "empty")

#: A run is client-bound when its queue delay p99 exceeds this (docs/figures.md, client health).
CLIENT_QUEUE_DELAY_P99_LIMIT_MS = 10.0
#: ... or when the time-weighted in-flight count fell below this share of the target.
CONCURRENCY_HELD_SHARE = 0.95
#: ... or, at a request rate, when the measured send rate fell below this share of the
#: schedule's rate.
RATE_HELD_SHARE = 0.95
#: ... or when the client read late: the p99 of its event-loop lag or of the age of response
#: bytes when parsed above this (workers/loadgen/health.py).
CLIENT_READ_LAG_P99_LIMIT_MS = 10.0
#: ... or when pauses of the client could have moved more than this share of the level's
#: events' stamps by more than their bound (`client.pause_exposure` over
#: `client.pause_bound_ms`, 5 ms; workers/loadgen/health.py): enough to move a p99. The
#: default; a worker's setting (INFERCOST_PAUSE_EXPOSURE_LIMIT) is recorded in the client
#: block as `pause_exposure_limit` and judges that level instead.
PAUSE_EXPOSURE_LIMIT = 0.01
#: What each kind of client lateness spoils (`client.spoils`): sending late means the server
#: saw less load than asked; reading late moves the arrival stamps of the events.
SPOILED_BY_SENDING = ("requests_per_s", "output_tokens_per_s")
SPOILED_BY_READING = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
#: The client's figures differ materially from the engine's own when the gap is above this
#: share of the figure and above the absolute floor (server_timings.flagged).
SERVER_GAP_SHARE = 0.2
SERVER_GAP_TTFT_MS = 10.0
SERVER_GAP_TPOT_MS = 1.0

#: Adequacy (a level's evidence supports its figures): at least this many successful measured
#: requests (a p99 over fewer rests on one or two requests; p95 needs 20, p99 100) ...
ADEQUATE_MIN_REQUESTS = 100
#: ... a window at least this long, and at least this many telemetry intervals (a GPU
#: utilisation over one or two scrapes says little) ...
ADEQUATE_MIN_DURATION_S = 5.0
ADEQUATE_MIN_TELEMETRY_INTERVALS = 5
#: ... at most this error rate, and at most this share of prompt tokens served from the prefix
#: cache unless the workload shares prefixes on purpose (cached prefill makes TTFT cheap).
ADEQUATE_MAX_ERROR_RATE = 0.05
ADEQUATE_MAX_CACHE_SHARE = 0.10


@dataclass(frozen=True, slots=True)
class ServerTimings:
    """The engine's own timings of one request, where it reports them: llama.cpp's `timings`
    object (source "llamacpp": prefill_ms = prompt_ms, per_token_ms = predicted_per_token_ms,
    n_out = predicted_n, n_prefilled = prompt_n, cached tokens excluded), TGI's response
    headers (source "tgi": x-queue-time, x-time-per-token, x-generated-tokens)."""

    source: str
    prefill_ms: float | None = None
    per_token_ms: float | None = None
    queue_ms: float | None = None
    n_out: int | None = None
    n_prefilled: int | None = None


@dataclass(slots=True)
class RequestTiming:
    """One request's raw observations; times in seconds on the worker's monotonic clock."""

    seq: int
    warmup: bool
    t_sched: float
    t_send: float
    t_first_byte: float | None = None
    t_end: float | None = None
    # Arrival of each event that carried content or reasoning text; [0] is t_first, [-1] t_last.
    chunk_times: list[float] = field(default_factory=list)
    n_in: int | None = None
    n_out: int = 0
    count_source: str = "events"
    status: int | None = None
    error_class: str | None = None
    error: str | None = None
    # Arrival of the first event with visible content (not reasoning): t_first_output.
    t_first_content: float | None = None
    # Tokens each content event carried, parallel to chunk_times, when the server said
    # (continuous usage); None when unknown (one token per event is then assumed for ITL).
    chunk_tokens: list[int] | None = None
    # The prompt length asked for, and whether the prompt was built to exactly that many
    # tokens ("exact", checked with the endpoint's tokenizer) or estimated ("approximate").
    n_in_target: int | None = None
    prompt_length: str | None = None
    # Prompt tokens the server served from its prefix cache (usage.prompt_tokens_details.
    # cached_tokens, or the engine's own count); None when it did not say.
    cached_tokens: int | None = None
    # The engine's own timings of this request; None when it reports none.
    server: ServerTimings | None = None
    # How long it waited for a slot under the level's cap on requests in flight
    # (load.max_concurrency): part of its queue delay that the plan, not the client, caused.
    # None when the level had no cap.
    cap_wait: float | None = None
    # Reasoning models: the output tokens that were reasoning (usage's
    # completion_tokens_details.reasoning_tokens, else counted from the events of reasoning
    # text before the answer), where they came from ("usage" or "events"), and the arrival of
    # the first reasoning event; None when the request showed no reasoning.
    n_reasoning: int | None = None
    reasoning_source: str | None = None
    t_first_reasoning: float | None = None
    # The model it asked for, when the workload spreads requests over several
    # (workload.models); None: the endpoint's.
    model: str | None = None
    # Tool calls and structured answers (workload.features tools, structured), judged after the
    # level: calls made and how many were valid, whether the answer matched its schema, and
    # why what was not valid was not (cut_short, not_json, schema, unknown_tool). None: not judged.
    tool_calls: int | None = None
    tool_calls_valid: int | None = None
    structured_valid: bool | None = None
    invalid_reasons: list[str] | None = None
    # Images it carried (workload.features image) and their prompt tokens where usage said
    # (prompt_tokens_details.image_tokens); None: none sent, or not said.
    images: int | None = None
    image_tokens: int | None = None

    @property
    def n_answer(self) -> int:
        """Output tokens that were the answer (content and tool calls): n_out - n_reasoning."""
        return max(0, self.n_out - (self.n_reasoning or 0))

    @property
    def ttfr(self) -> float | None:
        """Time to first reasoning token: its event's arrival - t_send."""
        return None if self.t_first_reasoning is None else self.t_first_reasoning - self.t_send

    @property
    def succeeded(self) -> bool:
        """2xx, a properly ended stream and at least one token (docs/figures.md)."""
        return self.error_class is None

    @property
    def ttft(self) -> float | None:
        """t_first - t_send."""
        return self.chunk_times[0] - self.t_send if self.chunk_times else None

    @property
    def ttfo(self) -> float | None:
        """Time to first output: first event with visible content - t_send (TTFT counts
        reasoning text too, so the two differ only for reasoning models)."""
        return None if self.t_first_content is None else self.t_first_content - self.t_send

    def itl_gaps(self) -> tuple[list[float], list[int]]:
        """Per-token inter-token latencies and their weights (docs/figures.md ITL).

        Each gap between consecutive content events is recorded once; when the later event
        carried k > 1 tokens (known from continuous usage) it counts k times at gap / k.
        """
        c = self.chunk_times
        gaps = [b - a for a, b in itertools.pairwise(c)]
        k = self.chunk_tokens
        if not k or len(k) != len(c):
            return gaps, [1] * len(gaps)
        weights = [max(1, n) for n in k[1:]]
        return [g / w for g, w in zip(gaps, weights, strict=True)], weights

    @property
    def ttfb(self) -> float | None:
        """First byte of the body - t_send."""
        return None if self.t_first_byte is None else self.t_first_byte - self.t_send

    @property
    def e2e(self) -> float | None:
        """t_end - t_send."""
        return None if self.t_end is None else self.t_end - self.t_send

    @property
    def tpot(self) -> float | None:
        """(t_last - t_first) / (n_out - 1), first token excluded.

        Undefined below 2 tokens, when all text came in one event, and when all its events
        came in one read (t_last = t_first): nothing to time, not a time of zero.
        """
        if self.n_out < 2 or len(self.chunk_times) < 2:
            return None
        span = self.chunk_times[-1] - self.chunk_times[0]
        if span <= 0.0:
            return None
        return span / (self.n_out - 1)

    @property
    def queue_delay(self) -> float:
        """t_send - t_sched: how late it went out against its schedule."""
        return self.t_send - self.t_sched

    @property
    def send_late(self) -> float:
        """The client's own lateness: queue delay less the wait for a slot under the level's
        cap on requests in flight (a wait the plan asked for)."""
        return self.t_send - self.t_sched - (self.cap_wait or 0.0)


_NO_STREAM = "an embeddings request returns one JSON body and no generated tokens"
#: What an embeddings run leaves null, and why (RunFigures.not_measured).
EMBEDDINGS_NOT_MEASURED: Mapping[str, str] = {
    "ttft_ms": f"{_NO_STREAM}: no first token to time (e2e_ms is its latency)",
    "ttfo_ms": f"{_NO_STREAM}: no first token to time (e2e_ms is its latency)",
    "tpot_ms": f"{_NO_STREAM}: no output tokens",
    "itl_ms": f"{_NO_STREAM}: no token events",
    "per_user_tokens_per_s": f"{_NO_STREAM}: no output tokens",
    "output_tokens_per_s": f"{_NO_STREAM}: throughput is input_tokens_per_s and requests_per_s",
}


def distribution(
    values: Sequence[float] | np.ndarray, weights: Sequence[int] | np.ndarray | None = None
) -> dict[str, float | int | None]:
    """count, mean, std (population), min, percentiles (linear interpolation), max.

    Integer `weights` count each value that many times (a gap that carried k tokens stands
    for k per-token latencies), so `count` is then the sum of the weights; all-one weights
    give exactly the unweighted figures.
    """
    arr = np.asarray(values, dtype=np.float64)
    if weights is not None:
        w = np.asarray(weights, dtype=np.int64)
        if w.shape != arr.shape or (w.size and w.min() < 0):
            raise ValueError("weights must be non-negative integers, one per value")
        if w.size and (w != 1).any():
            arr = np.repeat(arr, w)
    if arr.size == 0:
        return {k: (0 if k == "count" else None) for k in STAT_KEYS}
    pct = np.percentile(arr, list(_PERCENTILES.values()))
    out: dict[str, float | int | None] = {
        "count": int(arr.size),
        "mean": float(arr.mean()),
        "std": float(arr.std()),
        "min": float(arr.min()),
    }
    out.update({k: float(v) for k, v in zip(_PERCENTILES, pct, strict=True)})
    out["max"] = float(arr.max())
    return out


def _ms(values: Iterable[float | None]) -> list[float]:
    return [v * 1000.0 for v in values if v is not None]


def inflight_mean(timings: Sequence[RequestTiming], start: float, stop: float) -> float:
    """Time-weighted number of requests in flight over [start, stop]."""
    if stop <= start:
        return 0.0
    total = 0.0
    for t in timings:
        end = t.t_end if t.t_end is not None else stop
        overlap = min(end, stop) - max(t.t_send, start)
        if overlap > 0:
            total += overlap
    return total / (stop - start)


def _rate(times: Sequence[float]) -> float | None:
    """(n - 1) / (last - first): events per second over their own span; None below 2 events."""
    if len(times) < 2:
        return None
    span = max(times) - min(times)
    return (len(times) - 1) / span if span > 0 else None


def send_rate(timings: Sequence[RequestTiming]) -> float | None:
    """Measured sends per second: (n - 1) / (last t_send - first t_send) over `timings`.

    n - 1 gaps fit between n sends, so a client that sends exactly every 1/r seconds scores
    exactly r, however few requests there were. None below two sends.
    """
    return _rate([t.t_send for t in timings])


def measured_window(timings: Sequence[RequestTiming]) -> tuple[float, float] | None:
    """The measured window: first send to last end of the measured (not warm-up) requests,
    failed ones included (docs/figures.md); (start, start) when none has ended, None when there
    are no measured requests."""
    start: float | None = None
    end: float | None = None
    for t in timings:
        if t.warmup:
            continue
        if start is None or t.t_send < start:
            start = t.t_send
        if t.t_end is not None and (end is None or t.t_end > end):
            end = t.t_end
    if start is None:
        return None
    return start, start if end is None else end


def tokens_in_window(
    timings: Sequence[RequestTiming], start: float, stop: float
) -> tuple[float, float]:
    """Output and input tokens that arrived inside [start, stop], from every request given
    (warm-up and failed ones too: what the server produced for this client; docs/figures.md).

    Output tokens are placed at their events' arrival: an event carries its continuous-usage
    count when every event said (tokens counted after the last event with text, in events
    without any, arrive with that last one), else the request's n_out spread evenly over its
    events. A
    request's prompt tokens are placed at its first event (the end of its prefill); a request
    that got no event placed none, unless it succeeded without any (an embeddings request:
    one body, no tokens out), whose prompt tokens are placed at its end.
    """
    out = 0.0
    inp = 0.0
    for t in timings:
        c = t.chunk_times
        if not c:
            if t.succeeded and t.t_end is not None and start <= t.t_end <= stop:
                inp += t.n_in or 0
            continue
        if start <= c[0] <= stop:
            inp += t.n_in or 0
        if c[0] >= start and c[-1] <= stop:
            out += t.n_out  # the whole response arrived inside the window
            continue
        if c[-1] < start or c[0] > stop:
            continue
        k = t.chunk_tokens
        if k and len(k) == len(c):
            out += sum(n for at, n in zip(c, k, strict=True) if start <= at <= stop)
            if start <= c[-1] <= stop:
                out += t.n_out - sum(k)
        else:
            inside = sum(1 for at in c if start <= at <= stop)
            out += t.n_out * inside / len(c)
    return out, inp


def server_timings_block(ok: Sequence[RequestTiming]) -> dict[str, Any] | None:
    """The engine's own timings of the measured, successful requests beside the client's:
    server prefill and per-token time, and the client-minus-server gaps per request (network,
    waiting in front of the engine, tokenisation and template, client overhead). A large gap
    is flagged with what it means. None when no request carried server timings."""
    pairs = [(t, t.server) for t in ok if t.server is not None]
    if not pairs:
        return None
    reported = [t for t, _ in pairs]
    sources = sorted({server.source for _, server in pairs})
    prefill = [s.prefill_ms for _, s in pairs if s.prefill_ms is not None]
    per_token = [s.per_token_ms for _, s in pairs if s.per_token_ms is not None]
    queue = [s.queue_ms for _, s in pairs if s.queue_ms is not None]
    ttft_gap: list[float] = []
    tpot_gap: list[float] = []
    agree = compared = 0
    for t, server in pairs:
        ttft = t.ttft
        if ttft is not None and server.prefill_ms is not None:
            ttft_gap.append(ttft * 1000.0 - server.prefill_ms)
        tpot = t.tpot
        if tpot is not None and server.per_token_ms is not None and server.per_token_ms > 0:
            tpot_gap.append(tpot * 1000.0 - server.per_token_ms)
        if server.n_out is not None:
            compared += 1
            agree += server.n_out == t.n_out
    block: dict[str, Any] = {
        "source": sources[0] if len(sources) == 1 else "mixed",
        "requests": len(reported),
        "prefill_ms": distribution(prefill),
        "tpot_ms": distribution(per_token),
        "queue_ms": distribution(queue) if queue else None,
        "ttft_gap_ms": distribution(ttft_gap),
        "tpot_gap_ms": distribution(tpot_gap),
        "output_tokens_agree": agree / compared if compared else None,
        "flagged": False,
        "notes": [],
    }
    notes: list[str] = block["notes"]
    ttft_p50 = distribution(_ms(t.ttft for t in reported))["p50"]
    gap_p50 = block["ttft_gap_ms"]["p50"]
    if (
        gap_p50 is not None
        and ttft_p50
        and gap_p50 > max(SERVER_GAP_TTFT_MS, SERVER_GAP_SHARE * float(ttft_p50))
    ):
        notes.append(
            f"TTFT p50 exceeds the server's own prefill time by {gap_p50:.1f} ms "
            f"({gap_p50 / float(ttft_p50):.0%} of TTFT): requests waited in front of the engine "
            "(no free slot or batch), or the network, tokenisation and chat template, or the "
            "client took that long"
        )
    tpot_gap_p50 = block["tpot_gap_ms"]["p50"]
    tpot_server_p50 = block["tpot_ms"]["p50"]
    if (
        tpot_gap_p50 is not None
        and tpot_server_p50
        and abs(tpot_gap_p50) > max(SERVER_GAP_TPOT_MS, SERVER_GAP_SHARE * float(tpot_server_p50))
    ):
        notes.append(
            f"TPOT p50 differs from the server's per-token time by {tpot_gap_p50:+.2f} ms: the "
            "client read events late (see client health) or the server sent tokens in bursts"
        )
    if block["output_tokens_agree"] is not None and block["output_tokens_agree"] < 1.0:
        notes.append(
            f"output token counts equal the server's for {block['output_tokens_agree']:.0%} "
            "of requests"
        )
    block["flagged"] = bool(notes)
    return block


def _read_late(client: Mapping[str, Any]) -> bool:
    """Whether the client read late: its read lag or event-loop lag p99 over the limit."""
    return any(
        (value := client.get(key)) is not None and float(value) > CLIENT_READ_LAG_P99_LIMIT_MS
        for key in ("read_lag_p99_ms", "loop_lag_p99_ms")
    )


def _paused(client: Mapping[str, Any]) -> bool:
    """Whether the client's pauses exposed more of the events than the level's limit."""
    exposure = client.get("pause_exposure")
    return exposure is not None and float(exposure) > _pause_limit(client)


def _pause_limit(client: Mapping[str, Any]) -> float:
    """The pause exposure limit the level is judged by: the one its worker recorded, or the
    default."""
    limit = client.get("pause_exposure_limit")
    return PAUSE_EXPOSURE_LIMIT if limit is None else float(limit)


def adequacy_block(
    *,
    succeeded: int,
    duration_s: float | None,
    error_rate: float | None,
    client_bound: bool,
    client: Mapping[str, Any],
    cache: Mapping[str, Any] | None,
    telemetry_interval_s: float | None = None,
    cache_expected: bool = False,
) -> dict[str, Any]:
    """Whether a level's evidence supports the figures it reports (docs/figures.md, `adequacy`):
    `ok`, and each reason it does not as {"code", "detail"}. Codes: few_requests, short,
    client_bound, rate_not_held, concurrency_not_held, errors, prompt_cache."""
    reasons: list[dict[str, str]] = []

    def reason(code: str, detail: str) -> None:
        reasons.append({"code": code, "detail": detail})

    if succeeded < ADEQUATE_MIN_REQUESTS:
        reason(
            "few_requests",
            f"{succeeded} successful measured requests: a p99 needs at least "
            f"{ADEQUATE_MIN_REQUESTS} (p95 20); raise requests_per_level or duration_s (a "
            "burst: its level)",
        )
    minimum = ADEQUATE_MIN_DURATION_S
    if telemetry_interval_s:
        minimum = max(minimum, ADEQUATE_MIN_TELEMETRY_INTERVALS * telemetry_interval_s)
    if duration_s is None or duration_s < minimum:
        lasted = "no time" if duration_s is None else f"{duration_s:.1f} s"
        reason(
            "short",
            f"the measured window lasted {lasted}, under {minimum:g} s (at least "
            f"{ADEQUATE_MIN_TELEMETRY_INTERVALS} telemetry intervals): give duration_s (a "
            "burst lasts as long as the endpoint takes to drain it: a larger one)",
        )
    if client.get("rate_held") is False:
        reason(
            "rate_not_held",
            "the worker sent below 95% of the scheduled rate: the client, not the server, set "
            "the pace; use load.shards or a lower rate",
        )
    if client.get("concurrency_held") is False:
        reason(
            "concurrency_not_held",
            "fewer than 95% of the users had a request in flight: the client could not keep "
            "the level's concurrency",
        )
    # A rate or concurrency not held already says the sending side was late; a late reading
    # side is its own reason still (its lag is in every latency figure).
    short = client.get("capacity_short")
    if short:
        reason(
            "client_capacity",
            f"decided before the level ran: {short}; its figures may include the load "
            "generator's own lateness: run more workers (`infercost worker --concurrency N`) "
            "or lower the level",
        )
    paused = _paused(client)
    if paused:
        gc = client.get("gc") or {}
        reason(
            "client_paused",
            f"{float(client.get('pause_exposure') or 0.0):.1%} of the level's events were "
            f"stamped during or just after pauses of the load generator longer than "
            f"{client.get('pause_bound_ms')} ms (limit {_pause_limit(client):.0%}): they could "
            f"be more than {client.get('pause_bound_ms')} ms late, enough to move the p99 of "
            f"the figures in client.spoils (longest loop stall "
            f"{client.get('loop_stall_max_ms')} ms, longest garbage collection "
            f"{gc.get('max_ms')} ms); use load.shards or a lower level",
        )
    # Reading figures spoilt by lag (not by pauses alone, which have their reason above).
    read_spoilt = any(figure in client.get("spoils", ()) for figure in SPOILED_BY_READING)
    lagged = read_spoilt and (_read_late(client) or not (paused or short))
    sent = client_bound and any(f in client.get("spoils", ()) for f in SPOILED_BY_SENDING)
    if lagged or (sent and not any(r["code"].endswith("_held") for r in reasons)):
        reason(
            "client_bound",
            "queue delay (less waits for a load.max_concurrency slot), read lag or event-loop "
            "lag p99 above 10 ms: the load generator was late, so the figures in "
            "client.spoils include its own delay; use load.shards or a lower level",
        )
    if error_rate is not None and error_rate > ADEQUATE_MAX_ERROR_RATE:
        reason(
            "errors",
            f"{error_rate:.0%} of requests failed (limit {ADEQUATE_MAX_ERROR_RATE:.0%}): the "
            "figures describe the requests that got through",
        )
    share = None if cache is None else cache.get("share")
    if not cache_expected and share is not None and share > ADEQUATE_MAX_CACHE_SHARE:
        reason(
            "prompt_cache",
            f"{share:.0%} of prompt tokens came from the server's prefix cache: TTFT reflects "
            "cached prefill, not this workload's",
        )
    return {"ok": not reasons, "reasons": reasons}


def inflight_max(timings: Sequence[RequestTiming]) -> int:
    """The most requests in flight at once, t_send to t_end, as the client saw them (a
    request that never ended counts to the last end)."""
    last = max((t.t_end for t in timings if t.t_end is not None), default=None)
    events: list[tuple[float, int]] = []
    for t in timings:
        end = t.t_end if t.t_end is not None else last
        if end is None or end < t.t_send:
            end = t.t_send
        events.append((t.t_send, 1))
        events.append((end, -1))
    # At equal times an end comes before a start: a slot freed and taken is not two at once.
    events.sort(key=lambda e: (e[0], e[1]))
    most = running = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def concurrency_cap_block(
    timings: Sequence[RequestTiming], max_concurrency: int | None
) -> dict[str, Any] | None:
    """A capped level's `concurrency_cap` block (load.max_concurrency on a rate or burst
    level): the cap, whether in-flight requests reached it (client-side count, warm-up
    included), how many measured requests waited for a slot and what share, and their
    waits; None without a cap. Those waits are part of queue_delay_ms, never of the
    client's own lateness (client.send_late_p99_ms)."""
    if max_concurrency is None:
        return None
    measured = [t for t in timings if not t.warmup]
    waits = [t.cap_wait for t in measured if t.cap_wait]
    most = inflight_max(timings)
    return {
        "max_concurrency": max_concurrency,
        "reached": most >= max_concurrency,
        "inflight_max": most,
        "waited": len(waits),
        "waited_share": len(waits) / len(measured) if measured else None,
        "wait_ms": distribution(_ms(waits)),
    }


def cache_block(ok: Sequence[RequestTiming]) -> dict[str, Any] | None:
    """Prompt tokens served from the prefix cache over the measured, successful requests that
    reported it (usage.prompt_tokens_details.cached_tokens or the engine's own count); None
    when none did. A high share makes TTFT incomparable with uncached runs (docs/figures.md)."""
    reported = [t for t in ok if t.cached_tokens is not None]
    if not reported:
        return None
    prompt = sum(t.n_in or 0 for t in reported)
    cached = sum(t.cached_tokens or 0 for t in reported)
    return {
        "requests": len(reported),
        "requests_with_hits": sum(1 for t in reported if t.cached_tokens),
        "prompt_tokens": prompt,
        "cached_prompt_tokens": cached,
        "share": cached / prompt if prompt else None,
    }


def reasoning_block(
    ok: Sequence[RequestTiming], output_tokens_per_s: float | None
) -> tuple[dict[str, Any], float | None, float | None]:
    """Reasoning and answer tokens of the measured, successful requests (docs/figures.md, as
    docs/figures.md states it): per request, how many of each; the share of output that was
    reasoning; and, from it, the reasoning and answer tokens per second, which add up to
    output_tokens_per_s. Also (reasoning/s, answer/s) for the run's columns."""
    reasoning = [t.n_reasoning or 0 for t in ok]
    answer = [t.n_answer for t in ok]
    out = sum(t.n_out for t in ok)
    share = sum(reasoning) / out if out else None
    sources = Counter(t.reasoning_source for t in ok if t.reasoning_source is not None)
    source = None if not sources else next(iter(sources)) if len(sources) == 1 else "mixed"
    reasoning_per_s = answer_per_s = None
    if output_tokens_per_s is not None and share is not None:
        reasoning_per_s = output_tokens_per_s * share
        answer_per_s = output_tokens_per_s - reasoning_per_s
    block = {
        "requests_with_reasoning": sum(1 for n in reasoning if n),
        "reasoning_tokens": distribution(reasoning),
        "answer_tokens": distribution(answer),
        "reasoning_share": share,
        "reasoning_tokens_per_s": reasoning_per_s,
        "answer_tokens_per_s": answer_per_s,
        "source": source,
    }
    return block, reasoning_per_s, answer_per_s


def models_block(
    timings: Sequence[RequestTiming], window: tuple[float, float] | None
) -> list[dict[str, Any]]:
    """Each model's figures (workload.models), in the order the models first appear by seq:
    its measured requests and failures, TTFT, TPOT and E2E statistics, and its tokens and
    requests per second over the run's own window and duration, so that the models' counts
    and rates add up to the run's. `token_share` (its input and output tokens in the window
    / all of them) splits the run's cost between the models."""
    by_model: dict[str, list[RequestTiming]] = {}
    for t in sorted(timings, key=lambda t: t.seq):
        if t.model is not None:
            by_model.setdefault(t.model, []).append(t)
    duration = None if window is None or window[1] <= window[0] else window[1] - window[0]
    tokens = {
        name: (0.0, 0.0) if window is None else tokens_in_window(group, *window)
        for name, group in by_model.items()
    }
    all_tokens = sum(out + inp for out, inp in tokens.values())

    def per_s(amount: float) -> float | None:
        return None if duration is None else amount / duration

    blocks = []
    for name, group in by_model.items():
        measured = [t for t in group if not t.warmup]
        ok = [t for t in measured if t.succeeded]
        errors = Counter(t.error_class for t in measured if t.error_class is not None)
        out, inp = tokens[name]
        blocks.append(
            {
                "model": name,
                "requests": {
                    "total": len(measured),
                    "succeeded": len(ok),
                    "failed": len(measured) - len(ok),
                    "errors": {cls: errors[cls] for cls in ERROR_CLASSES if errors[cls]},
                },
                "ttft_ms": distribution(_ms(t.ttft for t in ok)),
                "tpot_ms": distribution(_ms(t.tpot for t in ok)),
                "e2e_ms": distribution(_ms(t.e2e for t in ok)),
                "output_tokens_per_s": per_s(out),
                "input_tokens_per_s": per_s(inp),
                "requests_per_s": per_s(len(ok)),
                "error_rate": (len(measured) - len(ok)) / len(measured) if measured else None,
                "token_share": (out + inp) / all_tokens if all_tokens else None,
            }
        )
    return blocks


#: The columns of a model's row in `run_models` besides run and model, each read from its
#: block in a run's `models` (models_block): (key, statistic), or (key, None) for a number.
MODEL_COLUMNS: dict[str, tuple[str, str | None]] = {
    "ttft_p50_ms": ("ttft_ms", "p50"),
    "ttft_p95_ms": ("ttft_ms", "p95"),
    "tpot_p50_ms": ("tpot_ms", "p50"),
    "tpot_p95_ms": ("tpot_ms", "p95"),
    "e2e_p50_ms": ("e2e_ms", "p50"),
    "e2e_p95_ms": ("e2e_ms", "p95"),
    "output_tokens_per_s": ("output_tokens_per_s", None),
    "input_tokens_per_s": ("input_tokens_per_s", None),
    "requests_per_s": ("requests_per_s", None),
    "error_rate": ("error_rate", None),
    "token_share": ("token_share", None),
}


def model_columns(blocks: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The `run_models` rows of a run's `models` blocks (none for a run of one model), each
    figure as the block holds it, null where it is not there."""
    rows = []
    for block in blocks or ():
        requests = block.get("requests") or {}
        row: dict[str, Any] = {
            "model": block["model"],
            "requests_total": int(requests.get("total") or 0),
            "requests_succeeded": int(requests.get("succeeded") or 0),
        }
        for column, (key, stat) in MODEL_COLUMNS.items():
            value = block.get(key)
            if stat is not None:
                value = value.get(stat) if isinstance(value, Mapping) else None
            row[column] = None if value is None else float(value)
        rows.append(row)
    return rows


def tools_block(ok: Sequence[RequestTiming]) -> dict[str, Any] | None:
    """Tool calls of the measured, successful requests whose answers were judged: calls made,
    the share valid (arguments that parse as JSON and match the named tool's schema), answers
    without any call, and the reasons of the invalid ones. None when none was judged."""
    judged = [t for t in ok if t.tool_calls is not None]
    if not judged:
        return None
    calls = sum(t.tool_calls or 0 for t in judged)
    valid = sum(t.tool_calls_valid or 0 for t in judged)
    # A request judged as a structured answer (it made no call) has that answer's reasons.
    reasons = Counter(
        r for t in judged if t.structured_valid is None for r in t.invalid_reasons or ()
    )
    return {
        "requests": len(judged),
        "calls": calls,
        "valid_calls": valid,
        "valid_share": valid / calls if calls else None,
        "requests_without_call": sum(1 for t in judged if not t.tool_calls),
        "invalid": dict(sorted(reasons.items())),
    }


def structured_block(ok: Sequence[RequestTiming]) -> dict[str, Any] | None:
    """Structured answers of the measured, successful requests: how many, the share valid
    against the schema asked for, why the others were not (cut_short, not_json, schema).
    None when none was judged."""
    judged = [t for t in ok if t.structured_valid is not None]
    if not judged:
        return None
    valid = sum(1 for t in judged if t.structured_valid)
    reasons = Counter(r for t in judged if not t.structured_valid for r in t.invalid_reasons or ())
    return {
        "answers": len(judged),
        "valid": valid,
        "valid_share": valid / len(judged),
        "invalid": dict(sorted(reasons.items())),
    }


def image_block(ok: Sequence[RequestTiming]) -> dict[str, Any] | None:
    """Requests with images among the measured, successful ones: images sent, their prompt
    tokens where usage reported them (statistics per request, and their share of the prompt
    tokens), and TTFT, which holds their prefill. None when no request carried images."""
    sent = [t for t in ok if t.images]
    if not sent:
        return None
    reported = [t for t in sent if t.image_tokens is not None]
    prompt = sum(t.n_in or 0 for t in reported)
    image_tokens = sum(t.image_tokens or 0 for t in reported)
    return {
        "requests": len(sent),
        "images": sum(t.images or 0 for t in sent),
        "requests_reporting_tokens": len(reported),
        "image_tokens": distribution([t.image_tokens or 0 for t in reported]),
        "image_token_share": image_tokens / prompt if prompt else None,
        "ttft_ms": distribution(_ms(t.ttft for t in sent)),
    }


def _slo_limits(slo: Mapping[str, Mapping[str, float]] | None) -> dict[str, float]:
    """The per-request limit of each SLO figure: the loosest limit stated for it."""
    if not slo:
        return {}
    return {metric: max(limits.values()) for metric, limits in slo.items() if limits}


def meets_slo(t: RequestTiming, limits: Mapping[str, float]) -> bool:
    """A request meets the SLO when it succeeded and its own TTFT, TPOT and E2E are in limits."""
    if not t.succeeded:
        return False
    for metric, value in (("ttft_ms", t.ttft), ("tpot_ms", t.tpot), ("e2e_ms", t.e2e)):
        limit = limits.get(metric)
        if limit is not None and value is not None and value * 1000.0 > limit:
            return False
    return True


@dataclass(frozen=True, slots=True)
class RunFigures:
    """Everything docs/figures.md defines for one load level, over its measured window."""

    requests_total: int
    requests_succeeded: int
    requests_failed: int
    errors: dict[str, int]
    duration_s: float | None
    count_source: str | None
    output_tokens_per_s: float | None
    input_tokens_per_s: float | None
    total_tokens_per_s: float | None
    requests_per_s: float | None
    mean_concurrency: float | None
    error_rate: float | None
    goodput_rps: float | None
    goodput_output_tokens_per_s: float | None
    slo_attainment: float | None
    slo_passed: bool | None
    client_bound: bool
    client: dict[str, Any]
    stats: dict[str, dict[str, float | int | None]]
    # "exact" when every measured prompt had exactly its drawn token count, "approximate"
    # when none was checked, "mixed" otherwise; None when nothing said.
    prompt_lengths: str | None = None
    # The engine's own timings beside the client's (server_timings_block), and prompt tokens
    # served from its prefix cache (cache_block); None where the engine reported none.
    server_timings: dict[str, Any] | None = None
    cache: dict[str, Any] | None = None
    # Whether the level's evidence supports its figures (adequacy_block).
    adequacy: dict[str, Any] | None = None
    # Figures that do not exist for this kind of run, each with the reason (embeddings:
    # the streaming figures); None when every figure applies.
    not_measured: dict[str, str] | None = None
    # A level with a cap on requests in flight (load.max_concurrency): whether it was
    # reached and how often requests waited (concurrency_cap_block); None without a cap.
    concurrency_cap: dict[str, Any] | None = None
    # Reasoning models (workload.features "reasoning", or reasoning seen): reasoning and
    # answer tokens apart (reasoning_block); the rates are columns of their own.
    reasoning: dict[str, Any] | None = None
    reasoning_tokens_per_s: float | None = None
    answer_tokens_per_s: float | None = None
    # Several models on one endpoint (workload.models): each model's figures (models_block);
    # None when every request asked for the endpoint's model.
    models: list[dict[str, Any]] | None = None
    # Tool calls and structured answers judged (tools_block, structured_block), and their
    # valid shares as columns of their own; None where none was judged.
    tools: dict[str, Any] | None = None
    structured: dict[str, Any] | None = None
    tool_calls_valid_share: float | None = None
    structured_valid_share: float | None = None
    # Requests with images (image_block); None when none carried any.
    image: dict[str, Any] | None = None

    def stat(self, name: str, key: str) -> float | None:
        """One statistic of one distribution, e.g. stat("ttft_ms", "p50")."""
        value = self.stats[name][key]
        return None if value is None else float(value)


def summarize(  # noqa: PLR0915 - one figure after another, each defined once
    timings: Sequence[RequestTiming],
    *,
    target_concurrency: int | None = None,
    target_rate: float | None = None,
    slo: Mapping[str, Mapping[str, float]] | None = None,
    client_cpu_util: float | None = None,
    telemetry_interval_s: float | None = None,
    cache_expected: bool = False,
    reading: Mapping[str, Any] | None = None,
    embeddings: bool = False,
    max_concurrency: int | None = None,
    capacity_short: str | None = None,
    reasoning: bool = False,
) -> RunFigures:
    """The run's figures from its requests; warm-up requests are excluded from every figure.

    Give `target_concurrency` for a closed-loop level (client health then says whether the
    concurrency was held), or `target_rate` (requests/s) for an open-loop one: then
    `send_rate` is the measured sends per second over the measured requests, and `rate_held`
    is true when it is at least 95% of the rate their own schedule asked for,
    (n - 1) / (last t_sched - first t_sched). That is the target rate exactly for constant
    arrivals; for random arrivals it removes the sampling noise of a short schedule, so only
    the client's own lateness can fail it.

    `reading` is the load client's reading-side health (workers/loadgen/health.py figures:
    read_lag_*_ms, loop_lag_*_ms, cpu_util_peak, resent), copied into `client`; a read or
    loop lag p99 above 10 ms makes the run client-bound too. `client.spoils` names the
    figures the client's lateness spoils.

    `embeddings` marks a level of embeddings requests (one JSON body each, no tokens out):
    its streaming figures and output throughput are null, and `not_measured` says why.

    `max_concurrency` is the level's cap on requests in flight (load.max_concurrency), if
    any: a request's wait for a slot (`cap_wait`) is queue delay the plan asked for, so the
    client is judged on the rest (`send_late`: client.send_late_p99_ms over 10 ms is
    client-bound) and on the rate of its effective schedule (t_sched + cap_wait), and the
    `concurrency_cap` block says whether the cap was reached and how often requests waited.
    Without a cap send_late is the queue delay, so nothing changes.

    `reasoning` (workload.features "reasoning") asks for the `reasoning` block and its rates
    even where no request reasoned (they then say 0); without it they come only when some
    request sent reasoning text or usage counted reasoning tokens.

    `capacity_short` says why the level got fewer load-generating processes than its
    expected events needed (load.shards "auto", infercost/shards/auto.py): decided before it
    ran, it makes the level client-bound whatever the client's own figures say, with the
    reason `client_capacity`.
    """
    if target_concurrency and target_rate:
        raise ValueError("a level has a target concurrency or a target rate, not both")
    measured = [t for t in timings if not t.warmup]
    ok = [t for t in measured if t.succeeded]
    errors = Counter(t.error_class for t in measured if t.error_class is not None)

    window = measured_window(measured)
    duration = None if window is None or window[1] <= window[0] else window[1] - window[0]

    def per_s(amount: float) -> float | None:
        return None if duration is None else amount / duration

    out_tokens, in_tokens = (0.0, 0.0) if window is None else tokens_in_window(timings, *window)
    limits = _slo_limits(slo)
    meeting = [t for t in ok if meets_slo(t, limits)]

    itl: list[float] = []
    itl_weights: list[int] = []
    for t in ok:
        values, weights = t.itl_gaps()
        itl.extend(values)
        itl_weights.extend(weights)
    tpot = [t.tpot for t in ok]
    stats = {
        "ttft_ms": distribution(_ms(t.ttft for t in ok)),
        "ttfo_ms": distribution(_ms(t.ttfo for t in ok)),
        "ttfr_ms": distribution(_ms(t.ttfr for t in ok)),
        "tpot_ms": distribution(_ms(tpot)),
        "itl_ms": distribution(_ms(itl), itl_weights),
        "e2e_ms": distribution(_ms(t.e2e for t in ok)),
        "queue_delay_ms": distribution(_ms(t.queue_delay for t in measured)),
        "per_user_tokens_per_s": distribution([1.0 / v for v in tpot if v]),
    }

    slo_passed: bool | None = None
    if limits and slo:
        slo_passed = all(
            stats[metric][key] is not None and float(stats[metric][key] or 0.0) <= limit
            for metric, by_stat in slo.items()
            for key, limit in by_stat.items()
        )

    sources = Counter(t.count_source for t in (ok or measured))
    count_source = None if not sources else next(iter(sources)) if len(sources) == 1 else "mixed"
    shapes = Counter(t.prompt_length for t in measured if t.prompt_length is not None)
    prompt_lengths = None if not shapes else next(iter(shapes)) if len(shapes) == 1 else "mixed"

    late_p99 = distribution(_ms(t.send_late for t in measured))["p99"]
    held: bool | None = None
    inflight: float | None = None
    sent: float | None = None
    rate_held: bool | None = None
    if (target_concurrency or target_rate) and measured:
        first_send = min(t.t_send for t in measured)
        last_send = max(t.t_send for t in measured)
        if last_send > first_send:
            inflight = inflight_mean(timings, first_send, last_send)
    if target_concurrency and inflight is not None:
        held = inflight >= CONCURRENCY_HELD_SHARE * min(target_concurrency, len(timings))
    if target_rate and measured:
        sent = send_rate(measured)
        # The schedule the client had to keep: each request's due time, or later when it
        # waited for a slot under the cap.
        scheduled = _rate([t.t_sched + (t.cap_wait or 0.0) for t in measured])
        if sent is not None and scheduled is not None:
            rate_held = sent >= RATE_HELD_SHARE * scheduled
    sent_late = bool(
        (late_p99 is not None and float(late_p99) > CLIENT_QUEUE_DELAY_P99_LIMIT_MS)
        or held is False
        or rate_held is False
    )
    reading = reading or {}
    read_late = _read_late(reading) or _paused(reading) or capacity_short is not None
    client_bound = sent_late or read_late

    client = {
        "queue_delay_p99_ms": stats["queue_delay_ms"]["p99"],
        "send_late_p99_ms": late_p99,
        "cpu_util": client_cpu_util,
        "inflight_mean": inflight,
        "concurrency_held": held,
        "send_rate": sent,
        "rate_held": rate_held,
        **reading,
        **({} if capacity_short is None else {"capacity_short": capacity_short}),
        "spoils": [
            *(SPOILED_BY_SENDING if sent_late else ()),
            *(SPOILED_BY_READING if read_late else ()),
        ],
    }
    error_rate = (len(measured) - len(ok)) / len(measured) if measured else None
    cache = cache_block(ok)
    output_per_s = None if embeddings else per_s(out_tokens)
    tools, structured = tools_block(ok), structured_block(ok)
    thinking: tuple[dict[str, Any] | None, float | None, float | None] = (None, None, None)
    if reasoning or any(t.n_reasoning for t in ok):
        thinking = reasoning_block(ok, output_per_s)
    return RunFigures(
        requests_total=len(measured),
        requests_succeeded=len(ok),
        requests_failed=len(measured) - len(ok),
        errors={cls: errors[cls] for cls in ERROR_CLASSES if errors[cls]},
        duration_s=duration,
        count_source=count_source,
        output_tokens_per_s=output_per_s,
        input_tokens_per_s=per_s(in_tokens),
        total_tokens_per_s=per_s(out_tokens + in_tokens),
        requests_per_s=per_s(len(ok)),
        mean_concurrency=per_s(sum(t.e2e or 0.0 for t in measured if t.t_end is not None)),
        error_rate=error_rate,
        goodput_rps=per_s(len(meeting)),
        goodput_output_tokens_per_s=None if embeddings else per_s(sum(t.n_out for t in meeting)),
        slo_attainment=len(meeting) / len(measured) if measured else None,
        slo_passed=slo_passed,
        client_bound=client_bound,
        client=client,
        stats=stats,
        prompt_lengths=prompt_lengths,
        server_timings=server_timings_block(ok),
        cache=cache,
        adequacy=adequacy_block(
            succeeded=len(ok),
            duration_s=duration,
            error_rate=error_rate,
            client_bound=client_bound,
            client=client,
            cache=cache,
            telemetry_interval_s=telemetry_interval_s,
            cache_expected=cache_expected,
        ),
        not_measured=dict(EMBEDDINGS_NOT_MEASURED) if embeddings else None,
        concurrency_cap=concurrency_cap_block(timings, max_concurrency),
        reasoning=thinking[0],
        reasoning_tokens_per_s=thinking[1],
        answer_tokens_per_s=thinking[2],
        models=models_block(timings, window) if any(t.model for t in timings) else None,
        tools=tools,
        structured=structured,
        tool_calls_valid_share=None if tools is None else tools["valid_share"],
        structured_valid_share=None if structured is None else structured["valid_share"],
        image=image_block(ok),
    )
